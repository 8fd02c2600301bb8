"""The live index: re-indexing named files only, and ``reindex --watch`` as a process."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import orjson
import pytest

from fabric_memory.memory.catalog import load_catalog, stat_key
from fabric_memory.memory.index import open_index
from fabric_memory.memory.live import RECHECK_SECONDS, _Pending, _session_paths
from fabric_memory.memory.recall import recall
from fabric_memory.memory.reindex import reindex, reindex_paths

from .memory_builder import SessionBuilder
from .reliability import readable_to_nobody, until, watching


@pytest.fixture
def roots(tmp_path: Path) -> dict[str, Path]:
    sessions = tmp_path / "sessions"
    for name in ("one", "two", "three"):
        builder = SessionBuilder(sessions / "--repo--" / f"{name}.jsonl")
        builder.user(f"the {name} session mentions walrus")
        builder.write()
    index = tmp_path / "index"
    reindex(sessions=sessions, index=index, workers=1)
    return {"sessions": sessions, "index": index}


def test_named_files_only(roots: dict[str, Path]) -> None:
    """reindex_paths reads the files it is given (new, changed), drops the ones that are
    gone, and leaves every other file alone, even one that changed too."""
    sessions, index = roots["sessions"], roots["index"]
    repo = sessions / "--repo--"
    (repo / "one.jsonl").unlink()
    with open(repo / "two.jsonl", "ab") as stream:
        stream.write(orjson.dumps({"type": "message", "id": "x1", "parentId": "e001",
                                   "timestamp": "2026-01-02T11:00:00.000Z",
                                   "message": {"role": "user", "content": "narwhal"}}) + b"\n")
    with open(repo / "three.jsonl", "ab") as stream:  # changed, but not named
        stream.write(orjson.dumps({"type": "message", "id": "y1", "parentId": "e001",
                                   "timestamp": "2026-01-02T11:00:00.000Z",
                                   "message": {"role": "user", "content": "okapi"}}) + b"\n")
    fresh = SessionBuilder(sessions / "--new--" / "four.jsonl")
    fresh.user("a capybara appears")
    fresh.write()
    report = reindex_paths([repo / "one.jsonl", repo / "two.jsonl", fresh.path],
                           sessions=sessions, index=index)
    assert [item["path"] for item in report["removed"]] == [str(repo / "one.jsonl")]
    assert report["indexed"] == 2 and report["invalid"] == []
    found = {word: recall(word, index=index, sessions=sessions, hot_sessions=0)["total"]
             for word in ("narwhal", "okapi", "capybara", "walrus")}
    assert found == {"narwhal": 1, "okapi": 0, "capybara": 1, "walrus": 2}
    paths = {Path(r.path).name for r in load_catalog(open_index(index)).records}
    assert paths == {"two.jsonl", "three.jsonl", "four.jsonl"}


def test_unchanged_and_outside_files(roots: dict[str, Path], tmp_path: Path) -> None:
    """An unchanged file is skipped unread; a symlink leading out of the root is reported
    invalid and not read."""
    sessions, index = roots["sessions"], roots["index"]
    outside = SessionBuilder(tmp_path / "outside.jsonl")
    outside.user("secret outside words")
    outside.write()
    link = sessions / "--repo--" / "link.jsonl"
    link.symlink_to(outside.path)
    report = reindex_paths([sessions / "--repo--" / "one.jsonl", link], sessions=sessions,
                           index=index)
    assert (report["skipped"], report["indexed"], report["removed"]) == (1, 0, [])
    assert [item["path"] for item in report["invalid"]] == [str(link)]
    assert recall("outside", index=index, sessions=sessions)["total"] == 0


def test_changed_paths_include_new_folders(tmp_path: Path) -> None:
    """A changed .jsonl counts; a folder that appeared counts with its session files;
    other files do not."""
    folder = tmp_path / "--fresh--"
    folder.mkdir()
    (folder / "a.jsonl").write_text("{}\n")
    (folder / "notes.txt").write_text("x")
    found = _session_paths([str(folder), str(tmp_path / "b.jsonl"), str(tmp_path / "c.json")])
    assert found == {str(folder / "a.jsonl"), str(tmp_path / "b.jsonl")}


def test_reindex_watch_process(roots: dict[str, Path]) -> None:
    """`reindex --watch` catches up, indexes a file written while it runs, prints one JSON
    line per step with --json, and exits 0 on SIGTERM."""
    sessions, index = roots["sessions"], roots["index"]
    with watching("--sessions", str(sessions), "--index", str(index)) as (process, first):
        assert (first["step"], first["sessions"]) == ("catch-up", 3)
        fresh = SessionBuilder(sessions / "--later--" / "five.jsonl")
        fresh.user("the pangolin was indexed live")
        fresh.write()
        assert process.stdout is not None
        step = orjson.loads(process.stdout.readline())
        assert (step["step"], step["indexed"]) == ("changes", 1)
        until(lambda: recall("pangolin", index=index, sessions=sessions)["total"] == 1,
              "the live session was never recallable")


def test_recently_indexed_files_are_rechecked(tmp_path: Path) -> None:
    """A file re-indexed lately is queued again when its stat moves (a second write the
    poller's whole-second mtimes missed), and forgotten after the recheck window."""
    path = tmp_path / "one.jsonl"
    path.write_text("{}\n")
    pending = _Pending()
    pending.recent[str(path)] = (stat_key(str(path)), 100.0)
    pending.recheck(100.5)
    assert pending.paths == set()
    with open(path, "a") as stream:
        stream.write("{}\n")
    pending.recheck(101.0)
    assert pending.paths == {str(path)}
    pending.paths.clear()
    pending.recheck(100.0 + RECHECK_SECONDS + 1)
    assert pending.paths == set() and pending.recent == {}


def test_named_paths_are_contained_and_keyed_by_real_path(
    roots: dict[str, Path], tmp_path: Path
) -> None:
    """A file reached through a symlinked folder that leads out of the root is refused
    unread; one reached through a symlinked folder inside the root is the same record as
    its real path (never a second one)."""
    sessions, index = roots["sessions"], roots["index"]
    outside = SessionBuilder(tmp_path / "elsewhere" / "out.jsonl", "outside")
    outside.user("the okapi lives outside")
    outside.write()
    (sessions / "--out--").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (sessions / "--alias--").symlink_to(sessions / "--repo--", target_is_directory=True)
    with open(sessions / "--repo--" / "two.jsonl", "ab") as stream:
        stream.write(orjson.dumps({"type": "message", "id": "x1", "parentId": "e001",
                                   "timestamp": "2026-01-02T11:00:00.000Z",
                                   "message": {"role": "user", "content": "narwhal"}}) + b"\n")
    report = reindex_paths([sessions / "--out--" / "out.jsonl",
                            sessions / "--alias--" / "two.jsonl"], sessions=sessions, index=index)
    assert [item["path"] for item in report["invalid"]] == [str(sessions / "--out--" /
                                                                 "out.jsonl")]
    assert report["indexed"] == 1
    assert recall("okapi", index=index, sessions=sessions)["total"] == 0
    paths = sorted(r.path for r in load_catalog(open_index(index)).records)
    assert paths == sorted(str(sessions / "--repo--" / f"{n}.jsonl")
                           for n in ("one", "two", "three"))
    assert recall("narwhal", index=index, sessions=sessions)["total"] == 1
    (sessions / "--repo--" / "two.jsonl").unlink()  # gone, named through the alias
    report = reindex_paths([sessions / "--alias--" / "two.jsonl"], sessions=sessions,
                           index=index)
    assert [item["path"] for item in report["removed"]] == [str(sessions / "--repo--" /
                                                                 "two.jsonl")]


def test_watch_stays_inside_the_root(roots: dict[str, Path], tmp_path: Path) -> None:
    """`reindex --watch` never indexes a file written into a folder that a symlink inside the
    root leads to outside it, and a symlinked alias folder gives no second record."""
    sessions, index = roots["sessions"], roots["index"]
    (tmp_path / "elsewhere").mkdir()
    (sessions / "--out--").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (sessions / "--alias--").symlink_to(sessions / "--repo--", target_is_directory=True)
    with watching("--sessions", str(sessions), "--index", str(index)):
        outside = SessionBuilder(tmp_path / "elsewhere" / "out.jsonl", "outside")
        outside.user("the okapi lives outside")
        outside.write()
        inside = SessionBuilder(sessions / "--repo--" / "four.jsonl", "four")
        inside.user("the pangolin lives inside")
        inside.write()
        until(lambda: recall("pangolin", index=index, sessions=sessions)["total"] == 1,
              "the session inside the root was never indexed")
        inside.append("the pangolin again")
        until(lambda: recall("again", index=index, sessions=sessions)["total"] == 1,
              "the appended message was never indexed")
        time.sleep(2 * RECHECK_SECONDS)  # every step the writes caused has run
    assert recall("okapi", index=index)["total"] == 0
    paths = [r.path for r in load_catalog(open_index(index)).records]
    assert sorted(paths) == sorted(str(sessions / "--repo--" / f"{n}.jsonl")
                                   for n in ("one", "two", "three", "four"))


@pytest.mark.parametrize("watcher", ["events", "polling"])
def test_watch_survives_an_unreadable_folder(roots: dict[str, Path], tmp_path: Path,
                                             watcher: str) -> None:
    """An unreadable folder in the root is logged and skipped: `reindex --watch` keeps
    indexing the rest and exits 0 on SIGTERM, with no traceback (with file events, and
    with the polling fallback)."""
    sessions, index = roots["sessions"], roots["index"]
    (sessions / "--locked--").mkdir(mode=0o000)
    as_nobody = os.geteuid() == 0  # root reads anything: watch as nobody instead
    if as_nobody:
        readable_to_nobody(tmp_path)
        for path in [tmp_path, *tmp_path.rglob("*")]:
            os.chown(path, 65534, 65534, follow_symlinks=False)
    stderr = tmp_path / "stderr"
    polling = {"WATCHFILES_FORCE_POLLING": "1"} if watcher == "polling" else {}
    with open(stderr, "wb") as log, watching("--sessions", str(sessions), "--index",
                                             str(index), as_nobody=as_nobody, stderr=log,
                                             env={**os.environ, **polling}):
        fresh = SessionBuilder(sessions / "--repo--" / "four.jsonl")
        fresh.user("the pangolin was indexed live")
        fresh.write()
        until(lambda: recall("pangolin", index=index, sessions=sessions,
                             hot_sessions=0)["total"] == 1,
              "the watcher stopped indexing after meeting an unreadable folder")
    err = stderr.read_text()
    assert "Traceback" not in err
    assert "--locked--" in err and "Permission denied" in err, err


def test_watch_survives_its_root_removed_and_recreated(
    roots: dict[str, Path], tmp_path: Path
) -> None:
    """A sessions root deleted and made again is logged, then watched again: a session
    written into the new folder is indexed and the old folder's sessions are forgotten."""
    sessions, index = roots["sessions"], roots["index"]
    stderr = tmp_path / "stderr"
    with open(stderr, "wb") as log, watching("--sessions", str(sessions), "--index",
                                             str(index), stderr=log):
        shutil.rmtree(sessions)
        time.sleep(1.5)
        fresh = SessionBuilder(sessions / "--again--" / "five.jsonl")
        fresh.user("the capybara came back")
        fresh.write()
        until(lambda: recall("capybara", index=index, sessions=sessions)["total"] == 1,
              "the recreated root was never watched again")
        until(lambda: recall("walrus", index=index, sessions=sessions)["total"] == 0,
              "the removed sessions were never forgotten")
    err = stderr.read_text()
    assert "Traceback" not in err
    assert f"{sessions}: " in err and "removed" in err, err
