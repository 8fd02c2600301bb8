"""Goose: ``~/.local/share/goose/sessions/`` (``$XDG_DATA_HOME/goose/sessions``;
``$GOOSE_PATH_ROOT/data/sessions`` when that is set; ``~/Library/Application
Support/Block/goose/sessions`` on macOS).

Goose 1.10 and later keep every session in one SQLite database there, ``sessions.db``:
a ``sessions`` table (``id`` like ``20260712_1``, ``name`` (earlier ``description``),
``working_dir``) and a ``messages`` table (``session_id``, ``role``, ``content_json``,
``created_timestamp``, ``timestamp``; ``message_id`` in later versions). Earlier versions
wrote one JSON Lines file per session (``<id>.jsonl``): a metadata line (``working_dir``,
``description``), then one message a line. Both hold the same messages: ``{role, created,
content: [...]}`` whose parts are ``text``, ``thinking``, ``toolRequest``
(``toolCall.value.{name, arguments}``) and ``toolResponse`` (``toolResult``: ``{status:
"success", value: {content, isError}}``, ``value`` a list of content, or ``{status:
"error", error}``), paired by ``id``.

Addresses: a database message is addressed by its ``message_id``, else by the id Goose
itself gives it when it loads the session, ``msg_<session>_<n>`` (n: its place in the
session, in Goose's order); each Goose session is a chain of its own in the database (the
first message of each names its session id and name). A JSONL message is addressed by its
line, ``L<line>``. A message holding several tool responses is one entry per response
(``<address>``, ``<address>.1``, …).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Collection, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ..errors import NotASessionError
from .codex import TOOLS as CODEX_TOOLS
from .database import has_tables, json_column, read_rows, row_json
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
    under,
)
from .tools import Tool, checklist_tool, editor_tool

if TYPE_CHECKING:  # loaded when a file is read (see fabric_memory.sources.reader)
    import sqlite3

    from ..session import Entry, Session

AGENT: Final = "goose"
ROOT_ENV: Final = "GOOSE_PATH_ROOT"
DATABASE: Final = "sessions.db"
TABLES: Final = frozenset({"sessions", "messages"})
DATABASE_ID: Final = "goose-sessions"
"""The session id of Goose's database (one session of fabric-memory holding every Goose
session as a chain of its own)."""
_EXIT: Final = re.compile(r"(?:exit (?:status|code):?|failed with exit code:?) (-?\d+)\.?\s*\Z",
                          re.IGNORECASE)
"""How a shell's output ends when its command failed (``exit status 2``)."""


def goose_sessions_dir() -> Path:
    """``$GOOSE_PATH_ROOT/data/sessions``, else ``sessions`` of Goose's data folder."""
    root = os.environ.get(ROOT_ENV)
    if root and os.path.isabs(root):
        return Path(root) / "data" / "sessions"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "Block" / "goose" / "sessions"
    data = os.environ.get("XDG_DATA_HOME")
    base = Path(data) if data and os.path.isabs(data) else Path.home() / ".local" / "share"
    return base / "goose" / "sessions"


def _homes(projects: Collection[str]) -> tuple[Path, ...]:
    return (goose_sessions_dir(),)


# --- one message, from a row or a line ---------------------------------------------------


class _Reading:
    """What reading one file keeps between its messages."""

    __slots__ = ("entries", "tools")

    def __init__(self) -> None:
        self.entries = Entries()
        self.tools: dict[str, str] = {}
        """toolRequest id -> tool name."""


def _message(reading: _Reading, line: SourceLine, role: str, content: list[Any], *,
             address: str | None, parent: str | None, timestamp: str | None,
             source: bytes | None = None) -> Entry | None:
    """The entries of one message: its text, thinking and tool calls as one entry; each
    tool response an entry of its own after it. The last entry, None when there is none."""
    entries, added = reading.entries, 0
    blocks: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for part in content:
        kind = part.get("type") if type(part) is dict else None
        if kind == "text" and (text := string(part.get("text"))):
            blocks.append(text_block(text))
        elif kind == "thinking" and (text := string(part.get("thinking"))):
            blocks.append(thinking_block(text))
        elif kind == "toolRequest":
            blocks.append(_call(part, reading.tools))
        elif kind == "toolResponse":
            results.append(_response(part, reading.tools))
    raws = ([message("assistant" if role == "assistant" else "user", blocks)] if blocks
            else []) + results
    for raw in raws:
        if added == 0:
            entry = entries.add(line, raw, address=address, parent=parent, timestamp=timestamp)
        else:
            entry = entries.follow(raw)
        entry.source = source
        added += 1
    return entries.entries[-1] if added else None


def _call(part: dict[str, Any], tools: dict[str, str]) -> dict[str, Any]:
    call_id = string(part.get("id")) or ""
    request = part.get("toolCall")
    value = request.get("value") if type(request) is dict else None
    value = value if type(value) is dict else {}
    name = string(value.get("name")) or ""
    tools[call_id] = name
    arguments = value.get("arguments")
    return tool_call_block(call_id, name, arguments if type(arguments) is dict
                           else {"input": arguments})


def _response(part: dict[str, Any], tools: dict[str, str]) -> dict[str, Any]:
    """A tool's result: its content's text; an error when its status is ``error`` or its
    value says ``isError``; a shell's exit code from the end of its output."""
    call_id = string(part.get("id")) or ""
    result = part.get("toolResult")
    result = result if type(result) is dict else {}
    value = result.get("value")
    failed = result.get("status") == "error"
    if type(value) is dict:
        failed = failed or value.get("isError") is True
        value = value.get("content")
    text = block_text(value) or string(result.get("error")) or ""
    found = _EXIT.search(text)
    code = int(found.group(1)) if found else None
    return tool_result(call_id, tools.get(call_id), text, is_error=failed or bool(code),
                       exit_code=code)


def _time(seconds: object) -> str | None:
    """Goose's ``created`` (Unix seconds) as ISO-8601."""
    if type(seconds) is not int or not 0 <= seconds < 2**37:
        return None
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


# --- the database --------------------------------------------------------------------------


def lists(path: str) -> bool:
    """Goose's database, ``sessions.db`` (its content decides whose it is)."""
    return os.path.basename(path) == DATABASE


def recognises_database(first: Any, path: str) -> bool:
    """A SQLite database with Goose's ``sessions`` and ``messages`` tables."""
    return lists(path) and has_tables(path, TABLES)


def read_database(path: str, max_line_bytes: int) -> Session:
    database = read_rows(path, _rows)
    sessions, rows = database.value
    reading = _Reading()
    place: dict[str, int] = {}
    last: dict[str, str] = {}
    named = set(rows[0].keys()) if rows else set()
    for row in rows:
        goose_session = str(row["session_id"])
        number = place[goose_session] = place.get(goose_session, -1) + 1
        address = string(row["message_id"] if "message_id" in named else None) or (
            f"msg_{goose_session}_{number}")
        content = json_column(row["content_json"])
        if type(content) is not list:
            reading.entries.note(row["id"], f"message {address}: content_json is not a JSON "
                                 "list; skipped")
            continue
        first = len(reading.entries.entries)
        entry = _message(reading, SourceLine(row["id"], 0, 0, None), str(row["role"]), content,
                         address=address, parent=last.get(goose_session),
                         timestamp=_time(row["created_timestamp"] if "created_timestamp" in named
                                         else None), source=row_json(row))
        if entry is None:
            continue
        last[goose_session] = entry.id
        if first == 0 or reading.entries.entries[first].parent_id is None:
            name_ids(reading.entries.entries[first].raw,
                     [goose_session, *sessions.get(goose_session, ())])
    return build_session(database, reading.entries, agent=AGENT, session_id=DATABASE_ID,
                         project=None, header={"sessions": len(sessions)})


def _rows(db: sqlite3.Connection) -> tuple[dict[str, tuple[str, ...]], list[sqlite3.Row]]:
    """(goose session id -> its name and working folder, every message row in Goose's
    order: session by session, the one updated last last, so it is the active branch), in
    one read transaction."""
    columns = {row[1] for row in db.execute("PRAGMA table_info(messages)")}
    order = "m.timestamp, m.id" if "timestamp" in columns else "m.id"
    updated = ("s.updated_at, " if "updated_at" in {row[1] for row in db.execute(
        "PRAGMA table_info(sessions)")} else "")
    rows = db.execute(f"SELECT m.* FROM messages m LEFT JOIN sessions s ON s.id = m.session_id "
                      f"ORDER BY {updated}m.session_id, {order}").fetchall()
    session_columns = {row[1] for row in db.execute("PRAGMA table_info(sessions)")}
    names = [name for name in ("name", "description", "working_dir") if name in session_columns]
    sessions = {str(row[0]): tuple(str(value) for value in row[1:] if value)
                for row in db.execute(f"SELECT id, {', '.join(names)} FROM sessions")}
    return sessions, rows


# --- the earlier JSON Lines files -------------------------------------------------------


def recognises_lines(first: Any, path: str) -> bool:
    """An earlier Goose session file: its first line is Goose's session metadata
    (``working_dir`` and ``description``, or ``message_count``), or, under Goose's folder, a
    message ``{role, created, content}``."""
    if type(first) is not dict:
        return False
    if "working_dir" in first and ("description" in first or "message_count" in first):
        return True
    return ({"role", "content", "created"} <= first.keys()
            and under(goose_sessions_dir(), path))


def read_lines(path: str, max_line_bytes: int) -> Session:
    lines = JsonLines(path, max_line_bytes)
    reading = _Reading()
    meta: dict[str, Any] = {}
    seen = 0
    for line in lines:
        value = line.value
        seen += 1
        if type(value) is not dict:
            reading.entries.note(line, "not a JSON object; skipped")
        elif seen == 1 and "role" not in value:
            meta = value
        elif type(value.get("content")) is not list:
            reading.entries.note(line, "message without a 'content' list; skipped")
        else:
            _message(reading, line, string(value.get("role")) or "", value["content"],
                     address=None, parent=reading.entries.last_id,
                     timestamp=_time(value.get("created")))
    if seen == 0:
        raise NotASessionError(path, None, "empty file: no Goose session metadata or message")
    session_id = Path(path).stem
    if reading.entries.entries:
        name_ids(reading.entries.entries[0].raw, [session_id, string(meta.get("description"))])
    return build_session(lines, reading.entries, agent=AGENT, session_id=session_id,
                         project=string(meta.get("working_dir")), header=meta)


# --- its tools ---------------------------------------------------------------------------


TOOLS: Final[Mapping[str, Tool]] = {
    "developer__shell": CODEX_TOOLS["shell"],
    "developer__text_editor": editor_tool("write", "written"),
    "todo__todo_write": checklist_tool("content"),
}
"""Goose's built-in tools as the work trail reads them (its developer extension's shell
takes ``command`` as Codex's ``shell`` does)."""

DATABASE_READER = SourceReader(AGENT, recognises_database, read_database, _homes,
                               tools=TOOLS, by_line=False, lists=lists)
LINES_READER = SourceReader(AGENT, recognises_lines, read_lines, _homes, tools=TOOLS)
