"""Words as memory sees them, in any script: terminal control codes removed, letters and
digits split into lowercased words, and Chinese, Japanese and Korean text (written without
spaces between words) read as overlapping pairs of characters, as Lucene's CJK analyzer
does, so a word inside a sentence is found.

The memory index tokenizes with the same rule in Tantivy (``memory/index.py`` builds its
tokenizer from :data:`CJK_CLASS`): every CJK character is one index word at its own
position, and a pair is a two-character phrase of them. :func:`words` is the pure-Python
reading of that rule, for rankings outside the index (the summary's words); it imports no
search engine.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator
from functools import cache
from typing import Final

MAX_WORD_BYTES: Final = 128
"""Longest word (in UTF-8 bytes) the index keeps: a ``sha256`` or ``sha512`` hex digest is
one word; a longer run (a base64 blob) is left out."""

CJK_RANGES: Final = (
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x2E80, 0x2FDF),  # CJK radicals, Kangxi radicals
    (0x3005, 0x3007),  # 々 〆 〇
    (0x3021, 0x3029),  # Hangzhou numerals
    (0x3031, 0x3035),  # kana repeat marks
    (0x303B, 0x303C),  # 〻 〼
    (0x3041, 0x3096),  # Hiragana
    (0x309D, 0x309F),  # Hiragana iteration marks, ゟ
    (0x30A1, 0x30FA),  # Katakana
    (0x30FC, 0x30FF),  # ー and Katakana iteration marks, ヿ
    (0x3105, 0x312F),  # Bopomofo
    (0x3131, 0x318E),  # Hangul compatibility Jamo
    (0x31A0, 0x31BF),  # Bopomofo extended
    (0x31F0, 0x31FF),  # Katakana phonetic extensions
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xA960, 0xA97F),  # Hangul Jamo extended A
    (0xAC00, 0xD7A3),  # Hangul syllables
    (0xD7B0, 0xD7FF),  # Hangul Jamo extended B
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0xFF66, 0xFF9F),  # halfwidth Katakana
    (0xFFA0, 0xFFDC),  # halfwidth Hangul
    (0x1B000, 0x1B16F),  # Kana supplement and extended
    (0x20000, 0x3134F),  # CJK extensions B to G, compatibility supplement
)
"""Characters read one at a time (letters of scripts written without spaces)."""
CJK_CLASS: Final = "".join(f"{chr(first)}-{chr(last)}" for first, last in CJK_RANGES)
"""The ranges as the inside of a regex character class (Python's ``re`` and Rust's
``regex`` both take the characters themselves)."""

_CONTROLS = (
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves, erases
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: titles, hyperlinks (to BEL or ST)
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"  # DCS, SOS, PM, APC strings
    r"|\x1b[ -/]*[0-~]"  # other escapes (character sets, ESC 7, ESC =)
    r"|\x9b[0-?]*[ -/]*[@-~]"  # CSI in its 8-bit form
    r"|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]"  # other C0 and C1 controls, DEL
)
_WRITTEN_CSI = r"\\(?:u001[bB]|x1[bB]|033|e)\[[0-?]*[ -/]*[@-~]"
TERMINAL_CONTROLS: Final = re.compile(_CONTROLS)
"""What a terminal reads as a command, not text. Tab, line feed and carriage return stay."""
_SEARCH_NOISE = re.compile(f"{_CONTROLS}|{_WRITTEN_CSI}")
_MAY_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_MAY_NOISE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]|\\(?:u001[bB]|x1[bB]|033|e)\[")

STOP_WORDS: Final = frozenset({
    "a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any",
    "are", "as", "at", "be", "because", "been", "before", "being", "below", "between",
    "both", "but", "by", "can", "could", "did", "do", "does", "doing", "done", "down",
    "during", "each", "else", "ever", "few", "for", "from", "further", "get", "got", "had",
    "has", "have", "having", "he", "her", "here", "hers", "him", "his", "how", "i", "if",
    "in", "into", "is", "it", "its", "just", "let", "me", "more", "most", "my", "now", "of",
    "off", "on", "once", "only", "or", "other", "our", "ours", "out", "over", "own", "same",
    "she", "should", "so", "some", "such", "than", "that", "the", "their", "theirs", "them",
    "then", "there", "these", "they", "this", "those", "through", "to", "too", "under",
    "until", "up", "us", "very", "was", "we", "were", "what", "when", "where", "which",
    "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours",
})
"""Words a plain question is full of and that say nothing about which entry answers it
("what did we do about the ..."): in recall they do not score in a literal query whose
words need not all match (as long as another word remains), though the documents holding
every word of the query, these included, still come first. Many such words each add a
little BM25 score, and together they outscored the one rare word that mattered (measured
on the pi-mono sessions, docs/memory-index.md#recall)."""

_CJK_STARTS: Final = tuple(first for first, _ in CJK_RANGES)
_ASCII_WORD = re.compile(r"[a-z0-9]+")


@cache
def _word() -> re.Pattern[str]:
    """A run of CJK characters, or of other letters and digits: compiled when a text that is
    not ASCII first comes (its classes span Unicode: milliseconds a hook would pay on every
    start, most texts never need it)."""
    return re.compile(rf"[{CJK_CLASS}]+|[^\W_{CJK_CLASS}]+")


def strip_controls(text: str) -> str:
    """``text`` without terminal control codes (ANSI colours and cursor moves, OSC titles
    and links, other control characters but tab, line feed and carriage return):
    ``\\x1b[22mgetInitials`` reads ``getInitials``. Returns ``text`` itself when it holds
    none. This is what a reader is shown."""
    if _MAY_CONTROL.search(text) is None:
        return text
    return TERMINAL_CONTROLS.sub("", text)


def searchable(text: str) -> str:
    """:func:`strip_controls`, and a colour code written out as an escape (``\\u001b[31m``,
    ``\\x1b[0m``, ``\\033[1m``, ``\\e[2K``: a terminal's output inside JSON or source code)
    removed too, so the word after it stands alone. What memory indexes and searches."""
    if _MAY_NOISE.search(text) is None:
        return text
    return _SEARCH_NOISE.sub("", text)


def is_cjk(char: str) -> bool:
    """Whether ``char`` is read one character at a time (:data:`CJK_RANGES`)."""
    if len(char) != 1:
        return False
    at = bisect_right(_CJK_STARTS, ord(char)) - 1
    return at >= 0 and ord(char) <= CJK_RANGES[at][1]


def cjk_pairs(run: str) -> list[str]:
    """The words of a run of CJK characters: its overlapping pairs, or the one character
    alone (``"钩子配置"`` → ``["钩子", "子配", "配置"]``)."""
    if len(run) == 1:
        return [run]
    return [run[at:at + 2] for at in range(len(run) - 1)]


def words(text: str) -> list[str]:
    """The searchable words of ``text`` in order: lowercased runs of letters and digits
    (any script), each run of CJK characters as its overlapping pairs (one character
    alone as itself), words over :data:`MAX_WORD_BYTES` left out.

    ``words("Fix 钩子配置 in \\x1b[1mGateway")`` is
    ``["fix", "钩子", "子配", "配置", "in", "gateway"]``.
    """
    text = searchable(text)
    if text.isascii():  # the common case, twice as fast: no CJK, no case but ASCII's
        return [word for word in _ASCII_WORD.findall(text.lower())
                if len(word) <= MAX_WORD_BYTES]
    return list(_words(text))


def positioned(text: str) -> list[tuple[int, str]]:
    """:func:`words`, each with its position as the index counts them: one per word and
    one per CJK character (a pair stands at its first), a word left out for its length
    still taking its place."""
    text = searchable(text)
    if text.isascii():
        return [(at, word) for at, word in enumerate(_ASCII_WORD.findall(text.lower()))
                if len(word) <= MAX_WORD_BYTES]
    return list(_positioned(text))


def _words(text: str) -> Iterator[str]:
    return (word for _, word in _positioned(text))


def _positioned(text: str) -> Iterator[tuple[int, str]]:
    at = 0
    for match in _word().finditer(text):
        run = match.group()
        if is_cjk(run[0]):
            yield from ((at + offset, pair) for offset, pair in enumerate(cjk_pairs(run)))
            at += len(run)
            continue
        at += 1
        if len(run) > MAX_WORD_BYTES // 4 and len(run.encode()) > MAX_WORD_BYTES:
            continue  # measured before lowercasing, as the index does
        # Tantivy lowercases one character at a time: a final Σ is σ there, not ς.
        yield at - 1, (run.replace("Σ", "σ") if "Σ" in run else run).lower()
