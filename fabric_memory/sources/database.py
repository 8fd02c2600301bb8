"""Sessions an agent keeps in a SQLite database (Goose's ``sessions.db``, Crush's
``crush.db``, Cursor agent's ``store.db``): opened read-only, never written, and read in
one transaction, so the rows are one consistent state of the database even while its agent
writes to it.

A database is hashed as every other session file is (``sourceHash``: its main file's
bytes, then its write-ahead log's while there is one, :func:`fabric_memory.session.hash_file`),
before and after its rows are read; when the two differ the agent wrote meanwhile and the
rows are read once more. Rows that SQLite still holds in the log (``-wal``) are read too,
and a change only there is a change of the database (:mod:`fabric_memory._wal`); a WAL
database with no log beside it (its agent closed it) is opened ``immutable``, so reading it
leaves no ``-wal`` or ``-shm`` file in the agent's folder. Each entry's raw source is its
row, as JSON (:attr:`fabric_memory.session.Entry.source`), addressed by the agent's own id
of the message (never a row's place in the file, which a rewrite moves).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, TypeVar
from urllib.parse import quote

import orjson

from .._wal import write_ahead_log
from ..errors import NotASessionError, SessionError

if TYPE_CHECKING:  # loaded when a file is read (see fabric_memory.sources.reader)
    import sqlite3

    from ..session import LineProblem

HEADER: Final = b"SQLite format 3\x00"
WAL_VERSIONS: Final = b"\x02\x02"
"""Bytes 18 and 19 of the header (its read and write versions) of a database in WAL mode."""
HEAD_BYTES: Final = 20
BUSY_MS: Final = 2000
"""How long a read waits for an agent's write lock (a rollback-journal database locks its
readers out while it commits; a WAL database never does)."""
ATTEMPTS: Final = 3
"""Reads of a database its agent keeps changing before it is reported as being written."""

T = TypeVar("T")


def is_database(path: str) -> bool:
    """Whether ``path`` is a SQLite database file (its 16-byte header)."""
    return _head(path)[:len(HEADER)] == HEADER


def _head(path: str) -> bytes:
    """The first bytes of the database header this module reads (b"" when unreadable)."""
    try:
        with open(path, "rb") as stream:
            return stream.read(HEAD_BYTES)
    except OSError:
        return b""


def has_tables(path: str, names: frozenset[str]) -> bool:
    """Whether the database at ``path`` holds the tables ``names``; also when it cannot be
    read now (locked by its agent: reading it says so) but is a SQLite database."""
    import sqlite3

    if not is_database(path):
        return False
    try:
        found = _query(path, lambda db: {
            row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")})
    except sqlite3.DatabaseError:
        return True
    return names <= found


@dataclass(slots=True)
class Database:
    """What reading a database gave: ``value`` (what the query function returned) from one
    consistent state of the file whose bytes hash to ``source_hash``; the attributes
    :func:`fabric_memory.sources.reader.build_session` reads of any source."""

    path: str
    value: Any
    source_hash: str
    size: int
    problems: list[LineProblem] = field(default_factory=list)
    truncated: LineProblem | None = None


def read_rows(path: str, query: Callable[[sqlite3.Connection], T]) -> Database:
    """Run ``query`` on the database at ``path``, opened read-only, in one read transaction;
    :class:`~fabric_memory.errors.SessionError` (located) when it cannot be read."""
    import sqlite3

    from ..session import fingerprint_file

    for _ in range(ATTEMPTS):
        try:
            before = fingerprint_file(path)
        except OSError as exc:
            raise SessionError(path, None, f"cannot read file: {exc.strerror or exc}") from exc
        try:
            value = _query(path, query)
        except sqlite3.DatabaseError as exc:
            raise _located(path, exc) from None
        try:
            after = fingerprint_file(path)
        except OSError as exc:
            raise SessionError(path, None, f"cannot read file: {exc.strerror or exc}") from exc
        if after.source_hash == before.source_hash:
            return Database(path, value, after.source_hash, after.size)
    raise SessionError(path, None, "the database changed while it was read, "
                       f"{ATTEMPTS} times (its agent is writing); it is read again on the "
                       "next reindex")


def _query(path: str, query: Callable[[sqlite3.Connection], T]) -> T:
    import sqlite3

    # A WAL database its agent closed (no -wal beside it) is read as the immutable file it
    # is: opened read-only, SQLite would make -wal and -shm files beside it and, unable to
    # remove them, leave them in the agent's folder. A change made meanwhile is caught by
    # the hash taken before and after the read.
    closed = _head(path)[18:20] == WAL_VERSIONS and write_ahead_log(path) is None
    uri = f"file:{quote(os.path.abspath(path))}?mode=ro{'&immutable=1' if closed else ''}"
    db = sqlite3.connect(uri, uri=True, timeout=BUSY_MS / 1000, isolation_level=None,
                         check_same_thread=False)
    try:
        db.row_factory = sqlite3.Row
        db.execute("PRAGMA query_only = ON")
        db.execute("BEGIN")  # one snapshot for every statement of the query
        try:
            return query(db)
        finally:
            db.execute("COMMIT")
    finally:
        db.close()


def _located(path: str, exc: Exception) -> SessionError:
    reason = str(exc) or type(exc).__name__
    if "locked" in reason or "busy" in reason:
        return SessionError(path, None, f"database is locked by its agent ({reason}) for more "
                            f"than {BUSY_MS / 1000:g}s; it is read again on the next reindex")
    if "no such table" in reason or "no such column" in reason:
        return NotASessionError(path, None, f"unsupported version: {reason}")
    return SessionError(path, None, f"cannot read the database ({reason})")


def row_json(row: sqlite3.Row, columns: Sequence[str] | None = None) -> bytes:
    """A row as the JSON object of its columns (``columns``: only those, in that order):
    what ``expand --raw`` returns for its entry. Blobs that are UTF-8 text are given as
    text, others as hex."""
    names = columns if columns is not None else row.keys()
    return orjson.dumps({name: _plain(row[name]) for name in names})


def _plain(value: object) -> object:
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return value.hex()
    return value


def json_column(value: object) -> Any:
    """A column holding JSON text (or UTF-8 bytes of it): its value, ``None`` when it is
    not JSON."""
    if isinstance(value, bytes | str) and value:
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return None
    return None
