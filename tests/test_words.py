"""Words as memory reads them: any script, no terminal codes (fabric_memory.words)."""

from __future__ import annotations

import pytest

from fabric_memory.words import (
    CJK_RANGES,
    MAX_WORD_BYTES,
    STOP_WORDS,
    cjk_pairs,
    is_cjk,
    searchable,
    strip_controls,
    words,
)


def test_latin_words_are_lowercased_runs_of_letters_and_digits() -> None:
    """Punctuation and underscores split words; case is folded, accents kept."""
    assert words("Fix src/Überblick.ts: HOLDOUT_FACT_003 at 12.5") == [
        "fix", "src", "überblick", "ts", "holdout", "fact", "003", "at", "12", "5"]


@pytest.mark.parametrize(("text", "expected"), [
    ("钩子配置", ["钩子", "子配", "配置"]),
    ("请检查网关的身份配置",
     ["请检", "检查", "查网", "网关", "关的", "的身", "身份", "份配", "配置"]),
    ("サーバーを起動", ["サー", "ーバ", "バー", "ーを", "を起", "起動"]),
    ("서버에서 오류", ["서버", "버에", "에서", "오류"]),
    ("字", ["字"]),
    ("用 tantivy 建索引", ["用", "tantivy", "建索", "索引"]),
], ids=["chinese", "chinese-sentence", "japanese", "korean", "one-character", "mixed"])
def test_cjk_runs_read_as_overlapping_pairs(text: str, expected: list[str]) -> None:
    """A run of CJK characters (no spaces between words) gives its overlapping pairs, so
    a two-character word inside a sentence is one of them."""
    assert words(text) == expected


def test_cjk_pairs_and_is_cjk() -> None:
    """cjk_pairs splits one run; is_cjk tells which characters are read one at a time."""
    assert cjk_pairs("网关") == ["网关"]
    assert cjk_pairs("网") == ["网"]
    assert [is_cjk(c) for c in "中カ한aé1ー"] == [True, True, True, False, False, False, True]


def test_is_cjk_holds_each_range_whole_and_nothing_beside_it() -> None:
    """is_cjk is true from each range's first character to its last, false just outside
    each, and false for anything but one character."""
    for first, last in CJK_RANGES:
        assert is_cjk(chr(first)) and is_cjk(chr(last)), hex(first)
        assert not any(is_cjk(chr(c)) for c in (first - 1, last + 1)
                       if not any(a <= c <= b for a, b in CJK_RANGES)), hex(first)
    assert not is_cjk("") and not is_cjk("中文")


def test_terminal_controls_are_removed() -> None:
    """Colours, OSC links and titles, cursor codes and other controls go; tab, line feed
    and carriage return stay; a colour code inside a word joins the word."""
    assert strip_controls("\x1b[31mFAIL\x1b[39m \x1b[22mgetInitials\x1b[0m\r\n") == (
        "FAIL getInitials\r\n")
    assert strip_controls("\x1b]8;;https://x.test\x1b\\link\x1b]8;;\x1b\\ \x1b]0;title\x07ok") == (
        "link ok")
    assert strip_controls("a\tb\x07c\x08d\x00e\x7ff\x9b1mg\x1b(Bh\x1b7i") == "a\tbcdefghi"
    assert strip_controls("get\x1b[1mInitials") == "getInitials"
    assert words("\x1b[2m\x1b[22mgetInitials\x1b[39m") == ["getinitials"]


def test_text_without_controls_is_returned_as_is() -> None:
    """The common case costs one scan and no copy."""
    text = "plain text\twith tabs\nand lines"
    assert strip_controls(text) is text
    assert searchable(text) is text


def test_written_out_escapes_are_removed_only_for_search() -> None:
    """A colour code written as an escape (inside JSON output or source) splits no word in
    search, but a reader is shown the text as written."""
    text = 'echo "\\u001b[31mred\\x1b[0m \\033[1mbold \\e[2Kline"'
    assert words(text) == ["echo", "red", "bold", "line"]
    assert searchable(text) == 'echo "red bold line"'
    assert strip_controls(text) is text


def test_long_words_are_left_out_by_their_utf8_length() -> None:
    """A word over MAX_WORD_BYTES bytes (a base64 blob) is no word; a digest is one."""
    assert words("x" * MAX_WORD_BYTES) == ["x" * MAX_WORD_BYTES]
    assert words("y" * (MAX_WORD_BYTES + 1)) == []
    assert words("é" * (MAX_WORD_BYTES // 2)) == ["é" * (MAX_WORD_BYTES // 2)]
    assert words("é" * (MAX_WORD_BYTES // 2 + 1)) == []


def test_ascii_text_reads_as_it_would_beside_other_scripts() -> None:
    """Plain ASCII text (read by a quicker path) gives the words it gives beside a word of
    another script."""
    text = "Fix_the BUG in src/Parser.ts:42 (" + "a" * 128 + " " + "b" * 129 + ")"
    assert words(text) == words(text + " é")[:-1]
    assert words(text) == ["fix", "the", "bug", "in", "src", "parser", "ts", "42", "a" * 128]


def test_final_sigma_lowercases_as_the_index_does() -> None:
    """The index lowercases one character at a time, so a final Σ is σ."""
    assert words("ΟΔΟΣ") == ["οδοσ"]


def test_stop_words_are_lowercase_english_function_words() -> None:
    """Every stop word is one lowercased word, as words() returns them."""
    assert all(words(word) == [word] for word in STOP_WORDS)
    assert {"the", "what", "did"} <= STOP_WORDS
    assert "not" not in STOP_WORDS


def test_positions_are_the_index_tokenizer_positions() -> None:
    """Each word stands at the position the index gives it: one per word, one per CJK
    character (a pair at its first), a word left out for its length keeping its place."""
    from fabric_memory.memory.index import ANALYZER
    from fabric_memory.words import is_cjk, positioned

    text = f"Fix 钩子配置 in {'x' * 300} Gateway Zürich ok"
    tokens = {token.position: token.text for token in ANALYZER.pre_tokenize(text).tokens}
    found = positioned(text)
    assert [word for _, word in found] == words(text)
    assert all(tokens[at] == (word[0] if is_cjk(word[0]) else word) for at, word in found)
    assert positioned(text.encode("ascii", "ignore").decode())[-1] == (5, "ok")
