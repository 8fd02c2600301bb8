"""Full reindex (documents/s, sessions/s) beside Tantivy's floor, the no-op reindex, and the
full reindex of each session format side by side."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from pytest_benchmark.fixture import BenchmarkFixture

from bench import data, workloads
from bench.data import Scale


@pytest.fixture(scope="module")
def prebuilt(corpus: Path) -> workloads.Prebuilt:
    return workloads.prebuild(corpus)


@pytest.mark.parametrize("side", ["ours", "floor"])
def test_full_reindex(
    benchmark: BenchmarkFixture, prebuilt: workloads.Prebuilt, tmp_path: Path, side: str
) -> None:
    """A full reindex into a fresh index (floor: the prebuilt documents into Tantivy)."""
    benchmark.group = "full reindex"
    pair = workloads.reindex_pair(prebuilt, tmp_path)
    run = pair.ours if side == "ours" else pair.floor
    benchmark.pedantic(run, rounds=3, iterations=1)  # type: ignore[no-untyped-call]
    stats = benchmark.stats
    if stats is not None and stats.stats.median:
        benchmark.extra_info["docs_per_s"] = len(prebuilt.documents) / stats.stats.median
        benchmark.extra_info["sessions_per_s"] = len(prebuilt.records) / stats.stats.median


def test_noop_reindex(
    benchmark: BenchmarkFixture, prebuilt: workloads.Prebuilt, tmp_path: Path
) -> None:
    """An incremental reindex of an up-to-date index: stat every file, open none."""
    benchmark.group = "no-op reindex"
    workloads.reindex_pair(prebuilt, tmp_path).ours()
    benchmark(workloads.noop_reindex(prebuilt.sessions, tmp_path / "ours"))


@pytest.mark.parametrize("agent", data.FORMATS)
def test_reindex_per_format(
    benchmark: BenchmarkFixture, root: Path, scale: Scale, tmp_path: Path, agent: str
) -> None:
    """A full reindex of the same seeded conversations written in one agent's format: each
    reader's documents/s side by side, and its time over Tantivy's floor taking the same
    documents (measured in the same process)."""
    benchmark.group = "reindex per format"
    prebuilt = workloads.prebuild(data.format_corpus(root, agent, scale.corpus_sessions))
    pair = workloads.reindex_pair(prebuilt, tmp_path)
    floor = min(_timed(pair.floor) for _ in range(3))
    benchmark.pedantic(pair.ours, rounds=3, iterations=1)  # type: ignore[no-untyped-call]
    stats = benchmark.stats
    if stats is not None and stats.stats.median:
        median = stats.stats.median
        benchmark.extra_info.update(docs_per_s=len(prebuilt.documents) / median,
                                    sessions=len(prebuilt.records),
                                    ours_over_floor=median / floor)


def _timed(run: Callable[[], object]) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started
