"""Factory's Droid CLI: ``~/.factory/sessions/<encoded cwd>/<session id>.jsonl``
(``$FACTORY_HOME`` moves ``~/.factory``), beside a ``<session id>.settings.json`` (not read).

The first line is ``{"type": "session_start", "id", "title", "cwd"}``; then each line is
``{"type": "message", "id", "timestamp", "parentId"?, "message": {role, content}}`` whose
content holds Anthropic-style blocks: ``text``, ``thinking``, ``tool_use`` (``id``,
``name``, ``input``) in an assistant message and ``tool_result`` (``tool_use_id``,
``content``, ``is_error``) in a user message; other line types (``todo_state``, …) are not
read. Each message is one entry addressed by its ``id`` (``L<line>`` without one), its
parent its ``parentId`` or the message before; each tool result of a message an entry of its
own (``<id>.1``, …).
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ..errors import NotASessionError, clipped
from .claude_code import TOOLS as CLAUDE_TOOLS
from .reader import (
    Entries,
    JsonLines,
    SourceLine,
    SourceReader,
    block_text,
    build_session,
    message,
    name_ids,
    string,
    text_block,
    thinking_block,
    tool_call_block,
    tool_result,
)
from .tools import Tool, file_tool, shell_tool

if TYPE_CHECKING:  # loaded when a file is read (see fabric_memory.sources.reader)
    from ..session import Session

AGENT: Final = "droid"
HOME_ENV: Final = "FACTORY_HOME"
SKIPPED: Final = frozenset({"todo_state", "session_end", "settings", "compaction_state"})
"""Line types that hold no conversation: not read (any other unknown type is a note)."""
_EXIT_CODE: Final = re.compile(r"(?:Exit code:?|exited with code) (-?\d+)", re.IGNORECASE)


def droid_sessions_dir() -> Path:
    """``$FACTORY_HOME/sessions``, else ``~/.factory/sessions``."""
    configured = os.environ.get(HOME_ENV)
    return (Path(configured).expanduser() if configured else Path.home() / ".factory") / (
        "sessions")


def _homes(projects: Collection[str]) -> tuple[Path, ...]:
    return (droid_sessions_dir(),)


def recognises(first: Any, path: str) -> bool:
    """A Droid session: its first line is ``{"type": "session_start", "id", …}``."""
    return (type(first) is dict and first.get("type") == "session_start"
            and isinstance(first.get("id"), str))


def read(path: str, max_line_bytes: int) -> Session:
    lines = JsonLines(path, max_line_bytes)
    entries = Entries()
    tools: dict[str, str] = {}
    tails: dict[str, str] = {}
    start: dict[str, Any] | None = None
    for line in lines:
        value = line.value
        kind = string(value.get("type")) if type(value) is dict else None
        if type(value) is not dict:
            entries.note(line, "not a JSON object; skipped")
        elif kind == "session_start" and start is None:
            start = value
        elif kind == "message" and type(value.get("message")) is dict:
            _message(line, value, entries, tools, tails)
        elif kind not in SKIPPED:
            entries.note(line, f"Droid line of type {clipped(value.get('type'))} not read")
    if start is None:
        raise NotASessionError(path, None, "no session_start line (not a Droid session)")
    session_id = string(start.get("id")) or Path(path).stem
    if entries.entries:
        name_ids(entries.entries[0].raw, [session_id, string(start.get("title"))])
    return build_session(lines, entries, agent=AGENT, session_id=session_id,
                         project=string(start.get("cwd")), header=start)


def _message(line: SourceLine, value: dict[str, Any], entries: Entries,
             tools: dict[str, str], tails: dict[str, str]) -> None:
    """The entries of one message; ``tails``: a message's id -> its last entry (a later
    message naming it as its parent hangs on that, after its tool results)."""
    body = value["message"]
    role, content = string(body.get("role")) or "", body.get("content")
    parts = [{"type": "text", "text": content}] if isinstance(content, str) else (
        content if type(content) is list else [])
    blocks: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for part in parts:
        kind = part.get("type") if type(part) is dict else None
        if kind == "text" and (text := string(part.get("text"))):
            blocks.append(text_block(text))
        elif kind == "thinking" and (text := string(part.get("thinking"))):
            blocks.append(thinking_block(text))
        elif kind == "tool_use":
            call_id, name = string(part.get("id")) or "", string(part.get("name")) or ""
            tools[call_id] = name
            given = part.get("input")
            blocks.append(tool_call_block(call_id, name, given if type(given) is dict
                                          else {"input": given}))
        elif kind == "tool_result":
            call_id = string(part.get("tool_use_id")) or ""
            text = block_text(part.get("content"))
            found = _EXIT_CODE.search(text)
            code = int(found.group(1)) if found else None
            results.append(tool_result(call_id, tools.get(call_id), text,
                                       is_error=part.get("is_error") is True or bool(code),
                                       exit_code=code))
    raws = ([message("assistant" if role == "assistant" else "user", blocks)] if blocks
            else []) + results
    named = string(value.get("parentId"))
    parent = tails.get(named, named) if named else entries.last_id
    for number, raw in enumerate(raws):
        if number == 0:
            entry = entries.add(line, raw, address=string(value.get("id")), parent=parent,
                                timestamp=string(value.get("timestamp")))
        else:
            entries.follow(raw)
    if raws:
        tails[entry.id] = entries.last_id or entry.id


TOOLS: Final[Mapping[str, Tool]] = {
    "Execute": shell_tool("command"),
    "Create": file_tool("write", "created", "file_path", (), ("content",)),
    "Read": CLAUDE_TOOLS["Read"],
    "Edit": CLAUDE_TOOLS["Edit"],
    "MultiEdit": CLAUDE_TOOLS["MultiEdit"],
    "Grep": CLAUDE_TOOLS["Grep"],
    "Glob": CLAUDE_TOOLS["Glob"],
    "TodoWrite": CLAUDE_TOOLS["TodoWrite"],
}
"""Droid's tools as the work trail reads them (``Read``, ``Edit``, ``MultiEdit``,
``Grep``, ``Glob`` and ``TodoWrite`` take the arguments Claude Code's tools of those
names take)."""

DROID = SourceReader(AGENT, recognises, read, _homes, tools=TOOLS)
