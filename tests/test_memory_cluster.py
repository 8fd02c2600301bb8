"""The reindex batch job on a real Dask cluster (a scheduler and two worker processes on
loopback), and the sharded index it writes answering as one index."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from bench.data import agents_corpus
from fabric_memory.memory.catalog import list_sessions, stats, verify
from fabric_memory.memory.expand import expand
from fabric_memory.memory.recall import recall
from fabric_memory.memory.reindex import reindex
from fabric_memory.memory.report import ReindexReport
from fabric_memory.memory.sharded import read_manifest
from fabric_memory.session import iter_session_files

from .cluster_host import LoopbackCluster, loopback_cluster
from .memory_builder import refuse_opening

pytestmark = pytest.mark.slow

SESSIONS = 2000
SHARD_BYTES = 512 * 1024
"""About 30 shards of the ~16 MB archive: enough tasks that a worker dies mid-job."""
QUERIES = (("error config", "any"), ("git diff", "any"), ("git diff", "all"),
           ("package.json", "any"))


@dataclass(frozen=True, slots=True)
class Built:
    sessions: Path
    single: Path
    sharded: Path
    report: ReindexReport
    killed: bool
    leftovers: list[str]
    """What the shards folder held besides the manifest's shards, after the build."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackCluster]:
    with loopback_cluster(tmp_path_factory.mktemp("dask")) as started:
        yield started


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, cluster: LoopbackCluster) -> Built:
    """A seeded archive of three agents indexed twice: one single index, and sharded on the
    cluster while worker 0 is killed in the middle of writing a shard."""
    root = tmp_path_factory.mktemp("archive")
    sessions = agents_corpus(root, SESSIONS).resolve()
    single, sharded = root / "single", root / "sharded"
    reindex(sessions=sessions, index=single, workers=1)
    victim = f"-{cluster.workers[0].pid}-"
    killed, stop = threading.Event(), threading.Event()

    def kill_while_writing() -> None:
        deadline = time.monotonic() + 120
        while not stop.is_set() and time.monotonic() < deadline:
            if any(victim in name for name in _names(sharded / "shards")):
                cluster.kill_worker(0)
                killed.set()
                return
            time.sleep(0.005)

    killer = threading.Thread(target=kill_while_writing, daemon=True)
    killer.start()
    try:
        report = reindex(sessions=sessions, index=sharded, cluster=cluster.address,
                         shard_bytes=SHARD_BYTES)
    finally:
        stop.set()
        killer.join(timeout=30)
    listed = {entry["name"] for entry in read_manifest(sharded)["shards"]}
    leftovers = [name for name in _names(sharded / "shards") if name not in listed]
    return Built(sessions, single, sharded, report, killed.is_set(), leftovers)


def _names(folder: Path) -> list[str]:
    try:
        return os.listdir(folder)
    except FileNotFoundError:
        return []


def test_a_worker_killed_mid_job_leaves_every_session_indexed_once(built: Built) -> None:
    """Worker 0 is SIGKILLed while it writes a shard: the job still finishes, every session
    of the archive is indexed exactly once, and no partial shard is left or listed."""
    assert built.killed
    files = sorted(str(p) for p in iter_session_files(built.sessions))
    assert len(files) >= SESSIONS
    report = built.report
    assert (report["sessions"], report["indexed"], report["invalid"]) == (len(files),
                                                                         len(files), [])
    assert report["shards"]["built"] == report["shards"]["total"] >= 16
    manifest = read_manifest(built.sharded)
    in_shards = [f["path"] for entry in manifest["shards"] for f in entry["files"]]
    assert sorted(in_shards) == files
    listing = list_sessions(index=built.sharded)
    assert listing["total"] == len(files)
    assert sorted(s["path"] for s in listing["sessions"]) == files
    assert not [name for name in built.leftovers if name.startswith(".tmp-")]
    checked = verify(index=built.sharded)
    assert (checked["ok"], checked["indexProblems"]) == (len(files), [])
    assert stats(index=built.sharded)["documents"] == stats(index=built.single)["documents"]


def _every_hit(index: Path, sessions: Path, query: str, match: str) -> tuple[
        list[tuple[str, str]], list[tuple[str, str]], dict[str, Any]]:
    """All hits of a query, page by page through ``next``, the outputs folded into them
    (near-identical to a hit), and the first page's counts."""
    hits: list[tuple[str, str]] = []
    folded: list[tuple[str, str]] = []
    page = recall(query, match=match, limit=50, index=index, sessions=sessions)  # type: ignore[arg-type]
    first = {key: page.get(key) for key in ("total", "matched", "allWords")}
    while True:
        hits.extend((hit["path"], hit["address"]) for hit in page["hits"])
        folded.extend((hit["path"], address) for hit in page["hits"]
                      for address in hit.get("similarAddresses", []))
        if page["next"] is None:
            return hits, folded, first
        page = recall(**{**page["next"], "index": index})  # type: ignore[arg-type]


@pytest.mark.parametrize(("query", "match"), QUERIES)
def test_sharded_recall_finds_what_the_single_index_finds(
    built: Built, query: str, match: str
) -> None:
    """Over every page, the sharded index finds the single index's entries, each once: as
    a hit, or folded into one as a near-identical output (each shard folds its own first
    hits, so which of a session's alike outputs stand for the others may differ); the
    totals count the hits shown, and with the folded ones they agree."""
    single, single_folded, single_counts = _every_hit(built.single, built.sessions, query,
                                                      match)
    sharded, sharded_folded, sharded_counts = _every_hit(built.sharded, built.sessions, query,
                                                         match)
    assert single, query
    for hits, folded, counts in ((single, single_folded, single_counts),
                                 (sharded, sharded_folded, sharded_counts)):
        assert len(hits) == len(set(hits)) == counts["total"]
        assert not set(hits) & set(folded) and len(folded) == len(set(folded))
    assert set(sharded) | set(sharded_folded) == set(single) | set(single_folded)
    assert len(sharded) + len(sharded_folded) == len(single) + len(single_folded)
    assert sharded_counts["matched"] == single_counts["matched"]
    if not single_folded and not sharded_folded:
        assert sharded_counts == single_counts


def _expanded(index: Path, sessions: Path, path: str, address: str) -> bytes:
    page = expand(path, addresses=[address], index=index, sessions=sessions)
    return orjson.dumps({**page, "next": None})


def test_expand_of_every_hit_reads_the_same_bytes(built: Built) -> None:
    """Expanding each hit of the queries through the sharded index gives the same answer,
    byte for byte, as through the single index."""
    hits = {hit for query, match in QUERIES
            for hit in _every_hit(built.single, built.sessions, query, match)[0]}
    assert len(hits) > 200
    for path, address in sorted(hits):
        assert _expanded(built.sharded, built.sessions, path, address) == _expanded(
            built.single, built.sessions, path, address)


def test_one_changed_file_rebuilds_one_shard(built: Built, cluster: LoopbackCluster) -> None:
    """After one file's bytes change (same size) and another is only touched, a re-run on the
    cluster rebuilds the one shard holding the changed file and keeps every other."""
    files = sorted(iter_session_files(built.sessions))
    changed = next(path for path in files[7:] if b"Answer" in path.read_bytes())
    touched = files[1500]
    changed.write_bytes(changed.read_bytes().replace(b"Answer", b"Anzwer", 1))
    later = time.time() + 5
    os.utime(touched, (later, later))
    before = read_manifest(built.sharded)
    again = reindex(sessions=built.sessions, index=built.sharded, cluster=cluster.address,
                    shard_bytes=SHARD_BYTES)
    assert again["shards"]["built"] == 1
    assert again["shards"]["kept"] == again["shards"]["total"] - 1 == len(before["shards"]) - 1
    holder = next(e for e in before["shards"] if str(changed) in {f["path"] for f in e["files"]})
    assert again["indexed"] == len(holder["files"])
    found = recall("anzwer", index=built.sharded, sessions=built.sessions)
    assert str(changed) in {hit["path"] for hit in found["hits"]}


def test_a_noop_rerun_reads_no_session_file(
    built: Built, cluster: LoopbackCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With nothing changed, a re-run opens no session file and builds no shard."""
    reindex(sessions=built.sessions, index=built.sharded, cluster=cluster.address,
            shard_bytes=SHARD_BYTES)
    refuse_opening(monkeypatch, built.sessions)
    again = reindex(sessions=built.sessions, index=built.sharded, cluster=cluster.address,
                    shard_bytes=SHARD_BYTES)
    assert (again["shards"]["built"], again["indexed"]) == (0, 0)
    assert again["skipped"] == again["sessions"] >= SESSIONS
