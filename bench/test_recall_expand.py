"""Recall at ~100k and >= 1M documents (four modes, and plain questions) and expand of 1
and 100 addresses."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pytest_benchmark.fixture import BenchmarkFixture

from bench import workloads
from bench.conftest import SIDES
from bench.data import BuiltIndex


@pytest.mark.parametrize("side", SIDES)
@pytest.mark.parametrize("mode", workloads.RECALL_MODES)
@pytest.mark.parametrize("name", ["medium", "large"])
def test_recall(
    benchmark: BenchmarkFixture, indexes: Callable[[str], BuiltIndex], name: str, mode: str,
    side: str,
) -> None:
    """One recall per call, rotating requests (floor: the bare Tantivy search + stored docs)."""
    built = indexes(name)
    benchmark.group = f"recall {mode} @ {built.documents} docs"
    pair = workloads.recall_pair(built.index, built.sessions, mode)
    benchmark(pair.ours if side == "ours" else pair.floor)


@pytest.mark.parametrize("side", SIDES)
@pytest.mark.parametrize("name", ["medium", "large"])
def test_recall_natural(
    benchmark: BenchmarkFixture, indexes: Callable[[str], BuiltIndex], name: str, side: str,
) -> None:
    """One 6-10 word plain question per call (floor: one-word literal recall, as today)."""
    built = indexes(name)
    benchmark.group = f"recall natural @ {built.documents} docs"
    pair = workloads.natural_pair(built.index, built.sessions)
    benchmark(pair.ours if side == "ours" else pair.floor)


@pytest.mark.parametrize("side", SIDES)
@pytest.mark.parametrize("selectors", [1, 100])
def test_expand(
    benchmark: BenchmarkFixture, indexes: Callable[[str], BuiltIndex], selectors: int,
    side: str,
) -> None:
    """Expand addresses of one 1 MiB session (floor: read those lines directly)."""
    built = indexes("large")
    benchmark.group = f"expand {selectors}"
    path = built.sessions / "rich" / "rich-0000.jsonl"
    pair = workloads.expand_pair(built.index, built.sessions, path, selectors)
    benchmark(pair.ours if side == "ours" else pair.floor)
