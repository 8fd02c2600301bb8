"""The extension in the real Pi 1.6.0, over RPC (tests/pi_host.py), with a scripted model
(tests/pi/scripted-provider.ts): the memory tools answer from an earlier session, ``compact``
goes through ``fabric-memory hook``, a missing or hung hook falls back to Pi's own
compaction, and the extension type-checks against Pi's declarations."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from fabric_memory.memory.render import render_expand, render_recall
from fabric_memory.pi import EXTENSION_ENTRY
from tests.pi_host import (
    FABRIC_MEMORY,
    PI_DIR,
    SCRIPTED_PROVIDER,
    TSC,
    PiHost,
    PiRpc,
    Record,
    pi_environment,
    pi_host,
    session_lines,
    text_of,
)

from .conftest import FIXTURES
from .memory_builder import SessionBuilder

pytestmark = pytest.mark.slow

CODEWORD = "zebra-quartz-42"
PI_SUMMARY = "scripted-provider summary (Pi's own compaction)"


@pytest.fixture
def host() -> PiHost:
    return pi_host()


@pytest.fixture
def place(tmp_path: Path) -> dict[str, Path]:
    """A private HOME (Pi's agent dir and fabric-memory's index inside), sessions, a cwd."""
    home, sessions, work = tmp_path / "home", tmp_path / "sessions", tmp_path / "work"
    for folder in (home, sessions, work):
        folder.mkdir()
    agent = home / ".pi" / "agent"
    agent.mkdir(parents=True)
    # Keep little, so a few short turns leave something for compaction to summarize.
    (agent / "settings.json").write_text(json.dumps({"compaction": {"keepRecentTokens": 40}}))
    return {"home": home, "sessions": sessions, "work": work}


def start(host: PiHost, place: dict[str, Path], **env: str) -> PiRpc:
    """Pi with the extension, told where to write sessions by ``--session-dir`` alone (no
    variable names that folder), so the extension itself must pass it to its children."""
    environment = pi_environment(place["home"], place["sessions"],
                                 **{"PI_CODING_AGENT_SESSION_DIR": "", **env})
    return PiRpc(host, [EXTENSION_ENTRY, SCRIPTED_PROVIDER], place["sessions"], environment,
                 place["work"])


def tool_end(pi: PiRpc, name: str) -> Record:
    ends = [r for r in pi.records if r.get("type") == "tool_execution_end"
            and r.get("toolName") == name]
    assert ends, f"the model's {name} call never ran"
    return ends[-1]


def notices(pi: PiRpc) -> list[str]:
    return [str(r.get("message")) for r in pi.records
            if r.get("type") == "extension_ui_request" and r.get("method") == "notify"]


def indexed(place: dict[str, Path], session_file: str) -> bool:
    listing = subprocess.run(
        [str(FABRIC_MEMORY), "sessions", "--json"], capture_output=True, check=False,
        env=pi_environment(place["home"], place["sessions"]),
    )
    if listing.returncode != 0:
        return False
    sessions = json.loads(listing.stdout)["sessions"]
    return any(Path(s["path"]).resolve() == Path(session_file).resolve() for s in sessions)


def wait_until(check: Any, what: str, deadline: float = 90.0) -> None:
    end = time.monotonic() + deadline
    while not check():
        assert time.monotonic() < end, f"{what} did not happen within {deadline} s"
        time.sleep(0.25)


def dead(pid: int) -> bool:
    """Whether process ``pid`` has ended (gone, or a zombie its new parent has not reaped
    yet: Pi may exit before it collects a child it killed)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state == "Z"


def converse(pi: PiRpc, turns: int) -> None:
    for turn in range(turns):
        said = f"turn {turn}: please remember fact number {turn} about the parser"
        assert text_of(pi.prompt(said)) == f"echo: {said}"


def test_memory_tools_recall_an_earlier_session_and_expand_a_hit(
    host: PiHost, place: dict[str, Path]
) -> None:
    with start(host, place) as pi:
        pi.prompt(f"The deploy codeword is {CODEWORD}")
        earlier = pi.call({"type": "get_state"})["data"]["sessionFile"]
    # Ending the session re-indexed it in the background (session_shutdown).
    wait_until(lambda: indexed(place, earlier), "the background reindex of the ended session")

    with start(host, place) as pi:
        pi.prompt(f'CALL memory_recall {{"query": "{CODEWORD}"}}')
        recalled = tool_end(pi, "memory_recall")
        assert recalled["isError"] is False, recalled
        answer = recalled["result"]["details"]
        said = recalled["result"]["content"][0]["text"]
        assert said == render_recall(answer, "pi")  # the model reads text, not JSON
        hits = [h for h in answer["hits"] if Path(h["path"]).resolve() == Path(earlier).resolve()]
        assert hits, answer
        assert CODEWORD in hits[0]["snippet"]
        assert sum(hits[0]["path"] in line for line in said.splitlines()) == 1

        # The model follows the call the text prints, in this tool's own form.
        printed = re.findall(r"^  expand: memory_expand (\{.*\})$", said, re.MULTILINE)
        assert printed and "fabric-memory expand" not in said
        pi.prompt("CALL memory_expand " + printed[0])
        expanded = tool_end(pi, "memory_expand")
        assert expanded["isError"] is False, expanded
        page = expanded["result"]["details"]
        assert page["sessionId"] == answer["hits"][0]["sessionId"]
        assert expanded["result"]["content"][0]["text"] == render_expand(page, "pi")
        if page["sessionId"] == hits[0]["sessionId"]:
            assert any(CODEWORD in entry["text"] for entry in page["entries"]), page

        # The model cannot choose where to read, and errors carry their code.
        pi.prompt(f'CALL memory_recall {{"query": "{CODEWORD}", "sessions": "/"}}')
        refused = tool_end(pi, "memory_recall")
        assert refused["isError"] is True
        assert "sessions" in text_of(refused["result"])
        pi.prompt('CALL memory_expand {"session": "no-such-session", "entries": ["x"]}')
        missing = tool_end(pi, "memory_expand")
        assert missing["isError"] is True
        assert "session_not_found" in text_of(missing["result"]), missing


def test_the_tools_keep_to_pis_default_folders_and_to_the_users_choice(
    host: PiHost, place: dict[str, Path]
) -> None:
    """A session folder inside Pi's default sessions folder does not narrow what the tools
    read (another project's session expands), and a FABRIC_MEMORY_SESSIONS the user set is
    kept (a session outside it is not reachable)."""
    default = place["home"] / ".pi" / "agent" / "sessions"
    other = SessionBuilder(default / "--other-project--" / "other.jsonl", "other-project")
    other.user(f"the other project's codeword is {CODEWORD}")
    other.write()
    environment = pi_environment(place["home"], place["sessions"], PI_CODING_AGENT_SESSION_DIR="")
    subprocess.run([str(FABRIC_MEMORY), "reindex"], env=environment, check=True,
                   capture_output=True)
    follow = json.dumps({"session": "other-project", "indices": [0]})

    with PiRpc(host, [EXTENSION_ENTRY, SCRIPTED_PROVIDER], default / "--work--", environment,
               place["work"]) as pi:
        pi.prompt("CALL memory_expand " + follow)
        expanded = tool_end(pi, "memory_expand")
        assert expanded["isError"] is False, expanded
        assert CODEWORD in expanded["result"]["details"]["entries"][0]["text"]

    with start(host, place, FABRIC_MEMORY_SESSIONS=str(place["work"])) as pi:
        pi.prompt("CALL memory_expand " + follow)
        refused = tool_end(pi, "memory_expand")
        assert refused["isError"] is True
        assert "session_not_found" in text_of(refused["result"]), refused
        assert str(place["work"].resolve()) in text_of(refused["result"]), refused


def test_pi_install_loads_the_extension_without_dash_e(
    host: PiHost, place: dict[str, Path]
) -> None:
    """``fabric-memory pi install`` is all a user does: Pi then offers the tools (with their
    prompt lines) and runs them; ``--uninstall`` takes them away again."""
    agent = place["home"] / ".pi" / "agent"
    before = (agent / "settings.json").read_text()
    environment = pi_environment(place["home"], place["sessions"])
    installed = subprocess.run([str(FABRIC_MEMORY), "pi", "install"], env=environment,
                               capture_output=True, text=True, check=True)
    assert installed.stdout.startswith("added ")

    def recall_in_pi() -> Record:
        with PiRpc(host, [SCRIPTED_PROVIDER], place["sessions"], environment,
                   place["work"]) as pi:
            pi.prompt('CALL memory_recall {"query": "anything"}')
            prompt = next(r["message"] for r in pi.records if r.get("type") == "message_end"
                          and r["message"].get("role") == "system")
            return {"end": tool_end(pi, "memory_recall"), "system": json.dumps(prompt)}

    seen = recall_in_pi()
    assert "Search earlier sessions" in seen["system"]  # promptSnippet
    assert "Use memory_recall before redoing work" in seen["system"]  # promptGuidelines
    # No index yet: the answer is fabric-memory's own error, code first.
    assert text_of(seen["end"]["result"]).startswith("index_error: ")

    subprocess.run([str(FABRIC_MEMORY), "pi", "install", "--uninstall"], env=environment,
                   check=True, capture_output=True)
    assert json.loads((agent / "settings.json").read_text()) == json.loads(before)
    gone = recall_in_pi()
    assert gone["end"]["isError"] is True
    assert "memory_recall" not in gone["system"]


def test_compact_is_fabric_memorys_and_the_session_goes_on(
    host: PiHost, place: dict[str, Path]
) -> None:
    # The program found on PATH (FABRIC_MEMORY_BIN unset).
    with start(host, place) as pi:
        converse(pi, 4)
        state = pi.call({"type": "get_state"})["data"]
        response = pi.call({"type": "compact"})
        assert response["success"], response
        assert response["data"]["details"]["compactor"] == "fabric-memory"
        assert notices(pi) == []
        context = text_of(pi.prompt("CONTEXT"))
        assert text_of(pi.prompt("and then?")) == "echo: and then?"

    lines = session_lines(Path(state["sessionFile"]))
    compactions = [line for line in lines if line.get("type") == "compaction"]
    assert len(compactions) == 1
    compaction = compactions[0]
    assert compaction["details"]["compactor"] == "fabric-memory"
    assert compaction["details"]["sessionId"] == state["sessionId"]
    assert compaction["fromHook"] is True
    assert state["sessionId"] in compaction["summary"]
    # Pi rebuilt the model's context from this compaction: its summary, then the kept turns.
    assert compaction["summary"][:200].strip().splitlines()[0] in context
    ids = [line.get("id") for line in lines]
    assert ids.index(compaction["firstKeptEntryId"]) < lines.index(compaction)
    # After the compaction the session was re-indexed in the background (session_compact).
    wait_until(lambda: indexed(place, state["sessionFile"]), "the reindex after compaction")


def test_a_question_after_a_compaction_goes_with_memory(
    host: PiHost, place: dict[str, Path]
) -> None:
    """After a compaction, a question about what it dropped reaches the model with the
    prompt's context (a hidden custom message naming the dropped turn); "thanks, continue"
    adds none."""
    with start(host, place) as pi:
        pi.prompt(f"The deploy codeword is {CODEWORD}")
        converse(pi, 4)
        state = pi.call({"type": "get_state"})["data"]
        assert pi.call({"type": "compact"})["success"]
        wait_until(lambda: indexed(place, state["sessionFile"]), "the reindex after compaction")
        assert text_of(pi.prompt("thanks, continue")) == "echo: thanks, continue"
        assert text_of(pi.prompt("what was the deploy codeword?")).startswith("echo: ")
        context = text_of(pi.prompt("CONTEXT"))
    # (the scripted model echoes the last user-role message: here, our context)
    assert context.count("user: # fabric-memory: earlier context for this prompt") == 1, context
    assert context.index("user: what was the deploy codeword?") < context.index(
        "user: # fabric-memory: earlier context")
    given = [line for line in session_lines(Path(state["sessionFile"]))
             if line.get("customType") == "fabric-memory-context"]
    assert len(given) == 1 and given[0]["display"] is False
    assert f"The deploy codeword is {CODEWORD}" in given[0]["content"]


@pytest.mark.parametrize("failure", ["missing program", "hook past its time limit"])
def test_compact_falls_back_to_pis_own_when_the_hook_cannot_answer(
    host: PiHost, place: dict[str, Path], tmp_path: Path, failure: str
) -> None:
    if failure == "missing program":
        env = {"FABRIC_MEMORY_BIN": str(tmp_path / "no-such-fabric-memory")}
    else:
        slow = tmp_path / "slow-fabric-memory"
        pid_file = tmp_path / "slow.pid"
        # Hangs as the hook; as the background reindex it ends at once.
        slow.write_text(f'#!/bin/sh\n[ "$1" = hook ] || exit 0\necho $$ > {pid_file}\n'
                        "exec sleep 300\n")
        slow.chmod(0o755)
        env = {"FABRIC_MEMORY_BIN": str(slow), "FABRIC_MEMORY_HOOK_TIMEOUT": "2"}
    with start(host, place, **env) as pi:
        converse(pi, 4)
        state = pi.call({"type": "get_state"})["data"]
        response = pi.call({"type": "compact"})
        assert response["success"], response
        assert PI_SUMMARY in response["data"]["summary"]
        assert (response["data"].get("details") or {}).get("compactor") != "fabric-memory"
        told = notices(pi)
        assert len(told) == 1, told
        assert "Pi's own compaction" in told[0]
        assert ("not found" if failure == "missing program" else "within 2 s") in told[0]
        assert text_of(pi.prompt("still there?")) == "echo: still there?"
        # A second compaction that fails the same way is not announced again.
        converse(pi, 3)
        assert pi.call({"type": "compact"})["success"]
        assert len(notices(pi)) == 1
    compactions = [line for line in session_lines(Path(state["sessionFile"]))
                   if line.get("type") == "compaction"]
    assert len(compactions) == 2
    assert all(PI_SUMMARY in c["summary"] and not c.get("fromHook") for c in compactions)
    if failure != "missing program":  # the hung hook was killed, not left behind
        pid = int(pid_file.read_text())
        wait_until(lambda: dead(pid), "the hung hook's exit", deadline=10)


def test_pis_abort_signal_kills_the_hook(host: PiHost, tmp_path: Path) -> None:
    """Pi aborting a compaction (its signal) stops a running hook and Pi's own compaction
    path is left alone (nothing returned, nothing announced)."""
    slow, pid_file = tmp_path / "slow-fabric-memory", tmp_path / "slow.pid"
    slow.write_text(f"#!/bin/sh\necho $$ > {pid_file}.tmp && mv {pid_file}.tmp {pid_file}\n"
                    "exec sleep 300\n")
    slow.chmod(0o755)
    env = {**os.environ, "FABRIC_MEMORY_BIN": str(slow), "FABRIC_MEMORY_HOOK_TIMEOUT": "600"}
    done = subprocess.run([str(host.node), str(PI_DIR / "abort-check.mjs"),
                           str(EXTENSION_ENTRY), str(pid_file)],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome == {"result": None, "aborted": True, "notices": []}
    pid = int(pid_file.read_text())
    wait_until(lambda: dead(pid), "the aborted hook's exit", deadline=10)


def test_extension_type_checks_against_pis_declarations(host: PiHost) -> None:
    check = subprocess.run([str(host.node), str(TSC), "--noEmit", "-p", str(PI_DIR)],
                           capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout + check.stderr


def test_bench_runs_through_pis_runtime(host: PiHost) -> None:
    """``python -m bench.pi_extension --quick`` (a smoke run; the figures are in
    docs/performance.md)."""
    del host
    done = subprocess.run([sys.executable, "-m", "bench.pi_extension", "--quick", "--json"],
                          capture_output=True, text=True, cwd=PI_DIR.parent.parent, check=False)
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)
    assert row["entries"] > 0 and row["eventBytes"] > row["sessionBytes"] // 2
    assert min(row["extensionMs"], row["hookInProcessMs"], row["processStartMs"]) > 0


CODEX_ROLLOUT = (FIXTURES / "agents" / "codex"
                 / "rollout-2026-01-02T03-04-05-11111111-1111-4111-8111-111111111111.jsonl")


def test_memory_tools_take_plain_questions_summary_ranges_and_clamp(
    host: PiHost, place: dict[str, Path]
) -> None:
    """In the real Pi, memory_recall answers a plain question about a real session as the CLI
    does (ranked, matched "any"), and memory_expand takes a summary's range (text by default,
    raw lines on request) and a too-large maxChars (clamped, noted), and memory_recall's agent
    keeps one agent's sessions, each equal to the CLI's --json."""
    memory = place["home"] / "pi-mono"
    memory.mkdir()
    for path in sorted((FIXTURES / "pi-mono-real").glob("*.jsonl")):
        (memory / path.name).write_bytes(path.read_bytes())
    (memory / CODEX_ROLLOUT.name).write_bytes(CODEX_ROLLOUT.read_bytes())
    environment = pi_environment(place["home"], place["sessions"],
                                 FABRIC_MEMORY_SESSIONS=str(memory))
    subprocess.run([str(FABRIC_MEMORY), "reindex"], env=environment, check=True,
                   capture_output=True)

    def cli(*argv: str) -> Any:
        done = subprocess.run([str(FABRIC_MEMORY), *argv, "--json"], env=environment,
                              capture_output=True, check=True)
        return json.loads(done.stdout)

    question = "update refactor.md mark WP15 WP16 complete"
    session = str(memory / "compact.jsonl")
    summary_range = {"session": session, "range": "L12:L16", "maxChars": 100_000}
    with start(host, place, FABRIC_MEMORY_SESSIONS=str(memory)) as pi:
        pi.prompt("CALL memory_recall " + json.dumps({"query": question, "limit": 5}))
        recalled = tool_end(pi, "memory_recall")
        assert recalled["isError"] is False, recalled
        answer = recalled["result"]["details"]
        pi.prompt("CALL memory_expand " + json.dumps(summary_range))
        ranged = tool_end(pi, "memory_expand")["result"]
        text = ranged["details"]
        # A long entry of the range is cut; its text says the memory_expand call that reads on.
        rest, *_ = re.findall(r"the rest from character \d+: memory_expand (\{.*\})\]$",
                              ranged["content"][0]["text"], re.MULTILINE)
        pi.prompt("CALL memory_expand " + rest)
        read_on = tool_end(pi, "memory_expand")["result"]["details"]
        pi.prompt("CALL memory_expand " + json.dumps({**summary_range, "raw": True}))
        raw = tool_end(pi, "memory_expand")["result"]["details"]
        pi.prompt("CALL memory_recall " + json.dumps({"query": "synthetic files",
                                                      "agent": "codex"}))
        codex = tool_end(pi, "memory_recall")["result"]["details"]
    assert answer == cli("recall", question, "--limit", "5")
    assert codex == cli("recall", "synthetic files", "--agent", "codex")
    assert codex["hits"] and {h["agent"] for h in codex["hits"]} == {"codex"}
    assert answer["matched"] == "any"
    assert ("before-compaction.jsonl", "L487") in [
        (Path(h["path"]).name, h["address"]) for h in answer["hits"]]
    assert text == cli("expand", session, "--range", "L12:L16", "--max-chars", "100000")
    assert text["clamped"] == {"maxChars": [100_000, 24_000]}
    assert [e["address"] for e in text["entries"]] == ["L12", "L13", "L14", "L15", "L16"]
    assert text["entries"][1]["text"].startswith("L13 assistant ")
    cut = next(entry for entry in text["entries"] if "rest" in entry)
    assert json.loads(rest) == {k: v for k, v in cut["rest"].items() if k != "sessions"}
    whole = cli("expand", session, "--address", cut["address"])["entries"][0]["text"]
    assert cut["text"] + read_on["entries"][0]["text"] == whole
    assert raw == cli("expand", session, "--range", "L12:L16", "--max-chars", "100000", "--raw")
    lines = (FIXTURES / "pi-mono-real" / "compact.jsonl").read_bytes().split(b"\n")
    assert [e["text"].encode() for e in raw["entries"]] == lines[11:16]
