"""Claude Code transcripts read into the shared per-entry view (fixtures/agents/claude-code)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_memory.compaction.span import summarize_session
from fabric_memory.errors import NotASessionError
from fabric_memory.memory.expand import expand, expand_request
from fabric_memory.memory.normalize import normalize_session
from fabric_memory.memory.recall import recall
from fabric_memory.session import read_line
from fabric_memory.sources import read_source
from fabric_memory.sources.claude_code import BOOKKEEPING
from fabric_memory.sources.reader import HOST_CONTEXT

from .memory_builder import indexed_copy

FIXTURES = Path(__file__).parent.parent / "fixtures" / "agents" / "claude-code"
SIDECHAIN = FIXTURES / "sidechain_integrated.jsonl"
COMPACTED = FIXTURES / "dag_compact_after_rewind.jsonl"
TOOLS = FIXTURES / "tools_and_summary.jsonl"
COLOURED = FIXTURES / "compact_coloured.jsonl"
UUID = "c0000000-0000-4000-8000-00000000000"
"""The fixture's uuids but their last digit."""


def _line(session_id: str, uuid: str | None, kind: str = "user", **fields: object) -> bytes:
    value: dict[str, object] = {"type": kind, "sessionId": session_id, "cwd": "/w",
                                "timestamp": "2025-01-01T00:00:00.000Z", **fields}
    if uuid is not None:
        value["uuid"] = uuid
    return orjson.dumps(value) + b"\n"


def test_a_real_session_keeps_its_sidechain_off_the_main_branch() -> None:
    """The subagent's isSidechain turns are entries of the session, off the active branch;
    the main chain's entries (addressed by uuid) are on it, and the Task result is paired
    with its call by tool_use id."""
    session = read_source(SIDECHAIN)
    assert (session.agent, session.session_id) == ("claude-code",
                                                   "88a8d761-7b9a-4bf1-a8ca-c1febe6bf358")
    assert session.project == "e:\\Workspace\\src\\github\\claude-code-log"
    items = normalize_session(session).items
    assert [(item.role, item.on_active) for item in items] == [
        ("assistant", True), ("toolResult", True), ("assistant", False), ("assistant", False),
        ("toolResult", False), ("assistant", True)]
    assert items[0].address == "83a7cabd-3642-45d6-ba73-9b9f843b9ab1"
    assert items[1].tool == "Task" and "complete understanding" in items[1].text
    assert items[4].tool is None  # its Read call is not in the file
    calls = session.entries[3].view.tool_calls
    assert [(c.call_id, c.name, dict(c.arguments)) for c in calls] == [
        ("toolu_01BWgwmyj8gGuqFNHMPqqtN2", "Grep",
         {"pattern": "data-border-color", "output_mode": "files_with_matches"})]


def test_claudes_compaction_summary_is_remembered_and_the_branch_goes_through_it() -> None:
    """The isCompactSummary line is a compaction entry with Claude's summary as its text;
    the compact boundary continues the branch through logicalParentUuid, and the rewound
    attempt stays off it."""
    session = read_source(COMPACTED)
    items = {item.address: item for item in normalize_session(session).items}
    assert items["cs"].type == "compaction"
    assert "ran out of context" in items["cs"].text
    assert items["cb"].type == "custom_message" and "compact_boundary" in items["cb"].text
    assert [e.id for e in session.active_branch()] == [
        "u1", "a1", "b2u", "b2a", "b2u2", "b2a2", "cb", "cs", "p1u", "p1a"]
    assert not items["b1u"].on_active and not items["b1a"].on_active


def test_parallel_tool_results_are_one_entry_each_on_the_branch() -> None:
    """A user line answering two calls gives two tool results (the second addressed
    <uuid>.1), each named by its call and carrying its error flag; thinking, tool
    arguments and toolUseResult are searchable; bookkeeping lines are not read and the
    summary line is addressed by its line."""
    session = read_source(TOOLS)
    assert session.malformed == ()
    items = normalize_session(session).items
    results = [(i.address.removeprefix(UUID), i.tool, i.is_error, i.on_active) for i in items
               if i.role == "toolResult"]
    assert results == [("3", "Read", False, True), ("3.1", "Bash", True, True),
                       ("5", "Edit", False, True)]
    assert items[0].address == "L1" and "rounding bug" in items[0].text
    assert "Float accumulation" in items[2].text and "pytest -q" in items[2].text
    assert "sha256:" + "9f2c" * 16 in items[6].text  # from toolUseResult
    assert len(items) == 8 and not any("file-history" in item.text for item in items)


def test_a_line_without_uuid_is_a_located_note(tmp_path: Path) -> None:
    """A conversation line with no uuid has no address: it becomes a note naming its line,
    and the rest of the file is read; an unknown line type too."""
    path = tmp_path / "s.jsonl"
    path.write_bytes(_line("s", "u1", message={"role": "user", "content": "first"})
                     + _line("s", None, message={"role": "user", "content": "lost"})
                     + _line("s", "u3", "hologram")
                     + _line("s", "u4", "assistant", parentUuid="u1",
                             message={"role": "assistant", "content": [
                                 {"type": "text", "text": "kept"}]}))
    session = read_source(path)
    assert [e.id for e in session.entries] == ["u1", "u4"]
    assert [(p.line, p.reason) for p in session.malformed] == [
        (2, "user line without a 'uuid' (no address); skipped"),
        (3, 'unknown Claude Code line type "hologram"; skipped')]


def test_progress_lines_pass_the_chain_through(tmp_path: Path) -> None:
    """Claude Code 2.1 puts `progress` lines (and lines of types it adds later) in the
    parent chain: the turn after one stays on the active branch."""
    path = tmp_path / "s.jsonl"
    path.write_bytes(_line("s", "u1", message={"role": "user", "content": "first"})
                     + _line("s", "p2", "progress", parentUuid="u1")
                     + _line("s", "h3", "hologram", parentUuid="p2")
                     + _line("s", "u4", "assistant", parentUuid="h3",
                             message={"role": "assistant", "content": [
                                 {"type": "text", "text": "kept"}]}))
    session = read_source(path)
    assert [e.id for e in session.active_branch()] == ["u1", "u4"]
    assert [p.line for p in session.malformed] == [3]


def test_the_chain_goes_on_through_attachment_lines(tmp_path: Path) -> None:
    """Claude Code 2.1 writes attachment lines between turns and names them as the next
    turn's parent: the chain goes on through them, so every turn is on the active branch
    (an attachment naming itself as parent ends the walk)."""
    path = tmp_path / "s.jsonl"
    path.write_bytes(_line("s", "u1", message={"role": "user", "content": "first"})
                     + _line("s", "a1", "attachment", parentUuid="u1", attachment={})
                     + _line("s", "a2", "attachment", parentUuid="a1", attachment={})
                     + _line("s", None, "api-request")
                     + _line("s", "u2", "assistant", parentUuid="a2",
                             message={"role": "assistant", "content": [
                                 {"type": "text", "text": "second"}]})
                     + _line("s", "a3", "attachment", parentUuid="a3")
                     + _line("s", "u3", "user", parentUuid="a3",
                             message={"role": "user", "content": "third"}))
    session = read_source(path)
    assert [(e.id, e.parent_id) for e in session.entries] == [
        ("u1", None), ("u2", "u1"), ("u3", "a3")]
    assert [e.id for e in session.active_branch()] == ["u3"]
    assert not session.malformed


def test_a_transcript_naming_no_session_is_not_one(tmp_path: Path) -> None:
    """A file of summary lines alone names no session: not a session, with the reason."""
    path = tmp_path / "s.jsonl"
    path.write_bytes(orjson.dumps({"type": "summary", "summary": "t", "leafUuid": "x"}) + b"\n")
    with pytest.raises(NotASessionError, match="no line names its sessionId"):
        read_source(path)


def test_recall_follow_expand_returns_the_exact_line(tmp_path: Path) -> None:
    """A recall hit on a Claude tool result says its agent and project; followed unchanged
    it reads as text (address, role, tool, error, time, output), and with raw the verbatim
    line of its uuid, byte for byte."""
    copy, where = indexed_copy(TOOLS, tmp_path)
    hits = recall("10.000000000000002", **where)["hits"]
    assert len(hits) == 1
    hit = hits[0]
    assert (hit["agent"], hit["project"], hit["tool"]) == (
        "claude-code", "/home/dev/projects/ledger", "Bash")
    page = expand_request({**hit["follow"], "raw": True})
    entry = next(e for e in read_source(copy).entries if e.id == hit["address"])
    assert page["entries"][0]["text"].encode() == read_line(str(copy), entry)
    assert page["entries"][0]["line"] == 5
    text = expand_request(hit["follow"])["entries"][0]["text"]  # as a model reads it
    assert text == (f"{hit['address']} toolResult Bash error 2025-09-14T08:00:09.000Z\n"
                    "FAILED tests/test_report.py::test_rounding - assert 10.000000000000002 "
                    "== 10.0")


def test_a_transcript_appended_since_indexing_still_expands(tmp_path: Path) -> None:
    """After Claude Code appends to an indexed transcript, its addresses still expand to
    their lines (the file is read again by its reader), the new line's too."""
    copy, where = indexed_copy(COMPACTED, tmp_path)
    later = _line("s1", "p2u", parentUuid="p1a", message={"role": "user", "content": "more"})
    with copy.open("ab") as stream:
        stream.write(later)
    page = expand(str(copy), addresses=["cs", "p2u"], raw=True, **where)
    lines = copy.read_bytes().splitlines()
    assert [e["text"].encode() for e in page["entries"]] == [lines[9], later.rstrip(b"\n")]


_JSON = st.recursive(st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1)
                     | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.sampled_from(
                         ["type", "uuid", "parentUuid", "sessionId", "message", "role",
                          "content", "text", "tool_use_id", "tool_result", "tool_use", "id",
                          "name", "input", "isCompactSummary", "summary", "user",
                          "assistant", "system", "toolUseResult"]), inner, max_size=5),
                     max_leaves=14)


@settings(max_examples=80, deadline=None)
@given(st.lists(_JSON.map(orjson.dumps) | st.binary(max_size=30), max_size=6))
def test_any_lines_after_a_first_line_are_entries_notes_or_bookkeeping(
    tmp_path_factory: pytest.TempPathFactory, lines: list[bytes]
) -> None:
    """Whatever follows a transcript's first line, reading never crashes, and every written
    line is an entry, a located note, or a bookkeeping line (not read, by design)."""
    path = tmp_path_factory.mktemp("claude") / "t.jsonl"
    path.write_bytes(b"\n".join([TOOLS.read_bytes().splitlines()[2], *lines]) + b"\n")
    session = read_source(path)
    physical = path.read_bytes().split(b"\n")
    written = {n for n, line in enumerate(physical, 1) if line.strip(b" \t\n\r\x0b\x0c")}
    accounted = {e.line for e in session.entries} | {p.line for p in session.malformed}
    assert accounted <= written
    for number in written - accounted:
        assert orjson.loads(physical[number - 1]).get("type") in BOOKKEEPING


def test_the_results_of_parallel_calls_stay_on_the_active_branch(tmp_path: Path) -> None:
    """Claude Code writes one reply's parallel calls as chained assistant lines and each
    result as the child of its own call: every result is on the active branch, in file
    order, while a user's edit (a new text message beside an old one) still forks."""
    from .transcripts import ClaudeTranscript

    t = ClaudeTranscript()
    t.user("Check both branches.")
    calls = [t._add("assistant", {"message": {"role": "assistant", "content": [
        {"type": "tool_use", "id": f"toolu_{n}", "name": "Bash",
         "input": {"command": f"git log --oneline b{n}"}}]}}) for n in range(3)]
    results = [t._add("user", {"message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": f"abc{n}def branch {n}"}]}},
        parent=calls[n]) for n in range(3)]
    reply = t.assistant("Both logged.")
    old = t.user("Now merge b1.")
    t._add("user", {"message": {"role": "user", "content": "Now merge b2 instead."}},
           parent=reply)
    session = read_source(t.write(tmp_path / f"{t.session_id}.jsonl"))
    branch = [entry.id for entry in session.active_branch()]
    assert [r for r in branch if r in results] == results
    assert branch.index(calls[-1]) < branch.index(results[0]) < branch.index(reply)
    assert old not in branch  # the edited message stays on its own branch


def test_what_claude_code_writes_into_user_turns_is_not_the_users_words(tmp_path: Path) -> None:
    """The caveat Claude Code marks ``isMeta`` and a local command's output are its own
    context (kept, found by recall, never the user's words nor the goal); a slash command
    reads as the user typed it. Real lines (``compact_coloured.jsonl``)."""
    session = read_source(COLOURED)
    by_line = {entry.line: entry for entry in session.entries}
    for line in (2, 4, 13, 15):
        assert (by_line[line].type, by_line[line].raw["customType"]) == (
            "custom_message", HOST_CONTEXT), line
    assert [by_line[line].view.text for line in (3, 6, 14)] == [
        "/clear", "how are you doing", "/compact"]
    summary = summarize_session(str(COLOURED), None).summary
    assert "## Goal\n- [L6] how are you doing" in summary
    assert "Caveat" not in summary and "local-command-stdout" not in summary
    _, where = indexed_copy(COLOURED, tmp_path)
    hits = recall("messages generated while running local commands", **where)["hits"]
    assert hits and hits[0]["address"] in (by_line[2].id, by_line[13].id)


def test_a_slash_command_with_arguments_reads_as_typed(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(orjson.dumps({
        "type": "user", "uuid": "u1", "parentUuid": None, "sessionId": "s1",
        "message": {"role": "user", "content": (
            "<command-name>/review</command-name>\n<command-message>review</command-message>\n"
            "<command-args>the parser change</command-args>")}}) + b"\n")
    assert read_source(path).entries[0].view.text == "/review the parser change"
