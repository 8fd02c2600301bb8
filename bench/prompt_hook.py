"""The prompt hook's time (``fabric-memory handoff`` on UserPromptSubmit,
docs/handoff.md#memory-that-arrives-with-the-prompt) over a large memory index: a real
Claude Code transcript after its second compaction (``fixtures/handoff/
entire-two-compactions.jsonl``) is indexed beside the bench's sessions, and a question about
its compacted part is asked as the next prompt — in-process
(:func:`fabric_memory.prompt_context.prompt_context`) beside one plain recall of the same
words, and as the process a host starts.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson

from fabric_memory.memory.locations import SESSIONS_ENV
from fabric_memory.memory.reindex import reindex_paths

REPO = Path(__file__).resolve().parents[1]
TRANSCRIPT = REPO / "fixtures" / "handoff" / "entire-two-compactions.jsonl"
SESSION = "7f78a542-6201-447a-8277-213165356894"
QUESTION = "which goconst lint warnings did golangci-lint report?"
"""A question the compacted part answers (its passages clear the bar)."""


def folder_of(root: Path) -> Path:
    """Where the transcript is kept: under ``root``, the bench cache, so the index's copy
    of it stays valid between runs (the hook's sessions folder)."""
    return root / "prompt-hook"


def with_transcript(root: Path, index: Path) -> bytes:
    """The transcript indexed into ``index``; the hook input asking :data:`QUESTION`."""
    folder = folder_of(root)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / TRANSCRIPT.name
    if not path.exists() or path.read_bytes() != TRANSCRIPT.read_bytes():
        shutil.copyfile(TRANSCRIPT, path)
    reindex_paths([path], sessions=folder, index=index)
    return orjson.dumps({"session_id": SESSION, "transcript_path": str(path), "cwd": None,
                         "hook_event_name": "UserPromptSubmit", "prompt": QUESTION})


@contextmanager
def sessions_root(sessions: Path) -> Iterator[None]:
    """``$FABRIC_MEMORY_SESSIONS`` naming ``sessions`` while it runs: the sessions roots a
    host's hook reads from its environment (named as an argument, recall would leave out
    every other indexed session by path, a cost the hook never pays)."""
    before = os.environ.get(SESSIONS_ENV)
    os.environ[SESSIONS_ENV] = str(sessions)
    try:
        yield
    finally:
        if before is None:
            del os.environ[SESSIONS_ENV]
        else:
            os.environ[SESSIONS_ENV] = before


def in_process(event: bytes, index: Path, sessions: Path) -> None:
    """One hook call in this process, with nothing given yet (it must give context)."""
    from fabric_memory.prompt_context import prompt_context

    with tempfile.TemporaryDirectory(prefix="fm-prompt-state-") as home, sessions_root(sessions):
        if prompt_context(event, Path(home), index=str(index)) is None:
            raise AssertionError("the prompt hook gave no context")


def recall_alone(index: Path, sessions: Path) -> None:
    """The floor: one recall of the same words in the same session."""
    from fabric_memory.memory.recall import recall
    from fabric_memory.prompt_context import query_words

    with sessions_root(sessions):
        recall(" ".join(query_words(QUESTION)), session=SESSION, hot_sessions=0, index=index)


def home_for(index: Path, scratch: Path) -> Path:
    """A fabric-memory home whose ``index`` is ``index`` (a link): what a process reads."""
    home = scratch / f"prompt-home-{index.name}"
    home.mkdir(parents=True, exist_ok=True)
    link = home / "index"
    if not link.is_symlink():
        link.symlink_to(index)
    return home


def as_process(event: bytes, home: Path, sessions: Path) -> None:
    """One ``fabric-memory handoff`` process, as a host runs it (its sessions folder
    ``sessions``), with nothing given yet (it must print the context)."""
    shutil.rmtree(home / "prompt-context", ignore_errors=True)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run([sys.executable, "-m", "fabric_memory.cli", "handoff"], input=event,
                          capture_output=True, check=True,
                          env={**env, "FABRIC_MEMORY_HOME": str(home),
                               "FABRIC_MEMORY_SESSIONS": str(sessions)})
    if not done.stdout:
        raise AssertionError("the prompt hook printed nothing: "
                             f"{(home / 'handoff.log').read_text(errors='replace')}")
