"""``python -m bench.soak [--seconds N] [--json]``: the engine under churn, nothing lost.

For ``--seconds`` (600 by hand; the suite runs 45, ``tests/test_soak.py``), in a private
home and sessions root:

- two ``fabric-memory serve`` processes, each keeping its index live, each with an MCP
  client (the official ``mcp`` client) calling ``recall`` then ``expand`` on the first hit;
- three CLI readers: ``fabric-memory recall`` in a loop;
- an appender process writing user messages to a session and rotating to a new session
  file every :data:`ROTATE_LINES` lines (each session's first line holds its marker);
- ``fabric-memory reindex --full`` in a loop;
- once a minute (at second 15) ``kill -9`` of the running ``reindex --full`` writer, and
  (at second 35) of the appender, which is started again; at seconds 25 and 50 the sessions
  root is moved away and back a second later (the watchers wait for it and catch up).

At the end the churn stops, one ``reindex`` catches up, and every session file on disk
must be listed and its marker recalled (``sessionsLost`` counts those that are not).
The report: requests answered, reader latency (p50/p99/max) and the longest stall, the
writer's runs and kills, errors by code, crashes, and each server's RSS and open file
descriptors over time. Exit status 1 when a session is lost, a command crashes or hangs
(no answer within :data:`STALL_LIMIT` s), a server dies, or its memory or descriptors
grow without bound.
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from bench.agent import cpu_seconds
from bench.hang import stacks

REPO = Path(__file__).resolve().parents[1]
STALL_LIMIT = 60.0
"""A request without an answer this long is a hang: its stacks are taken and it is killed."""
ROTATE_LINES = 50
APPEND_SECONDS = 0.1
SAMPLE_SECONDS = 2.0
READERS = 3
SERVERS = 2
QUERIES = ("soak marker", "rotating session line", "SOAKLINE", "compaction summary")
FD_SLACK = 32
"""Open descriptors a server may gain between the first and the last third of the run."""
RSS_GROWTH = 1.5
"""Largest ratio of a server's anonymous RSS (its heap: mapped index files come and go
with merges) in the last third of the run to its first third."""
RSS_SLACK_KIB = 64 * 1024


# --- the appender (a child process, killed with SIGKILL once a minute) ----------------------


def append_forever(root: Path) -> None:
    """Append user messages to the newest soak session under ``root`` for ever, rotating to
    a new file every :data:`ROTATE_LINES` lines; resume where a killed appender stopped."""
    folder = root / "--soak--"
    while True:
        try:
            folder.mkdir(exist_ok=True)  # never the root: it may be away for a moment
            files = sorted(folder.glob("*.jsonl"))
            path, lines = (files[-1], _count_lines(files[-1])) if files else (None, 0)
            if path is None or lines >= ROTATE_LINES:
                path = _new_session(folder, len(files))
                lines = 1
            with open(path, "ab") as stream:
                if not _ends_with_newline(path):
                    stream.write(b"\n")  # a killed appender's half line stays half
                entry = {"type": "message", "id": uuid.uuid4().hex[:8], "parentId": None,
                         "timestamp": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
                         "message": {"role": "user", "timestamp": int(time.time() * 1000),
                                     "content": f"rotating session line SOAKLINE {lines}"}}
                stream.write(orjson.dumps(entry) + b"\n")
        except OSError:  # the root is away for a moment
            pass
        time.sleep(APPEND_SECONDS)


def _new_session(folder: Path, number: int) -> Path:
    session_id = str(uuid.uuid4())
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H-%M-%S-%fZ")
    path = folder / f"{stamp}_{number:05d}_{session_id}.jsonl"
    header = {"type": "session", "version": 3, "id": session_id,
              "timestamp": datetime.now(UTC).isoformat().replace("+00:00", "Z"), "cwd": "/soak"}
    first = {"type": "message", "id": "first", "parentId": None, "timestamp": header["timestamp"],
             "message": {"role": "user", "timestamp": int(time.time() * 1000),
                         "content": f"soak marker {marker(number)} opens this session"}}
    path.write_bytes(orjson.dumps(header) + b"\n" + orjson.dumps(first) + b"\n")
    return path


def marker(number: int) -> str:
    """The word only session ``number``'s first line holds."""
    return f"soaksession{number:05d}"


def _count_lines(path: Path) -> int:
    return path.read_bytes().count(b"\n")


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as stream:
        stream.seek(0, os.SEEK_END)
        if stream.tell() == 0:
            return True
        stream.seek(-1, os.SEEK_END)
        return stream.read(1) == b"\n"


# --- the run ---------------------------------------------------------------------------------


@dataclass(slots=True)
class Tally:
    """What the actors measured (threads append; lists and Counter updates are atomic)."""

    latencies: dict[str, list[float]] = field(default_factory=dict)
    errors: Counter[str] = field(default_factory=Counter)
    crashes: list[str] = field(default_factory=list)
    hangs: list[dict[str, Any]] = field(default_factory=list)
    events: Counter[str] = field(default_factory=Counter)

    def took(self, kind: str, seconds: float) -> None:
        self.latencies.setdefault(kind, []).append(seconds)


@dataclass(slots=True)
class Soak:
    seconds: float
    home: Path
    root: Path
    tally: Tally = field(default_factory=Tally)
    stop: threading.Event = field(default_factory=threading.Event)
    writer: subprocess.Popen[bytes] | None = None
    appender: subprocess.Popen[bytes] | None = None
    root_lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "FABRIC_MEMORY_HOME": str(self.home),
                "FABRIC_MEMORY_SESSIONS": str(self.root), "PYTHONUNBUFFERED": "1"}

    def command(self, kind: str, *args: str) -> tuple[int, bytes] | None:
        """Run ``fabric-memory args --json`` (bounded); record its time and any error or
        crash; None when it hung (and was killed) or was killed by the soak."""
        started = time.monotonic()
        process = subprocess.Popen([sys.executable, "-m", "fabric_memory.cli", *args, "--json"],
                                   env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   start_new_session=True)
        if kind == "reindex":
            self.writer = process
        try:
            out, err = process.communicate(timeout=STALL_LIMIT)
        except subprocess.TimeoutExpired:
            self.tally.hangs.append({"command": " ".join(args), "stacks": stacks(process.pid)})
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            self.tally.errors["hang"] += 1
            return None
        finally:
            self.writer = None if kind == "reindex" else self.writer
        self.tally.took(kind, time.monotonic() - started)
        if process.returncode == -signal.SIGKILL:
            return None
        if process.returncode != 0:
            self._failed(kind, out, err)
        return process.returncode, out

    def _failed(self, kind: str, out: bytes, err: bytes) -> None:
        text = err.decode(errors="replace")
        if "Traceback" in text or "panicked" in text:
            self.tally.crashes.append(f"{kind}: {text.strip().splitlines()[-1][:200]}")
            self.tally.errors["crash"] += 1
            return
        try:
            self.tally.errors[f"{kind}:{orjson.loads(out)['error']['code']}"] += 1
        except (orjson.JSONDecodeError, KeyError, TypeError):
            self.tally.errors[f"{kind}:{text.strip()[:80]}"] += 1

    # actors ----------------------------------------------------------------------------

    def reindex_loop(self) -> None:
        while not self.stop.is_set():
            done = self.command("reindex", "reindex", "--full")
            self.tally.events["reindex runs" if done else "reindex killed or hung"] += 1

    def reader_loop(self, n: int) -> None:
        while not self.stop.is_set():
            self.command("cli", "recall", QUERIES[n % len(QUERIES)], "--limit", "5")
            n += 1

    def appender_loop(self) -> None:
        while not self.stop.is_set():
            self.appender = subprocess.Popen(
                [sys.executable, "-m", "bench.soak", "--append", str(self.root)], cwd=REPO,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            while self.appender.poll() is None and not self.stop.is_set():
                time.sleep(0.1)
        if self.appender is not None and self.appender.poll() is None:
            self.appender.kill()
            self.appender.wait()

    def chaos(self) -> None:
        """Each minute: kill -9 the writer at second 15 and the appender at 35; move the root
        away and back at 25 and 50."""
        started = time.monotonic()
        done: set[tuple[int, int]] = set()
        while not self.stop.is_set():
            elapsed = time.monotonic() - started
            minute, second = divmod(int(elapsed), 60)
            for at, act in ((15, self._kill_writer), (25, self._move_root),
                            (35, self._kill_appender), (50, self._move_root)):
                if second >= at and (minute, at) not in done and act():
                    done.add((minute, at))
            self.stop.wait(0.2)

    def _kill_writer(self) -> bool:
        writer = self.writer
        if writer is None or writer.poll() is not None:
            return False  # between two runs: try again in a moment
        os.killpg(writer.pid, signal.SIGKILL)  # and its parser workers
        self.tally.events["writer kill -9"] += 1
        return True

    def _kill_appender(self) -> bool:
        appender = self.appender
        if appender is None or appender.poll() is not None:
            return False
        appender.kill()
        self.tally.events["appender kill -9"] += 1
        return True

    def _move_root(self) -> bool:
        away = self.root.with_name(self.root.name + ".away")
        with self.root_lock:
            os.rename(self.root, away)
            time.sleep(1.0)
            os.rename(away, self.root)
        self.tally.events["root moved away and back"] += 1
        return True


# --- the servers and their MCP clients ------------------------------------------------------


class Server:
    """One ``fabric-memory serve`` (live index) and the official MCP client calling it in a
    loop on its own event loop; a sampler records the server's RSS and open descriptors."""

    def __init__(self, env: dict[str, str], tally: Tally, stop: threading.Event, n: int,
                 folder: Path) -> None:
        self.env, self.tally, self.stop, self.n = env, tally, stop, n
        self.pidfile = folder / f"serve-{n}.pid"
        self.stderr = folder / f"serve-{n}.pid.err"
        self.samples: list[tuple[float, int, int, int]] = []
        """(seconds, RSS KiB, anonymous RSS KiB: the heap, without mapped index files, fds)"""
        self.connections = 0
        self.alive_at_end = False
        self._closed = threading.Event()

    def client_loop(self) -> None:
        import anyio

        threading.Thread(target=self._sample, daemon=True).start()
        while not self.stop.is_set():
            self.connections += 1
            try:
                anyio.run(self._session)
            except Exception as exc:  # the connection failed: counted, and connect again
                self.tally.errors[f"mcp:{type(exc).__name__}: {str(exc)[:80]}"] += 1
        self._closed.set()

    async def _session(self) -> None:
        import anyio
        from mcp.client import Client
        from mcp.client.stdio import StdioServerParameters

        params = StdioServerParameters(
            command="sh", args=["-c", 'echo $$ > "$0"; exec "$@" 2>>"$0.err"', str(self.pidfile),
                                sys.executable, "-m", "fabric_memory.cli", "serve"],
            env=self.env, cwd=str(REPO))
        async with Client(params) as client:
            n = self.n
            while not self.stop.is_set():
                n += 1
                with anyio.fail_after(STALL_LIMIT):
                    hits = await self._call(client, "recall", {
                        "query": QUERIES[n % len(QUERIES)], "limit": 5})
                    if hits:
                        await self._call(client, "expand", {**hits[0]["follow"], "maxEntries": 3})
            self.alive_at_end = self._alive()

    async def _call(self, client: Any, tool: str, arguments: dict[str, Any]) -> list[Any]:
        started = time.monotonic()
        result = await client.call_tool(tool, arguments)
        self.tally.took(f"mcp.{tool}", time.monotonic() - started)
        text = getattr(result.content[0], "text", "") if result.content else ""
        if result.is_error:
            self.tally.errors[f"mcp.{tool}:{text.split(':', 1)[0][:60]}"] += 1
            return []
        hits: list[Any] = (result.structured_content or {}).get("hits", [])
        return hits

    def _pid(self) -> int | None:
        try:
            return int(self.pidfile.read_text().strip())
        except (OSError, ValueError):
            return None

    def _alive(self) -> bool:
        pid = self._pid()
        return pid is not None and Path(f"/proc/{pid}").exists()

    def _sample(self) -> None:
        sample_process(self._pid, self.stop, self.samples)

    def close(self) -> dict[str, Any]:
        """Wait for the client loop to close its server; what was seen of the server."""
        self._closed.wait(STALL_LIMIT)
        errors = self.stderr.read_text(errors="replace") if self.stderr.exists() else ""
        return {
            "n": self.n,
            "connections": self.connections,
            # up to the end on its first connection: it never died and was never replaced
            "alive": self.alive_at_end and self.connections == 1,
            **seen_of(self.samples, errors),
        }


def sample_process(pid_of: Callable[[], int | None], stop: threading.Event,
                   samples: list[tuple[float, int, int, int]]) -> None:
    """Every :data:`SAMPLE_SECONDS` until ``stop``: the process's RSS, anonymous RSS and open
    descriptors, into ``samples``."""
    started = time.monotonic()
    while not stop.is_set():
        pid = pid_of()
        try:
            status = dict(line.split(":", 1) for line in
                          Path(f"/proc/{pid}/status").read_text().splitlines())
            rss, anon = (int(status[name].split()[0]) for name in ("VmRSS", "RssAnon"))
            fds = len(os.listdir(f"/proc/{pid}/fd"))
            samples.append((round(time.monotonic() - started, 1), rss, anon, fds))
        except (OSError, KeyError, ValueError):
            pass
        stop.wait(SAMPLE_SECONDS)


def seen_of(samples: list[tuple[float, int, int, int]], errors: str) -> dict[str, Any]:
    """What the samples and the stderr of a server say: its memory and descriptors over the
    run (first and last third), its last line and its tracebacks."""
    third = max(len(samples) // 3, 1)
    first, last = samples[:third], samples[-third:]
    return {
        "stderrTail": errors.strip().splitlines()[-1][:200] if errors.strip() else "",
        "tracebacks": errors.count("Traceback"),
        "samples": [list(sample) for sample in samples],
        "sampleFields": ["seconds", "rssKiB", "anonKiB", "fds"],
        "rssMaxKiB": max((sample[1] for sample in samples), default=None),
        "anonMaxKiB": max((sample[2] for sample in samples), default=None),
        "anonFirstThirdMaxKiB": max((sample[2] for sample in first), default=None),
        "anonLastThirdMaxKiB": max((sample[2] for sample in last), default=None),
        "fdsMax": max((sample[3] for sample in samples), default=None),
        "fdsFirstThirdMax": max((sample[3] for sample in first), default=None),
        "fdsLastThirdMax": max((sample[3] for sample in last), default=None),
    }


# --- the web view and its client --------------------------------------------------------------

UI_PAGES = ("/", "/search?q={query}", "/session/{session}", "/stats.json")
UI_KINDS = dict(zip(UI_PAGES, ("ui.list", "ui.search", "ui.session", "ui.stats"), strict=True))
IDLE_SECONDS = 5.0
"""How long the web view's CPU is measured once the churn has stopped, a page's event
stream still open."""
IDLE_CPU_SHARE = 0.02
"""Most of one core the web view may use while idle."""


class UIServer:
    """One ``fabric-memory ui`` (its own live index), a client reading its pages in a loop
    and an open event stream (a list page left open); a sampler records its RSS and
    descriptors, and at the end its CPU while idle is measured."""

    def __init__(self, env: dict[str, str], tally: Tally, stop: threading.Event,
                 folder: Path) -> None:
        self.env, self.tally, self.stop = env, tally, stop
        self.stderr = folder / "ui.err"
        self.samples: list[tuple[float, int, int, int]] = []
        self.events = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.base = self.cookie = ""

    def start(self) -> None:
        with open(self.stderr, "wb") as err:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "fabric_memory.cli", "ui", "--no-open"], env=self.env,
                stdout=subprocess.PIPE, stderr=err, start_new_session=True, cwd=str(REPO))
        assert self.process.stdout is not None
        url = self.process.stdout.readline().decode().strip()
        self.base, _, token = url.partition("/?token=")
        self.cookie = f"fabric_memory_ui_{self.base.rsplit(':', 1)[1]}={token}"
        threading.Thread(target=sample_process, daemon=True,
                         args=(lambda: self.process.pid if self.process else None, self.stop,
                               self.samples)).start()
        threading.Thread(target=self._listen, daemon=True).start()

    def _get(self, path: str) -> tuple[int, bytes]:
        import http.client

        host, port = self.base.removeprefix("http://").rsplit(":", 1)
        connection = http.client.HTTPConnection(host, int(port), timeout=STALL_LIMIT)
        try:
            connection.request("GET", path, headers={"Cookie": self.cookie})
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()

    def client_loop(self) -> None:
        from urllib.parse import quote

        n = 0
        while not self.stop.is_set():
            n += 1
            session = ""
            for page in UI_PAGES:
                if "{session}" in page and not session:
                    continue
                path = page.format(query=quote(QUERIES[n % len(QUERIES)]), session=session)
                kind = UI_KINDS[page]
                started = time.monotonic()
                try:
                    status, _ = self._get(path)
                except OSError as exc:
                    self.tally.errors[f"{kind}:{type(exc).__name__}"] += 1
                    continue
                self.tally.took(kind, time.monotonic() - started)
                if status != 200:
                    self.tally.errors[f"{kind}:{status}"] += 1
                elif page == "/":
                    listed = orjson.loads(self._get("/sessions.json")[1])["sessions"]
                    session = quote(listed[0]["handle"]) if listed else ""

    def _listen(self) -> None:
        """A list page left open: its event stream, counting the ``changed`` events."""
        import http.client

        host, port = self.base.removeprefix("http://").rsplit(":", 1)
        connection = http.client.HTTPConnection(host, int(port), timeout=None)
        try:
            connection.request("GET", "/events", headers={"Cookie": self.cookie})
            response = connection.getresponse()
            while not self.stop.is_set() or self.idle_open:
                line = response.readline()
                if not line:
                    return
                self.events += line.startswith(b"event: changed")
        except OSError:
            self.tally.errors["ui.events:disconnected"] += 1
        finally:
            connection.close()

    idle_open = True

    def idle_cpu(self, seconds: float) -> float | None:
        """The server's CPU time over ``seconds`` of quiet, as a share of one core."""
        if self.process is None or self.process.poll() is not None:
            return None
        before = cpu_seconds(self.process.pid)
        time.sleep(seconds)
        return round((cpu_seconds(self.process.pid) - before) / seconds, 4)

    def close(self, idle: float | None) -> dict[str, Any]:
        alive = self.process is not None and self.process.poll() is None
        self.idle_open = False
        if self.process is not None and alive:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=STALL_LIMIT)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        errors = self.stderr.read_text(errors="replace") if self.stderr.exists() else ""
        return {"alive": alive, "idleCpuShare": idle, "idleSeconds": IDLE_SECONDS,
                "changedEvents": self.events,
                "stoppedBySigterm": self.process is not None and self.process.returncode == 0,
                **seen_of(self.samples, errors)}



def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(int(q * len(ordered)), len(ordered) - 1)], 3)


def run(seconds: float) -> dict[str, Any]:
    """Run the soak for ``seconds``; the report (see the module docstring)."""
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="fabric-memory-soak-") as tmp:
        soak = Soak(seconds, Path(tmp) / "home", Path(tmp) / "sessions")
        seed = soak.root / "--seed--"
        seed.mkdir(parents=True)
        for fixture in sorted((REPO / "fixtures" / "pi-mono-real").glob("*.jsonl"))[:2]:
            shutil.copy(fixture, seed / fixture.name)
        subprocess.run([sys.executable, "-m", "fabric_memory.cli", "reindex"], env=soak.env,
                       capture_output=True, check=True, timeout=300)
        servers = [Server(soak.env, soak.tally, soak.stop, n, Path(tmp))
                   for n in range(SERVERS)]
        actors: list[Callable[[], None]] = [soak.reindex_loop, soak.appender_loop, soak.chaos]
        actors += [functools.partial(soak.reader_loop, n) for n in range(READERS)]
        actors += [server.client_loop for server in servers]
        ui = UIServer(soak.env, soak.tally, soak.stop, Path(tmp))
        ui.start()
        actors.append(ui.client_loop)
        threads = [threading.Thread(target=actor, daemon=True) for actor in actors]
        for thread in threads:
            thread.start()
        soak.stop.wait(seconds)
        soak.stop.set()
        for thread in threads:
            thread.join(timeout=STALL_LIMIT + 30)
        hung_actors = sum(thread.is_alive() for thread in threads)
        with soak.root_lock:
            pass  # the root is in place
        lost, checked = _lost_sessions(soak)
        serving = [server.close() for server in servers]
        web = ui.close(ui.idle_cpu(IDLE_SECONDS))
    report: dict[str, Any] = {
        "seconds": seconds,
        "started": started_at,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version(),
                    "loadBefore": [round(x, 2) for x in load_before],
                    "loadAfter": [round(x, 2) for x in os.getloadavg()]},
        **_latency(soak.tally),
        "events": dict(soak.tally.events),
        "errors": dict(soak.tally.errors),
        "crashes": soak.tally.crashes[:20],
        "hangs": soak.tally.hangs,
        "hungActors": hung_actors,
        "sessionsOnDisk": checked,
        "sessionsLost": lost,
        "servers": serving,
        "ui": web,
    }
    report["problems"] = _problems(report)
    return report


def _latency(tally: Tally) -> dict[str, Any]:
    readers = [t for kind in ("cli", "mcp.recall", "mcp.expand", "ui.list", "ui.search",
                              "ui.session")
               for t in tally.latencies.get(kind, [])]
    writer = tally.latencies.get("reindex", [])
    return {
        "requests": len(readers),
        "byKind": {kind: len(values) for kind, values in sorted(tally.latencies.items())},
        "latency": {"p50": _percentile(readers, 0.5), "p99": _percentile(readers, 0.99),
                    "max": _percentile(readers, 1.0)},
        "latencyByKind": {kind: {"p50": _percentile(v, 0.5), "p99": _percentile(v, 0.99),
                                 "max": _percentile(v, 1.0)}
                          for kind, v in sorted(tally.latencies.items())},
        "longestStall": _percentile(readers, 1.0),
        "reindexRuns": len(writer),
    }


def _lost_sessions(soak: Soak) -> tuple[list[str], int]:
    """Catch up once, then every session on disk must be listed and its marker recalled."""
    from fabric_memory.memory.catalog import list_sessions
    from fabric_memory.memory.recall import recall

    subprocess.run([sys.executable, "-m", "fabric_memory.cli", "reindex"], env=soak.env,
                   capture_output=True, check=False, timeout=300)
    index = soak.home / "index"
    listed = {item["path"] for item in list_sessions(index=index, sessions=soak.root,
                                                      limit=None)["sessions"]}
    files = sorted(soak.root.rglob("*.jsonl"))
    lost = []
    for path in files:
        real = str(path.resolve())
        if real not in listed:
            lost.append(f"{path.name}: not listed")
            continue
        number = path.name.split("_")[1] if path.parent.name == "--soak--" else None
        if number is not None:
            found = recall(marker(int(number)), index=index, sessions=soak.root)
            if not any(hit["path"] == real for hit in found["hits"]):
                lost.append(f"{path.name}: its marker is not recalled")
    return lost, len(files)


def _problems(report: dict[str, Any]) -> list[str]:
    problems = []
    if report["sessionsLost"]:
        problems.append(f"{len(report['sessionsLost'])} sessions lost")
    if report["crashes"]:
        problems.append(f"{len(report['crashes'])} crashes")
    if report["hangs"] or report["hungActors"]:
        problems.append(f"{len(report['hangs'])} hangs, {report['hungActors']} actors stuck")
    ui = report["ui"]
    if not ui["alive"] or not ui["stoppedBySigterm"]:
        problems.append(f"the web view died or did not stop on SIGTERM: {ui['stderrTail']}")
    if ui["idleCpuShare"] is not None and ui["idleCpuShare"] > IDLE_CPU_SHARE:
        problems.append(f"the web view used {ui['idleCpuShare']:.1%} of a core while idle")
    for kind, count in report["errors"].items():
        # 404 and 503: a session moved away with its root, or being rewritten (as MCP's
        # session_not_found and source_unavailable); anything else is the web view's fault.
        if kind.startswith("ui.") and not kind.endswith((":404", ":503")):
            problems.append(f"the web view answered {kind} {count} times")
    for server in [*report["servers"], {**ui, "n": "ui", "alive": True}]:
        name = f"server {server['n']}"
        if not server["alive"]:
            problems.append(f"{name} died or was replaced: {server['stderrTail']}")
        if server["tracebacks"]:
            problems.append(f"{name} printed {server['tracebacks']} tracebacks")
        first, last = server["fdsFirstThirdMax"], server["fdsLastThirdMax"]
        if first is not None and last is not None and last > first + FD_SLACK:
            problems.append(f"{name} descriptors grew from {first} to {last}")
        first, last = server["anonFirstThirdMaxKiB"], server["anonLastThirdMaxKiB"]
        if first is not None and last is not None and last > first * RSS_GROWTH + RSS_SLACK_KIB:
            problems.append(f"{name} anonymous RSS grew from {first} KiB to {last} KiB")
    return problems


def render(report: dict[str, Any]) -> str:
    latency = report["latency"]
    lines = [
        f"soak of {report['seconds']:g} s started {report['started']} on "
        f"{report['machine']['cpus']} CPUs (load {report['machine']['loadBefore']} before, "
        f"{report['machine']['loadAfter']} after)",
        f"requests answered: {report['requests']} {report['byKind']}",
        f"reader latency: p50 {latency['p50']} s, p99 {latency['p99']} s, max {latency['max']} s;"
        f" longest stall {report['longestStall']} s",
        "by kind: " + ", ".join(f"{kind} p50 {v['p50']} p99 {v['p99']} max {v['max']}"
                                for kind, v in report["latencyByKind"].items()),
        f"events: {report['events']}",
        f"errors by code: {report['errors'] or 'none'}",
        f"sessions on disk {report['sessionsOnDisk']}, lost {len(report['sessionsLost'])}",
    ]
    for server in report["servers"]:
        lines.append(
            f"server {server['n']}: anonymous RSS {server['anonFirstThirdMaxKiB']} -> "
            f"{server['anonLastThirdMaxKiB']} KiB (first to last third; RSS with mapped index "
            f"files max {server['rssMaxKiB']} KiB), fds "
            f"{server['fdsFirstThirdMax']} -> {server['fdsLastThirdMax']} (max "
            f"{server['fdsMax']}), alive to the end: {server['alive']}")
    ui = report["ui"]
    lines.append(
        f"web view: anonymous RSS {ui['anonFirstThirdMaxKiB']} -> {ui['anonLastThirdMaxKiB']} "
        f"KiB (RSS max {ui['rssMaxKiB']} KiB), fds max {ui['fdsMax']}, CPU while idle "
        f"{ui['idleCpuShare']} of a core over {ui['idleSeconds']:g} s, "
        f"{ui['changedEvents']} live events, stopped by SIGTERM: {ui['stoppedBySigterm']}")
    lines.append("problems: " + ("; ".join(report["problems"]) or "none"))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__)
    parser.add_argument("--seconds", type=float, default=600.0)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--append", metavar="ROOT", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.append:
        append_forever(Path(args.append))
        return 0
    report = run(args.seconds)
    print(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode() if args.json
          else render(report))
    return 1 if report["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
