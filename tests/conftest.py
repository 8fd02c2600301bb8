"""Shared fixtures: where the Pi ground-truth corpus and the bundled fixtures live."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures"
CORPUS = REPO.parent / "shared" / "corpus" / "pi-1.6.0"


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    """The real Pi 1.6.0 corpus with ground truth (read-only)."""
    assert CORPUS.is_dir(), f"ground-truth corpus missing at {CORPUS}"
    return CORPUS


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    """The bundled hand-built fixtures."""
    return FIXTURES
