"""Session → index documents: one per entry, one child per operation of a valid trace.

What is searchable is decided here and only here, and every searchable text passes
once through :func:`fabric_memory.words.searchable` (terminal control codes removed, so a
coloured word is a word) and then :func:`fabric_memory.redact.redact_texts` on its way into
an item (see docs/secrets.md): the index never holds a secret. Before that, what only the entry's
structure tells is masked where it is read: an argument's value by its key's name
(:func:`~fabric_memory.redact.mask_named`, the rule ``expand`` uses), a secret cut between
two text blocks of one content list (:func:`~fabric_memory.redact.mask_blocks`).
A ``fabric_exec`` result contributes its valid trace (operations as children, phase
names on the parent) and nothing else: never its outer output, its legacy audits, its
operation results or the ``fabric_exec`` source code of the call. Verdicts come from
each entry's view (:mod:`fabric_memory.view`); this module never judges a trace.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

import orjson

from ..errors import clipped
from ..redact import is_secret_name, mask_blocks, mask_named, redact_texts
from ..session import Entry, LineProblem, Session, decode_line, glued_objects, migrated_id
from ..sources.reader import IDS
from ..trace import FabricResult, TraceOperation, TracePhase
from ..view import EntryView, view_entry
from ..words import searchable

ItemKind = Literal["entry", "operation"]
FABRIC_TOOL = "fabric_exec"


# Built per entry of every session indexed and never changed afterwards; not ``frozen``,
# which would make building it ~4x slower (each field set through ``object.__setattr__``).
@dataclass(slots=True)
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
    notes: tuple[LineProblem, ...] = ()
    """Values left out of the documents (a time outside JavaScript's date range)."""
    salvaged: tuple[LineProblem, ...] = ()
    """Glued lines whose objects were indexed although Pi drops the line."""
    redacted: dict[str, int] | None = None
    """Secrets replaced in the item texts, by kind."""


def normalize_session(session: Session) -> NormalizedSession:
    """Every entry of ``session`` as an :class:`Item`, children after their parent, then
    the objects of glued lines (positions after the last entry)."""
    active = session.active_ids()
    redacted: Counter[str] = Counter()
    items: list[Item] = []
    notes: list[LineProblem] = []
    operations = 0
    entries = [*session.entries, *_salvaged_entries(session)]
    for position, entry in enumerate(entries):
        view = entry.view
        fabric = view.fabric
        parent = _entry_item(entry, view, position, entry.id in active, redacted)
        items.append(parent)
        if parent.time_ms is None and (note := _time_note(entry)) is not None:
            notes.append(note)
        # A salvaged object's line is not one JSON value: its operations have no record
        # expansion could read back, so they are not indexed.
        if fabric is not None and fabric.verdict == "valid" and position < len(session.entries):
            for op in fabric.operations:
                items.append(_operation_item(parent, op, redacted))
                operations += 1
    # Terminal codes go first: a colour code inside a secret would hide it from redaction.
    texts = redact_texts([searchable(item.text) for item in items], redacted)
    for at, (item, text) in enumerate(zip(items, texts, strict=True)):
        if text is not item.text:
            items[at] = replace(item, text=text)
    counts = Counter(item.address for item in items)
    duplicates = tuple(sorted(address for address, n in counts.items() if n > 1))
    salvaged = tuple(
        LineProblem(glued.line, f"salvaged {len(glued.objects)} JSON objects glued on one line "
                                "(Pi drops the line; they are indexed off-branch)")
        for glued in session.glued
    )
    return NormalizedSession(tuple(items), len(entries), operations, duplicates,
                             tuple(notes), salvaged, dict(redacted))


def _salvaged_entries(session: Session) -> list[Entry]:
    """The objects of glued lines as off-branch entries. Each keeps its own id as its
    address when no entry has it, else gets ``L<line>.<k>``; its span is the whole line."""
    entries: list[Entry] = []
    taken = {entry.id for entry in session.entries}
    for glued in session.glued:
        for number, value in enumerate(glued.objects):
            own, kind, parent, stamp = (value.get(k) for k in ("id", "type", "parentId",
                                                               "timestamp"))
            address = own if isinstance(own, str) and own and own not in taken else (
                f"{migrated_id(glued.line)}.{number}")
            taken.add(address)
            entries.append(Entry(
                id=address, parent_id=parent if isinstance(parent, str) and parent else None,
                type=kind if isinstance(kind, str) else "",
                timestamp=stamp if isinstance(stamp, str) else None, line=glued.line,
                offset=glued.offset, length=glued.length, raw=value, migrated=True,
                has_id=False,
            ))
    return entries


def line_value(data: bytes, line: int, entry_id: str) -> Any:
    """The JSON value entry ``entry_id`` has on its line ``data`` (line number ``line``): the
    line's value, or for an object salvaged from a glued line (:func:`_salvaged_entries`)
    that object ({} when it is no longer there)."""
    try:
        return decode_line(data)
    except ValueError:  # glued objects (or a line no reader takes): what was salvaged of it
        objects = glued_objects(data)
    numbered = f"{migrated_id(line)}."
    number = entry_id.removeprefix(numbered)
    if entry_id.startswith(numbered) and number.isdigit():
        return objects[int(number)] if int(number) < len(objects) else {}
    return next((value for value in objects if value.get("id") == entry_id), {})


def source_records(entry_id: str, raw: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Address → normalized record of every operation and phase of the entry's valid trace.

    ``raw`` is the entry's JSON object as read from its line; this is what expansion
    shows for an operation or phase address.
    """
    kind = raw.get("type")
    if not isinstance(kind, str):
        return {}
    fabric = view_entry(entry_id, kind, None, None, dict(raw)).fabric
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


def _message_time(entry: Entry) -> object:
    message = entry.message
    return message.get("timestamp") if message is not None else None


def _time_note(entry: Entry) -> LineProblem | None:
    """Why an entry without a time has none, when it had an integer out of range."""
    stamp = _message_time(entry)
    if type(stamp) is not int:
        return None
    return LineProblem(entry.line, f"message.timestamp {clipped(stamp)} is outside "
                                   "JavaScript's date range; indexed without a time")


def _entry_item(entry: Entry, view: EntryView, position: int, on_active: bool,
                counts: Counter[str]) -> Item:
    fabric = view.fabric
    return Item(
        kind="entry",
        address=entry.id,
        entry_id=entry.id,
        parent_id=entry.parent_id,
        position=position,
        sequence=None,
        type=entry.type,
        role=view.role,
        tool=view.tool_name,
        ref=None,
        provider=None,
        action=None,
        outcome=fabric.outcome if fabric is not None else None,
        failure_stage=None,
        timestamp=entry.timestamp,
        time_ms=view.time_ms,
        is_error=_is_error(view.message),
        on_active=on_active,
        line=entry.line,
        offset=entry.offset,
        length=entry.length,
        text=entry_text(view, counts),
        record=None,
    )


def _operation_item(parent: Item, op: TraceOperation, counts: Counter[str]) -> Item:
    """The child inherits where and when from its parent entry; the rest is the call's."""
    words = [op.ref, op.provider, op.action, op.outcome, op.failure_stage, op.error]
    words.extend(_leaves(op.args, counts))
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


def entry_text(view: EntryView, counts: Counter[str] | None = None) -> str:
    """The searchable text of one entry (see the module docstring for what is left out),
    then the ids its reader found in structural fields (:data:`~fabric_memory.sources.
    reader.IDS`); what only the entry's structure shows as a secret is masked (counted in
    ``counts``), the rest is left to :func:`~fabric_memory.redact.redact_texts`."""
    said = _said(view, counts)
    ids = view.raw.get(IDS)
    if type(ids) is not list or not ids:
        return said
    return _join([said, *(value for value in ids if isinstance(value, str))])


def _said(view: EntryView, counts: Counter[str] | None) -> str:
    raw = view.raw
    message = view.message
    if message is not None:
        return _join(_message_words(message, view.fabric, counts))
    kind = view.type
    if kind in ("compaction", "branch_summary"):
        return _join([_string(raw.get("summary")), _string(raw.get("shortSummary"))])
    if kind == "custom_message":
        return _join([_string(raw.get("customType")),
                      *_content_words(raw.get("content"), counts)])
    if kind == "label":
        return _join([_string(raw.get("label"))])
    if kind == "session_info":
        return _join([_string(raw.get("name"))])
    if kind == "model_change":
        return _join([_string(raw.get("provider")), _string(raw.get("modelId"))])
    if kind == "thinking_level_change":
        return _join([_string(raw.get("thinkingLevel"))])
    return ""


def _message_words(message: dict[str, Any], fabric: FabricResult | None,
                   counts: Counter[str] | None) -> list[str | None]:
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
    words.extend(_content_words(message.get("content"), counts))
    sections = message.get("sections")
    if isinstance(sections, dict):
        words.extend(_string(value) for value in sections.values())
    # Ids are recalled by value (``toolu_…``, ``call_…``): the call a result answers.
    words.append(_string(message.get("toolCallId")))
    return words


def _content_words(content: object, counts: Counter[str] | None) -> Iterator[str | None]:
    if isinstance(content, str):
        yield content
        return
    if not isinstance(content, list):
        return
    for part in mask_blocks(content, counts):
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
                yield from _leaves(part.get("arguments"), counts)
            yield _string(part.get("id"))


def _leaves(value: object, counts: Counter[str] | None) -> Iterator[str]:
    """String and number leaves of a JSON value, depth first, without recursion; a string
    under a secret-named key (``password``, ``env.DB_PASSWORD``, ``headers.X-Api-Key``)
    masked by that name (:func:`~fabric_memory.redact.mask_named`)."""
    stack = [value]
    while stack:
        current = stack.pop()
        if isinstance(current, str):
            yield current
        elif isinstance(current, (int, float)) and not isinstance(current, bool):
            yield str(current)
        elif isinstance(current, dict):
            stack.extend(reversed([
                mask_named(key, item, counts) if type(item) is str and is_secret_name(key)
                else item for key, item in current.items()]))
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
