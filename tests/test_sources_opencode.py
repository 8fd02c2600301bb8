"""OpenCode: every session in one SQLite database (OpenCode 1.x), read by message and part
rows, found under ~/.local/share/opencode, its rows expanded exactly."""

from __future__ import annotations

import shutil
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
