"""Words in any script, clean tokens, every id findable, and ranking by held words:
recall over a written Chinese session (fixtures/chinese) and real files of several agents
(fixtures/agents)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from fabric_memory.memory.expand import expand
from fabric_memory.memory.recall import recall
from fabric_memory.memory.reindex import reindex
from fabric_memory.memory.render import render_recall

from .memory_builder import SessionBuilder

FIXTURES = Path(__file__).parent.parent / "fixtures"
CHINESE = FIXTURES / "chinese" / "written-zh-ops.jsonl"
AGENTS = FIXTURES / "agents"
CATUI_RUN = (AGENTS / "catui" / "catui-demo" / ".catui" / "traces"
             / "run-4f70e336-cbd4-47f2-94e4-0aed03609a99.jsonl")
CODEX_PARENT = (AGENTS / "codex"
                / "rollout-2025-10-03T09-15-00-0199a7c4-1e2f-7a3b-8c4d-5e6f7a8b9c0d.jsonl")
CODEX_RESUMED = (AGENTS / "codex"
                 / "rollout-2025-11-20T14-02-11-019a9f3e-5b6c-7d8e-9f01-23456789abcd.jsonl")
CLAUDE_COLOURED = AGENTS / "claude-code" / "compact_coloured.jsonl"
FABRO_EXPORT = AGENTS / "fabro" / "exports" / "01KCG2M4N5P6Q7R8S9T0V1W2XY.jsonl"

# Words from inside the sentences of the Chinese session (no space around any of them),
# each with the entry whose sentence holds it.
CHINESE_WORDS = [
    ("日志服务", "cbb8943c"),  # …把会话摘要推送到我们的日志服务。
    ("凭空猜", "a3f6010a"),  # 先读配置文件了解现有结构，不要凭空猜字段名。
    ("空数组", "32978398"),  # hooks是空数组，直接替换成一个列表项。
    ("三项", "cb043b84"),  # 接着修改身份配置：显示名、语言和时区三项一起改。
    ("哪一项", "9d35cbaf"),  # 我看一下网关最近的日志，找出是哪一项配置出错。
    ("带单位", "293948fb"),  # …而我按照别的工具的习惯写成了带单位的字符串，…
    ("模拟", "f80c1d1b"),  # 我再用curl模拟一次会话结束事件，确认钩子能被调用：
    ("执行权限", "77fe41e9"),  # 给脚本加上执行权限，先手动运行一次，…
    ("系统时区", "56dbd94b"),  # 注意crontab按服务器的系统时区执行，而不是…
    ("十九点", "9e7b2039"),  # 北京时间凌晨三点等于UTC前一天的十九点，…
]


def _index(tmp_path: Path, *files: Path) -> dict[str, Path]:
    roots = {"sessions": tmp_path / "sessions", "index": tmp_path / "index"}
    for file in files:
        target = roots["sessions"] / file.parent.name / file.name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(file, target)
    report = reindex(**roots, workers=1)
    assert report["invalid"] == [], report["invalid"]
    return roots


@pytest.fixture(scope="module")
def chinese(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return _index(tmp_path_factory.mktemp("chinese"), CHINESE)


@pytest.mark.parametrize(("word", "address"), CHINESE_WORDS, ids=[w for w, _ in CHINESE_WORDS])
def test_a_chinese_word_inside_a_sentence_finds_its_entry(
    chinese: dict[str, Path], word: str, address: str
) -> None:
    """A word written inside a Chinese sentence (no spaces) ranks the entry whose sentence
    holds it among the first five; every one of those hits holds the word, and its snippet
    shows it."""
    response = recall(word, limit=5, **chinese)
    hits = response["hits"]
    assert address in [hit["address"] for hit in hits]
    top = next(hit for hit in hits if hit["address"] == address)
    assert top["wordsHeld"] == top["queryWords"]
    assert response.get("allWords", response["total"]) >= 1
    assert word in expand(CHINESE.stem, addresses=[address], **chinese)["entries"][0]["text"]


def test_a_chinese_question_finds_its_answers(chinese: dict[str, Path]) -> None:
    """A question in Chinese (one run of characters, no spaces: "why must the hook's timeout
    be written as whole milliseconds") ranks first the three entries that answer it: its
    character pairs are the query's words, and they hold most of them."""
    hits = recall("为什么钩子的超时时间要写成整数毫秒", limit=5, **chinese)["hits"]
    assert {hit["address"] for hit in hits[:3]} == {"293948fb", "c5638102", "ede0f0ac"}
    assert all(hit["wordsHeld"] >= 9 and "整数毫秒" in hit["snippet"] for hit in hits[:3])
    assert all(hit["wordsHeld"] <= 3 for hit in hits[3:])


def test_a_coloured_claude_code_output_is_found_by_its_plain_words(tmp_path: Path) -> None:
    """A real Claude Code line printed in terminal colours (``\\u001b[2mCompacted``) is found
    by its plain word; its snippet and readable expand carry no control code, raw keeps
    the bytes."""
    roots = _index(tmp_path, CLAUDE_COLOURED)
    hits = recall("Compacted ctrl see full summary", match="all", **roots)["hits"]
    assert [hit["address"] for hit in hits] == ["6b911413-edc7-479e-83d0-acbaddbc8ba7"]
    assert "\x1b" not in hits[0]["snippet"] and "Compacted (ctrl+o" in hits[0]["snippet"]
    session = "0e26ec2f-937e-482c-b889-bc126f996913"
    readable = expand(session, addresses=[hits[0]["address"]], **roots)["entries"][0]["text"]
    assert "\x1b" not in readable and "Compacted (ctrl+o to see full summary)" in readable
    raw = expand(session, addresses=[hits[0]["address"]], raw=True, **roots)["entries"][0]
    assert "\\u001b[2mCompacted" in raw["text"]


def test_a_colour_coded_test_failure_is_found_by_its_test_name(tmp_path: Path) -> None:
    """Vitest's coloured failure (``\\x1b[2m > \\x1b[22mgetInitials``, an escape written out
    as ``\\u001b[31m`` in JSON output too) is found by ``getInitials`` and ``AssertionError``."""
    builder = SessionBuilder(tmp_path / "sessions" / "--repo--" / "s.jsonl")
    builder.bash("npx vitest run", " \x1b[31m×\x1b[39m src/user.test.ts\x1b[2m > "
                 "\x1b[22mgetInitials\x1b[2m > \x1b[22mjoins initials\n\x1b[31m\x1b[1m"
                 "AssertionError\x1b[22m: expected 'J' to be 'JD'\x1b[39m", exit_code=1)
    failing = builder.leaf
    builder.user('{"output": "\\u001b[31mFAIL\\u001b[39m formatName \\u001b[2m>'
                 ' \\u001b[22mtrimsSpaces"}')
    written = builder.leaf
    builder.write()
    roots = {"sessions": tmp_path / "sessions", "index": tmp_path / "index"}
    reindex(**roots, workers=1)
    for word, address in (("getInitials", failing), ("AssertionError", failing),
                          ("trimsSpaces", written)):
        assert [hit["address"] for hit in recall(word, **roots)["hits"]] == [address], word


def test_ids_in_structural_fields_are_recalled_to_their_entry(tmp_path: Path) -> None:
    """A Catui event id, a Codex ghost-snapshot commit id and the parent id a resumed Codex
    session repeats in its second session_meta each find their entry first."""
    roots = _index(tmp_path, CATUI_RUN, CODEX_PARENT, CODEX_RESUMED)
    resumed = str((roots["sessions"] / "codex" / CODEX_RESUMED.name).resolve())
    for query, path, address in (
        ("afec20fd-31b8-4059-a150-0ded9f3622fb", None,
         "run-4f70e336-cbd4-47f2-94e4-0aed03609a99:8"),  # tool.completed's eventId
        ("f2d38857-55bf-4b17-b06a-c3b4df0e5ed5", None,
         "run-4f70e336-cbd4-47f2-94e4-0aed03609a99:1"),  # run.started's eventId
        ("7e1f0a2b3c4d5e6f708192a3b4c5d6e7f8091a2b", resumed, "L6"),  # the ghost commit
    ):
        hit = recall(query, match="all", **roots)["hits"][0]
        assert hit["address"] == address, query
        assert path is None or hit["path"] == path
    head = recall("9d3c2b1a0f9e8d7c6b5a49382716f5e4d3c2b1a0", **roots)  # the ghost's parent
    assert {(hit["path"], hit["address"]) for hit in head["hits"]} == {
        (resumed, "L1"), (resumed, "L6")}  # the session's git commit, the snapshot's parent
    parent = recall("0199a7c4-1e2f-7a3b-8c4d-5e6f7a8b9c0d", match="all", **roots)["hits"]
    assert {(Path(hit["path"]).name, hit["address"]) for hit in parent} == {
        (CODEX_PARENT.name, "L1"), (CODEX_RESUMED.name, "L2")}


def test_session_and_stage_ids_find_the_entry_where_they_start(tmp_path: Path) -> None:
    """A Claude Code session id and a Fabro agent session's and stage's ids (envelope
    fields) each find the first entry under them, and only that one; a reader is not
    shown them as text."""
    roots = _index(tmp_path, CLAUDE_COLOURED, FABRO_EXPORT)
    for query, address in (
        ("0e26ec2f-937e-482c-b889-bc126f996913", "801d461f-636a-431e-a961-070c91c8ae3e"),
        ("ses_01KCG2N0A1B2C3D4E5F6G7H8J9", "019b3a11-7b03-7d10-8e22-000000000003"),
        ("migrate@1", "019b3a11-7b02-7d10-8e22-000000000002"),
    ):
        hits = recall(query, match="all", **roots)["hits"]
        assert [hit["address"] for hit in hits] == [address], query
    page = expand("01KCG2M4N5P6Q7R8S9T0V1W2XY",
                  addresses=["019b3a11-7b02-7d10-8e22-000000000002"], **roots)
    assert "migrate@1" not in page["entries"][0]["text"]


# --- ranking ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ranked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A session of entries holding some of the words "kestrel harbor migration" (rare:
    kestrel, harbor; common: migration), beside 40 filler entries that say "migration"."""
    base = tmp_path_factory.mktemp("ranked")
    builder = SessionBuilder(base / "sessions" / "--repo--" / "ranked.jsonl")
    ids = {}
    for n in range(40):
        builder.user(f"routine migration step {n} finished without surprises")
    ids["one_rare_often"] = builder.user("kestrel kestrel kestrel kestrel")
    ids["two_rare_long"] = builder.user(
        "a long note: " + " ".join(f"filler{n}" for n in range(30)) + " kestrel "
        + " ".join(f"padding{n}" for n in range(30)) + " harbor and then some more words")
    ids["two_rare"] = builder.user("the kestrel flew over the harbor while we waited")
    ids["rare_and_common"] = builder.user("kestrel notes for the migration")
    ids["apart"] = builder.user("the harbor lights were out, a kestrel sat on the pier")
    ids["together"] = builder.user("the lights were out, a harbor kestrel sat on the pier")
    builder.write()
    roots = {"sessions": base / "sessions", "index": base / "index"}
    reindex(**roots, workers=1)
    return {"roots": roots, "ids": ids}


def _addresses(ranked: dict[str, Any], query: str) -> list[str]:
    return _paged(ranked, 50, query)[0]


def test_more_and_rarer_words_rank_first(ranked: dict[str, Any]) -> None:
    """Of entries holding only some words, a long one holding both rare words outranks a
    short one repeating one rare word (which BM25 alone ranks first); every entry holding a
    rare word outranks the 40 holding only the common word."""
    ids = ranked["ids"]
    order = _addresses(ranked, "kestrel harbor migration")
    assert order.index(ids["two_rare_long"]) < order.index(ids["one_rare_often"])
    assert order.index(ids["two_rare"]) < order.index(ids["one_rare_often"])
    common_only = [a for a in order if a not in ids.values()]
    assert len(common_only) == 40
    assert max(order.index(ids[k]) for k in ids) < min(order.index(a) for a in common_only)


def test_words_held_are_reported_per_hit(ranked: dict[str, Any]) -> None:
    """Each hit says how many of the query's words it holds (stop words not counted), in
    the JSON and in the text answer."""
    ids = ranked["ids"]
    response = recall("the kestrel harbor migration", limit=50, **ranked["roots"])
    hits = response["hits"]
    text = render_recall(response)
    assert f"{ids['two_rare']} user" in text and "(2/3 words)" in text and "(1/3 words)" in text
    held = {hit["address"]: (hit["wordsHeld"], hit["queryWords"]) for hit in hits}
    assert held[ids["two_rare"]] == (2, 3)
    assert held[ids["rare_and_common"]] == (2, 3)
    assert held[ids["one_rare_often"]] == (1, 3)
    assert sorted({h for h, _ in held.values()}) == [1, 2]


def test_words_standing_together_rank_above_the_same_words_apart(ranked: dict[str, Any]) -> None:
    """Two entries of the same length hold the same two words once; the one where they
    stand together as in the question ranks first (the proximity bonus), though it comes
    later in the file (equal BM25 scores keep file order)."""
    ids = ranked["ids"]
    order = _addresses(ranked, "harbor kestrel")
    assert order.index(ids["together"]) < order.index(ids["apart"])


@pytest.mark.parametrize("limit", [1, 3, 7])
def test_pages_join_into_the_whole_ranking(ranked: dict[str, Any], limit: int) -> None:
    """Paging by any limit returns each hit once, in the order pages of 50 give, and every
    page reports the same total (the every-word part, then the some-words part)."""
    reference, (total,) = _paged(ranked, 50)
    pages, totals = _paged(ranked, limit)
    assert pages == reference
    assert totals == {total} and total == len(pages) == 46


def _paged(ranked: dict[str, Any], limit: int,
           query: str = "the kestrel harbor migration") -> tuple[list[str], set[int]]:
    """Every hit of ``query``, following ``next``; and the totals the pages said."""
    addresses: list[str] = []
    totals = set()
    offset = 0
    while True:
        page = recall(query, limit=limit, offset=offset, **ranked["roots"])
        totals.add(page["total"])
        addresses += [hit["address"] for hit in page["hits"]]
        if page["next"] is None:
            return addresses, totals
        offset = page["next"]["offset"]
