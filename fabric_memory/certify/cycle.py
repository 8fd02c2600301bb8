"""One compaction through the real path, and the invariants every compaction must keep.

A cycle is what a host does: read the session file, build the context, estimate
it, ask :func:`~fabric_memory.compaction.prepare.prepare_compaction` for a
preparation, call the hook with a ``session_before_compact`` event and persist
the compaction entry it returns. The preparation handed to the hook is a
:class:`RecordingPreparation`, so the harness knows which keys the hook read.

The invariant checks here look only at the session file as read back from disk:
they never ask the compactor what it meant to do.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..compaction.hook import EVENT_TYPE
from ..compaction.prepare import (
    CompactionSettings,
    Preparation,
    build_session_context,
    estimate_tokens,
    prepare_compaction,
    should_compact,
)
from ..errors import FabricMemoryError
from ..session import Entry, Session
from .generate import SessionBuilder

CONTEXT_WINDOW: Final = 64
SETTINGS: Final = CompactionSettings(enabled=True, reserve_tokens=63, keep_recent_tokens=1)
POISON: Final = "PRIOR_SUMMARY_POISON_991_"
"""Every persisted summary ends with this plus a cycle-unique suffix; no output may hold it."""

Hook = Callable[[Mapping[str, Any]], Mapping[str, Any]]


class RecordingPreparation(Mapping[str, Any]):
    """The event's ``preparation``, recording every key read (iteration reads them all)."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        self._data = dict(data)
        self.reads: list[str] = []

    def __getitem__(self, key: str) -> Any:
        self.reads.append(key)
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        self.reads.append("*")
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def read_previous_summary(self) -> bool:
        return "previousSummary" in self.reads or "*" in self.reads


@dataclass(frozen=True, slots=True)
class Compacted:
    """What the hook returned, checked for the host's result shape."""

    summary: str
    first_kept_entry_id: str
    tokens_before: int
    details: dict[str, Any]


@dataclass(frozen=True, slots=True)
class HookCall:
    """One call of the hook: the event's preparation, what it read, and what came back."""

    session: Session
    branch: tuple[Entry, ...]
    context_tokens: int
    should_compact: bool
    preparation: Preparation
    event_preparation: Mapping[str, Any]
    read_previous_summary: bool
    result: Mapping[str, Any]
    compacted: Compacted | None
    problem: str | None
    """Why ``compacted`` is None (a cancel, or a malformed result)."""


def context_tokens(session: Session) -> int:
    """What the host estimates before deciding: ``estimateTokens`` over the built context."""
    context = build_session_context(session.entries, session.leaf_id)
    return sum(estimate_tokens(message) for message in context.message_dicts())


def call_hook(
    hook: Hook,
    session: Session,
    *,
    settings: CompactionSettings = SETTINGS,
    overrides: Mapping[str, Any] | None = None,
) -> HookCall | str:
    """Prepare the active branch of ``session`` and call ``hook``; a reason when Pi would
    not prepare. ``overrides`` replace preparation fields (``firstKeptEntryId: ""``)."""
    branch = tuple(session.active_branch())
    tokens = context_tokens(session)
    prepared = prepare_compaction(branch, settings)
    if prepared is None:
        return f"{session.path}: prepare_compaction returned no preparation"
    event_preparation: dict[str, Any] = dict(prepared.to_event())
    event_preparation.update(overrides or {})
    recording = RecordingPreparation(event_preparation)
    event = {
        "type": EVENT_TYPE,
        "preparation": recording,
        "branchEntries": [entry.raw for entry in branch],
        "signal": {"aborted": False},
        "sessionId": session.session_id,
    }
    try:
        result = hook(event)
    except FabricMemoryError as exc:
        result = {"cancel": True, "reason": f"the hook raised {exc.code}: {exc.message}"}
    compacted, problem = read_result(result)
    return HookCall(
        session=session,
        branch=branch,
        context_tokens=tokens,
        should_compact=should_compact(tokens, CONTEXT_WINDOW, settings),
        preparation=prepared,
        event_preparation=event_preparation,
        read_previous_summary=recording.read_previous_summary(),
        result=result,
        compacted=compacted,
        problem=problem,
    )


def read_result(result: Mapping[str, Any]) -> tuple[Compacted | None, str | None]:
    """The compaction in a hook result, or why there is none."""
    compaction = result.get("compaction") if isinstance(result, Mapping) else None
    if not isinstance(compaction, Mapping):
        reason = result.get("reason") if isinstance(result, Mapping) else None
        return None, f"the hook returned no compaction ({reason or 'no reason given'})"
    summary, first_kept = compaction.get("summary"), compaction.get("firstKeptEntryId")
    tokens, details = compaction.get("tokensBefore"), compaction.get("details")
    if not isinstance(summary, str) or not isinstance(first_kept, str):
        return None, "compaction.summary and compaction.firstKeptEntryId must be strings"
    if type(tokens) is not int or not isinstance(details, dict):
        return None, "compaction.tokensBefore must be an integer and details an object"
    return Compacted(summary, first_kept, tokens, details), None


def persist(
    builder: SessionBuilder, path: str | os.PathLike[str], compacted: Compacted, suffix: str
) -> tuple[str, str]:
    """Append the compaction as the host persists it, ``suffix`` added to its summary;
    return the entry id and the summary as stored."""
    stored = compacted.summary + suffix
    entry_id = builder.compaction(
        stored, compacted.first_kept_entry_id, compacted.tokens_before, details=compacted.details
    )
    builder.append(path)
    return entry_id, stored


# --- invariants of the file as read back -----------------------------------------------


def latest_compaction(branch: Sequence[Entry]) -> int | None:
    return next((i for i in range(len(branch) - 1, -1, -1) if branch[i].type == "compaction"),
                None)


def kept_start(branch: Sequence[Entry]) -> int | None:
    """Branch index where the retained entries start: the latest compaction's first kept
    entry, or the compaction itself when it keeps nothing; None without a compaction."""
    latest = latest_compaction(branch)
    if latest is None:
        return None
    first_kept = branch[latest].raw.get("firstKeptEntryId")
    return next((i for i in range(latest) if branch[i].id == first_kept), latest)


def summarized_ids(branch: Sequence[Entry]) -> list[str]:
    """Ids of the non-compaction entries before the retained ones (what was summarized)."""
    start = kept_start(branch)
    if start is None:
        return []
    return [entry.id for entry in branch[:start] if entry.type != "compaction"]


def closure_problems(session: Session) -> list[str]:
    """Tool results in the built context without their call, and calls in it whose result
    is on the branch but not in the context."""
    on_branch = {
        call_id
        for entry in session.active_branch()
        if (call_id := _result_call(entry.message)) is not None
    }
    calls: set[str] = set()
    results: set[str] = set()
    for message in build_session_context(session.entries, session.leaf_id).message_dicts():
        calls.update(_call_ids(message))
        result = _result_call(message)
        if result is not None:
            results.add(result)
    problems = [
        f"tool result {c} is in the context without its call" for c in sorted(results - calls)
    ]
    problems += [
        f"tool call {c} is in the context without its result"
        for c in sorted((calls & on_branch) - results)
    ]
    return problems


def splits_pair_at(branch: Sequence[Entry], index: int) -> bool:
    """Whether keeping only ``branch[index:]`` separates some tool call from its result."""
    calls: tuple[set[str], set[str]] = (set(), set())
    results: tuple[set[str], set[str]] = (set(), set())
    for position, entry in enumerate(branch):
        kept = position >= index
        calls[kept].update(_call_ids(entry.message or {}))
        result = _result_call(entry.message)
        if result is not None:
            results[kept].add(result)
    return bool(calls[0] & results[1] or results[0] & calls[1])


def _call_ids(message: Mapping[str, Any]) -> list[str]:
    if message.get("role") != "assistant" or not isinstance(message.get("content"), list):
        return []
    return [
        block["id"]
        for block in message["content"]
        if isinstance(block, Mapping)
        and block.get("type") == "toolCall"
        and isinstance(block.get("id"), str)
    ]


def _result_call(message: Mapping[str, Any] | None) -> str | None:
    if message is None or message.get("role") != "toolResult":
        return None
    call_id = message.get("toolCallId")
    return call_id if isinstance(call_id, str) else None


def retained_context_problems(session: Session) -> list[str]:
    """The context built from the session must equal the one built from the retained
    entries alone: the first kept entry onward, the compaction, everything after it."""
    branch = session.active_branch()
    start = kept_start(branch)
    if start is None:
        return []
    whole = build_session_context(session.entries, session.leaf_id).message_dicts()
    retained = build_session_context(branch[start:], session.leaf_id).message_dicts()
    if whole == retained:
        return []
    pairs = zip(whole, retained, strict=False)
    differ = next((i for i, (a, b) in enumerate(pairs) if a != b), min(len(whole), len(retained)))
    return [
        f"{session.path}: context has {len(whole)} messages, the retained entries alone give "
        f"{len(retained)} (first difference at message {differ})"
    ]


def first_kept_problems(session: Session) -> list[str]:
    """Every non-empty ``firstKeptEntryId`` of a compaction on the active branch names an
    entry on that branch."""
    branch = session.active_branch()
    active = {entry.id for entry in branch}
    return [
        f"compaction {entry.id}: firstKeptEntryId {first!r} is not on the active branch"
        for entry in branch
        if entry.type == "compaction"
        and isinstance(first := entry.raw.get("firstKeptEntryId"), str)
        and first
        and first not in active
    ]


def round_trip_problems(
    session: Session, entry_id: str, stored_summary: str, compacted: Compacted
) -> list[str]:
    """The compaction entry read back holds exactly what was persisted."""
    entry = session.by_id.get(entry_id)
    if entry is None:
        return [f"compaction {entry_id} is not in {session.path} after appending it"]
    raw = entry.raw
    wanted = {
        "summary": stored_summary,
        "firstKeptEntryId": compacted.first_kept_entry_id,
        "tokensBefore": compacted.tokens_before,
        "details": compacted.details,
    }
    return [
        f"compaction {entry_id}: {key} differs after the round trip"
        for key, value in wanted.items()
        if raw.get(key) != value
    ]

