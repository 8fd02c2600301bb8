"""The handoff hook in-process on the largest fixture transcript at hook time (floor: the
agent's reader alone); the process figure is ``python -m bench.compare --only 'handoff hook'``."""

from __future__ import annotations

from pathlib import Path

import pytest
from pytest_benchmark.fixture import BenchmarkFixture

from bench import packet
from bench.conftest import SIDES, measure
from bench.workloads import Pair


@pytest.mark.parametrize("side", SIDES)
def test_handoff_hook(benchmark: BenchmarkFixture, tmp_path: Path, side: str) -> None:
    """One hook call on the largest fixture transcript, as Claude Code leaves it."""
    benchmark.group = "handoff hook"
    path, event = packet.at_hook_time(packet.largest_fixture(), tmp_path)
    pair = Pair(lambda: packet.in_process(event, tmp_path / "handoff.log"),
                lambda: packet.reader_alone(path), path.stat().st_size)
    measure(benchmark, pair, side, "bytes_per_s")
