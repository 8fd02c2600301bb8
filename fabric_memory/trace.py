"""The Fabric execution trace V1: strict guard, envelope writer, projection, per-entry reading.

``toolResult.details`` of ``fabric_exec`` is the persisted envelope
``{success, trace, audits, phases, error?}``. Everything that interprets it goes
through this module: the guard (docs/trace.md#guard-rules) decides whether ``details.trace`` is a V1
trace, :func:`read_fabric_result` turns one tool result into addressed operations
and phases (docs/addresses.md), the writer bounds a new envelope to 512 KiB, and the
write-side projection says which call arguments a trace may keep.

Values are what ``orjson.loads`` produces (``dict``, ``list``, ``str``, ``int``,
``float``, ``bool``, ``None``), checked by exact type: anything else is not JSON.
Numbers follow JavaScript semantics, as the TypeScript reference guard sees them:
``1.0`` is the integer 1, ``-0`` is zero, booleans are never numbers. The size
bound is measured as ``JSON.stringify`` would serialize the value (UTF-8).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, NotRequired, TypedDict, cast

import orjson

from .errors import TraceError

TRACE_KINDS: Final = frozenset({"pi-fabric.execution", "omp-fabric.execution"})
TRACE_MAX_BYTES: Final = 512 * 1024
DETAILS_MAX_BYTES: Final = 512 * 1024
MAX_SAFE_INTEGER: Final = 2**53 - 1
JSON_MAX_DEPTH: Final = 14
"""The deepest a container may sit inside ``args``/``result`` (the value itself is depth 0)."""
OUTCOMES: Final = frozenset({"succeeded", "failed", "aborted", "timed_out"})
FAILURE_STAGES: Final = frozenset({"resolve", "prepare", "validate", "approve", "invoke", "guard"})
MAX_COMMAND_BYTES: Final = 16 * 1024

_TRACE_KEYS: Final = frozenset(
    {"kind", "version", "outcome", "phases", "operations", "counts", "error"}
)
_TRACE_REQUIRED: Final = ("kind", "version", "outcome", "phases", "operations", "counts")
_OPERATION_KEYS: Final = frozenset(
    {
        "type",
        "sequence",
        "ref",
        "provider",
        "action",
        "args",
        "outcome",
        "failureStage",
        "error",
        "result",
        "resultTruncated",
    }
)
_OPERATION_REQUIRED: Final = ("type", "sequence", "ref", "args", "outcome")
_COUNT_KEYS: Final = ("droppedValues", "truncatedValues", "redactedValues", "droppedOperations")
_COUNT_KEY_SET: Final = frozenset(_COUNT_KEYS)
_OPTIONAL_STRINGS: Final = ("provider", "action", "error")

Outcome = Literal["succeeded", "failed", "aborted", "timed_out"]
Verdict = Literal["valid", "invalid", "legacy", "none"]


# --- wire shapes ---------------------------------------------------------------------


class FabricExecutionTraceCountsV1(TypedDict):
    droppedValues: int
    truncatedValues: int
    redactedValues: int
    droppedOperations: int


class FabricExecutionTraceOperationV1(TypedDict):
    type: Literal["call"]
    sequence: int
    ref: str
    provider: NotRequired[str]
    action: NotRequired[str]
    args: dict[str, Any]
    outcome: Outcome
    failureStage: NotRequired[str]
    error: NotRequired[str]
    result: NotRequired[Any]
    resultTruncated: NotRequired[bool]


class FabricExecutionTraceV1(TypedDict):
    kind: str
    version: int
    outcome: Outcome
    phases: list[str]
    operations: list[FabricExecutionTraceOperationV1]
    counts: FabricExecutionTraceCountsV1
    error: NotRequired[str]


class FabricPersistedExecutionDetailsV1(TypedDict):
    success: bool
    trace: FabricExecutionTraceV1
    audits: list[Any]
    phases: list[str]
    error: NotRequired[str]


class FabricRenderDetails(TypedDict):
    success: bool | None
    trace: FabricExecutionTraceV1 | None
    audits: list[dict[str, Any]]
    """Persisted audits win; otherwise audits rebuilt from the trace (``traceDerived``)."""
    phases: list[str]
    error: str | None


# --- JavaScript number and size semantics ---------------------------------------------


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


def _float_delta(value: float) -> int:
    """JavaScript's length for a float minus orjson's (JS writes ``1.0`` as ``1``)."""
    if value.is_integer() and -1e16 < value < 1e16:  # the common case: orjson adds ".0"
        return -3 if value == 0 and math.copysign(1.0, value) < 0 else -2
    return len(js_number(value)) - len(orjson.dumps(value))


def _int_delta(value: int) -> int:
    return len(js_integer(value)) - len(str(value))


_SURROGATE = re.compile("[\ud800-\udfff]")


def _js_string_size(value: str) -> int:
    try:
        return len(orjson.dumps(value))
    except orjson.JSONEncodeError:
        # JavaScript strings are UTF-16: a surrogate pair is one character (4 UTF-8
        # bytes); JSON.stringify escapes a lone surrogate as ``\udXXX`` (6 bytes).
        joined = value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
        lone = len(_SURROGATE.findall(joined))
        return len(orjson.dumps(_SURROGATE.sub("", joined))) + 6 * lone


def _js_size_slow(value: object) -> int:
    """Exact ``JSON.stringify`` UTF-8 size, in Python, for what orjson cannot encode."""
    if type(value) is str:
        return _js_string_size(value)
    if value is None or value is True:
        return 4
    if value is False:
        return 5
    if type(value) is int:
        return len(js_integer(value))
    if type(value) is float:
        return len(js_number(value))
    if type(value) is list:
        return 2 + sum(map(_js_size_slow, value)) + max(len(value) - 1, 0)
    if type(value) is dict:
        members = sum(_js_string_size(k) + 1 + _js_size_slow(v) for k, v in value.items())
        return 2 + members + max(len(value) - 1, 0)
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def _js_size(value: object, delta: int) -> int:
    """``JSON.stringify`` UTF-8 size of a checked JSON value; ``delta`` is its number correction."""
    try:
        return len(orjson.dumps(value)) + delta
    except orjson.JSONEncodeError:  # lone surrogates, integers beyond 64 bits
        return _js_size_slow(value)


def json_size(value: object) -> int:
    """Compact ``JSON.stringify`` UTF-8 size of a JSON value (raises TypeError if it is not one)."""
    delta = [0]
    failure = _json_failure(value, 0, delta, max_depth=None)
    if failure is not None:
        raise TypeError(f"{_path('', failure[0]) or '$'}: {failure[1]}")
    return _js_size(value, delta[0])


# --- rejection reasons ---------------------------------------------------------------

_Failure = tuple[str, str]
"""(JSON path relative to the checked value, what is wrong)."""

_PLAIN_KEY = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*\Z")


def _key(key: str) -> str:
    return key if _PLAIN_KEY.match(key) else "[" + orjson.dumps(key[:64]).decode() + "]"


def _path(prefix: str, rest: str) -> str:
    if not rest:
        return prefix
    if not prefix or rest.startswith("["):
        return prefix + rest
    return f"{prefix}.{rest}"


def _member(key: str, failure: _Failure) -> _Failure:
    return (_path(_key(key), failure[0]), failure[1])


def _describe(value: object) -> str:
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
        return _describe(text)
    try:
        return orjson.dumps(text).decode()
    except orjson.JSONEncodeError:
        return repr(text)


# --- the guard -----------------------------------------------------------------------


def _json_failure(
    value: object, depth: int, delta: list[int], max_depth: int | None = JSON_MAX_DEPTH
) -> _Failure | None:
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
            delta[0] += _int_delta(number)
        except OverflowError:
            return ("", "number is not finite")
        return None
    if kind is float:
        real = cast(float, value)
        if not math.isfinite(real):
            return ("", "number is not finite")
        delta[0] += _float_delta(real)
        return None
    if kind is not dict and kind is not list:
        return ("", f"not a JSON value ({_describe(value)})")
    if max_depth is not None and depth > max_depth:
        return ("", f"container nested deeper than depth {max_depth}")
    inner = depth + 1
    if kind is dict:
        for key, item in cast(dict[object, object], value).items():
            if type(key) is not str:
                return ("", f"object key {_describe(key)} is not a string")
            item_kind = type(item)
            if item_kind is str or item_kind is bool or item is None:
                continue
            failure = _json_failure(item, inner, delta, max_depth)
            if failure is not None:
                return _member(key, failure)
        return None
    for index, item in enumerate(cast(list[object], value)):
        item_kind = type(item)
        if item_kind is str or item_kind is bool or item is None:
            continue
        failure = _json_failure(item, inner, delta, max_depth)
        if failure is not None:
            return (_path(f"[{index}]", failure[0]), failure[1])
    return None


def _safe_integer(value: object, delta: list[int]) -> bool:
    """A non-negative safe integer in JavaScript terms (``3.0`` and ``-0`` count, bools never)."""
    kind = type(value)
    if kind is int:
        return 0 <= cast(int, value) <= MAX_SAFE_INTEGER
    if kind is float:
        number = cast(float, value)
        if number.is_integer() and 0 <= number <= MAX_SAFE_INTEGER:
            delta[0] += _float_delta(number)
            return True
    return False


def _keys_failure(
    value: dict[object, object], allowed: frozenset[str], required: Iterable[str]
) -> _Failure | None:
    """Keys only from ``allowed`` (``__proto__`` is an ordinary key), all of ``required``."""
    for key in value:
        if type(key) is not str or key not in allowed:
            return ("", f"unexpected key {_quote(key)}")
    for key in required:
        if key not in value:
            return (key, "missing")
    return None


def _operation_failure(value: object, delta: list[int]) -> _Failure | None:
    if type(value) is not dict:
        return ("", f"expected an operation object, got {_describe(value)}")
    op = cast(dict[object, object], value)
    failure = _keys_failure(op, _OPERATION_KEYS, _OPERATION_REQUIRED)
    if failure is not None:
        return failure
    if type(op["type"]) is not str or op["type"] != "call":
        return ("type", f'expected "call", got {_describe(op["type"])}')
    if not _safe_integer(op["sequence"], delta):
        got = _describe(op["sequence"])
        return ("sequence", f"expected a non-negative safe integer, got {got}")
    if type(op["ref"]) is not str:
        return ("ref", f"expected a string, got {_describe(op['ref'])}")
    args = op["args"]
    if type(args) is not dict:
        return ("args", f"expected a plain object, got {_describe(args)}")
    failure = _json_failure(args, 0, delta)
    if failure is not None:
        return (_path("args", failure[0]), failure[1])
    outcome = op["outcome"]
    if type(outcome) is not str or outcome not in OUTCOMES:
        return ("outcome", f"expected one of {_ENUM_OUTCOMES}, got {_describe(outcome)}")
    for key in _OPTIONAL_STRINGS:
        if key in op and type(op[key]) is not str:
            return (key, f"expected a string, got {_describe(op[key])}")
    if "failureStage" in op:
        stage = op["failureStage"]
        if type(stage) is not str or stage not in FAILURE_STAGES:
            return ("failureStage", f"expected one of {_ENUM_STAGES}, got {_describe(stage)}")
    if "resultTruncated" in op and type(op["resultTruncated"]) is not bool:
        return ("resultTruncated", f"expected a boolean, got {_describe(op['resultTruncated'])}")
    if "result" in op:
        failure = _json_failure(op["result"], 0, delta)
        if failure is not None:
            return (_path("result", failure[0]), failure[1])
    return None


_ENUM_OUTCOMES: Final = "succeeded|failed|aborted|timed_out"
_ENUM_STAGES: Final = "resolve|prepare|validate|approve|invoke|guard"


def _is_number_one(value: object, delta: list[int]) -> bool:
    kind = type(value)
    if kind is int:
        return value == 1
    if kind is float and value == 1.0:
        delta[0] += _float_delta(1.0)
        return True
    return False


def _trace_structure_failure(value: object, delta: list[int]) -> _Failure | None:
    """Every trace rule except the size bound."""
    if type(value) is not dict:
        return ("", f"expected a trace object, got {_describe(value)}")
    trace = cast(dict[object, object], value)
    failure = _keys_failure(trace, _TRACE_KEYS, _TRACE_REQUIRED)
    if failure is not None:
        return failure
    kind = trace["kind"]
    if type(kind) is not str or kind not in TRACE_KINDS:
        return ("kind", f"unknown kind {_describe(kind)}")
    if not _is_number_one(trace["version"], delta):
        return ("version", f"unknown version {_describe(trace['version'])} (expected the number 1)")
    outcome = trace["outcome"]
    if type(outcome) is not str or outcome not in OUTCOMES:
        return ("outcome", f"expected one of {_ENUM_OUTCOMES}, got {_describe(outcome)}")
    phases = trace["phases"]
    if type(phases) is not list:
        return ("phases", f"expected an array of strings, got {_describe(phases)}")
    for index, phase in enumerate(cast(list[object], phases)):
        if type(phase) is not str:
            return (f"phases[{index}]", f"expected a string, got {_describe(phase)}")
    operations = trace["operations"]
    if type(operations) is not list:
        return ("operations", f"expected an array, got {_describe(operations)}")
    previous: int | float = -1
    for index, op in enumerate(cast(list[object], operations)):
        failure = _operation_failure(op, delta)
        if failure is not None:
            return (_path(f"operations[{index}]", failure[0]), failure[1])
        sequence = cast(int | float, cast(dict[str, object], op)["sequence"])
        if sequence <= previous:
            return (
                f"operations[{index}].sequence",
                f"not strictly increasing ({_describe(sequence)} after {_describe(previous)})",
            )
        previous = sequence
    counts = trace["counts"]
    if type(counts) is not dict:
        return ("counts", f"expected an object, got {_describe(counts)}")
    counts_map = cast(dict[object, object], counts)
    failure = _keys_failure(counts_map, _COUNT_KEY_SET, _COUNT_KEYS)
    if failure is not None:
        return (_path("counts", failure[0]), failure[1])
    for key in _COUNT_KEYS:
        if not _safe_integer(counts_map[key], delta):
            return (
                f"counts.{key}",
                f"expected a non-negative safe integer, got {_describe(counts_map[key])}",
            )
    if "error" in trace and type(trace["error"]) is not str:
        return ("error", f"expected a string, got {_describe(trace['error'])}")
    return None


def _plain_trace_size(value: object) -> int | None:
    """The common path of :func:`_trace_failure` in one pass, without reasons.

    Returns the serialized size of a trace that passes every structural rule, or
    None to leave the decision (and the reason) to the exact check. It accepts only
    what the exact check accepts: keys are checked against the allowed names here
    and proved to be exact ``str`` by ``orjson.dumps``, which refuses any other key
    type (and which the size needs anyway). Numbers written as floats (``1.0``),
    nested arguments with unusual values, and anything else uncommon simply take the
    exact path.
    """
    if type(value) is not dict or not _TRACE_KEYS.issuperset(value):
        return None
    try:
        kind, version, outcome = value["kind"], value["version"], value["outcome"]
        phases, operations, counts = value["phases"], value["operations"], value["counts"]
    except KeyError:
        return None
    if (
        type(kind) is not str or kind not in TRACE_KINDS
        or type(version) is not int or version != 1
        or type(outcome) is not str or outcome not in OUTCOMES
        or type(phases) is not list or type(operations) is not list or type(counts) is not dict
        or ("error" in value and type(value["error"]) is not str)
        or len(counts) != len(_COUNT_KEYS) or not _COUNT_KEY_SET.issuperset(counts)
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
    known_keys, outcomes, largest = _OPERATION_KEYS.issuperset, OUTCOMES, MAX_SAFE_INTEGER
    for op in operations:
        if type(op) is not dict or not known_keys(op):
            return None
        try:
            call, sequence, ref, args, result = (
                op["type"], op["sequence"], op["ref"], op["args"], op["outcome"]
            )
        except KeyError:
            return None
        if (
            type(call) is not str or call != "call"
            or type(sequence) is not int or not previous < sequence <= largest
            or type(ref) is not str or type(args) is not dict
            or type(result) is not str or result not in outcomes
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
            if _json_failure(item, 1, correction) is not None:
                return None
            delta += correction[0]
        if len(op) > 5:  # more than the required keys
            if (
                ("provider" in op and type(op["provider"]) is not str)
                or ("action" in op and type(op["action"]) is not str)
                or ("error" in op and type(op["error"]) is not str)
                or ("failureStage" in op and (
                    type(op["failureStage"]) is not str
                    or op["failureStage"] not in FAILURE_STAGES
                ))
                or ("resultTruncated" in op and type(op["resultTruncated"]) is not bool)
            ):
                return None
            if "result" in op:
                correction = [0]
                if _json_failure(op["result"], 0, correction) is not None:
                    return None
                delta += correction[0]
    try:
        return len(orjson.dumps(value)) + delta
    except orjson.JSONEncodeError:  # a key that is not an exact str, a lone surrogate, ...
        return None


def _trace_failure(value: object) -> _Failure | None:
    size = _plain_trace_size(value)
    if size is None:
        delta = [0]
        failure = _trace_structure_failure(value, delta)
        if failure is not None:
            return failure
        size = _js_size(value, delta[0])
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


def _writer_trace(trace: object) -> dict[str, Any]:
    """A copy of ``trace`` the writer may trim without touching the caller's object."""
    delta = [0]
    try:
        failure = _trace_structure_failure(trace, delta)
    except Exception as error:
        failure = ("", f"unreadable value ({type(error).__name__})")
    if failure is not None:
        where = _path("trace", failure[0])
        raise TraceError(
            f"{where}: {failure[1]}; pass a trace that passes is_fabric_execution_trace_v1"
        )
    source = cast(dict[str, Any], trace)
    copy = dict(source)
    copy["phases"] = list(source["phases"])
    copy["operations"] = list(source["operations"])
    copy["counts"] = {key: int(source["counts"][key]) for key in _COUNT_KEYS}
    return copy


def _writable_size(value: object, where: str) -> int:
    """:func:`json_size`, for values the writer must also be able to persist with orjson."""
    delta = [0]
    try:
        failure = _json_failure(value, 0, delta, max_depth=None)
        if failure is None:
            return len(orjson.dumps(value)) + delta[0]
    except (orjson.JSONEncodeError, RecursionError) as error:
        failure = ("", f"cannot be written as JSON ({error})")
    raise TraceError(
        f"{_path(where, failure[0])}: {failure[1]}; pass JSON values (valid Unicode, finite"
        " numbers within 64 bits, no cycles)"
    )


def create_fabric_persisted_execution_details(
    *,
    success: bool,
    trace: Mapping[str, Any],
    audits: Iterable[Any] = (),
    phases: Iterable[str] = (),
    error: str | None = None,
) -> FabricPersistedExecutionDetailsV1:
    """The persisted ``fabric_exec`` envelope, bounded to 512 KiB of compact JSON.

    Past the bound it drops, in order: audits (last first), trace operations (last
    first, counting ``droppedOperations``), top-level ``phases`` (last first),
    ``trace.phases`` (last first, counting ``droppedValues``), then ``trace.error``
    (counting ``droppedValues``); a top-level ``error`` that alone still overflows is
    truncated. Each item is measured once. The caller's objects are never mutated.
    """
    if type(success) is not bool:
        raise TraceError(f"success: expected a boolean, got {_describe(success)}")
    trimmed = _writer_trace(trace)
    audit_list = list(audits)
    phase_list = list(phases)
    for index, phase in enumerate(phase_list):
        if type(phase) is not str:
            raise TraceError(f"phases[{index}]: expected a string, got {_describe(phase)}")
    if error is not None and type(error) is not str:
        raise TraceError(f"error: expected a string, got {_describe(error)}")
    details: dict[str, Any] = {
        "success": success,
        "trace": trimmed,
        "audits": audit_list,
        "phases": phase_list,
    }
    if error is not None:
        details["error"] = error
    total = _writable_size(details, "details")
    if total <= DETAILS_MAX_BYTES:
        return cast(FabricPersistedExecutionDetailsV1, details)

    counts: dict[str, int] = trimmed["counts"]

    def pop_all(items: list[Any], sizes: list[int], count_key: str | None) -> None:
        nonlocal total
        while total > DETAILS_MAX_BYTES and items:
            items.pop()
            total -= sizes.pop() + (1 if items else 0)
            if count_key is not None:
                before = len(str(counts[count_key]))
                counts[count_key] += 1
                total += len(str(counts[count_key])) - before

    pop_all(audit_list, [_writable_size(audit, "audits") for audit in audit_list], None)
    operations: list[Any] = trimmed["operations"]
    if total > DETAILS_MAX_BYTES:
        sizes = [_writable_size(op, "trace.operations") for op in operations]
        pop_all(operations, sizes, "droppedOperations")
    if total > DETAILS_MAX_BYTES:
        pop_all(phase_list, [_js_string_size(p) for p in phase_list], None)
    trace_phases: list[str] = trimmed["phases"]
    if total > DETAILS_MAX_BYTES:
        pop_all(trace_phases, [_js_string_size(p) for p in trace_phases], "droppedValues")
    if total > DETAILS_MAX_BYTES and "error" in trimmed:
        total -= len('"error":,') + _js_string_size(trimmed.pop("error"))
        before = len(str(counts["droppedValues"]))
        counts["droppedValues"] += 1
        total += len(str(counts["droppedValues"])) - before
    if total > DETAILS_MAX_BYTES and error is not None:
        room = _js_string_size(error) - (total - DETAILS_MAX_BYTES)
        details["error"] = _truncate_to_size(error, room)
    return cast(FabricPersistedExecutionDetailsV1, details)


def _truncate_to_size(text: str, max_size: int) -> str:
    """The longest prefix of ``text`` whose JSON string form fits ``max_size`` bytes."""
    low, high = 0, min(len(text), max(max_size, 0))
    while low < high:
        middle = (low + high + 1) // 2
        if len(orjson.dumps(text[:middle])) <= max_size:
            low = middle
        else:
            high = middle - 1
    return text[:low]


# --- the lenient render-side reader ---------------------------------------------------


def _render_audit(value: object) -> dict[str, Any] | None:
    if type(value) is not dict:
        return None
    audit = cast(dict[str, Any], value)
    if type(audit.get("ref")) is not str:
        return None
    out: dict[str, Any] = {"ref": audit["ref"]}
    for key in ("tool", "provider", "error"):
        if type(audit.get(key)) is str:
            out[key] = audit[key]
    if type(audit.get("success")) is bool:
        out["success"] = audit["success"]
    if type(audit.get("args")) is dict:
        out["args"] = audit["args"]
    if "result" in audit:
        out["result"] = audit["result"]
    if type(audit.get("resultTruncated")) is bool:
        out["resultTruncated"] = audit["resultTruncated"]
    return out


def _audit_from_operation(op: FabricExecutionTraceOperationV1) -> dict[str, Any]:
    out: dict[str, Any] = {"ref": op["ref"], "traceDerived": True}
    if op.get("action"):
        out["tool"] = op["action"]
    if op.get("provider"):
        out["provider"] = op["provider"]
    out["success"] = op["outcome"] == "succeeded"
    if op.get("error"):
        out["error"] = op["error"]
    if op["args"]:
        out["args"] = op["args"]
    if "result" in op:
        out["result"] = op["result"]
    return out


def read_fabric_execution_render_details(details: object) -> FabricRenderDetails | None:
    """What a renderer can show from ``details``, however old or damaged (never raises).

    None when ``details`` is not an object. Persisted audits and phases win over
    the trace; without them they are rebuilt from a valid trace.
    """
    try:
        if type(details) is not dict:
            return None
        envelope = cast(dict[str, Any], details)
        trace = read_fabric_execution_trace_v1(envelope.get("trace"))
        raw_audits = envelope.get("audits")
        if type(raw_audits) is list:
            audits = [a for a in map(_render_audit, raw_audits) if a is not None]
        else:
            audits = [_audit_from_operation(op) for op in trace["operations"]] if trace else []
        raw_phases = envelope.get("phases")
        if type(raw_phases) is list:
            phases = [p for p in raw_phases if type(p) is str]
        else:
            phases = list(trace["phases"]) if trace else []
        success = envelope.get("success")
        if type(success) is not bool:
            success = trace["outcome"] == "succeeded" if trace else None
        error = envelope.get("error")
        if type(error) is not str:
            error = (trace.get("error") or None) if trace else None
        return {
            "success": success,
            "trace": trace,
            "audits": audits,
            "phases": phases,
            "error": error,
        }
    except Exception:
        return None


# --- the strict legacy audits adapter --------------------------------------------------


@dataclass(frozen=True, slots=True)
class LegacyOperation:
    """One old-session audit admitted by the strict adapter; ``sequence`` is its index."""

    sequence: int
    ref: str
    args: dict[str, Any]
    success: bool
    error: str | None
    record: dict[str, Any]


def _adapt_legacy_audits(
    details: object,
) -> tuple[tuple[LegacyOperation, ...] | None, str | None]:
    if type(details) is not dict:
        return None, "details is not an object"
    audits = cast(dict[str, Any], details).get("audits")
    if type(audits) is not list:
        return None, "audits is not an array"
    admitted: list[LegacyOperation] = []
    for index, audit in enumerate(cast(list[object], audits)):
        where = f"audits[{index}]"
        if type(audit) is not dict:
            return None, f"{where} is not an object"
        record = cast(dict[str, Any], audit)
        ref, args, success = record.get("ref"), record.get("args"), record.get("success")
        if type(ref) is not str:
            return None, f"{where}.ref is not a string"
        if type(args) is not dict:
            return None, f"{where}.args is not an object"
        if type(success) is not bool:
            return None, f"{where}.success is not a boolean"
        error = record.get("error")
        if "error" in record and type(error) is not str:
            return None, f"{where}.error is not a string"
        admitted.append(LegacyOperation(index, ref, args, success, error, record))
    return tuple(admitted), None


def read_legacy_audits(details: object) -> tuple[LegacyOperation, ...] | None:
    """The old ``details.audits`` as operations, or None when any record is malformed.

    Only for details whose ``trace`` key is absent (a present trace blocks it).
    """
    try:
        return _adapt_legacy_audits(details)[0]
    except Exception:
        return None


def legacy_audits_rejection(details: object) -> str | None:
    """Why :func:`read_legacy_audits` rejects ``details`` (e.g. ``audits[1].success is not a
    boolean``), or None when it accepts them."""
    try:
        return _adapt_legacy_audits(details)[1]
    except Exception as error:
        return f"unreadable audits ({type(error).__name__})"


# --- the per-entry decision ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TraceOperation:
    """One addressed operation of a ``fabric_exec`` result (from the trace or legacy audits)."""

    address: str
    sequence: int
    ref: str
    provider: str | None
    action: str | None
    args: dict[str, Any]
    outcome: str
    failure_stage: str | None
    error: str | None
    record: dict[str, Any]
    """The operation (or legacy audit) exactly as persisted."""


@dataclass(frozen=True, slots=True)
class TracePhase:
    """One phase occurrence of a valid trace, in order (repeats stay in place)."""

    address: str
    index: int
    name: str


@dataclass(frozen=True, slots=True)
class FabricResult:
    """What one ``fabric_exec`` tool result contributes: the single shared verdict.

    ``valid``: ``details.trace`` passed the guard. ``invalid``: the trace key is
    present but fails the guard, or there is no trace and the legacy audits were
    rejected (``reason`` starts with ``legacy audits rejected:``). ``legacy``: no
    trace key, audits admitted by the strict adapter. ``none``: nothing to read.
    """

    entry_id: str
    verdict: Verdict
    reason: str | None
    kind: str | None
    outcome: str | None
    operations: tuple[TraceOperation, ...]
    phases: tuple[TracePhase, ...]


def _trace_operations(entry_id: str, trace: FabricExecutionTraceV1) -> tuple[TraceOperation, ...]:
    operations = []
    for op in trace["operations"]:
        sequence = int(op["sequence"])
        operations.append(
            TraceOperation(
                address=f"{entry_id}/{sequence}",
                sequence=sequence,
                ref=op["ref"],
                provider=op.get("provider"),
                action=op.get("action"),
                args=op["args"],
                outcome=op["outcome"],
                failure_stage=op.get("failureStage"),
                error=op.get("error"),
                record=cast(dict[str, Any], op),
            )
        )
    return tuple(operations)


def _legacy_operations(
    entry_id: str, legacy: tuple[LegacyOperation, ...]
) -> tuple[TraceOperation, ...]:
    return tuple(
        TraceOperation(
            address=f"{entry_id}/{op.sequence}",
            sequence=op.sequence,
            ref=op.ref,
            provider=None,
            action=None,
            args=op.args,
            outcome="succeeded" if op.success else "failed",
            failure_stage=None,
            error=op.error,
            record=op.record,
        )
        for op in legacy
    )


def read_fabric_result(entry_id: str, message: Mapping[str, Any]) -> FabricResult | None:
    """The verdict, operations and phases of one ``fabric_exec`` tool result message.

    None unless ``message`` is a ``toolResult`` of ``fabric_exec``: other tools'
    results never yield operations, whatever their details hold.
    """
    if message.get("role") != "toolResult" or message.get("toolName") != "fabric_exec":
        return None
    details = message.get("details")
    if type(details) is not dict:
        return FabricResult(entry_id, "none", "no details", None, None, (), ())
    envelope = cast(dict[str, Any], details)
    if "trace" in envelope:
        raw = envelope["trace"]
        reason = trace_rejection(raw)
        if reason is not None:
            kind = raw.get("kind") if type(raw) is dict else None
            return FabricResult(
                entry_id, "invalid", reason, kind if type(kind) is str else None, None, (), ()
            )
        trace = cast(FabricExecutionTraceV1, raw)
        phases = tuple(
            TracePhase(f"{entry_id}/phase:{index}", index, name)
            for index, name in enumerate(trace["phases"])
        )
        return FabricResult(
            entry_id,
            "valid",
            None,
            trace["kind"],
            trace["outcome"],
            _trace_operations(entry_id, trace),
            phases,
        )
    if "audits" not in envelope:
        return FabricResult(entry_id, "none", "no trace and no audits", None, None, (), ())
    legacy, why = _adapt_legacy_audits(envelope)
    if legacy is None:
        return FabricResult(
            entry_id, "invalid", f"legacy audits rejected: {why}", None, None, (), ()
        )
    operations = _legacy_operations(entry_id, legacy)
    return FabricResult(entry_id, "legacy", None, None, None, operations, ())


# --- write-side argument projection ----------------------------------------------------

_PATH: Final = "path"
_NUMBER: Final = "number"
_STRING: Final = "string"
_IDENTIFIER: Final = "identifier"
_COMMAND: Final = "command"

_LOCAL_TOOLS: Final[dict[str, dict[str, str]]] = {
    "read": {"path": _PATH, "offset": _NUMBER, "limit": _NUMBER},
    "grep": {"path": _PATH, "context": _NUMBER, "limit": _NUMBER},
    "find": {"path": _PATH, "limit": _NUMBER},
    "ls": {"path": _PATH, "limit": _NUMBER},
    "edit": {"path": _PATH},
    "write": {"path": _PATH},
    "bash": {"command": _COMMAND},
}
_ID_ONLY_AGENT_REFS: Final = (
    "agents.run",
    "agents.wait",
    "agents.status",
    "agents.stop",
    "agents.cleanup",
    "agents.ask",
    "agents.tell",
    "agents.steer",
    "agents.followUp",
    "agents.setSteeringMode",
    "agents.setFollowUpMode",
    "agents.compact",
    "agents.actorStatus",
    "agents.setModel",
    "agents.setThinking",
    "agents.setTools",
    "agents.setEvents",
    "agents.setDeliveryPolicy",
    "agents.clearMessages",
    "agents.setInstructions",
    "agents.messages",
    "agents.remove",
    "agents.import",
    "agents.export",
    "agents.log",
)
PROJECTIONS: Final[dict[str, dict[str, str]]] = {
    **{f"{host}.{tool}": keys for host in ("pi", "omp") for tool, keys in _LOCAL_TOOLS.items()},
    **{ref: {"id": _STRING} for ref in _ID_ONLY_AGENT_REFS},
    "mesh.publish": {"topic": _STRING, "to": _STRING},
    "mesh.read": {
        "topic": _STRING,
        "to": _STRING,
        "after": _NUMBER,
        "cursor": _NUMBER,
        "limit": _NUMBER,
    },
    "mesh.get": {"key": _STRING},
    "mesh.put": {"key": _STRING},
    "mesh.delete": {"key": _STRING},
    "mesh.list": {"prefix": _STRING, "limit": _NUMBER},
    "fabric.discovery.providers": {},
    "fabric.discovery.models": {},
    "fabric.discovery.catalog": {"provider": _IDENTIFIER, "limit": _NUMBER},
    "fabric.discovery.list": {"provider": _IDENTIFIER, "namespace": _IDENTIFIER, "limit": _NUMBER},
    "fabric.discovery.search": {"limit": _NUMBER},
    "fabric.discovery.describe": {"ref": _IDENTIFIER},
    "fabric.workflow.configure": {"name": _STRING},
    "fabric.workflow.phase": {"name": _STRING, "id": _IDENTIFIER, "total": _NUMBER},
    "fabric.workflow.item": {
        "id": _IDENTIFIER,
        "status": _IDENTIFIER,
        "phase": _IDENTIFIER,
        "kind": _IDENTIFIER,
        "total": _NUMBER,
        "completed": _NUMBER,
    },
    "fabric.workflow.event": {"level": _IDENTIFIER},
    "fabric.workflow.progress": {},
    "fabric.workflow.parallel": {"kind": _IDENTIFIER, "itemCount": _NUMBER, "concurrency": _NUMBER},
    "fabric.workflow.pipeline": {"kind": _IDENTIFIER, "itemCount": _NUMBER, "stageCount": _NUMBER},
}
"""Which argument keys a trace keeps, by exact ref, and what each must be.

Every ref not listed (memory, state, schema, compact, MCP, extension, unknown) keeps none.
"""

_IDENTIFIER_SHAPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9\-./:_]*\Z")
_WINDOWS_DRIVE = re.compile(r"[A-Za-z]:[\\/]")
_URL_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
_URL_IGNORED = re.compile("[\t\n\r]")


def _local_path(value: object) -> str | None:
    """A plain local path without ``?query``/``#fragment``; None for URLs and non-paths."""
    if type(value) is not str or "\0" in value:
        return None
    text = value
    if not _WINDOWS_DRIVE.match(text):
        # As a WHATWG URL parser reads it: a scheme makes it a URL; two leading
        # slashes (either way) make it a network path with a host. Neither is local.
        probe = _URL_IGNORED.sub("", text).strip("".join(map(chr, range(0x21))))
        if _URL_SCHEME.match(probe) or probe[:2].replace("\\", "/") == "//":
            return None
    end = len(text)
    for mark in ("?", "#"):
        found = text.find(mark)
        if 0 <= found < end:
            end = found
    return text[:end] or None


def _finite_number(value: object) -> int | float | None:
    if type(value) is int or (type(value) is float and math.isfinite(value)):
        return value
    return None


def _bounded_command(value: object) -> str | None:
    if type(value) is not str:
        return None
    text = value
    if len(text) * 4 <= MAX_COMMAND_BYTES or len(_utf8(text)) <= MAX_COMMAND_BYTES:
        return text
    suffix = "…[truncated]"
    budget = MAX_COMMAND_BYTES - len(_utf8(suffix))
    head = _utf8(text)[:budget].decode("utf-8", "ignore")
    return head + suffix


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _project_value(shape: str, value: object) -> object | None:
    if shape == _PATH:
        return _local_path(value)
    if shape == _NUMBER:
        return _finite_number(value)
    if shape == _IDENTIFIER:
        if type(value) is str and _IDENTIFIER_SHAPE.match(value):
            return value
        return None
    if shape == _COMMAND:
        return _bounded_command(value)
    return value if type(value) is str else None


def project_args(ref: str, args: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments a trace may keep for a call of ``ref`` (docs/trace.md#projection).

    Exact refs only (``*`` is ``pi`` or ``omp``); unlisted refs keep nothing. Paths
    stay only when plain and local, minus any ``?query``/``#fragment``; numeric
    fields stay only as finite non-boolean numbers.
    """
    shapes = PROJECTIONS.get(ref) if type(ref) is str else None
    if not shapes or not isinstance(args, Mapping):
        return {}
    projected: dict[str, Any] = {}
    for key, shape in shapes.items():
        if key in args:
            value = _project_value(shape, args[key])
            if value is not None:
                projected[key] = value
    return projected


def project_result(ref: str, result: object) -> dict[str, Any] | None:
    """The result a trace may keep: only ``{"created": true}`` from ``pi.write``/``omp.write``."""
    if ref not in ("pi.write", "omp.write") or type(result) is not dict:
        return None
    record = cast(dict[str, Any], result)
    nested = record.get("details")
    if record.get("created") is True or (type(nested) is dict and nested.get("created") is True):
        return {"created": True}
    return None


_SHAPE_RULES: Final = {
    _PATH: "not a plain local path",
    _NUMBER: "not a finite number",
    _STRING: "not a string",
    _IDENTIFIER: "not identifier-shaped",
    _COMMAND: "not a string",
}


def projection_violations(ref: str, args: Mapping[str, Any]) -> list[str]:
    """Which persisted argument keys of a ``ref`` call break the projection rules.

    Each entry names the key and the rule (``"content: not kept for pi.write"``,
    ``"path: keeps a query or fragment"``), never the offending value.
    """
    if not isinstance(args, Mapping):
        return [f"args: not an object (projection of {ref})"]
    shapes = PROJECTIONS.get(ref, {}) if type(ref) is str else {}
    violations: list[str] = []
    for key, value in args.items():
        name = _key(key) if type(key) is str else _describe(key)
        shape = shapes.get(key) if type(key) is str else None
        if shape is None:
            violations.append(f"{name}: not kept for {ref}")
            continue
        projected = _project_value(shape, value)
        if projected is None:
            violations.append(f"{name}: {_SHAPE_RULES[shape]}")
        elif projected != value:
            rule = "keeps a query or fragment" if shape == _PATH else "exceeds the command bound"
            violations.append(f"{name}: {rule}")
    return violations
