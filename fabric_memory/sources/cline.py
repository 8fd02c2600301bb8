"""Cline and its forks Roo Code and Kilo Code: one folder per task,
``<editor>/User/globalStorage/<extension>/tasks/<task id>/api_conversation_history.json``.

That file is the task's conversation as the model gets it: one JSON array of Anthropic
messages (``{role, content}``; Roo Code and Kilo Code add ``ts``), rewritten whole on every
turn (:class:`~fabric_memory.sources.reader.JsonDocument`). Message ``i`` is addressed
``m<i>`` (its index in the array, which a rewrite keeps); a user message's tool results
follow its text as ``m<i>.1``, …, an assistant message's calls are in its entry.

Tool calls come in two shapes: ``tool_use`` blocks (native tool calling) and the XML Cline
wrote before it (``<execute_command><command>npm test</command></execute_command>`` in the
assistant's text). A ``tool_use`` is answered by the ``tool_result`` block of its id, or,
as Cline 3.5x writes it, by a user text ``[execute_command for 'npm test'] Result:`` like
an XML call's; text answers are paired with the calls in order. The three agents write
the same format: which one wrote a task is told by the extension folder it lies in
(Cline's anywhere else). Cline keeps its tasks in the editor's storage and, since 3.5x
(its CLI, JetBrains and VS Code alike), in ``~/.cline/data/tasks/<task id>/``
(``$CLINE_DATA_DIR/tasks``, ``$CLINE_DIR/data/tasks``).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ..errors import NotASessionError
from .gemini import TOOLS as GEMINI_TOOLS
from .reader import (
    Entries,
    JsonDocument,
    JsonHead,
    SourceLine,
    SourceReader,
    block_text,
    build_session,
    message,
    string,
    text_block,
    thinking_block,
    tool_call_block,
    tool_result,
    under,
)
from .tools import Tool, Use, argument, file_tool, search_tool, shell_tool

if TYPE_CHECKING:  # loaded when a file is read (see fabric_memory.sources.reader)
    from ..session import Session

FILE: Final = "api_conversation_history.json"
EXTENSIONS: Final = {"cline": "saoudrizwan.claude-dev", "roo-code": "rooveterinaryinc.roo-cline",
                     "kilo-code": "kilocode.kilo-code"}
"""Each agent's VS Code extension id: the ``globalStorage`` folder its tasks are in."""
EDITORS: Final = ("Code", "Code - Insiders", "VSCodium", "Cursor", "Windsurf", "Trae")
"""The VS Code family editors whose user data folders are looked in."""
_EXIT_CODE: Final = re.compile(r"(?:Exit code|exit code):? (-?\d+)")
_XML_RESULT: Final = re.compile(r"\[(\w+)(?: for '.*?')?\] Result:", re.S)
ENVIRONMENT: Final = "<environment_details>"
"""How the text block the extension adds to each user message begins: its listing of the
open files and the folder, kept in the node (``--raw``), not in the user's words."""
REMINDERS: Final = (ENVIRONMENT, "# task_progress", "# TODO LIST UPDATE REQUIRED",
                     "The user has provided feedback on the results.", "[TASK RESUMPTION]")
"""How the text blocks the extension adds begin: the environment details, Cline's
reminders to keep its checklist (``task_progress``), the line it puts before the user's
feedback and its note on resuming a task: no words of the user's either."""
_WRAPPED: Final = re.compile(r"\s*<(task|feedback|answer|user_message)>(.*?)</\1>(.*)", re.DOTALL)
"""The tag the extension wraps a user's words in, the words, and what follows."""
_CWD: Final = re.compile(r"# Current (?:Working Directory|Workspace Directory) \((.+?)\)")
_TODO: Final = re.compile(r"^\s*[-*]?\s*\[([ xX-])\]\s*(.+)$", re.MULTILINE)


def _todo_list(arguments: Mapping[str, Any]) -> Use:
    """Roo Code's ``update_todo_list``: a Markdown checklist (``[x]`` done, ``[-]`` under
    way, ``[ ]`` open), the whole plan."""
    text = argument(arguments, "todos") or ""
    states = {"x": "completed", "X": "completed", "-": "in_progress", " ": "pending"}
    plan = tuple((states[mark], step.strip()) for mark, step in _TODO.findall(text))
    return Use(plan=plan, target="plan")


TOOLS: Final[Mapping[str, Tool]] = {
    "execute_command": shell_tool("command"),
    "read_file": GEMINI_TOOLS["read_file"],
    "write_to_file": file_tool("write", "written", "path", (), ("content",)),
    "replace_in_file": file_tool("edit", "modified", "path", (), ("diff",)),
    "apply_diff": file_tool("edit", "modified", "path", (), ("diff",)),
    "search_files": search_tool("regex"),
    "update_todo_list": Tool("plan", _todo_list),
}
"""Cline's, Roo Code's and Kilo Code's tools as the work trail reads them (``read_file`` is
read as Gemini CLI's tool of that name is; ``replace_in_file`` and ``apply_diff`` carry
SEARCH/REPLACE blocks, kept as the edit's new text)."""
_XML_TOOLS: Final = (*TOOLS, "list_files", "list_code_definition_names", "browser_action",
                     "use_mcp_tool", "access_mcp_resource", "ask_followup_question",
                     "attempt_completion", "new_task", "plan_mode_respond", "insert_content",
                     "search_and_replace", "switch_mode", "codebase_search")
_XML_CALL: Final = re.compile(r"<(" + "|".join(_XML_TOOLS) + r")>(.*?)</\1>", re.S)
_XML_PARAMETER: Final = re.compile(r"<(\w+)>\n?(.*?)\n?</\1>", re.S)


def user_data_dirs() -> tuple[Path, ...]:
    """Where the VS Code family keeps its user data on this system."""
    home = Path.home()
    if sys.platform == "darwin":
        base = home / "Library" / "Application Support"
    elif sys.platform == "win32":
        base = Path(os.environ.get("APPDATA") or home / "AppData" / "Roaming")
    else:
        base = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    return tuple(base / editor / "User" for editor in EDITORS)


def tasks_dirs(agent: str) -> tuple[Path, ...]:
    """Every ``globalStorage/<extension>/tasks`` folder of ``agent``, present or not, and
    Cline's own data folder's ``tasks``."""
    editors = tuple(folder / "globalStorage" / EXTENSIONS[agent] / "tasks"
                    for folder in user_data_dirs())
    return (*editors, cline_data_dir() / "tasks") if agent == "cline" else editors


def cline_data_dir() -> Path:
    """Where Cline 3.5x keeps its data as Cline resolves it: ``$CLINE_DATA_DIR``, else
    ``$CLINE_DIR/data``, else ``~/.cline/data``."""
    if data := os.environ.get("CLINE_DATA_DIR", "").strip():
        return Path(data)
    return Path(os.environ.get("CLINE_DIR", "").strip() or Path.home() / ".cline") / "data"


def _recognises(agent: str) -> Any:
    def recognises(first: Any, path: str) -> bool:
        """A conversation: an array of ``{role, content}`` messages (the whole file on one
        line, or its head); a fork's only inside its own extension's folder."""
        if isinstance(first, JsonHead):
            shaped = re.match(rb'\s*\[\s*\{\s*"role"\s*:\s*"(?:user|assistant)"',
                              first.data) is not None
        else:
            shaped = (type(first) is list and bool(first) and type(first[0]) is dict
                      and first[0].get("role") in ("user", "assistant") and "content" in first[0])
        if not shaped or os.path.basename(path) != FILE:
            return False
        return agent == "cline" or any(under(tasks, path) for tasks in tasks_dirs(agent))
    return recognises


def lists(path: str) -> bool:
    return os.path.basename(path) == FILE


def _reader(agent: str) -> Any:
    def read(path: str, max_line_bytes: int) -> Session:
        return _read(path, agent)
    return read


def _read(path: str, agent: str) -> Session:
    document = JsonDocument.read(path)
    if type(document.value) is not list:
        raise NotASessionError(path, 1, f"not a {agent} conversation (the document is no array)")
    entries = Entries()
    calls: dict[str, str] = {}
    """tool_use id → tool name, to name the result that answers it."""
    pending: list[tuple[str, str]] = []
    """XML calls of the last assistant message not yet answered: (call id, tool)."""
    project = None
    session_id = os.path.basename(os.path.dirname(path)) or path
    # A task's folder is named by the time it began (milliseconds): the first message's
    # time when the extension records none per message (Cline does not; its forks do).
    started = _ms_time(int(session_id)) if session_id.isdigit() else None
    for index, line in enumerate(document.nodes()):
        value = line.value
        if type(value) is not dict or value.get("role") not in ("user", "assistant"):
            entries.note(line.number, f"element {index} is no user or assistant message; skipped")
            continue
        where = {"address": f"m{index}", "parent": entries.last_id,
                 "timestamp": _ms_time(value.get("ts")) or (started if index == 0 else None)}
        content = value.get("content")
        if value["role"] == "assistant":
            pending = []
            entries.add(line, _assistant(content, f"m{index}", calls, pending), **where)
            continue
        project = project or _project(content)
        _user(line, content, where, entries, calls, pending)
    return build_session(document, entries, agent=agent, session_id=session_id,
                         project=project, header={"taskId": session_id, "cwd": project})


def _ms_time(ts: object) -> str | None:
    """Milliseconds since the epoch (Roo Code's and Kilo Code's ``ts``, a task folder's
    name) as ISO time."""
    if type(ts) is not int:
        return None
    from datetime import UTC, datetime

    try:
        return datetime.fromtimestamp(ts / 1000, UTC).isoformat(timespec="milliseconds") \
            .replace("+00:00", "Z")
    except (OverflowError, OSError, ValueError):
        return None


def _assistant(content: object, address: str, calls: dict[str, str],
               pending: list[tuple[str, str]]) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = []
    for block in content if type(content) is list else [content]:
        if isinstance(block, str):
            block = {"type": "text", "text": block}
        if type(block) is not dict:
            continue
        kind = block.get("type")
        if kind == "text" and (text := string(block.get("text"))):
            blocks.append(text_block(text))
            for name, body in _XML_CALL.findall(text):
                call_id = f"{address}:{len(pending) + 1}"
                pending.append((call_id, name))
                arguments = {key: value for key, value in _XML_PARAMETER.findall(body)}
                blocks.append(tool_call_block(call_id, name, arguments))
        elif kind in ("thinking", "reasoning") and (text := string(
                block.get("thinking") or block.get("text"))):
            blocks.append(thinking_block(text))
        elif kind == "tool_use":
            call_id, name = string(block.get("id")) or "", string(block.get("name")) or ""
            calls[call_id] = name
            pending.append((call_id, name))
            given = block.get("input")
            blocks.append(tool_call_block(call_id, name, given if type(given) is dict
                                          else {"input": given}))
    return message("assistant", blocks)


def _user(line: SourceLine, content: object, where: dict[str, Any], entries: Entries,
          calls: dict[str, str], pending: list[tuple[str, str]]) -> None:
    """The user's text, then each tool result: a ``tool_result`` block, or the text
    answering the XML call of that name (``[name for '…'] Result:``, its body in the same
    text block or the next). A message of results only starts with its first result."""
    items = content if type(content) is list else [content]
    texts: list[str] = []
    results: list[dict[str, Any]] = []
    answering: tuple[str, str] | None = None
    """An XML call whose result header came in a text block of its own: its body is next."""
    for block in items:
        if isinstance(block, str):
            block = {"type": "text", "text": block}
        if type(block) is not dict:
            continue
        if block.get("type") == "tool_result":
            call_id = string(block.get("tool_use_id")) or ""
            pending[:] = [call for call in pending if call[0] != call_id]
            results.append(_result(call_id, calls.get(call_id), block_text(block.get("content")),
                                   block.get("is_error") is True))
        elif block.get("type") == "text" and (text := string(block.get("text"))):
            if answering is not None:
                results.append(_result(*answering, text.strip(), _failed(text)))
                answering = None
                continue
            if text.lstrip().startswith(REMINDERS):
                continue  # the extension's own context (open files, checklist), no words
            header = _XML_RESULT.match(text)
            at = next((i for i, (_, name) in enumerate(pending)
                       if header and name == header.group(1)), None)
            if header is None or at is None:
                texts.append(_unwrapped(text))
                continue
            call = pending.pop(at)
            body = text[header.end():].strip()
            if body:
                results.append(_result(*call, body, _failed(body)))
            else:
                answering = call
    if answering is not None:
        results.append(_result(*answering, "", False))
    if texts or not results:
        entries.add(line, message("user", [text_block("\n".join(texts))] if texts else []),
                    **where)
    else:
        entries.add(line, results.pop(0), **where)
    for result in results:
        entries.follow(result)


def _unwrapped(text: str) -> str:
    """The user's words without the tag the extension wraps them in (``<task>`` for the
    first message, ``<feedback>``, ``<answer>``, ``<user_message>`` later); what follows
    the tag (a file's contents the user attached) stays."""
    found = _WRAPPED.match(text)
    if found is None:
        return text
    return "\n".join(part for part in (found.group(2).strip(), found.group(3).strip()) if part)


def _failed(text: str) -> bool:
    """Whether an XML-era result says its call failed."""
    lowered = text.lstrip()[:200].lower()
    return lowered.startswith(("error", "the tool execution failed")) or "<error>" in lowered


def _result(call_id: str, tool: str | None, text: str, failed: bool) -> dict[str, Any]:
    """A tool result; a command's ``Exit code: N`` is its exit status (non-zero: an error)."""
    code = _EXIT_CODE.search(text) if tool == "execute_command" else None
    exit_code = int(code.group(1)) if code else None
    return tool_result(call_id, tool, text, is_error=failed or bool(exit_code),
                       exit_code=exit_code)


def _project(content: object) -> str | None:
    """The folder the first user message's environment details name."""
    found = _CWD.search(block_text(content) if type(content) is list else str(content or ""))
    return found.group(1).strip() if found else None


def _homes(agent: str) -> Any:
    def homes(projects: Collection[str]) -> tuple[Path, ...]:
        return tasks_dirs(agent)
    return homes


def _source(agent: str) -> SourceReader:
    return SourceReader(agent, _recognises(agent), _reader(agent), _homes(agent), tools=TOOLS,
                        lists=lists, by_line=False)


ROO_CODE = _source("roo-code")
KILO_CODE = _source("kilo-code")
CLINE = _source("cline")
