"""Agent stores that are databases, built as their agents lay them out (Cursor's
``store.db``, Goose's ``sessions.db``): for the tests and the benchmarks alike. Imports
nothing beyond the standard library and orjson."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Any

import orjson

AGENT_FIXTURES = Path(__file__).parent.parent / "fixtures" / "agents"


def cursor_store(path: Path, chat: dict[str, Any] | None = None, *,
                 stored_backwards: bool = False) -> Path:
    """A Cursor agent ``store.db`` at ``path`` holding the chat (default: the fixture's
    ``chat.json``) as cursor-agent stores one: each message a JSON blob addressed by its
    SHA-256, a protobuf root listing them (field 1) and the workspace (field 9), and the
    metadata hex-encoded in ``meta`` (``stored_backwards``: the blobs stored last message
    first, so only the root says their order)."""
    chat = chat or orjson.loads((AGENT_FIXTURES / "cursor" / "chat.json").read_bytes())

    def field(number: int, payload: bytes) -> bytes:
        return _varint(number << 3 | 2) + _varint(len(payload)) + payload

    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path)
    try:
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("CREATE TABLE blobs (id TEXT PRIMARY KEY, data BLOB)")
        db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
        blobs = [orjson.dumps(message) for message in chat["messages"]]
        ids = [hashlib.sha256(data).hexdigest() for data in blobs]
        stored = list(zip(ids, blobs, strict=True))
        db.executemany("INSERT INTO blobs (id, data) VALUES (?, ?)",
                       stored[::-1] if stored_backwards else stored)
        root = b"".join(field(1, bytes.fromhex(i)) for i in ids) + field(
            9, chat["workspace"].encode())
        root_id = hashlib.sha256(root).hexdigest()
        db.execute("INSERT INTO blobs (id, data) VALUES (?, ?)", (root_id, root))
        meta = {**chat["meta"], "latestRootBlobId": root_id}
        db.execute("INSERT INTO meta (key, value) VALUES ('0', ?)", (orjson.dumps(meta).hex(),))
        db.commit()
    finally:
        db.close()
    return path


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


GOOSE_SQL = AGENT_FIXTURES / "goose" / "sessions.sql"


def goose_schema() -> str:
    """The statements of Goose's schema in the fixture's SQL (its CREATE statements)."""
    return "\n".join(line for line in GOOSE_SQL.read_text(encoding="utf-8").splitlines()
                     if line.startswith(("CREATE", "PRAGMA")))
