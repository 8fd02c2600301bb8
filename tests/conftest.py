"""Shared fixtures: where the Pi ground-truth corpus and the bundled fixtures live."""

from __future__ import annotations

from pathlib import Path

import pytest

from .corpus import CORPUS, REPO

FIXTURES = REPO / "fixtures"

__all__ = ["CORPUS", "FIXTURES", "REPO"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite golden files under tests/golden/ instead of comparing against them",
    )


@pytest.fixture(scope="session")
def update_golden(request: pytest.FixtureRequest) -> bool:
    """Whether golden files are rewritten (``pytest --update-golden``)."""
    return bool(request.config.getoption("--update-golden"))


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    """The real Pi 1.6.0 corpus with ground truth, bundled in fixtures/ (read-only)."""
    assert CORPUS.is_dir(), f"ground-truth corpus missing at {CORPUS}"
    return CORPUS


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    """The bundled hand-built fixtures."""
    return FIXTURES


@pytest.fixture(scope="session")
def memory_corpus(tmp_path_factory: pytest.TempPathFactory, corpus_dir: Path) -> object:
    """The corpus plus planted sessions, copied and indexed once for the memory tests."""
    from .memory_builder import build_memory_corpus

    return build_memory_corpus(tmp_path_factory.mktemp("memory-corpus"), corpus_dir)


@pytest.fixture(scope="session")
def pi_mono(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The four real pi-mono sessions (fixtures/pi-mono-real), copied and indexed once:
    ``sessions`` and ``index`` as recall and expand take them."""
    import shutil

    from fabric_memory.memory.reindex import reindex

    root = tmp_path_factory.mktemp("pi-mono")
    sessions = root / "sessions"
    sessions.mkdir()
    for path in sorted((FIXTURES / "pi-mono-real").glob("*.jsonl")):
        shutil.copyfile(path, sessions / path.name)
    roots = {"sessions": sessions, "index": root / "index"}
    reindex(**roots, workers=1)
    return roots
