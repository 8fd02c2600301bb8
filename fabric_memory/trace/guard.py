"""The trace guard: whether a value is a Fabric execution trace V1, and if not, why.

:func:`trace_rejection` names the first rule a value breaks as ``"<JSON path>:
<reason>"``. The common case (a well-formed trace) takes one fast pass without
reasons; anything unusual takes the exact path that finds the reason. Both accept
exactly the same values. Sizes are ``JSON.stringify`` sizes (:mod:`fabric_memory._js`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Final, cast

import orjson

from .._js import float_delta, int_delta, js_number, stringify_size
from .shapes import (
    COUNT_KEY_SET,
    COUNT_KEYS,
    FAILURE_STAGES,
    JSON_MAX_DEPTH,
    MAX_SAFE_INTEGER,
    OPERATION_KEYS,
    OPERATION_REQUIRED,
    OPTIONAL_STRINGS,
    OUTCOMES,
    TRACE_KEYS,
    TRACE_KINDS,
    TRACE_MAX_BYTES,
    TRACE_REQUIRED,
    FabricExecutionTraceV1,
)

# --- rejection reasons ---------------------------------------------------------------

Failure = tuple[str, str]
"""(JSON path relative to the checked value, what is wrong)."""

_PLAIN_KEY = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*\Z")


def key_path(key: str) -> str:
    return key if _PLAIN_KEY.match(key) else "[" + orjson.dumps(key[:64]).decode() + "]"


def json_path(prefix: str, rest: str) -> str:
    if not rest:
        return prefix
    if not prefix or rest.startswith("["):
        return prefix + rest
    return f"{prefix}.{rest}"


def _member(key: str, failure: Failure) -> Failure:
    return (json_path(key_path(key), failure[0]), failure[1])


def describe(value: object) -> str:
    """A short, JSON-flavoured name for what was found (values only when short scalars)."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    kind = type(value)
    if kind is str:
        text = cast(str, value)
        if len(text) <= 40:
            return _quote(text)
        return f"a string of {len(text)} characters"
    if kind is int:
        return str(value) if abs(cast(int, value)) < 10**30 else "a huge integer"
    if kind is float:
        number = cast(float, value)
        return js_number(number) if math.isfinite(number) else repr(number)
    if kind is list:
        return "an array"
    if kind is dict:
        return "an object"
    return f"a Python {kind.__name__}"


def _quote(text: object) -> str:
    if type(text) is not str:
        return describe(text)
    try:
        return orjson.dumps(text).decode()
    except orjson.JSONEncodeError:
        return repr(text)


# --- the guard -----------------------------------------------------------------------


def json_failure(
    value: object, depth: int, delta: list[int], max_depth: int | None = JSON_MAX_DEPTH
) -> Failure | None:
    """Why ``value`` (sitting at ``depth``) is not valid trace JSON, or None.

    Adds the JavaScript-vs-orjson size correction of every number to ``delta[0]``.
    """
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return None
    if kind is int:
        number = cast(int, value)
        if -MAX_SAFE_INTEGER <= number <= MAX_SAFE_INTEGER:
            return None
        try:
            delta[0] += int_delta(number)
        except OverflowError:
            return ("", "number is not finite")
        return None
    if kind is float:
        real = cast(float, value)
        if not math.isfinite(real):
            return ("", "number is not finite")
        delta[0] += float_delta(real)
        return None
    if kind is not dict and kind is not list:
        return ("", f"not a JSON value ({describe(value)})")
    if max_depth is not None and depth > max_depth:
        return ("", f"container nested deeper than depth {max_depth}")
    inner = depth + 1
    if kind is dict:
        for key, item in cast(dict[object, object], value).items():
            if type(key) is not str:
                return ("", f"object key {describe(key)} is not a string")
            item_kind = type(item)
            if item_kind is str or item_kind is bool or item is None:
                continue
            failure = json_failure(item, inner, delta, max_depth)
            if failure is not None:
                return _member(key, failure)
        return None
    for index, item in enumerate(cast(list[object], value)):
        item_kind = type(item)
        if item_kind is str or item_kind is bool or item is None:
            continue
        failure = json_failure(item, inner, delta, max_depth)
        if failure is not None:
            return (json_path(f"[{index}]", failure[0]), failure[1])
    return None


def _safe_integer(value: object, delta: list[int]) -> bool:
    """A non-negative safe integer in JavaScript terms (``3.0`` and ``-0`` count, bools never)."""
    kind = type(value)
    if kind is int:
        return 0 <= cast(int, value) <= MAX_SAFE_INTEGER
    if kind is float:
        number = cast(float, value)
        if number.is_integer() and 0 <= number <= MAX_SAFE_INTEGER:
            delta[0] += float_delta(number)
            return True
    return False


def _keys_failure(
    value: dict[object, object], allowed: frozenset[str], required: Iterable[str]
) -> Failure | None:
    """Keys only from ``allowed`` (``__proto__`` is an ordinary key), all of ``required``."""
    for key in value:
        if type(key) is not str or key not in allowed:
            return ("", f"unexpected key {_quote(key)}")
    for key in required:
        if key not in value:
            return (key, "missing")
    return None


def _operation_failure(value: object, delta: list[int]) -> Failure | None:
    if type(value) is not dict:
        return ("", f"expected an operation object, got {describe(value)}")
    op = cast(dict[object, object], value)
    failure = _keys_failure(op, OPERATION_KEYS, OPERATION_REQUIRED)
    if failure is not None:
        return failure
    if type(op["type"]) is not str or op["type"] != "call":
        return ("type", f'expected "call", got {describe(op["type"])}')
    if not _safe_integer(op["sequence"], delta):
        got = describe(op["sequence"])
        return ("sequence", f"expected a non-negative safe integer, got {got}")
    if type(op["ref"]) is not str:
        return ("ref", f"expected a string, got {describe(op['ref'])}")
    args = op["args"]
    if type(args) is not dict:
        return ("args", f"expected a plain object, got {describe(args)}")
    failure = json_failure(args, 0, delta)
    if failure is not None:
        return (json_path("args", failure[0]), failure[1])
    outcome = op["outcome"]
    if type(outcome) is not str or outcome not in OUTCOMES:
        return ("outcome", f"expected one of {_ENUM_OUTCOMES}, got {describe(outcome)}")
    for key in OPTIONAL_STRINGS:
        if key in op and type(op[key]) is not str:
            return (key, f"expected a string, got {describe(op[key])}")
    if "failureStage" in op:
        stage = op["failureStage"]
        if type(stage) is not str or stage not in FAILURE_STAGES:
            return ("failureStage", f"expected one of {_ENUM_STAGES}, got {describe(stage)}")
    if "resultTruncated" in op and type(op["resultTruncated"]) is not bool:
        return ("resultTruncated", f"expected a boolean, got {describe(op['resultTruncated'])}")
    if "result" in op:
        failure = json_failure(op["result"], 0, delta)
        if failure is not None:
            return (json_path("result", failure[0]), failure[1])
    return None


_ENUM_OUTCOMES: Final = "succeeded|failed|aborted|timed_out"
_ENUM_STAGES: Final = "resolve|prepare|validate|approve|invoke|guard"


def _is_number_one(value: object, delta: list[int]) -> bool:
    kind = type(value)
    if kind is int:
        return value == 1
    if kind is float and value == 1.0:
        delta[0] += float_delta(1.0)
        return True
    return False


def structure_failure(value: object, delta: list[int]) -> Failure | None:
    """Every trace rule except the size bound."""
    if type(value) is not dict:
        return ("", f"expected a trace object, got {describe(value)}")
    trace = cast(dict[object, object], value)
    failure = _keys_failure(trace, TRACE_KEYS, TRACE_REQUIRED)
    if failure is not None:
        return failure
    kind = trace["kind"]
    if type(kind) is not str or kind not in TRACE_KINDS:
        return ("kind", f"unknown kind {describe(kind)}")
    if not _is_number_one(trace["version"], delta):
        return ("version", f"unknown version {describe(trace['version'])} (expected the number 1)")
    outcome = trace["outcome"]
    if type(outcome) is not str or outcome not in OUTCOMES:
        return ("outcome", f"expected one of {_ENUM_OUTCOMES}, got {describe(outcome)}")
    phases = trace["phases"]
    if type(phases) is not list:
        return ("phases", f"expected an array of strings, got {describe(phases)}")
    for index, phase in enumerate(cast(list[object], phases)):
        if type(phase) is not str:
            return (f"phases[{index}]", f"expected a string, got {describe(phase)}")
    operations = trace["operations"]
    if type(operations) is not list:
        return ("operations", f"expected an array, got {describe(operations)}")
    previous: int | float = -1
    for index, op in enumerate(cast(list[object], operations)):
        failure = _operation_failure(op, delta)
        if failure is not None:
            return (json_path(f"operations[{index}]", failure[0]), failure[1])
        sequence = cast(int | float, cast(dict[str, object], op)["sequence"])
        if sequence <= previous:
            return (
                f"operations[{index}].sequence",
                f"not strictly increasing ({describe(sequence)} after {describe(previous)})",
            )
        previous = sequence
    counts = trace["counts"]
    if type(counts) is not dict:
        return ("counts", f"expected an object, got {describe(counts)}")
    counts_map = cast(dict[object, object], counts)
    failure = _keys_failure(counts_map, COUNT_KEY_SET, COUNT_KEYS)
    if failure is not None:
        return (json_path("counts", failure[0]), failure[1])
    for key in COUNT_KEYS:
        if not _safe_integer(counts_map[key], delta):
            return (
                f"counts.{key}",
                f"expected a non-negative safe integer, got {describe(counts_map[key])}",
            )
    if "error" in trace and type(trace["error"]) is not str:
        return ("error", f"expected a string, got {describe(trace['error'])}")
    return None


_EXACT_TYPES: Final = orjson.OPT_PASSTHROUGH_SUBCLASS
"""orjson refuses a subclass of ``str``, ``int``, ``dict`` or ``list`` with this option (and
any ``float`` subclass always), so one ``dumps`` proves every value is of an exact JSON type."""


def _plain_trace_size(value: object) -> int | None:
    """The common path of :func:`_trace_failure` in one pass, without reasons.

    Returns the serialized size of a trace that passes every structural rule, or
    None to leave the decision (and the reason) to the exact check. It accepts only
    what the exact check accepts. The closing ``orjson.dumps`` (which the size needs
    anyway) proves every key and value is of an exact JSON type, so a value compared
    with a string or looked up in a set of strings needs no type check of its own;
    one that is neither (an unhashable value, an odd object) raises, which also means
    "take the exact path". Keys are counted rather than matched against the allowed
    names: the required five are read, each optional one present is checked, and any
    key left over is unknown. Numbers written as floats (``1.0``), nested arguments
    with unusual values, and anything else uncommon simply take the exact path.
    """
    if type(value) is not dict or not TRACE_KEYS.issuperset(value):
        return None
    try:
        kind, version, outcome = value["kind"], value["version"], value["outcome"]
        phases, operations, counts = value["phases"], value["operations"], value["counts"]
        if (
            kind not in TRACE_KINDS
            or type(version) is not int or version != 1
            or outcome not in OUTCOMES
            or type(phases) is not list or type(operations) is not list or type(counts) is not dict
            or ("error" in value and type(value["error"]) is not str)
            or len(counts) != len(COUNT_KEYS) or not COUNT_KEY_SET.issuperset(counts)
        ):
            return None
        for phase in phases:
            if type(phase) is not str:
                return None
        for count in counts.values():
            if type(count) is not int or not 0 <= count <= MAX_SAFE_INTEGER:
                return None
        delta = 0
        previous = -1
        outcomes, stages, largest = OUTCOMES, FAILURE_STAGES, MAX_SAFE_INTEGER
        for op in operations:
            sequence, ref, args = op["sequence"], op["ref"], op["args"]
            if (
                op["type"] != "call"
                or type(sequence) is not int or not previous < sequence <= largest
                or type(ref) is not str or type(args) is not dict
                or op["outcome"] not in outcomes
            ):
                return None
            previous = sequence
            for item in args.values():
                item_kind = type(item)
                if item_kind is str or item_kind is bool or item is None:
                    continue
                if item_kind is int and -largest <= item <= largest:
                    continue
                correction = [0]
                if json_failure(item, 1, correction) is not None:
                    return None
                delta += correction[0]
            unread = len(op) - 5  # keys beyond the required five
            if not unread:
                continue
            # Most operations carry exactly provider and action besides those.
            if unread == 2 and type(op.get("provider")) is str and type(op.get("action")) is str:
                continue
            if "provider" in op:
                if type(op["provider"]) is not str:
                    return None
                unread -= 1
            if "action" in op:
                if type(op["action"]) is not str:
                    return None
                unread -= 1
            if "error" in op:
                if type(op["error"]) is not str:
                    return None
                unread -= 1
            if "failureStage" in op:
                if op["failureStage"] not in stages:
                    return None
                unread -= 1
            if "resultTruncated" in op:
                if type(op["resultTruncated"]) is not bool:
                    return None
                unread -= 1
            if "result" in op:
                correction = [0]
                if json_failure(op["result"], 0, correction) is not None:
                    return None
                delta += correction[0]
                unread -= 1
            if unread:  # a key that is not an operation key
                return None
        return len(orjson.dumps(value, option=_EXACT_TYPES)) + delta
    except Exception:  # a missing key, a non-JSON value, an odd object: the exact path decides
        return None


def _trace_failure(value: object) -> Failure | None:
    size = _plain_trace_size(value)
    if size is None:
        delta = [0]
        failure = structure_failure(value, delta)
        if failure is not None:
            return failure
        size = stringify_size(value, delta[0])
    if size > TRACE_MAX_BYTES:
        return ("", f"serialized size {size} bytes exceeds {TRACE_MAX_BYTES} (512 KiB)")
    return None


def trace_rejection(value: object) -> str | None:
    """Why ``value`` is not a V1 trace, as ``"<JSON path>: <reason>"``; None when it is one.

    Never raises: anything unexpected is itself a rejection.
    """
    try:
        failure = _trace_failure(value)
    except Exception as error:  # a guard never raises, whatever it is handed
        return f"$: unreadable value ({type(error).__name__})"
    if failure is None:
        return None
    return f"{failure[0] or '$'}: {failure[1]}"


def is_fabric_execution_trace_v1(value: object) -> bool:
    """True when ``value`` passes every rule of docs/trace.md#guard-rules (never raises)."""
    try:
        return _trace_failure(value) is None
    except Exception:
        return False


def is_fabric_execution_trace_operation_v1(value: object) -> bool:
    """True when ``value`` is one well-formed trace operation (never raises)."""
    try:
        return _operation_failure(value, [0]) is None
    except Exception:
        return False


def read_fabric_execution_trace_v1(value: object) -> FabricExecutionTraceV1 | None:
    """``value`` itself when it is a V1 trace, else None (never raises, never copies)."""
    return cast(FabricExecutionTraceV1, value) if is_fabric_execution_trace_v1(value) else None


# --- the envelope writer -------------------------------------------------------------
