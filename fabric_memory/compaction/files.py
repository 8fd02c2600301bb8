"""Session files: compact a file with the engine's own (Pi's) preparation, and append the
compaction to it as a Pi compaction entry.

:func:`compact_session` reads the file, prepares as Pi would and hands the active
branch's entry views to the compactor. :func:`append_compaction` appends the result:
one ``O_APPEND`` write of one complete line, fsynced, refused if the file changed
since it was read.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Container
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson
import xxhash

from .._gc import no_cyclic_gc
from .._js import iso_time
from ..errors import CompactionError, SessionChangedError, SessionError
from ..session import (
    CURRENT_VERSION,
    DEFAULT_MAX_LINE_BYTES,
    Session,
    fingerprint_file,
    read_session,
)
from .compactor import Cancel, Compaction, compact_branch
from .prepare import (
    NOTHING_TO_COMPACT,
    CompactionSettings,
    Preparation,
    build_session_context,
    current_system_message,
    explain_preparation,
    project_branch,
    should_compact,
)


@dataclass(frozen=True, slots=True)
class AppendedEntry:
    """The compaction entry :func:`append_compaction` wrote, and where."""

    id: str
    offset: int
    """Byte offset of the entry's line."""
    entry: dict[str, Any]


@dataclass(frozen=True, slots=True)
class SessionCompaction:
    """A compaction computed for a session file, with the file as it was read."""

    session: Session
    context_tokens: int
    should_compact: bool | None
    """``None`` when no context window was given."""
    is_split_turn: bool
    outcome: Compaction | Cancel
    appended: AppendedEntry | None = None

    def to_json(self) -> dict[str, Any]:
        value: dict[str, Any] = {
            "path": self.session.path,
            "sessionId": self.session.session_id,
            "sourceHash": self.session.source_hash,
            "leafId": self.session.leaf_id,
            "contextTokens": self.context_tokens,
            "shouldCompact": self.should_compact,
            "isSplitTurn": self.is_split_turn,
        }
        value.update(self.outcome.to_hook_result())
        if self.appended is not None:
            value["appended"] = {"id": self.appended.id, "offset": self.appended.offset}
        return value

    def describe(self) -> str:
        """Human text: the summary, then where the cut is (and what was appended)."""
        outcome = self.outcome
        if isinstance(outcome, Cancel):
            return f"{self.session.path}: no compaction: {outcome.reason}"
        cut = outcome.first_kept_entry_id or "(nothing kept)"
        lines = [
            outcome.summary.rstrip("\n"),
            "",
            f"firstKeptEntryId: {cut}   tokensBefore: {outcome.tokens_before}   "
            f"summary: {len(outcome.summary.encode())} bytes",
        ]
        if outcome.first_kept_entry_id != outcome.requested_first_kept_entry_id:
            lines.append(
                f"cut moved from {outcome.requested_first_kept_entry_id or '(end)'} "
                "to keep tool calls with their results"
            )
        if self.appended is not None:
            lines.append(f"appended compaction entry {self.appended.id} to {self.session.path}")
        return "\n".join(lines)


def compact_session(
    path: str | os.PathLike[str],
    settings: CompactionSettings | None = None,
    *,
    context_window: int | None = None,
    append: bool = False,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> SessionCompaction:
    """Prepare (as Pi would) and compact the active branch of the session at ``path``;
    with ``append``, also append the compaction to the file (:func:`append_compaction`).

    ``context_window`` only informs ``should_compact`` in the result; the compaction is
    made either way. Raises :class:`CompactionError` when there is nothing to compact.
    """
    settings = settings or CompactionSettings()
    # Everything read from the file stays alive until the summary is written.
    with no_cyclic_gc():
        session = read_session(path, max_line_bytes=max_line_bytes)
        branch = session.active_branch()
        # Pi's buildSessionContext(entries, leaf) projects this same branch: project it once.
        context = project_branch(branch)
        prepared = explain_preparation(branch, settings, context)
        if not isinstance(prepared, Preparation):
            why = _nothing_to_compact(prepared.reason, settings)
            raise CompactionError(f"{session.path}: {why}")
        # Pi's tokensBefore is this same projected estimate of the context.
        tokens = prepared.tokens_before
        outcome = compact_branch(
            [entry.view for entry in branch],
            prepared.first_kept_entry_id,
            prepared.tokens_before,
            session_id=session.session_id,
        )
        appended = (
            append_compaction(session, outcome)
            if append and isinstance(outcome, Compaction)
            else None
        )
        return SessionCompaction(
            session=session,
            context_tokens=tokens,
            should_compact=None
            if context_window is None
            else should_compact(tokens, context_window, settings),
            is_split_turn=prepared.is_split_turn,
            outcome=outcome,
            appended=appended,
        )


def new_entry_id(source_hash: str, taken: Container[str]) -> str:
    """An 8-hex entry id derived from the file's hash, unused in the file."""
    counter = 0
    while True:
        candidate = xxhash.xxh3_64_hexdigest(f"{source_hash}:{counter}".encode())[:8]
        if candidate not in taken:
            return candidate
        counter += 1


def compaction_entry(
    session: Session, compaction: Compaction, *, now: datetime | None = None
) -> dict[str, Any]:
    """The Pi compaction entry for ``compaction`` on ``session``: a new id, ``parentId``
    = the leaf, ``fromHook: true`` and, as Pi writes it, the current system message."""
    moment = now or datetime.now(UTC)
    entry: dict[str, Any] = {
        "type": "compaction",
        "id": new_entry_id(session.source_hash, session.by_id),
        "parentId": session.leaf_id,
        "timestamp": iso_time(moment),
        "summary": compaction.summary,
        "firstKeptEntryId": compaction.first_kept_entry_id,
        "tokensBefore": compaction.tokens_before,
        "details": compaction.details,
        "fromHook": True,
    }
    context = build_session_context(session.entries, session.leaf_id)
    system = current_system_message(context.message_dicts())
    if system is not None:
        entry["systemMessage"] = {**system, "timestamp": int(moment.timestamp() * 1000)}
    return entry


def _nothing_to_compact(reason: str, settings: CompactionSettings) -> str:
    """Why ``compact`` made nothing, with what would make something."""
    if reason != NOTHING_TO_COMPACT:
        return f"nothing to compact ({reason})"
    return (f"nothing to compact: the whole branch fits in the recent context Pi keeps "
            f"verbatim ({settings.keep_recent_tokens:,} tokens); a smaller "
            f"--keep-recent-tokens N, or --until ADDRESS to summarize through an entry")


def append_compaction(
    session: Session, compaction: Compaction, *, now: datetime | None = None
) -> AppendedEntry:
    """Append ``compaction`` to the file ``session`` was read from, as a Pi compaction
    entry (see :func:`compaction_entry`).

    One ``O_APPEND`` write of one complete line (preceded by ``\\n`` when the last line
    has none), then fsync; earlier bytes are never touched. Raises
    :class:`SessionChangedError` when the file's size or hash changed since it was read.
    """
    path = session.path
    if session.version < CURRENT_VERSION:
        # Entry ids of v1/v2 files are ours (``L<line>``); Pi assigns its own on migration,
        # so a parentId written now would dangle.
        raise CompactionError(
            f"{path}: version {session.version} session; let Pi migrate it to version "
            f"{CURRENT_VERSION} before appending"
        )
    if session.truncated_tail is not None:
        raise CompactionError(
            f"{path}:{session.truncated_tail.line}: the last line is half-written; "
            "append after its writer finishes"
        )
    entry = compaction_entry(session, compaction, now=now)
    line = orjson.dumps(entry) + b"\n"
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND)
    except OSError as exc:
        raise SessionError(path, None, f"cannot open for appending ({exc.strerror or exc}); "
                           "make the file writable, or compact without --append") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        current = fingerprint_file(fd)
        if current.size != session.size or current.source_hash != session.source_hash:
            raise SessionChangedError(
                path,
                None,
                f"changed since it was read (size {session.size} → {current.size}); "
                "compact it again before appending",
            )
        data = line if current.size == 0 or current.last_byte == b"\n" else b"\n" + line
        written = os.write(fd, data)
        if written != len(data):
            raise CompactionError(f"{path}: short write ({written} of {len(data)} bytes)")
        os.fsync(fd)
    finally:
        os.close(fd)
    return AppendedEntry(entry["id"], current.size + len(data) - len(line), entry)


