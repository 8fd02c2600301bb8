"""GitHub Copilot CLI event logs (``session-state/<id>/events.jsonl`` and the flat
``<id>.jsonl``) read into the shared per-entry view (fixtures/agents/copilot)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

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
        root = agent_home(tmp_path / "elsewhere", "copilot")
        monkeypatch.setenv("COPILOT_HOME", str(root.parent))
    else:
        root = agent_home(home, "copilot")
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
