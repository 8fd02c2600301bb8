"""Cline, Roo Code and Kilo Code: a task's ``api_conversation_history.json`` read by its
messages (addressed ``m<index>``), told apart by the extension folder, found in the
editors' storage, their tools (native and XML) read by the trail."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest

from fabric_memory.compaction.span import session_addresses, summarize_session
from fabric_memory.handoff import packet_sections, render_packet, summarized_span
from fabric_memory.memory.expand import expand_request
from fabric_memory.memory.recall import recall
from fabric_memory.memory.reindex import reindex
from fabric_memory.session import Session
from fabric_memory.sources import read_source, reader_for
from fabric_memory.sources.cline import EXTENSIONS

from .agent_homes import fake_home
from .conftest import FIXTURES

AUTHORED = FIXTURES / "agents" / "cline" / "authored"
NATIVE = AUTHORED / "native" / "1765100000000" / "api_conversation_history.json"
XML = AUTHORED / "xml" / "1765200000000" / "api_conversation_history.json"
CLINE_DATA = FIXTURES / "agents" / "cline" / "agentlogs" / ".cline" / "data"
REAL = CLINE_DATA / "tasks" / "1770913324799" / "api_conversation_history.json"
"""A real Cline 3.58 task (Cline CLI 2.2.0) from tomjnsn/agentlogs (fixtures/agents/cline)."""


def _results(session: Session) -> list[tuple[str, str | None, int | None, bool]]:
    """``(address, tool, exit code, is_error)`` of each tool result."""
    found = []
    for entry in session.entries:
        view = entry.view
        if view.role == "toolResult" and view.message is not None:
            found.append((entry.id, view.tool_name, view.message.get("exitCode"),
                          view.message["isError"]))
    return found


def _packet(session: Session) -> str:
    span = summarized_span([entry.view for entry in session.active_branch()])
    addresses = session_addresses(session)
    sections = packet_sections(span, session.project, addresses)
    text = render_packet(sections, session.session_id, span.views[0].id, span.views[-1].id,
                         len(span.views), 6000, session.project)
    return str(orjson.loads(text)["hookSpecificOutput"]["additionalContext"])


def test_native_calls_pair_with_their_results_in_message_order() -> None:
    """Each ``tool_result`` is paired with its ``tool_use`` by id; a message of results only
    (beside the extension's environment details) is addressed by its index; the command's
    ``Exit code: 1`` and the denied write are errors; every span is its message's node."""
    session = read_source(NATIVE)
    assert session.agent == "cline" and session.project == "/home/dev/projects/tally"
    assert _results(session) == [("m2", "read_file", None, False),
                                 ("m4", "replace_in_file", None, False),
                                 ("m6", "execute_command", 1, True),
                                 ("m8", "write_to_file", None, True)]
    data = NATIVE.read_bytes()
    messages = orjson.loads(data)
    for entry in session.entries:
        index = int(entry.id.removeprefix("m").split(".")[0])
        assert orjson.loads(data[entry.offset:entry.offset + entry.length]) == messages[index]
    assert [entry.id for entry in session.active_branch()][-3:] == ["m6", "m7", "m8"]


def test_xml_calls_are_read_from_the_text_and_answered_in_order() -> None:
    """The XML era: calls parsed from the assistant's text with their parameters, each
    answered by the ``[tool for '…'] Result:`` text that follows (its body in the next
    block); the command's exit code 2 makes it an error; ``ts`` gives each entry its time."""
    session = read_source(XML)
    calls = [(call.name, dict(call.arguments)) for entry in session.entries
             for call in entry.view.tool_calls]
    assert calls[2] == ("execute_command", {"command": "python -m pytest tests/test_cli.py"})
    assert _results(session) == [("m2", "update_todo_list", None, False),
                                 ("m4", "apply_diff", None, False),
                                 ("m6", "execute_command", 2, True)]
    assert session.entries[0].timestamp == "2025-12-08T13:20:00.000Z"


def test_the_summary_and_the_packet_carry_edits_failed_commands_and_the_plan() -> None:
    """The trail reads the agents' own tools, native and XML: the summary names the edited
    file, the failed commands with their exit codes, the denied write and Roo Code's open
    checklist steps; the packet the failures; every address an ``m<i>`` that expands."""
    native = summarize_session(NATIVE).summary
    for line in ("[m2 ... m4] src/tally.py (modified, read)",
                 "[m6] `pytest -q tests/test_tally.py` -> exit 1",
                 "[m8] write_to_file `tests/test_tally.py` -> failed"):
        assert line in native, native
    assert "environment_details" not in native  # the extension's context is no user words
    xml = summarize_session(XML).summary
    for line in ("[m4] app/cli.py (modified)", "-> exit 2: ERROR: file or directory not found",
                 "[m2] in_progress: Add the --dugong flag", "[m2] pending: Run the CLI tests"):
        assert line in xml, xml
    assert "Read app/cli.py" not in xml  # a done step is no open item
    packet = _packet(read_source(NATIVE))
    assert "[m6] check: `pytest -q tests/test_tally.py` last run failed (exit 1)" in packet
    assert "[m8] error: write_to_file `tests/test_tally.py` -> failed" in packet


@pytest.mark.parametrize("agent", sorted(EXTENSIONS))
def test_each_agent_is_found_in_its_editor_storage_and_recalled(
        agent: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A task under ``~/.config/<editor>/User/globalStorage/<extension>/tasks`` is found with
    no option, read as that extension's agent, recalled by a rare word to its entry and
    expanded raw to the message's exact JSON."""
    home = fake_home(tmp_path, monkeypatch)
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    editor = "Cursor" if agent == "cline" else "Code"
    task = (home / ".config" / editor / "User" / "globalStorage" / EXTENSIONS[agent] / "tasks"
            / "1765100000000")
    task.mkdir(parents=True)
    copy = task / NATIVE.name
    shutil.copy(NATIVE, copy)
    (task / "ui_messages.json").write_text("[]")
    (task / "task_metadata.json").write_text("{}")
    assert reader_for(str(copy.resolve())).name == agent
    report = reindex(workers=1)
    assert (report["indexed"], report["invalid"]) == (1, [])
    hits = recall("orca", agent=agent)["hits"]
    assert [(hit["address"], hit["agent"]) for hit in hits] == [("m6", agent)]
    raw = expand_request({**hits[0]["follow"], "raw": True})["entries"][0]["text"]
    assert orjson.loads(raw) == orjson.loads(NATIVE.read_bytes())[6]


def test_a_real_task_answers_native_calls_with_text_results_in_order() -> None:
    """The real Cline 3.58 task: every ``tool_use`` is answered by a user text
    ``[tool for '…'] Result:`` (no ``tool_result`` block), paired in order; nothing is lost:
    each call and each answer, in the file's order, and the user's words (out of the
    ``<task>`` and ``<feedback>`` tags); the extension's environment details, checklist
    reminders and the line it puts before feedback are no words of the user's; the failed
    ``cp`` (``Command failed with exit code 1.``) is the only error; each entry's bytes
    are its message's node."""
    session = read_source(REAL)
    assert (session.agent, session.session_id, session.project) == (
        "cline", "1770913324799", "/Users/bee/dev/agentlogs")
    assert session.malformed == ()
    # The task folder's name is when it began: the first message's time (Cline writes none).
    assert session.entries[0].timestamp == "2026-02-12T16:22:04.799Z"
    data = REAL.read_bytes()
    messages = orjson.loads(data)
    uses = [(block["id"], block["name"]) for m in messages if m["role"] == "assistant"
            for block in m["content"] if block["type"] == "tool_use"]
    assert len(uses) == 38
    calls = [(call.call_id, call.name) for entry in session.entries
             for call in entry.view.tool_calls]
    assert calls == uses
    answers = [(entry.view.message["toolCallId"], entry.view.tool_name)
               for entry in session.entries if entry.view.role == "toolResult"]
    assert answers == uses[:-1]  # the last call (mkdir && cp) was never answered
    assert [(address, code, failed) for address, _, code, failed in _results(session)
            if failed or code] == [("m40", 1, True)]
    said = [(entry.id, entry.view.text) for entry in session.entries if entry.view.role == "user"]
    assert said[0] == ("m0", "tell me abouth this repo")  # unwrapped from <task>
    assert [address for address, _ in said] == ["m0", "m4"]
    assert said[1][1].startswith("add a new plugin for a new coding agent cline.")  # <feedback>
    assert "<feedback>" not in said[1][1] and "The user has provided" not in said[1][1]
    for entry in session.entries:
        index = int(entry.id.removeprefix("m").split(".")[0])
        assert orjson.loads(data[entry.offset:entry.offset + entry.length]) == messages[index]


def test_the_real_task_summary_names_its_reads_commands_and_the_failed_copy() -> None:
    """The trail reads the real task's tools: the files read, each command with its exit
    status, the failed ``cp`` as the outstanding error; the user's request is the feedback
    they gave, not the extension's checklist reminder nor the line it puts before it."""
    summary = summarize_session(REAL).summary
    for line in ("[m6.4] packages/shared/src/schemas.ts (read)",
                 "[m8] `ls /Users/bee/.cline/data/tasks/ 2>/dev/null | head -5` -> ok",
                 "[m40] `cp /Users/bee/.cline/data/tasks/1770913324799/api_conversation_history"
                 ".json /Users/bee/dev/agentlogs/fixtures/cline/crud.json` -> exit 1",
                 '[m4] last user request: "add a new plugin for a new coding agent cline.',
                 "## Goal\n- [m0] tell me abouth this repo\n"):
        assert line in summary, summary
    assert "TODO LIST UPDATE REQUIRED" not in summary and "The user has provided" not in summary
    assert "[m40] error: execute_command `cp /Users/bee/" in _packet(read_source(REAL))


@pytest.mark.parametrize("moved", ["default", "CLINE_DIR", "CLINE_DATA_DIR"])
def test_cline_s_own_data_folder_is_found_recalled_and_expanded_exactly(
        moved: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cline 3.5x keeps its tasks in ``~/.cline/data/tasks`` (``$CLINE_DIR/data``,
    ``$CLINE_DATA_DIR``): found with nothing named, a rare word of the user's feedback (a
    typo) recalled to its entry, expanded raw to the message's exact JSON."""
    home = fake_home(tmp_path, monkeypatch)
    data = {"default": home / ".cline" / "data", "CLINE_DIR": tmp_path / "cl" / "data",
            "CLINE_DATA_DIR": tmp_path / "elsewhere"}[moved]
    if moved == "CLINE_DIR":
        monkeypatch.setenv("CLINE_DIR", str(data.parent))
    elif moved == "CLINE_DATA_DIR":
        monkeypatch.setenv("CLINE_DATA_DIR", str(data))
    shutil.copytree(CLINE_DATA, data)
    report = reindex(workers=1)
    assert (report["indexed"], report["invalid"]) == (1, [])
    hits = recall("diretory", agent="cline")["hits"]
    assert [(hit["address"], hit["sessionId"]) for hit in hits] == [("m4", "1770913324799")]
    raw = expand_request({**hits[0]["follow"], "raw": True})["entries"][0]["text"]
    assert orjson.loads(raw) == orjson.loads(REAL.read_bytes())[4]
