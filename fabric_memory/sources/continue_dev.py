"""Continue: ``~/.continue/sessions/<session id>.json`` (``$CONTINUE_GLOBAL_DIR`` moves
``~/.continue``), one whole-file JSON session ``{sessionId, title, workspaceDirectory,
history[]}`` rewritten on every turn (:class:`~fabric_memory.sources.reader.JsonDocument`).

Each element of ``history`` is ``{message, contextItems, toolCallStates, …}``; its
``message`` is a user, assistant (``toolCalls``: OpenAI-style ``{id, function: {name,
arguments}}``), thinking or tool (``toolCallId``) message. Item ``i`` is addressed
``m<i>`` (its index, which a rewrite keeps). A tool result's outcome is the state Continue
kept for its call (``errored``, ``canceled``) in the assistant item's ``toolCallStates``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import orjson

from ..errors import NotASessionError
from .gemini import TOOLS as GEMINI_TOOLS
from .reader import (
    Entries,
    JsonDocument,
    JsonHead,
    SourceReader,
    block_text,
    build_session,
    message,
    string,
    text_block,
    thinking_block,
    tool_call_block,
    tool_result,
)
from .tools import Tool, file_tool, search_tool, shell_tool

if TYPE_CHECKING:  # loaded when a file is read (see fabric_memory.sources.reader)
    from ..session import Session

AGENT: Final = "continue"
HOME_ENV: Final = "CONTINUE_GLOBAL_DIR"
INDEX: Final = "sessions.json"
"""Continue's list of its sessions (titles, dates), beside them: no session of its own."""
_EXIT_CODE: Final = re.compile(r"exit code:? (-?\d+)", re.IGNORECASE)

TOOLS: Final[Mapping[str, Tool]] = {
    "read_file": GEMINI_TOOLS["read_file"],
    "create_new_file": file_tool("write", "created", "filepath", (), ("contents",)),
    "edit_existing_file": file_tool("edit", "modified", "filepath", (), ("changes",)),
    "single_find_and_replace": file_tool("edit", "modified", "filepath", ("old_string",),
                                         ("new_string",)),
    "run_terminal_command": shell_tool("command"),
    "grep_search": GEMINI_TOOLS["grep_search"],
    "file_glob_search": search_tool("pattern"),
}
"""Continue's built-in tools as the work trail reads them (``read_file`` and ``grep_search``
read as Gemini CLI's tools of those names are)."""


def continue_dir() -> Path:
    """``$CONTINUE_GLOBAL_DIR``, else ``~/.continue``."""
    configured = os.environ.get(HOME_ENV)
    return Path(configured).expanduser() if configured else Path.home() / ".continue"


def recognises(first: Any, path: str) -> bool:
    """A Continue session: its first key ``sessionId`` beside a ``history`` (a head of a
    pretty-printed file, or the whole file on one line)."""
    if isinstance(first, JsonHead):
        return first.first_key == "sessionId" and first.names("history") and not first.names(
            "projectHash")
    return (type(first) is dict and string(first.get("sessionId")) is not None
            and type(first.get("history")) is list)


def lists(path: str) -> bool:
    """``sessions/<id>.json``, not Continue's index ``sessions.json``."""
    name = os.path.basename(path)
    return (name.endswith(".json") and name != INDEX
            and os.path.basename(os.path.dirname(path)) == "sessions")


def read(path: str, max_line_bytes: int) -> Session:
    document = JsonDocument.read(path)
    value = document.value
    if type(value) is not dict or string(value.get("sessionId")) is None:
        raise NotASessionError(path, 1, "no 'sessionId': not a Continue session")
    entries = Entries()
    states: dict[str, str] = {}
    """tool call id -> the status Continue kept for it."""
    names: dict[str, str] = {}
    for index, line in enumerate(document.nodes("history")):
        item = line.value
        said = item.get("message") if type(item) is dict else None
        if type(said) is not dict:
            entries.note(line.number, f"history[{index}] has no message; skipped")
            continue
        for state in item.get("toolCallStates") or ([item["toolCallState"]] if type(
                item.get("toolCallState")) is dict else []):
            if type(state) is dict and (call_id := string(state.get("toolCallId"))):
                states[call_id] = string(state.get("status")) or ""
        where = {"address": f"m{index}", "parent": entries.last_id, "timestamp": None}
        role = said.get("role")
        content = said.get("content")
        if role == "user":
            text = block_text(content, "text")
            entries.add(line, message("user", [text_block(text)] if text else []), **where)
        elif role == "assistant":
            entries.add(line, _assistant(content, said.get("toolCalls"), names), **where)
        elif role == "thinking":
            entries.add(line, message("assistant", [thinking_block(block_text(content))]),
                        **where)
        elif role == "tool":
            call_id = string(said.get("toolCallId")) or ""
            entries.add(line, _result(call_id, names.get(call_id), block_text(content),
                                      states.get(call_id, "")), **where)
        else:
            entries.note(line.number, f"history[{index}] is a {role!r} message; skipped")
    session_id = value["sessionId"]
    project = _project(string(value.get("workspaceDirectory")))
    return build_session(document, entries, agent=AGENT, session_id=session_id,
                         project=project, header={"sessionId": session_id,
                                                  "title": value.get("title"), "cwd": project})


def _assistant(content: object, calls: object, names: dict[str, str]) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = []
    if text := block_text(content, "text"):
        blocks.append(text_block(text))
    for call in calls if type(calls) is list else ():
        function = call.get("function") if type(call) is dict else None
        if type(function) is not dict:
            continue
        call_id, name = string(call.get("id")) or "", string(function.get("name")) or ""
        names[call_id] = name
        blocks.append(tool_call_block(call_id, name, _arguments(function.get("arguments"))))
    return message("assistant", blocks)


def _arguments(given: object) -> dict[str, Any]:
    """A call's arguments: OpenAI's JSON text, read as an object (else kept as text)."""
    if type(given) is dict:
        return given
    try:
        value = orjson.loads(given) if isinstance(given, str) and given else {}
    except orjson.JSONDecodeError:
        return {"arguments": given}
    return value if type(value) is dict else {"arguments": value}


def _result(call_id: str, tool: str | None, text: str, status: str) -> dict[str, Any]:
    code = _EXIT_CODE.search(text) if tool == "run_terminal_command" else None
    exit_code = int(code.group(1)) if code else None
    return tool_result(call_id, tool, text,
                       is_error=status in ("errored", "canceled") or bool(exit_code),
                       exit_code=exit_code, interrupted=status == "canceled")


def _project(folder: str | None) -> str | None:
    """The workspace folder (Continue keeps it as a ``file://`` URI)."""
    if folder and folder.startswith("file://"):
        from urllib.parse import unquote, urlparse

        return unquote(urlparse(folder).path) or None
    return folder


def _homes(projects: Collection[str]) -> tuple[Path, ...]:
    return (continue_dir() / "sessions",)


CONTINUE = SourceReader(AGENT, recognises, read, _homes, tools=TOOLS, lists=lists,
                        by_line=False)
