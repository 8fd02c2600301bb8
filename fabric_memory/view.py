"""The per-entry view: what every later stage reads of one session entry, built once.

A session entry is parsed JSON; the view is what compaction, the memory index,
``audit`` and ``inspect`` need of it, read out once: the role, the tool a result
answers, the message's text, the tool calls an assistant makes, the guarded
Fabric result (the trace guard runs here and nowhere else) and the time. Nothing
downstream re-parses the entry's message or re-runs the guard.

:attr:`fabric_memory.session.Entry.view` builds it from a file's entry on first
use; the compaction hook builds it straight from the host's JSON
(:func:`view_entry`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, cast

from ._js import iso_ms
from .trace import FabricResult, read_fabric_result

FABRIC_TOOL: Final = "fabric_exec"
MAX_TIME_MS: Final = 8_640_000_000_000_000
"""JavaScript's Date range (±10^8 days from 1970), which holds every time Pi writes; Tantivy's
64-bit fields hold it too."""
_TEXT_ROLES: Final = frozenset({"user", "assistant", "custom"})
USAGE: Final = "usage"
"""Where an entry records what its turn cost in tokens: Pi writes it in the message
(``message.usage``, with ``cost.total``); the reader of another agent writes it beside the
message (``raw["usage"]``, no cost), so compaction's estimate, which reads only Pi's, never
sees it (:func:`fabric_memory.sources.reader.add_usage`)."""
_TOKEN_KEYS: Final = ("input", "output", "cacheRead", "cacheWrite")
_UNREAD: Final = object()


# Built per entry on the hook's path and never changed afterwards; not ``frozen``, which
# would make building it ~5x slower (each field set through ``object.__setattr__``).
@dataclass(slots=True)
class ToolCall:
    """One ``toolCall`` block of an assistant entry."""

    entry_id: str
    call_id: str
    name: str
    arguments: Mapping[str, Any]


# Built per entry on the hook's path and never changed afterwards; not ``frozen``, which
# would make building it ~5x slower (each field set through ``object.__setattr__``).
@dataclass(slots=True)
class EntryView:
    """One session entry as the later stages read it."""

    id: str
    parent_id: str | None
    type: str
    timestamp: str | None
    raw: dict[str, Any]
    message: dict[str, Any] | None
    """``raw["message"]`` of a ``message`` entry when it is an object."""
    role: str | None
    tool_name: str | None
    """The tool a ``toolResult`` answers."""
    call_id: str | None
    """The ``toolCallId`` a ``toolResult`` answers."""
    text: str
    """The text blocks of a user, assistant or custom message, one per line (else "")."""
    tool_calls: tuple[ToolCall, ...]
    blocks: tuple[str, ...] = ()
    """The text blocks ``text`` joins, when there are two or more (a secret may be cut
    between two: the compaction masks it on both sides)."""
    _fabric: FabricResult | object | None = field(default=_UNREAD, init=False, repr=False,
                                                  compare=False)

    @property
    def fabric(self) -> FabricResult | None:
        """The guarded ``fabric_exec`` result (:func:`fabric_memory.trace.read_fabric_result`):
        the guard runs on first use, once, so entries a stage never looks at (those an
        earlier compaction already covers) cost no guard."""
        fabric = self._fabric
        if fabric is _UNREAD:
            message = self.message
            fabric = self._fabric = (
                read_fabric_result(self.id, message)
                if self.tool_name == FABRIC_TOOL and message is not None
                else None
            )
        return cast("FabricResult | None", fabric)  # quoted: no union built per call

    @property
    def result_text(self) -> str:
        """The text a ``toolResult`` (or another message without a text role) carries; ""
        when none."""
        if self.message is None or self.role in _TEXT_ROLES:
            return ""
        return content_text(self.message.get("content"))

    @property
    def thinking(self) -> str:
        """The thinking text of an assistant message, one block per line (never its
        signature)."""
        return "\n".join(_blocks_of(self.message, "thinking", "thinking"))

    @property
    def media(self) -> tuple[str, ...]:
        """What non-text content the message carries, as ``<mime type> <characters>`` (the
        data itself is left out)."""
        return tuple(f"{kind} {size}" for kind, size in _media_of(self.message))

    @property
    def is_error(self) -> bool:
        """A tool result that reports an error."""
        return self.message is not None and self.message.get("isError") is True

    @property
    def summary(self) -> str | None:
        """The summary a compaction or branch-summary entry carries."""
        summary = self.raw.get("summary") if self.message is None else None
        return summary if isinstance(summary, str) else None

    @property
    def usage(self) -> TokenUsage | None:
        """The tokens (and, where the agent records it, the cost) of this entry's turn."""
        recorded = self.message.get(USAGE) if self.message is not None else None
        if not _is_object(recorded):
            recorded = self.raw.get(USAGE)
        return read_usage(cast("Mapping[str, Any]", recorded)) if _is_object(recorded) else None

    @property
    def time_ms(self) -> int | None:
        """Epoch milliseconds of the entry's ISO timestamp, else its message's integer
        ``timestamp`` when inside JavaScript's date range."""
        if self.timestamp is not None:
            parsed = iso_ms(self.timestamp.strip())
            if parsed is not None:
                return parsed
        stamp = self.message.get("timestamp") if self.message is not None else None
        return stamp if type(stamp) is int and abs(stamp) <= MAX_TIME_MS else None


@dataclass(frozen=True, slots=True)
class TokenUsage:
    """The tokens one turn used; ``cost`` only where the agent records it (Pi)."""

    input: int
    output: int
    cache_read: int
    cache_write: int
    cost: float | None


def read_usage(recorded: Mapping[str, Any]) -> TokenUsage:
    """A usage in Pi's shape (``input``, ``output``, ``cacheRead``, ``cacheWrite``, and
    ``cost.total`` when recorded); a count that is not a positive whole number is 0."""
    input, output, cache_read, cache_write = (
        n if type(n) is int and n > 0 else 0 for n in (recorded.get(key) for key in _TOKEN_KEYS))
    cost: Any = recorded.get("cost")
    total: Any = cost.get("total") if _is_object(cost) else None
    spent = float(total) if type(total) in (int, float) and total >= 0 else None
    return TokenUsage(input, output, cache_read, cache_write, spent)


def content_text(content: Any) -> str:
    """The text of a message's ``content``: the string itself, or its text blocks, one per
    line."""
    return _read_content(content, None)[0]


def _blocks_of(message: dict[str, Any] | None, kind: str, key: str) -> list[str]:
    """The ``key`` strings of the ``kind`` blocks of a message's content."""
    content = message.get("content") if message is not None else None
    if not isinstance(content, list):
        return []
    return [block[key] for block in content
            if _is_object(block) and block.get("type") == kind and isinstance(block.get(key), str)]


def _media_of(message: dict[str, Any] | None) -> list[tuple[str, int]]:
    content = message.get("content") if message is not None else None
    if not isinstance(content, list):
        return []
    found = []
    for block in content:
        if _is_object(block) and block.get("type") == "image":
            mime, data = block.get("mimeType"), block.get("data")
            found.append((mime if isinstance(mime, str) else "image",
                          len(data) if isinstance(data, str) else 0))
    return found


def _is_object(value: object) -> bool:
    """A JSON object (``type() is dict`` first: an ABC check costs ten times more)."""
    return type(value) is dict or isinstance(value, Mapping)


def _read_content(
    content: Any, caller: str | None
) -> tuple[str, tuple[ToolCall, ...], tuple[str, ...]]:
    """The text of ``content`` (:func:`content_text`), for an assistant entry (``caller``:
    its id) its ``toolCall`` blocks, and its text blocks when there are two or more: one
    pass over the blocks for all three."""
    if type(content) is not list:
        if isinstance(content, str):
            return content, (), ()
        if not isinstance(content, list):
            return "", (), ()
    texts = []
    calls: list[ToolCall] | None = None  # most messages have none
    for block in content:
        # ``type() is dict`` first: an ABC check costs ten times more.
        if not (type(block) is dict or isinstance(block, Mapping)):
            continue
        kind = block.get("type")
        if kind == "text":
            text = block.get("text")
            if type(text) is str or isinstance(text, str):
                texts.append(text)
        elif kind == "toolCall" and caller is not None:
            call_id, name, arguments = block.get("id"), block.get("name"), block.get("arguments")
            if call_id and (type(call_id) is str or isinstance(call_id, str)):
                if calls is None:
                    calls = []
                calls.append(
                    ToolCall(
                        caller,
                        call_id,
                        name if type(name) is str or isinstance(name, str) else "",
                        cast("Mapping[str, Any]", arguments) if _is_object(arguments) else {},
                    )
                )
    blocks = tuple(texts) if len(texts) > 1 else ()
    return "\n".join(texts), tuple(calls) if calls else (), blocks


def view_entry(
    entry_id: str,
    entry_type: str,
    parent_id: str | None,
    timestamp: str | None,
    raw: dict[str, Any],
) -> EntryView:
    """The view of one entry (its id, type, parent and timestamp already checked)."""
    message = raw.get("message") if entry_type == "message" else None
    if type(message) is not dict:
        return EntryView(entry_id, parent_id, entry_type, timestamp, raw, None, None, None, None,
                         "", ())
    role = message.get("role")
    if type(role) is not str:
        role = None
    tool_name = call_id = None
    text = ""
    calls: tuple[ToolCall, ...] = ()
    blocks: tuple[str, ...] = ()
    if role == "toolResult":
        name, answered = message.get("toolName"), message.get("toolCallId")
        tool_name = name if type(name) is str else None
        call_id = answered if type(answered) is str and answered else None
    elif role in _TEXT_ROLES:
        caller = entry_id if role == "assistant" else None
        text, calls, blocks = _read_content(message.get("content"), caller)
    return EntryView(entry_id, parent_id, entry_type, timestamp, raw, message, role, tool_name,
                     call_id, text, calls, blocks)
