"""Per-session catalog records, tiers, and the session-level views (sessions, stats, verify).

A record says which version of a file the index holds (path, id, mtime, size,
sourceHash, lineageFingerprint, counts, when, whether it is stale). Records live
as ``session`` documents in the index itself, so they commit with the documents.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, NotRequired, TypedDict

import orjson

from .._js import iso_time
from ..errors import ExpandError, MemoryIndexError, clipped
from ..session import hash_file
from .index import I64_MAX, I64_MIN, REBUILD, SCHEMA_TAG, MemoryIndex, open_index
from .locations import contains, index_root, sessions_root

Tier = Literal["hot", "cold"]
DEFAULT_HOT_SESSIONS = 50


class SessionRecordJSON(TypedDict):
    path: str
    sessionId: str
    mtimeNs: int
    size: int
    sourceHash: str
    lineageFingerprint: str
    entries: int
    operations: int
    indexedAt: str
    stale: bool
    staleReason: str | None
    schemaVersion: str
    complete: bool
    problems: list[str]
    checked: list[int] | None
    cwd: NotRequired[str | None]


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """What the index holds for one session file."""

    path: str
    session_id: str
    mtime_ns: int
    size: int
    source_hash: str
    lineage_fingerprint: str
    entries: int
    operations: int
    indexed_at: str
    stale: bool = False
    stale_reason: str | None = None
    schema_version: str = SCHEMA_TAG
    complete: bool = True
    """False when duplicate entry ids make some addresses ambiguous."""
    problems: tuple[str, ...] = ()
    checked: StatKey | None = None
    """What :func:`stat_key` said of the file when last looked at; None when it was missing
    (or the record predates the ctime in the key)."""
    cwd: str | None = None

    def to_json(self) -> SessionRecordJSON:
        return {
            "path": self.path, "sessionId": self.session_id, "mtimeNs": self.mtime_ns,
            "size": self.size, "sourceHash": self.source_hash,
            "lineageFingerprint": self.lineage_fingerprint, "entries": self.entries,
            "operations": self.operations, "indexedAt": self.indexed_at, "stale": self.stale,
            "staleReason": self.stale_reason, "schemaVersion": self.schema_version,
            "complete": self.complete, "problems": list(self.problems),
            "checked": list(self.checked) if self.checked is not None else None,
            "cwd": self.cwd,
        }

    @classmethod
    def from_json(cls, value: SessionRecordJSON) -> SessionRecord:
        checked = value["checked"]
        return cls(
            path=value["path"], session_id=value["sessionId"], mtime_ns=value["mtimeNs"],
            size=value["size"], source_hash=value["sourceHash"],
            lineage_fingerprint=value["lineageFingerprint"], entries=value["entries"],
            operations=value["operations"], indexed_at=value["indexedAt"],
            stale=value["stale"], stale_reason=value["staleReason"],
            schema_version=value["schemaVersion"], complete=value["complete"],
            problems=tuple(value["problems"]),
            checked=(checked[0], checked[1], checked[2])
            if checked is not None and len(checked) == 3 else None,
            cwd=value.get("cwd"),
        )

    def encode(self) -> bytes:
        return orjson.dumps(self.to_json())

    def marked_stale(self, reason: str, checked: StatKey | None) -> SessionRecord:
        return replace(self, stale=True, stale_reason=reason, checked=checked)


def now_iso() -> str:
    return iso_time(datetime.now(UTC))


StatKey = tuple[int, int, int]
"""``(mtime_ns, size, ctime_ns)``: the ctime moves on every write even when the mtime is
set back, so a same-size rewrite under an unchanged mtime is still seen."""


def stat_key(path: str) -> StatKey | None:
    """The :data:`StatKey` of ``path`` (times clamped into 64 bits), or None when it cannot
    be stat'ed."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (_clamp(st.st_mtime_ns), st.st_size, _clamp(st.st_ctime_ns))


def _clamp(value: int) -> int:
    return min(max(value, I64_MIN), I64_MAX)


def clamped_time(key: StatKey) -> bool:
    """Whether the mtime was past what the index holds (a file modified after 2262)."""
    return key[0] in (I64_MIN, I64_MAX)


class Catalog:
    """Every record of one index generation, with tiers: newest ``hot_sessions`` by
    mtime (ties by path) are hot, the rest cold."""

    def __init__(self, records: Iterable[SessionRecord]) -> None:
        self.records = tuple(sorted(records, key=lambda r: (-r.mtime_ns, r.path)))
        self.by_path = {record.path: record for record in self.records}
        self._by_id: dict[str, list[SessionRecord]] = {}
        for record in self.records:
            self._by_id.setdefault(record.session_id, []).append(record)

    def hot(self, hot_sessions: int) -> tuple[SessionRecord, ...]:
        return self.records[: max(hot_sessions, 0)]

    def tiers(self, hot_sessions: int) -> dict[str, Tier]:
        hot = max(hot_sessions, 0)
        return {r.path: ("hot" if i < hot else "cold") for i, r in enumerate(self.records)}

    def unique_id(self, record: SessionRecord) -> bool:
        return len(self._by_id.get(record.session_id, ())) == 1

    def handle(self, record: SessionRecord) -> str:
        """How to name the session in a request: its id when unique, else its path."""
        return record.session_id if self.unique_id(record) else record.path

    def matching(self, session: str, root: Path | None = None) -> list[SessionRecord]:
        """Records whose id is ``session`` or whose path is ``session`` (absolute, or
        relative to the sessions root); with a root, only files inside it (symlinks and
        ``..`` resolved), so no request reaches a file outside the sessions root."""
        return [record for record in self._find(session, root)
                if root is None or contains(root, record.path)]

    def _find(self, session: str, root: Path | None) -> list[SessionRecord]:
        found = list(self._by_id.get(session, ()))
        if found:
            return found
        candidates = [Path(session).expanduser()]
        if root is not None and not candidates[0].is_absolute():
            candidates.append(root / session)
        for candidate in candidates:
            for name in (str(candidate.absolute()), str(candidate.resolve())):
                record = self.by_path.get(name)
                if record is not None:
                    return [record]
        return []

    def resolve(self, session: str, root: Path | None = None) -> SessionRecord:
        """The one record named by ``session``; expand's ``session_not_found`` /
        ``ambiguous_session`` otherwise."""
        found = self.matching(session, root)
        if not found:
            raise ExpandError(
                "session_not_found",
                f"session {clipped(session)}: not in the memory index"
                + (f" under {root}" if root is not None else "")
                + "; run `fabric-memory reindex` or pass the session file path",
            )
        if len(found) > 1:
            paths = ", ".join(r.path for r in found)
            raise ExpandError(
                "ambiguous_session",
                f"session {clipped(session)}: id shared by {len(found)} files ({paths}); "
                "pass the path",
            )
        return found[0]


_CACHE: dict[Path, tuple[int, Catalog]] = {}


def load_catalog(index: MemoryIndex) -> Catalog:
    """The catalog of the index's current commit (cached per reader generation)."""
    generation = index.refresh()
    cached = _CACHE.get(index.root)
    if cached is not None and cached[0] == generation:
        return cached[1]
    try:
        records = [SessionRecord.from_json(orjson.loads(raw)) for raw in index.session_records()]
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, IndexError) as exc:
        raise MemoryIndexError(f"{index.directory}: a session record in the index is damaged "
                          f"({type(exc).__name__}); {REBUILD}") from None
    catalog = Catalog(records)
    _CACHE[index.root] = (generation, catalog)
    return catalog


# --- views -----------------------------------------------------------------------------


class SessionListing(TypedDict):
    sessionId: str
    path: str
    tier: Tier
    entries: int
    operations: int
    sourceHash: str
    lineageFingerprint: str
    indexedAt: str
    stale: bool
    staleReason: str | None
    complete: bool


class SessionsReport(TypedDict):
    index: str
    hotSessions: int
    sessions: list[SessionListing]


def list_sessions(
    *, index: str | os.PathLike[str] | None = None, hot_sessions: int = DEFAULT_HOT_SESSIONS
) -> SessionsReport:
    """Every indexed session, newest first, with its tier, counts and hashes."""
    handle = open_index(index_root(index))
    catalog = load_catalog(handle)
    tiers = catalog.tiers(hot_sessions)
    listing: list[SessionListing] = [
        {
            "sessionId": r.session_id, "path": r.path, "tier": tiers[r.path],
            "entries": r.entries, "operations": r.operations, "sourceHash": r.source_hash,
            "lineageFingerprint": r.lineage_fingerprint, "indexedAt": r.indexed_at,
            "stale": r.stale, "staleReason": r.stale_reason, "complete": r.complete,
        }
        for r in catalog.records
    ]
    return {"index": str(handle.root), "hotSessions": hot_sessions, "sessions": listing}


class StatsReport(TypedDict):
    index: str
    schemaVersion: str
    sessions: int
    hot: int
    cold: int
    stale: int
    incomplete: int
    entries: int
    operations: int
    documents: int
    indexBytes: int
    sourceBytes: int


def stats(
    *, index: str | os.PathLike[str] | None = None, hot_sessions: int = DEFAULT_HOT_SESSIONS
) -> StatsReport:
    """Counts and sizes of the index (no source file is read)."""
    handle = open_index(index_root(index))
    catalog = load_catalog(handle)
    records = catalog.records
    hot = len(catalog.hot(hot_sessions))
    return {
        "index": str(handle.root),
        "schemaVersion": SCHEMA_TAG,
        "sessions": len(records),
        "hot": hot,
        "cold": len(records) - hot,
        "stale": sum(r.stale for r in records),
        "incomplete": sum(not r.complete for r in records),
        "entries": sum(r.entries for r in records),
        "operations": sum(r.operations for r in records),
        "documents": handle.count("entry") + handle.count("operation"),
        "indexBytes": handle.size_bytes(),
        "sourceBytes": sum(r.size for r in records),
    }


VerifyState = Literal["ok", "changed", "missing"]


class VerifyItem(TypedDict):
    path: str
    sessionId: str
    state: VerifyState
    stale: bool
    reason: NotRequired[str]


class VerifyReport(TypedDict):
    index: str
    ok: int
    changed: int
    missing: int
    sessions: list[VerifyItem]
    sampledDocuments: int
    indexProblems: list[str]
    """What is wrong in the index itself (documents lost, stored data unreadable); the fix
    is ``fabric-memory reindex --full``."""


VERIFY_SAMPLE = 512
"""Stored documents verify reads back (spread over the index)."""


def verify(*, index: str | os.PathLike[str] | None = None) -> VerifyReport:
    """Every indexed session against its file: ``ok`` (same bytes), ``changed`` or ``missing``;
    and the index against its records (``indexProblems``).

    A file whose mtime and size match is still hashed: verify trusts nothing but bytes.
    """
    handle = open_index(index_root(index))
    catalog = load_catalog(handle)
    items: list[VerifyItem] = []
    for record in sorted(catalog.records, key=lambda r: r.path):
        item: VerifyItem = {"path": record.path, "sessionId": record.session_id,
                            "state": "ok", "stale": record.stale}
        try:
            current = hash_file(record.path)
        except FileNotFoundError:
            item["state"] = "missing"
        except OSError as exc:
            item["state"] = "missing"
            item["reason"] = f"cannot read file: {exc.strerror or exc}"
        else:
            if current != record.source_hash:
                item["state"] = "changed"
                item["reason"] = "sourceHash differs; run `fabric-memory reindex`"
        items.append(item)
    count = Counter(item["state"] for item in items)
    sampled, problems = _index_problems(handle, catalog)
    return {"index": str(handle.root), "ok": count["ok"], "changed": count["changed"],
            "missing": count["missing"], "sessions": items, "sampledDocuments": sampled,
            "indexProblems": problems}


def _index_problems(handle: MemoryIndex, catalog: Catalog) -> tuple[int, list[str]]:
    """The index against its own records: each session's entry, operation and record
    documents counted, and a sample of stored documents read back."""
    problems = []
    for record in sorted(catalog.records, key=lambda r: r.path):
        for kind, expected in (("entry", record.entries), ("operation", record.operations),
                               ("session", 1)):
            found = handle.count(kind, record.path)
            if found != expected:
                problems.append(f"{record.path}: the index holds {found} {kind} documents, "
                                f"its record says {expected}")
    sampled, unreadable = handle.unreadable_documents(VERIFY_SAMPLE)
    problems.extend(unreadable)
    return sampled, problems


def default_roots(
    sessions: str | os.PathLike[str] | None, index: str | os.PathLike[str] | None
) -> tuple[Path, MemoryIndex]:
    """The sessions root (its real path: every file is keyed by its real path) and the index
    handle for explicit or default locations."""
    return sessions_root(sessions).resolve(), open_index(index_root(index))
