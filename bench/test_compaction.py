"""Compaction per cycle across source sizes 10 KiB -> 1 MiB (the certify run: bench_certify)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pytest_benchmark.fixture import BenchmarkFixture

from bench import data, workloads
from bench.conftest import SCALE, SIDES, measure


@pytest.mark.parametrize("side", SIDES)
@pytest.mark.parametrize("kib", SCALE.compaction_kib)
def test_compaction(benchmark: BenchmarkFixture, root: Path, kib: int, side: str) -> None:
    """One compaction cycle of a rich session (floor: read and parse the file)."""
    benchmark.group = f"compaction {kib} KiB source"
    path = data.rich_sessions(root, 1, kib * 1024)[0]
    measure(benchmark, workloads.compaction_pair(path), side, "bytes_per_s")
