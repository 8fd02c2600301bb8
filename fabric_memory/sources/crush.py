"""Crush: ``<project>/.crush/crush.db``, the SQLite database Crush keeps in each project it
runs in (its ``data_directory``, ``.crush`` by default), holding every session there.

``sessions`` (``id``, ``parent_session_id`` of a sub-agent's session, ``title``) and
``messages`` (``id`` a UUID, ``session_id``, ``role``, ``parts``, ``created_at``): ``parts``
is a JSON array of ``{type, data}`` (``text``, ``reasoning``, ``tool_call`` with its
``id``, ``name`` and JSON ``input``, ``tool_result`` with ``tool_call_id``, ``content`` and
``is_error``, ``finish``), which Crush 0.8x and later store zstd-compressed (read with the
``zstandard`` package: ``pip install 'fabric-memory[zstd]'``).

Each message is one entry addressed by its id (a UUID Crush gives it), chained within its
Crush session in the order Crush shows them (``created_at``, then the row); a message
holding several tool results is one entry per result (``<id>``, ``<id>.1``, …). A reply
whose ``finish`` says it failed (``error``: the provider's message and details;
``canceled``) keeps that as its ``stopReason`` and ``errorMessage``, as Pi writes a failed
reply, even when it holds nothing else. Its raw
source is its row, as JSON, with ``parts`` as the JSON Crush stored (decompressed).
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import orjson

from ..errors import SessionError
from .claude_code import TOOLS as CLAUDE_TOOLS
from .copilot import TOOLS as COPILOT_TOOLS
from .database import has_tables, json_column, read_rows
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

    from ..session import Entry, Session

AGENT: Final = "crush"
DATABASE: Final = "crush.db"
TABLES: Final = frozenset({"sessions", "messages"})
ZSTD_MAGIC: Final = b"\x28\xb5\x2f\xfd"
"""The first bytes of a zstd frame (Crush's compressed ``parts``; JSON starts with ``[``)."""
_EXIT_CODE: Final = re.compile(r"Exit code:? (-?\d+)")


def _homes(projects: Collection[str]) -> tuple[Path, ...]:
    """The ``.crush`` folder of each project of the indexed sessions — only where Crush is
    installed (its own folder under ``~/.local/share`` or ``~/.config``), so that a recall
    never reads the catalog's projects for nothing."""
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    if not (Path(data, "crush").is_dir() or Path(config, "crush").is_dir()):
        return ()
    folders = (Path(project) / ".crush" for project in projects)
    return tuple(folder for folder in folders if not folder.is_symlink())


def lists(path: str) -> bool:
    """Crush's database, ``crush.db`` (its content decides whose it is)."""
    return os.path.basename(path) == DATABASE


def recognises(first: Any, path: str) -> bool:
    """A SQLite database with Crush's ``sessions`` and ``messages`` tables."""
    return lists(path) and has_tables(path, TABLES)


def read(path: str, max_line_bytes: int) -> Session:
    return read_store(path, AGENT)


def read_store(path: str, agent: str) -> Session:
    """A database of Crush's schema as ``agent``'s: Crush's own, or the one OpenCode kept
    before 1.0, the Go program Crush grew from (:data:`fabric_memory.sources.opencode.LEGACY`);
    its session is named ``<agent>-<project folder>``."""
    database = read_rows(path, _rows)
    sessions, rows = database.value
    entries = Entries()
    tools: dict[str, str] = {}
    last: dict[str, str] = {}
    for row in rows:
        crush_session = str(row["session_id"])
        parts = _parts(row["parts"], path)
        if parts is None:
            entries.note(row["rowid"], f"message {row['id']}: its parts are neither JSON nor "
                         "zstd-compressed JSON; skipped")
            continue
        fields = dict(zip(row.keys(), tuple(row), strict=True))
        del fields["rowid"]
        source = orjson.dumps({**fields, "parts": parts})
        first = len(entries.entries)
        entry = _message(entries, SourceLine(row["rowid"], 0, 0, None), str(row["role"]),
                         parts, tools, address=str(row["id"]), parent=last.get(crush_session),
                         timestamp=_time(row["created_at"]), source=source)
        if entry is None:
            continue
        if crush_session not in last:
            name_ids(entries.entries[first].raw, [crush_session, *sessions.get(crush_session,
                                                                              ())])
        last[crush_session] = entry.id
    project = str(Path(path).resolve().parent.parent)
    return build_session(database, entries, agent=agent, session_id=f"{agent}-{Path(project).name}",
                         project=project, header={"sessions": len(sessions)})


def _rows(db: sqlite3.Connection) -> tuple[dict[str, tuple[str, ...]], list[sqlite3.Row]]:
    sessions = {str(row[0]): tuple(str(value) for value in row[1:] if value)
                for row in db.execute("SELECT id, title, parent_session_id FROM sessions")}
    rows = db.execute("SELECT m.rowid, m.* FROM messages m LEFT JOIN sessions s ON "
                      "s.id = m.session_id ORDER BY s.updated_at, m.session_id, m.created_at, "
                      "m.rowid").fetchall()
    return sessions, rows


def _parts(stored: object, path: str) -> list[Any] | None:
    """The message's parts: its JSON, decompressed first when Crush stored it with zstd."""
    data = stored.encode() if isinstance(stored, str) else stored
    if not isinstance(data, bytes):
        return None
    if data[:4] == ZSTD_MAGIC:
        try:
            import zstandard
        except ImportError:
            raise SessionError(
                path, None, "Crush stores its messages compressed with zstd; install the "
                "zstandard package (pip install -e '.[zstd]' in the fabric-memory clone), "
                "then run fabric-memory reindex") from None
        try:
            data = zstandard.ZstdDecompressor().decompressobj().decompress(data)
        except zstandard.ZstdError:
            return None
    value = json_column(data)
    return value if type(value) is list else None


def _message(entries: Entries, line: SourceLine, role: str, parts: list[Any],
             tools: dict[str, str], *, address: str, parent: str | None, timestamp: str | None,
             source: bytes) -> Entry | None:
    """The entries of one message: text, thinking and calls as one; each result its own."""
    blocks: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    ended: dict[str, Any] = {}
    for part in parts:
        kind = part.get("type") if type(part) is dict else None
        data = part.get("data") if type(part) is dict else None
        data = data if type(data) is dict else {}
        if kind == "text" and (text := string(data.get("text"))):
            blocks.append(text_block(text))
        elif kind == "reasoning" and (text := string(data.get("thinking"))):
            blocks.append(thinking_block(text))
        elif kind == "tool_call":
            call_id, name = string(data.get("id")) or "", string(data.get("name")) or ""
            tools[call_id] = name
            blocks.append(tool_call_block(call_id, name, _arguments(data.get("input"))))
        elif kind == "tool_result":
            call_id = string(data.get("tool_call_id")) or ""
            text = string(data.get("content")) or ""
            found = _EXIT_CODE.search(text)
            code = int(found.group(1)) if found else None
            results.append(tool_result(call_id, string(data.get("name")) or tools.get(call_id),
                                       text, is_error=data.get("is_error") is True or bool(code),
                                       exit_code=code))
        elif kind == "finish" and role == "assistant":
            ended = _ending(data)
    raws = ([message("assistant" if role == "assistant" else "user", blocks, **ended)]
            if (blocks or ended) and role in ("user", "assistant") else []) + results
    for number, raw in enumerate(raws):
        entry = (entries.add(line, raw, address=address, parent=parent, timestamp=timestamp)
                 if number == 0 else entries.follow(raw))
        entry.source = source
    return entries.entries[-1] if raws else None


def _ending(finish: dict[str, Any]) -> dict[str, Any]:
    """How a reply ended when it failed, in Pi's fields: a ``finish`` of reason ``error``
    (the provider's error: its ``message`` and ``details``) or ``canceled`` (the user
    stopped it); nothing for a reply that ended normally."""
    reason = finish.get("reason")
    if reason not in ("error", "canceled"):
        return {}
    said = [text for key in ("message", "details") if (text := string(finish.get(key)))]
    return {"stopReason": "error" if reason == "error" else "aborted",
            "errorMessage": ": ".join(said) or str(reason)}


def _arguments(value: object) -> dict[str, Any]:
    """A call's ``input``: Crush stores it as a JSON string."""
    parsed = json_column(value) if isinstance(value, str) else value
    return parsed if type(parsed) is dict else {"input": value}


def _time(value: object) -> str | None:
    """``created_at``: Unix seconds (milliseconds in some versions)."""
    if type(value) is not int or value <= 0:
        return None
    seconds = value / 1000 if value > 10**11 else value
    try:
        return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")
    except (OverflowError, OSError, ValueError):
        return None


TOOLS: Final[Mapping[str, Tool]] = {
    "bash": PI_TOOLS["bash"],
    "edit": PI_TOOLS["edit"],
    "write": PI_TOOLS["write"],
    "multiedit": CLAUDE_TOOLS["MultiEdit"],
    "view": COPILOT_TOOLS["view"],
    "glob": search_tool("pattern"),
    "grep": search_tool("pattern"),
    "todos": plan_tool("todos", "content"),
}
"""Crush's tools as the work trail reads them (``bash``, ``edit`` and ``write`` take the
arguments Pi's tools of those names take; ``multiedit`` Claude Code's ``MultiEdit``'s)."""

CRUSH = SourceReader(AGENT, recognises, read, _homes, tools=TOOLS, by_line=False, lists=lists)
