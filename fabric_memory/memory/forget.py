"""``fabric-memory forget``: take sessions out of memory for good, or bring them back.

Sessions are chosen as ``sessions`` lists them (``--project``, ``--agent``, ``--until``)
or by id or path. Forgetting writes their tombstones (:mod:`.tombstones`) and deletes
their documents and records in one step under the writer lock, so every writer that
comes after (``reindex``, the live index, the hot tier, a sharded build) finds the
tombstone before it could read the file again, and every reader (recall, sessions,
expand; the CLI, the MCP server, the Pi tools, the web view) answers as if the session
never was. ``undo`` removes the tombstones and indexes the files again at once.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from ..arguments import check_names
from ..errors import MemoryIndexError, UsageError, clipped
from .catalog import (
    Catalog,
    SessionRecord,
    default_roots,
    in_project,
    list_sessions,
    load_catalog,
    now_iso,
    parse_time_ns,
    stat_key,
)
from .ignore import head_folder
from .locations import index_root, session_files
from .reindex import DEFAULT_LOCK_TIMEOUT, reindex_paths
from .sharded import Memory, open_memory
from .tombstones import Tombstone, Tombstones, load_tombstones, save_tombstones, store_path


class ForgetItem(TypedDict):
    sessionId: str
    path: str
    agent: str
    forgottenAt: str | None
    """When it was forgotten (None for a session being forgotten in a dry run)."""


class ForgetReport(TypedDict):
    index: str
    store: str
    """The file that keeps the forgotten sessions' ids and paths (no text of theirs)."""
    action: str
    """``forget``, ``undo`` or ``list``."""
    dryRun: bool
    sessions: list[ForgetItem]
    indexed: int
    """Sessions indexed again (``undo``)."""
    next: str | None
    """The command that reverses what was done (or does it, after a dry run)."""


@dataclass(frozen=True, slots=True)
class Selection:
    """Which sessions: named (ids or paths), or filtered as ``sessions`` filters them."""

    named: tuple[str, ...] = ()
    project: str | None = None
    agent: str | None = None
    until: str | None = None

    def check(self) -> None:
        check_names(*(("SESSION", name) for name in self.named), ("--project", self.project))
        filtered = (self.project, self.agent, self.until) != (None, None, None)
        if not self.named and not filtered:
            raise UsageError("forget needs sessions: name them (an id or a path), or choose "
                             "them with --project DIR, --agent NAME, --until T")
        if self.named and filtered:
            raise UsageError("forget takes named sessions or --project/--agent/--until, not "
                             "both")

    def options(self) -> list[str]:
        shown = list(self.named)
        for option, value in (("--project", self.project), ("--agent", self.agent),
                              ("--until", self.until)):
            if value is not None:
                shown += [option, value]
        return shown


def forget(
    selection: Selection, *, dry_run: bool = False,
    index: str | os.PathLike[str] | None = None,
    sessions: str | os.PathLike[str] | None = None,
) -> ForgetReport:
    """Forget the sessions ``selection`` names (``dry_run``: only say which)."""
    selection.check()
    roots, handle = default_roots(sessions, index)
    forgotten = load_tombstones(handle.root)
    chosen = _chosen(selection, handle, roots, forgotten, index, sessions)
    report = _report(handle.root, "forget", dry_run)
    if dry_run:
        report["sessions"] = [_item(s, None) for s in chosen]
        report["next"] = _command(["forget", *selection.options()], index, sessions)
        return report
    when = now_iso()
    with handle.writer(timeout=DEFAULT_LOCK_TIMEOUT, threads=1) as writer:
        # Read again under the lock: what another forget wrote meanwhile is kept.
        kept = load_tombstones(handle.root)
        paths = {t.path for t in chosen}
        save_tombstones(handle.root, [*(t for t in kept.items if t.path not in paths),
                                      *(Tombstone(t.session_id, t.path, t.agent, when)
                                        for t in chosen)])
        for stone in chosen:
            writer.remove_session(stone.path)
        writer.commit()
    report["sessions"] = [_item(s, when) for s in chosen]
    report["next"] = _command(["forget", "--undo", *selection.options()], index, sessions)
    return report


def undo(
    selection: Selection, *, dry_run: bool = False,
    index: str | os.PathLike[str] | None = None,
    sessions: str | os.PathLike[str] | None = None,
) -> ForgetReport:
    """Bring back the forgotten sessions ``selection`` names: their tombstones go, and
    their files (where they still are) are indexed again."""
    selection.check()
    handle = open_memory(index_root(index))
    chosen = _forgotten(selection, load_tombstones(handle.root))
    report = _report(handle.root, "undo", dry_run)
    report["sessions"] = [_item(s, s.forgotten_at) for s in chosen]
    if dry_run:
        report["next"] = _command(["forget", "--undo", *selection.options()], index, sessions)
        return report
    with handle.writer(timeout=DEFAULT_LOCK_TIMEOUT, threads=1) as writer:
        paths = {t.path for t in chosen}
        save_tombstones(handle.root, [t for t in load_tombstones(handle.root).items
                                      if t.path not in paths])
        writer.commit()
    present = [t.path for t in chosen if os.path.isfile(t.path)]
    if present:
        report["indexed"] = reindex_paths(present, sessions=sessions, index=index)["indexed"]
    report["next"] = _command(["forget", *selection.options()], index, sessions)
    return report


def forgotten_sessions(*, index: str | os.PathLike[str] | None = None) -> ForgetReport:
    """Every forgotten session (``forget --list``)."""
    check_names(("--index", index))
    handle = open_memory(index_root(index))
    report = _report(handle.root, "list", False)
    report["sessions"] = [_item(s, s.forgotten_at) for s in load_tombstones(handle.root).items]
    return report


def _report(root: Path, action: str, dry_run: bool) -> ForgetReport:
    return {"index": str(root), "store": str(store_path(root)), "action": action,
            "dryRun": dry_run, "sessions": [], "indexed": 0, "next": None}


def _item(stone: Tombstone, when: str | None) -> ForgetItem:
    return {"sessionId": stone.session_id, "path": stone.path, "agent": stone.agent,
            "forgottenAt": when}


def _chosen(
    selection: Selection, handle: Memory, roots: tuple[Path, ...], forgotten: Tombstones,
    index: str | os.PathLike[str] | None, sessions: str | os.PathLike[str] | None,
) -> list[Tombstone]:
    """The sessions to forget, as tombstones to be (without a time yet)."""
    if not selection.named:
        listing = list_sessions(index=index, sessions=sessions, project=selection.project,
                                agent=selection.agent, until=selection.until)
        return [Tombstone(s["sessionId"], s["path"], s["agent"], "")
                for s in listing["sessions"]]
    try:
        catalog = load_catalog(handle)
    except MemoryIndexError:  # no index yet: the files under the roots are all there is
        catalog = Catalog()
    chosen: dict[str, Tombstone] = {}
    for name in selection.named:
        records = catalog.matching(name) or [
            _unindexed(path) for path in session_files(name, roots)]
        if not records:
            stone = forgotten.of_id(name) or forgotten.of_path(name)
            already = f" (forgotten on {stone.forgotten_at})" if stone is not None else ""
            raise UsageError(f"session {clipped(name)}: not in memory{already}; see "
                             "`fabric-memory sessions`, or pass the session file's path")
        for record in records:
            chosen[record.path] = Tombstone(record.session_id, record.path, record.agent, "")
    return list(chosen.values())


def _unindexed(path: Path) -> SessionRecord:
    """A session file no index holds yet: its id as its agent's reader reads it."""
    from ..sources import read_source

    session = read_source(str(path))
    return SessionRecord(os.path.realpath(path), session.session_id, 0, session.size, "", "",
                         0, 0, "", agent=session.agent)


def _forgotten(selection: Selection, forgotten: Tombstones) -> list[Tombstone]:
    """The tombstones ``selection`` names: by id or path, or (filters) by what each file
    says now: its working folder (the head of the file), its agent, its last change."""
    if selection.named:
        found = [t for t in forgotten.items if any(
            name in (t.session_id, t.path) or os.path.realpath(name) == t.path
            for name in selection.named)]
    else:
        high = parse_time_ns(selection.until, "--until")
        found = []
        for stone in forgotten.items:
            key = stat_key(stone.path)
            if not in_project(head_folder(stone.path), selection.project):
                continue
            if selection.agent not in (None, stone.agent):
                continue
            if high is not None and (key is None or key[0] > high):
                continue
            found.append(stone)
    if not found:
        raise UsageError(f"nothing forgotten matches {shlex.join(selection.options())}; "
                         "`fabric-memory forget --list` lists what is forgotten")
    return found


def _command(argv: Sequence[str], index: str | os.PathLike[str] | None,
             sessions: str | os.PathLike[str] | None) -> str:
    where = [*(["--index", os.fspath(index)] if index is not None else []),
             *(["--sessions", os.fspath(sessions)] if sessions is not None else [])]
    return shlex.join(["fabric-memory", *argv, *where])
