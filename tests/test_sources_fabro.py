"""Fabro: event exports (with or without ``seq``, flat or nested agent events) as sessions."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_memory.errors import NotASessionError
from fabric_memory.memory.expand import expand_request
from fabric_memory.memory.normalize import normalize_session
from fabric_memory.memory.recall import recall
from fabric_memory.memory.reindex import reindex
from fabric_memory.session import Session
from fabric_memory.sources import read_source, reader_for
from fabric_memory.sources.fabro import FABRO, read

from .agent_homes import FABRO as FIXTURES
from .agent_homes import catui_home, cli_json, fabro_exports, fake_home, line_at, mcp_answers

DUMP = FIXTURES / "exports" / "dump-01KCFX8Q3M7V2T9R4W6Y1Z0ABC" / "events.jsonl"
EVENTS = FIXTURES / "exports" / "01KCG2M4N5P6Q7R8S9T0V1W2XY.jsonl"
WILD = FIXTURES / "wild" / "ledger-run.jsonl"
ALL = [DUMP, EVENTS, WILD]


def _lines(path: Path) -> list[dict[str, object]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def _kinds(session: Session) -> list[str]:
    """Each entry as ``role``, or ``customType`` for an event kept as text."""
    return [e.view.role or e.raw.get("customType", "") for e in session.entries]


def _paired(session: Session) -> list[tuple[str, str, bool]]:
    """``(call id, tool, is_error)`` of each result, checked to answer an earlier call of
    the same tool."""
    calls: dict[str, str] = {}
    pairs = []
    for entry in session.entries:
        view = entry.view
        calls.update((call.call_id, call.name) for call in view.tool_calls)
        if view.role == "toolResult":
            assert view.call_id in calls and calls[view.call_id] == view.tool_name
            assert view.message is not None
            pairs.append((view.call_id, view.tool_name or "", view.message["isError"]))
    return pairs


@pytest.mark.parametrize("path", ALL, ids=[p.parent.name + "/" + p.name for p in ALL])
def test_every_line_is_one_entry_spanning_it(path: Path) -> None:
    """Each envelope is one entry of agent fabro whose span is its line's exact bytes,
    chained in file order."""
    assert reader_for(str(path)) is FABRO
    session = read_source(path)
    data = path.read_bytes()
    assert session.agent == "fabro"
    assert len(session.entries) == len(data.splitlines())
    for entry, line in zip(session.entries, data.split(b"\n"), strict=False):
        assert data[entry.offset : entry.offset + entry.length] == line
    assert [e.parent_id for e in session.entries][1:] == [e.id for e in session.entries][:-1]
    assert not session.malformed


def test_a_dump_with_seq_reads_messages_calls_and_outcomes() -> None:
    """``fabro dump``: addressed by event ids; input, messages, three tool calls paired
    with their results (the failing test run an error), stages, git and the run's end."""
    session = read_source(DUMP)
    lines = _lines(DUMP)
    assert [e.id for e in session.entries] == [line["id"] for line in lines]
    assert (session.session_id, session.project) == (
        "01KCFX8Q3M7V2T9R4W6Y1Z0ABC", "/home/dev/shop-api")
    assert _kinds(session) == [
        "run.created", "run.started", "stage.started", "stage.prompt", "agent.session.started",
        "user", "assistant", "assistant", "toolResult", "assistant", "assistant",
        "agent.tool.process.completed", "toolResult", "assistant", "toolResult", "assistant",
        "agent.processing.end", "stage.completed", "checkpoint.completed", "git.commit",
        "edge.selected", "git.push", "vendor.audit.recorded", "run.completed"]
    assert _paired(session) == [
        ("toolu_01HzQ7bX9kVw3mN5pR2sT8yC", "read_file", False),
        ("toolu_01JbV4cN8mXq2wE6rT9yU3iO", "shell", True),
        ("toolu_01KcW5dP9nYr3xF7sU0zV4jP", "edit_file", False)]
    edit = next(c for e in session.entries for c in e.view.tool_calls if c.name == "edit_file")
    assert edit.arguments == {"path": "src/checkout/total.py",
                              "old": "if len(cart.items) > 1 and code:", "new": "if code:"}
    texts = {e.raw.get("customType"): str(e.raw.get("content")) for e in session.entries}
    assert "status: succeeded" in texts["stage.completed"]
    assert "files_touched[0]: src/checkout/total.py" in texts["stage.completed"]
    assert "sha: a41d9e07c3b2f18e5d6c7b8a9f0e1d2c3b4a5968" in texts["git.commit"]
    assert "success: true" in texts["git.push"]
    assert "status: succeeded" in texts["run.completed"]


def test_an_unknown_event_is_kept_as_text() -> None:
    """An event name Fabro does not define is an entry with all its properties as text."""
    entry = next(e for e in read_source(DUMP).entries
                 if e.raw.get("customType") == "vendor.audit.recorded")
    assert entry.raw["content"] == "auditor: acme-compliance\nverdict: no PII touched"


def test_bookkeeping_is_left_out() -> None:
    """Token usage and cost are not kept in an event's text."""
    session = read_source(DUMP)
    stage = next(e for e in session.entries if e.raw.get("customType") == "stage.completed")
    assert "duration_ms: 39200" in stage.raw["content"]
    assert "tokens" not in stage.raw["content"]
    assert "cost" not in stage.raw["content"]
    message = next(e for e in session.entries if e.view.role == "assistant" and e.view.text)
    assert message.raw["message"].keys() == {"role", "content", "model"}


def test_events_json_without_seq_reads_flat_properties() -> None:
    """``fabro events --json``: no ``seq``, flat agent properties, a structured tool output
    kept as JSON text, a failed stage and run."""
    session = read_source(EVENTS)
    assert [e.id for e in session.entries] == [line["id"] for line in _lines(EVENTS)]
    assert session.session_id == "01KCG2M4N5P6Q7R8S9T0V1W2XY"
    assert _paired(session) == [("call_Zq81mLw0XnE4", "write_file", False),
                                ("call_Rt55pKd2VbM9", "shell", True)]
    failed = session.entries[7].view.message
    assert failed is not None and orjson.loads(failed["content"][0]["text"]) == {
        "exit_code": 2, "stderr": 'ERROR: column "email" of relation "users" contains null values'}
    texts = {e.raw.get("customType"): str(e.raw.get("content")) for e in session.entries}
    assert "failure_class: deterministic" in texts["stage.failed"]
    assert "error: Handler error: migration test failed" in texts["run.failed"]


def test_the_wild_shape_is_addressed_by_line() -> None:
    """Without ``id`` or ``run_id``: entries are addressed ``L<line>``, the session is named
    by its file, nested ToolCallStarted/ToolCallCompleted pair by id, a nested event of
    another variant is text."""
    session = read_source(WILD)
    assert [e.id for e in session.entries] == [f"L{n}" for n in range(1, 12)]
    assert (session.session_id, session.header["runId"]) == ("ledger-run", None)
    assert _paired(session) == [("c1", "grep", False), ("c2", "shell", True)]
    grep = session.entries[3].view.tool_calls[0]
    assert grep.arguments == {"pattern": "round\\(", "path": "ledger"}
    assert session.entries[2].view.text == "Looking at the rounding in ledger/balance.py."
    failover = session.entries[7].raw
    assert failover["customType"] == "agent.route.failover"
    assert "coder RouteFailover\nattempt: 1\nfrom: kimi/kimi-k3" in failover["content"]
    assert "failure.message: Script failed attempt 3 of 4" in session.entries[8].raw["content"]


def test_seq_addresses_an_event_without_id(tmp_path: Path) -> None:
    """An envelope with ``seq`` but no ``id`` is addressed ``<run_id>:<seq>``
    (``seq:<seq>`` without a run id)."""
    rows = [{k: v for k, v in row.items() if k != "id"} for row in _lines(DUMP)[:3]]
    del rows[2]["run_id"]
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    assert [e.id for e in read_source(path).entries] == [
        "01KCFX8Q3M7V2T9R4W6Y1Z0ABC:1", "01KCFX8Q3M7V2T9R4W6Y1Z0ABC:2", "seq:3"]


def test_a_line_that_is_no_envelope_is_a_located_note(tmp_path: Path) -> None:
    """A line without an event name, or not JSON, is skipped with its line; the rest is read."""
    lines = WILD.read_bytes().splitlines()
    path = tmp_path / "run.jsonl"
    path.write_bytes(b"\n".join([lines[0], b'{"ts": "x"}', b"{oops", *lines[1:]]) + b"\n")
    session = read_source(path)
    assert len(session.entries) == len(lines)
    assert [(p.line, p.reason.split(" (")[0]) for p in session.malformed] == [
        (2, "not a Fabro event envelope"), (3, "malformed JSON line skipped")]


def test_a_file_without_any_event_is_not_a_session(tmp_path: Path) -> None:
    """A file with no Fabro envelope at all is refused with its path."""
    path = tmp_path / "empty-run.jsonl"
    path.write_bytes(b'{"note": "nothing"}\n')
    with pytest.raises(NotASessionError) as caught:
        read(str(path), 1024)
    assert caught.value.message == f"{path}: no Fabro event in the file"


def test_a_planted_key_in_tool_arguments_is_masked() -> None:
    """The Stripe test key in a tool call's arguments reaches no index text."""
    normalized = normalize_session(read_source(DUMP))
    texts = "\n".join(item.text for item in normalized.items)
    assert "sk_test_4eC39HqLyjWDarjtT1zdp7dcA9xQ" not in texts
    assert "[REDACTED:stripe-key] pytest tests/checkout -q" in texts


@pytest.mark.parametrize("variable", ["FABRIC_MEMORY_EXTRA_SESSIONS", "FABRIC_MEMORY_SESSIONS"])
def test_exports_in_a_named_folder_are_indexed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    """A folder of exports added to the discovered ones, or named alone, is read as Fabro's."""
    exports = fabro_exports(tmp_path)
    fake_home(tmp_path, monkeypatch)
    monkeypatch.setenv(variable, str(exports))
    report = reindex()
    assert (report["indexed"], report["invalid"]) == (3, [])
    assert report["sessionsRoots"] == [str(exports.resolve())]
    assert {h["agent"] for h in recall("stage", limit=50)["hits"]} == {"fabro"}


@pytest.mark.parametrize(("query", "source", "address"), [
    ("guard skips the discount", DUMP, "019b2f6e-7a0a-7c3e-9d41-00000000000a"),
    ("relation users null", EVENTS, "019b3a11-7b08-7d10-8e22-000000000008"),
    ("git-guard restore_file", WILD, "L7"),
    ("acme-compliance", DUMP, "019b2f6e-7a17-7c3e-9d41-000000000017"),
], ids=["dump-message", "events-tool-result", "wild-tool-result", "unknown-event"])
def test_recall_follow_expand_returns_the_exact_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, query: str, source: Path, address: str
) -> None:
    """A Fabro hit is followed to its entry as text, and with raw to the verbatim line of
    its export."""
    exports = fabro_exports(tmp_path)
    fake_home(tmp_path, monkeypatch)
    monkeypatch.setenv("FABRIC_MEMORY_SESSIONS", str(exports))
    reindex()
    hit = recall(query, agent="fabro")["hits"][0]
    copied = exports / source.relative_to(FIXTURES)
    assert (hit["address"], hit["path"]) == (address, str(copied.resolve()))
    entry = expand_request({**hit["follow"], "raw": True})["entries"][0]
    assert entry["text"] == line_at(copied, entry["line"])
    text = expand_request(hit["follow"])["entries"][0]["text"]  # as a model reads it
    assert text.startswith(f"{address} ") and "{" not in text.split("\n")[0]


def test_the_cli_and_the_mcp_server_answer_for_fabro(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fabro exports added beside the discovered folders (Catui's here): `recall --agent
    fabro` answers only from them, `sessions` names each run and its project, and the MCP
    server answers as the CLI does."""
    catui_home(fake_home(tmp_path, monkeypatch), ".catui")
    exports = fabro_exports(tmp_path)
    monkeypatch.setenv("FABRIC_MEMORY_EXTRA_SESSIONS", str(exports))
    report = cli_json("reindex")
    assert str(exports.resolve()) in report["sessionsRoots"]
    assert {hit["agent"] for hit in cli_json("recall", "read", "--limit", "50")["hits"]} == {
        "catui", "fabro"}
    recalled = cli_json("recall", "read", "--agent", "fabro", "--limit", "50")
    assert recalled["hits"] and {hit["agent"] for hit in recalled["hits"]} == {"fabro"}
    rows = cli_json("sessions", "--agent", "fabro")["sessions"]
    assert sorted((row["sessionId"], row["project"]) for row in rows) == [
        ("01KCFX8Q3M7V2T9R4W6Y1Z0ABC", "/home/dev/shop-api"),
        ("01KCG2M4N5P6Q7R8S9T0V1W2XY", None), ("ledger-run", None)]
    served = mcp_answers([("recall", {"query": "read", "agent": "fabro", "limit": 50}),
                          ("sessions", {"agent": "fabro"})])
    assert served == [recalled, cli_json("sessions", "--agent", "fabro")]


def test_a_nested_agent_event_is_read_whatever_else_its_envelope_holds(tmp_path: Path) -> None:
    """The agent's envelope may carry more than Fabro documents: the nested variant is still
    the body (a tool call here, with its arguments)."""
    row = _lines(DUMP)[7]
    row["properties"]["parent_session_id"] = "ses_parent"  # type: ignore[index]
    path = tmp_path / "events.jsonl"
    path.write_bytes(orjson.dumps(row) + b"\n")
    call = read_source(path).entries[0].view.tool_calls[0]
    assert (call.name, call.arguments) == ("read_file", {"path": "src/checkout/total.py"})


_JSON = st.recursive(st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1)
                     | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.sampled_from(
                         ["event", "id", "seq", "run_id", "properties", "tool_call_id",
                          "ToolCallStarted", "ToolCallCompleted", "tool_name", "arguments",
                          "output", "is_error", "text", "ts"]), inner, max_size=4),
                     max_leaves=12)


@settings(max_examples=80, deadline=None)
@given(st.lists(_JSON.map(orjson.dumps) | st.binary(max_size=30), max_size=6))
def test_any_lines_after_an_envelope_are_entries_or_located_notes(
    tmp_path_factory: pytest.TempPathFactory, lines: list[bytes]
) -> None:
    """Whatever follows a first envelope, reading gives a session whose every line is an
    entry or a located note, never a crash."""
    path = tmp_path_factory.mktemp("fabro") / "run.jsonl"
    path.write_bytes(b"\n".join([WILD.read_bytes().splitlines()[0], *lines]) + b"\n")
    session = read_source(path)
    assert session.entries[0].id == "L1"
    physical = path.read_bytes().split(b"\n")
    written = {number for number, line in enumerate(physical, 1)
               if line.removesuffix(b"\r").strip(b" \t\n\r\x0b\x0c")}
    accounted = [e.line for e in session.entries] + [p.line for p in session.malformed]
    assert sorted(accounted) == sorted(written)
