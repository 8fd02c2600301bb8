"""expand: exact addresses back to verbatim source, bounded pages, and every error code."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest

from fabric_memory.compaction import Compaction, compact_session
from fabric_memory.errors import ExpandError, UsageError
from fabric_memory.memory.expand import (
    MAX_CHARS,
    MAX_ENTRIES,
    MAX_SELECTORS,
    expand,
    expand_request,
)
from fabric_memory.memory.normalize import normalize_session, phase_record, record_text
from fabric_memory.memory.recall import recall
from fabric_memory.memory.reindex import reindex
from fabric_memory.memory.render import render_expand
from fabric_memory.session import iter_session_files, read_line, read_session
from fabric_memory.sources import read_source
from fabric_memory.trace import read_fabric_result

from .conftest import FIXTURES
from .memory_builder import MemoryCorpus, SessionBuilder, operation


def _expected(path: Path) -> dict[str, str]:
    """Address → text, from a fresh read and normalization of the file."""
    session = read_session(path)
    texts: dict[str, str] = {}
    for item in normalize_session(session).items:
        if item.record is not None:
            texts[item.address] = record_text(item.record)
        else:
            texts[item.address] = read_line(str(path), session.by_id[item.entry_id]).decode()
    for entry in session.entries:
        fabric = read_fabric_result(entry.id, entry.message) if entry.message else None
        if fabric is not None and fabric.verdict == "valid":
            for phase in fabric.phases:
                texts[phase.address] = record_text(phase_record(entry.id, phase))
    return texts


def _expand_all(corpus: MemoryCorpus, session: str, addresses: list[str]) -> tuple[
        dict[str, str], set[str]]:
    """Expand in batches of at most 100 selectors, following next, joining text chunks."""
    texts: dict[str, str] = {}
    hashes: set[str] = set()
    for start in range(0, len(addresses), MAX_SELECTORS):
        request: dict[str, Any] | None = {
            "session": session, "addresses": addresses[start : start + MAX_SELECTORS],
            "index": str(corpus.index), "sessions": str(corpus.sessions), "maxEntries": 20,
            "raw": True}
        while request is not None:
            page = expand_request(request)
            hashes.add(page["sourceHash"])
            for entry in page["entries"]:
                texts[entry["address"]] = texts.get(entry["address"], "") + entry["text"]
            request = dict(page["next"]) if page["next"] is not None else None
    return texts, hashes


def _sessions(corpus: MemoryCorpus) -> list[Path]:
    found = []
    for path in iter_session_files(corpus.sessions):
        try:
            read_session(path)
        except Exception:
            continue
        found.append(path)
    return found


def test_every_address_expands_to_a_fresh_normalization(memory_corpus: MemoryCorpus) -> None:
    """Each entry, operation and phase address of every session equals its fresh text."""
    checked = 0
    for path in _sessions(memory_corpus):
        expected = _expected(path)
        got, hashes = _expand_all(memory_corpus, str(path), list(expected))
        assert got == expected, path
        assert hashes == {read_session(path).source_hash}
        checked += len(expected)
    assert checked > 8000


def test_selectors_by_index_range_and_anchor(memory_corpus: MemoryCorpus) -> None:
    """Positions, ranges and anchors select entries in file order (0-based, inclusive)."""
    path = next(p for p in _sessions(memory_corpus) if "019b92ac" in p.name)
    session = read_session(path)
    ids = [e.id for e in session.entries]
    common = {"index": memory_corpus.index, "sessions": memory_corpus.sessions}
    page = expand(str(path), indices=[3, 0], **common)
    assert [e["entryId"] for e in page["entries"]] == [ids[3], ids[0]]
    page = expand(str(path), positions="2:5", **common)
    assert [e["entryId"] for e in page["entries"]] == ids[2:6]
    page = expand(session.session_id, anchor=ids[10], before=2, after=1, raw=True, **common)
    assert [e["entryId"] for e in page["entries"]] == ids[8:12]
    assert page["entries"][0]["text"] == read_line(str(path), session.entries[8]).decode()


def test_pages_follow_next_through_entries_and_long_texts(memory_corpus: MemoryCorpus) -> None:
    """Small pages split long lines by textOffset; next pins the first page's sourceHash."""
    path = next(p for p in _sessions(memory_corpus) if "019b92ac" in p.name)
    session = read_session(path)
    common = {"index": str(memory_corpus.index), "sessions": str(memory_corpus.sessions)}
    request: dict[str, Any] | None = {"session": str(path), "positions": "0:11",
                                      "maxEntries": 3, "maxChars": 500, "raw": True, **common}
    joined: dict[int, str] = {}
    pages = 0
    while request is not None:
        page = expand_request(request)
        pages += 1
        assert sum(len(e["text"]) for e in page["entries"]) <= 500
        assert len(page["entries"]) <= 3
        for entry in page["entries"]:
            joined[entry["index"]] = joined.get(entry["index"], "") + entry["text"]
        if page["next"] is not None:
            assert page["next"]["expectedSourceHash"] == session.source_hash
        request = dict(page["next"]) if page["next"] is not None else None
    assert joined == {i: read_line(str(path), e).decode()
                      for i, e in enumerate(session.entries[:12])}
    assert pages > 4


def test_more_than_100_selectors_is_a_clear_error(memory_corpus: MemoryCorpus) -> None:
    """101 selectors are refused with a message that says how to split them."""
    with pytest.raises(UsageError, match="at most 100"):
        expand("x", entries=[f"e{i}" for i in range(101)], index=memory_corpus.index)


@pytest.fixture
def small(tmp_path: Path) -> dict[str, Any]:
    """A fresh indexed root with one small session holding a valid trace."""
    builder = SessionBuilder(tmp_path / "sessions" / "--repo--" / "one.jsonl")
    builder.user("find the parser bug")
    builder.assistant_call("c1", "fabric_exec", {"code": "x"})
    entry = builder.fabric_result("c1", [operation(0, "pi.read", {"path": "src/p.ts"})])
    builder.user("thanks")
    path = builder.write()
    common = {"index": tmp_path / "index", "sessions": tmp_path / "sessions"}
    reindex(**common, workers=1)
    return {"builder": builder, "path": path, "entry": entry, "common": common,
            "tmp": tmp_path}


def _code(call: Any) -> str:
    with pytest.raises(ExpandError) as caught:
        call()
    return caught.value.code


def test_append_makes_old_pointer_stale_and_reindex_refreshes(small: dict[str, Any]) -> None:
    """After an append the old follow fails stale_pointer; after reindex a new one works."""
    common = small["common"]
    hit = recall("parser", **common)["hits"][0]
    assert expand_request(hit["follow"])["entries"][0]["entryId"] == hit["entryId"]
    small["builder"].append("one more thing")
    assert _code(lambda: expand_request(hit["follow"])) == "stale_pointer"
    reindex(**common, workers=1)
    fresh = recall("parser", **common)["hits"][0]
    assert fresh["follow"]["expectedSourceHash"] != hit["follow"]["expectedSourceHash"]
    assert expand_request(fresh["follow"])["entries"][0]["entryId"] == hit["entryId"]
    assert _code(lambda: expand_request(hit["follow"])) == "stale_pointer"


def test_changed_file_without_expectations_is_read_from_source(small: dict[str, Any]) -> None:
    """An appended (not yet reindexed) file is parsed directly, so new entries expand."""
    new_id = small["builder"].user("fresh line")
    with open(small["path"], "ab") as stream:
        stream.write(small["builder"].lines[-1] + b"\n")
    page = expand(str(small["path"]), entries=[new_id], **small["common"])
    assert "fresh line" in page["entries"][0]["text"]
    assert page["sourceHash"] == read_session(small["path"]).source_hash


def test_every_error_code(small: dict[str, Any]) -> None:
    """Each expand error code (docs/errors.md#expand) is raised by the situation it names."""
    common, path, entry = small["common"], str(small["path"]), small["entry"]
    assert _code(lambda: expand(path, entries=["nope"], **common)) == "address_not_found"
    assert _code(lambda: expand(path, addresses=[f"{entry}/9"], **common)) == "address_not_found"
    assert _code(lambda: expand(path, indices=[99], **common)) == "index_out_of_bounds"
    assert _code(lambda: expand(path, range="0:99", **common)) == "index_out_of_bounds"
    assert _code(lambda: expand(path, indices=[0], entry_offset=5, **common)) == (
        "index_out_of_bounds")
    assert _code(lambda: expand(path, indices=[0], text_offset=10**6, **common)) == (
        "text_offset_out_of_bounds")
    assert _code(lambda: expand("no-such-id", indices=[0], **common)) == "session_not_found"
    assert _code(lambda: expand(path, indices=[0], expected_source_hash="0" * 32,
                                **common)) == "stale_pointer"
    assert _code(lambda: expand(path, indices=[0], expected_lineage_fingerprint="0" * 32,
                                **common)) == "stale_pointer"
    twin = small["tmp"] / "sessions" / "--repo--" / "twin.jsonl"
    shutil.copy(path, twin)
    reindex(**common, workers=1)
    session_id = small["builder"].session_id
    assert _code(lambda: expand(session_id, indices=[0], **common)) == "ambiguous_session"
    twin.unlink()
    assert _code(lambda: expand(str(twin), indices=[0], **common)) == "source_unavailable"
    from fabric_memory.memory.forget import Selection, forget

    forget(Selection((path,)), **common)
    assert _code(lambda: expand(path, indices=[0], **common)) == "session_forgotten"
    assert _code(lambda: expand(session_id, indices=[0], **common)) == "session_forgotten"


def test_duplicate_ids_are_ambiguous_addresses(tmp_path: Path) -> None:
    """An id that two entries share cannot be expanded by id, only by index."""
    builder = SessionBuilder(tmp_path / "sessions" / "dup.jsonl")
    first = builder.user("one")
    builder.user("two")
    builder.lines[-1] = builder.lines[-1].replace(b'"e002"', f'"{first}"'.encode(), 1)
    path = builder.write()
    common = {"index": tmp_path / "index", "sessions": tmp_path / "sessions"}
    report = reindex(**common, workers=1)
    assert report["incomplete"] == [{"path": str(path), "reason": "duplicate entry ids"}]
    assert _code(lambda: expand(str(path), entries=[first], **common)) == "ambiguous_address"
    assert "two" in expand(str(path), indices=[1], **common)["entries"][0]["text"]


# --- text for a reader, summary addresses, neighbours, clamps (fixtures/pi-mono-real) ---

def _lines(name: str) -> list[bytes]:
    return (FIXTURES / "pi-mono-real" / name).read_bytes().split(b"\n")


def _edit_with_thinking() -> tuple[str, int, dict[str, Any]]:
    """(file, line, entry) of the first real assistant entry that thinks (with a signature),
    reports usage and cost, and edits a file."""
    for path in sorted((FIXTURES / "pi-mono-real").glob("*.jsonl")):
        for number, line in enumerate(path.read_bytes().split(b"\n"), 1):
            if b'"thinkingSignature"' not in line or b'"newText"' not in line:
                continue
            entry = orjson.loads(line)
            blocks = entry["message"]["content"]
            if ("usage" in entry["message"] and any(
                    b.get("type") == "toolCall" and b["name"] == "edit" for b in blocks)):
                return path.name, number, entry
    raise AssertionError("no assistant entry with thinking and an edit in the fixtures")


def test_default_text_reads_as_text(pi_mono: dict[str, Path]) -> None:
    """An assistant entry comes back as its address, role, time, thinking and each edit call
    with its path and new text, without signatures, usage or cost."""
    name, number, entry = _edit_with_thinking()
    page = expand(name, addresses=[f"L{number}"], max_chars=MAX_CHARS, **pi_mono)
    text = page["entries"][0]["text"]
    assert page["entries"][0]["complete"]
    assert text.split("\n", 1)[0] == f"L{number} assistant {entry['timestamp']}"
    blocks = entry["message"]["content"]
    for block in blocks:
        if block["type"] == "thinking":
            assert block["thinking"].split("\n")[0] in text
            assert block["thinkingSignature"][:40] not in text
        if block["type"] == "toolCall" and block["name"] == "edit":
            assert f'call edit(path="{block["arguments"]["path"]}"' in text
            assert all(line in text for line in block["arguments"]["newText"].split("\n"))
    for noise in ("thinkingSignature", "usage", "cost", "cacheRead", "stopReason", '"type"'):
        assert noise not in text


@pytest.mark.parametrize("name", ["compact.jsonl", "large-session.jsonl"])
def test_raw_is_the_files_line_byte_for_byte(pi_mono: dict[str, Path], name: str) -> None:
    """raw returns each entry's source line exactly as the file holds it (no secret in these
    files is masked: they hold none), through every page."""
    session = read_session(pi_mono["sessions"] / name)
    lines = _lines(name)
    joined: dict[str, str] = {}
    request: dict[str, Any] | None = {
        "session": name, "positions": f"0:{len(session.entries) - 1}", "raw": True,
        "maxEntries": 20, "showSecrets": True, **{k: str(v) for k, v in pi_mono.items()}}
    while request is not None:
        page = expand_request(request)
        for item in page["entries"]:
            joined[item["entryId"]] = joined.get(item["entryId"], "") + item["text"]
        request = dict(page["next"]) if page["next"] is not None else None
    assert {entry_id: text.encode() for entry_id, text in joined.items()} == {
        entry.id: lines[entry.line - 1] for entry in session.entries}


_SPAN = re.compile(r"\[(L\d+)(?: \.\.\. (L\d+))?\]")


@pytest.mark.parametrize("name", ["before-compaction.jsonl", "compact.jsonl",
                                  "large-session.jsonl"])
def test_summary_addresses_expand_to_the_entries_they_name(
    pi_mono: dict[str, Path], name: str
) -> None:
    """Every [L12 ... L31] our compactor prints on a real session, given as range "L12:L31",
    selects exactly the entries from L12 to L31, the same as the position range it names;
    every [L12] expands as an address."""
    path = pi_mono["sessions"] / name
    outcome = compact_session(path).outcome
    assert isinstance(outcome, Compaction)
    spans = set(_SPAN.findall(outcome.summary))
    assert len(spans) >= 5
    session = read_session(path)
    position = {entry.id: at for at, entry in enumerate(session.entries)}
    for first, last in sorted(spans):
        if not last:
            page = expand(name, addresses=[first], max_entries=1, max_chars=1, **pi_mono)
            assert page["entries"][0]["entryId"] == first
            continue
        low, high = position[first], position[last]
        page = expand(name, range=f"{first}:{last}", max_chars=1, **pi_mono)
        by_position = expand(name, positions=f"{low}:{high}", max_chars=1, **pi_mono)
        assert page["selected"] == high - low + 1 == by_position["selected"]
        assert page["entries"][0]["entryId"] == first
        assert page["entries"] == by_position["entries"]
        spelled = expand(name, range=f"{first} ... {last}", max_chars=1, **pi_mono)
        assert spelled["selected"] == page["selected"]


def test_neighbours_around_an_address(pi_mono: dict[str, Path]) -> None:
    """address L20 with before 2 and after 3 is L18..L23 in order; overlapping windows show
    each entry once."""
    page = expand("compact.jsonl", addresses=["L20"], before=2, after=3, max_chars=MAX_CHARS,
                  **pi_mono)
    assert [e["address"] for e in page["entries"]] == ["L18", "L19", "L20", "L21", "L22", "L23"]
    page = expand("compact.jsonl", addresses=["L20", "L22"], before=1, after=1,
                  max_chars=MAX_CHARS, **pi_mono)
    assert [e["address"] for e in page["entries"]] == ["L19", "L20", "L21", "L22", "L23"]
    assert page["next"] is None


def test_neighbours_around_an_operation(small: dict[str, Any]) -> None:
    """An operation address with neighbours is the operation amid its entry's neighbours
    (not the whole entry again)."""
    entry = small["entry"]
    page = expand(str(small["path"]), addresses=[f"{entry}/0"], before=1, after=1,
                  **small["common"])
    assert [(e["kind"], e["index"]) for e in page["entries"]] == [
        ("entry", 1), ("operation", 2), ("entry", 3)]
    assert page["entries"][1]["text"].startswith(f"{entry}/0 operation pi.read succeeded\n")


def test_limits_above_their_maximum_are_clamped_with_a_note(pi_mono: dict[str, Path]) -> None:
    """maxChars 100000 and maxEntries 500 answer with the maximum and say so; below the minimum
    or not a number stays a usage error."""
    page = expand("compact.jsonl", positions="0:400", max_chars=100_000, max_entries=500,
                  **pi_mono)
    assert page["clamped"] == {"maxEntries": [500, MAX_ENTRIES], "maxChars": [100_000, MAX_CHARS]}
    assert page["next"] is not None
    assert (page["next"]["maxChars"], page["next"]["maxEntries"]) == (MAX_CHARS, MAX_ENTRIES)
    assert "clamped" not in expand_request(page["next"])
    with pytest.raises(UsageError, match="--max-chars 0: must be between 1 and 24000"):
        expand("compact.jsonl", positions="0:1", max_chars=0, **pi_mono)
    with pytest.raises(UsageError, match=r'\$\.maxEntries: expected an integer, got "ten"'):
        expand_request({"session": "compact.jsonl", "positions": "0:1", "maxEntries": "ten",
                        **{k: str(v) for k, v in pi_mono.items()}})


def _whole(request: dict[str, Any]) -> str:
    """The text a call reads, following its ``next`` pages to the end (joined)."""
    text = ""
    following: dict[str, Any] | None = request
    while following is not None:
        page = expand_request(following)
        assert len(page["entries"]) == 1  # one address: its text only, page after page
        text += page["entries"][0]["text"]
        following = dict(page["next"]) if page["next"] is not None else None
    return text


def _read_on(entry: dict[str, Any]) -> str:
    """An entry of a range read whole: its head, then its ``rest`` call's pages (exactly what
    the cut says to call)."""
    if "rest" not in entry:
        return str(entry["text"])
    assert entry["rest"]["textOffset"] == entry["textOffset"] + len(entry["text"])
    return str(entry["text"]) + _whole(dict(entry["rest"]))


def test_range_pages_show_each_entry_once_and_cut_entries_read_on(
    pi_mono: dict[str, Path],
) -> None:
    """A range at 700 characters a page shows each entry once, in order, never split across
    pages; a long entry shows its head and tail, and its rest call read page after page joins
    with the head to the entry's whole text (as one address reads it)."""
    common = {k: str(v) for k, v in pi_mono.items()}
    request: dict[str, Any] | None = {"session": "compact.jsonl", "range": "L12:L40",
                                      "maxChars": 700, **common}
    shown: list[dict[str, Any]] = []
    while request is not None:
        page = expand_request(request)
        assert page["selected"] == 29 and page["entryOffset"] == len(shown)
        assert len(page["entries"]) == 1 or sum(
            len(e["text"]) + len(e.get("tail", "")) for e in page["entries"]) <= 700
        shown.extend(page["entries"])
        request = dict(page["next"]) if page["next"] is not None else None
    assert [e["address"] for e in shown] == [f"L{n}" for n in range(12, 41)]
    cut = [e for e in shown if "rest" in e]
    assert len(cut) >= 3
    for entry in shown:
        whole = _whole({"session": "compact.jsonl", "addresses": [entry["address"]],
                        "maxChars": 500, **common})
        assert _read_on(entry) == whole
        if "tail" in entry:
            assert whole.endswith(entry["tail"]) and len(whole) == entry["textLength"]
            assert entry["tailOffset"] == len(whole) - len(entry["tail"])


def test_summary_turn_ranges_fit_one_call_and_cut_entries_read_on(
    pi_mono: dict[str, Path],
) -> None:
    """Every turn range the summaries of the four pi-mono files print (compacted with the
    compactor at each of their cuts) is expanded at the default bounds: at least 90% fit one
    call, and each entry cut short reads on to its whole text by its rest call."""
    from bench.handoff import DEV_SET, cuts

    common = {k: str(v) for k, v in pi_mono.items()}
    section = re.compile(r"^## Earlier turns.*?\n(.*?)(?:^## |\Z)", re.MULTILINE | re.DOTALL)
    turn = re.compile(r"^- \[(\S+)(?: \.\.\. (\S+))?\]", re.MULTILINE)
    ranges = {(path.name, m.group(1), m.group(2) or m.group(1))
              for path in sorted(DEV_SET.glob("*.jsonl")) for cut in cuts(path.name)
              for found in section.finditer(cut.ours) for m in turn.finditer(found.group(1))}
    assert len(ranges) > 100
    fit = 0
    for name, first, last in sorted(ranges):
        page = expand_request({"session": name, "range": f"{first}:{last}", **common})
        fit += page["next"] is None
        for entry in page["entries"]:
            if "rest" in entry:
                assert _read_on(entry) == _whole({"session": name,
                                                  "addresses": [entry["address"]], **common})
    assert fit >= 0.9 * len(ranges), f"{fit} of {len(ranges)} turn ranges fit one call"


def test_kinds_keep_only_those_entries_and_say_how_many_were_left_out(
    pi_mono: dict[str, Path],
) -> None:
    """kinds user,edit keeps the user's messages and the edits (calls and results) of a range,
    counts the rest as filtered, carries the filter to the next page; an unknown kind is a
    usage error naming the kinds."""
    common = {k: str(v) for k, v in pi_mono.items()}
    everything = expand_request({"session": "large-session.jsonl", "range": "L70:L230",
                                 "maxChars": MAX_CHARS, "entryChars": 100, **common})
    page = expand_request({"session": "large-session.jsonl", "range": "L70:L230",
                           "kinds": ["user", "edit"], "maxChars": 2_000, "entryChars": 100,
                           **common})
    heads = [e["text"].split("\n", 1)[0] for e in page["entries"]]
    assert heads and all(" user " in head or " assistant " in head or " toolResult edit" in head
                         or " toolResult write" in head for head in heads)
    for entry in page["entries"]:
        if " assistant " in entry["text"].split("\n", 1)[0]:
            whole = _whole({"session": "large-session.jsonl",
                            "addresses": [entry["address"]], **common})
            assert "call edit(" in whole or "call write(" in whole
    assert page["filtered"] == 161 - page["selected"] > 0
    assert everything["selected"] == 161 and "filtered" not in everything
    assert page["next"] is not None and page["next"]["kinds"] == ["edit", "user"]
    following = expand_request(page["next"])
    assert following["selected"] == page["selected"]
    assert following["entryOffset"] == len(page["entries"])
    with pytest.raises(UsageError, match=r"--kinds \"bogus\": use any of user, assistant, tool"):
        expand("large-session.jsonl", range="L70:L80", kinds=["user,bogus"], **pi_mono)


def test_bad_address_ranges_are_located_errors(pi_mono: dict[str, Path]) -> None:
    """A range naming a missing address, or running backwards, fails in one line that names it."""
    with pytest.raises(ExpandError, match='no address "L99999" in session') as caught:
        expand("compact.jsonl", range="L12:L99999", **pi_mono)
    assert caught.value.code == "address_not_found"
    with pytest.raises(UsageError, match="L31 comes after L12"):
        expand("compact.jsonl", range="L31:L12", **pi_mono)
    with pytest.raises(UsageError, match="use FIRST:LAST entry addresses"):
        expand("compact.jsonl", range="L12", **pi_mono)


def test_objects_salvaged_from_glued_lines_read_as_text(tmp_path: Path) -> None:
    """Each object salvaged from a glued line reads as itself (not as the other object of its
    line, never a crash), its head line naming its own id, role or type, and time."""
    source = FIXTURES / "pi-1.6.0-realworld" / "sessions" / "v3-glued-lines.jsonl"
    path = tmp_path / "sessions" / "--legacy-app--" / source.name
    path.parent.mkdir(parents=True)
    path.write_bytes(source.read_bytes())
    roots = {"sessions": tmp_path / "sessions", "index": tmp_path / "index"}
    reindex(**roots, workers=1)
    session = read_session(path)
    salvaged = [value for glued in session.glued for value in glued.objects]
    first = len(session.entries)
    page = expand(str(path), positions=f"{first}:{first + len(salvaged) - 1}",
                  max_chars=MAX_CHARS, **roots)
    assert [e["entryId"] for e in page["entries"]] == [value["id"] for value in salvaged]
    for item, value in zip(page["entries"], salvaged, strict=True):
        kind = value["message"]["role"] if value["type"] == "message" else value["type"]
        head = item["text"].split("\n", 1)[0]
        assert head.startswith(f"{value['id']} {kind} ") and head.endswith(value["timestamp"])


def _claude_with_bookkeeping(root: Path) -> tuple[Path, str, list[str]]:
    """A Claude Code transcript under ``root`` whose lines 3 and 6 are bookkeeping (no entry),
    and the uuids of its conversation lines in order."""
    from .transcripts import ClaudeTranscript

    t = ClaudeTranscript()
    uuids = [t.user("Start the export service on port 8443.")]
    uuids.append(t.assistant("Starting it."))
    t._add("progress", {"data": {"type": "hook_progress"}})
    uuids.append(t.user("Use TLS 1.3 only."))
    uuids.append(t.assistant("Done: TLS 1.3."))
    t._add("progress", {"data": {"type": "hook_progress"}})
    uuids.append(t.user("Thanks."))
    folder = root / "-home-dev-projects-ledger"
    folder.mkdir(parents=True)
    return t.write(folder / f"{t.session_id}.jsonl"), t.session_id, uuids


def _claude_lines(path: Path) -> dict[str, int]:
    """Each conversation line's uuid → its line number."""
    return {orjson.loads(line)["uuid"]: n for n, line in
            enumerate(path.read_bytes().split(b"\n"), 1)
            if line.strip() and orjson.loads(line)["type"] != "progress"}


@pytest.mark.parametrize("indexed", [False, True], ids=["unindexed", "indexed"])
def test_a_line_address_names_a_claude_code_entry(tmp_path: Path, indexed: bool) -> None:
    """`L<line>` selects the Claude Code entry on that line (its own id is a UUID), with or
    without an index, and an address of a line that holds no entry is not found."""
    path, session, uuids = _claude_with_bookkeeping(tmp_path / "claude")
    common = {"index": tmp_path / "index", "sessions": tmp_path / "claude"}
    if indexed:
        reindex(**common, workers=1)
    number = _claude_lines(path)[uuids[2]]
    page = expand(session, addresses=[f"L{number}"], **common)
    assert [entry["address"] for entry in page["entries"]] == [uuids[2]]
    assert "TLS 1.3 only" in page["entries"][0]["text"]
    with pytest.raises(ExpandError, match=f'no address "L{number - 1}"'):
        expand(session, addresses=[f"L{number - 1}"], **common)  # the progress line


def test_a_range_end_between_entries_snaps_and_says_so(tmp_path: Path) -> None:
    """A range whose start or end is a line between entries moves to the nearest entry
    inside the range and the page says so (the CLI prints it as a note); past the last
    entry it is still not found."""
    path, session, uuids = _claude_with_bookkeeping(tmp_path / "claude")
    common = {"index": tmp_path / "index", "sessions": tmp_path / "claude"}
    at = _claude_lines(path)
    gaps = [n for n in range(at[uuids[0]], at[uuids[-1]]) if n not in at.values()]
    assert len(gaps) == 2
    page = expand(session, range=f"L{gaps[0]}:L{gaps[1]}", **common)
    assert [entry["address"] for entry in page["entries"]] == uuids[2:4]
    assert page["snapped"] == [
        f"--range first L{gaps[0]} names no entry; moved to the next entry, {uuids[2]} "
        f"(line {at[uuids[2]]})",
        f"--range last L{gaps[1]} names no entry; moved to the previous entry, {uuids[3]} "
        f"(line {at[uuids[3]]})"]
    assert "note: --range first" in render_expand(page)
    whole = expand(session, range=f"L{at[uuids[0]]}:L{at[uuids[-1]]}", **common)
    assert "snapped" not in whole and len(whole["entries"]) == len(uuids)
    with pytest.raises(ExpandError, match='no address "L999"'):
        expand(session, range=f"L{gaps[0]}:L999", **common)


def test_line_addresses_and_snapping_through_mcp_and_pi(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The MCP `expand` tool (a real `fabric-memory serve`) and Pi's `memory_expand` take a
    Claude Code line address and a range ending between entries as the CLI does, and their
    text says where the range moved."""
    from fabric_memory.pi.tools import call_tool

    from .agent_homes import mcp_answers

    path, session, uuids = _claude_with_bookkeeping(tmp_path / "claude")
    at = _claude_lines(path)
    gap = next(n for n in range(at[uuids[0]], at[uuids[-1]]) if n not in at.values())
    monkeypatch.setenv("FABRIC_MEMORY_SESSIONS", str(tmp_path / "claude"))
    monkeypatch.setenv("FABRIC_MEMORY_HOME", str(tmp_path / "home"))
    request = {"session": session, "range": f"L{at[uuids[0]]}:L{gap}"}
    pi = call_tool("memory_expand", request)
    (mcp,) = mcp_answers([("expand", request)])
    for page in (pi["details"], mcp):
        assert [entry["address"] for entry in page["entries"]] == uuids[:2]
        assert page["snapped"][0].startswith(f"--range last L{gap} names no entry")
    assert f"note: --range last L{gap} names no entry" in pi["text"]
    line = call_tool("memory_expand", {"session": session, "addresses": [f"L{at[uuids[2]]}"]})
    assert [entry["address"] for entry in line["details"]["entries"]] == [uuids[2]]


def test_no_line_address_for_an_agent_whose_lines_move(tmp_path: Path) -> None:
    """Gemini CLI's JSON Lines record a message again further on (its lines are no stable
    address): `L<line>` names nothing there, and a range of line addresses does not snap."""
    source = FIXTURES / "agents" / "gemini" / "authored" / "session-2026-03-03T10-00-0b9e8d7c.jsonl"
    folder = tmp_path / "gemini" / "tmp" / "4c1b7e0d" / "chats"
    folder.mkdir(parents=True)
    copy = folder / source.name
    shutil.copy(source, copy)
    session = read_source(copy)
    assert session.agent == "gemini"
    common = {"index": tmp_path / "index", "sessions": tmp_path / "gemini"}
    reindex(**common, workers=1)
    with pytest.raises(ExpandError, match='no address "L2"'):
        expand(session.session_id, addresses=["L2"], **common)
    with pytest.raises(ExpandError, match='no address "L2"'):
        expand(session.session_id, range="L2:L3", **common)
