"""Crush's per-project SQLite database (``.crush/crush.db``), plain and zstd-compressed
parts, read into the shared per-entry view (fixtures/agents/crush)."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import orjson
import pytest
import zstandard

from fabric_memory.errors import SessionError
from fabric_memory.memory.expand import expand_request
from fabric_memory.memory.recall import recall
from fabric_memory.memory.reindex import reindex
from fabric_memory.sources import read_source
from fabric_memory.sources.crush import CRUSH

from .agent_homes import AGENT_FIXTURES, fake_home

SESSION = "5f0c2d8e-9a41-4b7c-8e3a-1d2c3b4a5f60"
COMPRESSED = {"id": "3c9a1e70-0b1d-4c2e-8f3a-5d6e7f809108", "parts": [
    {"type": "text", "data": {"text": "Both imports now read ../lib/sparkline (plover-9)."}},
    {"type": "finish", "data": {"reason": "stop", "time": 0}}]}


def crush_project(base: Path) -> Path:
    """A project with Crush's database built from the fixture's SQL, plus one message whose
    parts Crush stored zstd-compressed; the database's path."""
    path = base / "kestrel-dash" / ".crush" / "crush.db"
    path.parent.mkdir(parents=True)
    db = sqlite3.connect(path)
    try:
        db.executescript((AGENT_FIXTURES / "crush" / "crush.sql").read_text(encoding="utf-8"))
        parts = zstandard.ZstdCompressor().compress(orjson.dumps(COMPRESSED["parts"]))
        db.execute("INSERT INTO messages (id, session_id, role, parts, created_at, updated_at) "
                   "VALUES (?, ?, 'assistant', ?, 1793900040, 1793900040)",
                   (COMPRESSED["id"], SESSION, parts))
        db.commit()
    finally:
        db.close()
    return path


def test_messages_are_entries_chained_within_their_crush_session(tmp_path: Path) -> None:
    """Each message is an entry addressed by its UUID, chained within its Crush session;
    a message of two tool results is two entries; a build's `Exit code 2` is its exit code;
    zstd-compressed parts are read; the project is the folder holding .crush."""
    path = crush_project(tmp_path)
    session = read_source(path)
    assert (session.agent, session.project) == ("crush", str(tmp_path / "kestrel-dash"))
    roots = [e for e in session.entries if e.parent_id is None]
    assert [e.raw["ids"][:2] for e in roots] == [  # the session updated last comes last
        ["7b1e4f2a-6c3d-4e5f-9a8b-0c1d2e3f4a5b", "Find sparkline imports"],
        [SESSION, "Fix sparkline import"]]
    assert session.active_branch()[-1].id == COMPRESSED["id"]
    built = session.by_id["3c9a1e70-0b1d-4c2e-8f3a-5d6e7f809106.1"].raw["message"]
    assert (built["toolName"], built["isError"], built["exitCode"]) == ("bash", True, 2)
    last = session.by_id[COMPRESSED["id"]]
    assert last.parent_id == "3c9a1e70-0b1d-4c2e-8f3a-5d6e7f809107"
    assert orjson.loads(last.source or b"")["parts"] == COMPRESSED["parts"]


def test_compressed_parts_without_zstandard_say_how_to_read_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the zstandard package the database is refused with the command that fixes
    it (it is read again once that is installed)."""
    path = crush_project(tmp_path)
    monkeypatch.setitem(sys.modules, "zstandard", None)
    with pytest.raises(SessionError, match=r"install the zstandard package .*reindex"):
        read_source(path)


def test_crushs_folders_are_those_of_the_projects_once_crush_is_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Crush's folder is .crush of each known project, looked for only where Crush is
    installed (its own folder under ~/.local/share or ~/.config)."""
    home = fake_home(tmp_path, monkeypatch)
    projects = [str(tmp_path / "kestrel-dash")]
    assert CRUSH.homes(projects) == ()
    (home / ".config" / "crush").mkdir(parents=True)
    assert CRUSH.homes(projects) == (tmp_path / "kestrel-dash" / ".crush",)


def test_a_named_crush_folder_is_indexed_recalled_and_expanded_to_the_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A project's .crush folder named in $FABRIC_MEMORY_EXTRA_SESSIONS is indexed; a rare
    word (here in a compressed message) is recalled with --agent crush and expand --raw
    returns its row with its parts as JSON."""
    fake_home(tmp_path, monkeypatch)
    path = crush_project(tmp_path)
    monkeypatch.setenv("FABRIC_MEMORY_EXTRA_SESSIONS", str(path.parent))
    report = reindex()
    assert (report["indexed"], report["invalid"]) == (1, [])
    hit = recall("plover-9", agent="crush")["hits"][0]
    assert (hit["agent"], hit["address"]) == ("crush", COMPRESSED["id"])
    row = orjson.loads(expand_request({**hit["follow"], "raw": True})["entries"][0]["text"])
    assert (row["id"], row["session_id"], row["parts"]) == (
        COMPRESSED["id"], SESSION, COMPRESSED["parts"])
    hit = recall("TS2307", agent="crush")["hits"][0]
    assert hit["address"] == "3c9a1e70-0b1d-4c2e-8f3a-5d6e7f809106.1"
