"""The Pi 1.6.0 ground-truth corpus bundled in ``fixtures/pi-1.6.0``.

Session files are kept plain (the reader reads them as Pi wrote them); the two large
data files are gzipped (``traces.jsonl.gz`` and the ~3 MB session's truth). Everything
here is lazy: nothing is read when a test module is imported.
"""

from __future__ import annotations

import functools
import gzip
from pathlib import Path
from typing import Any

import orjson

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "fixtures" / "pi-1.6.0"


def corpus_bytes(relative: str | Path) -> bytes:
    """The bytes of a corpus file, read through its ``.gz`` twin when it is stored compressed."""
    path = CORPUS / relative
    if path.exists():
        return path.read_bytes()
    packed = path.with_name(path.name + ".gz")
    if packed.exists():
        return gzip.decompress(packed.read_bytes())
    raise FileNotFoundError(f"corpus file missing: {path} (nor {packed.name})")


def corpus_json(relative: str | Path) -> Any:
    return orjson.loads(corpus_bytes(relative))


@functools.cache
def corpus_index() -> dict[str, Any]:
    """``truth/INDEX.json``: every corpus file with its name, path and truth path."""
    index: dict[str, Any] = corpus_json("truth/INDEX.json")
    return index


def truth_files() -> list[str]:
    """Truth paths relative to the corpus, one per session file (``.gz`` suffix removed)."""
    root = CORPUS / "truth" / "sessions"
    names = {str(p.relative_to(CORPUS)).removesuffix(".gz") for p in root.rglob("*.json*")}
    assert names, f"no truth files under {root}"
    return sorted(names)
