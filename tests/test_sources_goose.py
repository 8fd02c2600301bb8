"""Goose's sessions: the SQLite ``sessions.db`` (rows, read-only, while Goose writes) and
the earlier JSON Lines files (fixtures/agents/goose)."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import orjson
import pytest

from fabric_memory.errors import NotASessionError, SessionError
from fabric_memory.handoff import Span, packet_sections, render_packet
from fabric_memory.memory.expand import expand_request
from fabric_memory.memory.recall import recall
from fabric_memory.memory.reindex import reindex
from fabric_memory.session import Session, hash_file
from fabric_memory.sources import database, read_source

from .agent_homes import AGENT_FIXTURES, fake_home, goose_home, line_at

LEGACY = AGENT_FIXTURES / "goose" / "20250701_100000.jsonl"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """The fixture database, built from its SQL (Goose's schema)."""
    return goose_home(tmp_path) / "sessions.db"


def _packet(session: Session, views: tuple[object, ...] | None = None) -> str:
    views = views or tuple(entry.view for entry in session.active_branch())
    return render_packet(packet_sections(Span(views, ""), None),  # type: ignore[arg-type]
                         session.session_id, views[0].id, views[-1].id,  # type: ignore[attr-defined]
                         len(views), 8000, None)


def test_each_goose_session_is_a_chain_of_its_messages(db: Path) -> None:
    """Every message row is an entry addressed by its message_id, chained within its Goose
    session (each session's first message is a root naming the session); a row holding two
    tool responses is two entries; tool responses pair with their calls by id."""
    session = read_source(db)
    assert (session.agent, session.session_id, session.project) == (
        "goose", "goose-sessions", None)
    roots = [e for e in session.entries if e.parent_id is None]
    assert [e.id for e in roots] == ["msg_6f1a0c2e", "msg_7a2b0d01"]
    assert roots[0].raw["ids"][:2] == ["20261104_1", "Fix harvest route for slashed crates"]
    both = [e for e in session.entries if e.id.startswith("msg_6f1a0c38")]
    assert [(e.id, e.parent_id, e.raw["message"]["toolName"]) for e in both] == [
        ("msg_6f1a0c38", "msg_6f1a0c37", "developer__text_editor"),
        ("msg_6f1a0c38.1", "msg_6f1a0c38", "developer__shell")]
    failed = session.by_id["msg_6f1a0c36"].raw["message"]
    assert (failed["isError"], failed["exitCode"]) == (True, 1)  # "exit status 1", isError false
    refused = session.by_id["msg_7a2b0d03"].raw["message"]
    assert refused["isError"] and "missing grant quincebot:rollout" in str(refused["content"])
    assert all(e.length == 0 and e.source for e in session.entries)
    assert orjson.loads(session.by_id["msg_6f1a0c2f"].source or b"")["id"] == 2


def test_the_packet_names_the_edits_the_plan_and_the_failed_command(db: Path) -> None:
    """The work trail reads Goose's developer tools: the str_replace edit, the write, the
    checklist's open steps, the failing pytest run then the passing one."""
    session = read_source(db)
    views = tuple(e.view for e in session.entries if e.id.startswith("msg_6f1a0c"))
    packet = _packet(session, views)
    assert "/home/dev/orchard-api/orchard/routes.py: edit" in packet
    assert "/home/dev/orchard-api/tests/fixtures/crates.json: created" in packet
    assert "open: pending: Add a regression test for pear/bosc" in packet
    assert "python -m pytest tests/test_harvest.py -q` -> exit 1: E   KeyError" in packet
    assert "`pytest -q` last run passed" in packet


def test_a_database_without_message_ids_is_addressed_as_goose_loads_it(tmp_path: Path) -> None:
    """Before message_id, a message is msg_<session>_<n> (its place in its session, in
    Goose's order), as Goose names it when it loads the session."""
    old = tmp_path / "sessions.db"
    sql = (AGENT_FIXTURES / "goose" / "sessions.sql").read_text()
    sql = sql.replace("message_id TEXT, ", "").replace("(message_id, ", "(")
    sql = "\n".join(line if "INSERT INTO messages" not in line else
                    line.replace("VALUES ('msg_", "VALUES ('", 1) for line in sql.splitlines())
    sql = "\n".join(line.replace(line[line.index("VALUES (") + 8:].split(", ", 1)[0] + ", ", "")
                    if "INSERT INTO messages" in line else line for line in sql.splitlines())
    connection = sqlite3.connect(old)
    connection.executescript(sql)
    connection.close()
    ids = [e.id for e in read_source(old).entries]
    assert ids[:3] == ["msg_20261104_1_0", "msg_20261104_1_1", "msg_20261104_1_2"]
    assert "msg_20261104_2_0" in ids


def test_a_database_being_written_is_read_without_blocking_or_writing(db: Path) -> None:
    """While Goose holds a write transaction open (WAL), the reader reads the committed
    rows at once and changes no byte of the database or its log."""
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("INSERT INTO messages (message_id, session_id, role, content_json, "
                   "created_timestamp) VALUES ('msg_uncommitted', '20261104_2', 'user', "
                   "'[{\"type\":\"text\",\"text\":\"not yet\"}]', 1793786500)")
    wal = db.with_name("sessions.db-wal")
    before = (hash_file(str(db)), wal.read_bytes())
    try:
        session = read_source(db)
        after = (hash_file(str(db)), wal.read_bytes())
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert "msg_uncommitted" not in session.by_id and len(session.entries) == 17
    assert after == before



def test_a_closed_wal_database_is_read_leaving_no_file_beside_it(db: Path) -> None:
    """Goose closed its WAL database (no -wal beside it): reading it, as every reindex
    does, leaves the folder as it was (no -wal or -shm file made), byte for byte."""
    sqlite3.connect(db).close()  # a clean close: SQLite removes the log and its index
    folder = db.parent
    before = {path.name: path.read_bytes() for path in folder.iterdir()}
    assert db.read_bytes()[18:20] == b"\x02\x02" and "sessions.db-wal" not in before
    assert len(read_source(db).entries) == 17
    assert {path.name: path.read_bytes() for path in folder.iterdir()} == before

def test_a_locked_database_is_a_clear_error(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A rollback-journal database its agent holds an exclusive lock on is reported as
    locked (read again on the next reindex), after the short wait."""
    path = tmp_path / "sessions.db"
    writer = sqlite3.connect(path, isolation_level=None)
    writer.executescript((AGENT_FIXTURES / "goose" / "sessions.sql").read_text().replace(
        "PRAGMA journal_mode = WAL;", "PRAGMA journal_mode = DELETE;"))
    monkeypatch.setattr(database, "BUSY_MS", 50)
    writer.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(SessionError, match=r"database is locked by its agent .* read again"):
            read_source(path)
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert len(read_source(path).entries) == 17


def test_the_earlier_json_lines_file(tmp_path: Path) -> None:
    """An earlier session file: the metadata line names the folder; messages are entries
    by line; a file that is neither is refused."""
    session = read_source(LEGACY)
    assert (session.session_id, session.project) == ("20250701_100000", "/home/dev/orchard-api")
    assert [(e.id, e.view.role) for e in session.entries] == [
        ("L2", "user"), ("L3", "assistant"), ("L4", "toolResult"), ("L5", "assistant")]
    assert "orchard/cli.py" in str(session.by_id["L4"].raw["message"]["content"])
    empty = tmp_path / "sessions.db"
    empty.write_bytes(b"")
    with pytest.raises(NotASessionError):
        read_source(empty)


def test_found_in_its_home_recalled_and_expanded_to_the_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Goose's folder is found with nothing named (the database and the earlier file); a
    rare word is recalled to its message with --agent goose; expand --raw returns the exact
    row, as JSON, and the earlier file's line byte for byte."""
    home = fake_home(tmp_path, monkeypatch)
    folder = goose_home(home)
    report = reindex()
    assert (report["indexed"], report["invalid"]) == (2, [])
    assert str(folder.resolve()) in report["sessionsRoots"]
    hit = recall("quincebot rollout", agent="goose", match="all")["hits"][0]
    assert (hit["agent"], hit["address"]) == ("goose", "msg_7a2b0d03")
    entry = expand_request({**hit["follow"], "raw": True})["entries"][0]
    row = orjson.loads(entry["text"])
    assert (row["message_id"], row["session_id"], row["role"]) == (
        "msg_7a2b0d03", "20261104_2", "user")
    hit = recall("ORCH-4471", agent="goose")["hits"][0]
    entry = expand_request({**hit["follow"], "raw": True})["entries"][0]
    assert entry["text"] == line_at(folder / LEGACY.name, entry["line"])
    text = expand_request(hit["follow"])["entries"][0]["text"]
    assert "ORCH-4471" in text and not text.startswith("{")


def test_the_session_goose_updated_last_is_the_active_branch(db: Path) -> None:
    """Sessions are read oldest update first (not by id: 20261104_10 sorts before _2), so
    the one Goose worked in last is the active branch."""
    writer = sqlite3.connect(db)
    writer.execute("INSERT INTO sessions (id, name, working_dir, created_at, updated_at) "
                   "VALUES ('20261104_10', 'Later', '/home/dev/x', '2026-11-04 11:00:00', "
                   "'2026-11-04 11:00:05')")
    writer.execute("INSERT INTO messages (message_id, session_id, role, content_json, "
                   "created_timestamp) VALUES ('msg_late', '20261104_10', 'user', "
                   "'[{\"type\":\"text\",\"text\":\"later work\"}]', 1793790000)")
    writer.commit()
    writer.close()
    session = read_source(db)
    assert [e.id for e in session.active_branch()] == ["msg_late"]
    assert session.entries[-1].id == "msg_late"


REAL_SHARE = AGENT_FIXTURES / "goose" / "jwp23-dotfiles" / ".local" / "share" / "goose"
"""A real Goose sessions.db (schema 5, 2025-12) from jwp23/dotfiles: one session Goose
opened and left without a message (fixtures/agents/goose/jwp23-dotfiles)."""


def test_a_real_database_is_read_by_its_own_schema(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The real database, in Goose's own DDL (schema 5, messages without ``message_id``), is
    found in ~/.local/share/goose/sessions and read as Goose's: its one session has no
    message, so no entry and no note, and reindex takes it without a complaint. A message
    added to the copy in Goose's ``content_json`` shape is then an entry addressed as Goose
    loads it (``msg_<session>_<n>``), naming its session and folder, recalled and expanded
    to its row."""
    home = fake_home(tmp_path, monkeypatch)
    share = home / ".local" / "share" / "goose"
    shutil.copytree(REAL_SHARE, share)
    path = share / "sessions" / "sessions.db"
    session = read_source(path)
    assert (session.agent, session.entries, session.malformed) == ("goose", (), ())
    report = reindex()
    assert (report["indexed"], report["invalid"]) == (1, [])
    db = sqlite3.connect(path)
    try:
        db.execute("INSERT INTO messages (session_id, role, content_json, created_timestamp) "
                   "VALUES ('20251202_1', 'user', ?, 1764694800)",
                   (orjson.dumps([{"type": "text", "text": "list the vsl fixtures"}]).decode(),))
        db.commit()
    finally:
        db.close()
    session = read_source(path)
    assert [(entry.id, entry.view.role, entry.view.text) for entry in session.entries] == [
        ("msg_20251202_1_0", "user", "list the vsl fixtures")]
    assert session.entries[0].raw["ids"] == [  # the root names its session and folder
        "20251202_1", "CLI Session", "/Users/jpresley/workspace/tmp/vsl"]
    reindex()
    hits = recall("vsl fixtures", agent="goose", match="all")["hits"]
    assert [hit["address"] for hit in hits] == ["msg_20251202_1_0"]
    row = orjson.loads(expand_request({**hits[0]["follow"], "raw": True})["entries"][0]["text"])
    assert (row["session_id"], row["role"]) == ("20251202_1", "user")


def test_rows_only_in_the_write_ahead_log_are_indexed_and_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent that keeps its store open (OpenCode does not even checkpoint on exit) holds
    its newest rows only in ``sessions.db-wal``, the main file unchanged: reindex sees the
    log's change, indexes them, recalls and expands them, takes an unchanged log as
    unchanged, and follows the checkpoint that folds the log into the file."""
    home = fake_home(tmp_path, monkeypatch)
    db = goose_home(home) / "sessions.db"
    assert reindex()["indexed"] == 2
    file_bytes = db.read_bytes()
    writer = sqlite3.connect(db, isolation_level=None)
    try:
        writer.execute("PRAGMA wal_autocheckpoint = 0")  # the rows stay in the log
        for n, word in enumerate(("kestrelwing", "ospreyquill")):
            writer.execute("INSERT INTO messages (message_id, session_id, role, content_json, "
                           "created_timestamp) VALUES (?, '20261104_2', 'user', ?, ?)",
                           (f"msg_wal_{n}", orjson.dumps([{"type": "text", "text": word}])
                            .decode(), 1793786600 + n))
            assert db.read_bytes() == file_bytes and db.with_name("sessions.db-wal").exists()
            report = reindex()
            assert (report["indexed"], report["skipped"]) == (1, 1), report
            hits = recall(word, agent="goose")["hits"]
            assert [hit["address"] for hit in hits] == [f"msg_wal_{n}"]
            row = orjson.loads(expand_request({**hits[0]["follow"], "raw": True})
                               ["entries"][0]["text"])
            assert row["message_id"] == f"msg_wal_{n}"
        assert reindex()["skipped"] == 2  # nothing new in the log: nothing read again
    finally:
        writer.close()  # the last connection checkpoints the log into the file
    assert db.read_bytes() != file_bytes and not db.with_name("sessions.db-wal").exists()
    assert reindex()["indexed"] == 1
    assert [hit["address"] for hit in recall("ospreyquill", agent="goose")["hits"]] == [
        "msg_wal_1"]


def test_a_change_to_a_stores_log_is_a_change_to_the_store(db: Path) -> None:
    """The live index hears of a write to ``sessions.db-wal`` as a change to the store."""
    from fabric_memory.memory.live import _session_paths

    assert _session_paths([f"{db}-wal"]) == {str(db)}
    assert _session_paths([f"{db}-shm", str(db.with_name("notes.txt-wal"))]) == set()
