"""A sharded index on one machine: its delta (the live index, the hot tier), its manifest,
secrets and containment on the worker, and its errors."""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import orjson
import pytest

from fabric_memory.cli import main
from fabric_memory.errors import ClusterError, MemoryIndexError, UsageError
from fabric_memory.memory import cluster as dask_cluster
from fabric_memory.memory.catalog import list_sessions, stats, verify
from fabric_memory.memory.expand import expand
from fabric_memory.memory.recall import recall
from fabric_memory.memory.reindex import reindex, reindex_paths
from fabric_memory.memory.sharded import read_manifest

from .memory_builder import SessionBuilder
from .reliability import append_user
from .secret_samples import aws_access_key_id

WORDS = ("walrus", "narwhal", "okapi", "quokka", "axolotl", "pangolin")
SHARD_BYTES = 400
"""A shard per session or two: the tests' sessions are a few hundred bytes each."""


def _sessions(folder: Path) -> Path:
    for number, word in enumerate(WORDS):
        builder = SessionBuilder(folder / f"--repo-{number % 2}--" / f"{word}.jsonl")
        builder.user(f"the {word} session mentions shared words")
        builder.write()
    return folder


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Sessions and their sharded index, built once on this machine."""
    root = tmp_path_factory.mktemp("sharded")
    sessions = _sessions(root / "sessions")
    report = reindex(sessions=sessions, index=root / "index", sharded=True,
                     shard_bytes=SHARD_BYTES, workers=1)
    assert report["shards"]["total"] >= 3
    return root


@pytest.fixture
def roots(built: Path, tmp_path: Path) -> dict[str, Path]:
    """A private copy of the built sessions and index (their paths as the copy's)."""
    sessions = tmp_path / "sessions"
    shutil.copytree(built / "sessions", sessions)
    index = tmp_path / "index"
    reindex(sessions=sessions, index=index, sharded=True, shard_bytes=SHARD_BYTES, workers=1)
    return {"sessions": sessions.resolve(), "index": index}


def _total(word: str, roots: dict[str, Path], **options: object) -> int:
    return recall(word, **roots, **options)["total"]  # type: ignore[arg-type]


def test_a_rerun_on_this_machine_is_the_same_build(roots: dict[str, Path]) -> None:
    """`reindex` without --cluster on a sharded index runs the same build here: a new file
    becomes a new shard, the others are kept unread."""
    before = read_manifest(roots["index"])
    fresh = SessionBuilder(roots["sessions"] / "--repo-9--" / "capybara.jsonl")
    fresh.user("a capybara appears")
    fresh.write()
    report = reindex(**roots, shard_bytes=SHARD_BYTES)
    assert report["shards"] == {"total": len(before["shards"]) + 1, "built": 1,
                                "kept": len(before["shards"]), "engine": "this machine"}
    assert (report["indexed"], report["skipped"]) == (1, len(WORDS))
    assert report["sessionsRoots"] == [str(roots["sessions"])]
    assert _total("capybara", roots) == 1


@pytest.mark.parametrize("limit", [1, 4])
def test_pages_of_a_sharded_recall_neither_overlap_nor_skip(
    roots: dict[str, Path], tmp_path: Path, limit: int
) -> None:
    """Page after page (each following ``next``), a recall over the shards returns every hit
    of a single index over the same files exactly once, with the same total each page."""
    single = tmp_path / "single"
    reindex(sessions=roots["sessions"], index=single, workers=1)
    expected = {(h["path"], h["address"])
                for h in recall("shared words", index=single, sessions=roots["sessions"],
                                limit=50)["hits"]}
    seen: list[tuple[str, str]] = []
    page = recall("shared words", **roots, limit=limit)  # type: ignore[arg-type]
    while True:
        assert page["total"] == len(expected)
        seen.extend((h["path"], h["address"]) for h in page["hits"])
        if page["next"] is None:
            break
        page = recall(**page["next"])  # type: ignore[arg-type]
    assert len(seen) == len(set(seen)) and set(seen) == expected


def test_the_live_index_writes_a_new_session_into_the_delta(roots: dict[str, Path]) -> None:
    """A new session named to the live index's step goes into the delta beside the shards:
    recall, expand and sessions see it; the manifest is untouched."""
    manifest = (roots["index"] / "manifest.json").read_bytes()
    fresh = SessionBuilder(roots["sessions"] / "--new--" / "capybara.jsonl")
    fresh.user("a capybara appears")
    fresh.write()
    report = reindex_paths([fresh.path], **roots)
    assert report["indexed"] == 1
    assert (roots["index"] / "delta").is_dir()
    assert (roots["index"] / "manifest.json").read_bytes() == manifest
    found = recall("capybara", **roots)  # type: ignore[arg-type]
    assert [hit["path"] for hit in found["hits"]] == [str(fresh.path)]
    page = expand(str(fresh.path), addresses=[found["hits"][0]["address"]], **roots)  # type: ignore[arg-type]
    assert "capybara" in orjson.dumps(page).decode()
    assert list_sessions(**roots)["total"] == len(WORDS) + 1  # type: ignore[arg-type]


def test_a_changed_session_in_the_delta_hides_its_shard_copy(roots: dict[str, Path]) -> None:
    """A session re-indexed into the delta answers from there only: its old words once, its
    new words found, its entries counted once in stats."""
    path = roots["sessions"] / "--repo-0--" / "walrus.jsonl"
    documents = stats(index=roots["index"])["documents"]
    append_user(path, "the walrus met a dugong")
    reindex_paths([path], **roots)
    assert _total("walrus", roots) == 2  # the first entry and the new one, nothing twice
    assert _total("dugong", roots) == 1
    assert _total("shared", roots) == len(WORDS)
    assert stats(index=roots["index"])["documents"] == documents + 1
    assert list_sessions(**roots)["total"] == len(WORDS)  # type: ignore[arg-type]


def test_the_hot_tier_refreshes_a_changed_session_into_the_delta(
    roots: dict[str, Path]
) -> None:
    """A hot session changed on disk is re-read by the next recall into the delta."""
    path = roots["sessions"] / "--repo-1--" / "narwhal.jsonl"
    append_user(path, "the narwhal saw a beluga")
    assert _total("beluga", roots) == 1
    assert (roots["index"] / "delta").is_dir()
    assert _total("narwhal", roots) == 2


def test_a_removed_session_leaves_the_sharded_index(roots: dict[str, Path]) -> None:
    """A session file deleted and named to the live step is gone from recall and sessions,
    though its shard still holds it until the next build, which then drops it."""
    path = roots["sessions"] / "--repo-0--" / "okapi.jsonl"
    path.unlink()
    reindex_paths([path], **roots)
    assert _total("okapi", roots) == 0
    assert str(path) not in {s["path"] for s in list_sessions(**roots)["sessions"]}  # type: ignore[arg-type]
    report = reindex(**roots, shard_bytes=SHARD_BYTES)
    assert [item["path"] for item in report["removed"]] == [str(path)]
    assert str(path) not in {f["path"] for e in read_manifest(roots["index"])["shards"]
                             for f in e["files"]}
    assert _total("okapi", roots) == 0


def test_the_next_build_takes_the_delta_into_shards(roots: dict[str, Path]) -> None:
    """After a build, the sessions the delta held are in the shards and gone from the delta;
    each is found once."""
    fresh = SessionBuilder(roots["sessions"] / "--new--" / "capybara.jsonl")
    fresh.user("a capybara appears")
    fresh.write()
    reindex_paths([fresh.path], **roots)
    reindex(**roots, shard_bytes=SHARD_BYTES)
    assert str(fresh.path) in {f["path"] for e in read_manifest(roots["index"])["shards"]
                               for f in e["files"]}
    assert list_sessions(index=roots["index"] / "delta")["total"] == 0
    assert _total("capybara", roots) == 1


def test_secrets_are_masked_before_a_shard_is_written(tmp_path: Path) -> None:
    """A credential in a session is masked on the worker: no byte of any shard holds it."""
    sample = aws_access_key_id(random.Random(7))
    builder = SessionBuilder(tmp_path / "sessions" / "--repo--" / "keys.jsonl")
    builder.user(f"I ran: {sample.text}")
    builder.write()
    report = reindex(sessions=tmp_path / "sessions", index=tmp_path / "index",
                     cluster="local:1")
    assert report["redacted"] == {"aws-access-key-id": 1}
    secret = sample.values[0].encode()
    for folder, _, names in os.walk(tmp_path / "index"):
        for name in names:
            assert secret not in (Path(folder) / name).read_bytes(), name


def test_a_worker_reads_no_file_outside_the_roots(tmp_path: Path) -> None:
    """A symlink in a sessions root leading out of it is refused, not read, by the task."""
    sessions = _sessions(tmp_path / "sessions")
    outside = SessionBuilder(tmp_path / "elsewhere" / "private.jsonl")
    outside.user("private outside words")
    outside.write()
    link = sessions / "--repo-0--" / "link.jsonl"
    link.symlink_to(outside.path)
    roots = {"sessions": sessions, "index": tmp_path / "index"}
    report = reindex(**roots, cluster="local:1", shard_bytes=SHARD_BYTES)
    assert report["shards"]["total"] >= 3
    assert [item["path"] for item in report["invalid"]] == [str(link)]
    assert _total("private", roots) == 0


def test_a_damaged_manifest_is_one_clear_error_that_full_fixes(roots: dict[str, Path]) -> None:
    """A manifest that is not JSON fails every reader with its path and the fix; the fix
    (`reindex --full`) works."""
    (roots["index"] / "manifest.json").write_bytes(b"{not json")
    with pytest.raises(MemoryIndexError, match=r"manifest\.json: the sharded index's manifest "
                       r"is damaged .*reindex --full"):
        recall("walrus", **roots)  # type: ignore[arg-type]
    with pytest.raises(MemoryIndexError, match="reindex --full"):
        reindex(**roots, shard_bytes=SHARD_BYTES)
    report = reindex(**roots, full=True, shard_bytes=SHARD_BYTES)
    assert report["indexed"] == len(WORDS)
    assert _total("walrus", roots) == 1


def test_verify_finds_a_shard_changed_after_the_build(roots: dict[str, Path]) -> None:
    """A byte changed in a shard's files is an index problem naming the shard."""
    name = read_manifest(roots["index"])["shards"][0]["name"]
    meta = next((roots["index"] / "shards" / name).rglob("meta.json"))
    meta.write_bytes(meta.read_bytes() + b"\n")  # still opens; not the bytes the build wrote
    problems = verify(index=roots["index"])["indexProblems"]
    assert any(name in problem and "hash" in problem for problem in problems), problems


def test_a_single_index_folder_is_not_turned_into_a_sharded_one(tmp_path: Path) -> None:
    """--cluster into a folder holding a single index is refused, naming the fix."""
    sessions = _sessions(tmp_path / "sessions")
    reindex(sessions=sessions, index=tmp_path / "index", workers=1)
    with pytest.raises(UsageError, match="holds a single memory index; pass --index DIR"):
        reindex(sessions=sessions, index=tmp_path / "index", sharded=True)


@pytest.mark.parametrize("address", ["local:0", "local:many"])
def test_a_bad_local_cluster_is_a_usage_error(tmp_path: Path, address: str) -> None:
    """local:N needs a positive N."""
    with pytest.raises(UsageError, match="local:N with N at least 1"):
        reindex(sessions=_sessions(tmp_path / "s"), index=tmp_path / "i", cluster=address)
    assert not (tmp_path / "i" / "manifest.json").exists()


def test_an_unreachable_scheduler_is_a_cluster_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scheduler address nobody listens on fails with cluster_error and how to start one;
    nothing is written."""
    monkeypatch.setattr(dask_cluster, "CONNECT_SECONDS", 1.0)
    with pytest.raises(ClusterError, match=r"cannot reach the Dask scheduler.*dask scheduler"):
        reindex(sessions=_sessions(tmp_path / "s"), index=tmp_path / "i",
                cluster="tcp://127.0.0.1:9")
    assert not (tmp_path / "i" / "manifest.json").exists()


def test_the_cli_builds_a_sharded_index_and_reports_its_shards(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`reindex --sharded --shard-mb` prints its shards line (JSON: ``shards``); --watch with
    --cluster is refused in one line with exit status 2."""
    sessions = _sessions(tmp_path / "sessions")
    where = ["--sessions", str(sessions), "--index", str(tmp_path / "index")]
    assert main(["reindex", *where, "--sharded", "--shard-mb", "1", "--workers", "1"]) == 0
    assert "shards: 1 built, 0 kept of 1, on this machine" in capsys.readouterr().out
    assert main(["reindex", *where, "--json"]) == 0
    assert orjson.loads(capsys.readouterr().out)["shards"] == {
        "total": 1, "built": 0, "kept": 1, "engine": "this machine"}
    assert main(["reindex", *where, "--cluster", "local:1", "--watch"]) == 2
    assert capsys.readouterr().err.count("\n") == 1

