"""A real Dask cluster on loopback for the tests: a scheduler and worker processes started
with Dask's own commands, each in its own process group, torn down with bounded waits."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson

BIN = Path(sys.executable).parent
START_SECONDS = 60.0
STOP_SECONDS = 10.0


@dataclass(slots=True)
class LoopbackCluster:
    address: str
    scheduler: subprocess.Popen[bytes]
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def kill_worker(self, number: int) -> None:
        """SIGKILL one worker (no nanny: the process is the worker), as a crash would."""
        _signal(self.workers[number], signal.SIGKILL)
        self.workers[number].wait(timeout=STOP_SECONDS)


def _signal(process: subprocess.Popen[bytes], number: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, number)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    _signal(process, signal.SIGTERM)
    try:
        process.wait(timeout=STOP_SECONDS)
    except subprocess.TimeoutExpired:
        _signal(process, signal.SIGKILL)
        process.wait(timeout=STOP_SECONDS)


def _start(*args: str, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen([str(BIN / "dask"), *args], stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)


@contextlib.contextmanager
def loopback_cluster(folder: Path, workers: int = 2) -> Iterator[LoopbackCluster]:
    """``dask scheduler`` on 127.0.0.1 (a free port) and ``workers`` ``dask worker``
    processes of one thread each, ready when this yields; everything stopped on exit."""
    from distributed import Client

    folder.mkdir(parents=True, exist_ok=True)
    info = folder / "scheduler.json"
    scheduler = _start("scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                       "--scheduler-file", str(info), log=folder / "scheduler.log")
    cluster = LoopbackCluster("", scheduler)
    try:
        deadline = time.monotonic() + START_SECONDS
        while not info.is_file() or not info.read_bytes().strip():
            if time.monotonic() > deadline or scheduler.poll() is not None:
                raise RuntimeError(f"the scheduler did not start: "
                                   f"{(folder / 'scheduler.log').read_text()[-2000:]}")
            time.sleep(0.1)
        cluster.address = orjson.loads(info.read_bytes())["address"]
        for number in range(workers):
            cluster.workers.append(_start(
                "worker", cluster.address, "--nthreads", "1", "--no-nanny", "--no-dashboard",
                "--name", f"w{number}", "--death-timeout", "30",
                log=folder / f"worker-{number}.log"))
        with Client(cluster.address, timeout=START_SECONDS) as client:
            client.wait_for_workers(workers, timeout=START_SECONDS)
        yield cluster
    finally:
        for process in [*cluster.workers, scheduler]:
            _stop(process)
