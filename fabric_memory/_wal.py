"""The write-ahead log beside a session store: a SQLite store (OpenCode's, Goose's, Crush's,
Cursor's) keeps its newest rows in ``<file>-wal`` until its agent checkpoints them into the
file, so the log is part of the session (its hash, its size, its change) while it exists."""

from __future__ import annotations

import os


def write_ahead_log(path: str | None) -> str | None:
    """The ``<file>-wal`` beside ``path`` when there is one and ``path`` is no JSON Lines
    file (only a store has a log)."""
    if path is None or path.endswith(".jsonl"):
        return None
    log = f"{path}-wal"
    return log if os.path.isfile(log) else None
