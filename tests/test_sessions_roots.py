"""The default sessions roots: Pi's folder plus oh-my-pi's ``~/.omp/agent/sessions`` when
it exists, read by reindex, recall, expand, the live index and ``serve`` as one memory."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from fabric_memory.cli import main
from fabric_memory.errors import ExpandError, LocationRefusedError, UsageError
from fabric_memory.memory.catalog import list_sessions
from fabric_memory.memory.expand import expand, expand_request
from fabric_memory.memory.locations import sessions_roots
from fabric_memory.memory.recall import recall, recall_request
from fabric_memory.memory.reindex import reindex
from fabric_memory.serve import Places

from .agent_homes import catui_home, fabro_exports
from .memory_builder import SessionBuilder
from .reliability import until, watching
from .secret_samples import github_token

LOCATION_VARIABLES = ("FABRIC_MEMORY_SESSIONS", "FABRIC_MEMORY_HOME", "PI_CODING_AGENT_DIR",
                      "PI_CODING_AGENT_SESSION_DIR", "PI_CONFIG_DIR", "FABRIC_MEMORY_AGENTS",
                      "FABRIC_MEMORY_EXTRA_SESSIONS", "CLAUDE_CONFIG_DIR", "CODEX_HOME",
                      "CATUI_HOME", "CATUI_AGENTS_DIR", "CATUI_CODING_AGENT_DIR")


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A temporary HOME with Pi's sessions folder, no location variables, and the index in
    a temporary engine home."""
    for name in LOCATION_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    pi = SessionBuilder(home / ".pi" / "agent" / "sessions" / "--repo--" / "pi.jsonl", "pi-one")
    pi.user("the pi session talks about a quokka")
    pi.write()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("FABRIC_MEMORY_HOME", str(tmp_path / "fm"))
    return home


@pytest.fixture
def omp(home: Path) -> Path:
    """oh-my-pi's sessions folder next to Pi's, with one session."""
    root = home / ".omp" / "agent" / "sessions"
    session = SessionBuilder(root / "--repo--" / "omp.jsonl", "omp-one")
    session.user("the omp session talks about a quokka too")
    session.write()
    return root


def test_roots_are_pi_then_omp_when_present(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pi's folder, then oh-my-pi's when it exists; a folder that does not exist is no
    root while another agent's does; the variable or --sessions replace them."""
    pi = home / ".pi" / "agent" / "sessions"
    assert sessions_roots() == (pi,)
    omp = home / ".omp" / "agent" / "sessions"
    omp.mkdir(parents=True)
    assert sessions_roots() == (pi, omp)
    monkeypatch.setenv("PI_CONFIG_DIR", ".omp-work")  # oh-my-pi's config folder name
    assert sessions_roots() == (pi,)
    (home / ".omp-work" / "agent" / "sessions").mkdir(parents=True)
    assert sessions_roots() == (pi, home / ".omp-work" / "agent" / "sessions")
    # PI_CODING_AGENT_DIR is read by both: one agent folder, one root.
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(home / "agent"))
    assert sessions_roots() == (home / "agent" / "sessions",)
    monkeypatch.setenv("PI_CODING_AGENT_SESSION_DIR", str(home / "pi-sessions"))
    (home / "agent" / "sessions").mkdir(parents=True)
    assert sessions_roots() == (home / "agent" / "sessions",)
    (home / "pi-sessions").mkdir()
    assert sessions_roots() == (home / "pi-sessions", home / "agent" / "sessions")
    monkeypatch.setenv("FABRIC_MEMORY_SESSIONS", str(home / "ours"))
    assert sessions_roots() == (home / "ours",)
    assert sessions_roots(home / "explicit") == (home / "explicit",)


def test_reindex_recall_expand_read_both_roots(home: Path, omp: Path) -> None:
    report = reindex()
    pi = home / ".pi" / "agent" / "sessions"
    assert report["sessionsRoots"] == [str(pi), str(omp)]
    assert (report["sessions"], report["indexed"]) == (2, 2)
    answer = recall("quokka")
    assert sorted(hit["sessionId"] for hit in answer["hits"]) == ["omp-one", "pi-one"]
    for hit in answer["hits"]:
        page = expand_request(hit["follow"])
        assert "quokka" in page["entries"][0]["text"]
    # A path relative to either root names its session.
    assert expand("--repo--/omp.jsonl", indices=[0])["sessionId"] == "omp-one"
    assert expand("--repo--/pi.jsonl", indices=[0])["sessionId"] == "pi-one"


def test_deleting_in_one_root_forgets_only_that_file(home: Path, omp: Path) -> None:
    reindex()
    (omp / "--repo--" / "omp.jsonl").unlink()
    report = reindex()
    assert [item["path"] for item in report["removed"]] == [str(omp / "--repo--" / "omp.jsonl")]
    assert [hit["sessionId"] for hit in recall("quokka")["hits"]] == ["pi-one"]
    # Indexing Pi's folder alone never forgets oh-my-pi's sessions, nor the reverse.
    again = SessionBuilder(omp / "--repo--" / "omp2.jsonl", "omp-two")
    again.user("a second quokka")
    again.write()
    reindex()
    assert reindex(sessions=home / ".pi" / "agent" / "sessions")["removed"] == []
    assert reindex(sessions=omp)["removed"] == []
    assert sorted(hit["sessionId"] for hit in recall("quokka")["hits"]) == ["omp-two", "pi-one"]


def test_without_omp_nothing_changes(home: Path) -> None:
    report = reindex()
    assert report["sessionsRoots"] == [str(home / ".pi" / "agent" / "sessions")]
    assert report["sessionsRoot"] == report["sessionsRoots"][0]
    assert [hit["sessionId"] for hit in recall("quokka")["hits"]] == ["pi-one"]


def test_expand_stays_inside_the_roots(home: Path, omp: Path, tmp_path: Path) -> None:
    """A session indexed from elsewhere is not reachable through the default roots, and
    --session of reindex must lie under one of them."""
    elsewhere = SessionBuilder(tmp_path / "elsewhere" / "x.jsonl", "elsewhere-one")
    elsewhere.user("a quokka far away")
    elsewhere.write()
    reindex(sessions=tmp_path / "elsewhere")
    reindex()
    with pytest.raises(ExpandError, match="not in the memory index"):
        expand("elsewhere-one", indices=[0])
    with pytest.raises(UsageError, match="not under the sessions root"):
        reindex(session=elsewhere.path)
    assert reindex(session=omp / "--repo--" / "omp.jsonl")["sessions"] == 1


def test_serve_accepts_each_configured_root_and_refuses_others(
    home: Path, omp: Path, tmp_path: Path
) -> None:
    places = Places.of(None, None)
    pi = home / ".pi" / "agent" / "sessions"
    assert places.bind({"query": "q", "sessions": str(omp)}) == {"query": "q"}
    assert places.bind({"query": "q", "sessions": str(pi)}) == {"query": "q"}
    with pytest.raises(LocationRefusedError, match="only from its own sessions"):
        places.bind({"query": "q", "sessions": str(tmp_path)})
    assert places.bind({"query": "q", "sessions": f"{omp}:{pi}"}) == {"query": "q"}
    with pytest.raises(LocationRefusedError, match="only from its own sessions"):
        places.bind({"query": "q", "sessions": f"{omp}:{tmp_path}"})


def test_sessions_may_be_repeated(home: Path, omp: Path) -> None:
    """`--sessions A --sessions B` reads exactly those folders, as
    FABRIC_MEMORY_SESSIONS=A:B does, and their follows expand."""
    pi = home / ".pi" / "agent" / "sessions"
    report = _cli_json("reindex", "--sessions", str(omp), "--sessions", str(pi))
    assert report["sessionsRoots"] == [str(omp), str(pi)]
    hits = _cli_json("recall", "quokka", "--sessions", str(omp), "--sessions", str(pi))["hits"]
    assert sorted(hit["agent"] for hit in hits) == ["omp", "pi"]
    assert all(expand_request(hit["follow"])["entries"] for hit in hits)


def test_watch_follows_both_roots(home: Path, omp: Path) -> None:
    """`reindex --watch` with the default roots indexes a session written in oh-my-pi's
    folder while it runs."""
    with watching(env=dict(os.environ)) as (_, first):
        assert (first["step"], first["sessions"]) == ("catch-up", 2)
        fresh = SessionBuilder(omp / "--later--" / "late.jsonl", "omp-late")
        fresh.user("the pangolin was written under oh-my-pi")
        fresh.write()
        until(lambda: recall("pangolin")["total"] == 1, "the omp session was never indexed")


def test_recall_and_sessions_answer_only_from_the_roots_asked_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With one index holding roots A and B, recall and sessions given --sessions A answer
    from A alone (totals included), and every hit's follow expands."""
    index = tmp_path / "index"
    for name in ("a", "b"):
        for n in range(3):
            session = SessionBuilder(tmp_path / name / "--repo--" / f"{n}.jsonl", f"{name}-{n}")
            session.user(f"root {name} session {n} talks about a quokka")
            session.write()
        reindex(sessions=tmp_path / name, index=index, workers=1)
    answer = recall("quokka", sessions=tmp_path / "a", index=index, limit=2)
    assert answer["total"] == 3 and answer["next"] is not None
    following = recall_request(answer["next"])
    hits = [*answer["hits"], *following["hits"]]
    assert sorted(hit["sessionId"] for hit in hits) == ["a-0", "a-1", "a-2"]
    for hit in hits:
        assert "quokka" in expand_request(hit["follow"])["entries"][0]["text"]
    assert recall("quokka", index=index)["total"] == 6  # no root named: the whole index
    listing = list_sessions(index=index, sessions=tmp_path / "b")
    assert sorted(s["sessionId"] for s in listing["sessions"]) == ["b-0", "b-1", "b-2"]
    assert main(["sessions", "--index", str(index), "--sessions", str(tmp_path / "a"),
                 "--json"]) == 0
    printed = orjson.loads(capsys.readouterr().out)
    assert sorted(s["sessionId"] for s in printed["sessions"]) == ["a-0", "a-1", "a-2"]


# --- every agent under one home ------------------------------------------------------------

AGENT_FIXTURES = Path(__file__).parent.parent / "fixtures" / "agents"
CLAUDE_DIR = "-home-dev-projects-ledger"
CODEX_CURRENT = "rollout-2025-10-03T09-15-00-0199a7c4-1e2f-7a3b-8c4d-5e6f7a8b9c0d.jsonl"
CODEX_EARLIER = "rollout-2025-05-07T11-00-00-5a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d.jsonl"


def _cli_json(*argv: str) -> Any:
    done = subprocess.run([sys.executable, "-m", "fabric_memory.cli", *argv, "--json"],
                          capture_output=True, check=True, env=dict(os.environ))
    return orjson.loads(done.stdout)


@pytest.fixture
def every_agent(home: Path, omp: Path, monkeypatch: pytest.MonkeyPatch,
                tmp_path: Path) -> dict[str, Path]:
    """Pi's and oh-my-pi's sessions (from ``home``), Claude Code's transcripts in
    ~/.claude/projects (one with a GitHub token in a tool's output), Codex's rollouts in
    ~/.codex/sessions/YYYY/MM/DD, Catui's sessions (``$CATUI_HOME``) with the run traces of
    the workspace they name, and Fabro exports in a folder FABRIC_MEMORY_EXTRA_SESSIONS
    adds: each where the agent (or its user) puts it."""
    catui = catui_home(tmp_path)
    monkeypatch.setenv("CATUI_HOME", str(catui.home))
    exports = fabro_exports(tmp_path)
    monkeypatch.setenv("FABRIC_MEMORY_EXTRA_SESSIONS", str(exports))
    claude = home / ".claude" / "projects" / CLAUDE_DIR
    claude.mkdir(parents=True)
    shutil.copy(AGENT_FIXTURES / "claude-code" / "tools_and_summary.jsonl",
                claude / "7f3c2a10-5b6e-4d1f-9a8b-2c4d6e8f0a1b.jsonl")
    secret = github_token(random.Random(25))
    lines = [{"type": "assistant", "sessionId": "s-secret", "uuid": "a1", "parentUuid": None,
              "cwd": "/home/dev/projects/ledger", "timestamp": "2025-09-15T10:00:00.000Z",
              "message": {"role": "assistant", "content": [
                  {"type": "tool_use", "id": "toolu_01Env", "name": "Bash",
                   "input": {"command": "cat .env"}}]}},
             {"type": "user", "sessionId": "s-secret", "uuid": "u1", "parentUuid": "a1",
              "cwd": "/home/dev/projects/ledger", "timestamp": "2025-09-15T10:00:01.000Z",
              "message": {"role": "user", "content": [
                  {"type": "tool_result", "tool_use_id": "toolu_01Env",
                   "content": f"the armadillo deploy token: {secret.text}"}]}}]
    (claude / "s-secret.jsonl").write_bytes(b"".join(orjson.dumps(v) + b"\n" for v in lines))
    codex = home / ".codex" / "sessions"
    for day, name in (("2025/10/03", CODEX_CURRENT), ("2025/05/07", CODEX_EARLIER)):
        (codex / day).mkdir(parents=True)
        shutil.copy(AGENT_FIXTURES / "codex" / name, codex / day / name)
    return {"claude": claude, "codex": codex, "omp": omp, "catui": catui.sessions,
            "traces": catui.traces, "fabro": exports,
            "secret_values": Path("\n".join(secret.values))}


def test_every_agent_under_one_home_is_one_memory(every_agent: dict[str, Path]) -> None:
    """`reindex` with no arguments finds every agent's folder and file (Catui's traces
    through the workspace its sessions name, Fabro's exports through the setting); recall
    --agent codex answers only from Codex; a token in a Claude Code tool result is masked in the
    index and in expand; a deleted Codex rollout is forgotten; the MCP server (started
    with no folder either) answers recall and sessions as the CLI does."""
    report = _cli_json("reindex")
    home = Path(os.environ["HOME"])
    assert report["sessionsRoots"] == [
        str(home / ".pi/agent/sessions"), str(every_agent["omp"]), str(home / ".claude/projects"),
        str(every_agent["codex"]), str(every_agent["catui"]), str(every_agent["fabro"]),
        str(every_agent["traces"])]  # the traces of the workspace Catui's sessions name
    files = {agent: [p for p in every_agent[folder].rglob("*.jsonl") if p.name != "latest.jsonl"]
             for agent, folder in (("catui", "catui"), ("traces", "traces"), ("fabro", "fabro"))}
    assert all(files.values())
    expected = 6 + sum(map(len, files.values()))
    assert (report["sessions"], report["indexed"], report["invalid"]) == (expected, expected, [])
    assert report["redacted"]["github-token"] == 1
    listing = _cli_json("sessions")["sessions"]
    assert sorted(row["agent"] for row in listing) == sorted(
        ["claude-code", "claude-code", "codex", "codex", "omp", "pi"]
        + ["catui"] * (len(files["catui"]) + len(files["traces"]))
        + ["fabro"] * len(files["fabro"]))
    assert all(row["project"] for row in listing if row["agent"] in ("claude-code", "codex")
               and row["sessionId"] != "5a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d")

    everywhere = _cli_json("recall", "ledger", "--limit", "50")["hits"]
    assert {"claude-code", "codex"} < {hit["agent"] for hit in everywhere}
    only = _cli_json("recall", "ledger", "--agent", "codex", "--limit", "50")
    assert only["hits"] and {hit["agent"] for hit in only["hits"]} == {"codex"}
    assert {hit["project"] for hit in only["hits"]} <= {"/home/dev/projects/ledger", None}

    secret_values = str(every_agent["secret_values"]).split("\n")
    found = _cli_json("recall", "armadillo")
    assert [hit["agent"] for hit in found["hits"]] == ["claude-code"]
    page = _cli_json("expand", found["hits"][0]["sessionId"], "--address", "u1")
    raw = _cli_json("expand", found["hits"][0]["sessionId"], "--address", "u1", "--raw")
    assert page["entries"][0]["text"].startswith("u1 toolResult Bash 2025-09-15T10:00:01")
    shown = orjson.dumps([found, page, raw]).decode()
    assert shown.count("[REDACTED:github-token]") >= 3
    assert not any(value in shown for value in secret_values)

    rollout = every_agent["codex"] / "2025/10/03" / CODEX_CURRENT
    rollout.unlink()
    again = _cli_json("reindex")
    assert [item["path"] for item in again["removed"]] == [str(rollout)]
    assert _cli_json("recall", "off-by-one", "--mode", "phrase")["total"] == 0

    async def ask() -> None:
        command = [sys.executable, "-m", "fabric_memory.cli", "serve", "--no-watch"]
        params = StdioServerParameters(command=command[0], args=command[1:],
                                       env={**os.environ, "PYTHONUNBUFFERED": "1"})
        async with Client(params) as client:
            answer = await client.call_tool("recall", {"query": "ledger", "agent": "codex",
                                                       "limit": 50})
            assert not answer.is_error
            assert answer.structured_content == _cli_json(
                "recall", "ledger", "--agent", "codex", "--limit", "50")
            rows = await client.call_tool("sessions", {"agent": "claude-code"})
            assert rows.structured_content is not None
            assert [row["agent"] for row in rows.structured_content["sessions"]] == [
                "claude-code", "claude-code"]

    anyio.run(ask)


def test_the_live_index_follows_other_agents_folders(every_agent: dict[str, Path]) -> None:
    """`reindex --watch` with the default roots indexes a Codex rollout written in a new day
    folder while it runs, as Codex's."""
    with watching(env=dict(os.environ)) as (_, first):
        assert first["step"] == "catch-up" and first["invalid"] == []
        day = every_agent["codex"] / "2025" / "11" / "01"
        day.mkdir(parents=True)
        source = (AGENT_FIXTURES / "codex" / CODEX_EARLIER).read_bytes()
        (day / CODEX_EARLIER).write_bytes(source.replace(b"amount_cents", b"okapi_cents"))
        until(lambda: recall("okapi_cents", agent="codex")["total"] == 4,
              "the new Codex rollout was never indexed")  # its message, call, result, answer
