"""Full reindex (documents/s, sessions/s) beside Tantivy's floor, and the no-op reindex."""

from __future__ import annotations

from pathlib import Path

import pytest
from pytest_benchmark.fixture import BenchmarkFixture

from bench import workloads


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
