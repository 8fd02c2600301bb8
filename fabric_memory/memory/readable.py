"""An entry as a model reads it: the text ``expand`` answers with by default.

Rendered from the per-entry view (:class:`fabric_memory.view.EntryView`) alone, so the
sessions of every agent whose reader builds that view read the same way. A head line
(address, role or type, the tool a result answers, ``error``, time), then what was said:
the message text, the thinking text (never its signature), each tool call as
``call name(arguments)`` with long or multi-line arguments below it, a tool result's text,
a compaction's summary, and a size note for data left out (images). Bookkeeping (usage,
cost, signatures, API and model names, ids) and terminal control codes (colours, cursor
moves) are left out; ``raw`` gives the verbatim line.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import orjson

from ..sources.reader import IDS
from ..view import USAGE, EntryView, ToolCall, content_text
from ..words import strip_controls

INLINE_CHARS: Final = 120
"""Longest string argument shown inside ``name(...)``; a longer or multi-line one is shown
below the call, whole."""
ENTRY_KEYS: Final = frozenset({"type", "id", "parentId", "timestamp", "summary", "content",
                               "details", "fromHook", IDS, USAGE})
"""Keys of a non-message entry that say nothing to a reader, or are rendered already."""
MESSAGE_KEYS: Final = ENTRY_KEYS | {"role", "toolName", "toolCallId", "isError", "usage",
                                    "cost", "api", "provider", "model", "responseId",
                                    "stopReason"}
"""The same for a message: the provider's bookkeeping of a turn included."""
INDENT: Final = "    "
DEEP: Final = "[nested too deep to show as text; expand with raw to read it]"
KINDS: Final = ("user", "assistant", "tool", "edit", "error", "other")
"""What an entry is, for picking some out of a range: a user's or the assistant's message, a
tool result, an edit (a call of an editing tool, or its result), an error (a failed tool
result), anything else (compactions, model changes, session headers)."""
EDITING: Final = frozenset({"edit", "write", "patch"})
"""The kinds of tool (:data:`fabric_memory.sources.registry.TOOLS`) that change files."""


def entry_kinds(view: EntryView) -> frozenset[str]:
    """The :data:`KINDS` ``view`` is (an assistant's edit call is ``assistant`` and ``edit``)."""
    kinds = set()
    if view.role == "user":
        kinds.add("user")
    elif view.role == "assistant":
        kinds.add("assistant")
        if any(_edits(call.name) for call in view.tool_calls):
            kinds.add("edit")
    elif view.role == "toolResult":
        kinds.add("tool")
        if _edits(view.tool_name):
            kinds.add("edit")
    else:
        kinds.add("other")
    if view.is_error:
        kinds.add("error")
    return frozenset(kinds)


def render_entry(view: EntryView, address: str) -> str:
    """The readable text of one entry (see the module docstring)."""
    head = [address, view.role or view.type]
    if view.tool_name:
        head.append(view.tool_name)
    if view.is_error:
        head.append("error")
    if view.timestamp:
        head.append(view.timestamp)
    lines = [" ".join(head)]
    if view.message is not None:
        _message(view, lines)
    else:
        _other(view, lines)
    # A tool's coloured output reads as its words (raw keeps the bytes).
    return strip_controls("\n".join(lines))


def _edits(tool: str | None) -> bool:
    """Whether the tool named ``tool`` changes files, by its agent's tool table."""
    if not tool:
        return False
    from ..sources.registry import TOOLS  # (every agent's reader: only when a tool is shown)

    known = TOOLS.get(tool)
    return known is not None and known.kind in EDITING


def _message(view: EntryView, lines: list[str]) -> None:
    thinking = view.thinking
    if thinking:
        lines.append("thinking:")
        lines.append(_indented(thinking))
    said = view.text or view.result_text
    if said:
        lines.append(said)
    lines.extend(f"[{media} characters of data left out]" for media in view.media)
    for call in view.tool_calls:
        lines.extend(_call(call))
    if not (thinking or said or view.media or view.tool_calls):
        _fields(view.message or {}, lines, skip=MESSAGE_KEYS)


def _other(view: EntryView, lines: list[str]) -> None:
    summary = view.summary
    if summary is not None:
        lines.append(summary)
    said = content_text(view.raw.get("content"))
    if said:
        lines.append(said)
    _fields(view.raw, lines, skip=ENTRY_KEYS)


def _fields(values: Mapping[str, Any], lines: list[str], skip: frozenset[str]) -> None:
    for key, value in values.items():
        if key in skip or value is None:
            continue
        if isinstance(value, str) and "\n" in value:
            lines.append(f"{key}:")
            lines.append(_indented(value))
        else:
            lines.append(f"{key}: {_shown(value)}")


def _call(call: ToolCall) -> list[str]:
    inline: list[str] = []
    below: list[str] = []
    for key, value in call.arguments.items():
        if isinstance(value, str) and (len(value) > INLINE_CHARS or "\n" in value):
            inline.append(f"{key}=↓")
            below.extend((f"  {key}:", _indented(value)))
        else:
            inline.append(f"{key}={_shown(value)}")
    return [f"call {call.name}({', '.join(inline)})", *below]


def _shown(value: Any) -> str:
    """A value as JSON (strings quoted, non-ASCII kept)."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # nested deeper than orjson writes (and than repr can recurse)
        return DEEP


def _indented(text: str) -> str:
    return "\n".join(INDENT + line for line in text.split("\n"))


def render_record(record: Mapping[str, Any]) -> str:
    """The readable text of an operation's or a phase's normalized record: a head line
    (address, kind, ref, outcome), then each other field."""
    head = [str(record.get(key)) for key in ("address", "kind", "ref", "outcome")
            if record.get(key) is not None]
    lines = [" ".join(head)]
    _fields(record, lines, skip=frozenset({"address", "kind", "ref", "outcome", "entryId"}))
    return "\n".join(lines)
