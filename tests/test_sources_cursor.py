"""Cursor's agent CLI chats (``~/.cursor/chats/<md5>/<id>/store.db``: content-addressed
blobs, a protobuf root) read into the shared per-entry view (fixtures/agents/cursor)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import orjson
import pytest

from fabric_memory.handoff import Span, packet_sections, render_packet
from fabric_memory.memory.expand import expand_request
from fabric_memory.memory.recall import recall
from fabric_memory.memory.reindex import reindex
from fabric_memory.sources import read_source

from .agent_homes import AGENT_FIXTURES, cursor_store, fake_home

CHAT = orjson.loads((AGENT_FIXTURES / "cursor" / "chat.json").read_bytes())


def _blob_id(message: dict[str, object]) -> str:
    return hashlib.sha256(orjson.dumps(message)).hexdigest()


def test_messages_are_entries_addressed_by_their_blob(tmp_path: Path) -> None:
    """Each message blob is an entry addressed by its SHA-256, in the root's order,
    chained; the system prompt is not read; the user's words are taken out of Cursor's
    context; a tool message answering two calls is two entries; the root names the
    project."""
    session = read_source(cursor_store(tmp_path / "store.db"))
    assert (session.agent, session.session_id, session.project) == (
        "cursor", "6c0b7a52-91d4-4f1e-8a3b-2d5e7f9a1c40", "/home/dev/lanternfly")
    ids = [_blob_id(m) for m in CHAT["messages"]]
    assert [e.id for e in session.entries] == [*ids[1:6], f"{ids[5]}.1", *ids[6:]]
    assert [e.parent_id for e in session.entries[1:]] == [e.id for e in session.entries[:-1]]
    said = session.entries[0].raw["message"]["content"][0]["text"]
    assert said.startswith("The lanternfly CLI prints the wrong unit") and "<user" not in said
    failed = session.by_id[ids[7]].raw["message"]
    assert (failed["toolName"], failed["isError"], failed["exitCode"]) == (
        "run_terminal_cmd", True, 1)
    assert session.by_id[ids[2]].source == orjson.dumps(CHAT["messages"][2])


def test_the_root_says_the_order_whatever_order_the_blobs_were_stored_in(
        tmp_path: Path) -> None:
    """Blobs stored last message first are read in the root's order."""
    backwards = read_source(cursor_store(tmp_path / "b" / "store.db", stored_backwards=True))
    assert [e.id for e in backwards.entries] == [
        e.id for e in read_source(cursor_store(tmp_path / "f" / "store.db")).entries]


def test_without_its_root_the_messages_keep_their_stored_order(tmp_path: Path) -> None:
    """A store whose root blob is missing is read in the order its blobs were stored."""
    chat = {**CHAT, "meta": {**CHAT["meta"]}}
    path = cursor_store(tmp_path / "store.db", chat)
    import sqlite3

    db = sqlite3.connect(path)
    roots = [row[0] for row in db.execute("SELECT id, data FROM blobs") if row[1][:1] != b"{"]
    db.executemany("DELETE FROM blobs WHERE id = ?", [(root,) for root in roots])
    db.commit()
    db.close()
    session = read_source(path)
    assert len(roots) == 1 and session.project is None
    assert [e.id for e in session.entries] == [e.id for e in read_source(
        cursor_store(tmp_path / "whole" / "store.db")).entries]


def test_the_packet_names_the_edit_the_plan_and_the_failed_command(tmp_path: Path) -> None:
    """The work trail reads Cursor's agent tools."""
    session = read_source(cursor_store(tmp_path / "store.db"))
    views = tuple(e.view for e in session.active_branch())
    packet = render_packet(packet_sections(Span(views, ""), session.project),
                           session.session_id, views[0].id, views[-1].id, len(views), 8000,
                           session.project)
    assert "lanternfly/format.py: edit" in packet
    assert "open: pending: Run the unit tests" in packet
    assert "pytest tests/test_format.py -q` -> exit 1" in packet


def test_found_in_its_home_recalled_and_expanded_to_the_blob(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cursor's chats folder is found with nothing named; a rare word is recalled to its
    message with --agent cursor; expand --raw returns the message's blob byte for byte."""
    home = fake_home(tmp_path, monkeypatch)
    store = cursor_store(home / ".cursor" / "chats" / "5b3c9e0f1a2d4c6b8e7f901234abcdef"
                         / CHAT["meta"]["agentId"] / "store.db")
    report = reindex()
    assert (report["indexed"], report["invalid"]) == (1, [])
    hit = recall("LF-9931", agent="cursor")["hits"][0]
    assert (hit["agent"], hit["address"], hit["path"]) == (
        "cursor", _blob_id(CHAT["messages"][1]), str(store.resolve()))
    entry = expand_request({**hit["follow"], "raw": True})["entries"][0]
    assert entry["text"] == orjson.dumps(CHAT["messages"][1]).decode()
