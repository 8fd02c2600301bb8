"""Catui: sessions read by Pi's reader, run traces read as sessions joined by their ids."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import orjson
import pytest

from fabric_memory.errors import NotASessionError
from fabric_memory.memory.expand import expand_request
from fabric_memory.memory.normalize import normalize_session
from fabric_memory.memory.recall import recall
from fabric_memory.memory.reindex import reindex
from fabric_memory.session import Session, read_session
from fabric_memory.sources import agent_homes, read_source, reader_for
from fabric_memory.sources.catui import SESSIONS, TRACES_READER, catui_sessions_dir
from fabric_memory.sources.catui_trace import INVALID_TRACE

from .agent_homes import (
    CATUI,
    CatuiHome,
    catui_home,
    cli_json,
    fake_home,
    line_at,
    mcp_answers,
)
from .reliability import until, watching

SESSION_A = "cecbe0e3-9b5d-4571-b53a-2239e63b9f98"
SESSION_B = "81889ac6-163b-43c5-9b20-8f14d210e2c7"
SESSION_C = "6a0f3c9e-1d2b-4e5f-8a7b-9c0d1e2f3a4b"
WRITTEN_RUN = "run-2b9d7e41-5c3a-4f68-9e1d-0a7b6c5d4e3f"
RUNS = sorted(p.stem for p in (CATUI / "catui-demo" / ".catui" / "traces").glob("run-*.jsonl"))


@pytest.fixture
def catui(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CatuiHome:
    home = catui_home(tmp_path)
    for name in ("CATUI_CODING_AGENT_DIR", "CATUI_AGENTS_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CATUI_HOME", str(home.home))
    return home


def _traces(catui: CatuiHome) -> dict[str, Session]:
    return {run: read_source(catui.traces / f"{run}.jsonl") for run in RUNS}


@pytest.mark.parametrize("session_id", [SESSION_A, SESSION_B, SESSION_C])
def test_sessions_are_pi_sessions_of_agent_catui(catui: CatuiHome, session_id: str) -> None:
    """A session under Catui's folder is read by Pi's reader unchanged, as agent ``catui``,
    its project the header's ``cwd``."""
    path = catui.session(session_id)
    assert reader_for(str(path)) is SESSIONS
    session = read_source(path)
    pi = read_session(path)
    assert (session.agent, session.project, session.session_id) == (
        "catui", str(catui.workspace), session_id)
    assert [(e.id, e.parent_id, e.line, e.offset, e.length, e.raw) for e in session.entries] == [
        (e.id, e.parent_id, e.line, e.offset, e.length, e.raw) for e in pi.entries]
    assert session.source_hash == pi.source_hash


def test_a_pi_format_file_elsewhere_is_pi(catui: CatuiHome, tmp_path: Path) -> None:
    """The same file outside Catui's folder is a Pi session (told by where it lies)."""
    elsewhere = tmp_path / "pi" / "--x--" / "s.jsonl"
    elsewhere.parent.mkdir(parents=True)
    shutil.copy(catui.session(SESSION_A), elsewhere)
    assert read_source(elsewhere).agent == "pi"


@pytest.mark.parametrize(("variables", "expected"), [
    ({}, "HOME/.catui/agents/default/sessions"),
    ({"CATUI_HOME": "/c"}, "/c/agents/default/sessions"),
    ({"CATUI_HOME": "/c", "CATUI_AGENTS_DIR": "/a"}, "/a/default/sessions"),
    ({"CATUI_AGENTS_DIR": "/a", "CATUI_CODING_AGENT_DIR": "/d"}, "/d/sessions"),
], ids=["default", "CATUI_HOME", "CATUI_AGENTS_DIR", "CATUI_CODING_AGENT_DIR"])
def test_sessions_folder_follows_catuis_variables(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, variables: dict[str, str], expected: str
) -> None:
    """Catui's sessions folder is found as Catui finds its default agent's folder."""
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("CATUI_HOME", "CATUI_AGENTS_DIR", "CATUI_CODING_AGENT_DIR"):
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    assert catui_sessions_dir() == Path(expected.replace("HOME", str(tmp_path)))


@pytest.mark.parametrize("run", RUNS)
def test_trace_is_a_session_of_its_run(catui: CatuiHome, run: str) -> None:
    """A trace reads as the session ``<runId>`` of agent catui: one entry per event,
    addressed ``<runId>:<sequence>``, spanning exactly its line, chained in order, timed."""
    path = catui.traces / f"{run}.jsonl"
    assert reader_for(str(path)) is TRACES_READER
    session = read_source(path)
    data = path.read_bytes()
    events = [orjson.loads(line) for line in data.split(b"\n")[:-1]]
    assert (session.agent, session.session_id, session.project) == (
        "catui", run, str(catui.workspace))
    assert session.header["sessionId"] == events[0]["sessionId"]
    assert [e.id for e in session.entries] == [f"{run}:{e['sequence']}" for e in events]
    assert [e.parent_id for e in session.entries] == [None, *[e.id for e in session.entries][:-1]]
    assert [e.view.time_ms for e in session.entries] == [e["timestamp"] for e in events]
    for entry, line in zip(session.entries, data.split(b"\n"), strict=False):
        assert data[entry.offset : entry.offset + entry.length] == line
    assert session.active_ids() == {e.id for e in session.entries}
    assert not session.malformed


def _calls(session: Session) -> dict[str, str]:
    return {c.call_id: c.name for e in session.entries for c in e.view.tool_calls}


def _results(session: Session) -> dict[str, bool]:
    return {e.view.call_id: e.view.message["isError"] for e in session.entries
            if e.view.role == "toolResult" and e.view.call_id and e.view.message}


@pytest.mark.parametrize("session_id", [SESSION_A, SESSION_B, SESSION_C])
def test_traces_join_their_session_by_ids(catui: CatuiHome, session_id: str) -> None:
    """The traces naming a session hold exactly its tool calls (same ids and names), and a
    call's outcome there agrees with the session's result."""
    session = read_source(catui.session(session_id))
    runs = [t for t in _traces(catui).values() if t.header["sessionId"] == session_id]
    assert runs
    traced_calls = {k: v for run in runs for k, v in _calls(run).items()}
    traced_results = {k: v for run in runs for k, v in _results(run).items()}
    assert traced_calls == _calls(session)
    assert traced_results == _results(session)


def test_a_tool_result_carries_policy_checkpoint_outcome_and_input(catui: CatuiHome) -> None:
    """The denied call's result names the tool, the call, the policy's decision, the
    checkpoint's resolution, the outcome and the clear input (masked when indexed)."""
    trace = read_source(catui.traces / f"{WRITTEN_RUN}.jsonl")
    result = trace.by_id[f"{WRITTEN_RUN}:9"].view
    assert (result.role, result.tool_name, result.message and result.message["isError"]) == (
        "toolResult", "bash", True)
    call = "call-5e7a9c1b-3d2f-4a6e-8b0c-1d2e3f4a5b6c"
    assert result.call_id == call
    text = result.message["content"][0]["text"] if result.message else ""
    assert text.splitlines()[:3] == [f"bash {call}: denied", "policy runtime-tool-policy: pause",
                                     "checkpoint ckpt-41c2: denied"]
    assert "./scripts/deploy.sh staging" in text
    requested = trace.by_id[f"{WRITTEN_RUN}:5"].view.tool_calls[0]
    assert (requested.call_id, requested.name) == (call, "bash")
    assert requested.arguments["command"].endswith("./scripts/deploy.sh staging")
    allowed = trace.by_id[f"{WRITTEN_RUN}:17"].view
    assert allowed.message is not None and allowed.message["isError"] is False
    assert "policy runtime-tool-policy: allow" in allowed.message["content"][0]["text"]


def test_a_planted_key_in_a_trace_is_masked_in_the_index(catui: CatuiHome) -> None:
    """The fake AWS key in the written trace's tool input reaches no index text."""
    normalized = normalize_session(read_source(catui.traces / f"{WRITTEN_RUN}.jsonl"))
    texts = "\n".join(item.text for item in normalized.items)
    assert "AKIAQ3EGRZ7PCATUI9XW" not in texts
    assert texts.count("[REDACTED:aws-access-key-id]") == 2
    assert (normalized.redacted or {}).get("aws-access-key-id") == 2


REJECTED = sorted(p for p in (CATUI / "rejected").glob("*.jsonl") if p.stat().st_size)


@pytest.mark.parametrize("path", REJECTED, ids=[p.stem for p in REJECTED])
def test_a_trace_catui_would_reject_is_refused_with_its_line(path: Path) -> None:
    """Through the registry, a broken trace is a located invalid_run_trace error."""
    with pytest.raises(NotASessionError) as caught:
        read_source(path)
    assert caught.value.code == INVALID_TRACE
    assert caught.value.line is not None
    assert caught.value.message.startswith(f"{path}:{caught.value.line}: ")


def test_trace_folders_are_found_from_the_sessions_cwd(catui: CatuiHome, tmp_path: Path) -> None:
    """Catui's homes: its sessions folder, and the trace folder of each project that has one."""
    nowhere = tmp_path / "no-traces-here"
    nowhere.mkdir()
    assert TRACES_READER.homes([str(catui.workspace)]) == (catui.traces,)
    projects = {read_source(p).project for p in catui.sessions.rglob("*.jsonl")}
    found = agent_homes([*sorted(p for p in projects if p), str(nowhere)],
                        frozenset({"catui"}))
    assert sorted(found) == sorted([catui.sessions.resolve(), catui.traces.resolve()])


@pytest.fixture
def indexed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[CatuiHome, dict]:
    """Catui where it writes by default (``~/.catui``), one trace Catui would reject in the
    workspace, and a ``reindex`` with no arguments."""
    home = catui_home(fake_home(tmp_path, monkeypatch), ".catui")
    shutil.copy(CATUI / "rejected" / "sequence-gap.jsonl", home.traces / "run-gap.jsonl")
    return home, dict(reindex())


def test_reindex_finds_the_sessions_then_their_workspaces_traces(
    indexed: tuple[CatuiHome, dict]
) -> None:
    """With no arguments, reindex reads Catui's sessions, then the traces of the workspace
    their cwd names: every run but latest.jsonl; the rejected trace is one located problem."""
    home, report = indexed
    assert report["indexed"] == 3 + len(RUNS)
    assert str(home.traces.resolve()) in report["sessionsRoots"]
    gap = str((home.traces / "run-gap.jsonl").resolve())
    assert report["invalid"] == [{"path": gap, "reason": f"{gap}:7: sequence 8 where 7 was "
                                                         "due: a gap"}]
    hits = recall("latest", agent="catui", limit=50)["hits"]
    assert not any(hit["path"].endswith("latest.jsonl") for hit in hits)


def test_a_sessions_runs_are_recalled_by_its_id(indexed: tuple[CatuiHome, dict]) -> None:
    """Recalling a Catui session's id finds the first event of each of its runs (the hits
    holding every part of the id; others share a part by chance)."""
    runs = recall(SESSION_B, agent="catui", limit=50)["hits"]
    whole = [h for h in runs if h["wordsHeld"] == h["queryWords"]]
    assert sorted(h["address"] for h in whole if h["sessionId"] != SESSION_B) == [
        f"{run}:1" for run in RUNS if run != WRITTEN_RUN and not run.startswith("run-4f70")]


def test_a_tool_call_is_recalled_with_its_decision_and_followed_to_its_line(
    indexed: tuple[CatuiHome, dict]
) -> None:
    """Recalling a call by its id finds its trace result (decision and outcome in the
    snippet's document); follow expands to the exact trace line."""
    home, _ = indexed
    hits = recall("call-1846bae2-cacf-4e88-abec-e48c3c53d221", agent="catui", role="toolResult")
    hit = next(h for h in hits["hits"] if h["address"].startswith("run-4f70"))
    run = "run-4f70e336-cbd4-47f2-94e4-0aed03609a99"
    assert (hit["address"], hit["agent"], hit["project"], hit["sessionId"]) == (
        f"{run}:8", "catui", str(home.workspace.resolve()), run)
    page = expand_request({**hit["follow"], "raw": True})
    entry = page["entries"][0]
    assert entry["line"] == 8
    assert entry["text"] == line_at(home.traces / f"{run}.jsonl", 8)
    assert recall("runtime-tool-policy allow read error", agent="catui",
                  session=run)["hits"][0]["address"] == f"{run}:8"


def test_a_session_entry_round_trips_to_its_exact_line(indexed: tuple[CatuiHome, dict]) -> None:
    """A Catui session's tool result is recalled by its words and followed to its line."""
    home, _ = indexed
    hit = recall("TS2307 agent-core", agent="catui")["hits"][0]
    path = home.session(SESSION_A)
    assert (hit["path"], hit["sessionId"], hit["role"]) == (
        str(path.resolve()), SESSION_A, "toolResult")
    entry = expand_request({**hit["follow"], "raw": True})["entries"][0]
    assert entry["text"] == line_at(path, entry["line"])
    assert entry["address"] == hit["address"]


def test_a_secret_in_a_trace_is_masked_when_recalled_and_expanded(
    indexed: tuple[CatuiHome, dict]
) -> None:
    """The planted key is neither in a snippet nor in the expanded line (unless asked)."""
    home, _ = indexed
    hit = next(h for h in recall("deploy.sh staging denied", agent="catui")["hits"]
               if h["sessionId"] == WRITTEN_RUN)
    assert "AKIAQ3EGRZ7PCATUI9XW" not in str(hit)
    entry = expand_request(hit["follow"])["entries"][0]
    assert "AKIAQ3EGRZ7PCATUI9XW" not in entry["text"]
    shown = expand_request({**hit["follow"], "showSecrets": True, "raw": True})["entries"][0]
    assert shown["text"] == line_at(home.traces / f"{WRITTEN_RUN}.jsonl", shown["line"])


@pytest.mark.parametrize("content", [b"", b"\n\n", b"not json\n"], ids=["empty", "blank", "text"])
def test_any_file_in_a_trace_folder_is_judged_by_catuis_rules(
    catui: CatuiHome, content: bytes
) -> None:
    """A file in a workspace's trace folder that is no trace is refused in Catui's terms."""
    path = catui.traces / "run-broken.jsonl"
    path.write_bytes(content)
    assert reader_for(str(path)) is TRACES_READER
    with pytest.raises(NotASessionError) as caught:
        read_source(path)
    assert caught.value.code == INVALID_TRACE


def test_the_cli_and_the_mcp_server_answer_for_catui(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`reindex` with no arguments indexes Catui's sessions and runs; `sessions` and
    `recall --agent catui` say agent and workspace; `expand` returns a trace's line; the MCP
    server (started with no folder) answers recall and sessions as the CLI does."""
    home = catui_home(fake_home(tmp_path, monkeypatch), ".catui")
    report = cli_json("reindex")
    assert (report["indexed"], report["invalid"]) == (3 + len(RUNS), [])
    rows = cli_json("sessions", "--agent", "catui")["sessions"]
    workspace = str(home.workspace.resolve())
    assert sorted(row["sessionId"] for row in rows) == sorted(
        [SESSION_A, SESSION_B, SESSION_C, *RUNS])
    assert {(row["agent"], row["project"]) for row in rows} == {("catui", workspace)}
    recalled = cli_json("recall", "runtime-tool-policy pause", "--agent", "catui", "--match",
                        "all")
    assert sorted(hit["address"] for hit in recalled["hits"]) == [
        f"{WRITTEN_RUN}:6", f"{WRITTEN_RUN}:9"]
    page = cli_json("expand", WRITTEN_RUN, "--address", f"{WRITTEN_RUN}:6", "--raw")
    assert page["entries"][0]["text"] == line_at(home.traces / f"{WRITTEN_RUN}.jsonl", 6)
    served = mcp_answers([
        ("recall", {"query": "runtime-tool-policy pause", "agent": "catui", "match": "all"}),
        ("sessions", {"agent": "catui"})])
    assert served == [recalled, cli_json("sessions", "--agent", "catui")]


def test_the_live_index_follows_a_new_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """While `reindex --watch` runs, a run Catui writes to a known workspace (its trace and
    the new latest.jsonl) is indexed, the copy is not."""
    home = catui_home(fake_home(tmp_path, monkeypatch), ".catui")
    reindex()
    run = "run-0b1c2d3e-4f50-4617-8899-aabbccddeeff"
    data = (home.traces / f"{WRITTEN_RUN}.jsonl").read_bytes().replace(
        WRITTEN_RUN.encode(), run.encode()).replace(b"deploy.sh", b"rollback.sh")
    with watching(env=dict(os.environ)) as (_, first):
        assert first["step"] == "catch-up"
        (home.traces / f"{run}.jsonl").write_bytes(data)
        (home.traces / "latest.jsonl").write_bytes(data)
        until(lambda: recall("rollback.sh", agent="catui", match="all")["total"] > 0,
              "the new run was never indexed")
    hits = recall("rollback.sh", match="all", limit=50)["hits"]
    assert {(hit["sessionId"], Path(hit["path"]).name) for hit in hits} == {(run, f"{run}.jsonl")}


@pytest.mark.parametrize("linked", [".catui", ".catui/traces"])
def test_a_trace_folder_reached_through_a_symlink_is_not_read(tmp_path: Path, linked: str) -> None:
    """A workspace whose .catui or .catui/traces is a symlink has no trace folder to read."""
    workspace = tmp_path / "ws"
    (workspace / linked).parent.mkdir(parents=True, exist_ok=True)
    elsewhere = tmp_path / "elsewhere" / "traces"
    elsewhere.mkdir(parents=True)
    target = elsewhere if linked.endswith("traces") else elsewhere.parent
    (workspace / linked).symlink_to(target)
    assert (workspace / ".catui" / "traces").is_dir()
    assert TRACES_READER.homes([str(workspace)]) == ()
