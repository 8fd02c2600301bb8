"""The agent's door: what an agent pays per memory call, through ``fabric-memory serve``
(the official MCP client over stdio, the server a separate process) and through one CLI
process per call, on 1,040 sessions with 45 planted rare facts.

- :func:`mcp_session`: ``recall`` over MCP, next to the same ``recall`` in-process (and
  :func:`echo_round_trips`, the SDK's own round trip for a tool that does nothing);
  then from a session file's write to its first MCP recall hit, and the server's CPU
  while idle;
- :func:`cli_processes`: a ``fabric-memory recall`` process, next to the interpreter
  importing Tantivy, orjson and xxhash and doing nothing else.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import orjson

from fabric_memory.memory.recall import recall
from fabric_memory.memory.reindex import reindex

from . import data

FACTS = 45
"""Rare facts, one per planted session (the reference was timed on 45 such queries)."""
FLOOR_CODE = "import tantivy, orjson, xxhash"


@dataclass(frozen=True, slots=True)
class Agent:
    """A scratch copy (hard-linked sessions, copied index) the server may change."""

    sessions: Path
    index: Path
    facts: tuple[str, ...]


def fact(number: int) -> str:
    return f"AGENTFACT{number:03d}Q{(number * 7919) % 9973:04x}"


def _session_line(value: dict[str, Any]) -> bytes:
    return orjson.dumps(value) + b"\n"


def write_fact_session(path: Path, text: str, session_id: str) -> None:
    """A small Pi v3 session whose one user message holds ``text``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    header = {"type": "session", "version": 3, "id": session_id,
              "timestamp": "2026-02-01T10:00:00.000Z", "cwd": "/work/facts"}
    entry = {"type": "message", "id": "f0000001", "parentId": None,
             "timestamp": "2026-02-01T10:00:01.000Z",
             "message": {"role": "user", "content": f"remember this: {text}", "timestamp": 0}}
    path.write_bytes(_session_line(header) + _session_line(entry))


def agent_sessions(root: Path, total: int) -> tuple[Path, tuple[str, ...]]:
    """``total`` sessions: the generated corpus of ``total - 45`` plus 45 rare-fact sessions
    (cached like every bench corpus)."""
    small = data.corpus(root, total - FACTS)
    target = root / f"agent-{total}-{data.generator_key()}"

    def build(where: Path) -> None:
        tree = where / "sessions"
        shutil.copytree(small, tree / "corpus", copy_function=os.link)
        for n in range(FACTS):
            write_fact_session(tree / "--facts--" / f"fact-{n:03d}.jsonl", fact(n),
                               f"00000000-0000-4000-8000-{n:012d}")

    built = data._built(target, build)
    return built / "sessions", tuple(fact(n) for n in range(FACTS))


def scratch_agent(root: Path, scratch: Path, total: int) -> Agent:
    """The cached corpus, hard-linked where the server may add and drop files, indexed."""
    sessions, facts = agent_sessions(root, total)
    target = scratch / "agent"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(sessions, target / "sessions", copy_function=os.link)
    reindex(sessions=target / "sessions", index=target / "index")
    return Agent(target / "sessions", target / "index", facts)


# --- MCP ------------------------------------------------------------------------------


@dataclass(slots=True)
class McpRun:
    round_trips: list[float] = field(default_factory=list)
    in_process: list[float] = field(default_factory=list)
    own_top_hit: int = 0
    freshness: list[float] = field(default_factory=list)
    idle_cpu_seconds: float = 0.0
    idle_seconds: float = 0.0


def _server_pid() -> int | None:
    """The ``fabric-memory serve`` child of this process (the SDK client started it)."""
    me = str(os.getpid())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        parent = stat.rsplit(")", 1)[1].split()[1]
        if parent == me and b"serve" in cmdline:
            return int(entry.name)
    return None


def cpu_seconds(pid: int) -> float:
    """CPU time of every thread of ``pid`` so far, to the nanosecond (``schedstat``; the
    tick counts of ``stat`` are 10 ms coarse)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            total += int((task / "schedstat").read_text().split()[0])
    return total / 1e9


def mcp_session(agent: Agent, queries: int, fresh_samples: int, idle_seconds: float,
                log: Callable[[str], None]) -> McpRun:
    """One server: timed recalls (beside in-process ones), freshness samples, idle CPU."""
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    run = McpRun()
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "fabric_memory.cli", "serve", "--sessions", str(agent.sessions),
              "--index", str(agent.index)], env=env)

    async def session() -> None:
        async with Client(params) as client:
            for n in range(5):  # warm up: first calls load what the server lazily opens
                await client.call_tool("recall", {"query": agent.facts[n % FACTS]})
            for n in range(queries):
                text = agent.facts[n % FACTS]
                started = time.perf_counter()
                result = await client.call_tool("recall", {"query": text})
                run.round_trips.append(time.perf_counter() - started)
                started = time.perf_counter()
                recall(text, index=agent.index, sessions=agent.sessions)
                run.in_process.append(time.perf_counter() - started)
                hits = (result.structured_content or {}).get("hits", [])
                run.own_top_hit += bool(hits) and text in hits[0]["snippet"]
            log(f"agent: {queries} MCP recalls timed; freshness ...")
            for n in range(fresh_samples):
                run.freshness.append(await _fresh(client, agent, n))
            pid = _server_pid()
            if pid is not None:
                await anyio.sleep(2.0)  # let the last step's work finish
                before = cpu_seconds(pid)
                started = time.perf_counter()
                await anyio.sleep(idle_seconds)
                run.idle_seconds = time.perf_counter() - started
                run.idle_cpu_seconds = cpu_seconds(pid) - before

    anyio.run(session)
    return run


def echo_round_trips(calls: int) -> list[float]:
    """Round trips of the SDK's own floor (:mod:`bench.echo_server`): same client, same
    server class and transport, a tool that does nothing."""
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    params = StdioServerParameters(command=sys.executable, args=["-m", "bench.echo_server"],
                                   env=env, cwd=str(Path(__file__).resolve().parents[1]))
    times: list[float] = []

    async def session() -> None:
        async with Client(params) as client:
            for n in range(calls + 5):
                started = time.perf_counter()
                await client.call_tool("echo", {"query": str(n)})
                if n >= 5:
                    times.append(time.perf_counter() - started)

    anyio.run(session)
    return times


async def _fresh(client: Any, agent: Agent, n: int) -> float:
    """Seconds from writing a new session file to the first recall that finds it."""
    text = f"FRESHFACT{n:03d}Z{os.getpid():x}"
    path = agent.sessions / "--fresh--" / f"fresh-{n:03d}.jsonl"
    started = time.perf_counter()
    write_fact_session(path, text, f"00000000-0000-4000-9000-{n:012d}")
    while True:
        result = await client.call_tool("recall", {"query": text})
        if (result.structured_content or {}).get("total"):
            return time.perf_counter() - started
        if time.perf_counter() - started > 60:
            return float("inf")
        await anyio.sleep(0.02)


# --- CLI processes --------------------------------------------------------------------


def _command() -> list[str]:
    script = Path(sys.executable).parent / "fabric-memory"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "fabric_memory.cli"]


def cli_processes(agent: Agent, repeats: int) -> tuple[list[float], list[float]]:
    """Wall seconds of ``fabric-memory recall FACT --json`` processes and of the floor,
    alternating; bytecode may be cached (as after any ``pip install``)."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    ours_command = [*_command(), "recall", "--sessions", str(agent.sessions), "--index",
                    str(agent.index), "--json"]
    floor_command = [sys.executable, "-c", FLOOR_CODE]

    def timed(command: list[str]) -> float:
        started = time.perf_counter()
        subprocess.run(command, env=env, stdout=subprocess.DEVNULL, check=True)
        return time.perf_counter() - started

    timed([*ours_command, agent.facts[0]])  # writes the bytecode caches
    timed(floor_command)
    ours, floor = [], []
    for n in range(repeats):
        ours.append(timed([*ours_command, agent.facts[n % FACTS]]))
        floor.append(timed(floor_command))
    return ours, floor
