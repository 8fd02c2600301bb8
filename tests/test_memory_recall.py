"""recall: lexical and structural search over the indexed corpus, with follow and paging."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from fabric_memory.cli import main
from fabric_memory.errors import QueryError, UsageError
from fabric_memory.memory.expand import expand, expand_request
from fabric_memory.memory.recall import MAX_RESPONSE_CHARS, recall, recall_request
from fabric_memory.memory.reindex import reindex

from .corpus import corpus_index, corpus_json
from .memory_builder import (
    HOT_SESSIONS,
    SECRETS,
    UNICODE_FACT,
    UNICODE_WORD,
    VISIBLE,
    MemoryCorpus,
    SessionBuilder,
)


def _truth() -> list[dict[str, Any]]:
    index = corpus_index()
    return [corpus_json(f["truth"])
            for f in index["files"] if f.get("entryCount")]


TRUTH = _truth()
# The corpus copy gets each file's name stamp as mtime, so the newest names are hot.
NEWEST = sorted((t["file"] for t in TRUTH), key=lambda f: f.rsplit("/", 1)[-1], reverse=True)
COLD_FACTS = [(t["file"], f) for t in TRUTH for f in t["rareFacts"]
              if t["file"] not in NEWEST[:HOT_SESSIONS]]


def _recall(corpus: MemoryCorpus, query: str = "", **options: Any) -> Any:
    options.setdefault("hot_sessions", HOT_SESSIONS)
    return recall(query, index=corpus.index, sessions=corpus.sessions, **options)


def _all_pages(corpus: MemoryCorpus, query: str = "", **options: Any) -> list[dict[str, Any]]:
    response = _recall(corpus, query, **options)
    hits = list(response["hits"])
    while response["next"] is not None:
        response = recall_request(response["next"])
        hits.extend(response["hits"])
    return hits


@pytest.mark.parametrize("fact", COLD_FACTS[::3], ids=[f["fact"] for _, f in COLD_FACTS[::3]])
def test_rare_fact_is_recalled_from_a_cold_session(
    memory_corpus: MemoryCorpus, fact: tuple[str, dict[str, Any]]
) -> None:
    """A planted ASCII fact is found by phrase, in a cold session, and its follow hydrates it."""
    _, planted = fact
    response = _recall(memory_corpus, planted["fact"], mode="phrase")
    entries = {hit["entryId"]: hit for hit in response["hits"]}
    assert planted["entryId"] in entries
    hit = entries[planted["entryId"]]
    assert hit["tier"] == "cold"
    page = expand_request(hit["follow"])
    assert planted["fact"] in page["entries"][0]["text"]
    assert page["sourceHash"] == hit["follow"]["expectedSourceHash"]


def test_unicode_fact_is_recalled_exactly(memory_corpus: MemoryCorpus) -> None:
    """A Unicode word (no ASCII folding) finds the one planted entry, from a cold session;
    a CJK word is its character pairs, so every pair holds only there, and a shorter word
    inside it finds it too."""
    response = _recall(memory_corpus, UNICODE_WORD, match="all")
    assert response["total"] == 1
    hit = response["hits"][0]
    assert hit["path"] == str(memory_corpus.unicode_session)
    assert hit["tier"] == "cold"
    assert UNICODE_FACT in expand_request(hit["follow"])["entries"][0]["text"]
    loose = _recall(memory_corpus, UNICODE_WORD)
    assert loose["allWords"] == 1
    assert loose["hits"][0]["address"] == hit["address"]
    assert _recall(memory_corpus, "ФАКТ Ω 東京タワー", mode="phrase")["total"] == 1
    assert _recall(memory_corpus, "京タワ", match="all")["hits"][0]["address"] == hit["address"]


def test_structural_selection_then_hydration(memory_corpus: MemoryCorpus) -> None:
    """--ref pi.grep --outcome failed selects exactly Pi's failed grep operations, hydrated."""
    expected = {op["address"] for t in TRUTH for f in t["fabric"] if f["traceValid"]
                for op in f["operations"] if op["ref"] == "pi.grep" and op["outcome"] == "failed"}
    hits = _all_pages(memory_corpus, ref="pi.grep", outcome="failed", limit=50)
    assert {hit["address"] for hit in hits} == expected
    assert {(h["kind"], h["ref"], h["outcome"]) for h in hits} == {
        ("operation", "pi.grep", "failed")}
    cold = next(hit for hit in hits if hit["tier"] == "cold")
    page = expand_request({**cold["follow"], "raw": True})
    record = orjson.loads(page["entries"][0]["text"])
    assert (record["address"], record["ref"], record["outcome"]) == (
        cold["address"], "pi.grep", "failed")
    assert cold["follow"]["expectedLineageFingerprint"] == page["lineageFingerprint"]


def test_nonexistent_ref_returns_zero_hits(memory_corpus: MemoryCorpus) -> None:
    """An exact ref that no trace holds matches nothing (no prefix or fuzzy matching)."""
    assert _recall(memory_corpus, ref="pi.grepx")["total"] == 0
    assert _recall(memory_corpus, ref="pi.gre")["total"] == 0
    assert _recall(memory_corpus, ref="pi.grep")["total"] > 0


def test_secret_in_audits_or_outer_output_is_never_found(memory_corpus: MemoryCorpus) -> None:
    """No query mode finds words that live only in audits, outer output, code or results."""
    assert _recall(memory_corpus, VISIBLE)["total"] == 1
    for secret in SECRETS.values():
        for mode in ("literal", "phrase"):
            assert _recall(memory_corpus, secret, mode=mode)["total"] == 0, (secret, mode)
        assert _recall(memory_corpus, f"(?i){secret}.*", mode="regex")["total"] == 0


def test_paging_with_next_yields_every_hit_once(memory_corpus: MemoryCorpus) -> None:
    """Following next with small pages returns each hit exactly once, total of them."""
    first = _recall(memory_corpus, ref="pi.edit", limit=7)
    hits = _all_pages(memory_corpus, ref="pi.edit", limit=7)
    addresses = [(hit["path"], hit["address"]) for hit in hits]
    assert len(addresses) == len(set(addresses)) == first["total"] > 7
    large = _all_pages(memory_corpus, ref="pi.edit", limit=50)
    assert {(h["path"], h["address"]) for h in large} == set(addresses)


def test_response_is_bounded_and_paging_survives_it(memory_corpus: MemoryCorpus) -> None:
    """Every page stays within 30,000 characters of JSON; overflow hits move to next."""
    response = _recall(memory_corpus, "zürich", limit=50)
    assert response["total"] > 50
    assert len(orjson.dumps(response).decode()) <= MAX_RESPONSE_CHARS
    hits = _all_pages(memory_corpus, "zürich", limit=50)
    assert len({(h["path"], h["address"]) for h in hits}) == len(hits) == response["total"]


def test_match_all_narrows_match_any(memory_corpus: MemoryCorpus) -> None:
    """match=all needs every word; match=any (the default) needs one, and says so."""
    relaxed = _recall(memory_corpus, "harbor pylon")
    assert relaxed == _recall(memory_corpus, "harbor pylon", match="any")
    strict = _recall(memory_corpus, "harbor pylon", match="all")
    only = _recall(memory_corpus, "harbor", match="all")["total"]
    assert strict["total"] < only <= relaxed["total"]
    assert (strict["matched"], relaxed["matched"]) == ("all", "any")
    assert relaxed["allWords"] == strict["total"]


def test_regex_mode_matches_whole_tokens(memory_corpus: MemoryCorpus) -> None:
    """A regex matches lowercased tokens; a bad or too long pattern is a clear QueryError."""
    hits = _all_pages(memory_corpus, "holdout|harbor", mode="regex", limit=50)
    assert hits
    with pytest.raises(QueryError, match="regex"):
        _recall(memory_corpus, "(unclosed", mode="regex")
    with pytest.raises(QueryError, match="limit"):
        _recall(memory_corpus, "a" * 300, mode="regex")


def test_active_branch_filter_drops_off_branch_entries(memory_corpus: MemoryCorpus) -> None:
    """branches=active hides entries Pi puts off the active branch."""
    truth = next(t for t in TRUTH if t["offBranchEntryIds"] and t["rareFacts"])
    off = set(truth["offBranchEntryIds"])
    session = truth["header"]["id"]
    everything = {h["entryId"] for h in _all_pages(memory_corpus, role="user", session=session,
                                                     limit=50)}
    active = {h["entryId"] for h in _all_pages(memory_corpus, role="user", session=session,
                                                 branches="active", limit=50)}
    assert everything & off
    assert active == everything - off


def test_time_window_filters(memory_corpus: MemoryCorpus) -> None:
    """since/until keep only entries whose timestamp is inside the window."""
    hits = _all_pages(memory_corpus, role="user", since="2026-01-20T00:00:00Z",
                      until="2026-01-21T00:00:00Z", limit=50)
    assert hits
    assert all("2026-01-20" <= h["timestamp"] < "2026-01-21" for h in hits)
    with pytest.raises(QueryError, match="--since"):
        _recall(memory_corpus, role="user", since="yesterday")


def test_empty_request_and_bad_options_are_rejected(memory_corpus: MemoryCorpus) -> None:
    """No query and no filter, or out-of-range options, fail with one clear line."""
    with pytest.raises(QueryError, match="QUERY"):
        _recall(memory_corpus, "  ")
    with pytest.raises(UsageError, match="--limit 0: must be between 1 and 50"):
        _recall(memory_corpus, "x", limit=0)
    with pytest.raises(UsageError, match=r'\$\.limit: expected an integer, got "many"'):
        recall_request({"query": "x", "limit": "many", "index": str(memory_corpus.index),
                        "sessions": str(memory_corpus.sessions)})
    with pytest.raises(QueryError, match="no indexed session"):
        _recall(memory_corpus, "x", session="no-such-session")


def test_the_bound_holds_for_what_the_cli_prints(
    memory_corpus: MemoryCorpus, capsys: pytest.CaptureFixture[str]
) -> None:
    """`recall --json --limit 50` prints at most 30,000 characters (indented JSON, as shown)."""
    assert main(["recall", "zürich", "--limit", "50", "--json", "--hot-sessions",
                 str(HOT_SESSIONS), "--sessions", str(memory_corpus.sessions), "--index",
                 str(memory_corpus.index)]) == 0
    printed = capsys.readouterr().out
    assert len(printed.rstrip("\n")) <= MAX_RESPONSE_CHARS
    assert len(orjson.loads(printed)["hits"]) > 1


def test_a_hit_too_large_alone_is_cut_with_a_note(tmp_path: Path) -> None:
    """A hit whose own values exceed the bound (a 40,000-character entry id) is cut to fit,
    and says what was cut and how to read it whole."""
    session = SessionBuilder(tmp_path / "sessions" / "big.jsonl")
    session.user("oversized words")
    huge = "x" * 40_000
    session.lines[-1] = session.lines[-1].replace(b'"e001"', f'"{huge}"'.encode())
    session.write()
    roots = {"sessions": tmp_path / "sessions", "index": tmp_path / "index"}
    reindex(**roots, workers=1)
    response = recall("oversized", **roots)
    printed = orjson.dumps(response, option=orjson.OPT_INDENT_2).decode()
    assert len(printed) <= MAX_RESPONSE_CHARS
    hit = response["hits"][0]
    assert hit["truncated"] == (
        "entryId, address, follow.addresses cut to 200 characters to fit the response; "
        "expand the session by its path to read the entry whole")
    assert hit["address"] == "x" * 199 + "…"
    page = expand(hit["path"], indices=[0], raw=True, **roots)  # by path, it expands
    assert page["entries"][0]["text"].startswith('{"type":"message","id":"' + "x" * 1000)


def test_an_overlong_query_is_a_usage_error(memory_corpus: MemoryCorpus) -> None:
    """A query longer than 4,096 characters is refused in one line (it would not fit `next`)."""
    with pytest.raises(UsageError, match="QUERY is 5000 characters; the limit is 4096"):
        _recall(memory_corpus, "a" * 5000)


IDENTIFIERS = ("sha256:" + "3f9a" * 16, "0199a7c4-1e2f-7a3b-8c4d-5e6f7a8b9c0d",
               "run-5c0ffee0-1234-4abc-9def-0123456789ab", "toolu_01HXq7GmR8sVb2JkL9pNwT3e",
               "call_Xk2p9zYQ4LrT8mWn")


@pytest.mark.parametrize("identifier", IDENTIFIERS, ids=lambda value: value.split("_")[0][:8])
def test_identifiers_are_recalled_by_their_value(tmp_path: Path, identifier: str) -> None:
    """A fingerprint, a UUID, a run id or a tool call id, written in a command's output, is
    recalled by its whole value (phrase, or every word), and only that entry (not the one
    whose value differs in its last characters); asked plainly, it ranks first."""
    builder = SessionBuilder(tmp_path / "sessions" / "s.jsonl")
    builder.user("what did the build produce?")
    builder.bash("make", f"artifact {identifier} written")
    builder.bash("make again", f"artifact {identifier[:-4]}0000 written")  # its last word differs
    builder.write()
    where = {"sessions": tmp_path / "sessions", "index": tmp_path / "index"}
    reindex(**where, workers=1)
    for mode in ("phrase", "literal"):
        hits = recall(identifier, mode=mode, match="all", **where)["hits"]  # type: ignore
        assert [hit["address"] for hit in hits] == ["e002"], mode
    # Asked in plain words (any word matches), the entry holding the whole value ranks first.
    assert recall(identifier, **where)["hits"][0]["address"] == "e002"  # type: ignore


# --- plain questions on real sessions (fixtures/pi-mono-real) ---------------------------

QUESTIONS = [
    # (question, session file, the entries that answer it; "A|B": either, equal texts)
    ("update refactor.md mark WP15 WP16 complete", "before-compaction.jsonl", ["L487"]),
    ("what was the fix when no models are available and no API key is set", "compact.jsonl",
     ["L81"]),
    ("what is the difference between a skill and a custom tool", "session.jsonl", ["L105"]),
    ("how shuld invalid themes be handled so they never explode on restart",
     "large-session.jsonl", ["L875"]),
    ("sytem prompt should say to read the readme when the user asks to create a new theem",
     "large-session.jsonl", ["L759"]),
    ("sleep 5 seconds via bash and the green diff b5bd68", "large-session.jsonl",
     ["L437", "L441"]),
    ("ToolResultMessage breaking change in CHANGELOG and a little poem", "session.jsonl",
     ["L299", "L442|L461"]),  # "write a little poem instead," / "just write a little poem"
]


@pytest.mark.parametrize(("question", "file", "answers"), QUESTIONS,
                         ids=[q for q, _, _ in QUESTIONS])
def test_a_plain_question_ranks_its_entry_in_the_top_5(
    pi_mono: dict[str, Path], question: str, file: str, answers: list[str]
) -> None:
    """A question in plain words (typos, common words, words of two entries) ranks each entry
    that answers it among the first five hits, with no option set."""
    response = recall(question, limit=5, **pi_mono)
    top = [(Path(hit["path"]).name, hit["address"]) for hit in response["hits"]]
    for answer in answers:
        assert any((file, address) in top for address in answer.split("|")), top
    assert response["matched"] == "any"


def test_every_word_hits_come_first_and_are_counted(pi_mono: dict[str, Path]) -> None:
    """Hits holding every word lead the ranking; allWords counts them and equals what
    match=all finds; past them, pages continue with the hits holding only some words."""
    query = "change toolResults to ToolResultMessage and run npm run check"
    strict = recall(query, match="all", limit=50, **pi_mono)
    relaxed = recall(query, limit=50, **pi_mono)
    assert relaxed["allWords"] == strict["total"] >= 1
    assert relaxed["total"] > strict["total"]
    leading = [(h["path"], h["address"]) for h in relaxed["hits"][: strict["total"]]]
    assert leading == [(h["path"], h["address"]) for h in strict["hits"]]
    seen = [(h["path"], h["address"]) for h in relaxed["hits"]]
    following = relaxed["next"]
    while following is not None and len(seen) < 200:
        page = recall_request(following)
        seen.extend((h["path"], h["address"]) for h in page["hits"])
        following = page["next"]
    assert len(seen) == len(set(seen)) == min(relaxed["total"], len(seen))


def test_common_words_do_not_swamp_a_rare_one(pi_mono: dict[str, Path]) -> None:
    """Stop words do not score: the one rare word, not eleven common ones, decides the top
    hits."""
    response = recall("what did we do with the and of it is that WP15", limit=3, **pi_mono)
    assert all("wp15" in hit["snippet"].lower() for hit in response["hits"])


def test_a_limit_above_its_maximum_is_clamped_with_a_note(pi_mono: dict[str, Path]) -> None:
    """limit 500 answers with 50 hits and says so; the next page keeps the clamped limit."""
    response = recall("theme", limit=500, **pi_mono)
    assert response["clamped"] == {"limit": [500, 50]}
    assert 10 < len(response["hits"]) <= 50  # the response bound may carry some to `next`
    assert response["next"] is not None and response["next"]["limit"] == 50


def test_filters_combine_with_a_plain_question(pi_mono: dict[str, Path]) -> None:
    """Role and session filters narrow a plain question's hits, both parts of its ranking:
    every hit passes them, and allWords counts only hits that pass them."""
    question = "change toolResults to ToolResultMessage and run npm run check"
    narrowed = recall(question, role="user", session="session.jsonl", limit=50, **pi_mono)
    assert narrowed["total"] > 0 and narrowed["matched"] == "any"
    assert {(h["role"], Path(h["path"]).name) for h in narrowed["hits"]} == {
        ("user", "session.jsonl")}
    strict = recall(question, match="all", role="user", session="session.jsonl", **pi_mono)
    assert narrowed["allWords"] == strict["total"]
    assert narrowed["total"] < recall(question, **pi_mono)["total"]
