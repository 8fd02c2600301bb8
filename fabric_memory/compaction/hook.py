"""The compaction hook: a host's ``session_before_compact`` event in, a compaction out.

:func:`compaction_hook` is what a host calls in-process (and ``fabric-memory hook``
over stdio, :func:`run_hook`). This module only reads the event: it checks the keys
the hook uses, builds each branch entry's view once and hands the branch to the
compactor (:func:`~.compactor.compact_branch`).
``preparation.previousSummary`` is never read: the hook asks the preparation for
exactly the keys it uses (``firstKeptEntryId``, ``tokensBefore``). The summary is
deterministic, so ``customInstructions`` are not followed; an event may carry a
``sessionId`` (not part of the host's shape) for the summary's expand/recall hints.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

from .._gc import no_cyclic_gc
from .._js import is_count
from ..errors import HookInputError, clipped
from ..view import EntryView, view_entry
from .compactor import Cancel, compact_branch

EVENT_TYPE: Final = "session_before_compact"


@dataclass(frozen=True, slots=True)
class HookRequest:
    """What the hook takes from a ``session_before_compact`` event."""

    branch: tuple[EntryView, ...]
    first_kept_entry_id: str
    tokens_before: int
    session_id: str | None
    aborted: bool


def entries_from_json(values: Any, where: str = "$.branchEntries") -> tuple[EntryView, ...]:
    """Host session entries (JSON objects) as entry views, each read once."""
    if not isinstance(values, list):
        raise HookInputError(f"{where}: expected an array of session entries")
    views: list[EntryView] = []
    for index, value in enumerate(values):
        # ``type() is`` first on every entry: an ABC ``isinstance`` costs ten times more.
        if type(value) is not dict:
            if not isinstance(value, Mapping):
                raise HookInputError(f"{where}[{index}]: expected a session entry object")
            value = dict(value)
        entry_id, entry_type = value.get("id"), value.get("type")
        if (
            not (type(entry_id) is str or isinstance(entry_id, str)) or not entry_id
            or not (type(entry_type) is str or isinstance(entry_type, str))
        ):
            raise HookInputError(f"{where}[{index}]: entry needs a string \"type\" and \"id\"")
        parent, timestamp = value.get("parentId"), value.get("timestamp")
        views.append(
            view_entry(
                entry_id,
                entry_type,
                parent if parent and (type(parent) is str or isinstance(parent, str)) else None,
                timestamp if type(timestamp) is str or isinstance(timestamp, str) else None,
                value,
            )
        )
    return tuple(views)


def read_event(event: Any) -> HookRequest:
    """Validate a ``session_before_compact`` event, reading only the keys the hook uses."""
    if not isinstance(event, Mapping):
        raise HookInputError("$: expected a JSON object")
    kind = event.get("type")
    if kind is not None and kind != EVENT_TYPE:
        raise HookInputError(f"$.type: expected {clipped(EVENT_TYPE)}, got {clipped(kind)}")
    preparation = event.get("preparation")
    if not isinstance(preparation, Mapping):
        raise HookInputError("$.preparation: expected an object")
    first_kept = preparation.get("firstKeptEntryId")
    if not isinstance(first_kept, str):
        raise HookInputError("$.preparation.firstKeptEntryId: expected a string")
    tokens = preparation.get("tokensBefore")
    if type(tokens) is float and tokens.is_integer() and abs(tokens) < 2.0**53:
        tokens = int(tokens)
    if not is_count(tokens):
        raise HookInputError(
            "$.preparation.tokensBefore: expected an integer from 0 to 2^53-1, got "
            f"{clipped(tokens)}"
        )
    branch = entries_from_json(event.get("branchEntries"), "$.branchEntries")
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
    # The branch's views and the state built from them stay alive until the result is
    # returned: a cyclic collection on the way rescans them and frees nothing (a tenth of a
    # 2,900-entry call). Reference counting frees them as the call returns.
    with no_cyclic_gc():
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
