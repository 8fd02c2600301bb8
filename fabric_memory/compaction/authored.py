"""What a user wrote themselves, apart from what they pasted: a user message often carries
a code fence, a terminal transcript, a stack trace, a JSON line or a copied document
section, and none of that is the user's goal or a constraint they set.

A message is read by paragraphs (blank-line separated). A paragraph is pasted when it is
inside a code fence (an unclosed fence runs to the paragraph's end), starts with a
Markdown heading, a table row, an error report or a JSON object, or when at least half of
its lines look like output (prompts, stack frames, JSON, box drawing, diff lines, indented
code). A message that opens with a pasted paragraph is a pasted document up to its last
pasted paragraph.
"""

from __future__ import annotations

import re
from typing import Final

_FENCE: Final = "```"
_HEADING = re.compile(r"#{1,6}\s|\|.*\|")
_OUTPUT_LINE = re.compile(
    r"\s*(?:at\s+\S+.*[(:]\d|[➜$❯%]\s|[{\[]\"|\{\"|[│┌└├─┐┘┬┴┼═║╔╗╚╝↑↓⠇]|[+-]\s*\d+\s|"
    r"(?:Error|TypeError|node:|npm ERR|Traceback|File \")|>\s)"
    r"|\s{4,}\S|\t",
)
_OUTPUT_LEAD = re.compile(r"\s*(?:\w*Error\b|Traceback|node:|npm ERR|\{\"|\[\{)")
"""A paragraph led by an error report or a JSON object is output, however it wraps."""
_MAYBE_PASTED = re.compile(
    rf"^(?:\s*(?:{_HEADING.pattern})|{_OUTPUT_LEAD.pattern}|(?:{_OUTPUT_LINE.pattern}))",
    re.MULTILINE,
)
"""A line that could make its paragraph pasted: a message without one is all the user's."""
_SLASH_COMMAND = re.compile(r"/[\w:-]+(?:\s+\S+)?")
_BARE_LINK = re.compile(r"(?:https?://|@|/|~/)\S+")
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)|[。！？]")


def _pasted(paragraph: str) -> bool:
    lead = paragraph.lstrip()
    if lead.startswith(_FENCE) or _HEADING.match(lead) or _OUTPUT_LEAD.match(lead):
        return True
    lines = [line for line in paragraph.split("\n") if line.strip()]
    looks = sum(1 for line in lines if _OUTPUT_LINE.match(line))
    if not lines or 2 * looks < len(lines):
        return False
    # One output-like line alone is pasted only when long (a short one is often the user's).
    return looks >= 2 or len(lines[0]) > 80


def authored(text: str) -> str:
    """``text`` without its pasted paragraphs (paragraphs rejoined by blank lines)."""
    if "\n" not in text and _FENCE not in text:  # one line: the usual message
        return "" if len(text) > 80 and _OUTPUT_LINE.match(text) else text
    if _FENCE not in text and _MAYBE_PASTED.search(text) is None:  # (one search: most messages)
        return text
    paragraphs: list[tuple[str, bool]] = []
    fenced = False
    for paragraph in re.split(r"\n\s*\n", text):
        fences = paragraph.count(_FENCE)
        pasted = fenced or fences > 0 or _pasted(paragraph)
        if fences % 2:
            # An odd count opens (or closes) a fence; an unclosed one ends with the paragraph
            # unless a later paragraph closes it.
            fenced = not fenced and _closes_later(text, paragraph)
        paragraphs.append((paragraph, pasted))
    if paragraphs and paragraphs[0][1]:
        last = max(at for at, (_, pasted) in enumerate(paragraphs) if pasted)
        paragraphs = [(p, True) if at <= last else (p, pasted)
                      for at, (p, pasted) in enumerate(paragraphs)]
    return "\n\n".join(p.strip() for p, pasted in paragraphs if not pasted and p.strip())


def _closes_later(text: str, paragraph: str) -> bool:
    """Whether a fence opened in ``paragraph`` is closed further on in ``text``."""
    start = text.find(paragraph) + len(paragraph)
    return _FENCE in text[start:]


def is_request(text: str) -> bool:
    """Whether a user's (collapsed, authored) text asks for something: not a bare slash
    command, link or path, not empty."""
    return bool(text) and not (_SLASH_COMMAND.fullmatch(text) or _BARE_LINK.fullmatch(text))


def sentences_within(text: str, max_bytes: int) -> str:
    """The longest run of ``text``'s first sentences within ``max_bytes`` UTF-8 bytes; the
    whole text when it fits, and its start when even the first sentence does not (the
    caller then clips it)."""
    if len(text.encode()) <= max_bytes:
        return text
    cut = 0
    for end in _SENTENCE_END.finditer(text):
        if len(text[: end.end()].encode()) > max_bytes:
            break
        cut = end.end()
    return text[:cut] if cut else text


_HOST_BLOCK = re.compile(
    r"^(?:Conversation info|Sender|Thread starter|Replied message|Forwarded message)"
    r" \(untrusted[^)]*\):\s*```(?:json)?\n.*?\n```\s*",
    re.DOTALL | re.MULTILINE,
)
_HOST_LINE = re.compile(r"^\[message_id: [^\]\n]*\]\s*", re.MULTILINE)
_HOST_TIME = re.compile(r"^\[(?:[A-Z][a-z]{2} )?\d{4}-\d\d-\d\d[ T][\d:]{4,8}[^\]\n]{0,24}\]\s*",
                        re.MULTILINE)
_SENDER_ID = re.compile(r'"sender_id":\s*"([^"\n]{1,80})"')


def without_host_metadata(text: str) -> str:
    """``text`` without what a host prepends to a user's message: "Conversation info
    (untrusted metadata)" and "Sender (untrusted metadata)" blocks, ``[message_id: …]``
    lines, a leading ``[Wed 2026-03-25 08:29 GMT+8]`` time and the sender id a chat host
    puts before the words (``ou_…: ``)."""
    if "(untrusted" not in text and "[message_id:" not in text and not text.startswith("["):
        return text
    sender = _SENDER_ID.search(text)
    text = _HOST_LINE.sub("", _HOST_BLOCK.sub("", text))
    text = _HOST_TIME.sub("", text.lstrip())
    if sender:
        text = re.sub(rf"^{re.escape(sender.group(1))}: ", "", text, flags=re.MULTILINE)
    return text.strip()
