"""Cursor's agent CLI (``cursor-agent``): ``~/.cursor/chats/<workspace md5>/<agent id>/store.db``,
one SQLite database per chat.

The store is content-addressed: ``blobs(id, data)``, ``id`` the SHA-256 of ``data``, and
``meta(key, value)`` whose row ``0`` holds the chat's metadata as hex-encoded JSON
(``agentId``, ``name``, ``createdAt``, ``latestRootBlobId``). Most blobs are UTF-8 JSON
messages ``{role, content}`` (``system``, ``user``, ``assistant``, ``tool``; ``content`` a
string or parts: ``text``, ``reasoning``, ``tool-call``, ``tool-result``); the root blob
is protobuf listing the chat's messages in order (field 1, their 32-byte ids) and its
workspace (field 9, a ``file://`` URI).

Each message is one entry addressed by its blob's id (its SHA-256: it never changes, and a
rewrite of the chat keeps every message it keeps), chained in the root's order; its raw
source is the blob, byte for byte. The system prompt is not read.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import unquote, urlparse

from .database import has_tables, json_column, read_rows
from .gemini import TOOLS as GEMINI_TOOLS
from .reader import (
    Entries,
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
from .tools import (
    FileWork,
    Tool,
    Use,
    argument,
    file_tool,
    plan_tool,
    search_tool,
    shell_tool,
)

if TYPE_CHECKING:  # loaded when a file is read (see fabric_memory.sources.reader)
    import sqlite3

    from ..session import Session

AGENT: Final = "cursor"
STORE: Final = "store.db"
TABLES: Final = frozenset({"blobs", "meta"})
_QUERY: Final = re.compile(r"<user_query>\s*(.*?)\s*</user_query>", re.DOTALL)
"""The user's own words inside the context Cursor wraps them in (``<user_info>…``)."""
_EXIT_CODE: Final = re.compile(r"Exit code: (-?\d+)")
"""How a terminal command's result begins."""


def cursor_chats_dir() -> Path:
    return Path.home() / ".cursor" / "chats"


def _homes(projects: Collection[str]) -> tuple[Path, ...]:
    return (cursor_chats_dir(),)


def lists(path: str) -> bool:
    """A chat's store, ``store.db`` (its content decides whose it is)."""
    return os.path.basename(path) == STORE


def recognises(first: Any, path: str) -> bool:
    """A SQLite database with Cursor's ``blobs`` and ``meta`` tables."""
    return lists(path) and has_tables(path, TABLES)


def read(path: str, max_line_bytes: int) -> Session:
    database = read_rows(path, _rows)
    meta, blobs = database.value
    entries = Entries()
    order, workspace = _root(blobs.get(string(meta.get("latestRootBlobId")) or ""))
    if not order:  # no root to say the order: the messages as they were stored
        order = [blob_id for blob_id, (_, data) in blobs.items() if data[:1] == b"{"]
    tools: dict[str, str] = {}
    for blob_id in order:
        found = blobs.get(blob_id)
        if found is None:
            entries.note(0, f"message {blob_id} the chat lists is not in the store; skipped")
            continue
        rowid, data = found
        value = json_column(data)
        if type(value) is not dict:
            entries.note(rowid, f"blob {blob_id} is not a JSON message; skipped")
            continue
        for raw in _entries(value, tools):
            if entries.entries and entries.entries[-1].line == rowid:
                entry = entries.follow(raw)
            else:
                entry = entries.add(SourceLine(rowid, 0, 0, None), raw, address=blob_id,
                                    parent=entries.last_id)
            entry.source = data
    session_id = string(meta.get("agentId")) or Path(path).parent.name
    if entries.entries:
        name_ids(entries.entries[0].raw, [session_id, string(meta.get("name"))])
    return build_session(database, entries, agent=AGENT, session_id=session_id,
                         project=workspace, header=meta)


def _rows(db: sqlite3.Connection) -> tuple[dict[str, Any], dict[str, tuple[int, bytes]]]:
    """(the chat's metadata, blob id -> (its row id, its bytes))."""
    meta: dict[str, Any] = {}
    for key, value in db.execute("SELECT key, value FROM meta"):
        decoded = _hex_json(value)
        if key == "0" and type(decoded) is dict:
            meta.update(decoded)
        elif isinstance(key, str):
            meta.setdefault(key, value)
    blobs = {str(row[1]): (int(row[0]), bytes(row[2]) if row[2] is not None else b"")
             for row in db.execute("SELECT rowid, id, data FROM blobs ORDER BY rowid")}
    return meta, blobs


def _hex_json(value: object) -> Any:
    if isinstance(value, bytes):
        value = value.decode("ascii", "replace")
    if not isinstance(value, str):
        return None
    try:
        return json_column(bytes.fromhex(value))
    except ValueError:
        return json_column(value)


def _root(found: tuple[int, bytes] | None) -> tuple[list[str], str | None]:
    """The message ids a root blob lists (protobuf field 1) and its workspace (field 9)."""
    if found is None:
        return [], None
    order: list[str] = []
    workspace = None
    for number, value in _fields(found[1]):
        if number == 1 and len(value) == 32:
            order.append(value.hex())
        elif number == 9 and workspace is None:
            text = value.decode("utf-8", "replace")
            workspace = unquote(urlparse(text).path) if text.startswith("file:") else text
    return order, workspace


def _fields(data: bytes) -> list[tuple[int, bytes]]:
    """The length-delimited fields of a protobuf message (others skipped); stops at the
    first malformed byte."""
    found: list[tuple[int, bytes]] = []
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        if at < 0:
            break
        number, wire = key >> 3, key & 7
        if wire == 2:
            size, at = _varint(data, at)
            if at < 0 or at + size > len(data):
                break
            found.append((number, data[at:at + size]))
            at += size
        elif wire == 0:
            _, at = _varint(data, at)
        elif wire in (1, 5):
            at += 8 if wire == 1 else 4
        else:
            break
        if at < 0:
            break
    return found


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while at < len(data) and shift < 64:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7
    return 0, -1


def _entries(value: dict[str, Any], tools: dict[str, str]) -> list[dict[str, Any]]:
    """The entries of one message: none for the system prompt; a tool message's results."""
    role, content = string(value.get("role")), value.get("content")
    parts = [{"type": "text", "text": content}] if isinstance(content, str) else (
        content if type(content) is list else [])
    if role == "tool":
        return [_result(part, tools) for part in parts
                if type(part) is dict and part.get("type") == "tool-result"]
    if role not in ("user", "assistant"):
        return []
    blocks: list[dict[str, Any]] = []
    for part in parts:
        kind = part.get("type") if type(part) is dict else None
        if kind == "text" and (text := string(part.get("text"))):
            if role == "user":
                asked = _QUERY.search(text)
                text = asked.group(1) if asked else text
            blocks.append(text_block(text))
        elif kind == "reasoning" and (text := string(part.get("text"))):
            blocks.append(thinking_block(text))
        elif kind == "tool-call":
            call_id, name = string(part.get("toolCallId")) or "", string(part.get("toolName")) or ""
            tools[call_id] = name
            arguments = part.get("args", part.get("input"))
            blocks.append(tool_call_block(call_id, name, arguments if type(arguments) is dict
                                          else {"input": arguments}))
    return [message(role, blocks)] if blocks else []


def _result(part: dict[str, Any], tools: dict[str, str]) -> dict[str, Any]:
    """A tool's result: its ``result`` (or AI SDK ``output``: ``{type, value}``) as text;
    an error when it says so (``isError``, an ``error-text`` / ``error-json`` output) or a
    command's ``Exit code: N`` is not 0."""
    call_id = string(part.get("toolCallId")) or ""
    output = part.get("output", part.get("result"))
    failed = part.get("isError") is True
    if type(output) is dict and "type" in output:
        failed = failed or str(output.get("type")).startswith("error")
        output = output.get("value")
    text = output if isinstance(output, str) else block_text(output) or (
        "" if output is None else str(output))
    name = string(part.get("toolName")) or tools.get(call_id)
    found = _EXIT_CODE.match(text)
    code = int(found.group(1)) if found else None
    return tool_result(call_id, name, text, is_error=failed or bool(code), exit_code=code)


def _edit_file(arguments: Mapping[str, Any]) -> Use:
    """``edit_file``: the file and the new code it writes into it."""
    path = argument(arguments, "target_file", "file_path", "path")
    if not path:
        return Use()
    return Use(files=(FileWork(path, "modified", "", argument(arguments, "code_edit")),),
               target=path)


TOOLS: Final[Mapping[str, Tool]] = {
    "run_terminal_cmd": shell_tool("command"),
    "read_file": GEMINI_TOOLS["read_file"],
    "edit_file": Tool("edit", _edit_file),
    "search_replace": file_tool("edit", "modified", ("file_path", "target_file"),
                                ("old_string",), ("new_string",)),
    "delete_file": file_tool("edit", "deleted", ("target_file", "file_path")),
    "grep_search": GEMINI_TOOLS["grep_search"],
    "codebase_search": search_tool("query"),
    "todo_write": plan_tool("todos", "content"),
}
"""The tools of Cursor's agent, by the names its agent gives them, as the work trail
reads them (``read_file`` and ``grep_search`` as Gemini CLI's tools of those names are
read)."""

CURSOR = SourceReader(AGENT, recognises, read, _homes, tools=TOOLS, by_line=False,
                      lists=lists)
