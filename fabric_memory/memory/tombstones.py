"""The sessions a person took out of memory (``fabric-memory forget``), kept so no writer
brings them back.

``<index>/forgotten.json`` lives beside the index's schema folders, so it outlives a
rebuild (``reindex --full``, a new schema) and is shared by every writer of that index:
``reindex``, the live index of ``serve`` and ``ui``, the hot tier, a sharded build's
planner and its tasks. It holds ids and file identity only — the session's id, the real
path of its file, its agent's name and when it was forgotten — never a word of what the
session said. A writer refuses a file by its path before reading it, and a session by its
id after reading (a forgotten session copied or renamed elsewhere stays forgotten).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

import orjson

from ..errors import MemoryIndexError
from .locations import make_private_dirs

FILE = "forgotten.json"
FORMAT = 1


class TombstoneJSON(TypedDict):
    sessionId: str
    path: str
    agent: str
    forgottenAt: str


@dataclass(frozen=True, slots=True)
class Tombstone:
    session_id: str
    path: str
    agent: str
    forgotten_at: str

    def to_json(self) -> TombstoneJSON:
        return {"sessionId": self.session_id, "path": self.path, "agent": self.agent,
                "forgottenAt": self.forgotten_at}


class Tombstones:
    """What is forgotten, looked up by path and by session id."""

    def __init__(self, items: Iterable[Tombstone] = ()) -> None:
        self.items = tuple(items)
        self._paths = {t.path: t for t in self.items}
        self._ids = {t.session_id: t for t in self.items}

    def __bool__(self) -> bool:
        return bool(self.items)

    def of_path(self, path: str) -> Tombstone | None:
        return self._paths.get(path)

    def of_id(self, session_id: str) -> Tombstone | None:
        return self._ids.get(session_id)

    def refuses(self, path: str, session_id: str | None = None) -> Tombstone | None:
        """The tombstone that keeps this file (or this session) out of memory, if any."""
        found = self._paths.get(path)
        if found is None and session_id is not None:
            found = self._ids.get(session_id)
        return found


def store_path(root: Path) -> Path:
    return root / FILE


def load_tombstones(root: Path) -> Tombstones:
    """The tombstones of the index at ``root`` (none when the store does not exist)."""
    where = store_path(root)
    try:
        data = where.read_bytes()
    except FileNotFoundError:
        return Tombstones()
    except OSError as exc:
        raise MemoryIndexError(f"{where}: cannot read the forgotten sessions "
                               f"({exc.strerror or exc}); fix its permissions") from None
    try:
        value = orjson.loads(data)
        items = [Tombstone(str(item["sessionId"]), str(item["path"]), str(item["agent"]),
                           str(item["forgottenAt"])) for item in value["forgotten"]]
    except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
        # Never guess: a damaged store could let a forgotten session back in.
        raise MemoryIndexError(
            f"{where}: the list of forgotten sessions is damaged ({type(exc).__name__}); "
            "restore it from a backup, or remove it to let every forgotten session back "
            "into memory") from None
    return Tombstones(items)


def save_tombstones(root: Path, tombstones: Iterable[Tombstone]) -> None:
    """Replace the store at once (a reader sees the old list or the new one), owner-only."""
    make_private_dirs(root)
    ordered = sorted(tombstones, key=lambda t: (t.forgotten_at, t.path))
    data = orjson.dumps({"format": FORMAT, "forgotten": [t.to_json() for t in ordered]},
                        option=orjson.OPT_INDENT_2)
    temporary = root / f".{FILE}.{uuid.uuid4().hex[:8]}"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, data + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, store_path(root))
