"""The real Pi 1.6.0 (pinned in tests/pi, installed there by ``npm ci``) driven over its RPC
mode, for the tests that prove the extension against the host itself.

:func:`pi_host` finds Node 22 and Pi's CLI, or skips the test with the command that
installs them; under ``CI=true`` a missing Pi fails the test instead, so CI cannot pass
without running them. :class:`PiRpc` is a small JSONL client (Pi's
pi-coding-agent/docs/rpc.md): records split on LF only, commands correlated by id, every
record kept for the test to inspect.
"""

from __future__ import annotations

import itertools
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest

PI_DIR = Path(__file__).resolve().parent / "pi"
NODE = PI_DIR / "node_modules" / ".bin" / "node"
PI_CLI = PI_DIR / "node_modules" / "@earendil-works" / "pi-coding-agent" / "dist" / "cli.js"
TSC = PI_DIR / "node_modules" / "typescript" / "bin" / "tsc"
SCRIPTED_PROVIDER = PI_DIR / "scripted-provider.ts"
MODEL = "scripted/scripted-1"
FABRIC_MEMORY = Path(sys.executable).parent / "fabric-memory"

Record = dict[str, Any]


@dataclass(frozen=True, slots=True)
class PiHost:
    node: Path
    cli: Path


def pi_host() -> PiHost:
    """The installed host, or a skip (a failure under ``CI=true``) saying how to install it."""
    if NODE.exists() and PI_CLI.exists() and TSC.exists():
        return PiHost(NODE, PI_CLI)
    message = (f"Pi 1.6.0 is not installed in {PI_DIR}: run `npm ci --no-audit --no-fund` "
               "there (README's test command does)")
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(message)
    pytest.skip(message)


def pi_environment(home: Path, sessions: Path, **extra: str) -> dict[str, str]:
    """A private HOME, no network activity, Pi's sessions in ``sessions``; ``extra`` on top
    (an empty value removes the variable)."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("PI_", "FABRIC_MEMORY_"))}
    env.update(HOME=str(home), PI_OFFLINE="1", PI_SKIP_VERSION_CHECK="1", PI_TELEMETRY="0",
               PI_CODING_AGENT_SESSION_DIR=str(sessions))
    env["PATH"] = f"{FABRIC_MEMORY.parent}{os.pathsep}{env.get('PATH', '')}"
    for key, value in extra.items():
        if value:
            env[key] = value
        else:
            env.pop(key, None)
    return env


class PiRpc:
    """One ``pi --mode rpc`` process; use as a context manager (closing stdin ends Pi)."""

    def __init__(self, host: PiHost, extensions: Sequence[Path], sessions: Path,
                 env: Mapping[str, str], cwd: Path, *extra: str) -> None:
        args = [str(host.node), str(host.cli), "--mode", "rpc", "--model", MODEL,
                "--session-dir", str(sessions)]
        for extension in extensions:
            args += ["-e", str(extension)]
        self.stderr_path = cwd / f"pi-stderr-{time.monotonic_ns()}.txt"
        self._stderr = self.stderr_path.open("wb")
        self.process = subprocess.Popen([*args, *extra], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=self._stderr,
                                        env=dict(env), cwd=cwd)
        self.records: list[Record] = []
        self._incoming: queue.Queue[Record | None] = queue.Queue()
        self._ids = itertools.count(1)
        assert self.process.stdout is not None
        self._reader = threading.Thread(target=self._read, args=(self.process.stdout,),
                                        daemon=True)
        self._reader.start()

    def _read(self, stream: IO[bytes]) -> None:
        for line in stream:  # binary lines: split on LF only (pi-coding-agent/docs/rpc.md, Framing)
            try:
                self._incoming.put(json.loads(line))
            except ValueError:
                continue
        self._incoming.put(None)

    def send(self, command: Record) -> str:
        ident = f"t{next(self._ids)}"
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({**command, "id": ident}).encode() + b"\n")
        self.process.stdin.flush()
        return ident

    def wait_for(self, wanted: Callable[[Record], bool], what: str,
                 deadline: float = 120.0) -> Record:
        """The first record (seen since the last wait) that ``wanted`` accepts; a readable
        failure when Pi exits or the deadline passes first."""
        end = time.monotonic() + deadline
        while True:
            left = end - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {what} within {deadline} s; Pi said: {self.tail()}")
            try:
                record = self._incoming.get(timeout=left)
            except queue.Empty:
                continue
            if record is None:
                raise AssertionError(f"Pi exited before {what}; Pi said: {self.tail()}")
            self.records.append(record)
            if wanted(record):
                return record

    def call(self, command: Record, deadline: float = 120.0) -> Record:
        """Send ``command`` and return its response (``success`` checked by the caller)."""
        ident = self.send(command)
        return self.wait_for(lambda r: r.get("type") == "response" and r.get("id") == ident,
                             f"response to {command['type']}", deadline)

    def prompt(self, message: str) -> Record:
        """Run one prompt to the end; the last assistant message of the run."""
        response = self.call({"type": "prompt", "message": message})
        assert response["success"], response
        settled = self.wait_for(lambda r: r.get("type") == "agent_settled", "agent_settled")
        assert not settled.get("aborted"), settled
        ends = [r for r in self.records if r.get("type") == "message_end"
                and r["message"].get("role") == "assistant"]
        return ends[-1]["message"]  # type: ignore[no-any-return]

    def tail(self) -> str:
        self._stderr.flush()
        return self.stderr_path.read_text(errors="replace")[-2000:]

    def close(self, deadline: float = 60.0) -> int:
        assert self.process.stdin is not None
        if not self.process.stdin.closed:
            self.process.stdin.close()
        try:
            status = self.process.wait(deadline)
        except subprocess.TimeoutExpired:
            self.process.kill()
            status = self.process.wait()
        self._reader.join(10)
        while (record := self._drain()) is not None:
            self.records.append(record)
        self._stderr.close()
        return status

    def _drain(self) -> Record | None:
        try:
            return self._incoming.get_nowait()
        except queue.Empty:
            return None

    def __enter__(self) -> PiRpc:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def text_of(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or () if part.get("type") == "text")


def session_lines(path: Path) -> list[Record]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
