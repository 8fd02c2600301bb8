"""Session → index documents: one per entry, one child per operation of a valid trace.

What is searchable is decided here and only here, and every searchable text passes
once through :func:`fabric_memory.redact.redact_texts` on its way into an item (see
docs/secrets.md): the index never holds a secret. A ``fabric_exec`` result
contributes its valid trace (operations as children, phase names on the parent)
and nothing else: never its outer output, its legacy audits, its operation
results or the ``fabric_exec`` source code of the call. Verdicts come from
:func:`fabric_memory.trace.read_fabric_result`; this module never judges a trace.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Literal

import orjson

from ..redact import redact_texts
from ..session import Entry, Session
from ..trace import FabricResult, TraceOperation, TracePhase, read_fabric_result

ItemKind = Literal["entry", "operation"]
FABRIC_TOOL = "fabric_exec"


@dataclass(frozen=True, slots=True)
class Item:
    """One index document: a session entry, or one operation of a valid trace."""

    kind: ItemKind
    address: str
    entry_id: str
    parent_id: str | None
    position: int
    """Index of the entry in file order (an operation carries its parent's)."""
    sequence: int | None
    type: str
    role: str | None
    tool: str | None
    ref: str | None
    provider: str | None
    action: str | None
    outcome: str | None
    failure_stage: str | None
    timestamp: str | None
    time_ms: int | None
    is_error: bool
    on_active: bool
    line: int
    offset: int
    length: int
    text: str
    """The searchable text (never shown as the source: expansion reads the file)."""
    record: dict[str, Any] | None
    """The normalized operation record (operations only)."""


@dataclass(frozen=True, slots=True)
class NormalizedSession:
    """A session's documents in file order, each operation right after its parent."""

    items: tuple[Item, ...]
    entries: int
    operations: int
    duplicate_addresses: tuple[str, ...]
    """Addresses that occur more than once (duplicate entry ids): incomplete coverage."""
    redacted: dict[str, int]
    """Secrets replaced in the item texts, by kind."""


def normalize_session(session: Session) -> NormalizedSession:
    """Every entry of ``session`` as an :class:`Item`, children after their parent."""
    active = session.active_ids()
    items: list[Item] = []
    operations = 0
    for position, entry in enumerate(session.entries):
        fabric = _fabric_result(entry)
        parent = _entry_item(entry, position, entry.id in active, fabric)
        items.append(parent)
        if fabric is not None and fabric.verdict == "valid":
            for op in fabric.operations:
                items.append(_operation_item(parent, op))
                operations += 1
    redacted: Counter[str] = Counter()
    texts = redact_texts([item.text for item in items], redacted)
    for at, (item, text) in enumerate(zip(items, texts, strict=True)):
        if text is not item.text:
            items[at] = replace(item, text=text)
    counts = Counter(item.address for item in items)
    duplicates = tuple(sorted(address for address, n in counts.items() if n > 1))
    return NormalizedSession(tuple(items), len(session.entries), operations, duplicates,
                             dict(redacted))


def source_records(entry_id: str, raw: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Address → normalized record of every operation and phase of the entry's valid trace.

    ``raw`` is the entry's JSON object as read from its line; this is what expansion
    shows for an operation or phase address.
    """
    message = raw.get("message") if raw.get("type") == "message" else None
    if not isinstance(message, dict):
        return {}
    fabric = read_fabric_result(entry_id, message)
    if fabric is None or fabric.verdict != "valid":
        return {}
    records = {op.address: operation_record(entry_id, op) for op in fabric.operations}
    records.update((phase.address, phase_record(entry_id, phase)) for phase in fabric.phases)
    return records


def operation_record(entry_id: str, op: TraceOperation) -> dict[str, Any]:
    """The persisted operation minus its result: what memory knows about one call."""
    record: dict[str, Any] = {
        "kind": "operation",
        "address": op.address,
        "entryId": entry_id,
        "sequence": op.sequence,
        "ref": op.ref,
    }
    if op.provider is not None:
        record["provider"] = op.provider
    if op.action is not None:
        record["action"] = op.action
    record["args"] = op.args
    record["outcome"] = op.outcome
    if op.failure_stage is not None:
        record["failureStage"] = op.failure_stage
    if op.error is not None:
        record["error"] = op.error
    return record


def phase_record(entry_id: str, phase: TracePhase) -> dict[str, Any]:
    return {"kind": "phase", "address": phase.address, "entryId": entry_id,
            "index": phase.index, "name": phase.name}


def record_text(record: Mapping[str, Any]) -> str:
    """The exact text expansion returns for an operation or phase record."""
    return orjson.dumps(record).decode()


def timestamp_ms(entry: Entry) -> int | None:
    """Milliseconds since the epoch of the entry's ISO timestamp (else its message's)."""
    if entry.timestamp is not None:
        parsed = parse_time(entry.timestamp)
        if parsed is not None:
            return parsed
    message = entry.message
    stamp = message.get("timestamp") if message is not None else None
    return stamp if type(stamp) is int else None


def parse_time(text: str) -> int | None:
    """An ISO-8601 time (``Z`` or offset; naive means UTC) as epoch milliseconds."""
    try:
        parsed = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return int(parsed.timestamp() * 1000)


def _fabric_result(entry: Entry) -> FabricResult | None:
    message = entry.message
    return read_fabric_result(entry.id, message) if message is not None else None


def _entry_item(entry: Entry, position: int, on_active: bool, fabric: FabricResult | None) -> Item:
    message = entry.message
    role = message.get("role") if message is not None else None
    tool = message.get("toolName") if role == "toolResult" and message is not None else None
    return Item(
        kind="entry",
        address=entry.id,
        entry_id=entry.id,
        parent_id=entry.parent_id,
        position=position,
        sequence=None,
        type=entry.type,
        role=role if isinstance(role, str) else None,
        tool=tool if isinstance(tool, str) else None,
        ref=None,
        provider=None,
        action=None,
        outcome=fabric.outcome if fabric is not None else None,
        failure_stage=None,
        timestamp=entry.timestamp,
        time_ms=timestamp_ms(entry),
        is_error=_is_error(message),
        on_active=on_active,
        line=entry.line,
        offset=entry.offset,
        length=entry.length,
        text=entry_text(entry, fabric),
        record=None,
    )


def _operation_item(parent: Item, op: TraceOperation) -> Item:
    """The child inherits where and when from its parent entry; the rest is the call's."""
    words = [op.ref, op.provider, op.action, op.outcome, op.failure_stage, op.error]
    words.extend(_leaves(op.args))
    return Item(
        kind="operation", address=op.address, entry_id=parent.entry_id,
        parent_id=parent.entry_id, position=parent.position, sequence=op.sequence,
        type="operation", role=parent.role, tool=parent.tool, ref=op.ref, provider=op.provider,
        action=op.action, outcome=op.outcome, failure_stage=op.failure_stage,
        timestamp=parent.timestamp, time_ms=parent.time_ms, is_error=op.outcome != "succeeded",
        on_active=parent.on_active, line=parent.line, offset=parent.offset,
        length=parent.length, text=_join(words, " "),
        record=operation_record(parent.entry_id, op),
    )


def entry_text(entry: Entry, fabric: FabricResult | None = None) -> str:
    """The searchable text of one entry (see the module docstring for what is left out)."""
    raw = entry.raw
    message = entry.message
    if message is not None:
        return _join(_message_words(message, fabric))
    kind = entry.type
    if kind in ("compaction", "branch_summary"):
        return _join([_string(raw.get("summary")), _string(raw.get("shortSummary"))])
    if kind == "custom_message":
        return _join([_string(raw.get("customType")), *_content_words(raw.get("content"))])
    if kind == "label":
        return _join([_string(raw.get("label"))])
    if kind == "session_info":
        return _join([_string(raw.get("name"))])
    if kind == "model_change":
        return _join([_string(raw.get("provider")), _string(raw.get("modelId"))])
    if kind == "thinking_level_change":
        return _join([_string(raw.get("thinkingLevel"))])
    return ""


def _message_words(message: dict[str, Any], fabric: FabricResult | None) -> list[str | None]:
    role = message.get("role")
    if fabric is not None:
        # The outer output and the audits of fabric_exec are never searchable; only
        # what its valid trace says (phase names here, operations as children).
        words: list[str | None] = [FABRIC_TOOL]
        if fabric.verdict == "valid":
            words.extend(phase.name for phase in fabric.phases)
        return words
    if role == "bashExecution":
        return [_string(message.get("command")), _string(message.get("output"))]
    if role in ("branchSummary", "compactionSummary"):
        return [_string(message.get("summary"))]
    words = [_string(message.get("toolName")), _string(message.get("errorMessage"))]
    words.extend(_content_words(message.get("content")))
    sections = message.get("sections")
    if isinstance(sections, dict):
        words.extend(_string(value) for value in sections.values())
    return words


def _content_words(content: object) -> Iterator[str | None]:
    if isinstance(content, str):
        yield content
        return
    if not isinstance(content, list):
        return
    for part in content:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "text":
            yield _string(part.get("text"))
        elif kind == "thinking":
            yield _string(part.get("thinking"))
        elif kind == "toolCall":
            name = _string(part.get("name"))
            yield name
            # fabric_exec source code is not memory: only its trace is.
            if name != FABRIC_TOOL:
                yield from _leaves(part.get("arguments"))


def _leaves(value: object) -> Iterator[str]:
    """String and number leaves of a JSON value, depth first, without recursion."""
    stack = [value]
    while stack:
        current = stack.pop()
        if isinstance(current, str):
            yield current
        elif isinstance(current, (int, float)) and not isinstance(current, bool):
            yield str(current)
        elif isinstance(current, dict):
            stack.extend(reversed(list(current.values())))
        elif isinstance(current, list):
            stack.extend(reversed(current))


def _is_error(message: dict[str, Any] | None) -> bool:
    if message is None:
        return False
    if message.get("isError") is True or message.get("stopReason") == "error":
        return True
    code = message.get("exitCode") if message.get("role") == "bashExecution" else None
    return type(code) is int and code != 0


def _string(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _join(words: Iterator[str | None] | list[str | None], separator: str = "\n") -> str:
    return separator.join(word for word in words if word)
