"""Qwen Code: chats as uuid-linked JSON Lines with Gemini's content parts, told from
Claude Code's, found under ~/.qwen/projects, its tools and compressions read."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fabric_memory.compaction.span import summarize_session
from fabric_memory.memory.expand import expand_request
from fabric_memory.memory.recall import recall
from fabric_memory.memory.reindex import reindex
from fabric_memory.sources import read_source, reader_for
from fabric_memory.sources.qwen import QWEN

from .agent_homes import fake_home, line_at
from .conftest import FIXTURES

CHAT = FIXTURES / "agents" / "qwen" / "authored" / "6f1e2d3c-4b5a-4978-8a6b-5c4d3e2f1a0b.jsonl"


def test_records_are_entries_linked_past_bookkeeping() -> None:
    """Each conversation record is one entry addressed by its uuid; the telemetry record is
    passed through (the next call's parent is the todo result); the compression is a
    compaction entry; the command's Exit Code 1 makes its result an error."""
    session = read_source(CHAT)
    assert session.agent == "qwen" and session.project == "/home/dev/projects/tern"
    assert [(e.id, e.parent_id, e.type) for e in session.entries] == [
        ("q-02", None, "message"), ("q-03", "q-02", "message"), ("q-04", "q-03", "message"),
        ("q-05", "q-04", "message"), ("q-07", "q-05", "message"), ("q-08", "q-07", "message"),
        ("q-09", "q-08", "compaction")]
    failed = session.entries[5].view.message
    assert failed is not None and (failed["exitCode"], failed["isError"]) == (1, True)
    assert "gannet_id key" in (session.entries[6].view.summary or "")


def test_a_claude_code_line_is_not_taken_for_qwens() -> None:
    """Qwen Code's reader says no to a Claude Code line (same uuid and sessionId, but
    Anthropic content, no parts) outside Qwen's folder."""
    claude = {"type": "user", "uuid": "u1", "sessionId": "s1", "cwd": "/w",
              "message": {"role": "user", "content": "hi"}}
    assert not QWEN.recognises(claude, "/elsewhere/s1.jsonl")


def test_the_summary_carries_the_edit_the_failed_command_and_the_open_todo() -> None:
    """Qwen's tools in the trail: the edit with its change, the command that exited 1,
    the todo step still in progress (the completed one is not open)."""
    summary = summarize_session(CHAT).summary
    for line in ("scripts/migrate.py: edit `- rows[:-1]` -> `+ rows`",
                 "`python scripts/migrate.py --fixture puffin` -> exit 1",
                 "in_progress: Run the migration against the puffin fixture"):
        assert line in summary, summary
    assert "Fix the slice in migrate.py" not in summary.split("## Open items")[1].split("##")[0]


def test_found_under_qwen_projects_recalled_and_expanded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A chat under ~/.qwen/projects/<cwd>/chats is found with no option, recalled with
    --agent qwen to its entry, and expands raw to its line byte for byte."""
    home = fake_home(tmp_path, monkeypatch)
    chats = home / ".qwen" / "projects" / "-home-dev-projects-tern" / "chats"
    chats.mkdir(parents=True)
    copy = chats / CHAT.name
    shutil.copy(CHAT, copy)
    (chats / f"{CHAT.stem}.runtime.json").write_text("{}")
    assert reader_for(str(copy.resolve())) is QWEN
    report = reindex(workers=1)
    assert (report["indexed"], report["invalid"]) == (1, [])
    hits = recall("gannet_id", agent="qwen")["hits"]
    assert hits and {hit["agent"] for hit in hits} == {"qwen"}
    failed = next(hit for hit in hits if hit["address"] == "q-08")
    raw = expand_request({**failed["follow"], "raw": True})["entries"][0]["text"]
    assert raw == line_at(copy, 8)


REAL = FIXTURES / "agents" / "qwen" / "cli-0.24.4" / "c32c2b3e-13ff-4135-adf3-b98f7db9a703.jsonl"


def test_a_chat_the_real_cli_wrote_reads_its_calls_and_exit_codes() -> None:
    """Qwen Code 0.24.4's own file: the telemetry and attribution records are passed
    through, each call is paired with its result, the command's shell_result exit code 2
    and the failed MCP call are errors, the edit succeeded."""
    session = read_source(REAL)
    assert session.agent == "qwen" and session.project == "/tmp/ajqwhome/work"
    assert not session.malformed
    results = [(e.view.tool_name, e.view.message.get("exitCode"), e.view.message["isError"])
               for e in session.entries if e.view.role == "toolResult" and e.view.message]
    assert results == [("mcp__fabric-memory__recall", None, True),
                       ("run_shell_command", 2, True), ("edit", None, False)]
    assert [e.parent_id for e in session.entries[1:]] == [e.id for e in session.entries[:-1]]
