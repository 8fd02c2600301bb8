"""``python -m bench.hang [--seconds N] [--json]``: the concurrent-use loop of issue 28.

One loop of ``fabric-memory reindex --full`` beside three loops of ``fabric-memory
recall "compaction summary"`` over ``fixtures/pi-mono-real`` (a private home and index in
a temporary folder), each command timed. A command still running after ``--hang``
seconds is a hang: its process tree's stacks (``py-spy dump``, Python and native frames)
and the file locks held on the index (``/proc/locks``) are printed, then it is killed.

The report: commands run, how many took longer than ``--stall`` seconds, the slowest,
failures by error code and the hangs with their stacks. Exit status 1 when a command hung
or failed. The test suite runs it for a minute (``tests/test_hang.py``); by hand, ten:
``python -m bench.hang --seconds 600``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

REPO = Path(__file__).resolve().parents[1]
SESSIONS = REPO / "fixtures" / "pi-mono-real"
QUERY = "compaction summary"
DUMP_SECONDS = 30.0


@dataclass(slots=True)
class Loop:
    """One actor: the same command run again and again until the deadline."""

    name: str
    args: tuple[str, ...]
    times: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    hangs: list[dict[str, Any]] = field(default_factory=list)


def _children(pid: int) -> list[int]:
    """``pid`` and every process below it."""
    found = [pid]
    for task in found:
        try:
            text = Path(f"/proc/{task}/task/{task}/children").read_text()
        except OSError:
            continue
        found.extend(int(child) for child in text.split())
    return found


def stacks(pid: int) -> str:
    """The stacks of ``pid`` and its children (py-spy, native frames too)."""
    out = []
    for task in _children(pid):
        try:
            done = subprocess.run(
                [shutil.which("py-spy") or "py-spy", "dump", "--native", "--pid", str(task)],
                capture_output=True, text=True, timeout=DUMP_SECONDS, check=False,
            )
            out.append(done.stdout + done.stderr)
        except (OSError, subprocess.TimeoutExpired) as exc:
            out.append(f"pid {task}: py-spy failed ({exc})")
    return "\n".join(out)


def held_locks(index: Path) -> list[str]:
    """``/proc/locks`` lines of the index's lock files, with the path of each file."""
    inodes: dict[str, str] = {}
    for path in index.rglob("*lock*"):
        try:
            inodes[str(path.stat().st_ino)] = str(path.relative_to(index))
        except OSError:
            continue
    lines: list[str] = []
    try:
        text = Path("/proc/locks").read_text()
    except OSError:
        return lines
    for line in text.splitlines():
        parts = line.split()
        where = parts[5] if len(parts) > 5 and ":" in parts[5] else ""
        inode = where.rsplit(":", 1)[-1]
        if inode in inodes:
            lines.append(f"{line}  {inodes[inode]}")
    return lines


def _run(loop: Loop, env: dict[str, str], deadline: float, hang: float, index: Path) -> None:
    while time.monotonic() < deadline:
        started = time.monotonic()
        process = subprocess.Popen(
            [sys.executable, "-m", "fabric_memory.cli", *loop.args, "--json"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        )
        try:
            out, err = process.communicate(timeout=hang)
        except subprocess.TimeoutExpired:
            loop.hangs.append({
                "command": " ".join(loop.args), "pid": process.pid,
                "locks": held_locks(index), "stacks": stacks(process.pid),
            })
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            loop.errors["hang"] += 1
            continue
        loop.times.append(time.monotonic() - started)
        if process.returncode != 0:
            loop.errors[_code(out, err)] += 1


def _code(out: bytes, err: bytes) -> str:
    """The error code of a failed command's ``--json`` answer (or its first stderr line)."""
    for text in (out, err):
        try:
            answer = orjson.loads(text)
        except orjson.JSONDecodeError:
            continue
        if isinstance(answer, dict) and isinstance(answer.get("error"), dict):
            return str(answer["error"].get("code", "error"))
    lines = err.decode(errors="replace").strip().splitlines()
    if not lines:
        return "exit status without output"
    if lines[0].startswith("Traceback"):  # a crash: where it happened and what it was
        frames = [line.strip() for line in lines if line.strip().startswith("File ")]
        return f"crash: {lines[-1][:160]} ({frames[-1][:160] if frames else '?'})"
    return lines[0][:160]


def run(seconds: float, readers: int = 3, stall: float = 5.0,
        hang: float = 30.0) -> dict[str, Any]:
    """Run the loops for ``seconds``; the report (see the module docstring)."""
    with tempfile.TemporaryDirectory(prefix="fabric-memory-hang-") as tmp:
        home = Path(tmp) / "home"
        env = {**os.environ, "FABRIC_MEMORY_HOME": str(home),
               "FABRIC_MEMORY_SESSIONS": str(SESSIONS)}
        subprocess.run([sys.executable, "-m", "fabric_memory.cli", "reindex"], env=env,
                       capture_output=True, check=True, timeout=300)
        loops = [Loop("reindex", ("reindex", "--full"))]
        loops += [Loop(f"recall{n}", ("recall", QUERY)) for n in range(1, readers + 1)]
        deadline = time.monotonic() + seconds
        threads = [threading.Thread(target=_run, args=(loop, env, deadline, hang, home / "index"))
                   for loop in loops]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    times = sorted(t for loop in loops for t in loop.times)
    errors: Counter[str] = Counter()
    for loop in loops:
        errors.update(loop.errors)
    return {
        "seconds": seconds,
        "commands": len(times) + errors["hang"],
        "byLoop": {loop.name: len(loop.times) for loop in loops},
        "overStall": sum(t > stall for t in times) + errors["hang"],
        "overStallByLoop": {loop.name: sum(t > stall for t in loop.times) + loop.errors["hang"]
                            for loop in loops},
        "slowestByLoop": {loop.name: round(max(loop.times, default=0.0), 3) for loop in loops},
        "stallSeconds": stall,
        "slowest": round(times[-1], 3) if times else None,
        "p50": round(times[len(times) // 2], 3) if times else None,
        "errors": dict(errors),
        "hangs": [h for loop in loops for h in loop.hangs],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.hang", description=__doc__)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--readers", type=int, default=3)
    parser.add_argument("--stall", type=float, default=5.0)
    parser.add_argument("--hang", type=float, default=30.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    report = run(args.seconds, args.readers, args.stall, args.hang)
    if args.json:
        sys.stdout.write(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        print(f"{report['commands']} commands in {args.seconds:g} s {report['byLoop']}: "
              f"{report['overStall']} over {args.stall:g} s, slowest {report['slowest']} s, "
              f"median {report['p50']} s, errors {report['errors'] or 0}; by loop: over "
              f"{args.stall:g} s {report['overStallByLoop']}, slowest {report['slowestByLoop']}")
        for hang in report["hangs"]:
            print(f"\nHANG: {hang['command']} (pid {hang['pid']})\nlocks:")
            print("\n".join(hang["locks"]) or "(none)")
            print(hang["stacks"])
    return 1 if report["hangs"] or report["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
