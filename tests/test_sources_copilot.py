"""GitHub Copilot CLI event logs (``session-state/<id>/events.jsonl`` and the flat
``<id>.jsonl``) read into the shared per-entry view (fixtures/agents/copilot)."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest

from fabric_memory.compaction.span import summarize_session
from fabric_memory.errors import NotASessionError
from fabric_memory.handoff import Span, packet_sections, render_packet
from fabric_memory.memory.expand import expand_request
from fabric_memory.memory.recall import recall
from fabric_memory.memory.reindex import reindex
from fabric_memory.session import Session
from fabric_memory.sources import read_source, reader_for

from .agent_homes import AGENT_FIXTURES, agent_home, fake_home, line_at

STATE = AGENT_FIXTURES / "copilot" / "session-state"
CURRENT = STATE / "3f9c2a71-5d4e-4b8a-9c61-2e7d0a4b8f13" / "events.jsonl"
FLAT = STATE / "0c4b7e92-3a1d-4f58-b6e0-9d2c7a5f1e38.jsonl"
ID = "8c1d2e3f-0a1b-4c2d-8e3f-4a5b6c7d8e{:02d}"


def _message(session: Session, address: str) -> dict[str, object]:
    return session.by_id[address].raw["message"]  # type: ignore[no-any-return]


def test_events_are_entries_addressed_by_their_ids() -> None:
    """Each read event is one entry addressed by its id; the system prompt, turn marks and
    permissions are passed through, so the parent chain goes on across them; a call made
    in an assistant message is not made again by its tool.execution_start."""
    session = read_source(CURRENT)
    assert (session.agent, session.session_id, session.project) == (
        "copilot", "3f9c2a71-5d4e-4b8a-9c61-2e7d0a4b8f13", "/home/dev/quillmark")
    addresses = [entry.id for entry in session.entries]
    assert addresses[:4] == [ID.format(1), ID.format(2), ID.format(4), ID.format(6)]
    assert session.by_id[ID.format(4)].parent_id == ID.format(2)  # across the system prompt
    assert session.by_id[ID.format(13)].parent_id == ID.format(10)  # across turn marks
    calls = [call.name for entry in session.entries for call in entry.view.tool_calls]
    assert calls == ["view", "update_todo", "edit", "bash", "view", "edit", "bash"]
    assert [e.id for e in session.active_branch()] == addresses
    assert session.malformed == ()


def test_results_carry_their_tool_error_flag_and_exit_code() -> None:
    """A shell result's trailing `<exited with exit code N>` is its exit code (non-zero: an
    error); `success: false` is an error with its message; the compaction keeps Copilot's
    own summary."""
    session = read_source(CURRENT)
    failed = _message(session, ID.format(20))
    assert (failed["toolName"], failed["isError"], failed["exitCode"]) == ("bash", True, 1)
    passed = _message(session, ID.format(30))
    assert (passed["isError"], passed["exitCode"]) == (False, 0)
    missing = _message(session, ID.format(23))
    assert (missing["toolName"], missing["isError"]) == ("view", True)
    assert "footnote.html does not exist" in str(missing["content"])
    summary = session.by_id[ID.format(25)]
    assert summary.type == "compaction" and "test_backref_has_title" in summary.raw["summary"]
    start = session.by_id[ID.format(1)].raw
    assert "fix-footnotes" in start["content"] and start["ids"] == [session.session_id]


def test_the_flat_layout_announces_calls_when_they_start() -> None:
    """In the earlier flat file a call is known from tool.execution_start alone, its
    arguments a JSON string; notices (info, error, abort) are text entries."""
    session = read_source(FLAT)
    assert (session.session_id, session.project) == ("0c4b7e92-3a1d-4f58-b6e0-9d2c7a5f1e38",
                                                     None)
    calls = [call for entry in session.entries for call in entry.view.tool_calls]
    assert [(c.name, c.arguments.get("command")) for c in calls] == [
        ("bash", "grep -rn grindstone_limit /home/dev/ledgerline"),
        ("str_replace_editor", "str_replace"), ("bash", "make -C /home/dev/ledgerline check")]
    assert _message(session, "e10")["exitCode"] == 2
    notices = {e.raw["customType"]: e.raw["content"] for e in session.entries
               if e.type == "custom_message"}
    assert "429 rate limit" in notices["session.error"]
    assert notices["abort"] == "user initiated"


def test_the_packet_names_the_edits_and_the_failed_commands() -> None:
    """The work trail reads Copilot's tools: edits, the plan's open steps, a failed view,
    the failing `make` with its exit code, the passing test run."""
    def packet(path: Path) -> str:
        session = read_source(path)
        views = tuple(entry.view for entry in session.active_branch())
        return render_packet(packet_sections(Span(views, ""), session.project),
                             session.session_id, views[0].id, views[-1].id, len(views),
                             8000, session.project)

    current, flat = packet(CURRENT), packet(FLAT)
    assert "src/quillmark/footnotes.py: edit" in current
    assert "open: pending: Run the footnote tests" in current
    # A failed view is a lookup, not open work: its path stays among the exact values.
    assert "path: `templates/footnote.html`" in current and "error: view" not in current
    assert "`pytest tests/test_footnotes.py -q` last run passed (2 runs)" in current
    assert "`make -C /home/dev/ledgerline check` last run failed (exit 2)" in flat
    assert "config.toml: edit `- grindstone_limit = 500` -> `+ batch_limit = 500`" in flat


def test_odd_lines_are_located_notes_and_an_eventless_file_is_refused(tmp_path: Path) -> None:
    """An unknown event type and a line that is no event are notes naming their line; a
    file with no event at all is not a session."""
    path = tmp_path / "events.jsonl"
    lines = CURRENT.read_bytes().split(b"\n")[:4]
    lines += [b'{"type":"vendor.future","data":{},"id":"x1","parentId":null}', b"[1, 2]",
              b'{"type":"user.message"}']
    path.write_bytes(b"\n".join(lines) + b"\n")
    notes = [(note.line, note.reason) for note in read_source(path).malformed]
    assert notes == [(5, 'unknown Copilot CLI event type "vendor.future"; skipped'),
                     (6, "not a JSON object; skipped"),
                     (7, "not a Copilot CLI event (no 'type' and 'data'); skipped")]
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    with pytest.raises(NotASessionError, match="empty file: no Copilot CLI event"):
        reader_for(str(path)).read(str(empty), 1 << 20)


@pytest.mark.parametrize("moved", [False, True], ids=["default", "COPILOT_HOME"])
def test_found_in_its_home_recalled_and_expanded_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, moved: bool
) -> None:
    """Copilot's sessions are found under ~/.copilot (or $COPILOT_HOME) with nothing named;
    a rare word is recalled to its entry with --agent copilot, and expand returns the
    verbatim line, byte for byte."""
    home = fake_home(tmp_path, monkeypatch)
    if moved:
        root = agent_home(tmp_path / "elsewhere", "copilot", "session-state")
        monkeypatch.setenv("COPILOT_HOME", str(root.parent))
    else:
        root = agent_home(home, "copilot", "session-state")
    report = reindex()
    assert (report["indexed"], report["invalid"]) == (2, [])
    assert str(root.resolve()) in report["sessionsRoots"]
    hit = recall("grindstone_limit", agent="copilot")["hits"][0]
    assert (hit["agent"], hit["address"]) == ("copilot", "e3")
    hit = recall("zephyrine title", agent="copilot", match="all")["hits"][0]
    copied = root / CURRENT.relative_to(STATE)
    assert hit["path"] == str(copied.resolve())
    entry = expand_request({**hit["follow"], "raw": True})["entries"][0]
    assert entry["text"] == line_at(copied, entry["line"])
    assert orjson.loads(entry["text"])["id"] == hit["address"]
    assert {h["agent"] for h in recall("footnote", agent="kimi")["hits"]} == set()
    shells = recall(tool="bash", agent="copilot", limit=50)["hits"]
    assert shells and all(h["tool"] == "bash" for h in shells)
    failed = {h["address"] for h in shells if h.get("isError")}
    assert failed == {ID.format(20), "e10"}  # the failing pytest and make runs


ENGRAM = AGENT_FIXTURES / "copilot" / "agent-engram" / "session-state"
REAL = ENGRAM / "07c40cd0-ff51-4d6e-bdcd-ac2f90877203" / "events.jsonl"
"""A real Copilot CLI 1.0.10 session, its first 125 lines (softwaresalt/agent-engram,
fixtures/agents/copilot/agent-engram)."""


def test_a_real_session_is_one_chain_with_every_message_call_and_result() -> None:
    """The real session (Copilot CLI 1.0.10 on Windows): most events name a parent the file
    does not hold (Copilot does not write its streaming events), yet the session is one
    chain from its start, every entry on the active branch; nothing is lost: both user
    messages, every call (from ``toolRequests``) in order with its arguments, each result
    paired by id; the two ``powershell`` runs that print ``<exited with exit code 1>`` are
    the errors, every other command exited 0."""
    session = read_source(REAL)
    assert (session.agent, session.session_id, session.project) == (
        "copilot", "07c40cd0-ff51-4d6e-bdcd-ac2f90877203", "D:\\Source\\GitHub\\agent-engram")
    assert session.malformed == ()
    events = [orjson.loads(line) for line in REAL.read_bytes().splitlines()]
    assert len(events) == 125
    assert [entry.id for entry in session.entries if entry.parent_id is None] == [events[0]["id"]]
    assert len(session.active_branch()) == len(session.entries) == 37
    users = [(entry.id, entry.view.text) for entry in session.entries if entry.view.role == "user"]
    assert users == [(event["id"], event["data"]["content"]) for event in events
                     if event["type"] == "user.message"]
    requests = [(call["toolCallId"], call["name"], call["arguments"]) for event in events
                if event["type"] == "assistant.message"
                for call in event["data"].get("toolRequests", [])]
    assert len(requests) == 20
    assert [(call.call_id, call.name, dict(call.arguments)) for entry in session.entries
            for call in entry.view.tool_calls] == requests
    results = [entry.view.message for entry in session.entries if entry.view.role == "toolResult"]
    assert [result["toolCallId"] for result in results] == [
        event["data"]["toolCallId"] for event in events
        if event["type"] == "tool.execution_complete"]
    codes = [(result["exitCode"], result["isError"]) for result in results
             if result["toolName"] == "powershell"]
    assert codes == [(0, False)] * 10 + [(1, True)] * 2


def test_the_real_session_summary_names_the_failed_commands() -> None:
    """The trail reads Copilot's ``powershell`` tool in the real session: each command with
    its exit status, the two that could not reach agent-intercom outstanding."""
    summary = summarize_session(REAL).summary
    for line in ("[L54] `bd ready --json 2>&1 | Select-Object -First 50` -> ok",
                 '[L110] `agent-intercom-ctl steer "Starting Feature 007 breakdown into beads.',
                 "-> exit 1: Failed to connect to server",
                 "## Outstanding errors (2)", "[L15 ... L36] D:\\Source\\GitHub\\agent-engram"
                 "\\.context\\backlog.md (read)"):
        assert line in summary, summary


def test_the_real_session_is_found_recalled_and_expanded_exactly(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Laid out in ~/.copilot/session-state the real session is found with nothing named; a
    rare word of the user's is recalled to their message and ``expand --raw`` returns its
    line byte for byte."""
    home = fake_home(tmp_path, monkeypatch)
    shutil.copytree(ENGRAM, home / ".copilot" / "session-state")
    report = reindex()
    assert (report["indexed"], report["invalid"]) == (1, [])
    hits = recall("harness-architect", agent="copilot")["hits"]
    assert [hit["address"] for hit in hits] == ["174f75b5-f6cb-452d-b520-39a6637c15ab"]
    entry = expand_request({**hits[0]["follow"], "raw": True})["entries"][0]
    assert (entry["line"], entry["text"]) == (3, line_at(REAL, 3))
