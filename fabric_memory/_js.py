"""JavaScript semantics, in one place: how JavaScript prints a number, measures a string,
serializes JSON (``JSON.stringify``: its text and its UTF-8 size) and reads and writes
an ISO time (``new Date(iso).getTime()``, ``Date.prototype.toISOString``).

The trace guard measures traces as ``JSON.stringify`` would; the compaction
preparation counts characters as Pi does (UTF-16 code units of ``JSON.stringify``
text). Both get those numbers from here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final, TypeGuard

import orjson

MAX_SAFE_INTEGER: Final = 2**53 - 1
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


# --- numbers and sizes ---------------------------------------------------------------


def is_count(value: object) -> TypeGuard[int]:
    """A count as JSON from a JavaScript host can hold it exactly: an integer from 0 to
    2^53-1. A larger one (a damaged or hand-edited entry) would overflow as it grows."""
    return type(value) is int and 0 <= value <= MAX_SAFE_INTEGER


def js_number(value: float) -> str:
    """``Number.prototype.toString`` of a finite double (what ``JSON.stringify`` writes)."""
    if value == 0:
        return "0"
    text = repr(value)
    sign = ""
    if text[0] == "-":
        sign, text = "-", text[1:]
    mantissa, _, exponent = text.partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    point = len(whole) + (int(exponent) if exponent else 0)
    significant = digits.lstrip("0")
    point -= len(digits) - len(significant)
    significant = significant.rstrip("0")
    k = len(significant)
    if k <= point <= 21:
        body = significant + "0" * (point - k)
    elif 0 < point <= 21:
        body = f"{significant[:point]}.{significant[point:]}"
    elif -6 < point <= 0:
        body = "0." + "0" * -point + significant
    else:
        power = point - 1
        head = significant[0] + ("." + significant[1:] if k > 1 else "")
        body = f"{head}e{'+' if power >= 0 else '-'}{abs(power)}"
    return sign + body


def js_integer(value: int) -> str:
    """How JavaScript prints a JSON integer literal (beyond 2^53 it was rounded to a double)."""
    if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        return str(value)
    return js_number(float(value))


def float_delta(value: float) -> int:
    """JavaScript's length for a float minus orjson's (JS writes ``1.0`` as ``1``)."""
    if value.is_integer() and -1e16 < value < 1e16:  # the common case: orjson adds ".0"
        return -3 if value == 0 and math.copysign(1.0, value) < 0 else -2
    return len(js_number(value)) - len(orjson.dumps(value))


def int_delta(value: int) -> int:
    return len(js_integer(value)) - len(str(value))


_SURROGATE = re.compile("[\ud800-\udfff]")


def js_string_size(value: str) -> int:
    try:
        return len(orjson.dumps(value))
    except orjson.JSONEncodeError:
        # JavaScript strings are UTF-16: a surrogate pair is one character (4 UTF-8
        # bytes); JSON.stringify escapes a lone surrogate as ``\udXXX`` (6 bytes).
        joined = value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
        lone = len(_SURROGATE.findall(joined))
        return len(orjson.dumps(_SURROGATE.sub("", joined))) + 6 * lone


def _stringify_size(value: object) -> int:
    """Exact ``JSON.stringify`` UTF-8 size, in Python, for what orjson cannot encode."""
    if type(value) is str:
        return js_string_size(value)
    if value is None or value is True:
        return 4
    if value is False:
        return 5
    if type(value) is int:
        return len(js_integer(value))
    if type(value) is float:
        return len(js_number(value))
    if type(value) is list:
        return 2 + sum(map(_stringify_size, value)) + max(len(value) - 1, 0)
    if type(value) is dict:
        members = sum(js_string_size(k) + 1 + _stringify_size(v) for k, v in value.items())
        return 2 + members + max(len(value) - 1, 0)
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def stringify_size(value: object, delta: int = 0) -> int:
    """``JSON.stringify(value)``'s UTF-8 size, for a JSON value whose numbers were checked:
    ``delta`` is their correction (the sum of :func:`float_delta` and :func:`int_delta`),
    so the common case is one ``orjson.dumps``."""
    try:
        return len(orjson.dumps(value)) + delta
    except orjson.JSONEncodeError:  # lone surrogates, integers beyond 64 bits
        return _stringify_size(value)


# --- JSON.stringify text and string lengths --------------------------------------------


def js_length(text: str) -> int:
    """``text.length`` in JavaScript: the number of UTF-16 code units."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def js_stringify(value: Any) -> str:
    """``JSON.stringify(value)`` for a parsed JSON value, with JavaScript's number
    formatting and key order (integer-like keys first, ascending).

    Iterative: parsed JSON may nest ~1,000 deep (orjson's limit), past Python's recursion.
    """
    parts: list[str] = []
    stack: list[tuple[bool, Any]] = [(False, value)]
    while stack:
        literal, item = stack.pop()
        if literal:
            parts.append(item)
            continue
        todo: list[tuple[bool, Any]]
        if isinstance(item, Mapping):
            todo = [(True, "{")]
            for index, key in enumerate(_js_keys(item)):
                todo += [(True, ("," if index else "") + _js_scalar(key) + ":"), (False, item[key])]
            todo.append((True, "}"))
        elif isinstance(item, list | tuple):
            todo = [(True, "[")]
            for index, element in enumerate(item):
                todo += [(True, ","), (False, element)] if index else [(False, element)]
            todo.append((True, "]"))
        else:
            parts.append(_js_scalar(item))
            continue
        stack.extend(reversed(todo))
    return "".join(parts)


def js_stringify_length(value: Any) -> int:
    """``JSON.stringify(value).length`` (UTF-16 code units) of a parsed JSON value.

    Key order changes no length, so orjson's text and a correction for JavaScript's
    numbers give it: 6x faster than measuring :func:`js_stringify`'s text (0.35 vs 2.0 ms
    for the tool calls of a 1 MiB session), which is measured only for what orjson cannot
    encode (integers beyond 64 bits, nesting past its limit).
    """
    try:
        data = orjson.dumps(value)
    except orjson.JSONEncodeError:
        return js_length(js_stringify(value))
    size = len(data) if data.isascii() else js_length(data.decode())
    return size + _number_delta(value)


def _number_delta(value: Any) -> int:
    """JavaScript's length of the numbers in ``value`` minus orjson's (both write an
    infinity as ``null``)."""
    delta = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):  # orjson encoded it: no other mapping
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
        elif type(item) is float:
            delta += float_delta(item) if math.isfinite(item) else 0
        elif type(item) is int and not -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
            delta += int_delta(item)
    return delta


def _js_scalar(value: Any) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return orjson.dumps(value).decode()
    if isinstance(value, int):
        return js_integer(value)
    if isinstance(value, float):
        # A number past the double range parses as an infinity; JSON.stringify writes null.
        return js_number(value) if math.isfinite(value) else "null"
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def _js_keys(mapping: Mapping[str, Any]) -> list[str]:
    indices = sorted((key for key in mapping if _is_array_index(key)), key=int)
    return indices + [key for key in mapping if not _is_array_index(key)]


def _is_array_index(key: str) -> bool:
    return (
        key.isascii()
        and key.isdigit()
        and (key == "0" or not key.startswith("0"))
        and int(key) < 2**32 - 1
    )


def js_time(value: Any) -> int | None:
    """``new Date(value).getTime()``; ``None`` where JavaScript gets ``NaN``."""
    if isinstance(value, int | float):
        return int(value) if math.isfinite(value) and abs(value) <= 8.64e15 else None
    if not isinstance(value, str):
        return None
    return iso_ms(value)


def iso_ms(text: str) -> int | None:
    """Epoch milliseconds of an ISO-8601 time (``Z`` or an offset; without one, UTC), or
    None when it is not one. Exact integer arithmetic: no float rounding."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def iso_time(moment: datetime) -> str:
    """``Date.prototype.toISOString()``: UTC, milliseconds, ``Z``."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


