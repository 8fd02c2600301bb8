"""Tiers: the newest sessions are hot (checked per query), the rest cold (served as indexed)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from fabric_memory.errors import ExpandError
from fabric_memory.memory import reindex as reindex_module
from fabric_memory.memory.catalog import list_sessions
from fabric_memory.memory.expand import expand_request
from fabric_memory.memory.index import IndexLock
from fabric_memory.memory.recall import recall
from fabric_memory.memory.reindex import reindex

from .memory_builder import SessionBuilder

NOW = time.time()


def _setup(tmp_path: Path) -> tuple[dict[str, Path], list[SessionBuilder]]:
    roots = {"sessions": tmp_path / "sessions", "index": tmp_path / "index"}
    builders = []
    for n, word in enumerate(("oldest", "middle", "newest")):
        builder = SessionBuilder(roots["sessions"] / f"{n}.jsonl")
        builder.user(f"{word} marker words")
        builder.write(mtime=NOW - 3000 + 1000 * n)
        builders.append(builder)
    reindex(**roots, workers=1)
    return roots, builders


def _tier(roots: dict[str, Path], word: str) -> str:
    return str(recall(word, hot_sessions=1, **roots)["hits"][0]["tier"])


def test_tiers_follow_mtime_and_switch_when_it_moves(tmp_path: Path) -> None:
    """Only the newest mtime is hot; touching the oldest file makes it hot after a reindex."""
    roots, builders = _setup(tmp_path)
    assert [_tier(roots, w) for w in ("oldest", "middle", "newest")] == ["cold", "cold", "hot"]
    touched = NOW + 1000
    os.utime(builders[0].path, (touched, touched))
    assert reindex(**roots, workers=1)["indexed"] == 0
    assert [_tier(roots, w) for w in ("oldest", "middle", "newest")] == ["hot", "cold", "cold"]
    listing = list_sessions(index=roots["index"], hot_sessions=1)["sessions"]
    assert [(s["path"], s["tier"]) for s in listing] == [
        (str(builders[0].path), "hot"), (str(builders[2].path), "cold"),
        (str(builders[1].path), "cold")]


def test_hot_session_is_reindexed_before_answering(tmp_path: Path) -> None:
    """A hot session appended since the last reindex is searchable at once."""
    roots, builders = _setup(tmp_path)
    builders[2].append("freshhotword")
    response = recall("freshhotword", hot_sessions=1, **roots)
    assert response["total"] == 1
    hit = response["hits"][0]
    assert (hit["tier"], hit["stale"]) == ("hot", False)
    assert "freshhotword" in expand_request(hit["follow"])["entries"][0]["text"]


def test_cold_session_is_served_as_indexed(tmp_path: Path) -> None:
    """A changed cold session is not re-read by a query: its new text waits for reindex."""
    roots, builders = _setup(tmp_path)
    builders[0].append("freshcoldword")
    assert recall("freshcoldword", hot_sessions=1, **roots)["total"] == 0
    old = recall("oldest", hot_sessions=1, **roots)["hits"][0]
    with pytest.raises(ExpandError) as caught:
        expand_request(old["follow"])
    assert caught.value.code == "stale_pointer"
    reindex(**roots, workers=1)
    assert recall("freshcoldword", hot_sessions=1, **roots)["total"] == 1


def test_unchanged_hot_sessions_cost_a_stat_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With nothing changed, a query opens no session file (no hash, no parse)."""
    roots, _ = _setup(tmp_path)

    def explode(*args: object, **kwargs: object) -> None:
        raise AssertionError("a session file was read")

    monkeypatch.setattr(reindex_module, "read_source", explode)
    monkeypatch.setattr(reindex_module, "hash_file", explode)
    assert recall("marker", hot_sessions=3, **roots)["total"] == 3


def test_query_never_waits_for_a_busy_writer(tmp_path: Path) -> None:
    """With the writer lock held, a changed hot session is answered from the index, stale."""
    roots, builders = _setup(tmp_path)
    builders[2].append("lockedword")
    lock = IndexLock(roots["index"])
    lock.acquire(1.0)
    try:
        started = time.monotonic()
        response = recall("newest", hot_sessions=1, **roots)
        assert time.monotonic() - started < 1.0
    finally:
        lock.release()
    assert response["hits"][0]["stale"] is True
    assert recall("lockedword", hot_sessions=1, **roots)["total"] == 1
