"""forget, do-not-index and <private>: what a person takes out of memory stays out of every
index and every answer (docs/privacy.md), and ``forget --undo`` brings it back."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import orjson
import pytest
from mcp.client import Client

from fabric_memory.cli import main
from fabric_memory.memory.ignore import IGNORE_ENV, MARKER
from fabric_memory.memory.live import watch_sessions
from fabric_memory.memory.reindex import reindex
from fabric_memory.memory.tombstones import FILE

from .cluster_host import loopback_cluster
from .memory_builder import SessionBuilder
from .test_serve import connected, error_text
from .ui_host import running_ui

RARE = "quetzalvortex"
"""A word only the session to forget says."""
LATER = "zimbrafloxite"
"""A word the agent appends to that session after it was forgotten."""
PRIVATE = "plumbagoriddle"
DEADLINE = 60.0


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    """``fabric-memory ARGV --json`` in this process: its exit status and JSON answer."""
    status = main([*argv, "--json"])
    out = capsys.readouterr().out
    return status, orjson.loads(out) if out.strip() else None


def session_in(path: Path, cwd: str, *said: str) -> SessionBuilder:
    """A Pi session that worked in ``cwd`` and whose user said ``said``, written."""
    builder = SessionBuilder(path)
    header = orjson.loads(builder.lines[0])
    builder.lines[0] = orjson.dumps({**header, "cwd": cwd})
    for text in said:
        builder.user(text)
    builder.write()
    return builder


@pytest.fixture
def places(tmp_path: Path) -> dict[str, Any]:
    sessions = tmp_path / "sessions"
    secret = session_in(sessions / "--client--" / "secret.jsonl", "/work/client",
                        f"the {RARE} launch plan for the client")
    kept = session_in(sessions / "--ours--" / "kept.jsonl", "/work/ours",
                      "the parser keeps quoting rules")
    index = tmp_path / "index"
    reindex(sessions=sessions, index=index, workers=1)
    where = ["--sessions", str(sessions), "--index", str(index)]
    return {"sessions": sessions, "index": index, "secret": secret, "kept": kept,
            "where": where}


def found(capsys: pytest.CaptureFixture[str], where: list[str], word: str) -> int:
    status, answer = cli(capsys, "recall", word, *where)
    assert status == 0
    return int(answer["total"])


def listed(capsys: pytest.CaptureFixture[str], where: list[str]) -> set[str]:
    return {s["path"] for s in cli(capsys, "sessions", *where)[1]["sessions"]}


def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The session files reindex parses in this process from now on."""
    import fabric_memory.memory.reindex as module

    read: list[str] = []
    original = module.read_source

    def recorded(path: str, *rest: Any) -> Any:
        read.append(path)
        return original(path, *rest)

    monkeypatch.setattr(module, "read_source", recorded)
    return read


def test_a_forgotten_session_stays_out_until_undone(
        places: dict[str, Any], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """After forget, recall, sessions and expand act as if the session never was, through
    reindex --full and an append by the agent (its file is not even read again); the store
    holds no word of it; undo brings it back with what was appended."""
    where, secret = places["where"], places["secret"]
    read = reads(monkeypatch)
    assert found(capsys, where, RARE) == 1
    status, dry = cli(capsys, "forget", secret.session_id, "--dry-run", *where)
    assert status == 0 and dry["dryRun"] and len(dry["sessions"]) == 1
    assert found(capsys, where, RARE) == 1, "a dry run changed nothing"
    status, done = cli(capsys, "forget", secret.session_id, *where)
    assert status == 0 and [s["path"] for s in done["sessions"]] == [str(secret.path)]
    assert done["next"].startswith(f"fabric-memory forget --undo {secret.session_id}")
    assert found(capsys, where, RARE) == 0
    assert str(secret.path) not in listed(capsys, where)
    status, answer = cli(capsys, "expand", secret.session_id, "--range", "e001:e001", *where)
    assert status == 18 and answer["error"]["code"] == "session_forgotten"
    assert f"fabric-memory forget --undo {secret.session_id}" in answer["error"]["message"]

    assert cli(capsys, "reindex", "--full", "--workers", "1", *where)[0] == 0
    secret.append(f"and then the {LATER} rollout")
    report = cli(capsys, "reindex", *where)[1]
    assert str(places["kept"].path) in read and str(secret.path) not in read
    assert str(secret.path) in {item["path"] for item in report["excluded"]}
    assert found(capsys, where, RARE) == 0 and found(capsys, where, LATER) == 0
    store = (places["index"] / FILE).read_bytes()
    assert secret.session_id.encode() in store
    for word in (RARE, LATER, "launch", "rollout", "/work/client"):
        assert word.encode() not in store, word

    status, back = cli(capsys, "forget", "--undo", secret.session_id, *where)
    assert status == 0 and back["indexed"] == 1
    assert found(capsys, where, RARE) == 1 and found(capsys, where, LATER) == 1
    assert cli(capsys, "forget", "--list", *where)[1]["sessions"] == []


def test_a_forgotten_session_copied_elsewhere_stays_forgotten(
        places: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    """The tombstone holds the session's id too: a copy of the file under another name is
    kept out after it is read, and the hot tier does not bring the original back."""
    where, secret = places["where"], places["secret"]
    cli(capsys, "forget", str(secret.path), *where)
    copy = places["sessions"] / "--elsewhere--" / "copy.jsonl"
    copy.parent.mkdir()
    copy.write_bytes(secret.path.read_bytes())
    report = cli(capsys, "reindex", *where)[1]
    assert str(copy) in {item["path"] for item in report["excluded"]}
    secret.append(f"the {LATER} step")
    assert found(capsys, where, RARE) == 0 and found(capsys, where, LATER) == 0


def test_a_session_not_indexed_yet_can_be_forgotten(
        places: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    """A session written after the last reindex is forgotten by its path (through a
    symlinked folder too): the next reindex never takes it in."""
    fresh = session_in(places["sessions"] / "--new--" / "fresh.jsonl", "/work/new",
                       f"the {RARE} draft")
    link = places["sessions"].parent / "link"
    link.symlink_to(fresh.path.parent)
    status, done = cli(capsys, "forget", str(link / "fresh.jsonl"), *places["where"])
    assert status == 0 and [s["path"] for s in done["sessions"]] == [str(fresh.path)]
    report = cli(capsys, "reindex", *places["where"])[1]
    assert str(fresh.path) in {item["path"] for item in report["excluded"]}
    assert found(capsys, places["where"], "draft") == 0


def test_forget_by_project_and_by_agent_and_time(
        places: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    """--project takes the sessions that worked in a folder; --agent with --until those of
    one agent last changed by then; undo with the same options brings them back."""
    where = places["where"]
    status, done = cli(capsys, "forget", "--project", "/work/client", *where)
    assert [s["path"] for s in done["sessions"]] == [str(places["secret"].path)]
    assert listed(capsys, where) == {str(places["kept"].path)}
    assert cli(capsys, "forget", "--undo", "--project", "/work/client", *where)[0] == 0
    assert len(listed(capsys, where)) == 2
    os.utime(places["kept"].path, (1_600_000_000, 1_600_000_000))
    cli(capsys, "reindex", *where)
    status, done = cli(capsys, "forget", "--agent", "pi", "--until", "2021-01-01T00:00:00Z",
                       *where)
    assert [s["path"] for s in done["sessions"]] == [str(places["kept"].path)]
    assert listed(capsys, where) == {str(places["secret"].path)}
    status, answer = cli(capsys, "forget", *where)
    assert status == 2 and "forget needs sessions" in answer["error"]["message"]


def test_a_sharded_build_leaves_the_forgotten_session_out(
        places: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Forgetting masks the session's shard at once; a later sharded build (incremental and
    --full) leaves its file out of every shard, appended or not."""
    sharded = tmp_path / "sharded"
    where = ["--sessions", str(places["sessions"]), "--index", str(sharded)]
    reindex(sessions=places["sessions"], index=sharded, sharded=True, shard_bytes=1, workers=1)
    assert found(capsys, where, RARE) == 1
    cli(capsys, "forget", places["secret"].session_id, *where)
    assert found(capsys, where, RARE) == 0
    places["secret"].append(f"the {LATER} step")
    for full in (False, True):
        reindex(sessions=places["sessions"], index=sharded, sharded=True, shard_bytes=1,
                workers=1, full=full)
        assert found(capsys, where, RARE) == 0 and found(capsys, where, LATER) == 0
    shards = b"".join(p.read_bytes() for p in (sharded / "shards").rglob("*") if p.is_file())
    assert RARE.encode() not in shards and LATER.encode() not in shards
    cli(capsys, "forget", "--undo", places["secret"].session_id, *where)
    assert found(capsys, where, LATER) == 1


def test_a_dask_cluster_build_leaves_it_out(
        places: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """On a real Dask cluster (scheduler and worker processes), a --full build leaves the
    forgotten file out, and a copy of it under a new name is refused by the worker's task
    (by the session id in the tombstone it reads from the index folder)."""
    sharded = tmp_path / "sharded"
    where = ["--sessions", str(places["sessions"]), "--index", str(sharded)]
    with loopback_cluster(tmp_path / "dask", workers=1) as cluster:
        reindex(sessions=places["sessions"], index=sharded, cluster=cluster.address)
        cli(capsys, "forget", places["secret"].session_id, *where)
        places["secret"].append(f"the {LATER} step")
        copy = places["sessions"] / "--elsewhere--" / "copy.jsonl"
        copy.parent.mkdir()
        copy.write_bytes(places["secret"].path.read_bytes())
        report = reindex(sessions=places["sessions"], index=sharded, cluster=cluster.address,
                         full=True)
    assert {str(places["secret"].path), str(copy)} <= {i["path"] for i in report["excluded"]}
    assert found(capsys, where, RARE) == 0 and found(capsys, where, LATER) == 0
    assert found(capsys, where, "quoting") == 1


def wait_for(check: Any) -> None:
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError("the live index never caught up")


@pytest.fixture
def live(places: dict[str, Any]) -> Iterator[None]:
    stop = threading.Event()
    thread = threading.Thread(target=watch_sessions, kwargs={
        "sessions": places["sessions"], "index": places["index"], "stop": stop})
    thread.start()
    yield
    stop.set()
    thread.join(timeout=DEADLINE)


def test_the_live_index_does_not_bring_it_back(
        places: dict[str, Any], live: None, capsys: pytest.CaptureFixture[str]) -> None:
    """With the live index running (past its catch-up pass), an append to the forgotten
    file is not indexed (a file written after it is: the watcher did run)."""
    where = places["where"]
    session_in(places["sessions"] / "--ours--" / "first.jsonl", "/work/ours", "tulipgantry")
    wait_for(lambda: found(capsys, where, "tulipgantry") == 1)
    cli(capsys, "forget", places["secret"].session_id, *where)
    places["secret"].append(f"the {LATER} step")
    session_in(places["sessions"] / "--ours--" / "after.jsonl", "/work/ours", "marigoldfence")
    wait_for(lambda: found(capsys, where, "marigoldfence") == 1)
    assert found(capsys, where, LATER) == 0 and found(capsys, where, RARE) == 0


def test_a_running_server_and_the_pi_tools_forget_too(
        places: dict[str, Any], tmp_path: Path) -> None:
    """The MCP server (official client, live index on) stops finding the session once it
    is forgotten, says so on expand, and does not take the agent's append back; the Pi
    tools answer the same."""
    secret = places["secret"]

    def run(*argv: str, stdin: bytes = b"", env: dict[str, str] | None = None) -> Any:
        done = subprocess.run([sys.executable, "-m", "fabric_memory.cli", *argv], input=stdin,
                              capture_output=True, check=False, env={**os.environ, **(env or {})})
        return orjson.loads(done.stdout)

    async def hits(client: Client, query: str) -> int:
        result = await client.call_tool("recall", {"query": query})
        return int(result.structured_content["total"])

    async def body() -> None:
        async with connected(places) as client:
            assert await hits(client, RARE) == 1
            run("forget", secret.session_id, *places["where"], "--json")
            assert await hits(client, RARE) == 0
            listing = (await client.call_tool("sessions", {})).structured_content
            assert str(secret.path) not in {s["path"] for s in listing["sessions"]}
            refused = await client.call_tool("expand", {"session": secret.session_id,
                                                        "range": "e001:e001"})
            assert error_text(refused).startswith("session_forgotten")
            secret.append(f"the {LATER} step")
            session_in(places["sessions"] / "--ours--" / "after.jsonl", "/work/ours",
                       "marigoldfence")
            deadline = time.monotonic() + DEADLINE
            while await hits(client, "marigoldfence") == 0:
                assert time.monotonic() < deadline, "the live index never caught up"
                await anyio.sleep(0.1)
            assert await hits(client, LATER) == 0

    anyio.run(body)
    home = tmp_path / "home"
    home.mkdir()
    (home / "index").symlink_to(places["index"])
    env = {"FABRIC_MEMORY_HOME": str(home), "FABRIC_MEMORY_SESSIONS": str(places["sessions"])}
    answer = run("pi", "tool", "memory_recall", stdin=orjson.dumps({"query": LATER}), env=env)
    assert answer["details"]["total"] == 0
    answer = run("pi", "tool", "memory_recall", stdin=orjson.dumps({"query": "quoting"}),
                 env=env)
    assert answer["details"]["total"] == 1


def test_the_web_view_forgets_too(places: dict[str, Any],
                                  capsys: pytest.CaptureFixture[str]) -> None:
    """A running ``fabric-memory ui`` stops listing and finding the session once it is
    forgotten, does not show its page, and its live index does not take the append back."""
    secret = places["secret"]
    with running_ui(SimpleNamespace(**places)) as ui:  # type: ignore[arg-type]
        def search(word: str) -> Any:
            status, _, body = ui.get(f"/search.json?q={word}")
            assert status == 200
            return orjson.loads(body)

        def paths() -> set[str]:
            return {s["path"] for s in orjson.loads(ui.get("/sessions.json")[2])["sessions"]}

        assert search(RARE)["total"] == 1 and str(secret.path) in paths()
        cli(capsys, "forget", secret.session_id, *places["where"])
        assert search(RARE)["total"] == 0 and str(secret.path) not in paths()
        assert secret.session_id not in ui.get(f"/search?q={RARE}")[2].decode()
        assert ui.get(f"/session/{secret.session_id}")[0] == 404
        secret.append(f"the {LATER} step")
        session_in(places["sessions"] / "--ours--" / "after.jsonl", "/work/ours",
                   "marigoldfence")
        wait_for(lambda: search("marigoldfence")["total"] == 1)
        assert search(LATER)["total"] == 0 and str(secret.path) not in paths()


# --- do-not-index ------------------------------------------------------------------------


def test_a_session_in_an_ignored_folder_is_never_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A .fabric-memory-ignore in a project keeps its sessions (and its subfolders') out:
    never parsed, never recallable; one written after indexing takes them out on the next
    reindex; a pattern narrows it to matching subfolders; the setting lists more."""
    client, ours, other = tmp_path / "client", tmp_path / "ours", tmp_path / "other"
    for folder in (client / "app", ours / "vendor" / "x", ours / "src", other):
        folder.mkdir(parents=True)
    (client / MARKER).write_text("# a client's project: nothing of it in memory\n")
    sessions = tmp_path / "sessions"
    hidden = session_in(sessions / "a" / "s.jsonl", str(client / "app"), f"the {RARE} plan")
    session_in(sessions / "b" / "s.jsonl", str(ours / "vendor" / "x"), "vendorword")
    session_in(sessions / "c" / "s.jsonl", str(ours / "src"), "ourword")
    session_in(sessions / "d" / "s.jsonl", str(other), "otherword")
    where = ["--sessions", str(sessions), "--index", str(tmp_path / "index")]
    read = reads(monkeypatch)
    report = cli(capsys, "reindex", "--workers", "1", *where)[1]
    assert str(hidden.path) not in read
    assert str(hidden.path) in {item["path"] for item in report["excluded"]}
    assert found(capsys, where, RARE) == 0 and found(capsys, where, "vendorword") == 1
    (ours / MARKER).write_text("vendor\n")
    monkeypatch.setenv(IGNORE_ENV, str(other))
    report = cli(capsys, "reindex", "--workers", "1", *where)[1]
    assert {Path(item["path"]).parent.name for item in report["removed"]} == {"b", "d"}
    assert found(capsys, where, "vendorword") == 0 and found(capsys, where, "otherword") == 0
    assert found(capsys, where, "ourword") == 1


def test_a_private_span_is_never_recallable_nor_shown(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Text between <private> and </private> (or to the end, unclosed) is masked in the
    index, in expand (readable and raw) and in the compaction summary."""
    sessions = tmp_path / "sessions"
    builder = session_in(sessions / "p" / "s.jsonl", "/work/p",
                         f"deploy it; <private>the door code is {PRIVATE}</private> thanks",
                         f"and <PRIVATE>{PRIVATE}2 unclosed")
    where = ["--sessions", str(sessions), "--index", str(tmp_path / "index")]
    cli(capsys, "reindex", *where)
    assert found(capsys, where, PRIVATE) == 0 and found(capsys, where, f"{PRIVATE}2") == 0
    assert found(capsys, where, "deploy") == 1
    for extra in ([], ["--raw"]):
        status, page = cli(capsys, "expand", builder.session_id, "--range", "e001:e002",
                           *extra, *where)
        shown = orjson.dumps(page).decode()
        assert status == 0 and PRIVATE not in shown and "[REDACTED:private]" in shown
    assert main(["compact", str(builder.path)]) in (0, 1)
    assert PRIVATE not in capsys.readouterr().out


def test_a_private_span_stays_out_of_the_handoff_packet(tmp_path: Path) -> None:
    """Claude Code's packet after its compaction quotes the user's words, masked."""
    from fabric_memory.handoff import run_handoff

    from .transcripts import ClaudeTranscript

    t = ClaudeTranscript()
    t.user("Fix the cent rounding.")
    t.compact("The session is being continued.")
    t.user(f"Now ship it; <private>the vault pin is {PRIVATE}</private>, and commit.")
    t.tool("Bash", {"command": "git commit -am 'Ship'"}, "[main 7c1d2e3] Ship")
    path = t.write(tmp_path / f"{t.session_id}.jsonl")
    event = orjson.dumps({"session_id": t.session_id, "transcript_path": str(path),
                          "cwd": "/work/p", "hook_event_name": "SessionStart",
                          "source": "compact"})
    output = run_handoff(event, log=tmp_path / "handoff.log").output
    assert output is not None and "Now ship it" in output
    assert PRIVATE not in output and "[REDACTED:private]" in output
