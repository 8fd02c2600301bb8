"""What a ``reindex`` run reports: counts, findings by file, progress."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NotRequired, TypedDict


class PathReason(TypedDict):
    path: str
    reason: str


class ShardsReport(TypedDict):
    """What a sharded build did with its shards."""

    total: int
    built: int
    kept: int
    engine: str
    """Where the tasks ran: ``this machine``, ``local:N`` or the scheduler's address."""


class ReindexReport(TypedDict):
    sessionsRoot: str
    """The first of ``sessionsRoots``."""
    sessionsRoots: list[str]
    """Every sessions folder read: Pi's, then oh-my-pi's when present (or the one given)."""
    index: str
    sessions: int
    indexed: int
    skipped: int
    invalid: list[PathReason]
    stale: list[PathReason]
    incomplete: list[PathReason]
    removed: list[PathReason]
    """Sessions whose documents were deleted: their file is gone from under the root, or
    they are kept out of memory now (see ``excluded``)."""
    excluded: list[PathReason]
    """Session files kept out of memory: forgotten (``fabric-memory forget``), or working in
    an ignored folder (docs/privacy.md)."""
    notes: list[PathReason]
    """Values changed to fit the index (a time out of range), each with its file:line."""
    salvaged: list[PathReason]
    """Glued lines (Pi drops them) whose complete objects were indexed, with file:line."""
    entries: int
    operations: int
    commits: int
    seconds: float
    notices: list[str]
    redacted: dict[str, int]
    """Secrets masked in the texts this run indexed, by kind (docs/secrets.md)."""
    workers: NotRequired[int]
    shards: NotRequired[ShardsReport]
    """Set by a sharded build (docs/scale.md)."""


@dataclass(frozen=True, slots=True)
class Progress:
    done: int
    total: int
    indexed: int
    skipped: int


ProgressCallback = Callable[[Progress], None]


def add_report(report: ReindexReport, more: ReindexReport) -> None:
    """Add a second pass's figures and findings to ``report``."""
    for key in ("sessions", "indexed", "skipped", "entries", "operations", "commits"):
        report[key] += more[key]
    for key in ("invalid", "stale", "incomplete", "removed", "excluded", "notes", "salvaged",
                "notices", "sessionsRoots"):
        report[key].extend(more[key])  # type: ignore[literal-required]
    for kind, count in more["redacted"].items():
        report["redacted"][kind] = report["redacted"].get(kind, 0) + count
    report["seconds"] = round(report["seconds"] + more["seconds"], 4)


def new_report(roots: tuple[Path, ...], index: Path) -> ReindexReport:
    """An empty report of a run over ``roots`` into ``index``."""
    return {
        "sessionsRoot": str(roots[0]) if roots else "",
        "sessionsRoots": [str(root) for root in roots], "index": str(index),
        "sessions": 0, "indexed": 0, "skipped": 0, "invalid": [], "stale": [], "incomplete": [],
        "removed": [], "excluded": [], "notes": [],
        "salvaged": [],
        "entries": 0, "operations": 0, "commits": 0, "seconds": 0.0, "notices": [],
        "redacted": {},
    }
