"""Shared helpers for the fault and concurrency tests: subprocesses with hard time limits,
an index consistency check, and the expected text of every address of a file."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import xxhash

from fabric_memory.errors import SessionError
from fabric_memory.memory.catalog import load_catalog, stats
from fabric_memory.memory.index import open_index
from fabric_memory.memory.normalize import record_text, source_records
from fabric_memory.session import read_session

from .conftest import REPO

PROCESS_SECONDS = 60.0
"""No subprocess of these tests may outlive this (a hang is a failure, not a stuck CI)."""


def python(script: str, *args: str, **kwargs: Any) -> subprocess.Popen[bytes]:
    """Start ``python -c script args...`` in the repository with pipes."""
    return subprocess.Popen([sys.executable, "-c", script, *args], cwd=REPO,
                            **{"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **kwargs})


def cli(*args: str, **kwargs: Any) -> subprocess.Popen[bytes]:
    """Start ``fabric-memory args...`` (as ``python -m fabric_memory.cli``)."""
    return subprocess.Popen([sys.executable, "-m", "fabric_memory.cli", *args], cwd=REPO,
                            **{"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **kwargs})


AS_NOBODY = """
import logging, os, platform, sys  # what watchfiles imports lazily, while still root
import watchfiles
from fabric_memory.cli import build_parser, main
import fabric_memory.memory.live, fabric_memory.memory.reindex, fabric_memory.memory.render
import fabric_memory.pi.install
build_parser()  # argparse's messages load gettext lazily: from the stdlib, as root
os.setgid(65534)
os.setuid(65534)
sys.exit(main(sys.argv[1:]))
"""
"""``python -c AS_NOBODY ARGS...`` runs ``fabric-memory ARGS...`` as the user nobody: root
may read and write anything, so permission faults are tried as nobody."""


def readable_to_nobody(path: Path) -> None:
    """Let nobody reach ``path`` (search and read on each parent folder)."""
    for parent in [path, *path.parents]:
        parent.chmod(parent.stat().st_mode | 0o005)


@contextlib.contextmanager
def watching(*args: str, as_nobody: bool = False,
             **kwargs: Any) -> Iterator[tuple[subprocess.Popen[bytes], Any]]:
    """Run ``fabric-memory reindex --watch --json args...`` (``as_nobody``: as the user
    nobody); yield it with its catch-up step. Leaving the block sends SIGTERM and requires
    exit 0; a process still running after a failure (or past the bound) is killed."""
    command = ("reindex", "--watch", "--json", *args)
    process = python(AS_NOBODY, *command, **kwargs) if as_nobody else cli(*command, **kwargs)
    try:
        assert process.stdout is not None
        yield process, orjson.loads(process.stdout.readline())
        process.send_signal(signal.SIGTERM)
        status = process.wait(timeout=PROCESS_SECONDS)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert status == 0, process.stderr.read().decode() if process.stderr else ""


def until(condition: Callable[[], bool], failure: str) -> None:
    """Poll ``condition`` every 0.1 s; fail with ``failure`` if it is not met in time."""
    deadline = time.monotonic() + PROCESS_SECONDS
    while not condition():
        assert time.monotonic() < deadline, failure
        time.sleep(0.1)


def finish(proc: subprocess.Popen[bytes]) -> tuple[int, bytes, bytes]:
    """Wait (bounded) for ``proc``; kill it and fail if it hangs."""
    try:
        out, err = proc.communicate(timeout=PROCESS_SECONDS)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError(f"subprocess {proc.args!r} hung past {PROCESS_SECONDS}s") from None
    return proc.returncode, out, err


def assert_consistent(index: Path) -> dict[str, Any]:
    """The committed index opens, answers, and every catalog record has exactly its entry and
    operation documents (nothing torn, nothing duplicated). Returns its stats."""
    handle = open_index(index)
    for record in load_catalog(handle).records:
        assert handle.count("entry", record.path) == record.entries, record.path
        assert handle.count("operation", record.path) == record.operations, record.path
        assert handle.count("session", record.path) == 1, record.path
    report: dict[str, Any] = dict(stats(index=index))
    return report


def file_hash(path: Path, size: int | None = None) -> str:
    """xxh3-128 of the file's bytes (only its first ``size`` bytes when given)."""
    data = path.read_bytes()
    return xxhash.xxh3_128_hexdigest(data if size is None else data[:size])


@dataclass(frozen=True, slots=True)
class Expected:
    """What a fresh read of a file says each address and entry index must expand to."""

    source_hash: str | None
    entries: int
    addresses: dict[str, str]
    by_index: dict[int, str]

    def agrees(self, item: Mapping[str, Any]) -> bool:
        """Whether one expanded item is exactly this file's text for its address."""
        # An entry is known by its position: with duplicate ids, its address names the
        # first occurrence only.
        if item["kind"] == "entry":
            expected = self.by_index.get(item["index"])
        else:
            expected = self.addresses.get(item["address"])
        start = item["textOffset"]
        return expected is not None and expected[start : start + len(item["text"])] == item[
            "text"]


def expected_texts(path: Path) -> Expected:
    """Entry lines (verbatim) and operation/phase records of the file as it is now."""
    try:
        session = read_session(path)
        data = path.read_bytes()
    except (SessionError, OSError):
        return Expected(None, 0, {}, {})
    addresses: dict[str, str] = {}
    by_index: dict[int, str] = {}
    for position, entry in enumerate(session.entries):
        text = data[entry.offset : entry.offset + entry.length].decode("utf-8", errors="replace")
        by_index[position] = text
        addresses.setdefault(entry.id, text)
        for address, record in source_records(entry.id, entry.raw).items():
            addresses.setdefault(address, record_text(record))
    # Objects salvaged from glued lines come after the entries; each expands to its line.
    salvaged = [glued for glued in session.glued for _ in glued.objects]
    for position, glued in enumerate(salvaged, start=len(session.entries)):
        by_index[position] = data[glued.offset : glued.offset + glued.length].decode(
            "utf-8", errors="replace")
    return Expected(session.source_hash, len(by_index), addresses, by_index)


def environment(**extra: str) -> dict[str, str]:
    return {**os.environ, **extra}


def append_user(path: Path, text: str) -> bytes:
    """Append one user message after the file's leaf, as Pi would (one ``O_APPEND`` write).
    Returns the line written."""
    session = read_session(path)
    entry_id = xxhash.xxh3_64_hexdigest(f"{session.source_hash}:{text}".encode())[:8]
    line = orjson.dumps({
        "type": "message", "id": entry_id, "parentId": session.leaf_id,
        "timestamp": "2026-03-02T00:00:00.000Z",
        "message": {"role": "user", "content": text, "timestamp": 1772409600000},
    }) + b"\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
    return line


def report(config: Any, line: str) -> None:
    """Print one summary line in the pytest run (the figures docs/reliability.md quotes), past
    output capturing (module teardown runs inside the next test's captured setup)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if reporter is None:
        return
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        reporter.write_line(line)
