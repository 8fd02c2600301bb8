"""``python -m bench.pi_extension [--quick] [--json]``: what compaction through the Pi
extension costs, against what it cannot avoid.

For each large generated session, three figures, medians of interleaved rounds:

- **through the extension** — Pi 1.6.0's own runtime (tests/pi, ``npm ci`` there) loads
  the shipped extension, prepares the cut with Pi's ``prepareCompaction`` and awaits the
  ``session_before_compact`` handler: from Pi's event to the returned compaction
  (serializing the event, spawning ``fabric-memory hook``, the hook, reading its answer);
- **hook in-process** — :func:`~fabric_memory.compaction.hook.run_hook` on the very bytes
  the extension sent (parse, compaction, result), in this process;
- **one process start** — ``fabric-memory hook`` on a three-entry event, start to exit.

The overhead is the first minus the sum of the other two: what the extension adds beyond
one process start (the event's ``JSON.stringify``, the pipe, Node's side). Pi's default
compaction settings (``keepRecentTokens`` 20,000) prepare the cut; ``--quick`` (a small
smoke run) keeps 2,000.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from fabric_memory.certify.generate import rich_session
from fabric_memory.compaction.hook import run_hook
from fabric_memory.pi import EXTENSION_ENTRY

REPO = Path(__file__).resolve().parent.parent
PI_DIR = REPO / "tests" / "pi"
NODE = PI_DIR / "node_modules" / ".bin" / "node"
SCRIPT = Path(__file__).resolve().parent / "pi_extension.mjs"
PROGRAM = Path(sys.executable).parent / "fabric-memory"
SIZES = (1 << 20, 4 << 20)
QUICK_SIZES = (256 << 10,)
SMALL_EVENT = {
    "type": "session_before_compact",
    "preparation": {"firstKeptEntryId": "b", "tokensBefore": 10},
    "branchEntries": [
        {"type": "message", "id": "a", "parentId": None, "timestamp": "2026-01-01T00:00:00.000Z",
         "message": {"role": "user", "content": "hello", "timestamp": 0}},
        {"type": "message", "id": "b", "parentId": "a", "timestamp": "2026-01-01T00:00:01.000Z",
         "message": {"role": "assistant", "content": [{"type": "text", "text": "hi"}],
                     "timestamp": 0}},
        {"type": "message", "id": "c", "parentId": "b", "timestamp": "2026-01-01T00:00:02.000Z",
         "message": {"role": "user", "content": "again", "timestamp": 0}},
    ],
    "sessionId": "bench",
}


def measure(size: int, runs: int, work: Path, keep_recent_tokens: int = 20_000) -> dict[str, Any]:
    """The three figures for one generated session of ``size`` bytes, in interleaved rounds
    (one of each per round), so a busy machine weighs on all three alike."""
    session = work / f"session-{size}.jsonl"
    rich_session(session, size, seed=7)
    event_file = work / f"event-{size}.json"
    small = orjson.dumps(SMALL_EVENT)
    through: list[float] = []
    in_process: list[float] = []
    starts: list[float] = []
    entries = 0
    for _ in range(runs):
        done = subprocess.run(
            [str(NODE), str(SCRIPT), str(PI_DIR), str(EXTENSION_ENTRY), str(session),
             str(event_file), "1", str(keep_recent_tokens)],
            capture_output=True, text=True, check=False,
            env={**os.environ, "FABRIC_MEMORY_BIN": str(PROGRAM)},
        )
        if done.returncode != 0:
            raise SystemExit(f"bench/pi_extension.mjs failed: {done.stderr.strip()[-2000:]}")
        answer = orjson.loads(done.stdout)
        through.extend(answer["ms"])
        entries = answer["entries"]
        event = event_file.read_bytes()
        started = time.perf_counter()
        result, status = run_hook(event)
        in_process.append((time.perf_counter() - started) * 1000)
        assert status == 0 and "compaction" in result, result
        started = time.perf_counter()
        subprocess.run([str(PROGRAM), "hook"], input=small, capture_output=True, check=True)
        starts.append((time.perf_counter() - started) * 1000)
    extension, hook, start = (statistics.median(v) for v in (through, in_process, starts))
    return {
        "sessionBytes": session.stat().st_size, "eventBytes": len(event),
        "entries": entries, "runs": runs,
        "extensionMs": round(extension, 1), "hookInProcessMs": round(hook, 1),
        "processStartMs": round(start, 1),
        "overheadMs": round(extension - hook - start, 1),
        "ratio": round(extension / (hook + start), 3),
    }


def render(rows: list[dict[str, Any]]) -> str:
    lines = ["| session | event | through the extension | hook in-process | one process start "
             "| overhead | ratio |", "|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        lines.append(
            f"| {row['sessionBytes'] / 1048576:.1f} MiB, {row['entries']:,} entries "
            f"| {row['eventBytes'] / 1048576:.1f} MiB | {row['extensionMs']:,} ms "
            f"| {row['hookInProcessMs']:,} ms | {row['processStartMs']:,} ms "
            f"| {row['overheadMs']:,} ms | {row['ratio']} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if not NODE.exists():
        print(f"Pi is not installed: run `npm ci --no-audit --no-fund` in {PI_DIR}",
              file=sys.stderr)
        return 1
    quick = "--quick" in argv
    work = Path(tempfile.mkdtemp(prefix="fm-bench-pi-"))
    try:
        if quick:  # Pi's default keeps 20k tokens: more than a small session holds
            rows = [measure(size, 3, work, keep_recent_tokens=2_000) for size in QUICK_SIZES]
        else:
            rows = [measure(size, 9, work) for size in SIZES]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if "--json" in argv:
        print(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode())
    else:
        print(render(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
