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
