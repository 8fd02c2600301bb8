"""reindex: incremental by stat, invalid files, stale records, one writer, crash safety, scale."""

from __future__ import annotations

import concurrent.futures
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from fabric_memory.errors import IndexLockedError
from fabric_memory.memory import reindex as reindex_module
from fabric_memory.memory.catalog import list_sessions, load_catalog, stats, verify
from fabric_memory.memory.expand import expand_request
from fabric_memory.memory.index import IndexLock, open_index
from fabric_memory.memory.recall import recall
from fabric_memory.memory.reindex import reindex
from fabric_memory.session import read_session

from .conftest import REPO
from .memory_builder import SessionBuilder, clone_sessions, copy_corpus, refuse_opening


def _roots(tmp_path: Path) -> dict[str, Path]:
    return {"sessions": tmp_path / "sessions", "index": tmp_path / "index"}


def _small(tmp_path: Path, name: str, text: str) -> SessionBuilder:
    builder = SessionBuilder(tmp_path / "sessions" / "--repo--" / f"{name}.jsonl")
    builder.user(text)
    builder.write()
    return builder


def _complete(index: Path) -> None:
    """Every catalog record has exactly its entry and operation documents (no dupes, no loss)."""
    handle = open_index(index)
    for record in load_catalog(handle).records:
        assert handle.count("entry", record.path) == record.entries, record.path
        assert handle.count("operation", record.path) == record.operations, record.path
        assert handle.count("session", record.path) == 1, record.path


def test_unchanged_files_are_skipped_by_stat(tmp_path: Path) -> None:
    """A second run opens nothing; a touched file is hashed, found equal, and not re-added."""
    roots = _roots(tmp_path)
    one = _small(tmp_path, "one", "alpha words")
    _small(tmp_path, "two", "beta words")
    first = reindex(**roots, workers=1)
    assert (first["indexed"], first["skipped"], first["entries"]) == (2, 0, 2)
    second = reindex(**roots, workers=1)
    assert (second["indexed"], second["skipped"]) == (0, 2)
    os.utime(one.path, (time.time() + 60, time.time() + 60))
    third = reindex(**roots, workers=1)
    assert (third["indexed"], third["skipped"]) == (0, 2)
    assert reindex(**roots, workers=1)["skipped"] == 2
    _complete(roots["index"])


def test_changed_file_replaces_its_documents(tmp_path: Path) -> None:
    """An appended session is re-indexed whole: new text found, no duplicate documents."""
    roots = _roots(tmp_path)
    builder = _small(tmp_path, "one", "alpha words")
    reindex(**roots, workers=1)
    builder.append("gamma appended")
    report = reindex(**roots, workers=1)
    assert (report["indexed"], report["entries"]) == (1, 2)
    assert recall("gamma", **roots)["total"] == 1
    assert recall("alpha", **roots)["total"] == 1
    record = load_catalog(open_index(roots["index"])).by_path[str(builder.path)]
    assert record.source_hash == read_session(builder.path).source_hash
    assert verify(index=roots["index"])["ok"] == 1
    _complete(roots["index"])


def test_invalid_file_is_reported_and_old_documents_stay_stale(tmp_path: Path) -> None:
    """A session that turns invalid keeps its documents, marked stale, with the reason."""
    roots = _roots(tmp_path)
    builder = _small(tmp_path, "one", "alpha words")
    garbage = tmp_path / "sessions" / "garbage.jsonl"
    garbage.write_bytes(b"\x00\xff not json\n")
    first = reindex(**roots, workers=1)
    assert [i["path"] for i in first["invalid"]] == [str(garbage)]
    assert first["invalid"][0]["reason"].startswith(f"{garbage}:1:")
    builder.path.write_text("not a session header\n")
    second = reindex(**roots, workers=1)
    assert str(builder.path) in [i["path"] for i in second["invalid"]]
    assert [s["path"] for s in second["stale"]] == [str(builder.path)]
    hit = recall("alpha", **roots)["hits"][0]
    assert hit["stale"] is True
    listing = list_sessions(index=roots["index"])["sessions"]
    assert listing[0]["stale"] is True and "invalid" in (listing[0]["staleReason"] or "")
    builder.path.unlink()
    third = reindex(**roots, workers=1)
    assert third["removed"] == [{"path": str(builder.path),
                                 "reason": "the session file is gone; its documents removed"}]
    assert recall("alpha", **roots)["total"] == 0
    assert verify(index=roots["index"])["missing"] == 0


def test_full_reindex_rereads_everything(tmp_path: Path) -> None:
    """--full re-parses unchanged files."""
    roots = _roots(tmp_path)
    _small(tmp_path, "one", "alpha")
    reindex(**roots, workers=1)
    assert reindex(**roots, workers=1, full=True)["indexed"] == 1


def test_a_held_lock_makes_a_writer_wait_then_fail_clearly(tmp_path: Path) -> None:
    """With the writer lock held elsewhere, reindex waits its timeout and names the lock."""
    roots = _roots(tmp_path)
    builder = _small(tmp_path, "one", "alpha")
    reindex(**roots, workers=1)
    builder.append("beta")
    lock = IndexLock(roots["index"])
    lock.acquire(1.0)
    try:
        started = time.monotonic()
        with pytest.raises(IndexLockedError, match=r"writer\.lock.*pid \d+"):
            reindex(**roots, workers=1, lock_timeout=0.3)
        assert time.monotonic() - started >= 0.3
        assert recall("alpha", **roots)["total"] == 1
    finally:
        lock.release()
    assert reindex(**roots, workers=1, lock_timeout=0.3)["indexed"] == 1


def test_nothing_to_do_takes_no_lock_and_commits_nothing(tmp_path: Path) -> None:
    """An unchanged tree is answered from the last commit, even while a writer is busy."""
    roots = _roots(tmp_path)
    _small(tmp_path, "one", "alpha")
    reindex(**roots, workers=1)
    lock = IndexLock(roots["index"])
    lock.acquire(1.0)
    try:
        report = reindex(**roots, workers=1, lock_timeout=0.0)
    finally:
        lock.release()
    assert (report["skipped"], report["indexed"], report["commits"]) == (1, 0, 0)


def _cli(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "fabric_memory.cli", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)


def test_two_concurrent_reindexers(tmp_path: Path, corpus_dir: Path) -> None:
    """Two processes at once: one indexes, the other waits and finds nothing to do."""
    sessions = copy_corpus(corpus_dir, tmp_path)
    args = ("reindex", "--sessions", str(sessions), "--index", str(tmp_path / "index"),
            "--workers", "1", "--json")
    procs = [_cli(*args), _cli(*args)]
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
        reports.append(orjson.loads(out))
    assert sorted(r["indexed"] for r in reports) == [0, 41]
    assert sorted(r["skipped"] for r in reports) == [0, 41]
    _complete(tmp_path / "index")


KILL_SCRIPT = """
import sys, time
from fabric_memory.memory.reindex import reindex
from fabric_memory.session import read_session

def progress(step):
    if step.done == int(sys.argv[3]):
        print("PAUSED", flush=True)
        time.sleep(120)

reindex(sessions=sys.argv[1], index=sys.argv[2], workers=2, commit_every=400,
        progress=progress)
"""


@pytest.mark.slow
def test_kill_9_mid_reindex_leaves_last_commit_and_next_run_completes(
    tmp_path: Path, corpus_dir: Path
) -> None:
    """SIGKILL after some commits: committed sessions are whole and queryable, the lock is
    free, and the next run indexes exactly what was lost."""
    roots = _roots(tmp_path)
    clone_sessions(corpus_dir, roots["sessions"], 120)
    proc = subprocess.Popen(
        [sys.executable, "-c", KILL_SCRIPT, str(roots["sessions"]), str(roots["index"]), "80"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"PAUSED"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    committed = stats(index=roots["index"])["sessions"]
    assert 0 < committed < 120
    _complete(roots["index"])
    hit = recall("CLONE_FACT_0", mode="phrase", **roots)["hits"][0]
    assert "CLONE_FACT_0 " in expand_request(hit["follow"])["entries"][0]["text"]
    report = reindex(**roots, workers=1, lock_timeout=5)
    assert (report["indexed"], report["skipped"]) == (120 - committed, committed)
    _complete(roots["index"])


@pytest.mark.slow
def test_thousand_sessions_reindex_then_noop(tmp_path: Path, corpus_dir: Path) -> None:
    """1,000 sessions index fully; an unchanged re-run indexes none in a fraction of the time."""
    roots = _roots(tmp_path)
    paths = clone_sessions(corpus_dir, roots["sessions"], 1000)
    first = reindex(**roots)
    assert (first["sessions"], first["indexed"], first["invalid"]) == (1000, 1000, [])
    second = reindex(**roots)
    assert (second["indexed"], second["skipped"]) == (0, 1000)
    assert second["seconds"] < first["seconds"] / 4
    response = recall("CLONE_FACT_777", mode="phrase", **roots)
    assert [h["path"] for h in response["hits"]] == [str(paths[777])]
    page = expand_request(response["hits"][0]["follow"])
    assert "CLONE_FACT_777 " in page["entries"][0]["text"]
    listed = stats(index=roots["index"], hot_sessions=50)
    assert (listed["sessions"], listed["hot"], listed["cold"]) == (1000, 50, 950)
    assert listed["entries"] == first["entries"]


# --- numbers Tantivy cannot hold ---------------------------------------------------------


def test_a_timestamp_outside_the_index_range_is_dropped_with_a_note(tmp_path: Path) -> None:
    """A message.timestamp of 2^64-1 is dropped with a file:line note; every session is
    indexed and recallable, the others keep their times."""
    roots = _roots(tmp_path)
    _small(tmp_path, "a", "alpha words")
    odd = SessionBuilder(tmp_path / "sessions" / "--repo--" / "b.jsonl")
    for n, (text, stamp) in enumerate([("beta words", 18446744073709551615),
                                       ("more beta", -(2**62))], start=1):
        odd.lines.append(json.dumps({
            "type": "message", "id": f"e{n}", "parentId": f"e{n - 1}" if n > 1 else None,
            "message": {"role": "user", "content": text, "timestamp": stamp}}).encode())
    odd.write()
    _small(tmp_path, "c", "gamma words")
    report = reindex(**roots, workers=1)
    assert (report["indexed"], report["invalid"], report["commits"]) == (3, [], 1)
    notes = [note["reason"] for note in report["notes"]]
    assert notes == [f"{odd.path}:2: message.timestamp 18446744073709551615 is outside "
                     "JavaScript's date range; indexed without a time",
                     f"{odd.path}:3: message.timestamp {-(2**62)} is outside "
                     "JavaScript's date range; indexed without a time"]
    hits = recall("words", **roots)["hits"]
    assert sorted(hit["path"].rsplit("/", 1)[1] for hit in hits) == ["a.jsonl", "b.jsonl",
                                                                      "c.jsonl"]
    assert len(recall("words", since="2000-01-01T00:00:00Z", **roots)["hits"]) == 2
    _complete(roots["index"])


def test_an_mtime_after_2262_is_clamped_with_a_note(tmp_path: Path) -> None:
    """A file modified after 2262 (past a 64-bit nanosecond count) is indexed with its mtime
    clamped and a note; no Tantivy worker panics and the other sessions are indexed."""
    roots = _roots(tmp_path)
    _small(tmp_path, "a", "alpha words")
    late = _small(tmp_path, "c", "gamma words")
    future = 2**63 + 10**18
    os.utime(late.path, ns=(future, future))
    if os.stat(late.path).st_mtime_ns != future:
        pytest.skip("this filesystem cannot store an mtime after 2262")
    report = reindex(**roots, workers=1)
    assert (report["indexed"], report["invalid"]) == (2, [])
    assert [note["reason"] for note in report["notes"]] == [
        f"{late.path}: modified after 2262, past the index's 64-bit nanosecond range; "
        "mtime clamped (changes are still seen by size and ctime)"]
    assert len(recall("words", **roots)["hits"]) == 2
    again = reindex(**roots, workers=1)
    assert (again["indexed"], again["skipped"], again["commits"]) == (0, 2, 0)
    late.append("delta words")
    os.utime(late.path, ns=(future, future))
    assert reindex(**roots, workers=1)["indexed"] == 1
    assert len(recall("delta", **roots)["hits"]) == 1
    _complete(roots["index"])


def test_a_same_size_rewrite_under_an_unchanged_mtime_is_reindexed(tmp_path: Path) -> None:
    """verify's `changed` advice works: a same-size in-place rewrite with its mtime set back is
    re-read by `reindex` (its ctime moved), after which verify is clean and recall serves the
    new text."""
    roots = _roots(tmp_path)
    session = _small(tmp_path, "one", "alpha words")
    reindex(**roots, workers=1)
    before = os.stat(session.path)
    session.path.write_bytes(session.path.read_bytes().replace(b"alpha", b"omega"))
    os.utime(session.path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(session.path)
    assert (after.st_mtime_ns, after.st_size) == (before.st_mtime_ns, before.st_size)
    flagged = verify(index=roots["index"])
    assert flagged["changed"] == 1
    assert "run `fabric-memory reindex`" in flagged["sessions"][0]["reason"]
    assert reindex(**roots, workers=1)["indexed"] == 1
    assert verify(index=roots["index"])["changed"] == 0
    assert recall("omega", **roots)["total"] == 1
    assert recall("alpha", **roots)["total"] == 0


# --- forgetting what is gone, one record per file --------------------------------------------


def test_a_deleted_session_is_forgotten(tmp_path: Path) -> None:
    """Deleting a session file and running reindex removes its documents and its record:
    nothing of it can be recalled, listed or expanded any more."""
    roots = _roots(tmp_path)
    gone = _small(tmp_path, "gone", "alpha private words")
    _small(tmp_path, "kept", "beta words")
    reindex(**roots, workers=1)
    assert recall("alpha", **roots)["total"] == 1
    gone.path.unlink()
    report = reindex(**roots, workers=1)
    assert [item["path"] for item in report["removed"]] == [str(gone.path)]
    assert recall("alpha", **roots)["total"] == 0
    assert recall("private", **roots)["total"] == 0
    assert [s["path"] for s in list_sessions(index=roots["index"])["sessions"]] == [
        str(tmp_path / "sessions" / "--repo--" / "kept.jsonl")]
    assert open_index(roots["index"]).count("entry", str(gone.path)) == 0
    assert verify(index=roots["index"])["missing"] == 0
    assert reindex(**roots, workers=1)["commits"] == 0
    _complete(roots["index"])


def test_a_deleted_session_in_another_root_is_kept(tmp_path: Path) -> None:
    """reindex of one root forgets only files under that root: another root's sessions in the
    same index stay."""
    roots = _roots(tmp_path)
    _small(tmp_path, "here", "alpha words")
    other = SessionBuilder(tmp_path / "elsewhere" / "there.jsonl")
    other.user("beta words")
    other.write()
    reindex(sessions=tmp_path / "elsewhere", index=roots["index"], workers=1)
    reindex(**roots, workers=1)
    assert recall("beta", index=roots["index"])["total"] == 1
    assert recall("beta", **roots)["total"] == 0  # asked for one root: its sessions only


def test_a_renamed_session_is_rekeyed_not_duplicated(tmp_path: Path) -> None:
    """A renamed file is one record under its new name: one hit, expand by id works."""
    roots = _roots(tmp_path)
    session = _small(tmp_path, "before", "alpha words")
    reindex(**roots, workers=1)
    renamed = session.path.with_name("after.jsonl")
    session.path.rename(renamed)
    report = reindex(**roots, workers=1)
    assert [item["path"] for item in report["removed"]] == [str(session.path)]
    hits = recall("alpha", **roots)["hits"]
    assert [hit["path"] for hit in hits] == [str(renamed)]
    assert hits[0]["follow"]["session"] == session.session_id
    assert expand_request(hits[0]["follow"])["entries"]
    _complete(roots["index"])


def test_one_file_is_one_record_whatever_the_root_spelling(tmp_path: Path) -> None:
    """The same files indexed through a symlinked root, a `..` spelling and a symlinked file are
    one record each: one hit per entry, and expand by session id is not ambiguous."""
    roots = _roots(tmp_path)
    session = _small(tmp_path, "one", "alpha words")
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "sessions")
    (tmp_path / "sessions" / "--repo--" / "alias.jsonl").symlink_to(session.path)
    for spelling in (roots["sessions"], link, tmp_path / "sessions" / "--repo--" / ".."):
        reindex(sessions=spelling, index=roots["index"], workers=1)
        response = recall("alpha", sessions=spelling, index=roots["index"])
        assert response["total"] == 1, spelling
        follow = response["hits"][0]["follow"]
        assert follow["session"] == session.session_id
        assert expand_request(follow)["entries"]
    records = load_catalog(open_index(roots["index"])).records
    assert [r.path for r in records] == [str(session.path.resolve())]


def test_workers_are_capped_at_the_cpu_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                             ) -> None:
    """--workers 1000 starts no more parser processes than there are CPUs, and says so."""
    roots = _roots(tmp_path)
    for n in range(6):
        _small(tmp_path, f"s{n}", f"words {n}")
    started: list[int] = []
    real = reindex_module._workers

    def counting(count: int) -> Any:
        started.append(count)
        return real(count)

    monkeypatch.setattr(reindex_module, "_workers", counting)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    report = reindex(**roots, workers=1000)
    assert started == [2] and report["workers"] == 2
    assert report["notices"] == ["--workers 1000: capped at 2, the number of CPUs (more "
                                 "parsers than CPUs only compete for them)"]
    assert report["indexed"] == 6


def test_a_file_changed_while_the_writer_opens_is_indexed_as_it_is_then(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The workers start on the plan made before the lock; a file that changes before the
    plan made under the lock is parsed again from that plan: its new text is found, and its
    record holds its new stat (the next run skips it)."""
    roots = _roots(tmp_path)
    changed = _small(tmp_path, "s0", "alpha words")
    for n in range(1, 6):
        _small(tmp_path, f"s{n}", f"words {n}")
    real = reindex_module.load_catalog
    calls: list[int] = []
    started: list[Any] = []

    class Recorded(reindex_module._Parsing):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            started.append(self)

    def changing(handle: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:  # (the first call is the look before the lock)
            # Once the workers have parsed the file as it was (bounded: 10 s).
            concurrent.futures.wait(started[0]._window, timeout=10)
            changed.append("gamma appended")
        return real(handle)

    monkeypatch.setattr(reindex_module, "_Parsing", Recorded)
    monkeypatch.setattr(reindex_module, "load_catalog", changing)
    report = reindex(**roots, workers=2)
    assert (report["indexed"], len(calls)) == (6, 2)
    monkeypatch.undo()
    record = load_catalog(open_index(roots["index"])).by_path[str(changed.path)]
    assert record.source_hash == read_session(changed.path).source_hash
    assert recall("gamma", hot_sessions=0, **roots)["total"] == 1
    assert reindex(**roots, workers=2)["skipped"] == 6
    _complete(roots["index"])


def test_a_deleted_hot_session_is_forgotten_by_the_next_query(tmp_path: Path) -> None:
    """A query's hot-tier refresh forgets a hot session whose file was deleted: no reindex
    is needed for it to leave memory."""
    roots = _roots(tmp_path)
    gone = _small(tmp_path, "gone", "alpha words")
    _small(tmp_path, "kept", "beta words")
    reindex(**roots, workers=1)
    gone.path.unlink()
    assert recall("words", **roots)["total"] == 1
    assert recall("alpha", hot_sessions=0, **roots)["total"] == 0
    assert [s["path"] for s in list_sessions(index=roots["index"])["sessions"]] == [
        str(tmp_path / "sessions" / "--repo--" / "kept.jsonl")]


def test_glued_lines_are_salvaged_for_recall(tmp_path: Path) -> None:
    """Objects a crash glued on one line (Pi drops the line: here a compaction, and a turn
    with a thinking block) are indexed off-branch, recalled by their content and reported
    as ``salvaged`` with file:line, while the session's entries stay Pi's."""
    roots = _roots(tmp_path)
    source = REPO / "fixtures" / "pi-1.6.0-realworld" / "sessions" / "v3-glued-lines.jsonl"
    path = roots["sessions"] / "--legacy-app--" / source.name
    path.parent.mkdir(parents=True)
    path.write_bytes(source.read_bytes())
    session = read_session(path)
    first, second = session.glued
    compaction, turn = first.objects[0], second.objects[0]
    assert (compaction["type"], turn["message"]["content"][0]["type"]) == ("compaction", "thinking")
    salvaged = [value["id"] for glued in session.glued for value in glued.objects]
    assert set(salvaged).isdisjoint(e.id for e in session.entries)
    report = reindex(**roots, workers=1)
    wheres = [f"{path}:{g.line}: salvaged 2 JSON objects glued on one line" for g in session.glued]
    assert [s["path"] for s in report["salvaged"]] == [str(path)] * 2
    assert all(s["reason"].startswith(w) for s, w in zip(report["salvaged"], wheres, strict=True))
    [record] = load_catalog(open_index(roots["index"])).records
    assert all(any(p.startswith(w) for p in record.problems) for w in wheres)
    assert record.entries == len(session.entries) + 4
    _complete(roots["index"])
    marker = compaction["summary"].rsplit("- ", 1)[1]
    hits = recall(marker, match="all", **roots)["hits"]
    assert [(h["address"], h.get("onActiveBranch")) for h in hits] == [(compaction["id"], False)]
    thinking = turn["message"]["content"][0]["thinking"]
    hits = recall(thinking, mode="phrase", **roots)["hits"]
    assert [h["address"] for h in hits] == [turn["id"]]
    page = expand_request({**hits[0]["follow"], "raw": True})
    assert page["entries"][0]["text"].encode() == path.read_bytes().split(b"\n")[second.line - 1]


def test_a_document_tantivy_refuses_costs_only_its_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Should a value still reach Tantivy out of range, only that session is reported invalid
    (naming the file) and nothing of it is left; the others are indexed and committed."""
    roots = _roots(tmp_path)
    bad = _small(tmp_path, "bad", "alpha words")
    _small(tmp_path, "good", "beta words")
    real = reindex_module.item_json

    def out_of_range(item: Any, path: str, session_id: str, *source: Any) -> str:
        document = real(item, path, session_id, *source)
        if path == str(bad.path):
            return document.replace('"position":0', '"position":18446744073709551615')
        return document

    monkeypatch.setattr(reindex_module, "item_json", out_of_range)
    report = reindex(**roots, workers=1)
    assert report["indexed"] == 1 and report["commits"] == 1
    assert [item["path"] for item in report["invalid"]] == [str(bad.path)]
    assert report["invalid"][0]["reason"].startswith(
        f"{bad.path}: not indexed: the index refused a document (The field")
    assert recall("beta", **roots)["total"] == 1
    assert recall("alpha", **roots)["total"] == 0
    assert [r.path for r in load_catalog(open_index(roots["index"])).records] == [
        str(tmp_path / "sessions" / "--repo--" / "good.jsonl")]


def test_a_noop_reindex_of_several_agents_opens_no_session_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over Pi, Claude Code and Codex files, a second reindex with nothing changed opens no
    file under the sessions folder (a stat per file is all), and indexes nothing."""
    roots = _roots(tmp_path)
    _small(tmp_path, "pi", "a pi session")
    shutil.copytree(REPO / "fixtures" / "agents" / "claude-code", roots["sessions"] / "claude",
                    ignore=shutil.ignore_patterns("*.md"))
    shutil.copytree(REPO / "fixtures" / "agents" / "codex", roots["sessions"] / "codex",
                    ignore=shutil.ignore_patterns("*.md"))
    first = reindex(**roots, workers=1)
    assert (first["indexed"], first["invalid"]) == (11, [])
    refuse_opening(monkeypatch, roots["sessions"])
    again = reindex(**roots, workers=1)
    assert (again["indexed"], again["skipped"], again["commits"]) == (0, 11, 0)


def test_agents_narrow_a_named_folder_to_their_files(tmp_path: Path) -> None:
    """`reindex --agents codex` over a folder holding several agents' files indexes only
    Codex's (told by their first line), reports nothing about the others and forgets
    nothing already indexed; without it, the rest is indexed."""
    roots = _roots(tmp_path)
    _small(tmp_path, "pi", "a pi session")
    for agent in ("claude-code", "codex"):
        shutil.copytree(REPO / "fixtures" / "agents" / agent, roots["sessions"] / agent,
                        ignore=shutil.ignore_patterns("*.md"))
    only = reindex(**roots, workers=1, agents="codex")
    assert (only["indexed"], only["invalid"]) == (6, [])
    assert {row["agent"] for row in list_sessions(index=roots["index"])["sessions"]} == {"codex"}
    rest = reindex(**roots, workers=1)
    assert (rest["indexed"], rest["removed"]) == (5, [])
    again = reindex(**roots, workers=1, agents="pi")
    assert (again["indexed"], again["removed"]) == (0, [])
    assert list_sessions(index=roots["index"])["total"] == 11
