"""The summary of any agent's session at any cut: the one engine
(:func:`~.compactor.summarize_span`) over a span of a Claude Code, Codex, Catui, Fabro or Pi
session, with short addresses, laid out as the summary (:mod:`.render`).

:func:`summarize_session` reads a file with its agent's reader, takes the active branch up
to a cut (``until``: an entry's address or line address; else the whole branch) and
streams it into the ledgers. :func:`readdressed` shows every address of the result as a line
address (``L877``) for an agent whose entries' own ids are not short: what ``expand``
accepts back for any agent (docs/addresses.md). Pi's own compaction (where Pi cuts, the
state an earlier compaction carries) stays :func:`~.files.compact_session`'s; this is the
same engine's view of a span, for any reader of a session at a cut (the CLI, a web page,
the handoff packet).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..errors import UsageError, clipped
from .compactor import SpanState, summarize_span
from .details import Coverage, CumulativeState, LiveRange
from .ledger import Item, Ledger
from .render import render_summary
from .text import plain_ids

if TYPE_CHECKING:
    from ..session import Entry, Session
    from .files import SessionCompaction
    from .prepare import CompactionSettings


def readdressed(summarized: SpanState, addresses: Mapping[str, str]) -> SpanState:
    """``summarized`` with each entry id that ``addresses`` maps (its line address, from
    :func:`~fabric_memory.sources.reader.line_addresses`) replaced, an operation's or a
    phase's (``<id>/3``) too; other addresses as they are."""
    if not addresses:
        return summarized

    def to(address: str | None) -> str | None:
        if not address:
            return address
        shown = addresses.get(address)
        if shown is not None:
            return shown
        head, slash, rest = address.partition("/")
        shown = addresses.get(head) if slash else None
        return shown + slash + rest if shown is not None else address

    def item(value: Item) -> Item:
        return Item(to(value.first) or "", to(value.last) or "", value.text, value.key,
                    value.tags)

    def ledger(value: Ledger) -> Ledger:
        return Ledger(tuple(map(item, value.head)), tuple(map(item, value.tail)),
                      value.dropped, to(value.dropped_first), to(value.dropped_last))

    state = summarized.state
    coverage = state.coverage
    moved = CumulativeState(
        Coverage(to(coverage.first), to(coverage.last), coverage.entries),
        state.counts,
        tuple(map(item, state.status)),
        {name: ledger(value) for name, value in state.ledgers.items()},
    )
    live = summarized.live
    return SpanState(moved, LiveRange(to(live.first), to(live.last), live.entries,
                                      to(live.first_kept_entry_id) or ""))


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """A session summarized up to a cut: the state every rendering lays out, and the
    summary text."""

    path: str
    session_id: str
    agent: str
    until: str | None
    """The last summarized entry's address (None: the branch was empty)."""
    summarized: SpanState
    summary: str
    note: str | None = None
    """Said when ``until`` named no entry and the cut moved to the one before it."""

    def to_json(self) -> dict[str, Any]:
        live = self.summarized.live
        value: dict[str, Any] = {
            "path": self.path, "sessionId": self.session_id, "agent": self.agent,
            "until": self.until, "entries": live.entries, "first": live.first,
            "last": live.last, "firstKept": live.first_kept_entry_id or None,
            "summary": self.summary, "state": self.summarized.state.to_json(),
        }
        if self.note:
            value["note"] = self.note
        return value

    def describe(self) -> str:
        live = self.summarized.live
        lines = [self.summary.rstrip("\n"), "",
                 f"{self.agent} session {self.session_id}: {live.entries} entries summarized "
                 f"[{live.first} ... {live.last}], {len(self.summary.encode())} bytes"]
        if self.note:
            lines.append(f"note: {self.note}")
        return "\n".join(lines)


def session_addresses(session: Session) -> dict[str, str]:
    """The session's entry ids → their line addresses, for an agent whose lines are not its
    entries (none for Pi's format, whose ids are short and its own, nor for an agent whose
    entries are not lines that stay put: ``SourceReader.by_line``)."""
    from ..sources.reader import LINE_AGENTS, line_addresses
    from ..sources.registry import by_line

    if session.agent in LINE_AGENTS or not by_line(session.agent):
        return {}  # Pi's ids are short and its own; lines that move are no address
    return line_addresses(session.entries)


def cut_at(branch: Sequence[Entry], until: str, addresses: Mapping[str, str],
           path: str) -> tuple[int, str | None]:
    """How many entries of ``branch`` the cut ``until`` keeps in the span (through the entry
    it names, by its id or line address) and a note when it names no entry of the branch
    but a line between them (the span then ends at the entry before that line);
    :class:`~fabric_memory.errors.UsageError` otherwise."""
    from ..sources.reader import LINE_ADDRESS

    for at, entry in enumerate(branch):
        if until in (entry.id, addresses.get(entry.id)):
            return at + 1, None
    line = LINE_ADDRESS.fullmatch(until)
    if line is not None and not line.group(2) and branch:
        wanted = int(line.group(1))
        before = [at for at, entry in enumerate(branch) if entry.line <= wanted]
        if before:
            last = branch[before[-1]]
            shown = addresses.get(last.id, last.id)
            return before[-1] + 1, (f"--until {until} names no entry of the active branch; "
                                    f"the span ends at the entry before it, {shown}")
    raise UsageError(f"--until {clipped(until)}: no entry of {path}'s active branch has that "
                     "address; give an address a summary or `fabric-memory expand` printed "
                     "(e.g. L120)")


def summarize_session(path: str | os.PathLike[str], until: str | None = None) -> SessionSummary:
    """The summary of the session at ``path`` (any agent's) from the start of its active
    branch through ``until`` (an entry's id or line address; None: the whole branch). The
    agent's own compactions on the way are passed over: the span is read from its entries."""
    from ..sources import read_source

    session = read_source(path)
    branch = session.active_branch()
    addresses = session_addresses(session)
    count, note = (len(branch), None) if until is None else cut_at(branch, until, addresses,
                                                                    session.path)
    span = [entry.view for entry in branch[:count]]
    kept = addresses.get(branch[count].id, branch[count].id) if count < len(branch) else ""
    summarized = readdressed(summarize_span(span), addresses)
    summarized = replace(summarized, live=replace(summarized.live, first_kept_entry_id=kept))
    state = summarized.state
    plain = plain_ids([*state.addresses(), kept])
    rendered = render_summary(state, summarized.live, session_id=session.session_id,
                              plain=plain)
    return SessionSummary(session.path, session.session_id, session.agent,
                          summarized.live.last, summarized, rendered.summary, note)


def compact_file(
    path: str | os.PathLike[str],
    settings: CompactionSettings | None = None,
    *,
    until: str | None = None,
    context_window: int | None = None,
    append: bool = False,
) -> SessionCompaction | SessionSummary:
    """``fabric-memory compact``: a Pi session without a cut is compacted as Pi would
    (:func:`~.files.compact_session`, ``append`` to add the entry); a cut (``until``) or
    another agent's session gets the same engine's summary through that cut
    (:func:`summarize_session`), which appends nothing."""
    from ..sources.reader import LINE_AGENTS
    from ..sources.registry import reader_for
    from .files import compact_session

    name = os.fspath(path)
    agent = reader_for(name).name
    if until is None and agent in LINE_AGENTS:
        return compact_session(name, settings, context_window=context_window, append=append)
    if append:
        why = "a summary at a cut (--until)" if agent in LINE_AGENTS else (
            f"a {agent} session")
        raise UsageError(f"{name}: --append writes a Pi compaction entry into a Pi session "
                         f"without --until; {why} is printed, never appended")
    return summarize_session(name, until)
