"""The no-model handoff simulator: resume a task from a compaction and memory alone.

It receives the handoff (the compaction's summary and details, as persisted) and a
:class:`MemoryAccess`. It finds the task's source address in the details (the one
item that names a ``CERT_TASK_V1`` payload), asks memory for the session's
integrity-bound pointer, expands that address with ``expectedSourceHash``, decodes
the payload and applies it. Whatever is missing, ambiguous or altered raises
:class:`~fabric_memory.errors.TaskPayloadError`: it never guesses and never
reports a success it did not make.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypedDict

from ..errors import TaskPayloadError
from ..memory.expand import MAX_CHARS, ExpandPage
from .continuation import TASK_MARKER, CertTask, apply_task, decode_task


class Pointer(TypedDict):
    """A session named by memory, bound to the exact version it indexed."""

    session: str
    sourceHash: str
    lineageFingerprint: str


class MemoryAccess(Protocol):
    """What a resumed session may ask of memory."""

    def pointer(self, session_id: str) -> Pointer: ...

    def expand(self, request: Mapping[str, Any]) -> ExpandPage: ...


@dataclass(frozen=True, slots=True)
class Resumed:
    """What the simulator did: the address it expanded, the task, the files it touched."""

    address: str
    task: CertTask
    touched: tuple[str, ...]


Simulator = Callable[[Mapping[str, Any], MemoryAccess, Path], Resumed]


def task_address(details: Mapping[str, Any]) -> str:
    """The source address of the task: the first address of the one item of the carried
    state (status or any ledger) whose text names a ``CERT_TASK_V1`` payload."""
    found = {address for address, text in _items(details.get("state")) if TASK_MARKER in text}
    if len(found) != 1:
        raise TaskPayloadError(
            f"compaction details: {len(found)} items name a {TASK_MARKER} payload "
            f"({', '.join(sorted(found)) or 'none'}); exactly one is needed"
        )
    return found.pop()


def _items(state: Any) -> Iterator[tuple[str, str]]:
    """``(first address, text)`` of every item of the state (documented in
    docs/compaction-details.md)."""
    if not isinstance(state, Mapping):
        return
    groups: list[Any] = [state.get("status")]
    ledgers = state.get("ledgers")
    for ledger in ledgers.values() if isinstance(ledgers, Mapping) else ():
        if isinstance(ledger, Mapping):
            groups += [ledger.get("head"), ledger.get("tail")]
    for group in groups:
        for item in group if isinstance(group, list) else ():
            if not isinstance(item, list) or len(item) < 2:
                continue
            text = item[1] if len(item) == 2 else item[2]
            if isinstance(item[0], str) and item[0] and isinstance(text, str):
                yield item[0], text


def fetch_entry(memory: MemoryAccess, pointer: Pointer, entry_id: str) -> str:
    """The verbatim source line of ``entry_id``, every page bound to the pointer."""
    request: Mapping[str, Any] | None = {
        "session": pointer["session"],
        "entries": [entry_id],
        "expectedSourceHash": pointer["sourceHash"],
        "expectedLineageFingerprint": pointer["lineageFingerprint"],
        "maxChars": MAX_CHARS,
        "raw": True,
    }
    text = ""
    while request is not None:
        page = memory.expand(request)
        if page["sourceHash"] != pointer["sourceHash"]:
            raise TaskPayloadError(
                f"entry {entry_id}: a page came from sourceHash {page['sourceHash']}, the "
                f"pointer is bound to {pointer['sourceHash']}"
            )
        for item in page["entries"]:
            if item["entryId"] != entry_id or item["textOffset"] != len(text):
                raise TaskPayloadError(f"entry {entry_id}: expansion returned another entry "
                                       "or a chunk out of order")
            text += item["text"]
        request = page["next"]
    if not text:
        raise TaskPayloadError(f"entry {entry_id}: expansion returned no text")
    return text


def simulate_handoff(
    handoff: Mapping[str, Any], memory: MemoryAccess, workspace: str | os.PathLike[str]
) -> Resumed:
    """Resume the handed-off task: derive its address, expand it bound to the session's
    sourceHash, decode and apply it under ``workspace``."""
    details = handoff.get("details")
    if not isinstance(details, Mapping):
        raise TaskPayloadError("handoff: no compaction details; nothing to resume from")
    session_id = details.get("sessionId")
    if not isinstance(session_id, str) or not session_id:
        raise TaskPayloadError("handoff: details.sessionId is missing; the session is unknown")
    address = task_address(details)
    pointer = memory.pointer(session_id)
    text = fetch_entry(memory, pointer, address)
    task = decode_task(text, where=f"session {session_id} entry {address}")
    return Resumed(address, task, apply_task(task, Path(workspace)))
