"""The compaction hook: a host's ``session_before_compact`` event in, a compaction out.

:func:`compaction_hook` is what a host calls in-process (and ``fabric-memory hook``
over stdio). It finds the cut, keeps every tool call with its result (closure),
carries the previous compaction's state forward from its *details* (or rebuilds it
from the branch when that compaction is not ours), projects the newly summarized
entries, renders the summary and returns the host's result shape.
``preparation.previousSummary`` is never read: the hook asks the preparation for
exactly the keys it uses (``firstKeptEntryId``, ``tokensBefore``). The summary is
deterministic, so ``customInstructions`` are not followed; an event may carry a
``sessionId`` (not part of the host's shape) for the summary's expand/recall hints.

:func:`compact_session` does the same for a session file with the engine's own
preparation, and :func:`append_compaction` appends the result as a Pi compaction
entry: one ``O_APPEND`` write of one complete line, fsynced, refused if the file
changed since it was read.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, TypedDict

import orjson
import xxhash

from .._js import iso_time
from ..errors import CompactionError, HookInputError, SessionChangedError, clipped
from ..session import (
    CURRENT_VERSION,
    DEFAULT_MAX_LINE_BYTES,
    Entry,
    Session,
    fingerprint_file,
    read_session,
)
from .prepare import (
    CompactionSettings,
    Preparation,
    build_session_context,
    current_system_message,
    estimate_projected_context_tokens,
    explain_preparation,
    should_compact,
)
from .project import (
    CumulativeState,
    ToolCall,
    fold,
    index_tool_calls,
    is_count,
    project_entries,
    read_state,
    result_call_id,
)
from .render import (
    COMPACTOR,
    DETAILS_VERSION,
    DetailsJson,
    LiveRange,
    build_details,
    render_summary,
)

EVENT_TYPE: Final = "session_before_compact"


class CompactionJson(TypedDict):
    summary: str
    firstKeptEntryId: str
    tokensBefore: int
    details: DetailsJson


@dataclass(frozen=True, slots=True)
class Compaction:
    """A compaction ready for the host (or for :func:`append_compaction`)."""

    summary: str
    first_kept_entry_id: str
    tokens_before: int
    details: DetailsJson
    requested_first_kept_entry_id: str
    """What the preparation asked for; differs from ``first_kept_entry_id`` when the cut
    moved earlier to keep a tool call with its result."""

    def to_json(self) -> CompactionJson:
        return {
            "summary": self.summary,
            "firstKeptEntryId": self.first_kept_entry_id,
            "tokensBefore": self.tokens_before,
            "details": self.details,
        }

    def to_hook_result(self) -> dict[str, Any]:
        return {"compaction": self.to_json()}


@dataclass(frozen=True, slots=True)
class Cancel:
    """No compaction, and why."""

    reason: str

    def to_hook_result(self) -> dict[str, Any]:
        return {"cancel": True, "reason": self.reason}


# --- closure -------------------------------------------------------------------------


def tool_spans(branch: Sequence[Entry], calls: Mapping[str, ToolCall]) -> list[tuple[int, int]]:
    """``(earlier, later)`` branch positions of every tool call and a result answering it,
    in whichever order they were written (``calls``: :func:`index_tool_calls` of the branch)."""
    positions = {entry.id: index for index, entry in enumerate(branch)}
    spans = []
    for index, entry in enumerate(branch):
        call_id = result_call_id(entry)
        call = calls.get(call_id) if call_id is not None else None
        if call is not None and call.entry_id in positions:
            at = positions[call.entry_id]
            spans.append((min(at, index), max(at, index)))
    return spans


def splits_pair(branch: Sequence[Entry], calls: Mapping[str, ToolCall]) -> list[bool]:
    """For every cut position ``0..len(branch)``: whether cutting there (keeping entries
    from that position on) separates a tool call from its result."""
    crossing = [0] * (len(branch) + 2)
    for earlier, later in tool_spans(branch, calls):
        if earlier < later:
            crossing[earlier + 1] += 1
            crossing[later + 1] -= 1
    split: list[bool] = []
    running = 0
    for position in range(len(branch) + 1):
        running += crossing[position]
        split.append(running > 0)
    return split


def window_start(branch: Sequence[Entry]) -> int:
    """Where the live context starts: the latest compaction's first kept entry, or the
    entry after it when that boundary keeps nothing (``""``, its own id, unknown)."""
    compactions = [i for i, entry in enumerate(branch) if entry.type == "compaction"]
    if not compactions:
        return 0
    latest = compactions[-1]
    first_kept = branch[latest].raw.get("firstKeptEntryId")
    for index in range(latest):
        if branch[index].id == first_kept and branch[index].type != "compaction":
            return index
    return latest + 1


def safe_cut(
    branch: Sequence[Entry], cut: int, floor: int, calls: Mapping[str, ToolCall]
) -> int | None:
    """The nearest position at or before ``cut`` (and after ``floor``) that keeps every
    tool call with its result and does not start on a tool result or a compaction."""
    split = splits_pair(branch, calls)
    for position in range(cut, floor, -1):
        if position < len(branch) and (
            branch[position].role == "toolResult" or branch[position].type == "compaction"
        ):
            continue
        if not split[position]:
            return position
    return None


# --- compacting a branch -------------------------------------------------------------


def _previous_state(branch: Sequence[Entry], cut: int) -> tuple[CumulativeState, int]:
    """The state the latest compaction carries and where projection resumes; an empty
    state from the branch start when that compaction is not ours."""
    latest = next((e for e in reversed(branch) if e.type == "compaction"), None)
    if latest is None:
        return CumulativeState(), 0
    details = latest.raw.get("details")
    if (
        not isinstance(details, Mapping)
        or details.get("compactor") != COMPACTOR
        or details.get("version") != DETAILS_VERSION
    ):
        return CumulativeState(), 0
    state = read_state(details.get("state"))
    if state is None:
        return CumulativeState(), 0
    if state.coverage.last is None:
        return state, 0
    resume = next((i for i, e in enumerate(branch) if e.id == state.coverage.last), None)
    if resume is None:
        return CumulativeState(), 0  # our range is not on this branch: rebuild
    return state, min(resume + 1, cut)


def compact_branch(
    branch: Sequence[Entry],
    first_kept_entry_id: str,
    tokens_before: int,
    *,
    session_id: str | None = None,
) -> Compaction | Cancel:
    """Compact ``branch`` (root first) at ``first_kept_entry_id`` (``""``: everything)."""
    if not branch:
        return Cancel("the branch is empty")
    if first_kept_entry_id:
        cut = next((i for i, e in enumerate(branch) if e.id == first_kept_entry_id), None)
        if cut is None:
            return Cancel(f"firstKeptEntryId {first_kept_entry_id!r} is not on the branch")
    else:
        cut = len(branch)
    floor = window_start(branch)
    if cut <= floor:
        return Cancel(f"nothing to summarize before {first_kept_entry_id or 'the end'!r}")
    calls = index_tool_calls(branch)
    safe = safe_cut(branch, cut, floor, calls)
    if safe is None:
        return Cancel(
            f"no cut point at or before {first_kept_entry_id or 'the end'!r} keeps every tool "
            "call with its result"
        )
    previous, resume = _previous_state(branch, safe)
    fresh = branch[resume:safe]
    projection = project_entries(fresh, calls, goal_known=bool(previous.ledgers["goal"].total))
    state = fold(previous, projection)
    kept = branch[safe].id if safe < len(branch) else ""
    live = LiveRange(projection.first, projection.last, projection.entries, kept)
    rendered = render_summary(state, live, session_id=session_id)
    details = build_details(
        state,
        rendered,
        live,
        session_id=session_id,
        adjusted_from=first_kept_entry_id if safe != cut else None,
    )
    return Compaction(rendered.summary, kept, tokens_before, details, first_kept_entry_id)


# --- the hook ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HookRequest:
    """What the hook takes from a ``session_before_compact`` event."""

    branch: tuple[Entry, ...]
    first_kept_entry_id: str
    tokens_before: int
    session_id: str | None
    aborted: bool


def entries_from_json(values: Any, where: str = "branchEntries") -> tuple[Entry, ...]:
    """Host session entries (JSON objects) as :class:`Entry` records; ``line`` is the
    1-based position in ``values`` (the host sends no file positions)."""
    if not isinstance(values, list):
        raise HookInputError(f"{where}: expected an array of session entries")
    entries = []
    for index, value in enumerate(values):
        if not isinstance(value, Mapping):
            raise HookInputError(f"{where}[{index}]: expected a session entry object")
        entry_id, entry_type = value.get("id"), value.get("type")
        if not isinstance(entry_id, str) or not entry_id or not isinstance(entry_type, str):
            raise HookInputError(f"{where}[{index}]: entry needs a string 'type' and 'id'")
        parent, timestamp = value.get("parentId"), value.get("timestamp")
        entries.append(
            Entry(
                id=entry_id,
                parent_id=parent if isinstance(parent, str) and parent else None,
                type=entry_type,
                timestamp=timestamp if isinstance(timestamp, str) else None,
                line=index + 1,
                offset=0,
                length=0,
                raw=value if isinstance(value, dict) else dict(value),
            )
        )
    return tuple(entries)


def read_event(event: Any) -> HookRequest:
    """Validate a ``session_before_compact`` event, reading only the keys the hook uses."""
    if not isinstance(event, Mapping):
        raise HookInputError("event: expected a JSON object")
    kind = event.get("type")
    if kind is not None and kind != EVENT_TYPE:
        raise HookInputError(f"event.type: expected {EVENT_TYPE!r}, got {clipped(kind)}")
    preparation = event.get("preparation")
    if not isinstance(preparation, Mapping):
        raise HookInputError("event.preparation: expected an object")
    first_kept = preparation.get("firstKeptEntryId")
    if not isinstance(first_kept, str):
        raise HookInputError("event.preparation.firstKeptEntryId: expected a string")
    tokens = preparation.get("tokensBefore")
    if type(tokens) is float and tokens.is_integer() and abs(tokens) < 2.0**53:
        tokens = int(tokens)
    if not is_count(tokens):
        raise HookInputError(
            "event.preparation.tokensBefore: expected an integer from 0 to 2^53-1, got "
            f"{clipped(tokens)}"
        )
    branch = entries_from_json(event.get("branchEntries"), "event.branchEntries")
    session_id = event.get("sessionId")
    signal = event.get("signal")
    aborted = (
        signal.get("aborted") is True
        if isinstance(signal, Mapping)
        else getattr(signal, "aborted", False) is True
    )
    return HookRequest(
        branch,
        first_kept,
        tokens,
        session_id if isinstance(session_id, str) and session_id else None,
        aborted,
    )


def compaction_hook(event: Mapping[str, Any]) -> dict[str, Any]:
    """The host's ``session_before_compact`` handler: ``{"compaction": {summary,
    firstKeptEntryId, tokensBefore, details}}`` or ``{"cancel": true, "reason": ...}``.

    Raises :class:`HookInputError` when the event is malformed.
    """
    request = read_event(event)
    if request.aborted:
        return Cancel("the host aborted the compaction").to_hook_result()
    outcome = compact_branch(
        request.branch,
        request.first_kept_entry_id,
        request.tokens_before,
        session_id=request.session_id,
    )
    return outcome.to_hook_result()


def run_hook(data: bytes) -> tuple[dict[str, Any], int]:
    """The stdio hook: one JSON event in, ``(result, exit status)`` out; bad input gives
    ``{"error": {code, message}}`` and status 2."""
    try:
        try:
            event = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise HookInputError(f"stdin: not a JSON event ({str(exc).split(':', 1)[0]})") from None
        return compaction_hook(event), 0
    except HookInputError as exc:
        return {"error": exc.to_json()}, exc.exit_status


# --- session files -------------------------------------------------------------------


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
    session = read_session(path, max_line_bytes=max_line_bytes)
    branch = session.active_branch()
    prepared = explain_preparation(branch, settings)
    if not isinstance(prepared, Preparation):
        raise CompactionError(f"{session.path}: nothing to compact ({prepared.reason})")
    context = build_session_context(session.entries, session.leaf_id)
    tokens = estimate_projected_context_tokens(context, branch).tokens
    outcome = compact_branch(
        branch,
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
        raise SessionChangedError(path, None, f"cannot open for appending: {exc.strerror}") from exc
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


