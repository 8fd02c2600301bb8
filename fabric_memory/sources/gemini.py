"""Gemini CLI: ``~/.gemini/tmp/<project>/chats/`` (``$GEMINI_CLI_HOME`` moves ``~``).

Two shapes of one record (``ConversationRecord``: ``sessionId``, ``projectHash``,
``startTime``, ``messages[]``), told apart by content:

- the whole-file JSON Gemini CLI wrote until 2026 (``session-<time>-<id8>.json``, rewritten
  on every turn): each element of ``messages[]`` is a node of the document
  (:class:`~fabric_memory.sources.reader.JsonDocument`);
- the JSON Lines it writes since (``….jsonl``): a metadata line, then one line per
  message record, a message re-recorded whole when it changes (the last record wins, in
  the place it first took), ``{"$rewindTo": id}`` dropping that message and those after
  it, ``{"$set": {…}}`` updating the metadata.

A message is addressed by its ``id`` (stable across rewrites and appends). A ``gemini``
message is an assistant entry (its text, thoughts and ``toolCalls``); each tool call's
result (inline in the call, with its ``status``) is the entry ``<id>.<k>`` after it. A
rewound message stays an entry, off the active branch.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import orjson

from ..errors import NotASessionError, clipped
from .reader import (
    Entries,
    JsonDocument,
    JsonHead,
    JsonLines,
    SourceLine,
    SourceReader,
    build_session,
    event,
    first_value,
    line_nodes,
    message,
    name_ids,
    string,
    text_block,
    thinking_block,
    tool_call_block,
    tool_result,
    user_message,
)
from .tools import Tool, file_tool, plan_tool, search_tool, shell_tool

if TYPE_CHECKING:  # loaded when a file is read (see fabric_memory.sources.reader)
    from ..session import Session

AGENT: Final = "gemini"
HOST_MARKS: Final = ("<session_context>",
                                 "This is the Gemini CLI. We are setting up the context")
"""How the first user turn begins that Gemini CLI writes itself: the date, the system, the
workspace's files and the loaded instructions (``GEMINI.md``, MCP servers')."""
HOME_ENV: Final = "GEMINI_CLI_HOME"
_EXIT_CODE: Final = re.compile(r"^Exit Code: (-?\d+)", re.MULTILINE)
"""How ``run_shell_command`` reports a command that failed (``Exit Code: 1``)."""
_WORKING_IN: Final = re.compile(
    r"(?:I'm currently working in the directory: |Workspace Directories:\**\n\s*- )(.+)")
"""Where the first user message (the context Gemini CLI sets up) names the project."""
FAILED: Final = frozenset({"error", "cancelled"})

TOOLS: Final[Mapping[str, Tool]] = {
    "read_file": file_tool("read", "read", ("file_path", "absolute_path", "path",
                                            "target_file")),
    "write_file": file_tool("write", "written", ("file_path", "absolute_path"), (),
                            ("content",)),
    "replace": file_tool("edit", "modified", ("file_path", "absolute_path"), ("old_string",),
                         ("new_string",)),
    "run_shell_command": shell_tool("command"),
    "glob": search_tool("pattern"),
    "grep_search": search_tool("pattern"),
    "search_file_content": search_tool("pattern"),
    "write_todos": plan_tool("todos", "description"),
}
"""Gemini CLI's tools as the work trail reads them (``replace`` is its edit;
``search_file_content`` the older name of ``grep_search``)."""


def gemini_tmp_dir() -> Path:
    """``$GEMINI_CLI_HOME/.gemini/tmp``, else ``~/.gemini/tmp`` (one folder per project)."""
    configured = os.environ.get(HOME_ENV)
    return (Path(configured).expanduser() if configured else Path.home()) / ".gemini" / "tmp"


def recognises(first: Any, path: str) -> bool:
    """A chat record: its first key ``sessionId`` beside a ``projectHash`` (a whole-file
    document's head, or the metadata line of the JSON Lines shape)."""
    if isinstance(first, JsonHead):
        return first.first_key == "sessionId" and first.names("projectHash")
    return (type(first) is dict and string(first.get("sessionId")) is not None
            and string(first.get("projectHash")) is not None)


def lists(path: str) -> bool:
    """``chats/session-*.json``: the whole-file chats (the JSON Lines ones are listed as
    every ``*.jsonl`` is)."""
    name = os.path.basename(path)
    return (name.startswith("session-") and name.endswith(".json")
            and os.path.basename(os.path.dirname(path)) == "chats")


def read(path: str, max_line_bytes: int) -> Session:
    first = first_value(path, max_line_bytes)
    if isinstance(first, JsonHead) or (type(first) is dict and "messages" in first):
        document = JsonDocument.read(path)
        if type(document.value) is not dict:
            raise NotASessionError(path, 1, "not a Gemini CLI chat (the document is no object)")
        return _session(path, document.value, document.nodes("messages"), document)
    lines = JsonLines(path, max_line_bytes, keep=True)
    return _session(path, None, lines, lines)


class _Chat:
    """The messages read so far, in the order Gemini CLI keeps them."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.latest: dict[str, SourceLine] = {}
        """Message id → the line (or node) of its last record, in first-recorded order."""
        self.parents: dict[str, str | None] = {}
        """Message id → the message before it when it was first recorded."""
        self.active: list[str] = []
        """The conversation as it stands (a rewind cuts it)."""
        self.metadata: dict[str, Any] = {}

    def record(self, line: SourceLine, message_id: str) -> None:
        if message_id not in self.active:  # new, or back after a rewind or a checkpoint
            self.parents[message_id] = self.active[-1] if self.active else None
            self.active.append(message_id)
        self.latest[message_id] = line

    def rewind(self, message_id: str) -> None:
        cut = self.active.index(message_id) if message_id in self.active else 0
        del self.active[cut:]


def _session(path: str, whole: dict[str, Any] | None, items: Any,
             source: JsonDocument | JsonLines) -> Session:
    chat = _Chat(path)
    entries = Entries()
    if whole is not None:
        chat.metadata = {key: value for key, value in whole.items() if key != "messages"}
    for line in items:
        _record(line, chat, entries)
    session_id = string(chat.metadata.get("sessionId"))
    if session_id is None:
        raise NotASessionError(path, 1, "no 'sessionId': not a Gemini CLI chat")
    project = _project(chat)
    tails: dict[str, str | None] = {}
    """Message id → its last entry (its last tool result), which the next message follows."""
    answered: set[str] = set()
    """Ids of the calls whose ``result`` their message holds."""
    for message_id, line in chat.latest.items():
        before = chat.parents[message_id]
        parent = tails.get(before) if before else None
        if _echoes(line.value, answered):
            tails[message_id] = parent  # the same results as the calls'; the chain goes on
            continue
        _message(line, message_id, parent, entries)
        tails[message_id] = entries.entries[-1].id
        answered.update(string(call.get("id")) or "" for call in line.value.get("toolCalls") or ()
                        if type(call) is dict and call.get("result") is not None)
    if entries.entries:
        name_ids(entries.entries[0].raw, [session_id])
    return build_session(source, entries, agent=AGENT, session_id=session_id, project=project,
                         header={"sessionId": session_id,
                                 "projectHash": chat.metadata.get("projectHash"),
                                 "cwd": project})


def _echoes(value: dict[str, Any], answered: set[str]) -> bool:
    """A user message made only of ``functionResponse`` parts whose calls already hold them
    (Gemini CLI records what it sends back to the model as a user message too)."""
    if value.get("type") != "user":
        return False
    parts = _parts(value.get("content"))
    return bool(parts) and all(type(part.get("functionResponse")) is dict
                               and part["functionResponse"].get("id") in answered
                               for part in parts)


def _record(line: SourceLine, chat: _Chat, entries: Entries) -> None:
    value = line.value
    if type(value) is not dict:
        entries.note(line.number, "not a JSON object; skipped")
        return
    if isinstance(rewind := value.get("$rewindTo"), str):
        chat.rewind(rewind)
    elif type(update := value.get("$set")) is dict:
        chat.metadata.update((k, v) for k, v in update.items() if k != "messages")
        if type(update.get("messages")) is list:  # a checkpoint: the conversation anew
            chat.active.clear()
            for node in line_nodes(chat.path, line, "$set", "messages"):
                if type(node.value) is dict and string(node.value.get("id")) is not None:
                    chat.record(node, node.value["id"])
    elif (message_id := string(value.get("id"))) is not None:
        chat.record(line, message_id)
    elif string(value.get("sessionId")) is not None:
        chat.metadata.update(value)
    else:
        entries.note(line.number, f"record with no 'id' (no address) and no "
                     f"'$rewindTo'/'$set': {clipped(sorted(value))}; skipped")


def _message(line: SourceLine, message_id: str, parent: str | None, entries: Entries) -> None:
    value = line.value
    kind = value.get("type")
    where = {"address": message_id, "parent": parent,
             "timestamp": string(value.get("timestamp"))}
    content = value.get("content")
    if kind == "user":
        entries.add(line, user_message(_parts_text(content), HOST_MARKS), **where)
        return
    if kind != "gemini":
        entries.add(line, event(f"gemini:{kind}" if isinstance(kind, str) else "gemini",
                                _parts_text(content)), **where)
        return
    calls = [call for call in value.get("toolCalls") or () if type(call) is dict]
    thoughts = [t for t in value.get("thoughts") or () if type(t) is dict]
    blocks: list[dict[str, Any]] = [
        thinking_block(": ".join(part for part in (string(t.get("subject")),
                                                   string(t.get("description"))) if part))
        for t in thoughts]
    if not thoughts and (thinking := _parts_text(content, thought=True)):
        blocks.append(thinking_block(thinking))
    if text := _parts_text(content):
        blocks.append(text_block(text))
    for call in calls:
        arguments = call.get("args")
        blocks.append(tool_call_block(string(call.get("id")) or "", string(call.get("name")) or "",
                                      arguments if type(arguments) is dict
                                      else {"args": arguments}))
    entries.add(line, message("assistant", blocks), **where)
    for call in calls:
        entries.follow(_result(call))


def _result(call: dict[str, Any]) -> dict[str, Any]:
    """The result a tool call carries: the text of its ``functionResponse`` (the one with
    its id, where Gemini CLI repeats a batch's responses in each call), what the display
    adds, and its status (a failed command's ``Exit Code``)."""
    call_id = string(call.get("id")) or ""
    responses = [part["functionResponse"] for part in _parts(call.get("result"))
                 if type(part.get("functionResponse")) is dict]
    own = [r for r in responses if r.get("id") == call_id] or responses
    texts = [_response_text(r.get("response")) for r in own]
    text = "\n".join(t for t in texts if t)
    display = _display_text(call.get("resultDisplay"))
    if display and display not in text:
        text = f"{text}\n{display}" if text else display
    status = call.get("status")
    code = _EXIT_CODE.search(text) if call.get("name") == "run_shell_command" else None
    exit_code = int(code.group(1)) if code else None
    return tool_result(call_id, string(call.get("name")), text,
                       is_error=status in FAILED or bool(exit_code),
                       exit_code=exit_code, interrupted=status == "cancelled")


def _response_text(response: object) -> str:
    if type(response) is not dict:
        return "" if response is None else orjson.dumps(response).decode()
    said = [response[key] for key in ("output", "error") if isinstance(response.get(key), str)]
    if said:
        return "\n".join(said)
    return orjson.dumps(response).decode() if response else ""


def _display_text(display: object) -> str:
    """What a call's ``resultDisplay`` says as text: itself, a file change's diff."""
    if isinstance(display, str):
        return display
    if type(display) is dict:
        return string(display.get("fileDiff")) or ""
    return ""


def _parts(content: object) -> list[dict[str, Any]]:
    """The parts of a ``PartListUnion`` (a string, a part, or a list of either)."""
    items = content if type(content) is list else [content]
    return [{"text": item} if isinstance(item, str) else item for item in items
            if isinstance(item, str) or type(item) is dict]


def _parts_text(content: object, *, thought: bool = False) -> str:
    """The text parts of ``content`` (only the model's thoughts with ``thought``, else only
    what is not one)."""
    return "\n".join(text for part in _parts(content)
                     if bool(part.get("thought")) is thought and (text := string(part.get("text"))))


def _project(chat: _Chat) -> str | None:
    """The first workspace folder the record names, else the one the first user message
    (the context Gemini CLI sets up) says it works in."""
    folders = chat.metadata.get("directories")
    if type(folders) is list and folders and isinstance(folders[0], str):
        return str(folders[0])
    for line in list(chat.latest.values())[:3]:
        if type(line.value) is dict and line.value.get("type") == "user":
            found = _WORKING_IN.search(_parts_text(line.value.get("content")))
            if found:
                return found.group(1).strip()
    return None


def _homes(projects: Collection[str]) -> tuple[Path, ...]:
    return (gemini_tmp_dir(),)


GEMINI = SourceReader(AGENT, recognises, read, _homes, tools=TOOLS, lists=lists, by_line=False)
