"""Gemini CLI: whole-file JSON chats and JSON Lines chats, addressed by message id, their
nodes expanded exactly, found where Gemini CLI writes them, their work read by the trail."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest

from fabric_memory.compaction.span import session_addresses, summarize_session
from fabric_memory.errors import NotASessionError
from fabric_memory.handoff import packet_sections, render_packet, summarized_span
from fabric_memory.memory.expand import expand, expand_request
from fabric_memory.memory.recall import recall
from fabric_memory.memory.reindex import reindex
from fabric_memory.session import Session
from fabric_memory.sources import read_source, reader_for, session_files
from fabric_memory.sources.gemini import GEMINI
from fabric_memory.sources.reader import HOST_CONTEXT

from .agent_homes import fake_home
from .conftest import FIXTURES

AUTHORED = FIXTURES / "agents" / "gemini" / "authored"
LEGACY = AUTHORED / "session-2026-03-02T09-00-7f3a9c2e.json"
LINES = AUTHORED / "session-2026-03-03T10-00-0b9e8d7c.jsonl"
ALL = [LEGACY, LINES]
EDIT = "a1f0c3d2-0002-4e5f-8a9b-000000000002"
"""The whole-file fixture's assistant message: an edit, a failed test run, a todo list and
a cancelled write."""


def _packet(session: Session) -> str:
    """The packet a compaction hook would get, with the addresses it prints."""
    span = summarized_span([entry.view for entry in session.active_branch()])
    addresses = session_addresses(session)
    sections = packet_sections(span, session.project, addresses)
    return render_packet(sections, session.session_id, span.views[0].id, span.views[-1].id,
                         len(span.views), 6000, session.project)


@pytest.mark.parametrize("path", ALL, ids=[p.name for p in ALL])
def test_each_message_is_its_node_addressed_by_its_id(path: Path) -> None:
    """Every entry's span is the exact JSON of the message it came from (the node of
    ``messages[]``, or the line of its last record), addressed by the message's id; tool
    results follow their call as ``<id>.<k>``."""
    assert reader_for(str(path)) is GEMINI
    session = read_source(path)
    data = path.read_bytes()
    assert session.agent == "gemini" and not session.malformed
    for entry in session.entries:
        node = orjson.loads(data[entry.offset:entry.offset + entry.length])
        assert node["id"] == entry.id.split(".")[0]
        assert data[:entry.offset].count(b"\n") + 1 == entry.line


def test_the_whole_file_shape_reads_calls_results_and_their_status() -> None:
    """The assistant message holds its thoughts, text and four calls; each result follows
    in order with its status: the edit succeeded, the test run exited 1, the write was
    cancelled (an interrupted error)."""
    session = read_source(LEGACY)
    views = {entry.id: entry.view for entry in session.entries}
    assert [call.name for call in views[EDIT].tool_calls] == [
        "replace", "run_shell_command", "write_todos", "write_file"]
    results = [views[f"{EDIT}.{k}"].message for k in range(1, 5)]
    assert [(r["toolName"], r["isError"], r.get("exitCode"), r.get("interrupted"))
            for r in results if r] == [
        ("replace", False, None, None), ("run_shell_command", True, 1, None),
        ("write_todos", False, None, None), ("write_file", True, None, True)]
    assert [entry.id for entry in session.active_branch()][-3:] == [
        f"{EDIT}.3", f"{EDIT}.4", "a1f0c3d2-0003-4e5f-8a9b-000000000003"]


def test_json_lines_keep_the_last_record_and_leave_a_rewound_message_off_the_branch() -> None:
    """A message recorded twice is one entry holding its last record (with the tool call
    the second added); the message a ``$rewindTo`` dropped stays an entry off the active
    branch; the one after it follows the message before the rewound one."""
    session = read_source(LINES)
    ids = [entry.id.removeprefix("b2000000-000") for entry in session.entries]
    assert ids == ["1-4000-8000-000000000001", "2-4000-8000-000000000002",
                   "2-4000-8000-000000000002.1", "3-4000-8000-000000000003",
                   "4-4000-8000-000000000004"]
    assert session.entries[1].line == 5  # the second record of the message
    active = [entry.id for entry in session.active_branch()]
    assert "b2000000-0003-4000-8000-000000000003" not in active
    assert active[-2:] == ["b2000000-0002-4000-8000-000000000002.1",
                           "b2000000-0004-4000-8000-000000000004"]
    failed = session.entries[2].view.message
    assert failed is not None and (failed["exitCode"], failed["isError"]) == (128, True)


def test_a_broken_document_is_a_located_error(tmp_path: Path) -> None:
    """A whole-file chat cut short (a rewrite caught half-way) is not a session, with the
    line where its JSON stops."""
    broken = tmp_path / "chats" / "session-2026-03-02T09-00-7f3a9c2e.json"
    broken.parent.mkdir()
    data = LEGACY.read_bytes()
    broken.write_bytes(data[: data.index(b'"toolCalls"')])
    with pytest.raises(NotASessionError, match=r"json:\d+: not a JSON document"):
        read_source(broken)


def test_found_in_a_temporary_home_recalled_and_expanded_exactly(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chats under ``~/.gemini/tmp/<project>/chats`` are found with no option (Gemini's other
    files there are not listed); a rare word is recalled to its entry and agent; the hit
    expands as text, and raw as the message's exact node; after Gemini CLI rewrites the
    file with one more message, the same address still expands to the same node."""
    home = fake_home(tmp_path, monkeypatch)
    chats = home / ".gemini" / "tmp" / "4c1b7e0d" / "chats"
    chats.mkdir(parents=True)
    copy = chats / LEGACY.name
    shutil.copy(LEGACY, copy)
    shutil.copy(LINES, chats / LINES.name)
    (chats.parent / "logs.json").write_text("[]")
    (chats.parent / "checkpoint-x.json").write_text("{}")
    assert sorted(p.name for p in session_files(home / ".gemini")) == [LEGACY.name, LINES.name]
    report = reindex(workers=1)
    assert (report["indexed"], report["invalid"]) == (2, [])
    hits = recall("wombat", agent="gemini")["hits"]
    assert [(h["address"], h["agent"], h.get("tool"), h.get("isError")) for h in hits] == [
        (f"{EDIT}.2", "gemini", "run_shell_command", True)]
    text = expand_request(hits[0]["follow"])["entries"][0]["text"]
    assert "Exit Code: 1" in text
    node = expand_request({**hits[0]["follow"], "raw": True})["entries"][0]["text"]
    document = orjson.loads(copy.read_bytes())
    assert orjson.loads(node) == document["messages"][1]
    assert node.encode() in copy.read_bytes()
    document["messages"].append({"id": "late", "timestamp": "2026-03-02T09:05:00.000Z",
                                 "type": "user", "content": "and the yabby report"})
    copy.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2))
    again = expand(document["sessionId"], addresses=[EDIT], raw=True)["entries"][0]["text"]
    assert orjson.loads(again) == document["messages"][1]


def test_gemini_cli_home_moves_the_folder(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """``$GEMINI_CLI_HOME`` stands for the home folder Gemini CLI writes under."""
    fake_home(tmp_path, monkeypatch)
    moved = tmp_path / "elsewhere"
    monkeypatch.setenv("GEMINI_CLI_HOME", str(moved))
    assert GEMINI.homes(()) == (moved / ".gemini" / "tmp",)


def test_the_trail_and_the_packet_carry_edits_failed_commands_and_the_plan() -> None:
    """The packet of a Gemini chat names the edit with its change, the test run that
    exited 1, the cancelled write, the open todo items, and the user's task, each with its
    message-id address (never a line, which the next rewrite of the file moves)."""
    packet = orjson.loads(_packet(read_source(LEGACY)))["hookSpecificOutput"][
        "additionalContext"]
    for line in (f"[{EDIT}.1] ledger/sum.py: edit `- total = float(a) + float(b)` -> "
                 "`+ total = Decimal(a) + Decimal(b)`",
                 f"[{EDIT}.2] check: `pytest -q tests/test_sum.py` last run failed (exit 1)",
                 f"[{EDIT}.3] open: in_progress: Import Decimal in ledger/sum.py",
                 f"[{EDIT}.4] error: write_file `notes/rounding.md` -> interrupted",
                 "task: \"The quokka-ledger totals are off by a cent"):
        assert line in packet
    lines = orjson.loads(_packet(read_source(LINES)))["hookSpecificOutput"][
        "additionalContext"]
    assert "run_shell_command `git mv platypus_report.py report.py` -> failed" in lines


REAL = FIXTURES / "agents" / "gemini" / "cli-0.61.0" / "session-2026-12-07T14-15-ded974c8.jsonl"


def test_a_chat_the_real_cli_wrote_reads_its_checkpoint_and_skips_echoed_results() -> None:
    """Gemini CLI 0.61.0's own file: the context message inside the `$set` checkpoint is an
    entry spanning its node within that line (the project read from it); the user messages
    that echo the calls' results are not entries again; the command's exit code 2. The
    context message is Gemini CLI's own (the date, the workspace, the servers'
    instructions), not the user's words: the user's first words are their question."""
    session = read_source(REAL)
    data = REAL.read_bytes()
    assert session.project == "/tmp/ajgem/work" and not session.malformed
    first = session.entries[0]
    assert first.line == 2 and data[first.offset:first.offset + 1] == b"{"
    assert orjson.loads(data[first.offset:first.offset + first.length])["id"] == first.id
    roles = [entry.view.role for entry in session.entries]
    assert roles == [None, "user", "assistant", "toolResult", "assistant", "toolResult",
                     "assistant"]
    assert first.raw["customType"] == HOST_CONTEXT and "<session_context>" in first.raw["content"]
    assert session.entries[1].view.text == "what about zephyrine?"
    failed = session.entries[5].view.message
    assert failed is not None and (failed["exitCode"], failed["isError"]) == (2, True)


TOOLPATH = FIXTURES / "agents" / "gemini" / "toolpath"
ELICIT = (TOOLPATH / "tmp" / "743e799446f383a8a86ea8236f96dac6d5e32fc190c77c95b7bab46c81700bba"
        / "chats" / "session-2026-05-07T18-28-9534b902.jsonl")
"""A chat the real Gemini CLI wrote (gemini-3-flash-preview, 2026-05) for empathic/toolpath
(fixtures/agents/gemini/toolpath)."""


def test_a_real_chat_keeps_every_message_call_and_result_in_order() -> None:
    """The real chat: each message recorded twice (the second record adds its calls) is one
    entry, its last record's line; nothing is lost: the user's prompt, then every call in
    the file's order with its arguments, each followed by its result (paired by id); the
    thoughts are thinking; the read of a missing file (``status: error``) is the only
    error; ``$set`` lines are no entries."""
    session = read_source(ELICIT)
    assert (session.agent, session.session_id) == (
        "gemini", "9534b902-4b8a-437e-ba2e-2e4db4b82fec")
    assert session.malformed == ()
    records = [orjson.loads(line) for line in ELICIT.read_bytes().splitlines()]
    last = {record["id"]: (number, record) for number, record in enumerate(records, 1)
            if "id" in record}
    assert len(last) == 12
    expected = []
    for message_id, (number, record) in last.items():
        expected.append((message_id, number))
        expected += [(f"{message_id}.{k}", number)
                     for k in range(1, len(record.get("toolCalls", [])) + 1)]
    assert [(entry.id, entry.line) for entry in session.entries] == expected
    calls = [(call.call_id, call.name, dict(call.arguments)) for entry in session.entries
             for call in entry.view.tool_calls]
    assert calls == [(call["id"], call["name"], call["args"]) for _, record in last.values()
                     for call in record.get("toolCalls", [])]
    assert len(calls) == 10
    answers = [(entry.view.message["toolCallId"], entry.view.message["isError"])
               for entry in session.entries if entry.view.role == "toolResult"]
    assert answers == [(call_id, call_id == "read_file_1778178544014_0")
                       for call_id, _, _ in calls]
    users = [entry.view.text for entry in session.entries if entry.view.role == "user"]
    assert len(users) == 1 and users[0].startswith("You're going to walk through a small set")
    assert session.entries[1].view.message["content"][0]["thinking"].startswith(
        "Processing Next Steps: I am now focusing")


def test_the_real_chat_summary_names_its_edits_command_and_failed_read() -> None:
    """The trail reads Gemini CLI's own tools in the real chat: ``write_file`` creates
    notes.md and count.sh, ``replace`` edits notes.md, ``run_shell_command`` ran
    ``bash count.sh``, and the failed ``read_file`` is the outstanding error."""
    summary = summarize_session(ELICIT).summary
    for line in ("[61d23d8e-b90e-4ce5-bae3-38e03c7cd74f.1] notes.md: created (2 lines)",
                 "[04aadc47-2e62-4369-8a3b-172d8616773c.1] notes.md: edit `- scratch` -> "
                 "`+ fixture`",
                 "[12788125-1f02-41e9-b826-cdf296d6d46a.1] count.sh: created (5 lines)",
                 "[32831830-6324-411c-a923-b44ab4d4246c.1] `bash count.sh` -> ok",
                 "[bfa56ae5-7efa-4663-84b2-28ac1ce3f810.1] read_file `does-not-exist.txt` -> "
                 "failed"):
        assert line in summary, summary


def test_the_real_chat_is_found_recalled_and_expanded_exactly(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Laid out under ``~/.gemini/tmp/<project>/chats`` the real chat is found with nothing
    named; a rare word of a command's output is recalled to that result and ``expand
    --raw`` returns its message's last record, the exact line."""
    home = fake_home(tmp_path, monkeypatch)
    shutil.copytree(TOOLPATH / "tmp", home / ".gemini" / "tmp")
    report = reindex(workers=1)
    assert (report["indexed"], report["invalid"]) == (1, [])
    hits = recall("PGID", agent="gemini")["hits"]
    assert [hit["address"] for hit in hits] == ["32831830-6324-411c-a923-b44ab4d4246c.1"]
    entry = expand_request({**hits[0]["follow"], "raw": True})["entries"][0]
    assert entry["line"] == 30
    assert entry["text"] == ELICIT.read_bytes().split(b"\n")[29].decode()
