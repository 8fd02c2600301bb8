"""Fixtures of the pytest-benchmark suites: ``pytest bench`` (never part of the default run).

``FABRIC_MEMORY_BENCH_SCALE=quick`` runs the suites on the small data of
``python -m bench.compare --quick`` in a temporary directory; otherwise the full
data is built once into the bench cache (:func:`bench.data.cache_root`) and reused.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from pytest_benchmark.fixture import BenchmarkFixture

from bench import data
from bench.data import FULL, QUICK, BuiltIndex, Scale
from bench.workloads import Pair

SIDES = ("ours", "floor")
SCALE: Scale = QUICK if os.environ.get("FABRIC_MEMORY_BENCH_SCALE") == "quick" else FULL


@pytest.fixture(scope="session")
def scale() -> Scale:
    return SCALE


@pytest.fixture(scope="session")
def root(scale: Scale, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return data.cache_root() if scale is FULL else tmp_path_factory.mktemp("bench-data")


@pytest.fixture(scope="session")
def corpus(root: Path, scale: Scale) -> Path:
    return data.corpus(root, scale.corpus_sessions)


@pytest.fixture(scope="session")
def rich(root: Path, scale: Scale) -> list[Path]:
    return data.rich_sessions(root, max(1, scale.medium_rich // 10))


def _index(root: Path, scale: Scale, name: str) -> BuiltIndex:
    rich = scale.medium_rich if name == "medium" else scale.large_rich
    sessions = data.mixed_sessions(root, name, scale.corpus_sessions, rich)
    return data.built_index(root, name, sessions)


@pytest.fixture(scope="session")
def indexes(root: Path, scale: Scale) -> Callable[[str], BuiltIndex]:
    built: dict[str, BuiltIndex] = {}

    def get(name: str) -> BuiltIndex:
        if name not in built:
            built[name] = _index(root, scale, name)
        return built[name]

    return get


def measure(benchmark: BenchmarkFixture, pair: Pair, side: str, unit: str) -> None:
    """Benchmark one side of ``pair`` and record its throughput in ``extra_info``."""
    benchmark(pair.ours if side == "ours" else pair.floor)
    benchmark.extra_info["side"] = side
    stats = benchmark.stats
    median = stats.stats.median if stats is not None else 0.0
    if median:
        benchmark.extra_info[unit] = pair.units / median


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Module | None:
    """Collect ``bench_*.py`` too (``test_*.py`` is collected as usual) under ``pytest bench``."""
    if (file_path.suffix == ".py" and file_path.name.startswith("bench_")
            and not parent.session.isinitpath(file_path)):
        module: pytest.Module = pytest.Module.from_parent(parent, path=file_path)
        return module
    return None
