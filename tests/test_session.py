"""Session reader: ids, branches, hashes and located errors, against Pi's own truth."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_memory.errors import LineTooLongError, NotASessionError, SessionError
from fabric_memory.session import iter_session_files, migrated_id, read_line, read_session
from fabric_memory.sources import read_source

from .conftest import CORPUS, FIXTURES
from .corpus import corpus_index, corpus_json

SESSIONS = FIXTURES / "sessions"
APP = SESSIONS / "--home-dev-fixture-app--"


def _truth_files() -> list[dict[str, object]]:
    index = corpus_index()
    return [f for f in index["files"] if f["file"].endswith(".jsonl")]


TRUTH = _truth_files()


def _truth(item: dict[str, object]) -> dict[str, object]:
    return corpus_json(str(item["truth"]))


@pytest.mark.parametrize("item", TRUTH, ids=[str(f["name"]) for f in TRUTH])
def test_reader_agrees_with_pi(item: dict[str, object]) -> None:
    """Entry ids, lines, byte spans, leaf, roots and active branch equal what Pi computed."""
    truth = _truth(item)
    path = CORPUS / str(item["file"])
    if "lines" not in truth:
        with pytest.raises(NotASessionError) as caught:
            read_session(path)
        assert caught.value.path == str(path)
        return
    session = read_session(path)
    assert session.session_id == truth["header"]["id"]  # type: ignore[index]
    got = [(e.id, e.parent_id, e.type, e.line, e.offset, e.length) for e in session.entries]
    want = [
        (e["id"], e["parentId"], e["type"], e["line"], e["byteOffset"], e["byteLength"])
        for e in truth["entries"]  # type: ignore[attr-defined]
    ]
    assert got == want
    assert session.leaf_id == truth["leafId"]
    assert [e.id for e in session.active_branch()] == truth["activeBranch"]
    assert session.roots() == truth["roots"]
    active = session.active_ids()
    assert [e.id for e in session.entries if e.id not in active] == truth["offBranchEntryIds"]
    lines = truth["lines"]
    tail = lines["truncatedTail"]  # type: ignore[index]
    assert (session.truncated_tail.line if session.truncated_tail else None) == (
        tail["line"] if tail else None
    )
    malformed = [m["line"] for m in lines["malformed"] if m["terminated"]]  # type: ignore[index]
    assert [p.line for p in session.malformed] == malformed
    assert session.source_hash == xxhash.xxh3_128(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("item", TRUTH[:12], ids=[str(f["name"]) for f in TRUTH[:12]])
def test_read_line_is_verbatim(item: dict[str, object]) -> None:
    """read_line returns exactly the bytes of the entry's line, as Pi located it."""
    path = CORPUS / str(item["file"])
    if "lines" not in _truth(item):
        return
    session = read_session(path)
    raw_lines = path.read_bytes().split(b"\n")
    for entry in session.entries:
        assert read_line(str(path), entry) == raw_lines[entry.line - 1]
        assert orjson.loads(read_line(str(path), entry)) == entry.raw


def test_walk_skips_non_jsonl(corpus_dir: Path) -> None:
    """Only *.jsonl files are walked, recursively, including nested subagent folders."""
    files = list(iter_session_files(corpus_dir / "sessions"))
    assert all(p.suffix == ".jsonl" for p in files)
    assert any(p.parent.name == "subagents" for p in files)
    assert not any(p.name == "ignored-not-jsonl.json" for p in files)
    assert files == sorted(files)


def test_walk_is_exactly_the_sorted_rglob_of_session_files(tmp_path: Path) -> None:
    """The walk lists what sorted(rglob("*.jsonl") if is_file) lists, in the same order."""
    root = tmp_path / "sessions"
    for name in ("b/x.jsonl", "a-b/y.jsonl", "a/b/z.jsonl", ".hidden/h.jsonl", "a/.jsonl",
                 "a/notes.json", "a/session.jsonl.bak", "deep/1/2/3/d.jsonl"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("{}\n")
    (root / "a" / "dir.jsonl").mkdir()
    outside = tmp_path / "outside"
    (outside / "o").mkdir(parents=True)
    (outside / "o" / "far.jsonl").write_text("{}\n")
    (root / "linked-dir").symlink_to(outside / "o")
    (root / "b" / "link.jsonl").symlink_to(outside / "o" / "far.jsonl")
    (root / "b" / "broken.jsonl").symlink_to(tmp_path / "missing.jsonl")
    (root / "b" / "loop.jsonl").symlink_to(root / "b" / "loop.jsonl")
    expected = sorted(p for p in root.rglob("*.jsonl") if p.is_file())
    assert list(iter_session_files(root)) == expected
    names = [str(p.relative_to(root)) for p in expected]
    assert names[:3] == [".hidden/h.jsonl", "a/.jsonl", "a/b/z.jsonl"]
    assert names.index("a/b/z.jsonl") < names.index("a-b/y.jsonl")  # by parts, not by text
    assert "b/link.jsonl" in names
    assert not {"linked-dir/far.jsonl", "b/broken.jsonl", "b/loop.jsonl"} & set(names)
    assert list(iter_session_files(root / "b" / "x.jsonl")) == [root / "b" / "x.jsonl"]
    assert list(iter_session_files(tmp_path / "nowhere")) == []


@pytest.mark.parametrize(
    ("name", "line", "reason"),
    [
        ("empty.jsonl", None, "empty file"),
        ("garbage.jsonl", 1, "not JSON"),
        ("not-a-session.jsonl", 1, "not a session header"),
    ],
    ids=["empty", "garbage", "not-a-session"],
)
def test_non_sessions_are_typed_located_errors(name: str, line: int | None, reason: str) -> None:
    """A file that is not a session raises NotASessionError naming file:line and why."""
    path = APP / name
    with pytest.raises(NotASessionError) as caught:
        read_session(path)
    assert caught.value.line == line
    assert reason in str(caught.value)
    assert str(caught.value).startswith(f"{path}:{line}:" if line else f"{path}:")
    assert "\n" not in str(caught.value)


def test_truncated_tail_is_reported_not_fatal() -> None:
    """A half-written last line is ignored and reported as truncated_tail with its line."""
    session = read_session(APP / "2026-01-11T08-00-00-000Z_truncated-tail.jsonl")
    assert session.truncated_tail is not None
    assert session.truncated_tail.line == 4
    assert [e.id for e in session.entries] == ["me010000", "me020000"]
    assert session.leaf_id == "me020000"


def test_malformed_middle_line_skipped_and_crlf_stripped() -> None:
    """A malformed middle line is skipped with its line number; CRLF endings are stripped."""
    path = APP / "2026-01-12T08-00-00-000Z_malformed-line-crlf.jsonl"
    session = read_session(path)
    assert [p.line for p in session.malformed] == [3]
    assert session.malformed[0].located(str(path)).startswith(f"{path}:3: malformed JSON")
    assert [e.line for e in session.entries] == [2, 4]
    assert read_line(str(path), session.entries[0]).endswith(b"}")


def test_v1_entries_get_deterministic_ids() -> None:
    """A v1 file gets ids derived from each entry's line and a linear parent chain."""
    session = read_session(APP / "2025-06-01T08-00-00-000Z_v1.jsonl")
    assert session.version == 1
    assert [e.id for e in session.entries] == [migrated_id(n) for n in (2, 3, 4, 5)]
    assert [e.parent_id for e in session.entries] == [None, "L2", "L3", "L4"]
    assert all(e.migrated for e in session.entries)
    assert [e.id for e in session.active_branch()] == ["L2", "L3", "L4", "L5"]
    assert read_session(APP / "2025-06-01T08-00-00-000Z_v1.jsonl") == session


def test_omp_title_line_and_unknown_types() -> None:
    """An oh-my-pi title line precedes the header; unknown entry types stay opaque entries."""
    path = SESSIONS / "--home-dev-zürich--" / "2026-01-10T08-00-00-000Z_omp-title.jsonl"
    session = read_session(path)
    assert session.title is not None and session.title["title"] == "Refactor (omp)"
    types = [e.type for e in session.entries]
    assert {"session_init", "mode_change", "title_change", "compaction"} <= set(types)
    assert session.entries[0].line == 3


def test_branches_fixture_active_and_off_branch() -> None:
    """The leaf's chain is the active branch; the abandoned branch stays addressable."""
    session = read_session(APP / "2026-01-08T08-00-00-000Z_branches.jsonl")
    active = session.active_ids()
    off = [e for e in session.entries if e.id not in active]
    assert len(off) == 3
    assert all(e.id in session.by_id for e in off)
    assert session.active_branch()[0].id == session.roots()[0]


def test_line_too_long_is_rejected_without_reading_it(tmp_path: Path) -> None:
    """A line over max_line_bytes raises LineTooLongError naming file:line."""
    source = APP / "2026-01-05T08-00-00-000Z_fabric-valid.jsonl"
    path = tmp_path / "long.jsonl"
    data = source.read_bytes().split(b"\n")
    data.insert(2, b'{"type":"custom","id":"x","parentId":null,"data":"' + b"a" * 5000 + b'"}')
    path.write_bytes(b"\n".join(data))
    with pytest.raises(LineTooLongError) as caught:
        read_session(path, max_line_bytes=4096)
    assert caught.value.line == 3
    assert str(caught.value).startswith(f"{path}:3: line longer than 4096 bytes")
    assert read_session(path, max_line_bytes=8192).entries[1].id == "x"


def test_hash_and_fingerprint_track_changes(tmp_path: Path) -> None:
    """Appending an entry changes sourceHash and the lineage fingerprint; addresses stay."""
    path = tmp_path / "s.jsonl"
    shutil.copy(APP / "2026-01-05T08-00-00-000Z_fabric-valid.jsonl", path)
    before = read_session(path)
    with open(path, "ab") as out:
        out.write(b'{"type":"label","id":"zz000001","parentId":"me0a0000","label":"x"}\n')
    after = read_session(path)
    assert after.source_hash != before.source_hash
    assert after.lineage_fingerprint() != before.lineage_fingerprint()
    assert [(e.id, e.offset) for e in after.entries[:-1]] == [
        (e.id, e.offset) for e in before.entries
    ]
    assert before.lineage_fingerprint("all") != before.lineage_fingerprint("active")


def test_unreadable_path_is_a_session_error(tmp_path: Path) -> None:
    """A missing file is a SessionError naming the path, not an OSError."""
    with pytest.raises(SessionError) as caught:
        read_session(tmp_path / "missing.jsonl")
    assert "cannot read file" in str(caught.value)


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=600))
def test_arbitrary_bytes_never_crash(data: bytes) -> None:
    """Any bytes either read as a session or raise the project's typed SessionError."""
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".jsonl") as handle:
        handle.write(b'{"type":"session","version":3,"id":"s"}\n' + data)
        handle.flush()
        try:
            session = read_session(handle.name, max_line_bytes=256)
        except SessionError as exc:
            assert str(exc).startswith(handle.name)
        else:
            assert session.session_id == "s"


# --- Pi 1.6.0's reading rules, one at a time (the real-world files are in test_pi_realworld) ---

V3 = {"type": "session", "version": 3, "id": "s", "timestamp": "2026-01-01T00:00:00.000Z"}


def _message(entry_id: str | None, parent: str | None, text: str, **extra: object) -> dict:
    value: dict[str, object] = {"type": "message", "parentId": parent,
                                "message": {"role": "user", "content": text}, **extra}
    if entry_id is not None:
        value["id"] = entry_id
    return value


def _write(tmp_path: Path, *lines: object) -> Path:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(
        (line if isinstance(line, bytes) else orjson.dumps(line)) + b"\n" for line in lines
    ))
    return path


def test_every_session_line_is_skipped(tmp_path: Path) -> None:
    """A repeated header line (middle or last) is no entry and never the leaf, as in Pi."""
    path = _write(tmp_path, V3, _message("a", None, "x"), V3, _message("b", "a", "y"), V3)
    session = read_session(path)
    assert [e.id for e in session.entries] == ["a", "b"]
    assert session.leaf_id == "b"
    assert [e.id for e in session.active_branch()] == ["a", "b"]
    assert session.malformed == ()


def test_lines_without_an_id_are_kept_as_pi_keeps_them(tmp_path: Path) -> None:
    """An entry without an id (or type) stays an entry no parent link reaches; as the last
    line it leaves no leaf id, so the active branch is empty while the context still walks
    from it, as Pi's getBranch and buildSessionContext do."""
    from fabric_memory.compaction.prepare import build_session_context

    middle = _write(tmp_path, V3, _message("a", None, "x"), _message(None, "a", "lost"),
                    {"id": "t", "parentId": "a"}, _message("b", "t", "y"))
    session = read_session(middle)
    assert [(e.id, e.type, e.has_id) for e in session.entries] == [
        ("a", "message", True), (migrated_id(3), "message", False), ("t", "", True),
        ("b", "message", True)]
    assert [e.id for e in session.active_branch()] == ["a", "t", "b"]
    assert migrated_id(3) not in session.by_id
    last = _write(tmp_path, V3, _message("a", None, "x"), _message(None, "a", "tail"))
    session = read_session(last)
    assert session.leaf_id is None and session.active_branch() == []
    context = build_session_context(session.entries, session.leaf_id)
    assert [m.message["content"] for m in context.messages] == ["x", "tail"]


def test_falsy_values_are_skipped_and_truthy_non_objects_kept(tmp_path: Path) -> None:
    """``null``/``0``/``false``/``""`` lines are skipped (reported); ``7`` or ``[]`` is an
    entry (Pi keeps it), which as the last line leaves no leaf id."""
    session = read_session(_write(tmp_path, V3, _message("a", None, "x"), b"null", b"0", b"7"))
    assert [p.line for p in session.malformed] == [3, 4]
    assert [(e.type, e.raw, e.has_id) for e in session.entries[1:]] == [("", {}, False)]
    assert session.active_branch() == []


def test_garbage_before_the_header_is_skipped(tmp_path: Path) -> None:
    """Pi takes the first line that parses as the header: garbage and blank lines before it
    are skipped; when no header follows, the first bad line is named as the cause."""
    session = read_session(_write(tmp_path, b"\x00garbage{", b"", V3, _message("a", None, "x")))
    assert [e.id for e in session.entries] == ["a"]
    with pytest.raises(NotASessionError) as caught:
        read_session(_write(tmp_path, b"garbage", b"more garbage"))
    assert (caught.value.line, "not JSON" in str(caught.value)) == (1, True)
    with pytest.raises(NotASessionError, match="not JSON") as caught:
        read_session(_write(tmp_path, b"garbage", _message("a", None, "x")))
    assert caught.value.line == 1
    with pytest.raises(NotASessionError, match="not a session header") as caught:
        read_session(_write(tmp_path, b"", _message("a", None, "x")))
    assert caught.value.line == 2



def test_a_json_document_over_several_lines_is_named_as_such(tmp_path: Path) -> None:
    """A pretty-printed JSON file no reader recognises (an agent's metadata file handed to
    ``compact``) is told apart from garbage: its first line opens a value it never closes."""
    document = tmp_path / "task_metadata.json"
    document.write_bytes(orjson.dumps({"files_in_context": [{"path": "README.md"}]},
                                      option=orjson.OPT_INDENT_2))
    with pytest.raises(NotASessionError, match="opens a JSON value it does not close") as caught:
        read_source(document)
    assert caught.value.line == 1
    assert "docs/agents.md" in str(caught.value)
    with pytest.raises(NotASessionError, match=r"not JSON \(") as caught:
        read_session(_write(tmp_path, b"{not json at all}"))

def _v1(*entries: object, header: object = None) -> list[object]:
    return [header or {"type": "session", "id": "s", "timestamp": "2025-01-01T00:00:00Z"},
            *entries]


def test_v1_first_kept_entry_index_becomes_an_id(tmp_path: Path) -> None:
    """A v1 compaction's firstKeptEntryIndex counts Pi's parsed values (header = 0, repeated
    headers too; blank and malformed lines not) and becomes firstKeptEntryId."""
    user = {"type": "message", "message": {"role": "user", "content": "u"}}
    compaction = {"type": "compaction", "summary": "S", "tokensBefore": 5,
                  "firstKeptEntryIndex": 4}
    lines = _v1(user, b"", b"{broken", {"type": "session", "id": "s"}, user, user, compaction)
    session = read_session(_write(tmp_path, *lines))
    kept = session.entries[-1].raw
    # Parsed values: 0 header, 1 user (line 2), 2 repeated header, 3 user (line 6), 4 user (7).
    assert kept["firstKeptEntryId"] == migrated_id(7)
    assert "firstKeptEntryIndex" not in kept
    assert [e.parent_id for e in session.entries] == [None, "L2", "L6", "L7"]


@pytest.mark.parametrize(
    ("index", "expected"),
    [(0, None), (2, None), (99, None), (-1, None), (1.5, None), (3.0, "L4"), ("3", None),
     (4, "L5"), (5, "own")],
    ids=["header", "repeated-header", "past-end", "negative", "fraction", "float", "string",
         "itself", "later"],
)
def test_v1_first_kept_entry_index_edge_cases(
    tmp_path: Path, index: object, expected: str | None
) -> None:
    """Pi's rules: a header or no such value leaves firstKeptEntryId unset; the compaction
    itself has its new id; a later entry gives its own ``id`` field (it has no new id yet);
    a non-number index is left alone."""
    user = {"type": "message", "message": {"role": "user", "content": "u"}}
    compaction = {"type": "compaction", "summary": "S", "tokensBefore": 5,
                  "firstKeptEntryIndex": index}
    later = {**user, "id": "own"}
    session = read_session(_write(tmp_path, *_v1(user, {"type": "session", "id": "s"}, user,
                                                 compaction, later)))
    raw = session.entries[2].raw
    assert raw.get("firstKeptEntryId") == expected
    assert ("firstKeptEntryIndex" in raw) == isinstance(index, str)


def test_v2_hook_message_becomes_custom(tmp_path: Path) -> None:
    """Pi's v2→v3 step renames the hookMessage role to custom (v1 files go through it too)."""
    hook = {"role": "hookMessage", "customType": "x", "content": "c", "display": True}
    v2 = {**V3, "version": 2}
    session = read_session(_write(tmp_path, v2, {"type": "message", "id": "a", "parentId": None,
                                                 "message": hook}))
    assert session.entries[0].role == "custom" and session.entries[0].migrated
    assert read_session(_write(tmp_path, V3, {"type": "message", "id": "a", "parentId": None,
                                              "message": hook})).entries[0].role == "hookMessage"


def test_v1_number_line_is_skipped(tmp_path: Path) -> None:
    """Pi cannot migrate a v1 file holding a number line (it throws); we skip and report it."""
    user = {"type": "message", "message": {"role": "user", "content": "u"}}
    session = read_session(_write(tmp_path, *_v1(user, b"7", user)))
    assert [e.id for e in session.entries] == ["L2", "L4"]
    assert session.entries[1].parent_id == "L2"
    assert [(p.line, p.reason) for p in session.malformed] == [
        (3, "v1 entry is not a JSON object; skipped")]


@pytest.mark.parametrize(
    ("line", "kept"),
    [(b'{"a":1}{"b":2}', 2), (b'{"a":"}{"} {"b":"\xc3\xa9"}', 2), (b'{"a":1}{"b":', 1),
     (b'{"a":1}[1]{"c":3}', 1), (b"{" * 3, 0), (b'{"a":1}' * 100, 64)],
    ids=["two", "braces-in-strings", "torn-second", "array-second", "torn", "many"],
)
def test_glued_lines_are_split_into_complete_objects(
    tmp_path: Path, line: bytes, kept: int
) -> None:
    """A malformed line holding complete objects back to back is skipped as Pi does, and
    its complete objects (at most 64) are kept aside for the memory index."""
    session = read_session(_write(tmp_path, V3, _message("a", None, "x"), line,
                                  _message("b", "a", "y")))
    assert [e.id for e in session.entries] == ["a", "b"]
    assert [p.line for p in session.malformed] == [3]
    assert [(g.line, len(g.objects)) for g in session.glued] == ([(3, kept)] if kept else [])
    if kept:
        assert "a" in session.glued[0].objects[0]
