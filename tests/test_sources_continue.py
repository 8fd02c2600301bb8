"""Continue: a session's whole-file JSON read by its history items (addressed m<index>),
found under ~/.continue/sessions (its index skipped), its tools read by the trail."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest

from fabric_memory.compaction.span import summarize_session
from fabric_memory.memory.expand import expand_request
from fabric_memory.memory.recall import recall
from fabric_memory.memory.reindex import reindex
from fabric_memory.sources import read_source, reader_for
from fabric_memory.sources.continue_dev import CONTINUE

from .agent_homes import fake_home
from .conftest import FIXTURES

SESSIONS = FIXTURES / "agents" / "continue" / "authored" / "sessions"
SESSION = SESSIONS / "3c2b1a09-8f7e-4d6c-b5a4-938271605f4e.json"


def test_history_items_are_entries_spanning_their_nodes() -> None:
    """Each history item is one entry m<i> spanning its exact JSON; calls are paired with
    their tool messages by id, the errored command an error with exit code 1."""
    session = read_source(SESSION)
    assert session.agent == "continue" and session.project == "/home/dev/projects/kestrel"
    data = SESSION.read_bytes()
    history = orjson.loads(data)["history"]
    for entry in session.entries:
        assert orjson.loads(data[entry.offset:entry.offset + entry.length]) == history[
            int(entry.id.removeprefix("m"))]
    failed = session.entries[-1].view.message
    assert failed is not None and (failed["toolName"], failed["exitCode"], failed["isError"]) == (
        "run_terminal_command", 1, True)


def test_the_summary_carries_the_edit_and_the_failed_command() -> None:
    """Continue's tools in the trail: the find-and-replace edit with its change and the
    command that failed with exit code 1, addressed m<i>."""
    summary = summarize_session(SESSION).summary
    for line in ("[m5] export/run.py: edit `- TIMEOUT = 5` -> `+ TIMEOUT = 60`",
                 "[m6] `python -m export.run --dry-run` -> exit 1"):
        assert line in summary, summary


def test_found_in_continues_folder_recalled_and_expanded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """~/.continue/sessions is found with no option; its sessions.json is neither read nor
    reported; a rare word is recalled with --agent continue and expands raw to its node."""
    home = fake_home(tmp_path, monkeypatch)
    monkeypatch.delenv("CONTINUE_GLOBAL_DIR", raising=False)
    shutil.copytree(SESSIONS, home / ".continue" / "sessions")
    copy = home / ".continue" / "sessions" / SESSION.name
    assert reader_for(str(copy.resolve())) is CONTINUE
    report = reindex(workers=1)
    assert (report["indexed"], report["invalid"], report["sessions"]) == (1, [], 1)
    hits = recall("merlin", agent="continue")["hits"]
    assert [(hit["address"], hit["agent"]) for hit in hits] == [("m6", "continue")]
    raw = expand_request({**hits[0]["follow"], "raw": True})["entries"][0]["text"]
    assert orjson.loads(raw) == orjson.loads(SESSION.read_bytes())["history"][6]


REAL_SESSIONS = FIXTURES / "agents" / "continue" / "Developer" / "sessions"
REAL = REAL_SESSIONS / "7bc6e275-126c-4a65-ab0a-0607c64789f9.json"
"""A real Continue session (oleg121203/Developer, fixtures/agents/continue/Developer)."""


def test_a_real_session_keeps_every_history_item_and_its_words() -> None:
    """The real session (Continue, 2024-12): each of its four history items is an entry
    m<i> spanning its exact node, in order, user and assistant in turn; the user's words
    are their text parts (the code they quoted, then the question), the assistant's its
    whole reply; the project is the session's workspace; nothing is a note."""
    session = read_source(REAL)
    assert (session.agent, session.session_id, session.project) == (
        "continue", "7bc6e275-126c-4a65-ab0a-0607c64789f9", "/workspace")
    assert session.malformed == ()
    data = REAL.read_bytes()
    history = orjson.loads(data)["history"]
    assert [entry.id for entry in session.entries] == ["m0", "m1", "m2", "m3"]
    assert [entry.parent_id for entry in session.entries] == [None, "m0", "m1", "m2"]
    for entry, item in zip(session.entries, history, strict=True):
        assert orjson.loads(data[entry.offset:entry.offset + entry.length]) == item
        content = item["message"]["content"]
        said = content if isinstance(content, str) else "".join(
            part["text"] for part in content if part["type"] == "text")
        assert entry.view.role == item["message"]["role"]
        assert entry.view.text == said
    assert session.entries[0].view.text.endswith(
        'how to solve it: Не удается разрешить импорт "watchdog.events"')


def test_the_real_session_is_found_recalled_and_expanded_exactly(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Laid out as ~/.continue/sessions with Continue's own index beside it, the real
    session is found with no option (the index skipped); a rare word of a reply is recalled
    to it and expands raw to its node."""
    home = fake_home(tmp_path, monkeypatch)
    shutil.copytree(REAL_SESSIONS, home / ".continue" / "sessions")
    report = reindex(workers=1)
    assert (report["indexed"], report["invalid"], report["sessions"]) == (1, [], 1)
    hits = recall("pycharm", agent="continue")["hits"]
    assert [(hit["address"], hit["sessionId"]) for hit in hits] == [("m1", REAL.stem)]
    raw = expand_request({**hits[0]["follow"], "raw": True})["entries"][0]["text"]
    assert orjson.loads(raw) == orjson.loads(REAL.read_bytes())["history"][1]
