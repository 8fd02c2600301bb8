"""Kimi CLI context files (``sessions/<md5>/<id>/context*.jsonl`` and the flat ``<id>.jsonl``)
read into the shared per-entry view (fixtures/agents/kimi)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fabric_memory.errors import NotASessionError
from fabric_memory.handoff import Span, packet_sections, render_packet
from fabric_memory.memory.expand import expand_request
from fabric_memory.memory.recall import recall
from fabric_memory.memory.reindex import reindex
from fabric_memory.sources import read_source, reader_for, skipped

from .agent_homes import AGENT_FIXTURES, agent_home, fake_home, line_at

SESSIONS = AGENT_FIXTURES / "kimi" / "sessions"
REAL = SESSIONS / "00d5060aaec3fda180930ea52304b87b" / "d8447fa8-9d8e-41af-9fc6-a12e4a196b6c.jsonl"
CURRENT = (SESSIONS / "7c1e5b0a9d3f42e8b6a1c0d9e8f7a6b5" / "5e2d8c41-7a90-4b3f-8e16-d4c2a9b7f031"
           / "context.jsonl")


def test_a_real_context_pairs_calls_and_reads_failed_commands() -> None:
    """The real flat file: every message is an entry addressed by its line and chained to
    the one before; bookkeeping records are not read; each tool message is paired with its
    call by id, and `Command failed with exit code: N` is its exit code and error."""
    session = read_source(REAL)
    assert (session.agent, session.session_id) == ("kimi", REAL.stem)
    entries = session.entries
    assert len(entries) == 94 and session.malformed == ()
    assert [e.id for e in entries[:3]] == ["L2", "L5", "L7"]
    assert [e.parent_id for e in entries[1:]] == [e.id for e in entries[:-1]]
    failed = {e.id: (e.raw["message"]["toolName"], e.raw["message"]["exitCode"])
              for e in entries if e.raw.get("message", {}).get("isError")}
    assert failed == {"L27": ("Bash", 1), "L122": ("Bash", 4), "L192": ("Bash", 1)}
    names = {call.name for e in entries for call in e.view.tool_calls}
    assert names == {"Bash", "WriteFile", "StrReplaceFile", "ReadContext"}


def test_the_current_layout_reads_thinking_plans_and_errors() -> None:
    """A current context: its id is its folder's name; a think part is thinking, the
    checkpoint marker sent as a user message is left out, SetTodoList is a plan, an
    `ERROR:` result is an error."""
    session = read_source(CURRENT)
    assert session.session_id == CURRENT.parent.name
    roles = [(e.id, e.view.role) for e in session.entries]
    assert roles[:3] == [("L3", "user"), ("L7", "assistant"), ("L8", "toolResult")]
    assert session.entries[1].raw["message"]["content"][0] == {
        "type": "thinking",
        "thinking": "The exporter probably raises in iter_shards when a shard is empty; plan "
                    "first."}
    result = session.by_id["L11"].raw["message"]
    assert (result["toolName"], result["isError"], result["exitCode"]) == ("Shell", True, 1)
    assert skipped(str(CURRENT.parent / "wire.jsonl"))
    assert not skipped(str(CURRENT))


def test_the_packet_names_the_edits_and_the_failed_commands() -> None:
    """The work trail reads Kimi's tools: StrReplaceFile and WriteFile change files, the
    plan's open steps, the failed then passing test runs."""
    session = read_source(CURRENT)
    views = tuple(entry.view for entry in session.active_branch())
    packet = render_packet(packet_sections(Span(views, ""), None), session.session_id,
                           views[0].id, views[-1].id, len(views), 8000, None)
    assert "/home/dev/tidewater/tidewater/export.py: edit" in packet
    assert "/home/dev/tidewater/tests/test_empty_shard.py: created" in packet
    assert "open: pending: Add a regression test" in packet
    real = read_source(REAL)
    views = tuple(entry.view for entry in real.active_branch())
    packet = render_packet(packet_sections(Span(views, ""), None), real.session_id,
                           views[0].id, views[-1].id, len(views), 8000, None)
    assert "[L27] error: Bash `cd /testbed && grep -n" in packet
    assert "/testbed/sklearn/compose/_column_transformer.py: edit" in packet


def test_rotated_contexts_are_sessions_of_their_own(tmp_path: Path) -> None:
    """A context rotated by /clear (context_1.jsonl) is read as `<id>.context_1`; a line of
    another role is a located note; an empty file is refused."""
    folder = tmp_path / "abc"
    folder.mkdir()
    rotated = folder / "context_1.jsonl"
    rotated.write_bytes(CURRENT.read_bytes() + b'{"role": "_secret_future", "x": 1}\n')
    session = read_source(rotated)
    assert session.session_id == "abc.context_1"
    assert [(n.line, n.reason) for n in session.malformed] == [
        (22, 'record of role "_secret_future" not read')]
    empty = folder / "context.jsonl"
    empty.write_bytes(b"")
    with pytest.raises(NotASessionError, match="empty file: no Kimi CLI context record"):
        reader_for(str(rotated)).read(str(empty), 1 << 20)


@pytest.mark.parametrize("moved", [False, True], ids=["default", "KIMI_SHARE_DIR"])
def test_found_in_its_home_recalled_and_expanded_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, moved: bool
) -> None:
    """Kimi's sessions are found under ~/.kimi/sessions (or $KIMI_SHARE_DIR) with nothing
    named, in both layouts; wire.jsonl is skipped; a rare word is recalled to its entry with
    --agent kimi and expand returns the verbatim line."""
    home = fake_home(tmp_path, monkeypatch)
    if moved:
        root = agent_home(tmp_path / "share", "kimi", "sessions")
        monkeypatch.setenv("KIMI_SHARE_DIR", str(root.parent))
    else:
        root = agent_home(home, "kimi", "sessions")
    flat = root / REAL.relative_to(SESSIONS)
    current = flat.parent / flat.stem / "context.jsonl"  # the same file in today's layout
    current.parent.mkdir()
    shutil.copy(flat, current)
    report = reindex()
    assert (report["indexed"], report["invalid"]) == (3, [])
    hits = recall("nightly", agent="kimi")["hits"]  # wire.jsonl says it too: not read
    assert [(h["agent"], h["address"], Path(h["path"]).name) for h in hits] == [
        ("kimi", "L3", "context.jsonl")]
    hits = recall("VarianceThreshold remainder", agent="kimi", match="all", limit=50)["hits"]
    assert {h["sessionId"] for h in hits} == {flat.stem}
    assert {h["path"] for h in hits} == {str(flat.resolve()), str(current.resolve())}
    entry = expand_request({**hits[0]["follow"], "raw": True})["entries"][0]
    assert entry["text"] == line_at(Path(hits[0]["path"]), entry["line"])
