"""The handoff hook's time (``fabric-memory handoff``, docs/handoff.md): on the largest real
transcript among the fixtures, as Claude Code leaves it when it runs the hook (everything
before the boundary it is about to write), in-process (:func:`fabric_memory.handoff.run_handoff`)
and as the process a host starts, beside the agent's reader alone reading the same file.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parents[1]
FIXTURES = (REPO / "fixtures" / "handoff", REPO / "fixtures" / "agents" / "claude-code",
            REPO / "fixtures" / "agents" / "codex")


def largest_fixture() -> Path:
    """The largest Claude Code or Codex transcript among the fixtures."""
    return max((path for folder in FIXTURES for path in folder.glob("*.jsonl")),
               key=lambda path: path.stat().st_size)


def at_hook_time(source: Path, scratch: Path) -> tuple[Path, bytes]:
    """``source`` cut before its last ``compact_boundary`` line (where Claude Code runs the
    hook; a file without one is taken whole), and the hook's input naming it."""
    lines = source.read_bytes().splitlines(keepends=True)
    marks = [at for at, line in enumerate(lines) if b'"compact_boundary"' in line]
    kept = lines[: marks[-1]] if marks else lines
    path = scratch / source.name
    path.write_bytes(b"".join(kept))
    first = orjson.loads(next(line for line in kept if b"essionId" in line or b"session_meta"
                              in line))
    session = first.get("sessionId") or first.get("payload", {}).get("id")
    event = orjson.dumps({"session_id": session, "transcript_path": str(path), "cwd": "/",
                          "hook_event_name": "SessionStart", "source": "compact"})
    return path, event


def in_process(event: bytes, log: Path) -> None:
    """One hook call in this process (it must print a packet)."""
    from fabric_memory.handoff import run_handoff

    run = run_handoff(event, log=log)
    if run.output is None:
        raise AssertionError(f"the hook printed nothing: {run.reason}")


def as_process(event: bytes, home: Path) -> None:
    """One ``fabric-memory handoff`` process, as a host runs it (it must print a packet)."""
    done = subprocess.run([sys.executable, "-m", "fabric_memory.cli", "handoff"], input=event,
                          capture_output=True, check=True,
                          env={**os.environ, "FABRIC_MEMORY_HOME": str(home)})
    if not done.stdout:
        raise AssertionError("the hook printed nothing: "
                             f"{(home / 'handoff.log').read_text(errors='replace')}")


def reader_alone(path: Path) -> None:
    """The floor: the agent's reader reading the file (what the hook cannot do without)."""
    from fabric_memory.sources import read_source

    read_source(path)
