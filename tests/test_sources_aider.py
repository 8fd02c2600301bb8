"""Aider's Markdown chat history (``.aider.chat.history.md``) read into the shared
per-entry view (fixtures/agents/aider: a real history)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fabric_memory.errors import NotASessionError
from fabric_memory.handoff import Span, packet_sections, render_packet
from fabric_memory.memory.expand import expand_request
from fabric_memory.memory.recall import recall
from fabric_memory.memory.reindex import reindex
from fabric_memory.sources import read_source

from .agent_homes import AGENT_FIXTURES, fake_home

PROJECT = AGENT_FIXTURES / "aider" / "afi-core"
HISTORY = PROJECT / ".aider.chat.history.md"


def test_blocks_are_entries_and_aiders_reports_are_calls() -> None:
    """Each block of one kind is an entry addressed by its first line; an applied edit and
    a command Aider ran are calls with their results after them; a report holding an error
    is an error result; the project is the history's folder."""
    session = read_source(HISTORY)
    assert (session.agent, session.project) == ("aider", str(PROJECT.resolve()))
    assert session.session_id.startswith("afi-core-") and session.malformed == ()
    starts = [e for e in session.entries if e.raw.get("customType") == "aider:start"]
    assert [e.id for e in starts][:3] == ["L2", "L39", "L125"] and len(starts) == 9
    assert starts[0].timestamp == "2025-07-15T11:38:37"
    edit = session.by_id["L410"]
    assert [(c.name, c.arguments) for c in edit.view.tool_calls] == [
        ("edit", {"path": "schemas/validator_metadata_schema.ts"})]
    result = session.by_id["L410.1"].raw["message"]
    assert (result["toolName"], result["isError"]) == ("edit", False)
    pushed = session.by_id["L1190"]
    assert [c.arguments["command"] for c in pushed.view.tool_calls] == ["git push origin main"]
    step = session.by_id["L1063"].view.tool_calls[0]  # Aider's own step, named by its error
    assert (step.name, step.arguments) == (
        "aider", {"error": "The LLM did not conform to the edit format."})
    failed = session.by_id["L1063.1"].raw["message"]
    assert failed["isError"] and "edit-errors.html" in str(failed["content"])
    typed = session.by_id["L1230.1"]  # `#### !find ...`: the user's command, run by Aider
    assert typed.view.tool_calls[0].arguments["command"].startswith("find . -type f")
    assert session.by_id["L1231"].raw["message"]["toolCallId"] == "L1230:run"


def test_the_packet_names_edits_and_errors() -> None:
    """The work trail reads Aider's edits and its failures."""
    session = read_source(HISTORY)
    views = tuple(entry.view for entry in session.active_branch())
    packet = render_packet(packet_sections(Span(views, ""), session.project),
                           session.session_id, views[0].id, views[-1].id, len(views), 12000,
                           session.project)
    assert "validators/SignalScorer.ts" in packet
    assert "error: aider `Error creating file /add: [Errno 30] Read-only file system" in packet
    assert "error: aider `The LLM did not conform to the edit format.` -> failed" in packet


def test_appending_keeps_every_address_and_a_half_written_line_waits(tmp_path: Path) -> None:
    """Aider only appends: a new run and a half-written last line change no earlier
    entry; the half-written line is left for the next read."""
    copy = tmp_path / "p" / ".aider.chat.history.md"
    copy.parent.mkdir()
    shutil.copy(HISTORY, copy)
    before = {e.id: e.raw for e in read_source(copy).entries}
    with copy.open("ab") as out:
        out.write(b"\n# aider chat started at 2025-08-05 09:00:00\n\n#### rename quokka_flag\n"
                  b"> Applied edit to half")
    after = read_source(copy)
    assert {e.id: e.raw for e in after.entries if e.id in before} == before
    assert [e.id for e in after.entries if e.id not in before] == ["L2048", "L2050"]
    assert after.by_id["L2050"].raw["message"]["content"][0]["text"] == "rename quokka_flag"
    assert after.truncated_tail is not None and after.truncated_tail.line == 2051


def test_another_markdown_file_is_refused(tmp_path: Path) -> None:
    """A file named like the history whose first line opens no Aider run is not Aider's."""
    other = tmp_path / ".aider.chat.history.md"
    other.write_text("# Notes\n\nnothing here\n")
    with pytest.raises(NotASessionError):
        read_source(other)


def test_a_project_folder_named_is_indexed_recalled_and_expanded_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A project folder in $FABRIC_MEMORY_EXTRA_SESSIONS is read for its Aider history; a
    rare word is recalled to its block with --agent aider, and expand --raw returns the
    block's bytes exactly."""
    fake_home(tmp_path, monkeypatch)
    project = tmp_path / "afi-core"
    shutil.copytree(PROJECT, project)
    monkeypatch.setenv("FABRIC_MEMORY_EXTRA_SESSIONS", str(project))
    report = reindex()
    assert (report["indexed"], report["invalid"]) == (1, [])
    hit = recall("ValidatorGovernanceSchema governance", agent="aider", match="all")["hits"][0]
    assert hit["agent"] == "aider"
    entry = expand_request({**hit["follow"], "raw": True})["entries"][0]
    data = (project / ".aider.chat.history.md").read_bytes()
    session = read_source(project / ".aider.chat.history.md")
    found = session.by_id[hit["address"]]
    assert entry["text"] == data[found.offset:found.offset + found.length].decode()
    assert "ValidatorGovernanceSchema" in entry["text"]


def test_lines_inside_a_replys_fence_are_the_replys(tmp_path: Path) -> None:
    """A reply's fenced block keeps its lines the reply's, even one that starts like a
    quoted report or an input (Markdown quotes, headings in a SEARCH/REPLACE edit)."""
    history = tmp_path / ".aider.chat.history.md"
    history.write_text(
        "\n# aider chat started at 2025-08-05 09:00:00\n\n#### add a changelog note  \n\n"
        "CHANGES.md\n```markdown\n<<<<<<< SEARCH\n=======\n#### 1.2.0\n> Fixed the gravel-7 "
        "crash\n>>>>>>> REPLACE\n```\n\n> Applied edit to CHANGES.md  \n")
    session = read_source(history)
    assert [(e.id, e.view.role) for e in session.entries] == [
        ("L2", None), ("L4", "user"), ("L6", "assistant"), ("L15", "assistant"),
        ("L15.1", "toolResult")]
    reply = session.by_id["L6"].raw["message"]["content"][0]["text"]
    assert "#### 1.2.0\n> Fixed the gravel-7 crash" in reply
