"""Crush's per-project SQLite database (``.crush/crush.db``), plain and zstd-compressed
parts, read into the shared per-entry view (fixtures/agents/crush)."""

from __future__ import annotations

import shutil
import sqlite3
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import zstandard

from fabric_memory.compaction.span import session_addresses
from fabric_memory.errors import SessionError
from fabric_memory.handoff import packet_sections, render_packet, summarized_span
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


WHISPER = AGENT_FIXTURES / "crush" / "OpenSuperWhisper" / ".crush"
"""A real Crush database (Starmel/OpenSuperWhisper, fixtures/agents/crush/OpenSuperWhisper)."""
MAIN = "9ffe03d9-8440-498b-a7d0-015281c1d74b"
CANCELLED = "f30a70f3-3071-4388-805d-f1aed0d24e13"


def _whisper(base: Path) -> Path:
    """A copy of the real database (SQLite leaves ``-shm`` and ``-wal`` files beside a WAL
    database it opens, so the fixture is never opened in place)."""
    folder = base / "OpenSuperWhisper" / ".crush"
    shutil.copytree(WHISPER, folder)
    return folder / "crush.db"


def _rows(path: Path) -> list[tuple[str, str, str, list[dict[str, Any]]]]:
    """``(id, session, role, parts)`` of every message, in each session's order."""
    db = sqlite3.connect(path)
    try:
        rows = db.execute("SELECT id, session_id, role, parts FROM messages "
                          "ORDER BY session_id, created_at, rowid").fetchall()
    finally:
        db.close()
    return [(row[0], row[1], row[2], orjson.loads(row[3])) for row in rows]


def test_a_real_database_keeps_every_message_call_and_result_in_order(tmp_path: Path) -> None:
    """The real Crush database (three sessions, two of them started from the first): every
    message is an entry (one per tool result), each chained after the one before it in its
    session; every call in order with its result paired by id; the failed edits and the
    three builds that exit 65 are errors; a reply the user cancelled, holding nothing but
    its ``finish``, is kept with ``stopReason`` and ``errorMessage``."""
    path = _whisper(tmp_path)
    session = read_source(path)
    rows = _rows(path)
    assert len(rows) == 132 and session.malformed == ()
    expected: list[tuple[str, str | None]] = []
    last: dict[str, str] = {}
    for message_id, crush_session, role, parts in rows:
        results = sum(part["type"] == "tool_result" for part in parts) if role == "tool" else 1
        ids = [message_id, *(f"{message_id}.{k}" for k in range(1, results))]
        for address in ids:
            expected.append((address, last.get(crush_session)))
            last[crush_session] = address
    assert sorted((entry.id, entry.parent_id) for entry in session.entries) == sorted(expected)
    order = {address: number for number, (address, _) in enumerate(expected)}
    calls = [(part["data"]["id"], part["data"]["name"]) for _, _, _, parts in rows
             for part in parts if part["type"] == "tool_call"]
    in_order = sorted(session.entries, key=lambda entry: order[entry.id])
    assert [(call.call_id, call.name) for entry in in_order
            for call in entry.view.tool_calls] == calls and len(calls) == 48
    assert [entry.view.message["toolCallId"] for entry in in_order
            if entry.view.role == "toolResult"] == [
        part["data"]["tool_call_id"] for _, _, _, parts in rows for part in parts
        if part["type"] == "tool_result"]
    failed = {entry.id: (entry.view.tool_name, entry.view.message.get("exitCode"))
              for entry in session.entries if entry.view.role == "toolResult"
              and entry.view.message["isError"]}
    assert failed == {"201aa6a9-ee20-47e5-83c0-9dd72a693b13": ("edit", None),
                      "e1b81ede-d08b-4f5f-ad94-8ba0ba79c754": ("multiedit", None),
                      "a782783c-968a-4f90-b06c-8120a5a66b06": ("edit", None),
                      "081c2aff-d381-4562-9335-1b30f5a89595": ("bash", 65),
                      "4d60ba00-6034-4831-a6a6-fe7524b3477e": ("bash", 65),
                      "f539a5aa-c153-4780-aa8b-70199df41e51": ("bash", 65)}
    cancelled = session.by_id[CANCELLED].raw["message"]
    assert cancelled == {"role": "assistant", "content": [], "stopReason": "aborted",
                         "errorMessage": "Request cancelled"}
    roots = sorted(entry.raw["ids"] for entry in session.entries if entry.parent_id is None)
    assert roots == [[MAIN, "Codebase Documentation and Agent Guidelines"],
                     ["d60caee8-295c-48b4-891e-4ac40eb5362b",
                      "Improve Toast and Error Handling in App", MAIN],
                     ["fae7104b-4a0f-43cd-b283-4c0a1d63fe0e", "UI Changes for OpenSuperWhisper App",
                      MAIN]]


def test_the_real_database_packet_names_the_failed_edit_builds_and_edits(
        tmp_path: Path) -> None:
    """The trail reads Crush's tools in the real main session: the edit refused (the
    text appears twice) is still open, the builds that failed passed later, the edits
    made are named."""
    session = read_source(_whisper(tmp_path))
    leaf = next(entry.id for entry in reversed(session.entries)
                if session.branch(entry.id)[0].raw.get("ids", [None])[0] == MAIN)
    views = [entry.view for entry in session.branch(leaf)]
    assert len(views) == 108
    span = summarized_span(views)
    sections = packet_sections(span, session.project, session_addresses(session))
    packet = str(orjson.loads(render_packet(
        sections, session.session_id, span.views[0].id, span.views[-1].id, len(span.views),
        8000, session.project))["hookSpecificOutput"]["additionalContext"])
    for line in ("[a782783c-968a-4f90-b06c-8120a5a66b06] error: edit `/Users/chirag13/development/"
                 "OpenSuperWhisper/OpenSuperWhisper/OpenSuperWhisperApp.swift` -> failed",
                 "`xcodebuild -scheme OpenSuperWhisper -destination 'platform=macOS,arch=arm64' "
                 "-quiet build` -> ok",
                 "OpenSuperWhisper/Utils/ToastManager.swift: edit `- if self?.current == item {`"):
        assert line in packet, packet


def test_the_real_database_is_indexed_recalled_and_expanded_to_its_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real .crush folder named in $FABRIC_MEMORY_EXTRA_SESSIONS is indexed; a rare word
    of the user's (a typo) and the cancelled reply's message are recalled to their
    entries, and expand --raw returns each row with its parts."""
    fake_home(tmp_path, monkeypatch)
    folder = _whisper(tmp_path).parent
    monkeypatch.setenv("FABRIC_MEMORY_EXTRA_SESSIONS", str(folder))
    report = reindex()
    assert (report["indexed"], report["invalid"]) == (1, [])
    rows = {row[0]: row for row in _rows(folder / "crush.db")}
    for words, address in (("successufl", "2a5a834d-1fe4-4dcb-957d-bf11b7cb59ce"),
                           ("Request cancelled", CANCELLED)):
        hits = recall(words, agent="crush", match="all")["hits"]
        assert [hit["address"] for hit in hits] == [address]
        row = orjson.loads(expand_request({**hits[0]["follow"], "raw": True})["entries"][0]["text"])
        assert (row["id"], row["session_id"], row["role"], row["parts"]) == rows[address]
