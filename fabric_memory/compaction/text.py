"""Text helpers of the summary and the state: masking, byte-bounded clipping, collapsed
whitespace, an operation's target."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Final

import orjson

from ..redact import SIGNATURE_REACH, clean_head, mask_across, redact, redact_texts

TARGET_ARGS: Final = ("path", "command", "key", "id", "topic", "prefix")
"""An operation's target is its ref plus the first of these arguments it carries."""

ID_CHARS: Final = 128
"""An id or address is shown whole up to this many characters."""
_PLAIN_ID: Final = re.compile(rf"[\w.:/@+=~#-]{{1,{ID_CHARS}}}", re.ASCII)
_PLAIN_RUN: Final = re.compile(r"[\w.:/@+=~#-]*", re.ASCII)

_MASKED: ContextVar[dict[str, str] | None] = ContextVar("_MASKED", default=None)


@contextmanager
def masking_once() -> Iterator[None]:
    """Within the block, :func:`mask` masks each distinct text once: one compaction shows
    the same path, target or user text many times (a path per touch, a user's words as
    goal, status and turn). Nothing is kept past the block."""
    token = _MASKED.set({})
    try:
        yield
    finally:
        _MASKED.reset(token)


def mask(text: str) -> str:
    """``text`` with its secrets masked (:func:`~fabric_memory.redact.redact`)."""
    masked = _MASKED.get()
    if masked is None:
        return redact(text)
    done = masked.get(text)
    if done is None:
        done = masked[text] = redact(text)
    return done


def blocks_text(text: str, blocks: tuple[str, ...]) -> str:
    """A message's ``text`` (its ``blocks`` one per line; ``()``: a single block) with a
    secret cut between two blocks masked on both sides: masked whole, each block keeps
    what the other holds of it."""
    if not blocks:
        return text
    return "\n".join(mask_across(blocks))


def mask_all(texts: list[str]) -> list[str]:
    """:func:`mask` of each text, the prefilter run once over all of them (a stored state
    read back: written by another version, its texts may hold what today's rules mask)."""
    return redact_texts(texts)


def clip(text: str, max_bytes: int, marker: str = "...") -> str:
    """``text`` with its secrets masked, cut to at most ``max_bytes`` UTF-8 bytes (marker
    included), never inside a character.

    Every text the state takes from a session is bounded here or, kept whole (file paths,
    refs, tool names), masked by :func:`mask` where it enters the state: this is where the
    compaction masks secrets (docs/secrets.md), before the cut, which could otherwise leave
    part of one. The summary is laid out from the state's texts and is not masked again.
    """
    if len(text) > 2 * (max_bytes + SIGNATURE_REACH):  # (else no clean head to cut: see there)
        head = _clean_head_cut(text, max_bytes, marker)
        if head is not None:
            return head
    # :func:`mask` written out: a call less on the path every bounded text takes.
    cache = _MASKED.get()
    if cache is None:
        masked = redact(text)
    else:
        found = cache.get(text)
        masked = found if found is not None else cache.setdefault(text, redact(text))
    if len(masked) <= max_bytes and masked.isascii():  # (most texts: kept whole, as bounded)
        return masked
    return bounded(masked, max_bytes, marker)


def _clean_head_cut(text: str, max_bytes: int, marker: str) -> str | None:
    """:func:`clip` of a long ``text`` in which no secret starts in the first ``max_bytes``
    characters (as many bytes at least), without masking it: masked, the text would start
    with them and be longer, so the cut falls in them. None when that does not hold."""
    if len(text) > 2 * (max_bytes + SIGNATURE_REACH) and clean_head(text, max_bytes):
        return _cut(text[:max_bytes].encode(), max_bytes, marker)
    return None


def clip_collapsed(text: str, max_bytes: int) -> str:
    """``clip(collapse(text), max_bytes)``, collapsing only the start of a long text when
    the start decides it: ``collapse`` of a prefix is a prefix of ``collapse`` of the text,
    so once that start is longer than :func:`clip` needs to take its shortcut, the rest
    cannot change the result (a 9 KB assistant reply: ~6x cheaper)."""
    reach = 4 * (max_bytes + SIGNATURE_REACH)  # twice the length the shortcut asks for
    if len(text) > reach:
        head = _clean_head_cut(collapse(text[:reach]), max_bytes, "...")
        if head is not None:
            return head
    return clip(collapse(text), max_bytes)


def bounded(text: str, max_bytes: int, marker: str = "...") -> str:
    """``text`` cut to at most ``max_bytes`` UTF-8 bytes (marker included), never inside a
    character: :func:`clip` for text masked already."""
    if len(text) <= max_bytes and text.isascii():  # (isascii is O(1): no encoding needed)
        return text
    data = text.encode()
    if len(data) <= max_bytes:
        return text
    return _cut(data, max_bytes, marker)


def _cut(data: bytes, max_bytes: int, marker: str) -> str:
    """The start of ``data`` (a longer text's, at least ``max_bytes``) and ``marker``, in
    ``max_bytes`` at most."""
    room = max_bytes - len(marker.encode())
    if room <= 0:
        return ""
    return data[:room].decode("utf-8", "ignore") + marker


def utf8_size(text: str) -> int:
    """``len(text.encode())`` without encoding ASCII text (``isascii`` is O(1))."""
    return len(text) if text.isascii() else len(text.encode())


def collapse(text: str) -> str:
    """Whitespace runs (newlines included) as single spaces, none at either end.

    ``str.split()`` splits on exactly the characters a ``\\s`` pattern matches (checked
    for every code point), at a fraction of a regex substitution's cost."""
    return " ".join(text.split())


def target_of(args: Mapping[str, Any]) -> str:
    """The first of ``path|command|key|id|topic|prefix`` that ``args`` holds, as text."""
    for name in TARGET_ARGS:
        # ``in``, then one lookup: ~1/3 cheaper than a ``get`` call per name (most
        # operations name their target late or not at all).
        if name not in args:
            continue
        value = args[name]
        if value is None:
            continue
        if isinstance(value, str):  # (narrows without typing.cast, a Python call per target)
            return value
        kind = type(value)
        if kind is int or kind is float:
            return str(value)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)
    return ""


def target_key(ref: str, target: str) -> str:
    return f"{ref}\x00{target}"


def shown_id(value: str) -> str:
    """An entry id, address or session id as the summary shows it: as it is when plain
    (letters, digits, ``._:/@+=~#-``, at most :data:`ID_CHARS`), else as a JSON string, cut
    to :data:`ID_CHARS` characters: a host's id may hold a newline, a ``]`` or megabytes,
    and none of them may start a line or a section of the summary."""
    if _PLAIN_ID.fullmatch(value):
        return value
    return orjson.dumps(bounded_id(value)).decode()


def plain_ids(values: list[str]) -> bool:
    """Whether :func:`shown_id` shows every one of ``values`` (``""`` included) as it is: one
    regex over them all, so a section of plain ids (nearly always) costs no call per id."""
    return (_PLAIN_RUN.fullmatch("".join(values)) is not None
            and max(map(len, values), default=0) <= ID_CHARS)


def bounded_id(value: str) -> str:
    """An id the details store for display only (the session id), cut to :data:`ID_CHARS`
    characters."""
    return value if len(value) <= ID_CHARS else value[:ID_CHARS] + "..."


_SENTENCE_BREAK = re.compile(r"(?<=[.!?;])\s|(?<=[。！？；])")


def whole_or_ends(text: str, max_chars: int) -> str:
    """``text`` (its whitespace collapsed already; masked here) whole when it has at most
    ``max_chars`` characters; else its start and its end, each cut at a sentence break when
    one is near (any script: ``.!?;`` before a space, or ``。！？；``), joined by `` ... ``."""
    text = mask(text)
    if len(text) <= max_chars:
        return text
    head_room = max_chars * 2 // 3
    tail_room = max_chars - head_room - 5
    head = text[:head_room]
    breaks = [match.end() for match in _SENTENCE_BREAK.finditer(head)]
    if breaks and breaks[-1] > head_room // 2:
        head = head[: breaks[-1]]
    tail = text[-tail_room:]
    found = _SENTENCE_BREAK.search(tail)
    if found and found.end() < tail_room // 2:
        tail = tail[found.end() :]
    return f"{head.rstrip()} ... {tail.lstrip()}"
