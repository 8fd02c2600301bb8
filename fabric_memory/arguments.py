"""What every door checks in a caller's values before any work is done with them: the JSON
type of each request value, and the length of path-like and id-like values.

A path-like value (a sessions root, an index, a session named by path) is bounded before
it is used as a path: resolving a path takes time quadratic in its number of components,
so a megabyte value stalled a process for minutes. Ids share the bound (a session is named
by id or by path; entry ids and addresses are compared with indexed ones). Each check is
linear in the value's length at worst, and an error quotes at most
:data:`~fabric_memory.errors.SHOWN_CHARS` characters of the value.

The JSON request shapes (recall's and expand's: what a hit's ``follow`` and a page's
``next`` hold, what the Pi tools and the MCP server receive) are checked key by key
against their :data:`Kind`, so a wrong type is one usage error naming its JSON path, and a
boolean is a real boolean (the string ``"false"`` is an error, never true).

Numeric limits follow one rule in every door (:func:`bounded`): a count above its maximum is
clamped to it and the answer says so under ``clamped`` (``{"maxChars": [100000, 24000]}``:
asked, used), so a model that asks for too much gets the most allowed instead of a lost
call; below the minimum, or not a whole number, it is a usage error.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any, Literal

from .errors import UsageError, clipped

MAX_NAME_CHARS = 4096
"""Longest path-like or id-like value (Linux's PATH_MAX)."""
I64_MIN, I64_MAX = -(2**63), 2**63 - 1
"""The integers a request may carry: what the index (Tantivy's i64 fields) can hold."""

Kind = Literal["text", "name", "integer", "boolean", "names", "integers"]
"""``text``: any string; ``name``: a path-like or id-like string (bounded, no NUL);
``integer``: a JSON integer in the i64 range (never a boolean or a float); ``boolean``: true
or false; ``names`` / ``integers``: an array of those."""

_EXPECTED = {"text": "a string", "name": "a string", "integer": "an integer",
             "boolean": "true or false", "names": "an array of strings",
             "integers": "an array of integers"}


MAX_JSON_BYTES = 16 * 1024 * 1024
"""Longest JSON text a door reads (a request line, a tool's arguments): our requests are a
few kilobytes."""


def json_value(text: str) -> Any:
    """Parse ``text`` as a door reads JSON: with the standard library's parser, which reads a
    lone surrogate escape (so that it can be named, :func:`lone_surrogate`). Raises
    ``ValueError`` with a one-line reason."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.pos >= len(text.rstrip()):
            raise ValueError(f"{exc.msg} at the end of the text") from None
        raise ValueError(f"{exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise ValueError("nested too deeply") from None


def lone_surrogate(value: Any, path: str = "$") -> str | None:
    """The JSON path of the first string (or key) in ``value`` holding a lone surrogate (a
    ``\\udc80`` escape alone, which no UTF-8 text can carry), or None."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return where
        elif isinstance(item, dict):
            for key, child in reversed(item.items()):
                shown = (f"{where}.{key}" if key.isidentifier()
                         else f"{where}[{json.dumps(key)}]")
                if _SURROGATE.search(key):
                    return shown
                stack.append((child, shown))
        elif isinstance(item, list):
            stack.extend((child, f"{where}[{n}]") for n, child in reversed(list(enumerate(item))))
    return None


_SURROGATE = re.compile("[\ud800-\udfff]")


def check_name(option: str, value: str | os.PathLike[str] | None) -> None:
    """Refuse a path-like or id-like value longer than :data:`MAX_NAME_CHARS` or holding a
    NUL character (no path or id does), before anything uses it; None passes."""
    if value is None:
        return
    text = os.fspath(value)
    if not isinstance(text, str):
        raise UsageError(f"{option} {clipped(text)}: expected a string")
    if len(text) > MAX_NAME_CHARS:
        raise UsageError(f"{option} {clipped(text)}: too long; the limit is {MAX_NAME_CHARS} "
                         "characters")
    if "\0" in text:
        raise UsageError(f"{option} {clipped(text)}: holds a NUL character, which no path "
                         "or id can")


def check_names(*given: tuple[str, str | os.PathLike[str] | None]) -> None:
    """:func:`check_name` for each ``(option, value)``."""
    for option, value in given:
        check_name(option, value)


def checked_request(
    what: str, request: Mapping[str, Any], kinds: Mapping[str, Kind]
) -> dict[str, Any]:
    """``request`` (a JSON object) after checking that each key is one of ``kinds`` and each
    value is of its kind; a null value counts as absent and is dropped."""
    unknown = [key for key in request if key not in kinds]
    if unknown:
        more = f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else ""
        raise UsageError(f"{what}: unknown key {clipped(unknown[0])}{more}; the keys are "
                         f"{', '.join(kinds)}")
    checked: dict[str, Any] = {}
    for key, value in request.items():
        if value is not None:
            _check(what, f"$.{key}", kinds[key], value)
            checked[key] = value
    return checked


def _check(what: str, where: str, kind: Kind, value: Any) -> None:
    if kind in ("names", "integers"):
        if not isinstance(value, list):
            raise _wrong(what, where, kind, value)
        item: Kind = "name" if kind == "names" else "integer"
        for position, element in enumerate(value):
            _check(what, f"{where}[{position}]", item, element)
    elif kind in ("text", "name"):
        if not isinstance(value, str):
            raise _wrong(what, where, kind, value)
        if kind == "name":
            check_name(f"{what}: {where}", value)
    elif kind == "integer":
        if not isinstance(value, int) or isinstance(value, bool):
            raise _wrong(what, where, kind, value)
        if not I64_MIN <= value <= I64_MAX:
            raise UsageError(f"{what}: {where}: {clipped(value)} is past the 64-bit integer "
                             "range")
    elif not isinstance(value, bool):
        raise _wrong(what, where, kind, value)


def _wrong(what: str, where: str, kind: Kind, value: Any) -> UsageError:
    return UsageError(f"{what}: {where}: expected {_EXPECTED[kind]}, got {clipped(value)}")


Clamped = dict[str, list[int]]
"""Request key → [asked, used], for each value that was clamped."""


def bounded(value: object, key: str, option: str, low: int, high: int, clamped: Clamped) -> int:
    """``value`` within ``low..high``: clamped (noted in ``clamped`` under ``key``) above
    ``high``; a :class:`UsageError` naming ``option`` below ``low``, past :data:`I64_MAX`
    (no count a caller means, and the note could not carry it as a JSON integer) or when not
    an integer."""
    if type(value) is not int:  # bool is an int to Python, never a count to a caller
        raise UsageError(f"{option} {clipped(str(value))}: must be a whole number between {low} "
                         f"and {high}")
    if not low <= value <= I64_MAX:
        raise UsageError(f"{option} {value}: must be between {low} and {high}")
    if value > high:
        clamped[key] = [value, high]
        return high
    return value


def check_range(option: str, value: int, low: int, high: int) -> None:
    """Refuse an integer option outside ``low``..``high``."""
    if not low <= value <= high:
        raise UsageError(f"{option} {clipped(value)}: must be between {low} and {high}")
