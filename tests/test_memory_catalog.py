"""The catalog: records read on demand agree with the full catalog; session listings filter
by project and modification time and page with ``next``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fabric_memory.errors import QueryError, UsageError
from fabric_memory.memory.catalog import Catalog, list_sessions, load_catalog
from fabric_memory.memory.index import open_index
from fabric_memory.memory.reindex import reindex

from .memory_builder import SessionBuilder

TIE = 1_700_000_000.0


@pytest.fixture
def indexed(tmp_path: Path) -> dict[str, Path]:
    """Nine sessions in three projects; six share one mtime (a tie at the hot boundary),
    two share one session id. Indexed one by one, last path first, so the index's own
    order of the tied records is the reverse of the catalog's (path) order."""
    sessions = tmp_path / "sessions"
    index = tmp_path / "index"
    for n in reversed(range(9)):
        project = ("alpha", "alpha/sub", "beta")[n % 3]
        same_id = "shared-id" if n in (4, 7) else None
        builder = SessionBuilder(sessions / f"--{project.replace('/', '-')}--" / f"s{n}.jsonl",
                                 session_id=same_id)
        builder.lines[0] = builder.lines[0].replace(b'"cwd":"/repo"',
                                                    f'"cwd":"/work/{project}"'.encode())
        builder.user(f"session {n}")
        builder.write(mtime=TIE if n >= 3 else TIE + 100 + n)
        reindex(sessions=sessions, index=index, workers=1)
    return {"sessions": sessions, "index": index}


def test_on_demand_records_agree_with_the_full_catalog(indexed: dict[str, Path]) -> None:
    """hot(n) for every n (ties ordered by path), record(), ids and matching() give the
    same answers whether the catalog was read whole or record by record."""
    handle = open_index(indexed["index"])
    full = Catalog(load_catalog(handle).records)
    for n in range(11):
        lazy = Catalog(snapshot=handle.records())
        assert lazy.hot(n) == full.hot(n), n
    lazy = Catalog(snapshot=handle.records())
    for record in full.records:
        assert lazy.record(record.path) == record
        assert lazy.handle(record) == full.handle(record)
        assert lazy.matching(record.session_id) == full.matching(record.session_id)
    assert lazy.record(str(indexed["sessions"] / "nope.jsonl")) is None
    assert [r.path for r in lazy.with_id("shared-id")] == [
        r.path for r in full.records if r.session_id == "shared-id"]
    assert len(lazy.with_id("shared-id")) == 2


def test_a_recall_process_reads_few_records(indexed: dict[str, Path]) -> None:
    """A recall reads the hot tier and its hits' records, not every record."""
    handle = open_index(indexed["index"])
    catalog = load_catalog(handle)
    catalog.hot(2)
    catalog.record(catalog.hot(2)[0].path)
    assert catalog._all is None


def test_listing_filters_by_project_and_time_and_pages(indexed: dict[str, Path]) -> None:
    """project keeps that folder and folders inside it; since/until bound the mtime; limit
    pages with a next request that continues the listing."""
    index = indexed["index"]
    alpha = list_sessions(index=index, project="/work/alpha")
    assert alpha["total"] == 6
    assert {s["cwd"] for s in alpha["sessions"]} == {"/work/alpha", "/work/alpha/sub"}
    assert list_sessions(index=index, project="/work/alp")["total"] == 0
    recent = list_sessions(index=index, since="2023-11-14T22:14:00Z")
    assert recent["total"] == 3
    assert all(s["modifiedAt"] > "2023-11-14T22:14" for s in recent["sessions"])
    older = list_sessions(index=index, until="2023-11-14T22:14:00Z")
    assert older["total"] == 6
    first = list_sessions(index=index, project="/work/alpha", limit=4)
    assert len(first["sessions"]) == 4
    assert first["next"] == {"project": "/work/alpha", "limit": 4, "offset": 4}
    rest = list_sessions(index=index, **{"project": "/work/alpha", "limit": 4, "offset": 4})
    assert rest["next"] is None
    paths = [s["path"] for s in first["sessions"] + rest["sessions"]]
    assert paths == [s["path"] for s in alpha["sessions"]]
    with pytest.raises(UsageError, match="--limit 0"):
        list_sessions(index=index, limit=0)
    with pytest.raises(QueryError, match='--since "yesterday"'):
        list_sessions(index=index, since="yesterday")


def test_cli_import_loads_no_engine() -> None:
    """Importing the CLI loads neither Tantivy nor the compactor, the trace guard, the
    session reader or the package metadata; a recall loads no writer-side module."""
    probe = (
        "import sys, fabric_memory.cli\n"
        "before = set(sys.modules)\n"
        "import fabric_memory.memory.recall, fabric_memory.memory.render\n"
        "print(sorted(before)); print(sorted(set(sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True, env={**os.environ})
    at_import, after_recall = (eval(line) for line in done.stdout.splitlines())
    heavy = ("tantivy", "fabric_memory.compaction", "fabric_memory.trace",
             "fabric_memory.session", "fabric_memory.memory.index", "importlib.metadata")
    assert not [m for m in at_import if m.startswith(heavy)]
    writer_side = ("fabric_memory.compaction", "fabric_memory.trace",
                   "fabric_memory.memory.reindex", "fabric_memory.memory.normalize",
                   "fabric_memory.memory.expand", "multiprocessing", "concurrent")
    assert "tantivy" in after_recall
    assert not [m for m in after_recall if m.startswith(writer_side)]


def test_a_loaded_catalog_is_published_whole(indexed: dict[str, Path]) -> None:
    """Loading every record publishes ``_all`` last, after the id and path tables are
    complete: threads share a catalog, and one that sees ``_all`` reads the tables (a
    reader thread once found no record for an id while another thread was loading)."""
    records = load_catalog(open_index(indexed["index"])).records
    seen: list[tuple[int, int]] = []

    class Watched(Catalog):
        def __setattr__(self, name: str, value: object) -> None:
            if name == "_all" and value is not None:
                seen.append((sum(map(len, self._by_id.values())), len(self._by_path or {})))
            super().__setattr__(name, value)

    Watched(records)
    assert seen == [(len(records), len(records))]
