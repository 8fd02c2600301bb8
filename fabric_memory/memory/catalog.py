"""Per-session catalog records, tiers, and the session-level views (sessions, stats, verify).

A record says which version of a file the index holds (path, id, mtime, size,
sourceHash, lineageFingerprint, counts, when, whether it is stale). Records live
as ``session`` documents in the index itself, so they commit with the documents.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, NotRequired, TypedDict, cast

import orjson

from .._js import iso_ms, iso_time
from .._wal import write_ahead_log
from ..arguments import check_names, check_range
from ..errors import ExpandError, MemoryIndexError, QueryError, UsageError, clipped
from ..sources.registry import AGENTS
from .index import I64_MAX, I64_MIN, REBUILD, SCHEMA_TAG, RecordSnapshot
from .locations import holds, index_root, inside_any, sessions_roots
from .sharded import Memory, open_memory

Tier = Literal["hot", "cold"]
DEFAULT_HOT_SESSIONS = 50
MAX_HOT_SESSIONS = 100_000
"""Most sessions a query may re-check (each is a ``stat`` per query)."""


def check_hot_sessions(hot_sessions: int) -> None:
    check_range("--hot-sessions", hot_sessions, 0, MAX_HOT_SESSIONS)


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
    agent: NotRequired[str]


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
    """The folder the agent worked in (the session's project)."""
    agent: str = "pi"
    """The agent that wrote the file (:data:`fabric_memory.sources.AGENTS`)."""

    def to_json(self) -> SessionRecordJSON:
        return {
            "path": self.path, "sessionId": self.session_id, "mtimeNs": self.mtime_ns,
            "size": self.size, "sourceHash": self.source_hash,
            "lineageFingerprint": self.lineage_fingerprint, "entries": self.entries,
            "operations": self.operations, "indexedAt": self.indexed_at, "stale": self.stale,
            "staleReason": self.stale_reason, "schemaVersion": self.schema_version,
            "complete": self.complete, "problems": list(self.problems),
            "checked": list(self.checked) if self.checked is not None else None,
            "cwd": self.cwd, "agent": self.agent,
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
            cwd=value.get("cwd"), agent=value.get("agent", "pi"),
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
    key = (_clamp(st.st_mtime_ns), st.st_size, _clamp(st.st_ctime_ns))
    log = write_ahead_log(path)
    if log is None:
        return key
    try:  # a store's log is part of it (fingerprint_file): a change there is a change
        wal = os.stat(log)
    except OSError:
        return key
    return (max(key[0], _clamp(wal.st_mtime_ns)), key[1] + wal.st_size,
            max(key[2], _clamp(wal.st_ctime_ns)))


def _clamp(value: int) -> int:
    return min(max(value, I64_MIN), I64_MAX)


def clamped_time(key: StatKey) -> bool:
    """Whether the mtime was past what the index holds (a file modified after 2262)."""
    return key[0] in (I64_MIN, I64_MAX)


class Catalog:
    """The records of one index generation, with tiers: newest ``hot_sessions`` by
    mtime (ties by path) are hot, the rest cold.

    Built from every record (``records``), or over a :class:`RecordSnapshot` that
    fetches records only as they are asked for: a recall touches the hot tier and its
    hits' sessions, not the whole catalog. ``records`` and ``by_path`` load everything
    on first use.
    """

    def __init__(
        self, records: Iterable[SessionRecord] = (), *, snapshot: RecordSnapshot | None = None
    ) -> None:
        self._snapshot = snapshot
        self._all: tuple[SessionRecord, ...] | None = None
        self._by_path: dict[str, SessionRecord] | None = None
        self._by_id: dict[str, list[SessionRecord]] = {}
        self._fetched: dict[str, SessionRecord | None] = {}
        self._newest: dict[int, tuple[SessionRecord, ...]] = {}
        self._outside: dict[tuple[Path, ...], frozenset[str]] = {}
        self._folders_of: dict[str, tuple[str, ...]] = {}
        if snapshot is None:
            self._load(records)

    def _load(self, records: Iterable[SessionRecord]) -> None:
        # Threads share a catalog (one per index generation): each table is built whole
        # before it is published, and ``_all`` last, since its presence tells readers that
        # ``_by_path`` and ``_by_id`` are complete.
        ordered = tuple(sorted(records, key=_recency))
        by_id: dict[str, list[SessionRecord]] = {}
        for record in ordered:
            by_id.setdefault(record.session_id, []).append(record)
        self._by_path = {record.path: record for record in ordered}
        self._by_id = by_id
        self._all = ordered

    def _decoded(self, raws: list[bytes]) -> list[SessionRecord]:
        assert self._snapshot is not None
        return [_decode(raw, self._snapshot.where) for raw in raws]

    @property
    def records(self) -> tuple[SessionRecord, ...]:
        if self._all is None:
            assert self._snapshot is not None
            self._load(self._decoded(self._snapshot.all()))
        assert self._all is not None
        return self._all

    @property
    def by_path(self) -> dict[str, SessionRecord]:
        self.records  # noqa: B018 (loads every record)
        assert self._by_path is not None
        return self._by_path

    def record(self, path: str) -> SessionRecord | None:
        """The record of ``path``, or None when it is not indexed."""
        if self._by_path is not None:
            return self._by_path.get(path)
        if path not in self._fetched:
            assert self._snapshot is not None
            found = self._decoded(self._snapshot.by_paths([path]))
            self._fetched[path] = found[0] if found else None
        return self._fetched[path]

    def with_id(self, session_id: str) -> list[SessionRecord]:
        if self._all is None and session_id not in self._by_id:
            assert self._snapshot is not None
            found = sorted(self._decoded(self._snapshot.by_id(session_id)), key=_recency)
            self._by_id[session_id] = found
        return self._by_id.get(session_id, [])

    def hot(self, hot_sessions: int) -> tuple[SessionRecord, ...]:
        if self._all is None:
            if hot_sessions not in self._newest:
                assert self._snapshot is not None
                newest = sorted(self._decoded(self._snapshot.newest(hot_sessions)),
                                key=_recency)
                self._newest[hot_sessions] = tuple(newest[: max(hot_sessions, 0)])
            return self._newest[hot_sessions]
        return self._all[: max(hot_sessions, 0)]

    def folders_of(self, project: str) -> tuple[str, ...]:
        """The folders indexed sessions worked in that are ``project`` or inside it (what
        their documents' ``project`` field holds); worked out once per index generation (a
        server started in a project asks on every recall)."""
        found = self._folders_of.get(project)
        if found is None:
            if len(self._folders_of) >= 64:
                self._folders_of.clear()
            # Over a snapshot, from the index's terms: loading every record to read their
            # folders was a third of a one-shot recall's time at 1,040 sessions.
            folders = (self._snapshot.folders(project.rstrip("/") or "/")
                       if self._snapshot is not None and self._all is None
                       else {r.cwd for r in self.records if r.cwd is not None})
            found = self._folders_of[project] = tuple(sorted(
                folder for folder in folders if in_project(folder, project)))
        return found

    def outside(self, roots: tuple[Path, ...]) -> frozenset[str]:
        """Paths of the indexed sessions under none of ``roots`` (one index may hold the
        sessions of several roots); worked out once per index generation."""
        found = self._outside.get(roots)
        if found is None:
            found = self._outside[roots] = frozenset(
                r.path for r in self.records if not holds(roots, r.path))
        return found

    def tiers(self, hot_sessions: int) -> dict[str, Tier]:
        hot = max(hot_sessions, 0)
        return {r.path: ("hot" if i < hot else "cold") for i, r in enumerate(self.records)}

    def unique_id(self, record: SessionRecord) -> bool:
        return len(self.with_id(record.session_id)) == 1

    def handle(self, record: SessionRecord) -> str:
        """How to name the session in a request: its id when unique, else its path."""
        return record.session_id if self.unique_id(record) else record.path

    def matching(
        self, session: str, roots: tuple[Path, ...] | None = None
    ) -> list[SessionRecord]:
        """Records whose id is ``session`` or whose path is ``session`` (absolute, or
        relative to a sessions root); with roots, only files inside one of them (symlinks
        and ``..`` resolved), so no request reaches a file outside the sessions roots."""
        return [record for record in self._find(session, roots)
                if roots is None or inside_any(roots, record.path)]

    def _find(self, session: str, roots: tuple[Path, ...] | None) -> list[SessionRecord]:
        found = list(self.with_id(session))
        if found:
            return found
        candidates = [Path(session).expanduser()]
        if roots is not None and not candidates[0].is_absolute():
            candidates.extend(root / session for root in roots)
        for candidate in candidates:
            for name in (str(candidate.absolute()), str(candidate.resolve())):
                record = self.record(name)
                if record is not None:
                    return [record]
        return []

    def resolve(self, session: str, roots: tuple[Path, ...] | None = None) -> SessionRecord:
        """The one record named by ``session``; expand's ``session_not_found`` /
        ``ambiguous_session`` otherwise."""
        found = self.matching(session, roots)
        if not found:
            raise ExpandError(
                "session_not_found",
                f"session {clipped(session)}: not in the memory index"
                + (f" under {', '.join(map(str, roots))}" if roots is not None else "")
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


def _recency(record: SessionRecord) -> tuple[int, str]:
    return (-record.mtime_ns, record.path)


def _decode(raw: bytes, where: str) -> SessionRecord:
    try:
        return SessionRecord.from_json(orjson.loads(raw))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, IndexError) as exc:
        raise MemoryIndexError(f"{where}: a session record in the index is damaged "
                          f"({type(exc).__name__}); {REBUILD}") from None


_CACHE: dict[Path, tuple[int, Catalog]] = {}


def load_catalog(index: Memory) -> Catalog:
    """The catalog of the index's current commit (cached per reader generation); records
    are read from the index as they are asked for."""
    generation = index.refresh()
    cached = _CACHE.get(index.root)
    if cached is not None and cached[0] == generation:
        return cached[1]
    catalog = Catalog(snapshot=index.records())
    _CACHE[index.root] = (generation, catalog)
    return catalog


# --- views -----------------------------------------------------------------------------


class SessionListing(TypedDict):
    sessionId: str
    path: str
    agent: str
    """The agent that wrote the session (:data:`fabric_memory.sources.AGENTS`)."""
    project: str | None
    """The folder the agent worked in (the same as ``cwd``, kept for earlier readers)."""
    cwd: str | None
    modifiedAt: str
    tier: Tier
    entries: int
    operations: int
    sourceHash: str
    lineageFingerprint: str
    indexedAt: str
    stale: bool
    staleReason: str | None
    complete: bool


class SessionsRequest(TypedDict, total=False):
    """The filters and page of a listing (what ``next`` holds)."""

    project: str
    agent: str
    since: str
    until: str
    limit: int
    offset: int
    hotSessions: int


REQUEST_DEFAULTS: dict[str, Any] = {"offset": 0, "hotSessions": DEFAULT_HOT_SESSIONS}
"""The value each optional listing key has when left out."""


class SessionsReport(TypedDict):
    index: str
    hotSessions: int
    total: int
    offset: int
    sessions: list[SessionListing]
    next: SessionsRequest | None


MAX_SESSIONS_LIMIT = 200


def list_sessions(
    *,
    index: str | os.PathLike[str] | None = None,
    hot_sessions: int = DEFAULT_HOT_SESSIONS,
    project: str | None = None,
    since: str | None = None,
    until: str | None = None,
    limit: int | None = None,
    offset: int = 0,
    agent: str | None = None,
    sessions: str | os.PathLike[str] | None = None,
) -> SessionsReport:
    """Indexed sessions, newest first, with tier, counts, hashes and staleness.

    ``project`` keeps sessions whose working directory (the header's ``cwd``) is that
    folder or inside it; ``agent`` those one agent wrote; ``since``/``until`` (ISO-8601,
    inclusive) bound the file's last modification; ``sessions`` keeps the files under those
    sessions roots (an index may hold others). ``limit`` pages the listing (``next`` asks
    for the following page).
    """
    check_names(("--index", index), ("--project", project), ("--sessions", sessions))
    check_hot_sessions(hot_sessions)
    if limit is not None and not 1 <= limit <= MAX_SESSIONS_LIMIT:
        raise UsageError(f"--limit {clipped(limit)}: must be between 1 and {MAX_SESSIONS_LIMIT}")
    if offset < 0:
        raise UsageError(f"--offset {clipped(offset)}: must not be negative")
    if agent is not None and agent not in AGENTS:
        raise UsageError(f"--agent {clipped(agent)}: use one of {', '.join(AGENTS)}")
    low, high = parse_time_ns(since, "--since"), parse_time_ns(until, "--until")
    handle = open_memory(index_root(index))
    catalog = load_catalog(handle)
    tiers = catalog.tiers(hot_sessions)
    outside = catalog.outside(sessions_roots(sessions)) if sessions is not None else frozenset()
    chosen = [r for r in catalog.records
              if r.path not in outside and in_project(r.cwd, project)
              and agent in (None, r.agent)
              and (low is None or r.mtime_ns >= low) and (high is None or r.mtime_ns <= high)]
    end = len(chosen) if limit is None else offset + limit
    listing: list[SessionListing] = [
        {
            "sessionId": r.session_id, "path": r.path, "agent": r.agent, "project": r.cwd,
            "cwd": r.cwd,
            "modifiedAt": iso_time(datetime.fromtimestamp(r.mtime_ns / 1e9, UTC)),
            "tier": tiers[r.path],
            "entries": r.entries, "operations": r.operations, "sourceHash": r.source_hash,
            "lineageFingerprint": r.lineage_fingerprint, "indexedAt": r.indexed_at,
            "stale": r.stale, "staleReason": r.stale_reason, "complete": r.complete,
        }
        for r in chosen[offset:end]
    ]
    following: SessionsRequest | None = None
    if end < len(chosen) and limit is not None:
        given = {"project": project, "agent": agent, "since": since, "until": until, "limit": limit,
                 "hotSessions": None if hot_sessions == DEFAULT_HOT_SESSIONS else hot_sessions}
        following = cast(SessionsRequest, {k: v for k, v in given.items() if v is not None})
        following["offset"] = end
    return {"index": str(handle.root), "hotSessions": hot_sessions, "total": len(chosen),
            "offset": offset, "sessions": listing, "next": following}


def in_project(cwd: str | None, project: str | None) -> bool:
    """Whether a session that worked in ``cwd`` belongs to ``project`` (the folder itself
    or one inside it; every session when ``project`` is None)."""
    if project is None:
        return True
    if cwd is None:
        return False
    folder = project.rstrip("/") or "/"
    return cwd == folder or cwd.startswith(folder if folder.endswith("/") else folder + "/")


def parse_time_ns(text: str | None, option: str) -> int | None:
    if text is None:
        return None
    parsed = iso_ms(text.strip())
    if parsed is None:
        raise QueryError(f"{option} {clipped(text)}: not an ISO-8601 time "
                         "(e.g. 2026-01-02T10:00:00Z)")
    return parsed * 1_000_000


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
    check_names(("--index", index))
    check_hot_sessions(hot_sessions)
    handle = open_memory(index_root(index))
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
    from ..session import hash_file  # a recall process never hashes: loaded here only

    handle = open_memory(index_root(index))
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


def _index_problems(handle: Memory, catalog: Catalog) -> tuple[int, list[str]]:
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
    sessions: str | os.PathLike[str] | None, index: str | os.PathLike[str] | None,
    agents: str | None = None,
) -> tuple[tuple[Path, ...], Memory]:
    """The sessions roots (real paths: every file is keyed by its real path) and the index
    handle for explicit or default locations (``agents`` narrows discovered folders)."""
    handle = open_memory(index_root(index))
    return sessions_roots(sessions, agents=agents, projects=IndexedProjects(handle)), handle


class IndexedProjects(Collection[str]):
    """The project folders of the indexed sessions (``agent``: of that agent's only), read
    from the catalog only when a source asks (Catui's traces live in its sessions'
    workspaces)."""

    def __init__(self, handle: Memory, agent: str | None = None) -> None:
        self._handle = handle
        self._agent = agent
        self._projects: frozenset[str] | None = None

    def of(self, agent: str) -> IndexedProjects:
        """The projects of ``agent``'s sessions (what its source's folders depend on)."""
        return IndexedProjects(self._handle, agent)

    def _loaded(self) -> frozenset[str]:
        if self._projects is None:
            try:
                records = load_catalog(self._handle).records
            except MemoryIndexError:
                records = ()
            self._projects = frozenset(r.cwd for r in records if r.cwd
                                       and self._agent in (None, r.agent))
        return self._projects

    def __contains__(self, folder: object) -> bool:
        return folder in self._loaded()

    def __iter__(self) -> Iterator[str]:
        return iter(self._loaded())

    def __len__(self) -> int:
        return len(self._loaded())
