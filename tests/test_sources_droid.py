"""Factory's Droid CLI sessions (``~/.factory/sessions/<cwd>/<id>.jsonl``) read into the
shared per-entry view (fixtures/agents/droid)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fabric_memory.handoff import Span, packet_sections, render_packet
from fabric_memory.memory.expand import expand_request
from fabric_memory.memory.recall import recall
from fabric_memory.memory.reindex import reindex
from fabric_memory.sources import read_source

from .agent_homes import AGENT_FIXTURES, fake_home, line_at

SESSION = "a4c8e2f0-1b3d-4e5f-8a7b-9c0d1e2f3a4b"
FILE = AGENT_FIXTURES / "droid" / "sessions" / "-home-dev-wrenbook" / f"{SESSION}.jsonl"


def test_messages_chain_through_their_tool_results() -> None:
    """Messages are entries by id; a message's second tool result follows its first, and
    the next message (naming the first by parentId) hangs after both; Execute's failure
    carries its exit code; todo_state lines are not read."""
    session = read_source(FILE)
    assert (session.agent, session.session_id, session.project) == (
        "droid", SESSION, "/home/dev/wrenbook")
    assert [(e.id, e.parent_id) for e in session.entries][4:7] == [
        ("m5", "m4"), ("m5.1", "m5"), ("m6", "m5.1")]
    assert [e.id for e in session.active_branch()] == [e.id for e in session.entries]
    failed = session.by_id["m7"].raw["message"]
    assert (failed["toolName"], failed["isError"], failed["exitCode"]) == ("Execute", True, 1)
    assert session.malformed == ()


def test_the_packet_names_the_edit_the_plan_and_the_failed_command() -> None:
    """The work trail reads Droid's tools."""
    session = read_source(FILE)
    views = tuple(e.view for e in session.active_branch())
    packet = render_packet(packet_sections(Span(views, ""), session.project),
                           session.session_id, views[0].id, views[-1].id, len(views), 8000,
                           session.project)
    assert "wrenbook/export.py: edit" in packet
    assert "open: pending: Run the export tests" in packet
    assert "pytest tests/test_export.py -q` -> exit 1" in packet


def test_found_in_its_home_recalled_and_expanded_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """~/.factory/sessions is found with nothing named (the settings file beside a session
    is not read); a rare word is recalled with --agent droid and expanded to its line."""
    home = fake_home(tmp_path, monkeypatch)
    target = home / ".factory" / "sessions"
    shutil.copytree(AGENT_FIXTURES / "droid" / "sessions", target)
    report = reindex()
    assert (report["indexed"], report["invalid"]) == (1, [])
    hit = recall("bramble-44", agent="droid")["hits"][0]
    assert (hit["agent"], hit["address"]) == ("droid", "m7")
    copied = target / FILE.relative_to(AGENT_FIXTURES / "droid" / "sessions")
    entry = expand_request({**hit["follow"], "raw": True})["entries"][0]
    assert entry["text"] == line_at(copied, entry["line"])
