"""``fabric-memory handoff``: the recovery packet a Claude Code or Codex SessionStart(compact)
hook adds after the host's own compaction.

The host's hook JSON arrives on stdin (``session_id``, ``transcript_path``, ``cwd``,
``hook_event_name``, ``source``; Codex adds ``model`` and ``permission_mode``). The
transcript is read by its agent's reader (:mod:`fabric_memory.sources`), the span the host
just summarized is found (:func:`summarized_span`), the summary engine reads that span
(:func:`fabric_memory.compaction.summarize_span`: the same ledgers a Pi summary carries) and
the packet lays out what the host's LLM summary drops — what is really still open, the
user's own words, exact values and errors, what commands printed, commits, the content
written — each line with a short line address ``fabric-memory expand`` and the MCP
``expand`` tool accept back (the header says the call once), within a byte bound
(:func:`render_packet`).

A hook lives inside its host (:func:`run_handoff`): any error, an unknown format, a
missing transcript, one being written, or the time budget passed means exit 0 and nothing
on stdout (stdout is context to the host); the reason goes to ``handoff.log`` under the
fabric-memory home. The hook never touches the memory index, so it never waits on its
writer; ``expand`` finds a session the index does not hold yet by its id.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import orjson

from .errors import FabricMemoryError, HandoffError, clipped

if TYPE_CHECKING:  # the view and the compaction load when a packet is made
    from .view import EntryView

DEFAULT_MAX_BYTES: Final = 8 * 1024
"""The packet's bound (the whole JSON line printed on stdout, in UTF-8 bytes)."""
MIN_MAX_BYTES: Final = 1024
DEFAULT_BUDGET_S: Final = 2.0
MAX_BYTES_ENV: Final = "FABRIC_MEMORY_HANDOFF_BYTES"
BUDGET_ENV: Final = "FABRIC_MEMORY_HANDOFF_BUDGET"
MAX_TRANSCRIPT_BYTES: Final = 32 * 1024 * 1024
"""A larger transcript is not read (its reading alone would outlast the time budget)."""
LOG_NAME: Final = "handoff.log"
LOG_MAX_BYTES: Final = 1024 * 1024
"""The log is moved to ``handoff.log.1`` past this size (one earlier file kept)."""
AGENTS: Final = frozenset({"claude-code", "codex"})
BOUNDARY: Final = "system:compact_boundary"
"""The customType of Claude Code's ``compact_boundary`` line (its reader's event)."""
USER_BYTES: Final = 300
REPLY_BYTES: Final = 300
_INJECTED = re.compile(
    r"\s*(?:<[a-z][\w-]*>|Caveat: The messages below|\[Request interrupted by user"
    r"|# AGENTS\.md instructions)"
)
"""User-role text a host writes itself (command wrappers, environment context, reminders,
interruptions): no words of the user's."""
_CONVERSATION: Final = frozenset({"user", "assistant", "toolResult"})


# --- the host's input -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HookInput:
    """What a SessionStart hook receives (the fields the packet uses)."""

    session_id: str
    transcript_path: str
    source: str
    cwd: str | None = None


def read_hook_input(data: bytes) -> HookInput:
    """The host's hook JSON, checked; :class:`~fabric_memory.errors.HandoffError` naming the
    JSON path of what is wrong."""
    from .hook_json import read_hook_object

    value = read_hook_object(data)
    fields: dict[str, str] = {}
    for key in ("session_id", "transcript_path", "hook_event_name", "source"):
        given = value.get(key)
        if not isinstance(given, str) or not given:
            raise HandoffError(f"stdin: $.{key} must be a non-empty string, got "
                               f"{clipped(given)}")
        fields[key] = given
    if fields["hook_event_name"] != "SessionStart":
        raise HandoffError(f"stdin: $.hook_event_name is {clipped(fields['hook_event_name'])}; "
                           "the handoff is a SessionStart hook")
    cwd = value.get("cwd")
    return HookInput(fields["session_id"], fields["transcript_path"], fields["source"],
                     cwd if isinstance(cwd, str) else None)


# --- the span the host summarized -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Span:
    """The entries the host's latest compaction summarized, and what the host kept of it."""

    views: tuple[EntryView, ...]
    """Entry views, in order."""
    host_summary: str
    """The host's own summary of the span when the transcript holds it already (Codex's
    ``compacted`` message), else ``""`` (Claude Code writes its summary after the hook;
    a Codex remote compaction's summary is encrypted)."""


def _is_marker(view: EntryView) -> bool:
    return view.type == "compaction" or (
        view.type == "custom_message" and view.raw.get("customType") == BOUNDARY)


def summarized_span(views: Sequence[EntryView]) -> Span:
    """The span of ``views`` (the active branch) the host's latest compaction summarized.

    Compaction markers are the agents' own (Claude Code's ``compact_boundary`` line and
    its ``isCompactSummary`` line, Codex's ``compacted`` item). When the branch goes on
    past its last marker with conversation, the host has not written its marker yet
    (Claude Code runs the hook first): the span is everything after that marker. When
    nothing but bookkeeping follows the last marker (Codex writes it before the hook), the
    span lies between the marker before it and that one."""
    markers = [at for at, view in enumerate(views) if _is_marker(view)]
    last = markers[-1] if markers else -1
    after = views[last + 1:]
    if any(view.role in _CONVERSATION for view in after) or not markers:
        return Span(tuple(after), "")
    group = last
    while group - 1 in markers:  # a boundary and its summary line are one marker
        group -= 1
    earlier = [at for at in markers if at < group]
    start = earlier[-1] + 1 if earlier else 0
    summary = next((views[at].summary or "" for at in range(group, last + 1)
                    if views[at].type == "compaction"), "")
    return Span(tuple(views[start:group]), summary)


# --- the packet -------------------------------------------------------------------------


@dataclass(slots=True)
class Line:
    """One packet line: its addresses and text."""

    first: str
    last: str
    text: str
    said: str = ""
    """What a host's summary would quote of it (the user's words; else ``text``)."""


@dataclass(slots=True)
class Section:
    title: str
    lines: list[Line]
    words: bool = False
    """The user's words: when cut, the first (the task) and the latest lines are kept, and
    their text is never rewritten; other sections keep their latest lines."""
    ranked: bool = False
    """The lines are in order of worth (exact values): when cut, the first are kept."""
    unkept: tuple[int, str, str] | None = None
    """Items the engine's bounded ledger itself no longer holds: how many, and the first and
    last address of their range (named whenever the section is shown)."""

    def preference(self) -> list[int]:
        """Line indexes in the order they are given room."""
        if self.ranked:
            return list(range(len(self.lines)))
        latest = list(range(len(self.lines) - 1, -1, -1))
        return latest[-1:] + latest[:-1] if self.words else latest


def _core(text: str) -> str:
    return " ".join(text.split()).casefold()


VALUE_ORDER: Final = ("error", "url", "port", "version", "config", "id", "value", "scope",
                      "name", "path")
"""The exact values a packet shows first: what an LLM summary drops (error texts, addresses,
ports, versions, settings, ids, numbers) before names and paths, which it keeps."""


def packet_sections(span: Span, project: str | None = None,
                    addresses: Mapping[str, str] | None = None) -> list[Section]:
    """The packet's sections, most important first: the engine's ledgers over the span
    (:func:`fabric_memory.compaction.summarize_span`) laid out for a reader who has the
    host's LLM summary — what is really still open, the user's own words, the exact values
    and errors, what commands printed, commits, the content written, checks — and not the
    file list that summary keeps. Paths inside ``project`` (the session's folder) are shown
    relative to it; ``addresses`` maps entry ids to the line addresses shown."""
    from .compaction import summarize_span
    from .compaction.authored import authored
    from .compaction.ledger import LedgerName
    from .compaction.span import readdressed
    from .compaction.text import clip, clip_collapsed, collapse, mask, masking_once

    shown = addresses or {}
    ledgers_state = readdressed(summarize_span(span.views), shown).state
    ledgers = ledgers_state.ledgers
    failing = {item.first for item in ledgers["checks"].items if "last run failed" in item.text}
    unfinished = [Line(item.first, item.last, f"open: {item.text}")
                  for item in ledgers["plan"].items]
    unfinished += [Line(item.first, item.last, f"error: {item.text}")
                   for item in ledgers["errors"].items
                   if item.first not in failing and not _lookup(item.key)]
    unfinished += [Line(item.first, item.last, f"check: {item.text}")
                   for item in ledgers["checks"].items if item.first in failing]
    reply = next((item for item in ledgers_state.status if item.key == "assistant"), None)
    if reply is not None:
        unfinished.append(Line(reply.first, reply.last,
                               f'last reply: "{clip(reply.text, REPLY_BYTES)}"'))
    words: list[Line] = []
    with masking_once():
        for view in span.views:
            if view.role != "user" or not view.text or _INJECTED.match(view.text):
                continue
            own = collapse(authored(view.text)) or collapse(view.text)
            if own:
                label = "task" if not words else "then"
                said = clip_collapsed(mask(own), USER_BYTES)
                address = shown.get(view.id, view.id)
                words.append(Line(address, address, f'{label}: "{said}"', said))
    rank = {kind: at for at, kind in enumerate(VALUE_ORDER)}
    values = sorted(ledgers["identifiers"].items,
                    key=lambda item: rank.get(item.text.partition(":")[0], len(rank)))
    exact = [Line(item.first, item.last, item.text) for item in values]
    passed = [Line(item.first, item.last, _tagged(item.text, item.tags))
              for item in ledgers["checks"].items if item.first not in failing]
    def unkept(name: LedgerName) -> tuple[int, str, str] | None:
        ledger = ledgers[name]
        if not ledger.dropped or not ledger.dropped_first or not ledger.dropped_last:
            return None
        return ledger.dropped, ledger.dropped_first, ledger.dropped_last

    sections = [
        Section("Still open", unfinished),
        Section("The user's words", words, words=True),
        Section("Exact values and errors", exact, ranked=True),
        Section("Commands and what they printed",
                [Line(i.first, i.last, _tagged(i.text, i.tags))
                 for i in ledgers["commands"].items], unkept=unkept("commands")),
        Section("Commits", [Line(i.first, i.last, i.text) for i in ledgers["commits"].items],
                unkept=unkept("commits")),
        Section("Content written", [Line(i.first, i.last, i.text)
                                    for i in ledgers["changes"].items],
                unkept=unkept("changes")),
        Section("Checks", passed),
    ]
    if project and project.startswith("/"):
        inside = project.rstrip("/") + "/"
        for section in sections:
            if not section.words:  # (the user's words stay as they wrote them)
                for line in section.lines:
                    line.text = line.text.replace(inside, "")
    if span.host_summary:
        said = _core(span.host_summary)
        for section in sections:
            section.lines = [line for line in section.lines
                             if _core(line.said or line.text) not in said]
    return sections


def _lookup(key: str) -> bool:
    """Whether an outstanding error (its key: ``ref\x00target``) is of a read or a search:
    a lookup that found nothing is no work left open (what it said stays among the exact
    values and errors)."""
    from .sources.registry import TOOLS

    tool = TOOLS.get(key.partition("\x00")[0])
    return tool is not None and tool.kind in ("read", "search")


def _tagged(text: str, tags: tuple[str, ...]) -> str:
    return f"{text} ({', '.join(tags)})" if tags else text


def _where(line: Line) -> str:
    from .compaction.text import shown_id

    first = shown_id(line.first)
    return first if line.last == line.first else f"{first} ... {shown_id(line.last)}"


def _escaped_size(text: str) -> int:
    """Bytes ``text`` takes inside a JSON string."""
    return len(orjson.dumps(text)) - 2


def render_packet(sections: list[Section], session_id: str, first: str | None,
                  last: str | None, entries: int, max_bytes: int = DEFAULT_MAX_BYTES,
                  project: str | None = None) -> str:
    """The hook's stdout: ``{"hookSpecificOutput": {"hookEventName": "SessionStart",
    "additionalContext": <packet>}}`` within ``max_bytes`` (the whole line). The header
    says once how an address expands; each section shows three lines
    (:meth:`Section.preference`) before any section gets more; a section cut names what it
    left out and the exact call that reads it."""
    from .compaction.text import shown_id

    session = shown_id(session_id)
    where = f" [{shown_id(first)} ... {shown_id(last)}]" if first and last else ""
    head = (f"# fabric-memory handoff: exact details the compaction summary may have dropped\n"
            f"Session {session}, {entries} entries{where}, read from the transcript"
            f"{f' (paths relative to {project})' if project else ''}. "
            f"Each [address] is an entry of the transcript; read it verbatim with "
            f"`fabric-memory expand {session} --address <address>` (a range "
            f"[A ... B]: `--range A:B`), or the MCP tool `expand` with "
            f'{{"session": "{session}", "addresses": ["<address>"]}}; search the session '
            f'with `recall` ({{"query": "<words>", "session": "{session}"}}).\n')
    envelope = _escaped_size(head) + len(orjson.dumps(_output("")))
    room = max_bytes - envelope
    lines = [[f"- [{_where(line)}] {line.text}\n" for line in section.lines]
             for section in sections]
    sizes = [[_escaped_size(text) for text in shown] for shown in lines]
    headings = [f"\n## {section.title} ({len(section.lines) + unkept_count(section)})\n"
                + (_omission(section.unkept[0], shown_id(section.unkept[1]),
                             shown_id(section.unkept[2]), "not kept ")
                   if section.unkept else "")
                for section in sections]
    # A section shown in part ends with its omission line: its room is held from its first
    # line on (at its widest) and given back once the section is shown whole.
    cut_line = [_escaped_size(_omission(len(section.lines), widest, widest))
                if len(section.lines) > 1 else 0
                for section in sections
                for widest in [max((shown_id(a) for line in section.lines
                                    for a in (line.first, line.last)), key=len, default="")]]
    chosen: list[list[int]] = [[] for _ in sections]
    used = 0
    for limit in (3, None):
        for at, section in enumerate(sections):
            for index in section.preference():
                if index in chosen[at]:
                    continue
                if limit is not None and len(chosen[at]) >= limit:
                    break
                cost = sizes[at][index]
                if not chosen[at]:
                    cost += _escaped_size(headings[at]) + cut_line[at]
                if len(chosen[at]) + 1 == len(lines[at]):
                    cost -= cut_line[at]
                if used + cost > room:
                    break
                chosen[at].append(index)
                used += cost
    body = []
    for at, section in enumerate(sections):
        if not chosen[at]:
            continue
        shown = sorted(chosen[at])
        text = headings[at] + "".join(lines[at][index] for index in shown)
        left = [line for index, line in enumerate(section.lines) if index not in shown]
        if left:
            text += _omission(len(left), shown_id(left[0].first), shown_id(left[-1].last))
        body.append(text)
    packet = head + "".join(body)
    output = orjson.dumps(_output(packet))
    while len(output) > max_bytes and body:  # the reserve fell short: drop the last section
        body.pop()
        packet = head + "".join(body)
        output = orjson.dumps(_output(packet))
    return output.decode()


def unkept_count(section: Section) -> int:
    return section.unkept[0] if section.unkept else 0


def _omission(count: int, first: str, last: str, what: str = "") -> str:
    """The line that names what a cut section left out (``what``: ``not kept `` for what
    the engine's ledger itself no longer holds) and how to read it (the header says the
    command)."""
    return f"- ... {count} more {what}in [{first} ... {last}] (`--range {first}:{last}`)\n"


def _output(packet: str) -> dict[str, Any]:
    return {"hookSpecificOutput": {"hookEventName": "SessionStart",
                                   "additionalContext": packet}}


# --- the hook ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HandoffSettings:
    max_bytes: int = DEFAULT_MAX_BYTES
    budget_s: float = DEFAULT_BUDGET_S

    @staticmethod
    def of(max_bytes: int | None = None, budget_s: float | None = None) -> HandoffSettings:
        """Explicit values, else ``$FABRIC_MEMORY_HANDOFF_BYTES`` /
        ``$FABRIC_MEMORY_HANDOFF_BUDGET``, else the defaults; a bad value is a
        :class:`~fabric_memory.errors.HandoffError`."""
        if max_bytes is None:
            max_bytes = int(_number(MAX_BYTES_ENV, DEFAULT_MAX_BYTES))
        if budget_s is None:
            budget_s = _number(BUDGET_ENV, DEFAULT_BUDGET_S)
        if max_bytes < MIN_MAX_BYTES:
            raise HandoffError(f"the packet's bound must be at least {MIN_MAX_BYTES} bytes, "
                               f"got {max_bytes}")
        if not budget_s > 0:
            raise HandoffError(f"the time budget must be above 0 seconds, got {budget_s}")
        return HandoffSettings(max_bytes, budget_s)


def _number(name: str, default: float) -> float:
    given = os.environ.get(name)
    if not given:
        return default
    try:
        return float(given) if "." in given else int(given)
    except ValueError:
        raise HandoffError(f"${name} must be a number, got {clipped(given)}") from None


def handoff(data: bytes, max_bytes: int = DEFAULT_MAX_BYTES) -> str | None:
    """The packet for the hook input ``data`` (the line to print), or None when the
    source is not a compaction; :class:`~fabric_memory.errors.FabricMemoryError` when no
    packet can be made. A UserPromptSubmit input gets the prompt's context instead
    (:mod:`fabric_memory.prompt_context`)."""
    from .prompt_context import is_prompt_event, prompt_context

    if is_prompt_event(data):
        return prompt_context(data, log_path().parent)
    from .compaction.span import session_addresses
    from .session import open_regular
    from .sources import read_source

    given = read_hook_input(data)
    if given.source != "compact":
        return None
    path = given.transcript_path
    try:
        before = os.fstat(fd := open_regular(path)).st_size
        os.close(fd)
    except OSError as exc:
        raise HandoffError(f"{path}: cannot read the transcript ({exc.strerror or exc})") \
            from None
    if before > MAX_TRANSCRIPT_BYTES:
        raise HandoffError(f"{path}: {before / 2**20:.1f} MiB, above the "
                           f"{MAX_TRANSCRIPT_BYTES // 2**20} MiB a handoff reads")
    session = read_source(path)
    if session.agent not in AGENTS:
        raise HandoffError(f"{path}: a {session.agent} session, not a Claude Code or Codex "
                           "transcript")
    if session.session_id != given.session_id:
        raise HandoffError(f"{path}: holds session {clipped(session.session_id)}, the hook "
                           f"names {clipped(given.session_id)}")
    if session.truncated_tail is not None or session.size != before or _size(path) != before:
        raise HandoffError(f"{path}: being written while read (its size changed or its last "
                           "line is half-written)")
    span = summarized_span([entry.view for entry in session.active_branch()])
    if not span.views:
        raise HandoffError(f"{path}: the compaction summarized no entries")
    addresses = session_addresses(session)
    sections = packet_sections(span, session.project, addresses)
    first, last = span.views[0].id, span.views[-1].id
    return render_packet(sections, session.session_id, addresses.get(first, first),
                         addresses.get(last, last), len(span.views), max_bytes,
                         session.project)


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return -1


@dataclass(slots=True)
class HandoffRun:
    """What :func:`run_handoff` did: the line to print (None: print nothing), why not, and
    whether its worker is still running (the caller must then exit at once)."""

    output: str | None
    reason: str | None = None
    running: bool = False


def run_handoff(data: bytes, *, max_bytes: int | None = None, budget_s: float | None = None,
                log: Path | None = None) -> HandoffRun:
    """The hook, failing open: the packet when it is made within the time budget, else no
    output and the reason logged (``log``: the log file, else :func:`log_path`). Never
    raises."""
    started = time.monotonic()
    done: list[str | None] = []
    failed: list[str] = []
    try:
        settings = HandoffSettings.of(max_bytes, budget_s)
    except FabricMemoryError as exc:
        return _failed(data, exc.message, log)

    def work() -> None:
        try:
            done.append(handoff(data, settings.max_bytes))
        except FabricMemoryError as exc:
            failed.append(exc.message)
        except Exception as exc:
            failed.append(f"unexpected {type(exc).__name__}: {clipped(str(exc))}")

    worker = threading.Thread(target=work, name="fabric-memory-handoff", daemon=True)
    worker.start()
    worker.join(settings.budget_s)
    if worker.is_alive():
        elapsed = time.monotonic() - started
        run = _failed(data, f"time budget of {settings.budget_s:g} s passed ({elapsed:.2f} s)",
                      log)
        run.running = True
        return run
    if failed:
        return _failed(data, failed[0], log)
    return HandoffRun(done[0] if done else None)


def log_path() -> Path:
    """``handoff.log`` in the fabric-memory home (``$FABRIC_MEMORY_HOME``, else
    ``~/.cache/fabric-memory``)."""
    from .memory.locations import HOME_ENV

    home = os.environ.get(HOME_ENV)
    base = Path(home).expanduser() if home else Path.home() / ".cache" / "fabric-memory"
    return base / LOG_NAME


def _failed(data: bytes, reason: str, log: Path | None) -> HandoffRun:
    """No output; ``reason`` logged with the session and transcript the input names."""
    where = ""
    try:
        value = orjson.loads(data)
        if type(value) is dict:
            where = " ".join(f"{key}={clipped(value.get(key))}"
                             for key in ("session_id", "transcript_path") if key in value)
    except orjson.JSONDecodeError:
        pass
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    _append(log or log_path(), f"{stamp} handoff {where + ': ' if where else ''}{reason}\n")
    return HandoffRun(None, reason)


def _append(path: Path, line: str) -> None:
    """Append ``line`` to the log (owner-only), moving a full log aside; a log that cannot
    be written is given up on (the hook's host comes first)."""
    from .memory.locations import make_private_dirs

    try:
        make_private_dirs(path.parent)
        if path.exists() and path.stat().st_size > LOG_MAX_BYTES:
            path.replace(path.with_name(path.name + ".1"))
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, line.encode("utf-8", "replace"))
        finally:
            os.close(fd)
    except OSError:
        pass
