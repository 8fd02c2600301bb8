"""Codex CLI rollouts, current and earlier shape, read into the shared per-entry view
(fixtures/agents/codex)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_memory.errors import NotASessionError
from fabric_memory.memory.expand import expand_request
from fabric_memory.memory.normalize import normalize_session
from fabric_memory.memory.recall import recall
from fabric_memory.memory.render import render_recall
from fabric_memory.sources import read_source, reader_for

from .memory_builder import indexed_copy

FIXTURES = Path(__file__).parent.parent / "fixtures" / "agents" / "codex"
CURRENT = FIXTURES / "rollout-2025-10-03T09-15-00-0199a7c4-1e2f-7a3b-8c4d-5e6f7a8b9c0d.jsonl"
SYNTHETIC = FIXTURES / "rollout-2026-01-02T03-04-05-11111111-1111-4111-8111-111111111111.jsonl"
EARLIER = FIXTURES / "rollout-2025-05-07T11-00-00-5a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d.jsonl"
SMALLEST = FIXTURES / "rollout-44444444-4444-4444-8444-444444444444.jsonl"


def test_a_rollout_pairs_calls_and_keeps_codexs_compaction() -> None:
    """Each line with something to remember is one entry addressed L<line>, chained to the
    one before; the shell call's output is paired by call_id with its exit code as the error
    flag; the compacted line is a compaction entry; duplicated events and token counts are
    not read; the environment block Codex writes into a user turn is its own context, not
    the user's words."""
    session = read_source(CURRENT)
    assert (session.agent, session.session_id, session.project) == (
        "codex", "0199a7c4-1e2f-7a3b-8c4d-5e6f7a8b9c0d", "/home/dev/projects/ledger")
    items = normalize_session(session).items
    assert [(i.address, i.type, i.role) for i in items] == [
        ("L1", "custom_message", None), ("L2", "custom_message", None),
        ("L3", "custom_message", None), ("L4", "message", "user"),
        ("L6", "message", "assistant"), ("L7", "message", "assistant"),
        ("L8", "message", "toolResult"), ("L10", "message", "assistant"),
        ("L11", "compaction", None), ("L12", "custom_message", None),
        ("L13", "message", "assistant")]
    assert [i.parent_id for i in items[1:]] == [i.address for i in items[:-1]]
    assert all(i.on_active for i in items)
    result = items[6]
    assert (result.tool, result.is_error) == ("shell", True)
    assert "IndexError" in result.text and "exit_code" not in result.text
    call = session.entries[5].view.tool_calls[0]
    assert (call.call_id, call.name, call.arguments["workdir"]) == (
        "call_Xk2p9LedgerExport", "shell", "/home/dev/projects/ledger")
    assert "off-by-one loop bound" in items[8].text
    assert "rate limit" in items[9].text and "fix-rounding" in items[0].text
    assert session.malformed == ()


def test_custom_tools_and_an_unknown_line_type() -> None:
    """custom_tool_call results given as content blocks are read as text and paired; a line
    of an unknown type is a note naming its line."""
    session = read_source(SYNTHETIC)
    results = [(i.tool, i.text) for i in normalize_session(session).items
               if i.role == "toolResult"]
    assert results == [
        ("exec_command", "exec_command\n./alpha.txt\n./beta.txt\ncall-structured-001"),
        ("apply_patch", "apply_patch\nDone!\ncall-custom-001"),
        ("mcp__synthetic__lookup", 'mcp__synthetic__lookup\n{"status":"ok"}\ncall-mcp-001')]
    assert [(p.line, p.reason) for p in session.malformed] == [
        (14, 'unknown Codex line type "future_synthetic_record"; skipped')]


@pytest.mark.parametrize("path", [EARLIER, SMALLEST], ids=lambda p: p.name[:30])
def test_the_earlier_shape_is_read(path: Path) -> None:
    """The earlier rollout shape ({id, timestamp, ...} first, bare items, record_type state
    lines) is read: its items are entries without a time of their own."""
    session = read_source(path)
    items = normalize_session(session).items
    assert session.agent == "codex" and session.version == 1
    assert session.session_id == path.stem[-36:]
    assert items[0].time_ms is not None and all(i.time_ms is None for i in items[1:])
    assert {i.role for i in items[1:]} <= {"user", "assistant", "toolResult"}
    assert session.malformed == ()
    if path == EARLIER:
        assert [(i.address, i.role, i.tool) for i in items[1:]] == [
            ("L3", "user", None), ("L5", "assistant", None), ("L6", "toolResult", "shell"),
            ("L8", "assistant", None)]


def test_an_unknown_shape_in_codexs_folder_is_an_unsupported_version(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file under Codex's sessions folder that no reader recognises is reported in Codex's
    terms, naming its line: unsupported version."""
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex"))
    folder = tmp_path / "codex" / "sessions" / "2030" / "01" / "01"
    folder.mkdir(parents=True)
    path = folder / "rollout-2030-01-01T00-00-00-x.jsonl"
    path.write_bytes(b"\n" + orjson.dumps({"kind": "rollout/v9", "id": "x"}) + b"\n")
    assert reader_for(str(path.resolve())).name == "codex"
    with pytest.raises(NotASessionError, match=r":2: unsupported version: first line is JSON "
                                                r"an object with 2 keys"):
        read_source(path.resolve())


def test_recall_follow_expand_returns_the_exact_line(tmp_path: Path) -> None:
    """A recall hit on Codex's compaction summary says its agent and project (in text too);
    followed unchanged it reads as text, and with raw it is its line byte for byte; a call
    id is recallable by its value (the call and the result)."""
    copy, where = indexed_copy(CURRENT, tmp_path)
    response = recall("off-by-one", **where)
    hits = response["hits"]
    assert [(h["address"], h["type"], h["agent"]) for h in hits] == [
        ("L11", "compaction", "codex")]
    assert ("codex session 0199a7c4-1e2f-7a3b-8c4d-5e6f7a8b9c0d  project "
            "/home/dev/projects/ledger") in render_recall(response)
    page = expand_request({**hits[0]["follow"], "raw": True})
    assert page["entries"][0]["text"].encode() == copy.read_bytes().splitlines()[10]
    text = expand_request(hits[0]["follow"])["entries"][0]["text"]
    assert text.startswith("L11 compaction 2025-10-03T09:20:00.000Z\nSummary so far: the "
                           "nightly export skipped the last ledger row")
    by_id = recall("call_Xk2p9LedgerExport", mode="phrase", **where)
    assert sorted(h["address"] for h in by_id["hits"]) == ["L7", "L8"]  # the call, its result


_JSON = st.recursive(st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1)
                     | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.sampled_from(
                         ["type", "payload", "timestamp", "message", "role", "content", "text",
                          "function_call", "function_call_output", "call_id", "name",
                          "arguments", "output", "response_item", "event_msg", "compacted",
                          "record_type", "error"]), inner, max_size=5),
                     max_leaves=14)


def _skipped_by_design(value: Any) -> bool:
    """Lines Codex writes that are not read (docs/agents.md): events other than errors."""
    payload = value.get("payload") if type(value) is dict else None
    return (type(payload) is dict and value.get("type") == "event_msg"
            and payload.get("type") not in ("error", "stream_error"))


@settings(max_examples=80, deadline=None)
@given(st.lists(_JSON.map(orjson.dumps) | st.binary(max_size=30), max_size=6))
def test_any_lines_after_session_meta_are_entries_notes_or_skipped_events(
    tmp_path_factory: pytest.TempPathFactory, lines: list[bytes]
) -> None:
    """Whatever follows a session_meta line, reading never crashes, and every written line
    is an entry, a located note, or an event Codex logs that is not read by design."""
    path = tmp_path_factory.mktemp("codex") / "rollout.jsonl"
    path.write_bytes(b"\n".join([CURRENT.read_bytes().splitlines()[0], *lines]) + b"\n")
    session = read_source(path)
    physical = path.read_bytes().split(b"\n")
    written = {n for n, line in enumerate(physical, 1) if line.strip(b" \t\n\r\x0b\x0c")}
    accounted = {e.line for e in session.entries} | {p.line for p in session.malformed}
    assert accounted <= written
    for number in written - accounted:
        assert _skipped_by_design(orjson.loads(physical[number - 1]))
