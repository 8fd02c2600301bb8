"""A real ``fabric-memory ui`` for the tests: a session store built with the shared builder,
indexed, and the server started as the user starts it (its own process, its own process
group, its URL read from the first line of its stdout), stopped with bounded waits."""

from __future__ import annotations

import contextlib
import http.client
import os
import random
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from .memory_builder import SessionBuilder, operation
from .secret_samples import anthropic_key
from .transcripts import ClaudeTranscript

BIN = Path(sys.executable).parent
START_SECONDS = 30.0
STOP_SECONDS = 10.0
RARE = "QUOKKA_ZEPHYR_7731"
"""A word written once, in an entry on the second page of the long session's timeline."""
FILLER = 230
"""Filler turns in the long session: more than one page of its timeline (200 entries)."""
SECRET = anthropic_key(random.Random(41))
USAGE = {"input": 1200, "output": 300, "cacheRead": 5000, "cacheWrite": 100,
         "totalTokens": 6600, "cost": {"total": 0.0123}}
CLAUDE_SESSION = "c1a0de00-0000-4000-8000-0000000000c1"
CLAUDE_WORD = "MARMOSET_SLOWPATH"
"""Said once, in the Claude Code session (whose entries are addressed by line: ``L2``)."""


@dataclass(slots=True)
class Store:
    sessions: Path
    index: Path
    long: SessionBuilder
    """Two pages long: a compaction whose summary names addresses, an edit, a failure,
    the rare word on page two."""
    rare_address: str
    failed_op: str
    """The address of a failed Fabric operation (on page one), named by the summary."""
    compaction: str
    secret: str
    """The address of the entry that holds :data:`SECRET`."""


def build_store(base: Path) -> Store:
    """The sessions and index the UI tests read."""
    from fabric_memory.memory.reindex import reindex

    sessions = base / "sessions"
    long = SessionBuilder(sessions / "--repo--" / "2026-01-02T10-00-00-000Z_long.jsonl")
    goal = long.user("Make the parser accept trailing commas; keep node 20.")
    long.assistant([{"type": "text", "text": "Looking at the parser first."}], usage=USAGE)
    long.assistant_call("call-edit", "edit", {"path": "src/parser.ts",
                                              "oldText": "const a = 1;\nreturn a;",
                                              "newText": "const a = 2;\nreturn a;"})
    long.tool_result("call-edit", "edit")
    long.assistant_call("call-f", "fabric_exec", {"code": "await pi.bash({command: 'npm t'})"})
    fabric = long.fabric_result("call-f", [operation(0, "pi.read", {"path": "a.ts"}),
                                           operation(1, "pi.bash", {"command": "npm test"},
                                                     outcome="failed")],
                                 outer="".join(f"test output line {n}\n" for n in range(12)))
    long.assistant_call("call-r", "read", {"path": "missing.ts"})
    long.tool_result("call-r", "read", is_error=True)
    secret = long.user(f"Use this key for the deploy: {SECRET.text}")
    for n in range(FILLER):
        long.user(f"filler question {n}") if n % 2 == 0 else long.assistant(
            [{"type": "text", "text": f"filler answer {n}\n" + "line\n" * (n % 9)}])
    rare = long.user(f"Remember {RARE} for the release notes.")
    failed_op = f"{fabric}/1"
    compaction = long.compaction(
        f"## Goal\n- [{goal}] make the parser accept trailing commas\n"
        f"## Outstanding errors\n- [{failed_op}] pi.bash `npm test` -> failed\n"
        f"## Facts\n- [{rare}] {RARE}\n", first_kept=rare)
    long.write(mtime=time.time() - 60)
    other = SessionBuilder(sessions / "--repo--" / "2026-01-01T10-00-00-000Z_short.jsonl")
    other.user("A short and old session about the docs.")
    other.write(mtime=time.time() - 3600)
    (sessions / "--claude--").mkdir()
    claude = ClaudeTranscript(session_id=CLAUDE_SESSION, cwd="/repo")
    claude.user(f"Find why {CLAUDE_WORD} is slow.")
    claude.tool("Edit", {"file_path": "src/slow.py", "old_string": "sleep(9)",
                         "new_string": "sleep(0)"}, "edited")
    claude.assistant("Removed the sleep.")
    written = claude.write(sessions / "--claude--" / f"{CLAUDE_SESSION}.jsonl")
    os.utime(written, (time.time() - 1800, time.time() - 1800))
    reindex(sessions=sessions, index=base / "index", workers=1)
    return Store(sessions, base / "index", long, rare, failed_op, compaction, secret)


@dataclass(slots=True)
class RunningUI:
    url: str
    """As printed: with the token."""
    base: str
    token: str
    process: subprocess.Popen[bytes]

    @property
    def cookie(self) -> str:
        return f"fabric_memory_ui_{urlsplit(self.base).port}={self.token}"

    def get(self, path: str, *, cookie: str | None = "", headers: dict[str, str] | None = None,
            method: str = "GET") -> tuple[int, dict[str, str], bytes]:
        """One raw request (``cookie`` "": the right one; None: no cookie)."""
        parts = urlsplit(self.base)
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
        sent = dict(headers or {})
        if cookie is not None:
            sent["Cookie"] = cookie or self.cookie
        try:
            connection.request(method, path, headers=sent)
            response = connection.getresponse()
            return response.status, dict(response.getheaders()), response.read()
        finally:
            connection.close()


@contextlib.contextmanager
def running_ui(store: Store, *extra: str, opening: dict[str, str] | None = None,
               ) -> Iterator[RunningUI]:
    """``fabric-memory ui --no-open`` over ``store`` until the block ends (``opening``: the
    environment it opens a browser in, without ``--no-open``)."""
    env = {**os.environ, "DISPLAY": "", "WAYLAND_DISPLAY": "", **(opening or {})}
    process = subprocess.Popen(
        [str(BIN / "fabric-memory"), "ui", *(() if opening else ("--no-open",)),
         "--sessions", str(store.sessions), "--index", str(store.index), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, env=env)
    try:
        url = _first_line(process)
        base, _, token = url.partition("/?token=")
        yield RunningUI(url, base, token, process)
    finally:
        stop(process)


def _first_line(process: subprocess.Popen[bytes]) -> str:
    assert process.stdout is not None
    deadline = time.monotonic() + START_SECONDS
    line = b""
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        ready, _, _ = select.select([process.stdout], [], [], max(left, 0))
        if not ready:
            raise AssertionError("fabric-memory ui printed no URL in time")
        chunk = os.read(process.stdout.fileno(), 1)
        if not chunk:
            err = process.stderr.read().decode() if process.stderr else ""
            raise AssertionError(f"fabric-memory ui exited before its URL: {err}")
        line += chunk
    return line.decode().strip()


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=STOP_SECONDS)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=STOP_SECONDS)
