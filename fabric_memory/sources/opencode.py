"""OpenCode: ``~/.local/share/opencode/opencode.db`` (``$XDG_DATA_HOME/opencode``), one
SQLite database holding every session (OpenCode 1.x; read with
:mod:`fabric_memory.sources.database`).

Its ``session`` table names each session (``id``, ``title``, ``directory``); ``message``
rows (``id``, ``session_id``, ``time_created``, ``data``: ``{role, parentID, …}``) hold
their ``part`` rows (``message_id``, ``data``: ``text``, ``reasoning``, ``tool`` —
``{tool, callID, state: {status, input, output, error, metadata: {exit}}}`` — and step,
patch and file parts). A message is addressed by its ``id`` (``msg_…``); an assistant
message's tool results follow it as ``<id>.1``, …; each OpenCode session is a chain of its
own in the database (its first entry names the session's id, title and folder). An entry's
raw source is its row as JSON (a tool result's: its part's row).
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import orjson

from . import crush
from .database import has_tables, json_column, read_rows, row_json
from .pi import TOOLS as PI_TOOLS
from .reader import (
    Entries,
    SourceLine,
    SourceReader,
    build_session,
    message,
    name_ids,
    string,
    text_block,
    thinking_block,
    tool_call_block,
    tool_result,
)
from .tools import Tool, plan_tool, search_tool

if TYPE_CHECKING:  # loaded when a file is read (see fabric_memory.sources.reader)
    import sqlite3

    from ..session import Session

AGENT: Final = "opencode"
DATABASE: Final = "opencode.db"
TABLES: Final = frozenset({"session", "message", "part"})
DATABASE_ID: Final = "opencode-sessions"
"""The session id of OpenCode's database (one session of fabric-memory holding every
OpenCode session as a chain of its own)."""

TOOLS: Final[Mapping[str, Tool]] = {
    "bash": PI_TOOLS["bash"],
    "read": PI_TOOLS["read"],
    "edit": PI_TOOLS["edit"],
    "write": PI_TOOLS["write"],
    "glob": search_tool("pattern"),
    "grep": search_tool("pattern"),
    "todowrite": plan_tool("todos", "content"),
}
"""OpenCode's tools as the work trail reads them (``bash``, ``read``, ``edit`` and ``write``
read as Pi's tools of those names are, which know OpenCode's ``filePath``,
``oldString`` and ``newString``)."""


def opencode_data_dir() -> Path:
    """``$XDG_DATA_HOME/opencode``, else ``~/.local/share/opencode`` (on every system)."""
    data = os.environ.get("XDG_DATA_HOME")
    base = Path(data) if data and os.path.isabs(data) else Path.home() / ".local" / "share"
    return base / "opencode"


def lists(path: str) -> bool:
    return os.path.basename(path) == DATABASE


def recognises(first: Any, path: str) -> bool:
    """A SQLite database with OpenCode's ``session``, ``message`` and ``part`` tables."""
    return lists(path) and has_tables(path, TABLES)


def read(path: str, max_line_bytes: int) -> Session:
    database = read_rows(path, _rows)
    sessions, messages, parts = database.value
    entries = Entries()
    last: dict[str, str] = {}
    for number, row in enumerate(messages, 1):
        session_id = str(row["session_id"])
        data = json_column(row["data"])
        if type(data) is not dict:
            entries.note(number, f"message {row['id']}: data is not a JSON object; skipped")
            continue
        own = [(part, value) for part in parts.get(str(row["id"]), ())
               if type(value := json_column(part["data"])) is dict]
        line = SourceLine(number, 0, 0, None)
        where = {"address": str(row["id"]), "parent": last.get(session_id),
                 "timestamp": _time(row["time_created"])}
        first = len(entries.entries)
        if data.get("role") == "user":
            text = "\n".join(t for _, v in own if v.get("type") == "text"
                             and (t := string(v.get("text"))))
            entry = entries.add(line, message("user", [text_block(text)] if text else []),
                                **where)
            entry.source = row_json(row)
        else:
            entry = entries.add(line, _assistant([v for _, v in own], data), **where)
            entry.source = row_json(row)
            for part, value in own:
                if value.get("type") == "tool":
                    result = entries.follow(_result(value))
                    result.source = row_json(part)
        last[session_id] = entries.entries[-1].id
        if first == 0 or entries.entries[first].parent_id is None:
            name_ids(entries.entries[first].raw, [session_id, *sessions.get(session_id, ())])
    return build_session(database, entries, agent=AGENT, session_id=DATABASE_ID, project=None,
                         header={"sessions": len(sessions)})


def _rows(db: sqlite3.Connection) -> tuple[dict[str, tuple[str, ...]], list[sqlite3.Row],
                                           dict[str, list[sqlite3.Row]]]:
    """(session id -> its title and folder, every message in order, message id -> its
    parts in order), in one read transaction."""
    sessions = {str(row[0]): tuple(str(value) for value in row[1:] if value)
                for row in db.execute("SELECT id, title, directory FROM session")}
    messages = db.execute("SELECT * FROM message ORDER BY session_id, time_created, id"
                          ).fetchall()
    parts: dict[str, list[sqlite3.Row]] = {}
    for part in db.execute("SELECT * FROM part ORDER BY message_id, time_created, id"):
        parts.setdefault(str(part["message_id"]), []).append(part)
    return sessions, messages, parts


def _assistant(parts: list[dict[str, Any]], data: dict[str, Any]) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = []
    for part in parts:
        kind = part.get("type")
        if kind == "reasoning" and (text := string(part.get("text"))):
            blocks.append(thinking_block(text))
        elif kind == "text" and (text := string(part.get("text"))):
            blocks.append(text_block(text))
        elif kind == "tool":
            state = _object(part.get("state"))
            given = state.get("input")
            blocks.append(tool_call_block(string(part.get("callID")) or "",
                                          string(part.get("tool")) or "",
                                          given if type(given) is dict else {"input": given}))
    failed = type(data.get("error")) is dict
    return message("assistant", blocks, **({"stopReason": "error"} if failed else {}))


def _result(part: dict[str, Any]) -> dict[str, Any]:
    """A tool part's outcome: its output (or error), its status, a command's ``exit``."""
    state = _object(part.get("state"))
    status = state.get("status")
    output = string(state.get("output")) or ""
    error = string(state.get("error")) or ""
    metadata = _object(state.get("metadata"))
    exit_code = metadata.get("exit") if type(metadata.get("exit")) is int else None
    text = "\n".join(t for t in (output, error) if t) or (
        orjson.dumps(state).decode() if status not in ("completed", "error") else "")
    return tool_result(string(part.get("callID")) or "", string(part.get("tool")), text,
                       is_error=status == "error" or bool(exit_code), exit_code=exit_code,
                       interrupted=status == "error" and "abort" in error.lower())


def _object(value: object) -> dict[str, Any]:
    return value if type(value) is dict else {}


def _time(milliseconds: object) -> str | None:
    if type(milliseconds) is not int:
        return None
    try:
        moment = datetime.fromtimestamp(milliseconds / 1000, UTC)
    except (OverflowError, OSError, ValueError):
        return None
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _homes(projects: Collection[str]) -> tuple[Path, ...]:
    return (opencode_data_dir(),)


OPENCODE = SourceReader(AGENT, recognises, read, _homes, tools=TOOLS, lists=lists,
                        by_line=False)


LEGACY_FOLDER: Final = ".opencode"
"""Where OpenCode before 1.0 (the Go program Crush grew from) kept its database: in each
project it ran in, ``<project>/.opencode/opencode.db``, in the schema Crush kept."""


def lists_legacy(path: str) -> bool:
    return (os.path.basename(path) == DATABASE
            and os.path.basename(os.path.dirname(path)) == LEGACY_FOLDER)


def recognises_legacy(first: Any, path: str) -> bool:
    """OpenCode's database before 1.0: ``.opencode/opencode.db`` with Crush's tables."""
    return lists_legacy(path) and has_tables(path, crush.TABLES)


def read_legacy(path: str, max_line_bytes: int) -> Session:
    return crush.read_store(path, AGENT)


def _legacy_homes(projects: Collection[str]) -> tuple[Path, ...]:
    """The ``.opencode`` folder of each project of the indexed sessions, where OpenCode
    before 1.0 was set up (its ``~/.opencode.json``)."""
    if not Path.home().joinpath(".opencode.json").is_file():
        return ()
    folders = (Path(project) / LEGACY_FOLDER for project in projects)
    return tuple(folder for folder in folders if not folder.is_symlink())


LEGACY = SourceReader(AGENT, recognises_legacy, read_legacy, _legacy_homes, tools=crush.TOOLS,
                      by_line=False, lists=lists_legacy)
"""OpenCode before 1.0 (its tools are Crush's: the same program then)."""
