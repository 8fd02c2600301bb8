"""Exact facts: the identifiers and values a continuing agent needs verbatim (URLs, ids and
hashes, permission scopes, versions, ports, config keys and values, error codes, first
error lines, file paths), found in a text, and how they rank.

Pure functions over text: the compactor decides which texts are read (what the user and
the host's system notices said, failed tool results, the assistant's conclusions) and
masks what it keeps. Nothing here assumes English or spaces between words: a value ends
at whitespace, a quote, a bracket or CJK punctuation, whatever script surrounds it.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Final, Literal

Kind = Literal["url", "id", "scope", "version", "port", "config", "error", "path", "value",
               "name"]
Source = Literal["user", "system", "error", "assistant", "tool"]

SOURCE_WEIGHT: Final[dict[str, int]] = {
    "system": 4, "user": 4, "error": 3, "assistant": 1, "tool": 1,
}
"""How much a value counts by who said it: the user or a system notice first, then an
error, then the assistant's own conclusions and what a short tool result reported."""
VALUE_CHARS: Final = 200
"""A value longer than this is not an identifier (a data blob, a base64 payload)."""
ERROR_LINE_CHARS: Final = 200
SCAN_HEAD: Final = 1200
SCAN_TAIL: Final = 600

_FACT = re.compile(
    r"(?P<url>\b(?:https?|wss?|ftp)://[^\s<>\"'`()\[\]{}，。；：、）（【】「」《》！？]+)"
    r"|(?P<uuid>\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b)"
    r"|(?P<hash>(?<![\w.-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,64}(?![\w-]))"
    r"|(?P<color>(?<![\w#&])#?(?=[0-9a-fA-F]{0,5}[a-fA-F])(?=[0-9a-fA-F]{0,5}\d)[0-9a-fA-F]{6}"
    r"(?![\w-]))"
    r"|(?P<name>(?<=`)[A-Za-z_$][\w$]*(?:[a-z][A-Z]|_|\.)[\w$.]*(?=`))"
    r"|(?P<constant>(?<![\w.-])[A-Z][A-Z0-9]+(?:_[A-Za-z0-9]+)+(?![\w=-]))"
    r"|(?P<prefixed>(?<![\w.-])[a-z]{2,10}_(?=[A-Za-z0-9]*\d)[A-Za-z0-9]{8,}(?![\w-]))"
    r"|(?P<scope>(?<![\w:/.-])[a-z][a-z_]{1,30}(?::[a-z][a-z_.]{1,40}){1,3}(?![\w:/-]))"
    r"|(?P<version>(?<![\w.-])v?\d+\.\d+\.\d+(?:-[0-9A-Za-z.]+)?(?![\w.]*\d))"
    r"|(?P<port>\b(?:localhost|127\.0\.0\.1|0\.0\.0\.0|\[::1?\]):\d{2,5}\b)"
    r"|(?P<config>(?<![\w./-])[A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*)+=[^\s,;，。]+"
    r"|(?<![\w./-])[A-Z][A-Z0-9]*_[A-Z0-9_]+=[^\s,;，。]+)"
    r"|(?P<code>(?<![\w-])(?:E[A-Z]{3,12}|TS\d{4}|[A-Z][a-zA-Z]+Error"
    r"|[a-z]+(?:_[a-z]+){0,4}_(?:error|denied|forbidden|unauthorized|missing|not_found"
    r"|invalid|expired|exceeded)|(?:missing|invalid|no|insufficient)(?:_[a-z]+){1,4})(?![\w-]))"
    r"|(?P<path>(?<![\w/\\:.-])(?:[A-Za-z]:[\\/]|~/|\.{1,2}/|/)?(?:[\w.@-]+[\\/])+[\w@-]"
    r"[\w.@-]*\.[A-Za-z][\w]{0,9}(?![\w/\\])"
    r"|(?<![\w/\\:.-])[\w.@-]+(?:/[\w.@:-]+)+/[\w.@:]*[\d-][\w.@:-]*(?![\w/])"
    r"|(?<![\w/\\:.-])[A-Za-z][\w.-]*/(?=[\w.:-]*\d)(?=[\w.:-]*[A-Za-z])[\w.:-]+(?![\w/]))"
)
"""The values one whitespace-free run of a text may hold."""
_SIGNAL = re.compile(r"[/\\_#=@\d`]|[.:]\w|[A-Z]{2}|[a-z][A-Z]")
"""A run without any of these holds no value: most words are skipped for one search."""
_PHRASE = re.compile(
    r"(?P<port>\b[Pp]ort\s*[:=]?\s*(?:is\s+)?\d{2,5}\b|端口\s*[:：]?\s*\d{2,5})"
    r"|(?P<code>\bHTTP(?:/\d(?:\.\d)?)? \d{3}\b|\bstatus code \d{3}\b)"
)
"""Values that span a space: a port said in words, an HTTP status."""
_KINDS: Final[dict[str, Kind]] = {
    "url": "url", "uuid": "id", "color": "value", "constant": "id", "hash": "id", "name": "name",
    "prefixed": "id", "scope": "scope", "version": "version", "port": "port", "config": "config",
    "code": "error", "path": "path",
}
_SCOPE_CONTEXT = re.compile(
    r"scope|permission|grant|oauth|authori[sz]|权限|授权|范围|スコープ|권한", re.IGNORECASE
)
"""A ``word:word`` value is a permission scope only in a text that speaks of them."""
_ERROR_LINE = re.compile(
    r"error|fail|✗|×|✖|denied|forbidden|unauthori[sz]ed|not found|cannot|invalid|exception"
    r"|panic|traceback"
    r"|错误|失败|异常|拒绝|无权|未授权|エラー|失敗|오류|실패",
    re.IGNORECASE,
)
_TRAILING = ".,:;!?)]}'\"`>"
_SENTENCE_MARKS: Final = ".,;:!?"


def facts(text: str) -> list[tuple[Kind, str]]:
    """Each identifier or value in ``text`` as (kind, value), in order (a value said twice
    comes twice).

    A long text is read at its start and its end (:data:`SCAN_HEAD`, :data:`SCAN_TAIL`
    characters: a message states what matters first or last, a paste in between). It is read
    run by run (a run: text between whitespace, ``str.split`` in C); a plain word is passed
    over in C, any other run is searched once per distinct run in the process (a session
    repeats its paths and ids): one regex of every kind over a whole text costs ~10x more."""
    if len(text) > SCAN_HEAD + SCAN_TAIL:
        text = f"{text[:SCAN_HEAD]}\n{text[-SCAN_TAIL:]}"
    found: list[tuple[Kind, str]] = []
    scopes: bool | None = None
    marks = _SENTENCE_MARKS
    for run in text.split():
        # A plain word (lowercase or capitalized letters, a sentence's mark after it) is
        # most runs: told in C, no regex.
        if run.isalpha():
            if run.islower() or run.istitle():
                continue
        elif run[-1] in marks:
            word = run.rstrip(marks)
            if word.isalpha() and (word.islower() or word.istitle()):
                continue
        values = _run_facts(run)
        if not values:
            continue
        for kind, value in values:
            if kind == "scope":
                if scopes is None:
                    scopes = _SCOPE_CONTEXT.search(text) is not None
                if not scopes:
                    continue
            found.append((kind, value))
    if ("port " in text or "port:" in text or "port=" in text or "Port " in text
            or "HTTP" in text or "status code" in text or "端口" in text):
        found.extend((_KINDS[match.lastgroup or ""], match.group())
                     for match in _PHRASE.finditer(text))
    return found


@lru_cache(maxsize=4096)
def _run_facts(run: str) -> tuple[tuple[Kind, str], ...]:
    """The values in one whitespace-free ``run`` (none without a sign of one)."""
    if len(run) < 3 or _SIGNAL.search(run) is None:
        return ()
    found: list[tuple[Kind, str]] = []
    for match in _FACT.finditer(run):
        value = match.group().rstrip(_TRAILING)
        if 3 <= len(value) <= VALUE_CHARS:
            found.append((_KINDS[match.lastgroup or ""], value))
    return tuple(found)


_STATUS_LINE = re.compile(r'\s*"?(?:status|level|type|tool)"?\s*[:=]\s*"?\w+"?,?\s*$')
"""A structured result's ``"status": "error"`` line says nothing the next line does not."""


_ERROR_OBJECT = re.compile(r'\s*\{\s*"(?:error|errors|errorMessage)"\s*:')


def reports_error(text: str) -> bool:
    """Whether a tool result is a structured error report (a JSON object led by ``error``)."""
    return _ERROR_OBJECT.match(text) is not None


def first_error_line(text: str) -> str:
    """The first line of ``text`` that reports an error, stripped (``""``: none)."""
    for found in _ERROR_LINE.finditer(text):
        start = text.rfind("\n", 0, found.start()) + 1
        end = text.find("\n", found.end())
        line = text[start : end if end >= 0 else len(text)]
        if not _STATUS_LINE.fullmatch(line):
            return line.strip()[:ERROR_LINE_CHARS]
    return ""


def rank(source: str, count: int, order: int, total: int) -> float:
    """How much a value matters: who said it, how often, and how late (``order`` of
    ``total`` values, the latest highest)."""
    recency = (order + 1) / total if total else 0.0
    return SOURCE_WEIGHT.get(source, 1) * 2 + min(count, 5) + recency * 2
