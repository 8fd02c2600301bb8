"""``reindex``: bring the index up to date with a sessions directory.

Plan by ``stat`` alone (a file whose mtime and size match its record is skipped
without being opened; when nothing changed, no lock is taken and nothing is
committed), parse changed files in worker processes forked before any lock is
held, and let this process be the single writer. Each session's documents and catalog record are
replaced together; commits happen every ``commit_every`` documents and at the end,
so a crash leaves the last commit intact and the next run redoes only what it lost.
Invalid files are reported and skipped; documents of an earlier good version are
kept and their record marked stale. A file that is gone from under a root is forgotten:
its documents and record are deleted (deleting a session removes it from memory).

Every file is keyed by its real path (symlinks and ``..`` resolved), so one file is one
record whatever the spelling of the root or a symlink to it inside the root.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, replace
from itertools import chain
from pathlib import Path

from ..arguments import check_name
from ..errors import MemoryIndexError, SessionError, UsageError, clipped, is_utf8, printable
from ..session import DEFAULT_MAX_LINE_BYTES, hash_file
from ..sources import read_source, reader_for, session_files, skipped
from .catalog import (
    Catalog,
    IndexedProjects,
    SessionRecord,
    StatKey,
    clamped_time,
    default_roots,
    load_catalog,
    now_iso,
    stat_key,
)
from .ignore import head_folder, ignored
from .index import Writer, close_inherited_locks, item_json
from .locations import SESSIONS_ENV, chosen_agents, discovered_roots, holds, inside_any
from .normalize import normalize_session
from .report import PathReason, ProgressCallback, add_report, new_report
from .report import Progress as Progress  # where callers have always imported them from
from .report import ReindexReport as ReindexReport
from .sharded import Memory, ShardedIndex
from .shards import (
    SHARD_BYTES,
    Engine,
    LocalEngine,
    ShardResult,
    ShardTask,
    build_shards,
    write_shard,
)
from .tombstones import Tombstones, load_tombstones

DEFAULT_LOCK_TIMEOUT = 60.0
DEFAULT_COMMIT_EVERY = 50_000
MAX_PROBLEMS = 20
PARALLEL_MIN = 4
"""Fewer files than this are parsed in-process (forking would cost more)."""
BATCH_FILES = 32
BATCH_BYTES = 1024 * 1024
"""A worker parses files in batches of at most this many files or about this many bytes."""


@dataclass(frozen=True, slots=True)
class _Task:
    path: str
    checked: StatKey | None
    known_hash: str | None
    """Set when only the mtime moved: hash first, parse only if the bytes changed."""
    max_line_bytes: int


@dataclass(frozen=True, slots=True)
class _Parsed:
    """What a worker sends back for one file."""

    path: str
    record: SessionRecord | None = None
    documents: tuple[str, ...] = ()
    unchanged: bool = False
    """The bytes hash to the recorded sourceHash (only the mtime moved)."""
    invalid: str | None = None
    notes: tuple[str, ...] = ()
    salvaged: tuple[str, ...] = ()
    redacted: tuple[tuple[str, int], ...] = ()
    ignored: str | None = None
    """Why the session is kept out of memory: its working folder is ignored."""


@dataclass(frozen=True, slots=True)
class _Sharding:
    cluster: str | None
    sharded: bool
    shard_bytes: int


def default_workers() -> int:
    return max(1, min(2, os.cpu_count() or 1))


def reindex(
    *,
    sessions: str | os.PathLike[str] | None = None,
    index: str | os.PathLike[str] | None = None,
    full: bool = False,
    workers: int | None = None,
    progress: ProgressCallback | None = None,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
    commit_every: int = DEFAULT_COMMIT_EVERY,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    session: str | os.PathLike[str] | None = None,
    agents: str | None = None,
    cluster: str | None = None,
    sharded: bool = False,
    shard_bytes: int = SHARD_BYTES,
) -> ReindexReport:
    """Index every changed ``*.jsonl`` session under the sessions roots (``full``: all of
    them); with ``session``, only that file (it must lie under one of the roots).
    ``agents`` (``pi,codex``; else ``$FABRIC_MEMORY_AGENTS``) reads only those agents' files.

    With ``cluster`` (a Dask scheduler's address, or ``local:N``), ``sharded``, or when
    ``index`` is a sharded index already, the index is built as shards of about
    ``shard_bytes`` session bytes, one task each, on that cluster or else on this machine
    (``workers`` processes: a cluster of one; docs/scale.md).

    With the default roots, a pass that indexes sessions naming new project folders looks
    for agent folders inside them (Catui's traces) and indexes those too, in the same call.
    """
    sharding = _Sharding(cluster, sharded or cluster is not None, shard_bytes)
    report = _reindex(sessions, index, full, workers, progress, lock_timeout, commit_every,
                      max_line_bytes, session, agents, sharding)
    while sessions is None and session is None and not os.environ.get(SESSIONS_ENV) \
            and "shards" not in report:
        _, handle = default_roots(None, index)
        known = set(report["sessionsRoots"])
        later = [str(root) for root in discovered_roots(agents, IndexedProjects(handle))
                 if str(root) not in known]
        if not later:
            break
        more = _reindex(os.pathsep.join(later), index, full, workers, progress, lock_timeout,
                        commit_every, max_line_bytes, None, agents, _Sharding(None, False, 0))
        add_report(report, more)
    return report


def _reindex(
    sessions: str | os.PathLike[str] | None, index: str | os.PathLike[str] | None, full: bool,
    workers: int | None, progress: ProgressCallback | None, lock_timeout: float,
    commit_every: int, max_line_bytes: int, session: str | os.PathLike[str] | None,
    agents: str | None, sharding: _Sharding,
) -> ReindexReport:
    started = time.perf_counter()
    check_name("--session", session)
    narrowed = chosen_agents(agents)
    roots, handle = default_roots(sessions, index, agents)
    for root in roots:
        if not root.is_dir():
            raise UsageError(
                f"{root}: sessions directory does not exist; pass --sessions DIR or set "
                "FABRIC_MEMORY_SESSIONS"
            )
    count = workers if workers is not None else default_workers()
    if count < 1:
        raise UsageError(f"--workers {count}: must be at least 1")
    report = new_report(roots, handle.root)
    cpus = os.cpu_count() or 1
    if count > cpus:
        report["notices"].append(f"--workers {count}: capped at {cpus}, the number of CPUs "
                                 "(more parsers than CPUs only compete for them)")
        count = cpus
    report["workers"] = count
    candidates = (chain.from_iterable(map(session_files, roots)) if session is None
                  else [_one_session(roots, session)])
    files, outside = _inside(roots, (path for path in candidates if not skipped(str(path))))
    report["invalid"].extend(outside)
    report["sessions"] = len(files)
    if sharding.sharded or isinstance(handle, ShardedIndex):
        forgotten = load_tombstones(handle.root)
        report["excluded"].extend(_forgotten_reason(path, forgotten) for path in files
                                  if forgotten.of_path(path) is not None)
        files = [path for path in files if forgotten.of_path(path) is None]
        if session is not None and sharding.cluster is not None:
            raise UsageError("--session: a cluster builds shards of many sessions; drop "
                             "--cluster to index the one file into the index's delta")
        if session is not None:  # the Pi extension's step after a compaction: the delta
            return _update_paths(handle, roots, files, lock_timeout, max_line_bytes, narrowed,
                                 fresh=False)
        with _engine(sharding.cluster, count) as engine:
            build_shards(root=handle.root, roots=roots, files=files, engine=engine,
                         function=build_shard, report=report, full=full,
                         shard_bytes=sharding.shard_bytes, max_line_bytes=max_line_bytes,
                         agents=agents, lock_timeout=lock_timeout, progress=progress)
        report["seconds"] = round(time.perf_counter() - started, 4)
        return report
    one = session is not None
    # A first look at the last commit, without the lock: nothing to do means no lock and
    # no commit; enough to do means the workers are forked now, before this process holds
    # any lock they could inherit.
    committed = _committed(handle)
    folders = _Folders()
    pending, gone, excluded = _plan_all(roots, files, committed, full, max_line_bytes, one,
                                        narrowed, load_tombstones(handle.root), folders)
    if not full and not pending and not gone:
        report["excluded"].extend(excluded)
        report["skipped"] = len(files) - len(excluded)
        report["invalid"].extend(_still_invalid(files, committed))
        report["seconds"] = round(time.perf_counter() - started, 4)
        return report
    with _workers(count if len(pending) >= PARALLEL_MIN else 1) as pool:
        # The workers start on that plan while this process waits for the lock and opens the
        # writer; the plan made under the lock is what counts, and it nearly always is the same.
        parsing = _Parsing(pending, pool, 4 * count)
        with handle.writer(timeout=lock_timeout, rebuild=full) as writer:
            if writer.notice:
                report["notices"].append(writer.notice)
                full = True
            catalog = load_catalog(handle)
            forgotten = load_tombstones(handle.root)  # read under the lock forget writes it under
            tasks, gone, excluded = _plan_all(roots, files, catalog, full, max_line_bytes, one,
                                              narrowed, forgotten, folders)
            if tasks != pending:
                parsing.cancel()
                parsing = _Parsing(tasks, pool, 4 * count)
            report["excluded"].extend(excluded)
            report["skipped"] = done = len(files) - len(tasks) - len(excluded)
            planned = {task.path for task in tasks} | {item["path"] for item in excluded}
            report["invalid"].extend(_still_invalid([f for f in files if f not in planned],
                                                     catalog))
            for parsed in parsing:
                _apply(writer, parsed, catalog.by_path.get(parsed.path), report, forgotten)
                if writer.pending >= commit_every:
                    writer.commit()
                    report["commits"] += 1
                done += 1
                if progress is not None:
                    progress(Progress(done, len(files), report["indexed"], report["skipped"]))
            for record, reason in gone:
                _forget(writer, record, report, reason)
            writer.commit()
            report["commits"] += 1
    report["seconds"] = round(time.perf_counter() - started, 4)
    return report


def reindex_paths(
    paths: Iterable[str | os.PathLike[str]],
    *,
    sessions: str | os.PathLike[str] | None = None,
    index: str | os.PathLike[str] | None = None,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    agents: str | None = None,
) -> ReindexReport:
    """Bring just these session files up to date, without walking the tree (the live
    index's step): a new or changed file is read and re-indexed, a file that is gone is
    dropped from the index with its record. One commit, under the writer lock."""
    roots, handle = default_roots(sessions, index, agents)
    return _update_paths(handle, roots, paths, lock_timeout, max_line_bytes,
                         chosen_agents(agents), fresh=False)


def _update_paths(
    handle: Memory, roots: tuple[Path, ...], paths: Iterable[str | os.PathLike[str]],
    lock_timeout: float, max_line_bytes: int, narrowed: frozenset[str] | None, *, fresh: bool,
    store: Path | None = None,
) -> ReindexReport:
    """(``fresh``: ``handle`` is a new, empty index, whose records need no looking up;
    ``store``: the index root whose forgotten sessions to leave out, if not ``handle``'s.)"""
    started = time.perf_counter()
    report = new_report(roots, handle.root)
    names = sorted({os.fspath(path) for path in paths})
    present = [name for name in names if os.path.isfile(name)]
    files, outside = _inside(roots, present, walked=False)
    report["invalid"].extend(outside)
    report["sessions"] = len(names)
    # A file that is gone is known by its real path too (a folder on the way may be a
    # symlink); one outside the roots is none of this watch's business.
    gone, _ = _inside(roots, [name for name in names if name not in present], walked=False)
    with handle.writer(timeout=lock_timeout, threads=1) as writer:
        if writer.notice:
            report["notices"].append(writer.notice)
        catalog = Catalog() if fresh else Catalog(snapshot=handle.records())
        forgotten = load_tombstones(store or handle.root)
        for name in gone:
            record = catalog.record(name)
            if record is not None:
                _forget(writer, record, report, GONE)
        folders = _Folders()
        for path in files:
            record = catalog.record(path)
            task = _plan(path, record, False, max_line_bytes)
            reason = _left_out(path, record, task, forgotten, folders)
            if reason is not None:
                report["excluded"].append({"path": path, "reason": reason})
                if record is not None:
                    _forget(writer, record, report, reason)
            elif task is None or not _written_by(narrowed, path, max_line_bytes):
                report["skipped"] += 1
            else:
                _apply(writer, _parse(task), record, report, forgotten)
        writer.commit()
        report["commits"] += 1
    report["seconds"] = round(time.perf_counter() - started, 4)
    return report


def build_shard(task: ShardTask) -> ShardResult:
    """A sharded build's task, wherever it runs: read, normalize and mask ``task.files``
    into a new shard, as every reindex does; a file outside the task's roots is never read."""
    roots = tuple(Path(root) for root in task.roots)
    narrowed = chosen_agents(task.agents)
    return write_shard(task, lambda handle: _update_paths(
        handle, roots, task.files, 0.0, task.max_line_bytes, narrowed, fresh=True,
        store=Path(task.folder).parent))


@contextlib.contextmanager
def _engine(cluster: str | None, count: int) -> Iterator[Engine]:
    """Where a sharded build's tasks run: the Dask cluster named, else ``count`` processes
    of this machine (a cluster of one)."""
    if cluster is not None:
        from .cluster import dask_engine  # dask is imported only when a cluster is asked for

        with dask_engine(cluster) as engine:
            yield engine
        return
    with _workers(count) as pool:
        yield LocalEngine(pool, count)


def _one_session(roots: tuple[Path, ...], session: str | os.PathLike[str]) -> Path:
    """``session`` as a path under one of ``roots`` (its real folder, as the walk of the
    root spells it, so its catalog record is the same one); a file elsewhere is a usage
    error."""
    path = Path(session).expanduser()
    if not path.is_file():
        raise UsageError(f"--session {session}: no such session file")
    if not inside_any(roots, path.parent):
        raise UsageError(
            f"--session {session}: not under the sessions root {_shown(roots)}; pass "
            "--sessions DIR or set FABRIC_MEMORY_SESSIONS to the directory that holds it"
        )
    return Path(os.path.realpath(path.parent)) / path.name


def _inside(
    roots: tuple[Path, ...], paths: Iterable[str | Path], *, walked: bool = True
) -> tuple[list[str], list[PathReason]]:
    """The real paths of the session files under ``roots`` (each once), and the files that
    cannot be indexed: one that leads outside the roots through a symlink (never read), a
    name that is not UTF-8 (the index holds text).

    ``walked``: the paths come from the walk of the roots, which are real paths and which
    the walk enters no symlinked folder of, so only a symlinked file needs resolving (one
    ``lstat`` per file). Paths named by anyone else (the live index's watcher, which does
    follow symlinked folders) are each resolved.
    """
    inside: dict[str, None] = {}
    refused: list[PathReason] = []
    for path in paths:
        name = str(path)
        if not is_utf8(name):
            shown = printable(name)
            refused.append({"path": shown, "reason": f"{shown}: file name is not valid UTF-8; "
                            "not indexed (rename it to index it)"})
        elif walked and not os.path.islink(name):
            inside[name] = None
        elif inside_any(roots, path):
            inside[os.path.realpath(name)] = None
        else:
            reason = (f"{path}: leads through a symlink to a file outside the sessions root "
                      f"{_shown(roots)}; not indexed")
            refused.append({"path": name, "reason": reason})
    return list(inside), refused


INVALID = "invalid: "
"""How the stale reason of a record whose file turned invalid starts."""


def _still_invalid(skipped: Iterable[str], catalog: Catalog) -> list[PathReason]:
    """Unchanged files that were invalid when last read: reported again without reading."""
    found: list[PathReason] = []
    for path in skipped:
        record = catalog.by_path.get(path)
        reason = record.stale_reason if record is not None else None
        if reason is not None and reason.startswith(INVALID):
            found.append({"path": path, "reason": reason.removeprefix(INVALID)})
    return found


def _committed(handle: Memory) -> Catalog:
    """The last committed catalog; empty when there is no readable index yet."""
    try:
        return load_catalog(handle)
    except MemoryIndexError:
        return Catalog()


def _plan_all(
    roots: tuple[Path, ...], files: list[str], catalog: Catalog, full: bool, max_line_bytes: int,
    one: bool, agents: frozenset[str] | None, forgotten: Tombstones, folders: _Folders,
) -> tuple[list[_Task], list[tuple[SessionRecord, str]], list[PathReason]]:
    """Files to parse; records to delete, each with why: under ``roots`` and its file gone (a
    deleted or renamed file, or one indexed under another spelling of its path), or kept out
    of memory (forgotten, or its folder ignored); and the files kept out. ``one``: ``files``
    is the one session asked for, so no other record is looked at; ``agents``: only files
    those agents wrote are parsed (told by their first line)."""
    tasks: list[_Task] = []
    drop: list[tuple[SessionRecord, str]] = []
    excluded: list[PathReason] = []
    for path in files:
        record = catalog.by_path.get(path)
        task = _plan(path, record, full, max_line_bytes)
        reason = _left_out(path, record, task, forgotten, folders)
        if reason is not None:
            excluded.append({"path": path, "reason": reason})
            if record is not None:
                drop.append((record, reason))
        elif task is not None and _written_by(agents, path, max_line_bytes):
            tasks.append(task)
    if one:
        return tasks, drop, excluded
    seen = set(files)
    drop.extend((r, GONE) for r in catalog.records if r.path not in seen and holds(roots, r.path))
    return tasks, drop, excluded


GONE = "the session file is gone; its documents removed"


class _Folders:
    """What one run learns of working folders: whether each is ignored, and the folder each
    new file's head names, by the file's stat (the plan before the lock and the plan under
    it read a file's head once)."""

    def __init__(self) -> None:
        self.reasons: dict[str, str | None] = {}
        self.heads: dict[tuple[str, StatKey | None], str | None] = {}

    def head(self, path: str, checked: StatKey | None) -> str | None:
        key = (path, checked)
        if key not in self.heads:
            self.heads[key] = head_folder(path)
        return self.heads[key]

    def reason(self, cwd: str) -> str | None:
        if cwd not in self.reasons:
            self.reasons[cwd] = ignored(cwd)
        return self.reasons[cwd]


def _left_out(
    path: str, record: SessionRecord | None, task: _Task | None, forgotten: Tombstones,
    folders: _Folders,
) -> str | None:
    """Why ``path`` is kept out of memory, or None: forgotten, or its working folder is
    ignored (the record's folder, else the one the file's head names: a new file is not
    read further)."""
    if forgotten.of_path(path) is not None:
        return _forgotten_reason(path, forgotten)["reason"]
    cwd = (record.cwd if record is not None
           else folders.head(path, task.checked) if task is not None else None)
    if cwd is None:
        return None
    reason = folders.reason(cwd)
    return None if reason is None else f"not indexed: its working folder is ignored ({reason})"


def _forgotten_reason(path: str, forgotten: Tombstones, session_id: str | None = None
                      ) -> PathReason:
    stone = forgotten.refuses(path, session_id)
    assert stone is not None
    return {"path": path, "reason": f"forgotten on {stone.forgotten_at}; bring it back with "
            f"`fabric-memory forget --undo {stone.session_id}`"}


def _written_by(agents: frozenset[str] | None, path: str, max_line_bytes: int) -> bool:
    return agents is None or reader_for(path, max_line_bytes).name in agents


def refresh_sessions(
    handle: Memory, records: Iterable[SessionRecord], *, timeout: float = 0.0
) -> ReindexReport:
    """Re-check these indexed sessions against their files, in this process (hot tier).

    Raises :class:`~fabric_memory.errors.IndexLockedError` at once (``timeout`` 0)
    when another writer is busy: queries never wait for a writer.
    """
    started = time.perf_counter()
    report = new_report((), handle.root)
    with handle.writer(timeout=timeout, threads=1) as writer:
        catalog = load_catalog(handle)
        forgotten = load_tombstones(handle.root)
        for given in records:
            record = catalog.record(given.path)
            report["sessions"] += 1
            if record is None:
                continue
            if stat_key(record.path) is None:
                _forget(writer, record, report, GONE)
                continue
            task = _plan(record.path, record, False, DEFAULT_MAX_LINE_BYTES)
            if task is None:
                report["skipped"] += 1
                continue
            _apply(writer, _parse(task), record, report, forgotten)
        writer.commit()
        report["commits"] += 1
    report["seconds"] = round(time.perf_counter() - started, 4)
    return report


def _shown(roots: tuple[Path, ...]) -> str:
    return " or ".join(map(str, roots))


def _plan(
    path: str, record: SessionRecord | None, full: bool, max_line_bytes: int
) -> _Task | None:
    checked = stat_key(path)
    if record is None or full:
        return _Task(path, checked, None, max_line_bytes)
    if checked is not None and checked == record.checked:
        return None
    same_size = checked is not None and checked[1] == record.size and not record.stale
    return _Task(path, checked, record.source_hash if same_size else None, max_line_bytes)


def _parse(task: _Task) -> _Parsed:
    """Worker: hash first when only the mtime may have moved, else read and normalize."""
    if task.known_hash is not None and task.known_hash == _hash_or_none(task.path):
        return _Parsed(task.path, unchanged=True)
    try:
        session = read_source(task.path, task.max_line_bytes)
    except SessionError as exc:
        return _Parsed(task.path, invalid=exc.message)
    reason = ignored(session.project)  # the head did not say: the reader's answer decides
    if reason is not None:
        return _Parsed(task.path, ignored=f"not indexed: its working folder is ignored "
                       f"({reason})")
    normalized = normalize_session(session)
    salvaged = [p.located(session.path) for p in normalized.salvaged]
    problems = [*salvaged, *(p.located(session.path) for p in session.malformed)]
    if session.truncated_tail is not None:
        problems.append(session.truncated_tail.located(session.path))
    problems.extend(
        f"{session.path}: duplicate address {clipped(a)} (ambiguous)"
        for a in normalized.duplicate_addresses
    )
    checked = task.checked or (0, session.size, 0)
    notes = [p.located(session.path) for p in normalized.notes]
    if clamped_time(checked):
        notes.append(f"{session.path}: modified after 2262, past the index's 64-bit nanosecond "
                     "range; mtime clamped (changes are still seen by size and ctime)")
    problems.extend(notes)
    record = SessionRecord(
        path=task.path,
        session_id=session.session_id,
        mtime_ns=checked[0],
        size=session.size,
        source_hash=session.source_hash,
        lineage_fingerprint=session.lineage_fingerprint("active"),
        entries=normalized.entries,
        operations=normalized.operations,
        indexed_at=now_iso(),
        complete=not normalized.duplicate_addresses,
        problems=tuple(problems[:MAX_PROBLEMS]),
        checked=(checked[0], session.size, checked[2]),
        cwd=session.project,
        agent=session.agent,
    )
    documents = tuple(item_json(item, task.path, session.session_id, session.agent,
                                session.project) for item in normalized.items)
    return _Parsed(task.path, record=record, documents=documents, notes=tuple(notes),
                   salvaged=tuple(salvaged),
                   redacted=tuple((normalized.redacted or {}).items()))


def _hash_or_none(path: str) -> str | None:
    try:
        return hash_file(path)
    except OSError:
        return None


@contextlib.contextmanager
def _workers(count: int) -> Iterator[ProcessPoolExecutor | None]:
    """``count`` parser processes, forked at once (or None for in-process parsing).

    fork, not spawn/forkserver: those re-import ``__main__`` in every worker, which breaks
    callers running from stdin or an unguarded script. A worker only runs the parser
    (pure Python, orjson, xxhash), exits when this process dies, and first closes the index
    locks it inherited: a Tantivy thread of this process may hold one as it forks.
    """
    if count <= 1:
        yield None
        return
    pool = ProcessPoolExecutor(max_workers=count, mp_context=multiprocessing.get_context("fork"),
                               initializer=_start_worker, initargs=(os.getpid(),))
    try:
        pool.submit(int).result()  # fork every worker now (see reindex)
        yield pool
    finally:
        pool.shutdown(cancel_futures=True)


def _start_worker(parent: int) -> None:
    close_inherited_locks()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


class _Parsing:
    """The parsed files of ``tasks`` in task order, with at most ``ahead`` batches in flight
    (flat memory); the first ones go to the workers at once, before anyone iterates."""

    def __init__(self, tasks: list[_Task], pool: ProcessPoolExecutor | None,
                 ahead: int) -> None:
        self.tasks = tasks
        self._pool = pool
        self._ahead = ahead
        self._batches = _batches(tasks)
        self._window: deque[Future[list[_Parsed]]] = deque()
        self._fill()

    def _fill(self) -> None:
        if self._pool is None:
            return
        while len(self._window) < self._ahead:
            batch = next(self._batches, None)
            if batch is None:
                return
            self._window.append(self._pool.submit(_parse_batch, batch))

    def __iter__(self) -> Iterator[_Parsed]:
        if self._pool is None:
            yield from map(_parse, self.tasks)
            return
        while self._window:
            parsed = self._window.popleft().result()
            self._fill()
            yield from parsed

    def cancel(self) -> None:
        """Drop the batches handed out (one a worker has started runs to its end, unread)."""
        for future in self._window:
            future.cancel()
        self._window.clear()


def _batches(tasks: list[_Task]) -> Iterator[list[_Task]]:
    """Consecutive tasks in groups of at most BATCH_FILES files or about BATCH_BYTES bytes:
    one round trip to a worker per group instead of per file."""
    batch: list[_Task] = []
    size = 0
    for task in tasks:
        batch.append(task)
        size += task.checked[1] if task.checked is not None else 0
        if len(batch) >= BATCH_FILES or size >= BATCH_BYTES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def _parse_batch(tasks: list[_Task]) -> list[_Parsed]:
    return [_parse(task) for task in tasks]


def _apply(
    writer: Writer, parsed: _Parsed, previous: SessionRecord | None, report: ReindexReport,
    forgotten: Tombstones,
) -> None:
    record = parsed.record
    left_out = (_forgotten_reason(parsed.path, forgotten, record.session_id)
                if record is not None and forgotten.refuses(parsed.path, record.session_id)
                else {"path": parsed.path, "reason": parsed.ignored} if parsed.ignored
                else None)
    if left_out is not None:
        report["excluded"].append(left_out)
        if previous is not None:
            _forget(writer, previous, report, left_out["reason"])
        return
    if parsed.invalid is not None:
        report["invalid"].append({"path": parsed.path, "reason": parsed.invalid})
        if previous is not None:
            _mark_stale(writer, previous, f"{INVALID}{parsed.invalid}",
                        stat_key(parsed.path), report)
        return
    if parsed.unchanged:
        assert previous is not None
        checked = stat_key(parsed.path)
        moved = previous.mtime_ns if checked is None else checked[0]
        writer.put_record(parsed.path, previous.session_id, moved,
                          _touched(previous, checked).encode())
        report["skipped"] += 1
        return
    assert record is not None
    refused = writer.replace_session(parsed.path, parsed.documents)
    if refused is not None:
        reason = f"{parsed.path}: not indexed: the index refused a document ({refused})"
        report["invalid"].append({"path": parsed.path, "reason": reason})
        return
    report["notes"].extend({"path": parsed.path, "reason": note} for note in parsed.notes)
    report["salvaged"].extend({"path": parsed.path, "reason": line} for line in parsed.salvaged)
    writer.put_record(parsed.path, record.session_id, record.mtime_ns, record.encode())
    report["indexed"] += 1
    for kind, count in parsed.redacted:
        report["redacted"][kind] = report["redacted"].get(kind, 0) + count
    report["entries"] += record.entries
    report["operations"] += record.operations
    if not record.complete:
        report["incomplete"].append({"path": record.path, "reason": "duplicate entry ids"})


def _touched(record: SessionRecord, checked: StatKey | None) -> SessionRecord:
    mtime = checked[0] if checked is not None else record.mtime_ns
    return replace(record, mtime_ns=mtime, checked=checked)


def _forget(writer: Writer, record: SessionRecord, report: ReindexReport, reason: str) -> None:
    writer.remove_session(record.path)
    report["removed"].append({"path": record.path, "reason": reason})


def _mark_stale(
    writer: Writer,
    record: SessionRecord,
    reason: str,
    checked: StatKey | None,
    report: ReindexReport,
) -> None:
    stale = record.marked_stale(reason, checked)
    writer.put_record(record.path, record.session_id, record.mtime_ns, stale.encode())
    report["stale"].append({"path": record.path, "reason": reason})
