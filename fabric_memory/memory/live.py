"""The live index: watch the sessions roots and re-index what changes, as it changes.

``watchfiles`` (the Rust ``notify`` crate: inotify, FSEvents, ReadDirectoryChangesW;
it falls back to polling where the platform gives no events, and polls when
``WATCHFILES_FORCE_POLLING`` is set) reports changed paths; bursts are grouped for
:data:`DEBOUNCE_MS`, then only those files are re-read (:func:`reindex_paths`) under
the same writer lock a CLI ``reindex`` takes. A folder that appears is read once
(Pi creates one per project). The first report, or the first quiet interval after
the watch starts, runs one incremental ``reindex`` to catch up with what changed
while nothing was watching. Readers never wait: they answer from the last commit.

``watchfiles`` ships with the ``mcp`` and ``watch`` extras; without it
:func:`watch_sessions` raises :class:`~fabric_memory.errors.MissingExtraError`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from .._wal import store_of
from ..errors import FabricMemoryError, MissingExtraError, UsageError, WatchError
from ..sources import listed, session_files, skipped
from .catalog import StatKey, default_roots, stat_key
from .locations import index_root
from .reindex import reindex, reindex_paths
from .report import ReindexReport

DEBOUNCE_MS = 300
"""Longest a burst of writes is grouped before its files are re-indexed."""
STEP_MS = 50
"""Quiet time that ends a burst (and how often the watcher checks for a stop)."""
TICK_MS = 1_000
"""A quiet watcher wakes this often: to catch up at start and to retry locked work."""
RECHECK_SECONDS = 3.0
"""How long a re-indexed file is re-checked by ``stat`` on each wake (see _Pending)."""
LOCK_TIMEOUT = 1.0
"""How long one step waits for another writer before it keeps its paths for the next."""


class Stop(Protocol):
    def is_set(self) -> bool: ...


@dataclass(slots=True)
class LiveReport:
    """What one step did (the catch-up ``reindex``, or the changed files)."""

    kind: str
    """``catch-up`` or ``changes``."""
    report: ReindexReport


@dataclass(slots=True)
class _Pending:
    paths: set[str] = field(default_factory=set)
    caught_up: bool = False
    recent: dict[str, tuple[StatKey | None, float]] = field(default_factory=dict)
    """Files re-indexed lately: their stat key before the step, and when."""

    def recheck(self, now: float) -> None:
        """Queue a recently re-indexed file whose stat moved since its step. A poller
        that compares whole-second mtimes misses a second write within the same second;
        this catches it on the next wake, for a few files, without walking the tree."""
        for path, (key, when) in list(self.recent.items()):
            if now - when > RECHECK_SECONDS:
                del self.recent[path]
            elif stat_key(path) != key:
                self.paths.add(path)


def watch_sessions(
    *,
    sessions: str | os.PathLike[str] | None = None,
    index: str | os.PathLike[str] | None = None,
    stop: Stop,
    on_step: Callable[[LiveReport], None] | None = None,
    on_error: Callable[[FabricMemoryError], None] | None = None,
    agents: str | None = None,
) -> None:
    """Keep the index of ``sessions`` up to date until ``stop`` is set (see the module
    docstring). A step that fails (another writer past :data:`LOCK_TIMEOUT`, an
    unwritable index) goes to ``on_error`` and is retried on the next wake. So does what
    stops a watch (:class:`~fabric_memory.errors.WatchError`): an unreadable folder is
    reported and left out; a root removed or replaced is reported, waited for, watched
    again and caught up with."""
    try:
        from watchfiles import watch
    except ImportError:
        raise MissingExtraError(
            "watching needs the watchfiles package; install it with "
            "pip install -e '.[watch]' (or '.[mcp]') in the fabric-memory clone"
        ) from None
    where = index_root(index)
    roots = default_roots(sessions, where, agents)[0]
    for root in roots:
        if not root.is_dir():
            raise UsageError(
                f"{root}: sessions directory does not exist; pass --sessions DIR or set "
                "FABRIC_MEMORY_SESSIONS"
            )

    said: list[str] = []

    def report(exc: FabricMemoryError) -> None:
        if on_error is not None and exc.message not in said[-1:]:  # once per condition
            on_error(exc)
        said.append(exc.message)

    pending = _Pending()
    folders: set[str] | None = None
    """None: each root watched recursively. After an unreadable folder stopped that (the
    recursive watch gives up at the first one), each readable folder on its own."""
    while not stop.is_set():
        seen = _identities(roots)
        if folders is not None:
            folders = _readable_folders(roots)
        try:
            changes_seen = watch(*(roots if folders is None else sorted(folders)),
                                 recursive=folders is None, watch_filter=None,
                                 debounce=DEBOUNCE_MS, step=STEP_MS, stop_event=stop,
                                 rust_timeout=TICK_MS, yield_on_timeout=True,
                                 raise_interrupt=False)
            for changes in changes_seen:
                changed = [path for _, path in changes]
                pending.paths.update(_session_paths(changed))
                pending.recheck(time.monotonic())
                try:
                    _step(sessions, where, pending, on_step, agents)
                except FabricMemoryError as exc:
                    report(exc)
                else:
                    said.clear()
                if _identities(roots) != seen or (folders is not None and any(
                        path not in folders and os.path.isdir(path) for path in changed)):
                    break  # a root went, or a folder came that needs a watch of its own
        except (OSError, RuntimeError) as exc:  # what watchfiles raises when it cannot watch
            # It names the folders it may not read (a PermissionError, or when polling its
            # internal error saying so).
            if isinstance(exc, PermissionError) or "Permission denied" in str(exc):
                report(WatchError(f"{exc}: cannot read these folders under the sessions root; "
                                  "their sessions are not watched (fix their permissions)"))
                if folders is None:
                    folders = set()  # from now on, each readable folder on its own
                    continue
            else:
                report(WatchError(f"{_shown(roots)}: cannot watch ({exc})"))
            _pause(stop)
        if stop.is_set():
            break
        for root, before, now in zip(roots, seen, _identities(roots), strict=True):
            if before != now:
                report(WatchError(f"{root}: sessions root removed or replaced; watching it "
                                  "again once it exists"))
        _wait_for(roots, stop)
        pending.caught_up = False  # what changed while nothing watched


def keep_live(*, sessions: str | os.PathLike[str] | None, index: str | os.PathLike[str] | None,
              stop: Stop, log: Callable[[str], None] | None = None,
              agents: str | None = None) -> None:
    """:func:`watch_sessions` as a long-running door runs it in a thread (the MCP server,
    the web view): each step that changed something and each failure is one line to
    ``log``, and nothing it raises escapes (the door serves what is indexed)."""
    def step(done: LiveReport) -> None:
        report = done.report
        changed = report["indexed"] + len(report["removed"]) + len(report["stale"])
        if log is not None and (changed or report["invalid"]):
            log(f"live index ({done.kind}): {report['indexed']} indexed, "
                f"{len(report['removed'])} removed, {len(report['invalid'])} invalid")

    def failed(exc: FabricMemoryError) -> None:
        if log is not None:
            log(f"live index: {exc.message} (retrying)")

    try:
        watch_sessions(sessions=sessions, index=index, stop=stop, on_step=step,
                       on_error=failed, agents=agents)
    except FabricMemoryError as exc:  # no sessions folder, no watchfiles: serve what is indexed
        if log is not None:
            log(f"live index off: {exc.message}")
    except Exception as exc:  # a thread's last word: one line, not a traceback
        if log is not None:
            log(f"live index off: the watcher stopped ({type(exc).__name__}: {exc})")


def _readable_folders(roots: tuple[Path, ...]) -> set[str]:
    """Every folder under ``roots`` (the roots included) that can be listed, entering no
    symlinked folder (as the walk of ``reindex`` does)."""
    found: set[str] = set()
    waiting = [os.fspath(root) for root in roots]
    while waiting:
        folder = waiting.pop()
        try:
            with os.scandir(folder) as scan:
                entries = list(scan)
        except OSError:
            continue
        found.add(folder)
        waiting.extend(entry.path for entry in entries
                       if entry.is_dir(follow_symlinks=False))
    return found


def _identities(roots: tuple[Path, ...]) -> list[tuple[int, int] | None]:
    """Which folder each root is (device, inode), or None where it is gone."""
    found: list[tuple[int, int] | None] = []
    for root in roots:
        try:
            st = os.stat(root)
        except OSError:
            found.append(None)
        else:
            found.append((st.st_dev, st.st_ino))
    return found


def _wait_for(roots: tuple[Path, ...], stop: Stop) -> None:
    """Return once every root is a folder again (or ``stop`` is set), checking each tick."""
    while not stop.is_set() and not all(root.is_dir() for root in roots):
        _pause(stop)


def _pause(stop: Stop) -> None:
    """Sleep one tick, or less when ``stop`` is set meanwhile."""
    deadline = time.monotonic() + TICK_MS / 1000
    while not stop.is_set() and time.monotonic() < deadline:
        time.sleep(STEP_MS / 1000)


def _shown(roots: tuple[Path, ...]) -> str:
    return " and ".join(map(str, roots))


def _step(
    sessions: str | os.PathLike[str] | None, where: Path, pending: _Pending,
    on_step: Callable[[LiveReport], None] | None, agents: str | None,
) -> None:
    if pending.caught_up and not pending.paths:
        return
    paths = sorted(pending.paths)
    before = {path: stat_key(path) for path in paths}
    if pending.caught_up:
        kind = "changes"
        report = reindex_paths(paths, sessions=sessions, index=where, lock_timeout=LOCK_TIMEOUT,
                               agents=agents)
    else:  # the full incremental pass sees the changed files too
        kind = "catch-up"
        report = reindex(sessions=sessions, index=where, workers=1, lock_timeout=LOCK_TIMEOUT,
                         agents=agents)
        pending.caught_up = True
    pending.paths.difference_update(paths)
    now = time.monotonic()
    pending.recent.update((path, (key, now)) for path, key in before.items())
    if on_step is not None:
        on_step(LiveReport(kind, report))


def _session_paths(paths: Iterable[str]) -> set[str]:
    """The session files among changed paths (a store's ``-wal`` log stands for the store);
    a folder that appeared counts with every session file in it (its files may have been
    written before it was watched)."""
    found: set[str] = set()
    for path in paths:
        if path.endswith(".jsonl") or listed(path):
            found.add(path)
        elif (store := store_of(path)) is not None and listed(store):
            found.add(store)  # a store's write-ahead log: the store changed
        elif os.path.isdir(path) and not os.path.islink(path):
            found.update(str(file) for file in session_files(path))
    return {path for path in found if not skipped(path)}
