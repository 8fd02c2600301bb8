"""Qwen Code: ``~/.qwen/projects/<encoded cwd>/chats/<session id>.jsonl``
(``$QWEN_RUNTIME_DIR`` moves ``~/.qwen`` for what Qwen Code writes as it runs).

Qwen Code began as a fork of Gemini CLI but records its chats as Claude Code does: one
JSON record a line, each with its ``uuid`` (the address), ``parentUuid``, ``sessionId``,
``timestamp``, ``cwd`` and ``type`` — ``user``, ``assistant`` (``message``: Gemini's
``Content``, ``{role, parts}``: text, thought and ``functionCall`` parts), ``tool_result``
(a ``functionResponse`` part and ``toolCallResult``: its status and display) or
``system`` (``subtype`` and ``systemPayload``: a chat compression, a slash command, and
bookkeeping). Told from Claude Code's lines by Gemini's ``parts`` or a ``systemPayload``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import orjson

from ..errors import NotASessionError, clipped
from .gemini import TOOLS as GEMINI_TOOLS
from .pi import TOOLS as PI_TOOLS
from .reader import (
    Entries,
    JsonLines,
    SourceLine,
    SourceReader,
    build_session,
    compaction,
    event,
    message,
    name_ids,
    string,
    text_block,
    thinking_block,
    tool_call_block,
    tool_result,
    under,
)
from .tools import Tool, plan_tool

if TYPE_CHECKING:  # loaded when a file is read (see fabric_memory.sources.reader)
    from ..session import Session

AGENT: Final = "qwen"
RUNTIME_ENV: Final = "QWEN_RUNTIME_DIR"
KINDS: Final = frozenset({"user", "assistant", "tool_result", "system"})
TOLD: Final = frozenset({"chat_compression", "slash_command", "at_command", "notification",
                         "mid_turn_user_message", "cron", "background_task_completed"})
"""System records kept as entries (what was said or done); the other subtypes are
bookkeeping (telemetry, snapshots, titles, models, modes), passed through in the chain."""
FAILED: Final = frozenset({"error", "cancelled"})
_EXIT_CODE: Final = re.compile(r"^Exit Code: (-?\d+)", re.MULTILINE)

TOOLS: Final[Mapping[str, Tool]] = {
    "read_file": GEMINI_TOOLS["read_file"],
    "write_file": GEMINI_TOOLS["write_file"],
    "edit": PI_TOOLS["edit"],
    "run_shell_command": GEMINI_TOOLS["run_shell_command"],
    "glob": GEMINI_TOOLS["glob"],
    "grep_search": GEMINI_TOOLS["grep_search"],
    "todo_write": plan_tool("todos", "content"),
}
"""Qwen Code's tools as the work trail reads them (the ones named as Gemini CLI's and Pi's
are read as theirs are: the same arguments)."""


def qwen_projects_dir() -> Path:
    """``$QWEN_RUNTIME_DIR/projects``, else ``~/.qwen/projects``."""
    configured = os.environ.get(RUNTIME_ENV)
    base = Path(configured).expanduser() if configured else Path.home() / ".qwen"
    return base / "projects"


def recognises(first: Any, path: str) -> bool:
    """A Qwen Code record: a ``uuid`` and a ``sessionId`` beside Gemini's ``parts`` or a
    ``systemPayload`` (any record of Qwen's shape under its own folder)."""
    if type(first) is not dict or string(first.get("uuid")) is None or string(
            first.get("sessionId")) is None or first.get("type") not in KINDS:
        return False
    body = first.get("message")
    return (type(body) is dict and "parts" in body) or "systemPayload" in first or (
        first["type"] == "tool_result") or under(qwen_projects_dir(), path)


def read(path: str, max_line_bytes: int) -> Session:
    lines = JsonLines(path, max_line_bytes)
    entries = Entries()
    links: dict[str, str | None] = {}
    """uuid -> parentUuid of the records passed through (bookkeeping)."""
    session_id = project = None
    for line in lines:
        value = line.value
        if type(value) is not dict:
            entries.note(line, "not a JSON object; skipped")
            continue
        session_id = session_id or string(value.get("sessionId"))
        project = project or string(value.get("cwd"))
        _record(line, value, entries, links)
    if session_id is None:
        raise NotASessionError(path, None, "no record names its sessionId (not a Qwen Code "
                               "chat)")
    if entries.entries:
        name_ids(entries.entries[0].raw, [session_id])
    return build_session(lines, entries, agent=AGENT, session_id=session_id, project=project,
                         header={"sessionId": session_id, "cwd": project})


def _record(line: SourceLine, value: dict[str, Any], entries: Entries,
            links: dict[str, str | None]) -> None:
    kind, uuid = value.get("type"), string(value.get("uuid"))
    if uuid is None:
        entries.note(line, f"{clipped(kind)} record without a 'uuid' (no address); skipped")
        return
    parent = _through(string(value.get("parentUuid")), links)
    subtype = string(value.get("subtype"))
    if kind not in KINDS or (kind == "system" and subtype not in TOLD):
        if kind not in KINDS:
            entries.note(line, f"unknown Qwen Code record type {clipped(kind)}; skipped")
        links[uuid] = parent
        return
    where = {"address": uuid, "parent": parent, "timestamp": string(value.get("timestamp"))}
    body = value.get("message")
    parts = [p for p in body.get("parts") or () if type(p) is dict] if type(body) is dict else []
    if kind == "system":
        entries.add(line, _system(subtype or "", value.get("systemPayload"), parts), **where)
    elif kind == "user":
        entries.add(line, message("user", [text_block(t)] if (t := _text(parts)) else []),
                    **where)
    elif kind == "assistant":
        entries.add(line, _assistant(parts), **where)
    else:
        results = [_result(p["functionResponse"], value.get("toolCallResult")) for p in parts
                   if type(p.get("functionResponse")) is dict]
        if not results:
            results = [_result({}, value.get("toolCallResult"))]
        entries.add(line, results[0], **where)
        for result in results[1:]:
            entries.follow(result)


def _through(parent: str | None, links: dict[str, str | None]) -> str | None:
    """The nearest entry up the chain from ``parent``, past bookkeeping records."""
    seen: set[str] = set()
    while parent is not None and parent in links and parent not in seen:
        seen.add(parent)
        parent = links[parent]
    return parent


def _text(parts: list[dict[str, Any]], *, thought: bool = False) -> str:
    return "\n".join(text for part in parts if bool(part.get("thought")) is thought
                     and (text := string(part.get("text"))))


def _assistant(parts: list[dict[str, Any]]) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = []
    if thinking := _text(parts, thought=True):
        blocks.append(thinking_block(thinking))
    if text := _text(parts):
        blocks.append(text_block(text))
    for part in parts:
        call = part.get("functionCall")
        if type(call) is dict:
            arguments = call.get("args")
            blocks.append(tool_call_block(string(call.get("id")) or "",
                                          string(call.get("name")) or "",
                                          arguments if type(arguments) is dict
                                          else {"args": arguments}))
    return message("assistant", blocks)


def _result(response: dict[str, Any], info: object) -> dict[str, Any]:
    """A tool's result: its response's ``output`` or ``error``, what ``resultDisplay`` adds,
    its ``status`` (and a command's ``Exit Code``)."""
    info = info if type(info) is dict else {}
    said = response.get("response")
    texts = [said[key] for key in ("output", "error") if type(said) is dict
             and isinstance(said.get(key), str)] or ([orjson.dumps(said).decode()] if said
                                                     else [])
    display = info.get("resultDisplay")
    shown = display if isinstance(display, str) else (
        string(display.get("fileDiff")) if type(display) is dict else None)
    if shown and shown not in "\n".join(texts):
        texts.append(shown)
    if isinstance(error := info.get("error"), str) and error not in texts:
        texts.append(error)
    text = "\n".join(texts)
    name = string(response.get("name"))
    code = _EXIT_CODE.search(text) if name == "run_shell_command" else None
    exit_code = int(code.group(1)) if code else None
    if type(display) is dict and type(display.get("exitCode")) is int:  # a shell_result
        exit_code = display["exitCode"]
    status = info.get("status")
    failed = status in FAILED or (type(said) is dict and "error" in said) or bool(exit_code)
    return tool_result(string(response.get("id")) or string(info.get("callId")) or "", name,
                       text, is_error=failed, exit_code=exit_code,
                       interrupted=status == "cancelled")


def _system(subtype: str, payload: object, parts: list[dict[str, Any]]) -> dict[str, Any]:
    """A compression's summary (the text of its compressed history), else the record's
    subtype and what its payload says."""
    payload = payload if type(payload) is dict else {}
    if subtype == "chat_compression":
        history = payload.get("compressedHistory")
        said = [text for content in history if type(content) is dict
                for part in content.get("parts") or () if type(part) is dict
                and (text := string(part.get("text")))] if type(history) is list else []
        return compaction("\n".join(said))
    text = _text(parts) or "\n".join(
        f"{key}: {value}" for key, value in payload.items() if isinstance(value, str) and value)
    return event(f"qwen:{subtype}", text)


def _homes(projects: Collection[str]) -> tuple[Path, ...]:
    return (qwen_projects_dir(),)


QWEN = SourceReader(AGENT, recognises, read, _homes, tools=TOOLS)
