"""The V1 guard (traces/s) and session reading (MB/s), each beside its floor."""

from __future__ import annotations

from pathlib import Path

import pytest
from pytest_benchmark.fixture import BenchmarkFixture

from bench import data, workloads
from bench.conftest import SIDES, measure


@pytest.mark.parametrize("side", SIDES)
def test_guard(benchmark: BenchmarkFixture, rich: list[Path], corpus: Path, side: str) -> None:
    """Parse + guard every trace of the corpus and rich sessions (floor: parse alone)."""
    benchmark.group = "guard: traces/s"
    sources = rich + sorted(corpus.rglob("*.jsonl"))
    pair = workloads.guard_pair(data.trace_bytes(data.fabric_result_lines(sources)))
    measure(benchmark, pair, side, "traces_per_s")


@pytest.mark.parametrize("side", SIDES)
@pytest.mark.parametrize("files", ["small", "large"])
def test_read(
    benchmark: BenchmarkFixture, rich: list[Path], corpus: Path, files: str, side: str
) -> None:
    """read_session of every file (floor: read, xxh3 and orjson per line)."""
    benchmark.group = f"session read ({files} files): bytes/s"
    paths = sorted(corpus.rglob("*.jsonl")) if files == "small" else rich
    measure(benchmark, workloads.read_pair(paths), side, "bytes_per_s")
