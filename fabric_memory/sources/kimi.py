"""Kimi CLI: ``~/.kimi/sessions/<work-dir md5>/<session id>/context.jsonl`` (``$KIMI_SHARE_DIR``
moves ``~/.kimi``); the earlier flat ``sessions/<work-dir md5>/<session id>.jsonl``; and the
files a context is rotated to when it is cleared or reverted (``context_1.jsonl``, …).

A context file holds one JSON object a line: a message ``{role, content, tool_calls?,
tool_call_id?}`` in the shape Kimi sends the model (``user``, ``assistant`` with text and
``think`` parts and OpenAI-style ``tool_calls``, ``tool`` answering one call), and
bookkeeping records whose role starts with ``_`` (``_system_prompt``, ``_checkpoint``,
``_usage``), which are not read. A tool's outcome is told in ``<system>…</system>`` parts:
``ERROR: …`` marks a failure, ``Command failed with exit code: N.`` a shell's exit status.
Lines have no id: each entry's address is its line, ``L<line>``, its parent the entry before.
``wire.jsonl`` beside a context is Kimi's log of what its UI was sent, a second copy of the
same turns: skipped.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import orjson

from ..errors import NotASessionError, clipped
from .claude_code import TOOLS as CLAUDE_TOOLS
from .reader import (
    Entries,
    JsonLines,
    SourceLine,
    SourceReader,
    build_session,
    event,
    message,
    string,
    text_block,
    thinking_block,
    tool_call_block,
    tool_result,
    under,
)
from .tools import FileWork, Tool, Use, argument, file_tool, plan_tool, search_tool, shell_tool

if TYPE_CHECKING:  # loaded when a file is read (see fabric_memory.sources.reader)
    from ..session import Session

AGENT: Final = "kimi"
HOME_ENV: Final = "KIMI_SHARE_DIR"
BOOKKEEPING: Final = frozenset({"_system_prompt", "_checkpoint", "_usage"})
ROLES: Final = frozenset({"user", "assistant", "tool", "system"})
_ERROR: Final = re.compile(r"\A<system>ERROR:")
_EXIT_CODE: Final = re.compile(r"<system>(?:ERROR: )?Command failed with exit code: (-?\d+)\.?")
_CHECKPOINT: Final = re.compile(r"\A<system>CHECKPOINT \d+</system>\Z")
_ROTATED: Final = re.compile(r"\A(context(?:_sub)?)_(\d+)\Z")


def kimi_sessions_dir() -> Path:
    """``$KIMI_SHARE_DIR/sessions``, else ``~/.kimi/sessions``."""
    configured = os.environ.get(HOME_ENV)
    return (Path(configured).expanduser() if configured else Path.home() / ".kimi") / "sessions"


def _homes(projects: Collection[str]) -> tuple[Path, ...]:
    return (kimi_sessions_dir(),)


def recognises(first: Any, path: str) -> bool:
    """A Kimi context file: its first line is one of Kimi's bookkeeping records
    (``{"role": "_checkpoint"}``, ``_system_prompt``, ``_usage``), or, under Kimi's
    sessions folder, a message ``{role, content}``."""
    if type(first) is not dict:
        return False
    role = string(first.get("role"))
    return role in BOOKKEEPING or (role in ROLES and "content" in first
                                   and under(kimi_sessions_dir(), path))


def skips(path: str) -> bool:
    """A ``wire.jsonl`` beside a ``context.jsonl``: the UI's copy of the context's turns."""
    return (os.path.basename(path) == "wire.jsonl"
            and os.path.isfile(os.path.join(os.path.dirname(path), "context.jsonl")))


def read(path: str, max_line_bytes: int) -> Session:
    lines = JsonLines(path, max_line_bytes)
    entries = Entries()
    tools: dict[str, str] = {}
    records = 0
    for line in lines:
        value = line.value
        if type(value) is not dict:
            entries.note(line, "not a JSON object; skipped")
            continue
        role = value.get("role")
        if string(role) in BOOKKEEPING:
            records += 1
        elif string(role) in ROLES:
            records += 1
            _message(line, value, entries, tools)
        else:
            entries.note(line, f"record of role {clipped(role)} not read")
    if records == 0:
        raise NotASessionError(path, None, "empty file: no Kimi CLI context record"
                               if not lines.size else "no line is a Kimi CLI context record "
                               "{role, content}")
    session_id = _session_id(path)
    return build_session(lines, entries, agent=AGENT, session_id=session_id, project=None,
                         header={"sessionId": session_id})


def _message(line: SourceLine, value: dict[str, Any], entries: Entries,
             tools: dict[str, str]) -> None:
    role, content = value["role"], value.get("content")
    where = {"parent": entries.last_id}
    if role == "tool":
        call_id = string(value.get("tool_call_id")) or ""
        text = _text(content)
        found = _EXIT_CODE.search(text)
        code = int(found.group(1)) if found else None
        failed = bool(_ERROR.match(text)) or bool(code)
        entries.add(line, tool_result(call_id, tools.get(call_id), text, is_error=failed,
                                      exit_code=code), **where)
        return
    blocks: list[dict[str, Any]] = []
    for part in content if type(content) is list else [content]:
        if isinstance(part, str) and part:
            blocks.append(text_block(part))
        elif type(part) is dict and part.get("type") == "think" and (
                thought := string(part.get("think"))):
            blocks.append(thinking_block(thought))
        elif type(part) is dict and part.get("type") == "text" and (
                said := string(part.get("text"))) and not _CHECKPOINT.match(said):
            blocks.append(text_block(said))
    calls = value.get("tool_calls")
    for call in calls if type(calls) is list else ():
        function = call.get("function") if type(call) is dict else None
        if type(function) is not dict:
            continue
        call_id, name = string(call.get("id")) or "", string(function.get("name")) or ""
        tools[call_id] = name
        blocks.append(tool_call_block(call_id, name, _arguments(function.get("arguments"))))
    if role == "user" and not blocks:
        return  # a checkpoint marker Kimi sends the model: no words of the user's
    if role == "system":
        entries.add(line, event("system", _text(content) or string(content) or ""), **where)
        return
    entries.add(line, message(role, blocks), **where)


def _text(content: object) -> str:
    """A tool message's text: its text parts, one per line."""
    if isinstance(content, str):
        return content
    if type(content) is not list:
        return ""
    return "\n".join(text for part in content if type(part) is dict
                     and (text := string(part.get("text"))))


def _arguments(value: object) -> dict[str, Any]:
    """A call's arguments: Kimi writes them as a JSON string."""
    if isinstance(value, str):
        try:
            parsed = orjson.loads(value)
        except orjson.JSONDecodeError:
            return {"input": value}
        return parsed if type(parsed) is dict else {"input": value}
    return value if type(value) is dict else {"input": value}


def _session_id(path: str) -> str:
    """The session's id: the folder of ``<id>/context.jsonl``, the name of the flat
    ``<id>.jsonl``; a rotated ``context_N.jsonl`` is ``<id>.context_N``."""
    file = Path(path)
    if file.stem == "context":
        return file.parent.name
    if _ROTATED.match(file.stem):
        return f"{file.parent.name}.{file.stem}"
    return file.stem


def _replace(arguments: Mapping[str, Any]) -> Use:
    """``StrReplaceFile``: its first ``edit`` (one ``{old, new}`` or a list) shows the change."""
    path = argument(arguments, "path")
    if not path:
        return Use()
    edit = arguments.get("edit")
    first = edit[0] if type(edit) is list and edit else edit
    first = first if type(first) is dict else {}
    return Use(files=(FileWork(path, "modified", argument(first, "old"),
                               argument(first, "new")),), target=path)


TOOLS: Final[Mapping[str, Tool]] = {
    "Shell": shell_tool("command"),
    "Bash": CLAUDE_TOOLS["Bash"],
    "ReadFile": file_tool("read", "read", "path"),
    "WriteFile": file_tool("write", "written", "path", (), ("content",)),
    "StrReplaceFile": Tool("edit", _replace),
    "Glob": CLAUDE_TOOLS["Glob"],
    "Grep": CLAUDE_TOOLS["Grep"],
    "SearchWeb": search_tool("query"),
    "SetTodoList": plan_tool("todos", "title"),
}
"""Kimi CLI's tools as the work trail reads them (``Bash``, its shell before ``Shell``, and
``Glob`` / ``Grep`` take the arguments Claude Code's tools of those names take)."""

KIMI = SourceReader(AGENT, recognises, read, _homes, skips=skips, tools=TOOLS)
