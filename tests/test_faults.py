"""Faults: crashes, write failures and sessions that change under the engine lose nothing.

Every subprocess here runs under a hard time limit (``reliability.PROCESS_SECONDS``).
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
import tantivy

from fabric_memory.compaction import append_compaction, compact_session
from fabric_memory.errors import (
    ExpandError,
    MemoryIndexError,
    SessionChangedError,
    SessionError,
)
from fabric_memory.memory import index as index_module
from fabric_memory.memory import reindex as reindex_module
from fabric_memory.memory.catalog import load_catalog, verify
from fabric_memory.memory.expand import expand, expand_request
from fabric_memory.memory.index import SCHEMA_TAG, open_index
from fabric_memory.memory.recall import recall
from fabric_memory.memory.reindex import reindex
from fabric_memory.session import read_session

from .fuzz import SMALL_SETTINGS
from .memory_builder import SessionBuilder, clone_sessions, operation
from .reliability import (
    append_user,
    assert_consistent,
    cli,
    expected_texts,
    file_hash,
    finish,
    python,
    report,
)

FAULTS: dict[str, int] = {}
"""Faults injected per test (the figures docs/reliability.md reports)."""


def _roots(tmp_path: Path) -> dict[str, Path]:
    return {"sessions": tmp_path / "sessions", "index": tmp_path / "index"}


def _session(root: Path, name: str, words: str) -> SessionBuilder:
    """A small session with a user message and one valid Fabric trace."""
    builder = SessionBuilder(root / "--repo--" / f"{name}.jsonl")
    builder.user(f"{name}: {words}")
    builder.assistant_call("c1", "fabric_exec", {"code": "x"})
    builder.fabric_result("c1", [operation(0, "pi.read", {"path": f"src/{name}.ts"}),
                                 operation(1, "pi.grep", {"path": "src"}, "failed")],
                          phases=["Plan"])
    builder.user(f"{name} done")
    builder.write()
    return builder


# --- a session that changes between indexing and expansion -------------------------------

TRUNCATE_DURING_EXPAND = """
import os, sys
from fabric_memory.errors import ExpandError
from fabric_memory.memory import expand as module
path, index, sessions = sys.argv[1:4]
real = module.IndexedSource.line

def line(self, located):
    os.truncate(path, 0)  # another process truncates the file while expand reads it
    return real(self, located)

module.IndexedSource.line = line
try:
    page = module.expand(path, indices=[0, 1], index=index, sessions=sessions)
except ExpandError as error:
    print(error.code)
else:
    print("page", page["entries"][0]["text"][:40])
"""


def test_truncated_while_expanding_is_a_clear_error_not_a_crash(tmp_path: Path) -> None:
    """A file truncated while expand reads it gives source_unavailable or stale_pointer (the
    process is not killed by SIGBUS and no bytes of another version are returned)."""
    roots = _roots(tmp_path)
    path = _session(roots["sessions"], "one", "alpha").path
    reindex(**roots, workers=1)
    status, out, err = finish(python(TRUNCATE_DURING_EXPAND, str(path), str(roots["index"]),
                                     str(roots["sessions"])))
    FAULTS["truncated during expand"] = 1
    assert status == 0, (status, err.decode())
    assert out.decode().strip() in ("source_unavailable", "stale_pointer"), out


def test_replaced_while_expanding_from_the_index_keeps_the_hashed_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file renamed over while expand reads it: lines come from the version that was hashed,
    labelled with that version's sourceHash (never the new file's bytes)."""
    from fabric_memory.memory import expand as module

    roots = _roots(tmp_path)
    path = _session(roots["sessions"], "one", "alpha").path
    reindex(**roots, workers=1)
    before = expected_texts(path)
    real = module.IndexedSource.line

    def line(self: Any, located: Any) -> bytes:
        replacement = path.with_suffix(".new")
        replacement.write_bytes(path.read_bytes().replace(b"alpha", b"OMEGA"))
        replacement.replace(path)
        return real(self, located)

    monkeypatch.setattr(module.IndexedSource, "line", line)
    page = expand(str(path), positions="0:3", raw=True, **roots)
    FAULTS["replaced during expand (indexed)"] = 1
    assert page["sourceHash"] == before.source_hash
    assert all(before.agrees(item) for item in page["entries"])
    assert "OMEGA" not in orjson.dumps(page).decode()


def test_replaced_while_expanding_a_changed_file_keeps_the_parsed_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A changed (re-parsed) file renamed over again while expand reads it: the lines are the
    parsed version's, labelled with its sourceHash (never the newer file's bytes)."""
    from fabric_memory.memory import expand as module

    roots = _roots(tmp_path)
    builder = _session(roots["sessions"], "one", "alpha")
    reindex(**roots, workers=1)
    builder.append("a line the index has not seen")
    parsed_version = expected_texts(builder.path)
    real = module.ParsedSource.__init__

    def parsed(self: Any, path: str, *args: Any) -> None:
        real(self, path, *args)
        replacement = Path(path).with_suffix(".new")
        replacement.write_bytes(Path(path).read_bytes().replace(b"alpha", b"OMEGA"))
        replacement.replace(path)

    monkeypatch.setattr(module.ParsedSource, "__init__", parsed)
    page = expand(str(builder.path), positions="0:4", raw=True, **roots)
    FAULTS["replaced during expand (re-parsed)"] = 1
    assert page["sourceHash"] == parsed_version.source_hash
    assert len(page["entries"]) == 5
    assert all(parsed_version.agrees(item) for item in page["entries"])
    assert "OMEGA" not in orjson.dumps(page).decode()


def test_changed_while_being_parsed_is_refused(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A file that changes between expand's hash and its parse is source_unavailable (the
    parsed version and the bytes it would read from disagree)."""
    from fabric_memory.memory import expand as module

    roots = _roots(tmp_path)
    builder = _session(roots["sessions"], "one", "alpha")
    reindex(**roots, workers=1)
    builder.append("a line the index has not seen")
    real = module.read_source

    def racing(path: Any, *args: Any) -> Any:
        append_user(Path(path), "appended between hash and parse")
        return real(path, *args)

    monkeypatch.setattr(module, "read_source", racing)
    with pytest.raises(ExpandError) as caught:
        expand(str(builder.path), positions="0:3", **roots)
    FAULTS["changed during expand's parse"] = 1
    assert caught.value.code == "source_unavailable"
    assert f"{builder.path}: changed while it was being read" in caught.value.message


@pytest.mark.parametrize("change", ["delete", "truncate", "truncate-mid-line", "replace",
                                    "replace-same-size", "append", "append-half-line",
                                    "empty", "garbage"])
def test_changed_between_indexing_and_expansion(tmp_path: Path, change: str) -> None:
    """A pointer to the indexed version fails stale_pointer (or source_unavailable when the
    file is gone or unreadable); without the pointer, expand shows the file as it is now,
    byte for byte, or a clear error — never bytes of the old version."""
    roots = _roots(tmp_path)
    builder = _session(roots["sessions"], "one", "alpha")
    path = builder.path
    reindex(**roots, workers=1)
    hit = recall("alpha", **roots)["hits"][0]
    follow = hit["follow"]
    data = path.read_bytes()
    lines = data.split(b"\n")
    if change == "delete":
        path.unlink()
    elif change == "truncate":
        path.write_bytes(b"\n".join(lines[:3]) + b"\n")
    elif change == "truncate-mid-line":
        path.write_bytes(data[: len(data) - 40])
    elif change == "replace":
        other = path.with_suffix(".new")
        other.write_bytes(data.replace(b"alpha", b"gamma delta epsilon"))
        other.replace(path)
    elif change == "replace-same-size":
        path.write_bytes(data.replace(b"alpha", b"OMEGA"))
    elif change == "append":
        builder.append("more words")
    elif change == "append-half-line":
        with open(path, "ab") as stream:
            stream.write(b'{"type":"message","id":"half","parentId":"e004","mess')
    elif change == "empty":
        path.write_bytes(b"")
    else:
        path.write_bytes(b"\x00\xff garbage")
    FAULTS[f"changed before expand: {change}"] = 1
    with pytest.raises(ExpandError) as caught:
        expand_request(follow)
    gone = change in ("delete", "empty", "garbage")
    assert caught.value.code == ("source_unavailable" if gone else "stale_pointer")
    assert str(path) in caught.value.message
    now = expected_texts(path)
    selectors = {"positions": f"0:{max(now.entries, 1) - 1}", "addresses": [hit["address"]],
                 "raw": True}
    try:
        page = expand(str(path), **selectors, max_entries=20, **roots)
    except ExpandError as error:
        assert error.code in ("source_unavailable", "address_not_found", "index_out_of_bounds")
        assert gone or error.code != "source_unavailable", error
        return
    assert page["sourceHash"] == now.source_hash == file_hash(path)
    assert page["entries"] and all(now.agrees(item) for item in page["entries"])


# --- kill -9 of a reindex -------------------------------------------------------------------

REINDEX_SCRIPT = """
import sys
from fabric_memory.memory.reindex import reindex
report = reindex(sessions=sys.argv[1], index=sys.argv[2], workers=2, full=sys.argv[3] == "full",
                 commit_every=int(sys.argv[4]))
print("DONE", report["indexed"], flush=True)
"""
KILLS = 5
CLONES = 100


def _committed_versions_are_real(index: Path) -> int:
    """Every committed record holds a version the file really had (a prefix of it: these
    files only grow), with exactly its documents. Returns how many records there are."""
    assert_consistent(index)
    records = load_catalog(open_index(index)).records
    for record in records:
        assert record.source_hash == file_hash(Path(record.path), record.size), record.path
    return len(records)


def test_repeated_kill_9_of_reindex(tmp_path: Path, corpus_dir: Path) -> None:
    """reindex killed with SIGKILL at random moments, five times: after each kill the last
    commit is whole and queryable and the lock is free; the next run completes with exactly
    the sessions that were lost or changed."""
    roots = _roots(tmp_path)
    paths = clone_sessions(corpus_dir, roots["sessions"], CLONES)
    rng = random.Random(7)
    # How long a whole run takes on this machine now (into an index of its own): every kill
    # below lands between a third and nine tenths of it, so a faster reindex or a loaded
    # machine still kills runs in the middle of their work.
    started = time.monotonic()
    status, _, err = finish(python(REINDEX_SCRIPT, str(roots["sessions"]),
                                   str(tmp_path / "calibration"), "full", "300"))
    assert status == 0, err.decode()
    whole = time.monotonic() - started
    killed = 0
    for round_ in range(KILLS):
        mode = "full" if round_ % 2 else "incremental"
        proc = python(REINDEX_SCRIPT, str(roots["sessions"]), str(roots["index"]), mode, "300")
        # Every session changed since the last round (below), so even an incremental run
        # re-reads all of them, and the kill lands inside it whatever the mode.
        time.sleep(rng.uniform(0.35, 0.9) * whole)
        proc.send_signal(signal.SIGKILL)
        status, _, err = finish(proc)
        assert status in (-signal.SIGKILL, 0), err.decode()
        killed += status == -signal.SIGKILL
        if (roots["index"] / f"v{SCHEMA_TAG}" / "meta.json").exists():
            committed = _committed_versions_are_real(roots["index"])
            if committed:
                record = load_catalog(open_index(roots["index"])).records[0]
                hits = recall(role="user", session=record.path, **roots)["hits"]
                page = expand_request({**hits[0]["follow"], "raw": True})
                assert expected_texts(Path(record.path)).agrees(page["entries"][0])
        # Between runs the sessions keep growing, so every run has work to lose.
        for path in paths:
            append_user(path, f"round {round_} words")
    FAULTS["kill -9 of reindex"] = killed
    assert killed >= KILLS - 1, "the runs finished before they could be killed"
    catalog = load_catalog(open_index(roots["index"])) if (
        roots["index"] / f"v{SCHEMA_TAG}" / "meta.json").exists() else None
    stale = [p for p in paths if catalog is None or str(p) not in catalog.by_path
             or catalog.by_path[str(p)].source_hash != file_hash(p)]
    report = reindex(**roots, workers=1, lock_timeout=5)
    assert (report["indexed"], report["skipped"], report["invalid"]) == (
        len(stale), CLONES - len(stale), [])
    assert _committed_versions_are_real(roots["index"]) == CLONES
    assert all(r.source_hash == file_hash(Path(r.path))
               for r in load_catalog(open_index(roots["index"])).records)
    assert verify(index=roots["index"])["ok"] == CLONES
    assert reindex(**roots, workers=1)["indexed"] == 0


# --- write failures -------------------------------------------------------------------------


class _FailingWriter:
    """A Tantivy writer whose commit fails as a full disk would (everything else is real)."""

    def __init__(self, raw: Any) -> None:
        self._raw = raw

    def commit(self) -> int:
        raise ValueError("An IO error occurred: 'No space left on device (os error 28)'")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)


def _indexed_twice(tmp_path: Path) -> tuple[dict[str, Path], SessionBuilder]:
    """An index holding session ``one``; then ``two`` is written and ``one`` grows."""
    roots = _roots(tmp_path)
    one = _session(roots["sessions"], "one", "alpha")
    reindex(**roots, workers=1)
    _session(roots["sessions"], "two", "beta")
    one.append("gamma appended")
    return roots, one


def _old_index_intact(roots: dict[str, Path], one: SessionBuilder) -> None:
    assert_consistent(roots["index"])
    catalog = load_catalog(open_index(roots["index"]))
    assert [Path(r.path).name for r in catalog.records] == ["one.jsonl"]
    # hot_sessions=0: a query must not refresh the changed session before we look.
    assert recall("alpha", hot_sessions=0, **roots)["total"] >= 1
    assert recall("gamma", hot_sessions=0, **roots)["total"] == 0
    assert recall("beta", hot_sessions=0, **roots)["total"] == 0


def test_failed_commit_is_a_clear_error_and_the_old_index_stays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit that fails (disk full) raises MemoryIndexError naming the index; the previous
    commit still answers, the lock is released, and the next run succeeds."""
    roots, one = _indexed_twice(tmp_path)
    real = index_module.MemoryIndex.writer

    def failing(self: Any, **kwargs: Any) -> Any:
        writer = real(self, **kwargs)
        writer._raw = _FailingWriter(writer._raw)
        return writer

    monkeypatch.setattr(index_module.MemoryIndex, "writer", failing)
    with pytest.raises(MemoryIndexError) as caught:
        reindex(**roots, workers=1)
    FAULTS["commit fails (disk full)"] = 1
    assert str(roots["index"]) in caught.value.message
    assert "No space left on device" in caught.value.message
    assert caught.value.message.endswith("free disk space (or pass --index DIR on another "
                                         "disk) and run the command again")
    assert "--full" not in caught.value.message  # rebuilding cannot cure a full disk
    assert "\n" not in caught.value.message
    monkeypatch.setattr(index_module.MemoryIndex, "writer", real)
    _old_index_intact(roots, one)
    report = reindex(**roots, workers=1, lock_timeout=1)
    assert (report["indexed"], report["skipped"]) == (2, 0)
    assert recall("beta", **roots)["total"] >= 1


REINDEX_AS_NOBODY = """
import os, sys
from fabric_memory.cli import main
import fabric_memory.memory.reindex, fabric_memory.memory.render  # imported while still root
os.setgid(65534)
os.setuid(65534)
sys.exit(main(["reindex", "--sessions", sys.argv[1], "--index", sys.argv[2], "--json"]))
"""


def _readable_by_all(root: Path) -> None:
    for path in [root, *root.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)


def test_read_only_index_directory_is_a_clear_error(tmp_path_factory: pytest.TempPathFactory
                                                    ) -> None:
    """A writer that may not write the index directory (another user's, or read-only) exits
    non-zero with one line naming the index; the index is untouched and still answers."""
    base = Path(tmp_path_factory.mktemp("readonly"))
    roots, one = _indexed_twice(base)
    before = {p: p.read_bytes() for p in roots["index"].rglob("*") if p.is_file()}
    if os.geteuid() == 0:  # root writes anywhere: run the writer as nobody instead
        for parent in [base, *base.parents]:
            parent.chmod(parent.stat().st_mode | 0o005)
        _readable_by_all(base)
        proc = python(REINDEX_AS_NOBODY, str(roots["sessions"]), str(roots["index"]))
    else:
        for path in [roots["index"], *roots["index"].rglob("*")]:
            path.chmod(0o555 if path.is_dir() else 0o444)
        proc = cli("reindex", "--sessions", str(roots["sessions"]), "--index",
                   str(roots["index"]), "--json")
    status, out, err = finish(proc)
    FAULTS["read-only index directory"] = 1
    message = err.decode().strip()
    assert status == 1 and message.count("\n") == 0, (status, message)
    assert message.startswith("fabric-memory reindex: ") and str(roots["index"]) in message
    assert "Permission denied" in message and "--full" not in message
    assert orjson.loads(out)["error"]["code"] == "index_error"
    assert {p: p.read_bytes() for p in roots["index"].rglob("*") if p.is_file()} == before
    _old_index_intact(roots, one)


QUERY_AS_NOBODY = """
import os, sys
from fabric_memory.cli import main
import fabric_memory.memory.recall, fabric_memory.memory.render  # imported while still root
import fabric_memory.memory.catalog, fabric_memory.memory.expand, fabric_memory.memory.reindex
from fabric_memory.cli import build_parser
build_parser()  # argparse's messages load gettext and locale lazily: from the stdlib, as root
os.setgid(65534)
os.setuid(65534)
sys.exit(main(sys.argv[1:]))
"""


def test_queries_answer_from_an_index_they_may_not_write(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """recall, expand, sessions, stats and verify work on an index this process may not write
    (a read-only disk, another user's index): reading takes no lock in the index directory."""
    base = Path(tmp_path_factory.mktemp("readonly-queries"))
    roots, one = _indexed_twice(base)
    reindex(**roots, workers=1)
    before = {p: p.read_bytes() for p in roots["index"].rglob("*") if p.is_file()}
    where = ("--sessions", str(roots["sessions"]), "--index", str(roots["index"]))
    commands = [("recall", "gamma", *where, "--json"),
                ("expand", str(one.path), "--position", "0", *where, "--json"),
                ("sessions", "--index", str(roots["index"]), "--json"),
                ("stats", "--index", str(roots["index"]), "--json"),
                ("verify", "--index", str(roots["index"]), "--json")]
    if os.geteuid() == 0:  # root writes anywhere: query as nobody instead
        for parent in [base, *base.parents]:
            parent.chmod(parent.stat().st_mode | 0o005)
        _readable_by_all(base)
        for path in [roots["index"], *roots["index"].rglob("*")]:
            path.chmod(0o555 if path.is_dir() else 0o444)
        results = [finish(python(QUERY_AS_NOBODY, *command)) for command in commands]
    else:
        for path in [roots["index"], *roots["index"].rglob("*")]:
            path.chmod(0o555 if path.is_dir() else 0o444)
        results = [finish(cli(*command)) for command in commands]
    FAULTS["queries on a read-only index"] = len(commands)
    for command, (status, _, err) in zip(commands, results, strict=True):
        assert status == 0, (command[0], err.decode())
    recalled = orjson.loads(results[0][1])
    assert recalled["total"] == 1 and recalled["hits"][0]["path"] == str(one.path)
    assert "one: alpha" in orjson.loads(results[1][1])["entries"][0]["text"]
    assert orjson.loads(results[3][1])["sessions"] == 2
    assert orjson.loads(results[4][1])["indexProblems"] == []
    assert {p: p.read_bytes() for p in roots["index"].rglob("*") if p.is_file()} == before


def test_a_file_where_the_index_directory_should_be(tmp_path: Path) -> None:
    """--index naming a regular file is one clear error; the file is left as it was."""
    roots = _roots(tmp_path)
    _session(roots["sessions"], "one", "alpha")
    roots["index"].write_bytes(b"not a directory")
    status, _, err = finish(cli("reindex", "--sessions", str(roots["sessions"]), "--index",
                                  str(roots["index"])))
    FAULTS["index path is a file"] = 1
    assert status == 1 and str(roots["index"]) in err.decode()
    assert err.decode().count("\n") == 1 and "Traceback" not in err.decode()
    assert roots["index"].read_bytes() == b"not a directory"


# --- a damaged index -------------------------------------------------------------------------


def _damage(index: Path, kind: str) -> None:
    directory = index / f"v{SCHEMA_TAG}"
    segments = sorted(directory.glob("*.idx")), sorted(directory.glob("*.store"))
    if kind == "garbage meta.json":
        (directory / "meta.json").write_text("garbage")
    elif kind == "empty meta.json":
        (directory / "meta.json").write_text("")
    elif kind == "garbage .managed.json":
        (directory / ".managed.json").write_text("garbage")
    elif kind == "deleted segment file":
        segments[0][0].unlink()
    elif kind == "truncated segment file":
        os.truncate(segments[1][0], segments[1][0].stat().st_size // 2)
    elif kind == "folder as Tantivy's lock":
        (directory / ".tantivy-writer.lock").unlink(missing_ok=True)
        (directory / ".tantivy-writer.lock").mkdir()
    else:  # a folder in place of our own lock file
        (index / "writer.lock").unlink(missing_ok=True)
        (index / "writer.lock").mkdir()


DAMAGE = ["garbage meta.json", "empty meta.json", "garbage .managed.json",
          "deleted segment file", "truncated segment file", "folder as Tantivy's lock",
          "folder as our lock"]


@pytest.mark.parametrize("kind", DAMAGE)
def test_reindex_full_rebuilds_a_damaged_index(tmp_path: Path, kind: str) -> None:
    """Whatever the damage, queries fail with one line advising `reindex --full` (or still
    answer), and `reindex --full` then rebuilds the index from the sessions."""
    roots = _roots(tmp_path)
    _session(roots["sessions"], "one", "alpha words")
    _session(roots["sessions"], "two", "beta words")
    reindex(**roots, workers=1)
    _damage(roots["index"], kind)
    FAULTS[f"damaged index: {kind}"] = 1
    where = ("--sessions", str(roots["sessions"]), "--index", str(roots["index"]))
    for command in (("recall", "words", *where), ("verify", "--index", str(roots["index"]))):
        status, _, err = finish(cli(*command))
        text = err.decode()
        assert "Traceback" not in text and "panicked" not in text, text
        if status != 0:
            assert text.count("\n") == 1 and "run `fabric-memory reindex --full`" in text, text
    status, _, err = finish(cli("reindex", "--full", *where))
    assert status == 0, err.decode()
    assert "Traceback" not in err.decode()
    assert recall("words", **roots)["total"] == 2
    report = verify(index=roots["index"])
    assert (report["ok"], report["indexProblems"]) == (2, [])
    assert_consistent(roots["index"])


def test_flipped_bits_in_a_store_are_one_line_and_full_reindex_fixes_them(tmp_path: Path
                                                                           ) -> None:
    """A .store with flipped bytes makes verify report unreadable documents (or fail with one
    line); expand and recall never print a panic; `reindex --full` repairs it."""
    roots = _roots(tmp_path)
    _session(roots["sessions"], "one", "alpha words")
    reindex(**roots, workers=1)
    store = next((roots["index"] / f"v{SCHEMA_TAG}").glob("*.store"))
    data = bytearray(store.read_bytes())
    for position in range(0, len(data) - 64, 7):
        data[position] ^= 0xFF
    store.write_bytes(bytes(data))
    FAULTS["flipped bits in a .store"] = 1
    where = ("--sessions", str(roots["sessions"]), "--index", str(roots["index"]))
    for command in (("verify", "--index", str(roots["index"]), "--json"),
                    ("recall", "alpha", *where), ("expand", str(roots["sessions"] / "one.jsonl"),
                                                  "--position", "0", *where)):
        status, out, err = finish(cli(*command))
        text = err.decode()
        assert "Traceback" not in text and "panicked" not in text, text
        if command[0] == "verify":
            assert status == 1, text
            if not text:
                assert orjson.loads(out)["indexProblems"], out
        if status != 0 and text:
            assert text.count("\n") == 1 and "reindex --full" in text, text
    assert finish(cli("reindex", "--full", *where))[0] == 0
    assert verify(index=roots["index"])["indexProblems"] == []


def test_verify_finds_documents_the_index_lost(tmp_path: Path) -> None:
    """Documents missing from the index (its record still there) are reported by verify,
    which exits 1; `reindex --full` restores them."""
    roots = _roots(tmp_path)
    one = _session(roots["sessions"], "one", "alpha words")
    _session(roots["sessions"], "two", "beta words")
    reindex(**roots, workers=1)
    handle = open_index(roots["index"])
    with handle.writer(timeout=5) as writer:
        writer._raw.delete_documents_by_query(tantivy.Query.boolean_query([
            (tantivy.Occur.Must, tantivy.Query.term_query(index_module.SCHEMA, "kind", "entry")),
            (tantivy.Occur.Must,
             tantivy.Query.term_query(index_module.SCHEMA, "path", str(one.path))),
        ]))
        writer.commit()
    FAULTS["documents lost from the index"] = 1
    report = verify(index=roots["index"])
    assert report["ok"] == 2 and report["sampledDocuments"] > 0
    assert report["indexProblems"] == [
        f"{one.path}: the index holds 0 entry documents, its record says 4"]
    status, out, _ = finish(cli("verify", "--index", str(roots["index"])))
    assert status == 1 and "run `fabric-memory reindex --full`" in out.decode()
    reindex(**roots, workers=1, full=True)
    assert verify(index=roots["index"])["indexProblems"] == []
    assert recall("alpha", **roots)["total"] == 1


def test_a_tantivy_panic_is_one_error_line() -> None:
    """A PanicException from Tantivy's Rust code becomes an MemoryIndexError naming the index and
    the fix, on one line."""
    panic = type("PanicException", (BaseException,), {})

    with pytest.raises(MemoryIndexError) as caught, index_module._translated("/x/index/v1"):
        raise panic("called `Option::unwrap()` on a `None` value\nstack backtrace: ...")
    assert caught.value.message == (
        "/x/index/v1: the index is damaged (Tantivy failed: called `Option::unwrap()` on a "
        "`None` value); run `fabric-memory reindex --full` to rebuild it from the sessions")
    with pytest.raises(KeyboardInterrupt), index_module._translated("/x"):
        raise KeyboardInterrupt


# --- something that is not a regular file where a session was ------------------------------


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_fifo_or_folder_in_place_of_a_session_never_hangs(tmp_path: Path, kind: str) -> None:
    """A FIFO (or a folder) replacing an indexed session: recall answers at once without
    holding the writer lock, reindex reports the FIFO invalid (the folder's file is gone),
    verify and expand say the file cannot be read."""
    roots = _roots(tmp_path)
    one = _session(roots["sessions"], "one", "alpha words")
    _session(roots["sessions"], "two", "beta words")
    reindex(**roots, workers=1)
    one.path.unlink()
    os.mkfifo(one.path) if kind == "fifo" else one.path.mkdir()
    FAULTS[f"{kind} in place of a session"] = 1
    where = ("--sessions", str(roots["sessions"]), "--index", str(roots["index"]))
    status, out, err = finish(cli("recall", "words", *where, "--json"))
    assert status == 0, err.decode()
    hits = {Path(hit["path"]).name: hit["stale"] for hit in orjson.loads(out)["hits"]}
    assert hits == {"one.jsonl": True, "two.jsonl": False}
    with index_module.IndexLock(roots["index"]) as lock:
        lock.acquire(0)  # no query left the writer lock held
    status, out, err = finish(cli("verify", "--index", str(roots["index"]), "--json"))
    one_state = next(item for item in orjson.loads(out)["sessions"]
                     if item["path"] == str(one.path))
    kind_name = "a FIFO" if kind == "fifo" else "a directory"
    assert one_state["state"] == "missing"
    assert one_state["reason"] == f"cannot read file: not a regular file ({kind_name})"
    with pytest.raises(ExpandError) as caught:
        expand(str(one.path), indices=[0], **roots)
    assert caught.value.code == "source_unavailable"
    assert f"not a regular file ({kind_name})" in caught.value.message
    report = reindex(**roots, workers=1, lock_timeout=0)
    if kind == "fifo":
        assert report["invalid"] == [{"path": str(one.path), "reason": f"{one.path}: cannot "
                                      "read file: not a regular file (a FIFO)"}]
    else:
        assert [item["path"] for item in report["removed"]] == [str(one.path)]
    assert recall("beta", **roots)["total"] == 1


def test_a_new_fifo_among_the_sessions_never_hangs_the_reindex(tmp_path: Path) -> None:
    """A FIFO with a session's name that was never indexed: reindex (reading each new file's
    head for its working folder) reports it invalid at once and indexes the rest."""
    roots = _roots(tmp_path)
    _session(roots["sessions"], "two", "beta words")
    fifo = roots["sessions"] / "--repo--" / "new.jsonl"
    fifo.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(fifo)
    where = ("--sessions", str(roots["sessions"]), "--index", str(roots["index"]))
    status, out, err = finish(cli("reindex", *where, "--json"))
    assert status == 0, err.decode()
    report = orjson.loads(out)
    assert report["indexed"] == 1
    assert report["invalid"] == [{"path": str(fifo), "reason": f"{fifo}: cannot read file: "
                                  "not a regular file (a FIFO)"}]


# --- a session appended while it is being reindexed ------------------------------------------


@pytest.mark.parametrize("moment", ["after-read", "before-read", "half-line-before-read"])
def test_appended_while_reindexing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   moment: str) -> None:
    """An append racing the reader: the index holds one real version of the file (old or new,
    its documents and record agreeing), and the next run brings it up to date."""
    roots = _roots(tmp_path)
    path = _session(roots["sessions"], "one", "alpha").path
    old = path.read_bytes()
    real = reindex_module.read_source

    def racing(name: Any, *args: Any) -> Any:
        if moment == "after-read":
            session = real(name, *args)
            append_user(path, "appended meanwhile")
            return session
        if moment == "before-read":
            append_user(path, "appended meanwhile")
        else:
            with open(path, "ab") as stream:
                stream.write(b'{"type":"message","id":"half","parentId":"e004","mess')
        return real(name, *args)

    monkeypatch.setattr(reindex_module, "read_source", racing)
    reindex(**roots, workers=1)
    monkeypatch.setattr(reindex_module, "read_source", real)
    FAULTS[f"append while reindexing ({moment})"] = 1
    assert_consistent(roots["index"])
    record = load_catalog(open_index(roots["index"])).records[0]
    assert record.source_hash == file_hash(path, record.size)
    indexed_old = record.size == len(old)
    assert indexed_old == (moment == "after-read")
    assert record.entries == len(read_session(path).entries) - indexed_old
    if moment == "half-line-before-read":
        assert any("truncated_tail" in problem for problem in record.problems)
        with open(path, "ab") as stream:  # the writer finishes its line
            stream.write(b'age":{"role":"user","content":"finished"}}\n')
    changed = verify(index=roots["index"])["changed"]
    assert changed == (moment != "before-read")
    report = reindex(**roots, workers=1)
    assert report["indexed"] == changed
    record = load_catalog(open_index(roots["index"])).records[0]
    assert record.source_hash == file_hash(path)
    assert record.entries == len(read_session(path).entries)
    assert_consistent(roots["index"])


# --- compact --append racing the host's own append ---------------------------------------------


def _compactable(tmp_path: Path) -> Path:
    builder = SessionBuilder(tmp_path / "s.jsonl")
    for turn in range(4):
        builder.user(f"turn {turn}: please work on the parser")
        builder.assistant_call(f"c{turn}", "fabric_exec", {"code": "x"})
        builder.fabric_result(f"c{turn}", [operation(0, "pi.read", {"path": f"src/{turn}.ts"})])
    return builder.write()


def test_append_refused_when_the_host_appended_first(tmp_path: Path) -> None:
    """The host appends between our read and our append: SessionChangedError, and the file is
    exactly what the host left (not one byte of ours)."""
    path = _compactable(tmp_path)
    computed = compact_session(path, SMALL_SETTINGS)
    host_line = append_user(path, "the host's own message")
    expected = path.read_bytes()
    assert computed.outcome.to_hook_result().get("compaction")
    with pytest.raises(SessionChangedError) as caught:
        append_compaction(computed.session, computed.outcome)  # type: ignore[arg-type]
    FAULTS["compact --append after a host append"] = 1
    assert str(path) in caught.value.message and "compact it again" in caught.value.message
    assert path.read_bytes() == expected and expected.endswith(host_line)


HOST_APPENDER = """
import os, sys, time
import orjson
path, parent, stop = sys.argv[1], sys.argv[2], sys.argv[3]
n = 0
while not os.path.exists(stop):  # keeps writing until the test has seen the race
    entry = {"type": "message", "id": f"host{n:05d}", "parentId": parent,
             "message": {"role": "user", "content": f"host message {n}"}}
    parent = entry["id"]
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)  # as Pi appends: no lock
    os.write(fd, orjson.dumps(entry) + b"\\n")
    os.close(fd)
    n += 1
    time.sleep(0.002)
"""


def test_compact_append_to_a_read_only_file_names_the_cause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`compact --append` on a file it may not write says so (not session_changed) with a fix
    that works; the file is untouched."""
    path = _compactable(tmp_path)
    original = path.read_bytes()
    real = os.open

    def read_only(name: Any, flags: int, *args: Any) -> int:
        if flags & os.O_APPEND:
            raise PermissionError(13, "Permission denied")
        return real(name, flags, *args)

    monkeypatch.setattr(os, "open", read_only)
    with pytest.raises(SessionError) as caught:
        compact_session(path, SMALL_SETTINGS, append=True)
    FAULTS["compact --append on a read-only file"] = 1
    assert caught.value.code == "session_error"
    assert caught.value.message == (f"{path}: cannot open for appending (Permission denied); "
                                    "make the file writable, or compact without --append")
    monkeypatch.setattr(os, "open", real)
    assert path.read_bytes() == original
    assert compact_session(path, SMALL_SETTINGS, append=False).appended is None


def test_compact_append_racing_a_host_writer(tmp_path: Path) -> None:
    """`compact --append` while another process keeps appending: each run either appends one
    whole compaction line or is refused with a clear error; every host line survives, whole
    and in order, and the file is never torn."""
    path = _compactable(tmp_path)
    original = path.read_bytes()
    leaf = read_session(path).leaf_id
    stop = tmp_path / "stop-host"
    host = python(HOST_APPENDER, str(path), str(leaf), str(stop))
    outcomes: list[object] = []
    # The host writes until told to stop, so however slow the machine, every run below
    # races it; the loop ends at the first refusal (bounded, so a guard that never refuses
    # fails the test instead of looping).
    while "refused" not in outcomes and len(outcomes) < 40:
        status, _, err = finish(cli("compact", str(path), "--append", "--keep-recent-tokens",
                                      "1", "--reserve-tokens", "63", "--json"))
        text = err.decode()
        assert status in (0, 1), text
        if status == 1:
            assert text.count("\n") == 1 and str(path) in text, text
            assert "changed since it was read" in text or "nothing to compact" in text, text
        outcomes.append("refused" if "changed since" in text else status)
    stop.touch()
    finish(host)
    FAULTS["compact --append racing a host writer"] = len(outcomes)
    data = path.read_bytes()
    assert data.startswith(original) and data.endswith(b"\n")
    values = [orjson.loads(line) for line in data[len(original):].splitlines()]
    hosts = [v["id"] for v in values if v["type"] == "message"]
    assert hosts and hosts == [f"host{n:05d}" for n in range(len(hosts))]
    compactions = [v for v in values if v["type"] == "compaction"]
    assert len(compactions) == outcomes.count(0)
    assert "refused" in outcomes, "the race never refused an append"


@pytest.fixture(autouse=True, scope="module")
def _summary(request: pytest.FixtureRequest) -> Any:
    yield
    report(request.config, f"\nfaults: {sum(FAULTS.values())} injected in {len(FAULTS)} "
           "scenarios, all survived")
