"""The hot tier: the newest sessions are checked against their files on every query.

A check is one ``stat`` per hot session; only a session whose mtime or size moved
is re-read (hashed, and re-indexed if its bytes changed) before the query is
answered. Cold sessions are served from the index as committed. A query never
waits for a writer: when another process holds the writer lock, changed hot
sessions are answered from the index and flagged stale.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import MemoryIndexError
from .catalog import Catalog, load_catalog, stat_key
from .locations import inside_any
from .sharded import Memory


@dataclass(frozen=True, slots=True)
class TierView:
    """The catalog a query answers from, its hot paths, and what could not be refreshed."""

    catalog: Catalog
    hot: frozenset[str]
    unrefreshed: frozenset[str]


def revalidate(
    handle: Memory, hot_sessions: int, roots: tuple[Path, ...] | None = None
) -> TierView:
    """Bring the hot tier up to date with its files (see the module docstring).

    With sessions ``roots``, a file that now leads outside them (replaced by a symlink) is
    never read: it is answered as indexed and flagged stale.
    """
    catalog = load_catalog(handle)
    changed = [r for r in catalog.hot(hot_sessions) if stat_key(r.path) != r.checked]
    unrefreshed = frozenset(
        r.path for r in changed if roots is not None and not inside_any(roots, r.path))
    changed = [r for r in changed if r.path not in unrefreshed]
    if changed:
        from .reindex import refresh_sessions  # the writer's modules, only when one changed

        try:
            refresh_sessions(handle, changed, timeout=0.0)
        except MemoryIndexError:  # locked by another writer, or not writable: answer as indexed
            unrefreshed |= frozenset(r.path for r in changed)
        catalog = load_catalog(handle)
    hot = frozenset(r.path for r in catalog.hot(hot_sessions))
    return TierView(catalog, hot, unrefreshed)
