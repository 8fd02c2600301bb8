"""OpenCode: every session in one SQLite database (OpenCode 1.x), read by message and part
rows, found under ~/.local/share/opencode, its rows expanded exactly."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import orjson
import pytest

from fabric_memory.memory.expand import expand_request
from fabric_memory.memory.recall import recall
from fabric_memory.memory.reindex import reindex
from fabric_memory.sources import read_source, reader_for
from fabric_memory.sources.opencode import OPENCODE

from .agent_homes import fake_home
from .conftest import FIXTURES

DATABASE = FIXTURES / "agents" / "opencode" / "cli-1.18.33" / "opencode.db"
SESSION = "ses_daf0fab4effeyvwvHq16ryZ93I"


def test_messages_and_tool_parts_are_entries_with_their_rows() -> None:
    """The real database: the user's message, two assistant messages each followed by its
    tool result (our recall that failed, the command that exited 2), the closing reply;
    each entry's raw source is its row (a result's: its part's row)."""
    session = read_source(DATABASE)
    assert session.agent == "opencode" and not session.malformed
    views = [entry.view for entry in session.entries]
    assert [(v.role, v.tool_name) for v in views] == [
        ("user", None), ("assistant", None), ("toolResult", "fabric-memory_recall"),
        ("assistant", None), ("toolResult", "bash"), ("assistant", None)]
    command = session.entries[4]
    assert command.id.endswith(".1") and command.view.message is not None
    assert (command.view.message["exitCode"], command.view.message["isError"]) == (2, True)
    row = orjson.loads(command.source or b"")
    assert row["message_id"] == command.id.removesuffix(".1")
    assert orjson.loads(row["data"])["state"]["metadata"]["exit"] == 2
    assert SESSION in session.entries[0].raw["ids"]


def test_found_under_opencodes_data_folder_recalled_and_expanded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """~/.local/share/opencode/opencode.db is found with no option, its failed command
    recalled with --agent opencode and expanded raw to its part's row."""
    home = fake_home(tmp_path, monkeypatch)
    folder = home / ".local" / "share" / "opencode"
    folder.mkdir(parents=True)
    shutil.copy(DATABASE, folder / DATABASE.name)
    assert reader_for(str((folder / DATABASE.name).resolve())) is OPENCODE
    report = reindex(workers=1)
    assert (report["indexed"], report["invalid"]) == (1, [])
    hits = recall("no-such-dir-for-opencode", mode="phrase", agent="opencode")["hits"]
    assert {hit["agent"] for hit in hits} == {"opencode"}  # the call and its result
    result = next(hit for hit in hits if hit.get("role") == "toolResult")
    raw = expand_request({**result["follow"], "raw": True})["entries"][0]["text"]
    assert orjson.loads(orjson.loads(raw)["data"])["tool"] == "bash"



LEGACY = FIXTURES / "agents" / "opencode" / "go-0.0.x" / "utils" / ".opencode" / "opencode.db"
"""A real database of OpenCode before 1.0, the Go program (kashifkhan0771/utils, MIT)."""


def test_the_go_opencode_s_project_database_is_read_as_opencode(tmp_path: Path) -> None:
    """OpenCode before 1.0 kept each project's sessions in ``.opencode/opencode.db`` in the
    schema Crush kept: read as OpenCode's, every message row an entry in the order the
    sessions were worked in (a message's further tool results after it), every call
    answered by its id, each of its 7 sessions a chain, the project the folder holding
    ``.opencode``; a user's rare words recalled with ``--agent opencode`` expand to the
    row."""
    session = read_source(LEGACY)
    assert (session.agent, session.session_id, session.malformed) == (
        "opencode", "opencode-utils", ())
    assert session.project == str(LEGACY.parent.parent.resolve())
    db = sqlite3.connect(f"file:{LEGACY}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT m.id, m.parts FROM messages m JOIN sessions s ON "
                          "s.id = m.session_id ORDER BY s.updated_at, m.session_id, "
                          "m.created_at, m.rowid").fetchall()
    finally:
        db.close()
    assert len(rows) == 124
    assert [e.id for e in session.entries if "." not in e.id] == [row[0] for row in rows]
    calls = [part["data"]["id"] for _, parts in rows for part in orjson.loads(parts)
             if part["type"] == "tool_call"]
    made = [call.call_id for e in session.entries for call in e.view.tool_calls]
    answered = [e.view.message["toolCallId"] for e in session.entries
                if e.view.role == "toolResult" and e.view.message is not None]
    assert made == calls and sorted(answered) == sorted(calls) and len(calls) == 80
    assert len([e for e in session.entries if e.parent_id is None]) == 7
    copy = tmp_path / "sessions" / "utils" / ".opencode"
    copy.mkdir(parents=True)
    (copy / "opencode.db").write_bytes(LEGACY.read_bytes())
    where = {"sessions": tmp_path / "sessions", "index": tmp_path / "index"}
    assert reindex(**where)["indexed"] == 1
    hits = recall("respescting the guide lines", agent="opencode", **where)["hits"]
    assert [hit["entryId"] for hit in hits][:1] == ["d9bf9875-b0bb-4f6a-ac28-6eef6a6e771e"]
    raw = expand_request({**hits[0]["follow"], "raw": True})["entries"][0]["text"]
    assert orjson.loads(raw)["id"] == "d9bf9875-b0bb-4f6a-ac28-6eef6a6e771e"
