"""The write-ahead log beside a session store: a SQLite store (OpenCode's, Goose's, Crush's,
Cursor's) keeps its newest rows in ``<file>-wal`` until its agent checkpoints them into the
file, so the log is part of the session (its hash, its size, its change) while it exists."""

from __future__ import annotations

import os
from typing import Final

SUFFIX: Final = "-wal"


def write_ahead_log(path: str | None) -> str | None:
    """The ``<file>-wal`` beside ``path`` when there is one and ``path`` is no JSON Lines
    file (only a store has a log)."""
    if path is None or path.endswith(".jsonl"):
        return None
    log = f"{path}{SUFFIX}"
    return log if os.path.isfile(log) else None


def store_of(path: str) -> str | None:
    """The store whose log ``path`` would be (``<file>`` of ``<file>-wal``), else None."""
    return path.removesuffix(SUFFIX) if path.endswith(SUFFIX) else None
