"""A sharded memory index that answers as one.

Layout of a sharded index folder (docs/scale.md)::

    manifest.json    the shards, their files and hashes; written last, atomically
    writer.lock      one build at a time
    shards/<name>/   one complete single index each (``v<schema>/...``), never changed once
                     renamed in; a rebuilt shard gets a new name
    shards/.tmp-*    a shard being written: never read, removed by the next build
    delta/           a single index of the sessions written since the build (the live
                     index, the hot tier); each session it holds masks that session's
                     documents in the shards (:data:`~.index.MASK_KIND`)

A recall ranks every shard in parallel (each only as deep as the page needs), merges the
rankings by score (every-word hits first, ties by shard order then the shard's own order,
so pages never overlap or skip) and reads only the documents it keeps. Each shard scores
with its own term statistics, so the order of a sharded recall may differ from that of a
single index over the same files; the hits, counts and pages agree.
"""

from __future__ import annotations

import heapq
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict, cast

import orjson
import xxhash

from ..errors import MemoryIndexError
from .index import (
    LOCATION_FIELDS,
    MASK_KIND,
    REBUILD,
    SCHEMA_TAG,
    SESSION_KIND,
    HitPage,
    MemoryIndex,
    Ranked,
    Ranking,
    RecordSnapshot,
    SearchSpec,
    Writer,
    open_index,
)

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

MANIFEST = "manifest.json"
SHARDS = "shards"
DELTA = "delta"
TEMPORARY = ".tmp-"
MANIFEST_FORMAT = 2
"""2: each file names its session id."""


class ShardFile(TypedDict):
    """One session file a shard was built from, as it was when read."""

    path: str
    checked: list[int] | None
    """``[mtime_ns, size, ctime_ns]`` (:func:`~.catalog.stat_key`), None when it was gone."""
    sourceHash: str | None
    """Its bytes' hash; None when it was not indexed (invalid, another agent's)."""
    sessionId: NotRequired[str]
    """The session's id, when it was indexed."""


class ShardEntry(TypedDict):
    name: str
    hash: str
    """xxh3-128 of the shard's files (names and bytes): ``verify`` recomputes it."""
    bytes: int
    sessions: int
    documents: int
    files: list[ShardFile]


class Manifest(TypedDict):
    format: int
    schemaVersion: str
    rulesFingerprint: str
    roots: list[str]
    createdAt: str
    sessions: int
    documents: int
    shards: list[ShardEntry]


def is_sharded(root: Path) -> bool:
    """Whether ``root`` holds a sharded index (its manifest)."""
    return (root / MANIFEST).is_file()


def read_manifest(root: Path) -> Manifest:
    """The manifest of the sharded index at ``root``; a clear error when it is damaged."""
    where = root / MANIFEST
    try:
        value = orjson.loads(where.read_bytes())
        if not isinstance(value, dict) or not isinstance(value.get("shards"), list):
            raise TypeError("not a manifest object")
        for shard in value["shards"]:
            str(shard["name"]), list(shard["files"])
    except FileNotFoundError:
        raise MemoryIndexError(f"{root}: no memory index yet; run `fabric-memory reindex`") \
            from None
    except (OSError, orjson.JSONDecodeError, TypeError, KeyError) as exc:
        raise MemoryIndexError(f"{where}: the sharded index's manifest is damaged "
                               f"({type(exc).__name__}: {exc}); {REBUILD}") from None
    return cast(Manifest, value)


def shard_hash(shard: Path) -> tuple[str, int]:
    """The xxh3-128 of a shard's files (relative names and bytes, in name order) and their
    size; Tantivy's lock files are left out."""
    digest = xxhash.xxh3_128()
    size = 0
    for path in sorted(p for p in shard.rglob("*") if p.is_file()):
        if path.name.startswith(".tantivy-") or path.name == "writer.lock":
            continue
        digest.update(str(path.relative_to(shard)).encode() + b"\0")
        with path.open("rb") as file:
            while chunk := file.read(1 << 20):
                digest.update(chunk)
                size += len(chunk)
    return digest.hexdigest(), size


@dataclass(frozen=True, slots=True)
class _State:
    """What one manifest and delta commit give a reader."""

    key: tuple[int, int, int]
    manifest: Manifest
    shards: tuple[MemoryIndex, ...]
    shard_of: dict[str, int]
    """Path → the shard (by position) that indexed it."""
    holds: tuple[frozenset[str] | None, ...]
    """Each shard's paths and session ids: a record lookup asks only the shards that can
    have it."""
    masked: frozenset[str] = frozenset()
    """Paths whose documents the delta replaced (or removed)."""
    delta_records: frozenset[str] = frozenset()
    """Paths the delta holds a record of (it wins over the shard's)."""
    delta_generation: int = -1


_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            from concurrent.futures import ThreadPoolExecutor  # a single index never needs it

            _POOL = ThreadPoolExecutor(max_workers=min(16, 2 * (os.cpu_count() or 1)),
                                       thread_name_prefix="fabric-memory-shard")
        return _POOL


class ShardedIndex:
    """The shards and the delta of a sharded index, read as one index (the interface of
    :class:`~.index.MemoryIndex` that recall, expand, sessions, stats and verify use)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.directory = root
        self.delta = MemoryIndex(root / DELTA)
        self.generation = 0
        self._state: _State | None = None
        self._lock = threading.RLock()

    # the current state -----------------------------------------------------------------

    def refresh(self) -> int:
        """Reload when a build wrote a new manifest or the delta committed; return the
        reader generation."""
        with self._lock:
            self._current()
            return self.generation

    def _current(self) -> _State:
        with self._lock:
            key = _stat(self.root / MANIFEST)
            state = self._state
            if state is None or state.key != key:
                state = self._load(key)
            delta = self.delta.refresh() if self.delta.exists() else -1
            if delta != state.delta_generation:
                state = replace(state, delta_generation=delta,
                                masked=self.delta.paths_of(MASK_KIND) if delta >= 0
                                else frozenset(),
                                delta_records=self.delta.paths_of(SESSION_KIND) if delta >= 0
                                else frozenset())
            if state is not self._state:
                self._state = state
                self.generation += 1
            return state

    def _load(self, key: tuple[int, int, int]) -> _State:
        manifest = read_manifest(self.root)
        if manifest.get("schemaVersion") != SCHEMA_TAG:
            raise MemoryIndexError(
                f"{self.root}: sharded index has schema v{manifest.get('schemaVersion')}, this "
                f"engine needs v{SCHEMA_TAG}; run `fabric-memory reindex` to rebuild it")
        shards = tuple(MemoryIndex(self.root / SHARDS / entry["name"])
                       for entry in manifest["shards"])
        shard_of = {file["path"]: number for number, entry in enumerate(manifest["shards"])
                    for file in entry["files"]}
        holds = tuple(frozenset(name for file in entry["files"]
                                for name in (file["path"], file.get("sessionId")) if name)
                      if manifest.get("format", 1) >= MANIFEST_FORMAT else None
                      for entry in manifest["shards"])
        return _State(key, manifest, shards, shard_of, holds)

    def manifest(self) -> Manifest:
        return self._current().manifest

    def exists(self) -> bool:
        return is_sharded(self.root)

    # writing (the delta) ---------------------------------------------------------------

    def writer(self, *, timeout: float, threads: int = 0, rebuild: bool = False) -> Writer:
        """The delta's writer: what it writes masks the shards' copy of each session."""
        writer = self.delta.writer(timeout=timeout, threads=threads, rebuild=rebuild)
        writer.masks = True
        return writer

    # reading ---------------------------------------------------------------------------

    def records(self) -> RecordSnapshot:
        """The records of every shard (the delta's winning over a shard's)."""
        state = self._current()
        parts = self._parts(state)
        snapshot = parts[0].records()
        hidden = sorted(state.masked | state.delta_records)
        for shard, holds in zip(state.shards, state.holds, strict=True):
            if shard is not parts[0]:
                snapshot.add(shard.searcher(), hidden, holds)
        snapshot.where = str(self.root)
        return snapshot

    def search(self, spec: SearchSpec, *, limit: int, offset: int, snippet_chars: int) -> HitPage:
        """Every shard ranked for the first ``offset + limit`` hits (in parallel), merged;
        only the page's documents are read."""
        state = self._current()
        jobs = [(part, self._spec_for(part, spec, state)) for part in self._parts(state)]

        def rank(job: tuple[MemoryIndex, SearchSpec]) -> Ranking:
            return job[0].rank(job[1], limit=offset + limit, offset=0)

        rankings = list(map(rank, jobs) if len(jobs) == 1 else _pool().map(rank, jobs))
        ordered = heapq.merge(*([(number, ranked) for ranked in ranking.found]
                                for number, ranking in enumerate(rankings)),
                              key=lambda item: item[1].key())
        page = list(islice(ordered, offset, offset + limit))
        chosen: dict[int, list[Ranked]] = {}
        for number, ranked in page:
            chosen.setdefault(number, []).append(ranked)
        read = {number: iter(rankings[number].read(found, snippet_chars))
                for number, found in chosen.items()}
        hits = [next(read[number]) for number, _ in page]
        words = [ranking.all_words for ranking in rankings]
        all_words = None if any(w is None for w in words) else sum(w or 0 for w in words)
        return HitPage(sum(ranking.total for ranking in rankings), hits, all_words,
                       rankings[0].words if rankings else None)

    def frequencies(self, terms: Sequence[str]) -> tuple[int, list[int]]:
        """Documents and documents holding each of ``terms``, over every part (an outdated
        copy of a session in a shard still counts: a frequency is an estimate)."""
        total, counts = 0, [0] * len(terms)
        for part in self._parts(self._current()):
            documents, found = part.frequencies(terms)
            total += documents
            counts = [a + b for a, b in zip(counts, found, strict=True)]
        return total, counts

    def lookup(
        self, path: str, *, addresses: Sequence[str] = (), positions: Sequence[int] = (),
        fields: Sequence[str] = LOCATION_FIELDS,
    ) -> list[dict[str, Any]]:
        """The session's documents where they are: its shard, or the delta."""
        return self._holder(path).lookup(path, addresses=addresses, positions=positions,
                                         fields=fields)

    def count(self, kind: str, path: str | None = None, excluded: Sequence[str] = ()) -> int:
        if path is not None:
            return self._holder(path).count(kind, path)
        state = self._current()
        hidden = sorted(state.masked | set(excluded))
        return sum(part.count(kind, None, excluded if part is self.delta else hidden)
                   for part in self._parts(state))

    def size_bytes(self) -> int:
        return sum(part.size_bytes() for part in self._parts(self._current()))

    def unreadable_documents(self, sample: int) -> tuple[int, list[str]]:
        """A sample of every shard's stored documents read back, and each shard's bytes
        against the hash the manifest holds for it."""
        state = self._current()
        parts = self._parts(state)
        sampled, problems = 0, []
        for part in parts:
            read, unreadable = part.unreadable_documents(max(sample // len(parts), 1))
            sampled += read
            problems.extend(unreadable)
        for entry, shard in zip(state.manifest["shards"], state.shards, strict=True):
            digest, _ = shard_hash(shard.root)
            if digest != entry["hash"]:
                problems.append(f"{shard.root}: shard files changed since the build (hash "
                                f"{digest}, the manifest says {entry['hash']})")
        return sampled, problems

    # routing ---------------------------------------------------------------------------

    def _parts(self, state: _State) -> list[MemoryIndex]:
        """The delta (when it exists), then the shards in manifest order."""
        return ([self.delta] if state.delta_generation >= 0 else []) + list(state.shards)

    def _holder(self, path: str) -> MemoryIndex:
        state = self._current()
        number = state.shard_of.get(path)
        if path in state.masked or number is None:
            return self.delta
        return state.shards[number]

    def _spec_for(self, part: MemoryIndex, spec: SearchSpec, state: _State) -> SearchSpec:
        if part is self.delta or not state.masked:
            return spec
        return replace(spec, excluded=(*spec.excluded, ("path", tuple(sorted(state.masked)))))


def _stat(path: Path) -> tuple[int, int, int]:
    try:
        st = os.stat(path)
    except OSError:
        return (0, 0, 0)
    return (st.st_ino, st.st_mtime_ns, st.st_size)


Memory = MemoryIndex | ShardedIndex
"""A memory index as every reader takes it: one index, or a sharded one."""

_SHARDED: dict[Path, ShardedIndex] = {}


def open_memory(root: Path) -> Memory:
    """The process-wide handle of the memory index at ``root``: a sharded index when a
    manifest is there, else the single index (:func:`~.index.open_index`)."""
    if not is_sharded(root):
        return open_index(root)
    key = root.resolve()
    handle = _SHARDED.get(key)
    if handle is None:
        handle = _SHARDED[key] = ShardedIndex(key)
    return handle

