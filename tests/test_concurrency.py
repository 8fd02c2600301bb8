"""Concurrency: writers take turns, appends race a reindex, readers never see a torn index.

Every subprocess runs under a hard time limit (``reliability.PROCESS_SECONDS``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from bench import hang
from fabric_memory.compaction import compact_session
from fabric_memory.errors import FabricMemoryError, IndexBusyError
from fabric_memory.memory import reindex as reindex_module
from fabric_memory.memory.catalog import load_catalog
from fabric_memory.memory.expand import expand_request
from fabric_memory.memory.index import (
    BUSY_SECONDS,
    LOCK_NAME,
    TANTIVY_LOCKS,
    MemoryIndex,
    SearchSpec,
    open_index,
)
from fabric_memory.memory.recall import recall
from fabric_memory.memory.reindex import reindex

from .fuzz import SMALL_SETTINGS
from .memory_builder import SessionBuilder, clone_sessions, operation
from .reliability import (
    append_user,
    assert_consistent,
    expected_texts,
    file_hash,
    finish,
    python,
    report,
)

SCENARIOS: dict[str, int] = {}
"""Concurrency scenarios run, with how many concurrent actors each had."""
CLONES = 100

REINDEX = """
import sys
from fabric_memory.cli import main
from fabric_memory.memory import reindex as module
real = module.reindex
module.reindex = lambda **kw: real(**kw, lock_timeout=float(sys.argv[3]), commit_every=300)
sys.exit(main(["reindex", "--sessions", sys.argv[1], "--index", sys.argv[2], "--json",
               *sys.argv[4:]]))
"""


def _roots(tmp_path: Path) -> dict[str, Path]:
    return {"sessions": tmp_path / "sessions", "index": tmp_path / "index"}


def _start_reindex(roots: dict[str, Path], lock_timeout: float, *extra: str) -> Any:
    return python(REINDEX, str(roots["sessions"]), str(roots["index"]), str(lock_timeout),
                  *extra)


def _wait_for_writer(roots: dict[str, Path], proc: Any) -> None:
    """Until ``proc`` holds the writer lock (it writes its pid into the lock file)."""
    lock = roots["index"] / LOCK_NAME
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if lock.exists() and lock.read_text().strip() == str(proc.pid):
            return
        assert proc.poll() is None, "the writer finished before it was observed"
        time.sleep(0.01)
    raise AssertionError("the writer never took the lock")


def test_second_reindexer_exits_cleanly_when_it_cannot_wait(tmp_path: Path,
                                                            corpus_dir: Path) -> None:
    """While one reindex writes, a second with a short wait exits 1 with one line naming the
    holder's pid and the fix; the first completes and the index is whole."""
    roots = _roots(tmp_path)
    clone_sessions(corpus_dir, roots["sessions"], CLONES)
    first = _start_reindex(roots, 60)
    _wait_for_writer(roots, first)
    status, out, err = finish(_start_reindex(roots, 0.2))
    message = err.decode()
    assert status == 1 and message.count("\n") == 1 and "Traceback" not in message, message
    assert f"another writer (pid {first.pid}) holds the memory index lock" in message
    assert "retry when it finishes" in message
    assert orjson.loads(out)["error"]["code"] == "index_locked"
    status, out, err = finish(first)
    assert status == 0, err.decode()
    assert orjson.loads(out)["indexed"] == CLONES
    assert assert_consistent(roots["index"])["sessions"] == CLONES
    SCENARIOS["two reindexers, one gives up"] = 2


def test_second_reindexer_waits_and_then_indexes_what_changed(tmp_path: Path,
                                                              corpus_dir: Path) -> None:
    """A second reindex started mid-run waits for the lock, then indexes the files that changed
    meanwhile (the first run's commits are not redone)."""
    roots = _roots(tmp_path)
    paths = clone_sessions(corpus_dir, roots["sessions"], CLONES)
    first = _start_reindex(roots, 60)
    _wait_for_writer(roots, first)
    for path in paths[:3]:
        append_user(path, "written while the first reindex ran")
    second = _start_reindex(roots, 60)
    reports = []
    for proc in (first, second):
        status, out, err = finish(proc)
        assert status == 0, err.decode()
        reports.append(orjson.loads(out))
    assert reports[0]["indexed"] == CLONES
    assert 0 <= reports[1]["indexed"] <= 3
    assert reindex(**roots, workers=1)["indexed"] == 0
    records = load_catalog(open_index(roots["index"])).records
    assert all(r.source_hash == file_hash(Path(r.path)) for r in records)
    assert_consistent(roots["index"])
    SCENARIOS["two reindexers, one waits"] = 2


def _compactable(path: Path) -> SessionBuilder:
    builder = SessionBuilder(path)
    for turn in range(4):
        builder.user(f"turn {turn}: please work on the parser")
        builder.assistant_call(f"c{turn}", "fabric_exec", {"code": "x"})
        builder.fabric_result(f"c{turn}", [operation(0, "pi.read", {"path": f"src/{turn}.ts"})])
    builder.write()
    return builder


def test_compaction_appends_while_a_reindex_runs(tmp_path: Path, corpus_dir: Path) -> None:
    """Compactions and user messages appended to a session during a full reindex: the index
    holds one real version of it (documents and record agree), and the next run catches up."""
    roots = _roots(tmp_path)
    clone_sessions(corpus_dir, roots["sessions"], CLONES)
    target = _compactable(roots["sessions"] / "--live--" / "live.jsonl").path
    reindex(**roots, workers=1)
    writer = _start_reindex(roots, 60, "--full")
    appended = Counter[str]()
    while writer.poll() is None and appended["compaction"] < 8:
        append_user(target, f"more work {sum(appended.values())}")
        appended["user"] += 1
        result = compact_session(target, SMALL_SETTINGS, append=True)
        appended["compaction"] += result.appended is not None
    status, _, err = finish(writer)
    assert status == 0, err.decode()
    assert appended["compaction"] > 0
    assert_consistent(roots["index"])
    record = load_catalog(open_index(roots["index"])).by_path[str(target)]
    assert record.source_hash == file_hash(target, record.size)
    report = reindex(**roots, workers=1)
    assert report["indexed"] == (record.source_hash != file_hash(target))
    record = load_catalog(open_index(roots["index"])).by_path[str(target)]
    assert record.source_hash == file_hash(target)
    truth = expected_texts(target)
    page = expand_request({"session": str(target), "positions": f"{record.entries - 20}:"
                           f"{record.entries - 1}", "maxEntries": 20, "index": str(roots["index"]),
                           "sessions": str(roots["sessions"]), "raw": True})
    assert sum(item["type"] == "compaction" for item in page["entries"]) >= 1
    assert all(truth.agrees(item) for item in page["entries"])
    SCENARIOS["compaction appends during a reindex"] = 2


READER = """
import sys, time
import orjson
from fabric_memory.memory.expand import expand_request
from fabric_memory.memory.recall import recall
from fabric_memory.errors import FabricMemoryError
sessions, index, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
ok, failures, pages = 0, [], []
deadline = time.monotonic() + seconds
n = 0
while time.monotonic() < deadline:
    n += 1
    try:
        response = recall(f"CLONE_FACT_{n % 40}", mode="phrase", sessions=sessions, index=index)
        for hit in response["hits"]:
            pages.append(expand_request({**hit["follow"], "raw": True}))
        ok += 1
    except FabricMemoryError as error:
        failures.append(f"{error.code}: {error.message}")
    except Exception as error:
        failures.append(f"CRASH {type(error).__name__}: {error}")
print(orjson.dumps({"ok": ok, "failures": failures[:20], "pages": pages[-60:]}).decode())
"""
READER_THREADS = 6
READER_PROCESSES = 3
READ_SECONDS = 4.0


def test_readers_during_a_reindex_see_whole_results(tmp_path: Path, corpus_dir: Path) -> None:
    """Recall and expand from 6 threads and 3 processes while a full reindex rewrites every
    session: no error reaches a reader, and every expanded text is the file's own bytes."""
    roots = _roots(tmp_path)
    paths = clone_sessions(corpus_dir, roots["sessions"], CLONES)
    reindex(**roots, workers=1)
    writer = _start_reindex(roots, 60, "--full")
    readers = [python(READER, str(roots["sessions"]), str(roots["index"]), str(READ_SECONDS))
               for _ in range(READER_PROCESSES)]
    results: list[dict[str, Any]] = []

    def read() -> None:
        ok, failures, pages = 0, list[str](), list[Any]()
        deadline = time.monotonic() + READ_SECONDS
        n = 0
        while time.monotonic() < deadline:
            n += 1
            try:
                response = recall(f"CLONE_FACT_{n % 40}", mode="phrase", **roots)
                pages.extend(expand_request({**hit["follow"], "raw": True})
                             for hit in response["hits"])
                ok += 1
            except FabricMemoryError as error:
                failures.append(f"{error.code}: {error.message}")
            except Exception as error:  # reported below, not raised in the thread
                failures.append(f"CRASH {type(error).__name__}: {error}")
        results.append({"ok": ok, "failures": failures[:20], "pages": pages[-60:]})

    threads = [threading.Thread(target=read) for _ in range(READER_THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
        assert not thread.is_alive(), "a reader thread hung"
    for proc in readers:
        status, out, err = finish(proc)
        assert status == 0, err.decode()
        results.append(orjson.loads(out))
    status, _, err = finish(writer)
    assert status == 0, err.decode()
    failures = [f for result in results for f in result["failures"]]
    assert failures == [], failures[:5]
    expected = {str(path): expected_texts(path) for path in paths}
    checked = 0
    for result in results:
        assert result["ok"] > 0
        for page in result["pages"]:
            truth = expected[page["path"]]
            assert page["sourceHash"] == truth.source_hash
            assert all(truth.agrees(item) for item in page["entries"])
            checked += len(page["entries"])
    assert checked > 0
    assert_consistent(roots["index"])
    SCENARIOS["readers during a full reindex"] = READER_THREADS + READER_PROCESSES + 1


HOLD = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(60)
"""


@contextlib.contextmanager
def _stuck_meta_lock(directory: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Another process holding Tantivy's meta lock of ``directory`` and never letting go."""
    holder = python(HOLD, str(directory / TANTIVY_LOCKS[1]))
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        yield holder
    finally:
        holder.kill()
        holder.wait()


def _flock_free(path: Path) -> bool:
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def test_parser_workers_let_go_of_a_lock_held_as_they_were_forked(tmp_path: Path) -> None:
    """A parser worker forked while a thread of the writer holds Tantivy's meta lock closes
    its copy as it starts: the lock is free once the thread lets go (the cause of the hang)."""
    lock = tmp_path / TANTIVY_LOCKS[1]
    fd = os.open(lock, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)  # as a Tantivy reader's watcher thread does to reload
    with reindex_module._workers(2) as pool:
        assert pool is not None
        os.close(fd)  # the thread is done
        # Each worker closes its copy as it starts, which may be just after the pool returns
        # (only the first worker is known to have started): wait for that, within a bound.
        deadline = time.monotonic() + 10
        while not _flock_free(lock) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _flock_free(lock), "a forked worker still holds the lock"


def test_a_fresh_query_gives_up_on_a_stuck_meta_lock(tmp_path: Path, corpus_dir: Path) -> None:
    """A query in a new process whose index's meta lock stays taken fails within the bound
    with index_busy, naming the holder's pid, instead of waiting for ever."""
    roots = _roots(tmp_path)
    clone_sessions(corpus_dir, roots["sessions"], 4)
    reindex(**roots, workers=1)
    directory = open_index(roots["index"]).directory
    with _stuck_meta_lock(directory) as holder:
        started = time.monotonic()
        with pytest.raises(IndexBusyError) as caught:
            MemoryIndex(roots["index"]).count("entry")
        waited = time.monotonic() - started
    assert BUSY_SECONDS <= waited < BUSY_SECONDS + 5, waited
    assert caught.value.code == "index_busy"
    assert f"(pid {holder.pid}) has held Tantivy's meta lock" in caught.value.message
    assert "retry in a moment" in caught.value.message


def test_an_open_reader_answers_from_its_commit_while_the_meta_lock_is_stuck(
        tmp_path: Path, corpus_dir: Path) -> None:
    """A reader already open (a server) that finds a newer commit but cannot take the meta
    lock to load it answers from the commit it has, then loads the new one once it is free."""
    roots = _roots(tmp_path)
    paths = clone_sessions(corpus_dir, roots["sessions"], 4)
    reindex(**roots, workers=1)
    reader = MemoryIndex(roots["index"])
    spec = SearchSpec(text="written after the reader opened", mode="phrase")
    assert reader.search(spec, limit=5, offset=0, snippet_chars=80).total == 0
    append_user(paths[0], "written after the reader opened")
    reindex(**roots, workers=1)
    generation = reader.generation
    with _stuck_meta_lock(reader.directory):
        page = reader.search(spec, limit=5, offset=0, snippet_chars=80)
        assert page.total == 0 and reader.generation == generation
    assert reader.search(spec, limit=5, offset=0, snippet_chars=80).total == 1


def test_a_writer_gives_up_on_a_stuck_meta_lock_naming_its_holder(
        tmp_path: Path, corpus_dir: Path) -> None:
    """A reindex whose index's meta lock stays taken past its wait fails with index_busy naming
    the holder, releases the writer lock, and the index stays as it was."""
    roots = _roots(tmp_path)
    paths = clone_sessions(corpus_dir, roots["sessions"], 4)
    reindex(**roots, workers=1)
    append_user(paths[0], "a change to index")
    directory = open_index(roots["index"]).directory
    with _stuck_meta_lock(directory) as holder, \
            pytest.raises(IndexBusyError, match=f"pid {holder.pid}"):
        reindex(**roots, workers=1, lock_timeout=0.5)
    assert _flock_free(roots["index"] / LOCK_NAME)
    assert reindex(**roots, workers=1)["indexed"] == 1
    assert_consistent(roots["index"])


def test_full_reindex_beside_three_recall_loops_never_hangs() -> None:
    """One `reindex --full` loop beside three `recall` loops over fixtures/pi-mono-real for a
    minute: no command hangs (past 30 s its stacks are dumped) and none fails."""
    found = hang.run(seconds=60, readers=3, hang=30.0)
    stacks = "\n".join(f"{h['command']} (pid {h['pid']}):\n{h['locks']}\n{h['stacks']}"
                       for h in found["hangs"])
    assert found["hangs"] == [] and found["errors"] == {}, stacks or found["errors"]
    assert min(found["byLoop"].values()) > 0, found
    SCENARIOS["reindex --full beside three recall loops"] = 4


@pytest.fixture(autouse=True, scope="module")
def _summary(request: pytest.FixtureRequest) -> Any:
    yield
    actors = sum(SCENARIOS.values())
    report(request.config, f"\nconcurrency: {len(SCENARIOS)} scenarios passed with {actors} "
           f"concurrent actors ({', '.join(SCENARIOS)})")
