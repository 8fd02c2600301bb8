"""The Tantivy layer: versioned directory, rebuild notice, lock, and translated errors."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from fabric_memory.errors import IndexLockedError, MemoryIndexError, QueryError
from fabric_memory.memory import index as index_module
from fabric_memory.memory.catalog import stats
from fabric_memory.memory.index import (
    SCHEMA_TAG,
    SCHEMA_VERSION,
    IndexLock,
    SearchSpec,
    analyze,
    open_index,
    query_words,
)
from fabric_memory.memory.recall import recall
from fabric_memory.memory.reindex import reindex
from fabric_memory.words import words

from .memory_builder import SessionBuilder


@pytest.fixture
def indexed(tmp_path: Path) -> dict[str, Path]:
    builder = SessionBuilder(tmp_path / "sessions" / "one.jsonl")
    builder.user("alpha beta")
    builder.write()
    roots = {"sessions": tmp_path / "sessions", "index": tmp_path / "index"}
    reindex(**roots, workers=1)
    return roots


def test_index_directory_is_private_and_versioned(indexed: dict[str, Path]) -> None:
    """The index lives in <dir>/v<schema> and the directories are mode 0700."""
    root = indexed["index"]
    assert (root / f"v{SCHEMA_TAG}" / "meta.json").is_file()
    for path in (root, root / f"v{SCHEMA_TAG}"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700


def test_missing_index_says_to_reindex(tmp_path: Path) -> None:
    """Querying a directory with no index is one clear line naming the fix."""
    with pytest.raises(MemoryIndexError, match="run `fabric-memory reindex`"):
        recall("x", index=tmp_path / "none", sessions=tmp_path)


@pytest.mark.parametrize("old", [
    "1", f"{SCHEMA_VERSION + 7}", f"{SCHEMA_VERSION}-0badc0de",
], ids=["layout v1", "a newer layout", "other redaction rules"])
def test_old_schema_version_is_refused_then_rebuilt_with_notice(
    indexed: dict[str, Path], old: str
) -> None:
    """An index of another layout or built under other redaction rules is not read; reindex
    rebuilds it with a notice."""
    root = indexed["index"]
    (root / f"v{SCHEMA_TAG}").rename(root / f"v{old}")
    with pytest.raises(MemoryIndexError, match=f"schema v{old}.*reindex"):
        recall("alpha", **indexed)
    report = reindex(**indexed, workers=1)
    assert report["notices"] == [
        f"memory index at {root} had schema v{old}; rebuilt with schema v{SCHEMA_TAG}"]
    assert report["indexed"] == 1
    assert not (root / f"v{old}").exists()
    assert recall("alpha", **indexed)["total"] == 1


def test_lock_is_exclusive_and_released(tmp_path: Path) -> None:
    """A second holder times out with IndexLockedError; after release it gets the lock."""
    first, second = IndexLock(tmp_path), IndexLock(tmp_path)
    first.acquire(0.1)
    with pytest.raises(IndexLockedError, match=r"writer\.lock"):
        second.acquire(0.05)
    first.release()
    second.acquire(0.05)
    second.release()


def test_committed_documents_are_visible_after_reload(indexed: dict[str, Path]) -> None:
    """Commit, wait for merges, reload: the search sees exactly the committed documents."""
    handle = open_index(indexed["index"])
    with handle.writer(timeout=1.0) as writer:
        writer.replace_session("/nowhere.jsonl", [])
        writer.commit()
    handle.refresh()
    page = handle.search(SearchSpec(text="alpha"), limit=10, offset=0, snippet_chars=50)
    assert page.total == 1
    assert page.hits[0].fields["path"] == str(indexed["sessions"] / "one.jsonl")
    assert stats(index=indexed["index"])["documents"] == 1


def test_tantivy_errors_arrive_as_engine_errors(indexed: dict[str, Path]) -> None:
    """A regex Tantivy rejects becomes a QueryError naming the pattern, not a ValueError."""
    with pytest.raises(QueryError, match=r'regex "a\{99999\}\{99999\}"'):
        recall("a{99999}{99999}", mode="regex", **indexed)


def test_tokenizer_keeps_unicode_words_whole() -> None:
    """Words are Unicode letters/digits, lowercased, without folding (ü stays ü); a CJK
    character is a word of its own."""
    assert analyze("HOLDOUT_FACT_003 Zürich→東京 ✓ src/Überblick.ts") == [
        "holdout", "fact", "003", "zürich", "東", "京", "src", "überblick", "ts"]


PARITY_TEXTS = (
    "Fix src/Überblick.ts: HOLDOUT_FACT_003 at 12.5 ΟΔΟΣ",
    "钩子配置在网关里，身份验证失败 (gateway.auth) 检查 openclaw.json",
    "サーバーを起動しました。エラー: ECONNREFUSED",
    "서버에서 오류가 발생했습니다 rate-limit 429",
    "mixed 中文English混合 text ー々 東京2026",
)


@pytest.mark.parametrize("text", PARITY_TEXTS)
def test_query_words_are_the_shared_words(text: str) -> None:
    """The index reads a query's words as fabric_memory.words does (a CJK pair as the
    phrase of its two characters), so the summary ranks the words recall finds."""
    assert ["".join(word) for _, word in query_words(text)] == words(text)


def test_words_up_to_128_characters_are_kept() -> None:
    """A sha256 (64 hex) or sha512 (128 hex) digest is one word the index keeps; a longer
    run (a base64 blob) is left out."""
    assert analyze("sha256:" + "ab" * 32) == ["sha256", "ab" * 32]
    assert analyze("x" * 128) == ["x" * 128]
    assert analyze("y" * 129) == []


def test_only_trivially_cheap_regexes_skip_the_compile_check(
    indexed: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Word characters around one wildcard compile in-process; anything else is first
    compiled in a child process under the time cap, with the same results either way."""
    forks: list[str] = []
    real_fork = index_module.os.fork

    def counting_fork() -> int:
        forks.append("fork")
        return real_fork()

    monkeypatch.setattr(index_module.os, "fork", counting_fork)
    for cheap in ("alph.*", "alpha", "alp.a", "b.+a", ".?beta", "ALPHA_9"):
        recall(cheap, mode="regex", **indexed)
    assert forks == []
    expected = {"alph.*": 1, "al(p)ha": 1, "alph[a-z]": 1, "al.*h.*": 1, "ü.*": 0}
    for pattern, total in expected.items():
        assert recall(pattern, mode="regex", **indexed)["total"] == total, pattern
    assert len(forks) == 4  # every pattern above but the first was checked in a child
