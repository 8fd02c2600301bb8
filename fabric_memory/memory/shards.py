"""Build a sharded memory index: batches of session files by size, one task per shard on
an engine (a Dask cluster, or this machine: a cluster of one), the manifest written last.

A task writes its shard under a temporary name and renames it in when complete, so no
reader (and no later build) ever sees part of a shard; a task run twice (a retry after a
worker died) finds its shard already there and keeps it. A re-run plans by ``stat``: a
shard whose files all kept their mtime, size and ctime is kept without reading any of
them; a file whose size is the same but whose times moved is hashed, and its shard is
rebuilt only when the bytes changed. Files that are new go into new shards; a shard
holding a changed or removed file is rebuilt alone. The manifest swaps the new set of
shards in at once (:mod:`.sharded` documents the layout); the shards of the build before
are removed by the next build, so a reader still answering from them is never cut off.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import orjson
import xxhash

from ..errors import MemoryIndexError, UsageError
from ..redact import RULES_FINGERPRINT
from ..session import hash_file
from .catalog import Catalog, now_iso, stat_key
from .index import MASK_KIND, SCHEMA_TAG, SESSION_KIND, IndexLock, MemoryIndex
from .locations import make_private_dirs
from .report import Progress, ProgressCallback, ReindexReport, add_report
from .sharded import (
    DELTA,
    MANIFEST,
    MANIFEST_FORMAT,
    SHARDS,
    TEMPORARY,
    Manifest,
    ShardEntry,
    ShardFile,
    is_sharded,
    read_manifest,
    shard_hash,
)

SHARD_BYTES = 256 * 1024 * 1024
"""Session bytes per shard by default (about a million documents of typical sessions)."""
TASK_RETRIES = 3
"""How often a cluster retries a shard task that failed (a worker that died is retried by
the scheduler on another worker besides)."""


@dataclass(frozen=True, slots=True)
class ShardTask:
    """One shard to build: what a worker needs, and nothing of the machine that planned it."""

    name: str
    files: tuple[str, ...]
    roots: tuple[str, ...]
    """The sessions roots: the worker reads no file outside them."""
    folder: str
    """The shards folder of the index (shared storage)."""
    max_line_bytes: int
    agents: str | None


@dataclass(frozen=True, slots=True)
class ShardResult:
    entry: ShardEntry
    report: ReindexReport


TaskFunction = Callable[[ShardTask], ShardResult]


class Engine(Protocol):
    """Where shard tasks run."""

    where: str
    """As the report names it: ``this machine``, ``local:2``, ``tcp://host:8786``."""
    workers: int

    def run(self, function: TaskFunction, tasks: Sequence[ShardTask]) -> Iterator[ShardResult]:
        """Each task's result as it completes."""
        ...


class LocalEngine:
    """This machine: the tasks in a pool of processes, or one after another here."""

    where = "this machine"

    def __init__(self, pool: Executor | None, workers: int) -> None:
        self._pool = pool
        self.workers = workers

    def run(self, function: TaskFunction, tasks: Sequence[ShardTask]) -> Iterator[ShardResult]:
        if self._pool is None or len(tasks) < 2:
            yield from map(function, tasks)
            return
        futures = [self._pool.submit(function, task) for task in tasks]
        try:
            for future in as_completed(futures):
                yield future.result()
        finally:
            for future in futures:
                future.cancel()


# --- the task ---------------------------------------------------------------------------


def write_shard(task: ShardTask, index: Callable[[MemoryIndex], ReindexReport]) -> ShardResult:
    """Run ``index`` into a new single index under a temporary name, then rename it to the
    task's shard (on a worker; the caller decides how files are read into it)."""
    folder = Path(task.folder)
    final = folder / task.name
    temporary = folder / f"{TEMPORARY}{task.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    make_private_dirs(folder)
    try:
        handle = MemoryIndex(temporary)
        report = index(handle)
        records = {r.path: r for r in Catalog(snapshot=handle.records()).records}
        del handle  # its Tantivy reader holds the files open
        try:
            os.rename(temporary, final)
        except OSError:
            if not (final / f"v{SCHEMA_TAG}" / "meta.json").is_file():
                raise
            shutil.rmtree(temporary)  # another run of this task finished first: keep its shard
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    digest, size = shard_hash(final)
    files: list[ShardFile] = []
    for path in task.files:
        record = records.get(path)
        checked = record.checked if record is not None else stat_key(path)
        file: ShardFile = {"path": path, "checked": list(checked) if checked else None,
                           "sourceHash": record.source_hash if record is not None else None}
        if record is not None:
            file["sessionId"] = record.session_id
        files.append(file)
    entry: ShardEntry = {
        "name": task.name, "hash": digest, "bytes": size, "sessions": len(records),
        "documents": sum(r.entries + r.operations for r in records.values()), "files": files,
    }
    return ShardResult(entry, report)


# --- the build --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Plan:
    kept: list[ShardEntry]
    tasks: list[ShardTask]
    removed: list[str]
    """Files of the last build that are gone."""


def build_shards(
    *, root: Path, roots: tuple[Path, ...], files: Sequence[str], engine: Engine,
    function: TaskFunction, report: ReindexReport, full: bool, shard_bytes: int,
    max_line_bytes: int, agents: str | None, lock_timeout: float,
    progress: ProgressCallback | None,
) -> ReindexReport:
    """Bring the sharded index at ``root`` up to date with ``files`` (the session files
    under ``roots``), running ``function`` on ``engine`` for each shard to (re)build."""
    if shard_bytes < 1:
        raise UsageError(f"--shard-mb {shard_bytes}: must be positive")
    with IndexLock(root) as lock:
        lock.acquire(lock_timeout)
        _refuse_single(root)
        old = _last_manifest(root, full, report)
        if old is not None and (old["schemaVersion"], old["rulesFingerprint"]) != (
                SCHEMA_TAG, RULES_FINGERPRINT):
            report["notices"].append(f"sharded index at {root} had schema "
                                     f"v{old['schemaVersion']}; rebuilt with v{SCHEMA_TAG}")
            full = True
        plan = _plan(old, roots, files, full, shard_bytes, root, max_line_bytes, agents)
        report["skipped"] = done = sum(len(entry["files"]) for entry in plan.kept)
        report["removed"].extend({"path": path, "reason": "the session file is gone; its "
                                  "documents removed"} for path in plan.removed)
        built: dict[str, ShardEntry] = {}
        for result in engine.run(function, plan.tasks):
            built[result.entry["name"]] = result.entry
            result.report["sessionsRoots"] = []  # the run's own, not once per task
            add_report(report, result.report)
            done += len(result.entry["files"])
            if progress is not None:
                progress(Progress(done, len(files), report["indexed"], report["skipped"]))
        report["sessions"] = len(files)  # each task counted its own
        entries = plan.kept + [built[task.name] for task in plan.tasks]
        _write_manifest(root, roots, entries)
        _remove_unlisted(root, entries, old)
        _clear_delta(root, entries, lock_timeout)
    report["commits"] = len(plan.tasks)
    report["shards"] = {"total": len(entries), "built": len(plan.tasks), "kept": len(plan.kept),
                        "engine": engine.where}
    report["workers"] = engine.workers
    return report


def _last_manifest(root: Path, full: bool, report: ReindexReport) -> Manifest | None:
    """The manifest of the last build; with ``full``, a damaged one is rebuilt from the
    sessions instead (nothing of it is kept anyway)."""
    if not is_sharded(root):
        return None
    try:
        return read_manifest(root)
    except MemoryIndexError as exc:
        if not full:
            raise
        report["notices"].append(f"{exc.message.split('; ')[0]}; rebuilt from the sessions")
        return None


def _refuse_single(root: Path) -> None:
    if not is_sharded(root) and any(p.name.startswith("v") and p.is_dir()
                                    for p in _listing(root)):
        raise UsageError(f"{root}: holds a single memory index; pass --index DIR naming a new "
                         "folder for the sharded one (or remove this one)")


def _listing(folder: Path) -> list[Path]:
    try:
        return list(folder.iterdir())
    except OSError:
        return []


def _plan(
    old: Manifest | None, roots: tuple[Path, ...], files: Sequence[str], full: bool,
    shard_bytes: int, root: Path, max_line_bytes: int, agents: str | None,
) -> _Plan:
    present = set(files)
    kept: list[ShardEntry] = []
    batches: list[list[str]] = []
    assigned: set[str] = set()
    removed: list[str] = []
    for entry in old["shards"] if old is not None else []:
        current = [f["path"] for f in entry["files"] if f["path"] in present]
        removed.extend(f["path"] for f in entry["files"] if f["path"] not in present)
        if full:
            continue
        assigned.update(current)
        if len(current) == len(entry["files"]) and all(map(_unchanged, entry["files"])):
            kept.append(entry)
        elif current:
            batches.append(current)
    batches.extend(_packed([path for path in files if path not in assigned], shard_bytes))
    build = uuid.uuid4().hex
    folder = str(root / SHARDS)
    tasks = [ShardTask(_name(build, batch), tuple(batch), tuple(map(str, roots)), folder,
                       max_line_bytes, agents) for batch in batches]
    return _Plan(kept, tasks, removed)


def _unchanged(file: ShardFile) -> bool:
    """Whether the file is as the shard read it: the same stat, or (the times moved, the
    size did not) the same bytes; the kept entry takes the new stat."""
    now = stat_key(file["path"])
    recorded = file["checked"]
    if now is None or recorded is None:
        return False
    if list(now) == recorded:
        return True
    if now[1] != recorded[1] or file["sourceHash"] is None:
        return False
    try:
        same = hash_file(file["path"]) == file["sourceHash"]
    except OSError:
        return False
    if same:
        file["checked"] = list(now)
    return same


def _packed(files: Sequence[str], shard_bytes: int) -> Iterator[list[str]]:
    """``files`` in order, in batches of about ``shard_bytes`` bytes each."""
    batch: list[str] = []
    size = 0
    for path in files:
        key = stat_key(path)
        batch.append(path)
        size += key[1] if key is not None else 0
        if size >= shard_bytes:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def _name(build: str, batch: Sequence[str]) -> str:
    """A new shard's name: the same for every run of its task in one build (a retry finds
    the shard its first run finished), new in every build."""
    return "shard-" + xxhash.xxh3_64_hexdigest("\0".join([build, *batch]).encode())


def _write_manifest(root: Path, roots: tuple[Path, ...], entries: list[ShardEntry]) -> None:
    manifest: Manifest = {
        "format": MANIFEST_FORMAT, "schemaVersion": SCHEMA_TAG,
        "rulesFingerprint": RULES_FINGERPRINT, "roots": [str(r) for r in roots],
        "createdAt": now_iso(), "sessions": sum(e["sessions"] for e in entries),
        "documents": sum(e["documents"] for e in entries), "shards": entries,
    }
    temporary = root / f"{TEMPORARY}{MANIFEST}-{uuid.uuid4().hex[:8]}"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, root / MANIFEST)


def _remove_unlisted(root: Path, entries: list[ShardEntry], old: Manifest | None) -> None:
    """Remove unfinished shards and shards neither this build nor the one before lists."""
    keep = {e["name"] for e in entries} | {e["name"] for e in (old or {"shards": []})["shards"]}
    for path in _listing(root / SHARDS):
        if path.name not in keep:
            shutil.rmtree(path, ignore_errors=True)
    for path in _listing(root):
        if path.name.startswith(TEMPORARY):
            path.unlink(missing_ok=True)


def _clear_delta(root: Path, entries: list[ShardEntry], lock_timeout: float) -> None:
    """Drop from the delta the sessions the shards now hold as the delta has them."""
    delta = MemoryIndex(root / DELTA)
    if not delta.exists():
        return
    hashes = {f["path"]: f["sourceHash"] for e in entries for f in e["files"]}
    records = {r.path: r.source_hash for r in Catalog(snapshot=delta.records()).records}
    masked = delta.paths_of(SESSION_KIND) | delta.paths_of(MASK_KIND)
    stale = [path for path in masked if (path in hashes and records.get(path) == hashes[path])
             or (path not in records and path not in hashes)]
    if not stale:
        return
    with delta.writer(timeout=lock_timeout, threads=1) as writer:
        for path in stale:
            writer.remove_session(path)
        writer.commit()

