"""Tests for fabric_memory.trace: guard, envelope writer, projection, legacy adapter, verdicts."""

from __future__ import annotations

import copy
import decimal
import functools
import itertools
import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabric_memory._js import stringify_size
from fabric_memory.errors import SessionError, TraceError
from fabric_memory.session import read_session
from fabric_memory.trace import (
    create_fabric_persisted_execution_details,
    is_fabric_execution_trace_operation_v1,
    is_fabric_execution_trace_v1,
    project_args,
    project_result,
    projection_violations,
    read_fabric_execution_render_details,
    read_fabric_execution_trace_v1,
    read_fabric_result,
    trace_rejection,
)
from fabric_memory.trace import guard as guard_module
from fabric_memory.trace import writer as writer_module

from .corpus import CORPUS, corpus_bytes, corpus_json, truth_files

LIMIT = 512 * 1024


# --- an independent reference checker (shares nothing with the module) ----------------

REF_KINDS = ("pi-fabric.execution", "omp-fabric.execution")
REF_OUTCOMES = ("succeeded", "failed", "aborted", "timed_out")
REF_STAGES = ("resolve", "prepare", "validate", "approve", "invoke", "guard")
REF_JSON_TYPES = (type(None), bool, str, int, float, list, dict)
REF_COUNT_KEYS = {"droppedValues", "truncatedValues", "redactedValues", "droppedOperations"}
REF_TRACE_KEYS = {"kind", "version", "outcome", "phases", "operations", "counts", "error"}
REF_OP_REQUIRED = {"type", "sequence", "ref", "args", "outcome"}
REF_OP_OPTIONAL = {"provider", "action", "failureStage", "error", "result", "resultTruncated"}
REF_OP_KEYS = REF_OP_REQUIRED | REF_OP_OPTIONAL
REF_OVERFLOW = 2**1024 - 2**970  # JSON integers at or beyond this parse to Infinity in JS


@functools.cache
def ref_number_text(x: float) -> str:
    """Number::toString: shortest round-tripping digits, laid out by the ECMAScript rules.

    The digits come from ``%e`` of Python's own shortest repr (David Gay's algorithm,
    which picks the same digits as V8: ``2**-24`` prints ...063 in both). A search over
    ``%e`` precisions would be wrong at ties, where ``%e`` rounds half-to-even.
    """
    if x == 0:
        return "0"
    magnitude = abs(x)
    text = f"{decimal.Decimal(repr(magnitude)):e}"
    mantissa, exponent = text.split("e")
    digits = mantissa.replace(".", "").rstrip("0") or "0"
    n = int(exponent) + 1
    k = len(digits)
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * (-n) + digits
    else:
        rest = "." + digits[1:] if k > 1 else ""
        body = f"{digits[0]}{rest}e{'-' if n - 1 < 0 else '+'}{abs(n - 1)}"
    return ("-" if x < 0 else "") + body


def ref_string_text(s: str) -> str:
    joined = s.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    text = json.dumps(joined, ensure_ascii=False)
    if not re.search("[\ud800-\udfff]", text):
        return text
    return "".join(f"\\u{ord(c):04x}" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)


def ref_text(v: Any) -> str:
    """What JSON.stringify writes for a JSON value."""
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if type(v) is str:
        return ref_string_text(v)
    if type(v) is int:
        return str(v) if abs(v) <= 2**53 else ref_number_text(float(v))
    if type(v) is float:
        return ref_number_text(v)
    if type(v) is list:
        return "[" + ",".join(ref_text(x) for x in v) + "]"
    return "{" + ",".join(ref_string_text(k) + ":" + ref_text(x) for k, x in v.items()) + "}"


def ref_size(v: Any) -> int:
    return len(ref_text(v).encode("utf-8"))


def ref_json_ok(v: Any, level: int) -> bool:
    if type(v) not in REF_JSON_TYPES:
        return False
    if type(v) is int:
        return abs(v) < REF_OVERFLOW
    if type(v) is float:
        return math.isfinite(v)
    if type(v) is list:
        return level <= 14 and all(ref_json_ok(x, level + 1) for x in v)
    if type(v) is dict:
        if level > 14 or any(type(k) is not str for k in v):
            return False
        return all(ref_json_ok(x, level + 1) for x in v.values())
    return True


def ref_safe_count(v: Any) -> bool:
    if type(v) is int:
        return 0 <= v < 2**53
    return type(v) is float and math.isfinite(v) and v == math.floor(v) and 0 <= v < 2**53


def ref_op_ok(op: Any) -> bool:
    if type(op) is not dict or any(type(k) is not str or k not in REF_OP_KEYS for k in op):
        return False
    if not REF_OP_REQUIRED.issubset(op):
        return False
    checks = [
        type(op["type"]) is str and op["type"] == "call",
        ref_safe_count(op["sequence"]),
        type(op["ref"]) is str,
        type(op["args"]) is dict and ref_json_ok(op["args"], 0),
        type(op["outcome"]) is str and op["outcome"] in REF_OUTCOMES,
        all(type(op.get(k, "")) is str for k in ("provider", "action", "error")),
        type(op.get("failureStage", "guard")) is str
        and op.get("failureStage", "guard") in REF_STAGES,
        type(op.get("resultTruncated", True)) is bool,
        "result" not in op or ref_json_ok(op["result"], 0),
    ]
    return all(checks)


def ref_trace_ok(t: Any) -> bool:
    if type(t) is not dict or any(type(k) is not str for k in t):
        return False
    if not set(t) <= REF_TRACE_KEYS or not (REF_TRACE_KEYS - {"error"}) <= set(t):
        return False
    ops, counts = t["operations"], t["counts"]
    if not (type(t["kind"]) is str and t["kind"] in REF_KINDS):
        return False
    if type(t["version"]) not in (int, float) or t["version"] != 1:
        return False
    if not (type(t["outcome"]) is str and t["outcome"] in REF_OUTCOMES):
        return False
    if type(t["phases"]) is not list or any(type(p) is not str for p in t["phases"]):
        return False
    if type(ops) is not list or not all(ref_op_ok(op) for op in ops):
        return False
    if any(b["sequence"] <= a["sequence"] for a, b in itertools.pairwise(ops)):
        return False
    if type(counts) is not dict or any(type(k) is not str for k in counts):
        return False
    if set(counts) != REF_COUNT_KEYS or not all(ref_safe_count(c) for c in counts.values()):
        return False
    if "error" in t and type(t["error"]) is not str:
        return False
    return ref_size(t) <= LIMIT


# --- builders ------------------------------------------------------------------------


def make_op(sequence: int = 0, **fields: Any) -> dict[str, Any]:
    op: dict[str, Any] = {
        "type": "call",
        "sequence": sequence,
        "ref": "pi.read",
        "provider": "pi",
        "action": "read",
        "args": {"path": "src/a.ts", "limit": 20},
        "outcome": "succeeded",
    }
    op.update(fields)
    return op


def make_trace(**fields: Any) -> dict[str, Any]:
    trace: dict[str, Any] = {
        "kind": "pi-fabric.execution",
        "version": 1,
        "outcome": "failed",
        "phases": ["Plan", "Implement", "Plan"],
        "operations": [
            make_op(0),
            make_op(
                3,
                ref="pi.edit",
                action="edit",
                args={"path": "src/b.ts"},
                outcome="failed",
                failureStage="invoke",
                error="Call failed during invoke",
            ),
            make_op(7, ref="pi.write", action="write", result={"created": True}),
        ],
        "counts": {
            "droppedValues": 0,
            "truncatedValues": 1,
            "redactedValues": 0,
            "droppedOperations": 0,
        },
        "error": "Execution failed",
    }
    trace.update(fields)
    return trace


def nest(levels: int, leaf: Any, *, arrays: bool = False) -> Any:
    """``levels`` containers, outermost first (alternating object/array when ``arrays``)."""
    value = leaf
    for level in reversed(range(levels)):
        value = [value] if arrays and level % 2 else {"k": value}
    return value


def with_op(index: int, **fields: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(trace: dict[str, Any]) -> None:
        trace["operations"][index].update(fields)

    return mutate


def without_op_key(key: str) -> Callable[[dict[str, Any]], None]:
    def mutate(trace: dict[str, Any]) -> None:
        del trace["operations"][1][key]

    return mutate


def set_key(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(trace: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target = trace
        for part in parents:
            target = target[part]
        target[last] = value

    return mutate


def drop_key(key: str) -> Callable[[dict[str, Any]], None]:
    def mutate(trace: dict[str, Any]) -> None:
        del trace[key]

    return mutate


def chain(*mutations: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], None]:
    def mutate(trace: dict[str, Any]) -> None:
        for mutation in mutations:
            mutation(trace)

    return mutate


def spread_sequences(trace: dict[str, Any], *, start: int, step: int) -> None:
    for index, op in enumerate(trace["operations"]):
        op["sequence"] = start + step * index


def pad_error_to(size: int, unit: str = "a") -> Callable[[dict[str, Any]], None]:
    """Make the trace's compact JSON exactly ``size`` bytes by growing ``error``."""

    def mutate(trace: dict[str, Any]) -> None:
        trace["error"] = ""
        room = size - ref_size(trace)
        width = ref_size(unit) - 2
        trace["error"] = unit * (room // width) + "a" * (room % width)

    return mutate


# --- guard rules: one accepting and one rejecting case per rule ------------------------

ACCEPT: list[tuple[str, Callable[[dict[str, Any]], None]]] = [
    ("baseline", lambda t: None),
    ("kind-omp", set_key("kind", "omp-fabric.execution")),
    ("version-float-1.0", set_key("version", 1.0)),
    ("outcome-each", set_key("outcome", "timed_out")),
    ("phases-empty", set_key("phases", [])),
    ("phases-repeated", set_key("phases", ["A", "B", "A", "A"])),
    ("operations-empty", set_key("operations", [])),
    ("sequence-gaps-nonzero-start", lambda t: spread_sequences(t, start=5, step=10)),
    ("sequence-integral-float", with_op(2, sequence=8.0)),
    ("sequence-max-safe", with_op(2, sequence=2**53 - 1)),
    ("counts-integral-float", set_key("counts.droppedValues", 3.0)),
    ("counts-negative-zero", set_key("counts.redactedValues", -0.0)),
    ("counts-max-safe", set_key("counts.droppedOperations", 2**53 - 1)),
    ("error-absent", drop_key("error")),
    ("error-empty", set_key("error", "")),
    (
        "op-minimal",
        set_key(
            "operations",
            [{"type": "call", "sequence": 0, "ref": "x", "args": {}, "outcome": "aborted"}],
        ),
    ),
    (
        "op-all-optional",
        with_op(0, failureStage="guard", error="e", result=[1, "a", None], resultTruncated=False),
    ),
    ("ref-any-string", with_op(0, ref="Zürich.東京")),
    ("identity-mismatch", with_op(0, provider="omp", action="ls")),
    ("failure-stage-each", with_op(0, failureStage="approve")),
    ("result-truncated-bool", with_op(0, resultTruncated=True)),
    ("args-unprojected", with_op(0, args={"password": "x", "": 1, "__proto__": None})),
    ("args-number-forms", with_op(0, args={"a": 1.5, "b": -2, "c": 1e300, "d": 2**64})),
    ("args-depth-14", with_op(0, args=nest(15, 1))),
    ("args-depth-14-arrays", with_op(0, args=nest(14, [], arrays=True))),
    ("result-depth-14", with_op(0, result=nest(15, "x", arrays=True))),
    ("result-scalar", with_op(0, result=None)),
    ("size-exactly-512KiB", pad_error_to(LIMIT)),
    ("size-exactly-512KiB-utf8", pad_error_to(LIMIT, "😀")),
    (
        "size-exactly-512KiB-number-forms",
        chain(
            set_key("version", 1.0),
            set_key("counts.droppedValues", -0.0),
            set_key("counts.redactedValues", 3.0),
            with_op(0, args={"n": [-0.0, 1e21, 0.5, 10**25, 10**17 - 1]}),
            pad_error_to(LIMIT),
        ),
    ),
    ("size-measured-like-js", with_op(0, args={"f": [1e15] * 29_000})),
]

REJECT: list[tuple[str, Callable[[dict[str, Any]], None], str]] = [
    ("extra-key", set_key("timestamp", 1), "$: unexpected key"),
    ("extra-key-proto", set_key("__proto__", {}), "$: unexpected key"),
    ("missing-kind", drop_key("kind"), "kind: missing"),
    ("missing-counts", drop_key("counts"), "counts: missing"),
    ("missing-phases", drop_key("phases"), "phases: missing"),
    ("kind-enum", set_key("kind", "pi-fabric.exec"), "kind:"),
    ("version-true", set_key("version", True), "version:"),
    ("version-string", set_key("version", "1"), "version:"),
    ("version-2", set_key("version", 2), "version:"),
    ("version-1.5", set_key("version", 1.5), "version:"),
    ("outcome-enum", set_key("outcome", "success"), "outcome:"),
    ("phases-type", set_key("phases", "Plan"), "phases:"),
    ("phases-item-type", set_key("phases", ["A", 2]), "phases[1]:"),
    ("operations-type", set_key("operations", {"0": {}}), "operations:"),
    ("op-not-object", set_key("operations", [None]), "operations[0]:"),
    ("op-extra-key", with_op(1, durationMs=3), "operations[1]: unexpected key"),
    ("op-missing-type", without_op_key("type"), "operations[1].type: missing"),
    ("op-missing-sequence", without_op_key("sequence"), "operations[1].sequence: missing"),
    ("op-missing-ref", without_op_key("ref"), "operations[1].ref: missing"),
    ("op-missing-args", without_op_key("args"), "operations[1].args: missing"),
    ("op-missing-outcome", without_op_key("outcome"), "operations[1].outcome: missing"),
    ("op-type", with_op(1, type="Call"), "operations[1].type:"),
    ("sequence-negative", with_op(0, sequence=-1), "operations[0].sequence:"),
    ("sequence-fraction", with_op(0, sequence=0.5), "operations[0].sequence:"),
    ("sequence-bool", with_op(0, sequence=False), "operations[0].sequence:"),
    ("sequence-unsafe", with_op(2, sequence=2**53), "operations[2].sequence:"),
    ("sequence-duplicate", with_op(1, sequence=0), "operations[1].sequence: not strictly"),
    ("sequence-decreasing", with_op(2, sequence=1), "operations[2].sequence: not strictly"),
    ("ref-type", with_op(0, ref=1), "operations[0].ref:"),
    ("args-type", with_op(0, args=[["path", "x"]]), "operations[0].args:"),
    ("args-nan", with_op(0, args={"a": [math.nan]}), "operations[0].args.a[0]:"),
    ("args-infinity", with_op(0, args={"a": math.inf}), "operations[0].args.a:"),
    ("args-huge-int", with_op(0, args={"a": 2**1024}), "operations[0].args.a:"),
    ("args-non-string-key", with_op(0, args={"a": {1: 2}}), "operations[0].args.a:"),
    ("args-not-json", with_op(0, args={"a": (1, 2)}), "operations[0].args.a:"),
    ("args-depth-15", with_op(0, args=nest(16, 1)), "operations[0].args.k"),
    ("result-depth-15", with_op(0, result=nest(15, [], arrays=True)), "operations[0].result"),
    ("result-nan", with_op(0, result=math.nan), "operations[0].result:"),
    ("op-outcome-enum", with_op(0, outcome="Failed"), "operations[0].outcome:"),
    ("op-outcome-type", with_op(0, outcome=None), "operations[0].outcome:"),
    ("provider-type", with_op(0, provider=None), "operations[0].provider:"),
    ("action-type", with_op(0, action=1), "operations[0].action:"),
    ("op-error-type", with_op(0, error=[]), "operations[0].error:"),
    ("failure-stage-enum", with_op(0, failureStage="execute"), "operations[0].failureStage:"),
    ("result-truncated-type", with_op(0, resultTruncated="true"), "operations[0].resultTr"),
    ("counts-type", set_key("counts", [0, 0, 0, 0]), "counts:"),
    ("counts-extra-key", set_key("counts.total", 0), "counts: unexpected key"),
    ("counts-missing-key", lambda t: t["counts"].pop("redactedValues"), "counts.redactedValues:"),
    (
        "counts-renamed-key",
        lambda t: t["counts"].update(total=t["counts"].pop("redactedValues")),
        "counts: unexpected key",
    ),
    ("counts-negative", set_key("counts.droppedValues", -1), "counts.droppedValues:"),
    ("counts-fraction", set_key("counts.droppedValues", 1.5), "counts.droppedValues:"),
    ("counts-unsafe", set_key("counts.droppedValues", 2**53), "counts.droppedValues:"),
    ("counts-bool", set_key("counts.droppedValues", True), "counts.droppedValues:"),
    ("counts-string", set_key("counts.droppedValues", "0"), "counts.droppedValues:"),
    ("error-type", set_key("error", None), "error:"),
    ("size-512KiB-plus-1", pad_error_to(LIMIT + 1), "$: serialized size"),
    ("size-utf8", pad_error_to(LIMIT + 1, "é"), "$: serialized size"),
    ("size-lone-surrogate-6-bytes", pad_error_to(LIMIT + 1, "\ud800"), "$: serialized size"),
    ("size-measured-like-js", with_op(0, args={"f": [1e20] * 26_000}), "$: serialized size"),
    (
        "size-512KiB-plus-1-number-forms",
        chain(
            set_key("counts.droppedValues", -0.0),
            with_op(0, args={"n": [1.0, 1e-7, 10**17 - 1]}),
            pad_error_to(LIMIT + 1),
        ),
        "$: serialized size",
    ),
]


@pytest.mark.parametrize(("rule", "mutate"), ACCEPT, ids=[rule for rule, _ in ACCEPT])
def test_guard_accepts(rule: str, mutate: Callable[[dict[str, Any]], None]) -> None:
    """Each accepting case of a guard rule passes, and the reference checker agrees."""
    trace = make_trace()
    mutate(trace)
    assert trace_rejection(trace) is None
    assert is_fabric_execution_trace_v1(trace)
    assert read_fabric_execution_trace_v1(trace) is trace
    assert ref_trace_ok(trace), rule


@pytest.mark.parametrize(("rule", "mutate", "where"), REJECT, ids=[rule for rule, _, _ in REJECT])
def test_guard_rejects(rule: str, mutate: Callable[[dict[str, Any]], None], where: str) -> None:
    """Each rejecting case of a guard rule fails with a reason that starts at its JSON path."""
    trace = make_trace()
    mutate(trace)
    reason = trace_rejection(trace)
    assert reason is not None and reason.startswith(where), reason
    assert not is_fabric_execution_trace_v1(trace)
    assert read_fabric_execution_trace_v1(trace) is None
    assert not ref_trace_ok(trace), rule


@pytest.mark.parametrize(
    "value",
    [None, [], "trace", 1, True, make_trace(operations=[]) | {"audits": []}],
    ids=["null", "array", "string", "number", "boolean", "envelope-shaped"],
)
def test_guard_rejects_non_traces(value: Any) -> None:
    """Anything that is not a trace object is rejected at the root."""
    assert (trace_rejection(value) or "").startswith("$:")
    assert not is_fabric_execution_trace_v1(value)


def test_duplicate_keys_mean_the_last_occurrence() -> None:
    """Raw JSON with a duplicated key is judged by its last occurrence, as JSON.parse does."""
    text = orjson.dumps(make_trace()).decode()
    assert is_fabric_execution_trace_v1(orjson.loads('{"kind":"nope",' + text[1:]))
    assert not is_fabric_execution_trace_v1(orjson.loads(text[:-1] + ',"kind":"nope"}'))


def test_operation_guard_on_its_own() -> None:
    """The operation guard accepts a well-formed operation and rejects a broken one."""
    assert is_fabric_execution_trace_operation_v1(make_op(4))
    assert not is_fabric_execution_trace_operation_v1(make_op(4, outcome="ok"))
    assert not is_fabric_execution_trace_operation_v1(make_op(-1))
    assert not is_fabric_execution_trace_operation_v1([make_op(4)])


# --- the 3,007 corpus cases ------------------------------------------------------------


@functools.cache
def corpus_cases() -> list[tuple[int, str, Any, bool]]:
    expected = {}
    for line in corpus_bytes("traces.expected.jsonl").splitlines():
        case = orjson.loads(line)
        expected[case["id"]] = case["expected"]
    cases = []
    for line in corpus_bytes("traces.jsonl").splitlines():
        case = orjson.loads(line)  # as it is: -0, 2.0, 2^53+1, __proto__, duplicates
        cases.append((case["id"], case["rule"], case["trace"], expected[case["id"]]))
    return cases


def corpus_mismatches() -> list[str]:
    return [
        f"{case_id} ({rule}): expected {want}, got {trace_rejection(trace)}"
        for case_id, rule, trace, want in corpus_cases()
        if is_fabric_execution_trace_v1(trace) != want
    ]


def test_guard_agrees_with_every_corpus_case(corpus_dir: Path) -> None:
    """All 3,007 corpus traces get exactly the verdict traces.expected.jsonl gives."""
    assert len(corpus_cases()) == 3007
    assert corpus_mismatches() == []


def test_corpus_sabotage_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """A guard that forgets the omp kind disagrees with the corpus (the check has teeth)."""
    monkeypatch.setattr(guard_module, "TRACE_KINDS", frozenset({"pi-fabric.execution"}))
    assert len(corpus_mismatches()) > 0


CORPUS_REASON_PATHS = {
    "args": r"operations\[\d+\]\.args",
    "counts.extraKey": r"counts: unexpected key",
    "counts.missingKey": r"counts\.\w+: missing",
    "counts": r"counts(\.\w+)?: expected",
    "error": r"error: ",
    "failureStage": r"operations\[\d+\]\.failureStage: ",
    "kind": r"kind: ",
    "operation.extraKey": r"operations\[\d+\]: unexpected key",
    "operation.missingKey": r"operations\[\d+\]\.\w+: missing",
    "operation.notObject": r"operations\[\d+\]: expected an operation object",
    "operation": r"operations\[\d+\]\.(action|error|outcome|provider|type): ",
    "operations": r"operations: ",
    "outcome": r"outcome: ",
    "phases": r"phases(\[\d+\])?: ",
    "ref": r"operations\[\d+\]\.ref: ",
    "result": r"operations\[\d+\]\.result",
    "resultTruncated": r"operations\[\d+\]\.resultTruncated: ",
    "sequence": r"operations\[\d+\]\.sequence: ",
    "size": r"\$: serialized size \d+ bytes",
    "trace.duplicateKey": r"kind: ",
    "trace.missingKey": r"\w+: missing",
    "trace.notObject": r"\$: expected a trace object",
    "trace": r"\$: unexpected key",
    "version": r"version: ",
}


def test_corpus_rejections_name_the_json_path(corpus_dir: Path) -> None:
    """Every rejected corpus trace gets a reason starting at the path its rule is about."""
    wrong = []
    for case_id, rule, trace, _ in corpus_cases():
        reason = trace_rejection(trace)
        if reason is None:
            continue
        group = rule if rule in CORPUS_REASON_PATHS else rule.split(".")[0]
        if not re.match(CORPUS_REASON_PATHS[group], reason):
            wrong.append((case_id, rule, reason))
    assert wrong == []


# --- property tests: never raises, agrees with the reference checker -------------------

TEXT = st.text(st.characters(codec="utf-8") | st.sampled_from(["\ud800", "\x00", '"']), max_size=6)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(),
    TEXT,
    st.sampled_from([0, 1, 1.0, -0.0, 3.0, 0.5, 2**53 - 1, 2**53, 2**1024, 1e21, "call"]),
)
JSON_LIKE = st.recursive(
    SCALARS,
    lambda kids: (
        st.lists(kids, max_size=3) | st.dictionaries(TEXT | st.integers(0, 2), kids, max_size=3)
    ),
    max_leaves=12,
)
NESTED = st.builds(nest, st.integers(0, 17), SCALARS, arrays=st.booleans())


CLEAN_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**60), 2**60)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT,
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(TEXT, kids, max_size=3),
    max_leaves=8,
)
CLEAN_NESTED = st.builds(nest, st.integers(0, 17), CLEAN_JSON, arrays=st.booleans())
ODD = (
    JSON_LIKE
    | NESTED
    | st.sampled_from(
        ["Call", "ok", "execute", "pi-fabric", "1", "true", -1, 1.5, 2, 2**53, True, None, [], {}]
    )
)


@st.composite
def operations(draw: st.DrawFn, sequence: int, integral: bool = False) -> dict[str, Any]:
    """A well-formed operation (deep ``args``/``result`` may still break the depth rule)."""
    op: dict[str, Any] = {
        "type": "call",
        "sequence": float(sequence) if not integral and draw(st.booleans()) else sequence,
        "ref": draw(TEXT),
        "args": draw(st.dictionaries(TEXT, CLEAN_JSON | CLEAN_NESTED, max_size=3)),
        "outcome": draw(st.sampled_from(REF_OUTCOMES)),
    }
    optional = {
        "provider": TEXT,
        "action": TEXT,
        "error": TEXT,
        "failureStage": st.sampled_from(REF_STAGES),
        "result": CLEAN_JSON | CLEAN_NESTED,
        "resultTruncated": st.booleans(),
    }
    for key, strategy in optional.items():
        if draw(st.booleans()):
            op[key] = draw(strategy)
    return op


def _pick(draw: st.DrawFn, mapping: dict[Any, Any]) -> Any:
    return draw(st.sampled_from(sorted(mapping, key=str))) if mapping else None


@st.composite
def traces(draw: st.DrawFn, integral: bool = False) -> Any:
    """A well-formed trace, then zero to two random breakages (odd values, keys, order).

    ``integral``: counts, sequences and the version are written as integers, never as
    floats (the guard's common path).
    """
    sequences = sorted(draw(st.sets(st.integers(0, 2**53 - 1), max_size=4)))
    numbers = [0, 3, 2**53 - 1] if integral else [0, 3, 3.0, -0.0, 2**53 - 1]
    trace: dict[Any, Any] = {
        "kind": draw(st.sampled_from(REF_KINDS)),
        "version": draw(st.sampled_from([1] if integral else [1, 1.0])),
        "outcome": draw(st.sampled_from(REF_OUTCOMES)),
        "phases": draw(st.lists(TEXT, max_size=3)),
        "operations": [draw(operations(s, integral)) for s in sequences],
        "counts": {k: draw(st.sampled_from(numbers)) for k in sorted(REF_COUNT_KEYS)},
    }
    if draw(st.booleans()):
        trace["error"] = draw(TEXT)
    for _ in range(draw(st.sampled_from([0, 0, 1, 1, 2]))):
        # An earlier breakage may have replaced operations, an operation or its sequence.
        listed = trace.get("operations") if type(trace.get("operations")) is list else []
        ops = [o for o in listed if type(o) is dict]
        op = draw(st.sampled_from(ops)) if ops else None
        counts = trace.get("counts") if type(trace.get("counts")) is dict else {}
        breakage = draw(st.sampled_from(["trace", "op", "count", "drop", "extra", "order"]))
        if breakage == "trace":
            trace[draw(st.sampled_from(sorted(REF_TRACE_KEYS)))] = draw(ODD)
        elif breakage == "op" and op is not None:
            op[draw(st.sampled_from(sorted(REF_OP_KEYS)))] = draw(ODD)
        elif breakage == "count" and counts:
            counts[_pick(draw, counts)] = draw(ODD)
        elif breakage == "drop":
            target = draw(st.sampled_from([trace, op or trace, counts or trace]))
            del target[_pick(draw, target)]
        elif breakage == "extra":
            target = draw(st.sampled_from([trace, op or trace, counts or trace]))
            target[draw(st.sampled_from(["__proto__", "audits", "", "id", 7]))] = 1
        elif breakage == "order" and sum("sequence" in o for o in ops) > 1:
            numbered = [o for o in ops if "sequence" in o]
            first, second = draw(st.permutations(range(len(numbered))))[:2]
            ops = numbered
            ops[first]["sequence"], ops[second]["sequence"] = (
                ops[second]["sequence"],
                ops[first]["sequence"],
            )
    return trace


@settings(max_examples=300, deadline=None)
@given(traces())
def test_guard_agrees_with_reference_checker(value: Any) -> None:
    """On trace-shaped JSON values the guard and the independent checker give the same verdict."""
    assert is_fabric_execution_trace_v1(value) == ref_trace_ok(value)
    assert (trace_rejection(value) is None) == ref_trace_ok(value)


@settings(max_examples=300, deadline=None)
@given(traces(integral=True))
def test_guard_common_path_accepts_only_what_the_exact_check_accepts(value: Any) -> None:
    """The one-pass common path never accepts what the exact check rejects, and sizes alike."""
    size = guard_module._plain_trace_size(value)
    delta = [0]
    exact = guard_module.structure_failure(value, delta)
    if size is not None:
        assert exact is None
        assert size == stringify_size(value, delta[0])
    assert is_fabric_execution_trace_v1(value) == ref_trace_ok(value)


def test_guard_common_path_defers_keys_that_are_not_exact_strings() -> None:
    """A ``str``-subclass key in the trace, an operation or its args still fails the guard."""
    assert guard_module._plain_trace_size(make_trace()) is not None  # the common path is taken
    for target in ("trace", "op", "args"):
        trace = make_trace()
        holder = {"trace": trace, "op": trace["operations"][0],
                  "args": trace["operations"][0]["args"]}[target]
        key = next(iter(holder))
        holder[StrSubclass(key)] = holder.pop(key)
        assert guard_module._plain_trace_size(trace) is None
        assert not is_fabric_execution_trace_v1(trace)


@pytest.mark.parametrize(
    ("place", "reason"),
    [
        ("kind", "kind: unknown kind"),
        ("outcome", "outcome: expected one of"),
        ("type", "operations[1].type: expected"),
        ("failureStage", "operations[1].failureStage: expected one of"),
        ("id", 'operations[1]: unexpected key "id"'),
    ],
)
def test_guard_common_path_defers_what_it_only_compares(place: str, reason: str) -> None:
    """A ``str``-subclass value equal to an allowed name (the common path compares it, orjson
    proves its type) or a key no rule names never passes the common path; the exact check
    gives the reason."""
    trace = make_trace()
    holder = trace if place in ("kind", "outcome") else trace["operations"][1]
    holder[place] = StrSubclass(holder.get(place, "x"))
    assert guard_module._plain_trace_size(trace) is None
    assert (trace_rejection(trace) or "").startswith(reason)


@settings(max_examples=16, deadline=None)
@given(
    st.integers(LIMIT - 40, LIMIT + 40),
    st.sampled_from(["a", "é", "€", "😀", "\x01", '"', "\ud800", "\u2028"]),
)
def test_guard_size_boundary_agrees_with_reference(size: int, unit: str) -> None:
    """Near 512 KiB, with escapes and multi-byte text, the guard and reference agree."""
    trace = make_trace()
    pad_error_to(size, unit)(trace)
    assert is_fabric_execution_trace_v1(trace) == ref_trace_ok(trace) == (ref_size(trace) <= LIMIT)


class RaisingKey:
    """A dict key that hashes but explodes on comparison."""

    def __hash__(self) -> int:
        return 1

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("boom")


class StrSubclass(str):
    pass


def cyclic_list() -> list[Any]:
    cycle: list[Any] = []
    cycle.append(cycle)
    return cycle


def cyclic_trace() -> dict[str, Any]:
    trace = make_trace()
    trace["operations"][0]["args"]["self"] = trace["operations"][0]["args"]
    return trace


NON_JSON = st.one_of(
    st.sampled_from([math.nan, -math.inf, b"bytes", {1, 2}, object(), len, 10**400, -(2**64)]),
    st.builds(tuple, st.lists(SCALARS, max_size=2)),
    st.builds(StrSubclass, TEXT),
    st.builds(cyclic_list),
    st.builds(cyclic_trace),
    st.builds(lambda: {RaisingKey(): 1}),
    st.builds(lambda: {"args": {RaisingKey(): 1}}),
)
PLACES = ["root", "kind", "version", "phase", "op", "args", "result", "count", "error", "key"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(NON_JSON | JSON_LIKE, st.sampled_from(PLACES))
def test_guard_never_raises_on_any_python_value(odd: Any, place: str) -> None:
    """Non-JSON values anywhere in a trace never make any reader raise; the verdict agrees."""
    trace = make_trace()
    op = trace["operations"][0]
    target: Any = {
        "root": None,
        "kind": lambda: trace.__setitem__("kind", odd),
        "version": lambda: trace.__setitem__("version", odd),
        "phase": lambda: trace["phases"].append(odd),
        "op": lambda: trace["operations"].append(odd),
        "args": lambda: op["args"].__setitem__("x", odd),
        "result": lambda: op.__setitem__("result", odd),
        "count": lambda: trace["counts"].__setitem__("droppedValues", odd),
        "error": lambda: trace.__setitem__("error", odd),
        "key": lambda: op["args"].__setitem__(odd, 1) if odd.__hash__ else None,
    }[place]
    value = odd if target is None else trace
    if target is not None:
        try:
            target()
        except TypeError:  # unhashable key
            return
    verdict = is_fabric_execution_trace_v1(value)
    assert verdict == ref_trace_ok(value)
    assert (trace_rejection(value) is None) == verdict
    assert isinstance(is_fabric_execution_trace_operation_v1(value), bool)
    message = {"role": "toolResult", "toolName": "fabric_exec", "details": {"trace": value}}
    result = read_fabric_result("e1", message)
    assert result is not None and result.verdict == ("valid" if verdict else "invalid")
    read_fabric_execution_render_details({"trace": value, "audits": [value], "phases": value})
    read_fabric_result("e1", {**message, "details": {"audits": [{"ref": "x", "args": value,
                                                                  "success": True}]}})


# --- envelope writer -----------------------------------------------------------------


def big_op(sequence: int, size: int) -> dict[str, Any]:
    return make_op(sequence, ref="pi.bash", action="bash", args={"command": "c" * size})


STAGES = ["audits", "operations", "phases", "trace.phases", "trace.error", "error"]


def writer_input(stop: str) -> dict[str, Any]:
    """Inputs where trimming must empty every stage before ``stop`` and stop inside it.

    Earlier stages hold half the bound each, ``stop`` the whole bound in 20 items (one
    string for the errors), later stages a twentieth each.
    """
    index = STAGES.index(stop)
    sizes = {s: LIMIT // 2 if i < index else LIMIT // 20 for i, s in enumerate(STAGES)}
    sizes[stop] = LIMIT
    per = 20
    trace = make_trace(
        operations=[big_op(i, sizes["operations"] // per) for i in range(per)],
        phases=["t" * (sizes["trace.phases"] // per) for _ in range(per)],
        error="E" * sizes["trace.error"],
        counts={
            "droppedValues": 2,
            "truncatedValues": 0,
            "redactedValues": 0,
            "droppedOperations": 5.0,
        },
    )
    return {
        "success": False,
        "trace": trace,
        "audits": [
            {"ref": "pi.read", "result": "r" * (sizes["audits"] // per), "n": 1.5}
            for _ in range(per)
        ],
        "phases": ["p" * (sizes["phases"] // per) for _ in range(per)],
        "error": "X" * sizes["error"],
    }


def stage_items(envelope: dict[str, Any], stage: str) -> list[Any]:
    trace = envelope["trace"]
    return {
        "audits": envelope["audits"],
        "operations": trace["operations"],
        "phases": envelope["phases"],
        "trace.phases": trace["phases"],
        "trace.error": [trace["error"]] if "error" in trace else [],
        "error": [envelope["error"]] if "error" in envelope else [],
    }[stage]


@pytest.mark.parametrize("stop", STAGES, ids=STAGES)
def test_writer_trims_in_order(stop: str) -> None:
    """Trimming empties each earlier stage, stops inside ``stop`` and leaves later ones alone."""
    source = writer_input(stop)
    original = copy.deepcopy(source)
    assert ref_size(source) > LIMIT
    details = create_fabric_persisted_execution_details(**source)
    assert source == original  # the caller's objects are untouched
    assert ref_size(details) <= LIMIT
    assert is_fabric_execution_trace_v1(details["trace"])
    index = STAGES.index(stop)
    for stage in STAGES[:index]:
        assert stage_items(details, stage) == [], stage
    for stage in STAGES[index + 1 :]:
        assert stage_items(details, stage) == stage_items(original, stage), stage
    kept, had = stage_items(details, stop), stage_items(original, stop)
    if stop == "error":
        assert had[0].startswith(kept[0]) and ref_size(details) > LIMIT - 8
    else:
        assert kept == had[: len(kept)] and len(kept) < len(had)
    dropped_ops = len(original["trace"]["operations"]) - len(details["trace"]["operations"])
    dropped_values = len(original["trace"]["phases"]) - len(details["trace"]["phases"])
    dropped_values += "error" not in details["trace"]
    assert details["trace"]["counts"]["droppedOperations"] == 5 + dropped_ops
    assert details["trace"]["counts"]["droppedValues"] == 2 + dropped_values


@pytest.mark.parametrize("stop", ["audits", "operations", "phases", "trace.phases"])
def test_writer_drops_no_more_than_needed(stop: str) -> None:
    """Putting back the last dropped item of the stopping stage would break the bound."""
    source = writer_input(stop)
    details = create_fabric_persisted_execution_details(**source)
    kept, had = stage_items(details, stop), stage_items(source, stop)
    kept.append(had[len(kept)])
    counts = details["trace"]["counts"]
    if stop == "operations":
        counts["droppedOperations"] -= 1
    if stop == "trace.phases":
        counts["droppedValues"] -= 1
    assert ref_size(details) > LIMIT


def test_writer_keeps_a_small_envelope_whole() -> None:
    """Under the bound the envelope is exactly the inputs, in wire order."""
    trace = make_trace()
    details = create_fabric_persisted_execution_details(
        success=True, trace=trace, audits=[{"ref": "pi.read"}], phases=["A"], error="e"
    )
    assert list(details) == ["success", "trace", "audits", "phases", "error"]
    assert details["trace"] == trace and details["trace"] is not trace
    assert details["audits"] == [{"ref": "pi.read"}] and details["phases"] == ["A"]
    assert "error" not in create_fabric_persisted_execution_details(success=True, trace=trace)


def test_writer_measures_like_json_stringify() -> None:
    """The bound is on JavaScript's serialization: 1e20 costs 21 bytes, not orjson's 5."""
    audits = [[1e20] * 1000 for _ in range(30)]  # ~660 KB in JS, ~180 KB in orjson
    details = create_fabric_persisted_execution_details(
        success=True, trace=make_trace(), audits=audits
    )
    assert len(orjson.dumps(audits)) < LIMIT < ref_size({"audits": audits})
    assert 0 < len(details["audits"]) < len(audits) and ref_size(details) <= LIMIT


def test_writer_sabotage_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer measuring orjson bytes instead of JavaScript's overflows the bound."""
    monkeypatch.setattr(guard_module, "float_delta", lambda value: 0)
    audits = [[1e20] * 1000 for _ in range(30)]
    details = create_fabric_persisted_execution_details(
        success=True, trace=make_trace(), audits=audits
    )
    assert ref_size(details) > LIMIT


@pytest.mark.parametrize(
    ("fields", "where"),
    [
        ({"trace": make_trace(version=2)}, "trace.version"),
        ({"trace": make_trace(operations=[make_op(1), make_op(1)])}, "trace.operations[1]"),
        ({"audits": [{"a": (1, 2)}]}, "details.audits[0].a"),
        ({"audits": [cyclic_list()]}, "details"),
        ({"error": "lone \ud800"}, "details"),
        ({"phases": ["A", 1]}, "phases[1]"),
        ({"success": "yes"}, "success"),
    ],
    ids=[
        "bad-trace",
        "bad-sequence",
        "non-json-audit",
        "cyclic-audit",
        "lone-surrogate",
        "bad-phase",
        "bad-success",
    ],
)
def test_writer_refuses_what_it_cannot_persist(fields: dict[str, Any], where: str) -> None:
    """A malformed input raises TraceError naming where, instead of writing a bad envelope."""
    arguments: dict[str, Any] = {"success": True, "trace": make_trace()} | fields
    with pytest.raises(TraceError, match=re.escape(where)):
        create_fabric_persisted_execution_details(**arguments)


PLAIN_TEXT = st.text(max_size=6)
WRITABLE = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(-1e30, 1e30)
    | PLAIN_TEXT,
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(PLAIN_TEXT, kids, max_size=3),
    max_leaves=8,
)


@settings(max_examples=60, deadline=None)
@given(
    limit=st.integers(400, 4000),
    audits=st.lists(WRITABLE, max_size=6),
    op_sizes=st.lists(st.integers(0, 300), max_size=6),
    phases=st.lists(st.text(max_size=80), max_size=6),
    trace_phases=st.lists(st.text(max_size=80), max_size=6),
    trace_error=st.none() | st.text(max_size=300),
    error=st.none() | st.text(max_size=3000),
)
def test_writer_always_fits_any_bound(
    limit: int,
    audits: list[Any],
    op_sizes: list[int],
    phases: list[str],
    trace_phases: list[str],
    trace_error: str | None,
    error: str | None,
) -> None:
    """For any bound and contents the envelope fits, stays valid and trims stage by stage."""
    trace = make_trace(
        operations=[big_op(i, n) for i, n in enumerate(op_sizes)], phases=trace_phases
    )
    del trace["error"]
    if trace_error is not None:
        trace["error"] = trace_error
    source: dict[str, Any] = {"success": False, "trace": trace, "audits": audits, "phases": phases}
    if error is not None:
        source["error"] = error
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(writer_module, "DETAILS_MAX_BYTES", limit)
        details = create_fabric_persisted_execution_details(**source)
    assert ref_size(details) <= limit
    assert is_fabric_execution_trace_v1(details["trace"])
    for index, stage in enumerate(STAGES):
        if stage_items(details, stage) != stage_items(source, stage):
            assert all(stage_items(details, earlier) == [] for earlier in STAGES[:index])


# --- render-side reader --------------------------------------------------------------


def test_render_details_prefer_persisted_audits_and_phases() -> None:
    """Persisted audits, phases, success and error win over the trace."""
    details = {
        "success": False,
        "trace": make_trace(),
        "error": "boom",
        "phases": ["X", 3],
        "audits": [
            {"ref": "pi.read", "args": {"path": "a"}, "success": True},
            {"no": "ref"},
            "junk",
        ],
    }
    rendered = read_fabric_execution_render_details(details)
    assert rendered is not None
    assert rendered["trace"] is details["trace"]
    assert rendered["audits"] == [{"ref": "pi.read", "args": {"path": "a"}, "success": True}]
    assert rendered["phases"] == ["X"]
    assert (rendered["success"], rendered["error"]) == (False, "boom")


def test_render_details_rebuild_from_a_trace_alone() -> None:
    """A trace-only envelope renders trace-derived audits, its phases, outcome and error."""
    trace = make_trace()
    rendered = read_fabric_execution_render_details({"trace": trace})
    assert rendered is not None
    assert [a["ref"] for a in rendered["audits"]] == ["pi.read", "pi.edit", "pi.write"]
    assert all(a["traceDerived"] for a in rendered["audits"])
    assert [a["success"] for a in rendered["audits"]] == [True, False, True]
    assert rendered["phases"] == trace["phases"]
    assert (rendered["success"], rendered["error"]) == (False, "Execution failed")


@pytest.mark.parametrize("details", [None, [], "x", {"trace": None}, {"trace": {"kind": 1}}])
def test_render_details_tolerate_garbage(details: Any) -> None:
    """Damaged details render as nothing (None for non-objects), never raising."""
    rendered = read_fabric_execution_render_details(details)
    if type(details) is dict:
        assert rendered == {
            "success": None,
            "trace": None,
            "audits": [],
            "phases": [],
            "error": None,
        }
    else:
        assert rendered is None


# --- legacy audits adapter ------------------------------------------------------------


def legacy_audits() -> list[dict[str, Any]]:
    return [
        {
            "ref": "fabric.workflow.phase",
            "args": {"name": "Plan"},
            "success": True,
            "result": "…",
            "preview": {},
        },
        {
            "ref": "pi.edit",
            "args": {"path": "a.ts", "edits": []},
            "success": False,
            "error": "ENOENT",
        },
        {"ref": "mcp.github.search", "args": {}, "success": True},
        {"ref": "pi.read", "args": {"path": "b.ts"}, "success": True},
    ]


def test_legacy_adapter_accepts_well_formed_audits() -> None:
    """Each audit becomes an operation whose sequence is its index."""
    result = read_fabric_result("ab12", tool_result({"audits": legacy_audits(), "phases": ["P"]}))
    assert result is not None and result.verdict == "legacy"
    assert [(o.sequence, o.ref, o.outcome, o.error) for o in result.operations] == [
        (0, "fabric.workflow.phase", "succeeded", None),
        (1, "pi.edit", "failed", "ENOENT"),
        (2, "mcp.github.search", "succeeded", None),
        (3, "pi.read", "succeeded", None),
    ]
    empty = read_fabric_result("ab12", tool_result({"audits": []}))
    assert empty is not None and empty.verdict == "legacy" and empty.operations == ()


LEGACY_BREAKS = [
    ("not-array", lambda a: {"ref": "x"}, "audits is not an array"),
    ("record-not-object", lambda a: [*a[:2], "audit", *a[3:]], "audits[2] is not an object"),
    ("ref-missing", lambda a: [*a[:2], {**a[2], "ref": None}, *a[3:]], "audits[2].ref is not"),
    ("ref-number", lambda a: [*a[:2], {**a[2], "ref": 1}, *a[3:]], "audits[2].ref is not"),
    ("args-array", lambda a: [*a[:2], {**a[2], "args": []}, *a[3:]], "audits[2].args is not"),
    ("args-missing", lambda a: [*a[:2], {"ref": "x", "success": True}], "audits[2].args is not"),
    ("success-string", lambda a: [*a[:2], {**a[2], "success": "true"}], "audits[2].success is"),
    ("error-number", lambda a: [*a[:2], {**a[2], "error": 404}], "audits[2].error is not"),
    ("error-null", lambda a: [*a[:2], {**a[2], "error": None}], "audits[2].error is not"),
]


@pytest.mark.parametrize(
    ("rule", "breaks", "reason"), LEGACY_BREAKS, ids=[r for r, _, _ in LEGACY_BREAKS]
)
def test_legacy_adapter_rejects_everything_for_one_bad_record(
    rule: str, breaks: Callable[[list[dict[str, Any]]], Any], reason: str
) -> None:
    """One malformed audit rejects the whole array, with a reason naming its path."""
    details = {"audits": breaks(legacy_audits())}
    result = read_fabric_result("ab12", tool_result(details))
    assert result is not None and result.verdict == "invalid" and result.operations == ()
    assert (result.reason or "").startswith(f"legacy audits rejected: {reason}")


def tool_result(details: Any, tool: str = "fabric_exec") -> dict[str, Any]:
    return {
        "role": "toolResult",
        "toolCallId": "t1",
        "toolName": tool,
        "content": [],
        "details": details,
        "isError": False,
    }


def test_legacy_audits_give_index_addresses_when_trace_is_absent() -> None:
    """Without a trace key, accepted audits yield operations <entry>/<index> and no phases."""
    result = read_fabric_result("ab12", tool_result({"audits": legacy_audits(), "phases": ["P"]}))
    assert result is not None and result.verdict == "legacy"
    assert [o.address for o in result.operations] == [f"ab12/{i}" for i in range(4)]
    assert [o.outcome for o in result.operations] == [
        "succeeded",
        "failed",
        "succeeded",
        "succeeded",
    ]
    assert result.phases == () and result.operations[1].record is not None


@pytest.mark.parametrize(
    "trace",
    [None, make_trace(version=2), make_trace(operations=[make_op(2), make_op(1)])],
    ids=["null", "unknown-version", "not-increasing"],
)
def test_present_invalid_trace_blocks_legacy_audits(trace: Any) -> None:
    """A present but invalid trace yields no operations even beside perfect audits."""
    result = read_fabric_result("ab12", tool_result({"trace": trace, "audits": legacy_audits()}))
    assert result is not None and result.verdict == "invalid"
    assert result.reason == trace_rejection(trace) and result.operations == ()


def test_valid_trace_gives_sequence_and_phase_addresses() -> None:
    """A valid trace yields <entry>/<sequence> operations and <entry>/phase:<i> phases."""
    trace = make_trace()
    result = read_fabric_result("ab12", tool_result({"success": False, "trace": trace}))
    assert result is not None and result.verdict == "valid" and result.reason is None
    assert [o.address for o in result.operations] == ["ab12/0", "ab12/3", "ab12/7"]
    assert [(p.address, p.name) for p in result.phases] == [
        ("ab12/phase:0", "Plan"),
        ("ab12/phase:1", "Implement"),
        ("ab12/phase:2", "Plan"),
    ]
    edit = result.operations[1]
    assert (edit.ref, edit.outcome, edit.failure_stage, edit.error) == (
        "pi.edit",
        "failed",
        "invoke",
        "Call failed during invoke",
    )
    assert edit.record is trace["operations"][1]
    assert (result.kind, result.outcome) == ("pi-fabric.execution", "failed")


@pytest.mark.parametrize(
    ("message", "verdict"),
    [
        (tool_result({"trace": make_trace()}, tool="read"), None),
        (
            {"role": "assistant", "toolName": "fabric_exec", "details": {"trace": make_trace()}},
            None,
        ),
        (tool_result(None), "none"),
        (tool_result({"success": True}), "none"),
    ],
    ids=["other-tool", "not-a-tool-result", "no-details", "no-trace-no-audits"],
)
def test_only_fabric_exec_results_are_read(message: dict[str, Any], verdict: str | None) -> None:
    """Other tools' trace-shaped details are never operations; empty details are 'none'."""
    result = read_fabric_result("ab12", message)
    assert (result.verdict if result else None) == verdict


# --- agreement with Pi's own truth for every corpus session ----------------------------

def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "truth_file" in metafunc.fixturenames:
        files = truth_files()
        metafunc.parametrize("truth_file", files, ids=[Path(f).name for f in files])


def test_fabric_results_match_corpus_truth(truth_file: str) -> None:
    """Every fabric_exec result's verdict, addresses and legacy outcome match Pi's truth."""
    truth = corpus_json(truth_file)
    expected = truth.get("fabric") or []
    source = CORPUS / Path(truth_file).relative_to("truth").with_suffix("")
    try:
        session = read_session(source)
    except SessionError:
        assert expected == []
        return
    results = [
        result
        for entry in session.entries
        if entry.message is not None
        and (result := read_fabric_result(entry.id, entry.message)) is not None
    ]
    assert [r.entry_id for r in results] == [f["entryId"] for f in expected]
    for result, want in zip(results, expected, strict=True):
        legacy = want["legacy"]
        status = {"valid": "n/a", "legacy": "accepted", "none": "absent"}.get(result.verdict)
        if result.verdict == "invalid":
            rejected = (result.reason or "").startswith("legacy audits rejected: ")
            status = "rejected" if rejected else "blocked"
        assert status == legacy["status"], want["entryId"]
        assert (result.verdict == "valid") == want["traceValid"]
        assert result.kind == want.get("kind")
        valid_ops = result.operations if result.verdict == "valid" else ()
        assert [o.address for o in valid_ops] == [o["address"] for o in want["operations"]]
        assert [o.address for o in valid_ops] == want["memoryChildAddresses"]
        assert [o.record for o in valid_ops] == [
            {k: v for k, v in o.items() if k != "address"} for o in want["operations"]
        ]
        assert [(p.address, p.index, p.name) for p in result.phases] == [
            (p["address"], p["index"], p["name"]) for p in want["phases"]
        ]
        if status == "accepted":
            assert [
                (o.address, o.ref, o.args, o.outcome == "succeeded", o.error)
                for o in result.operations
            ] == [
                (o["address"], o["ref"], o["args"], o["success"], o.get("error"))
                for o in legacy["ops"]
            ]
        if status == "rejected":
            assert result.reason == f"legacy audits rejected: {legacy['reason']}"


# --- write-side projection ------------------------------------------------------------

PROJECTION_CASES = [
    (
        "pi.read",
        {"path": "src/a.ts?raw#L3", "offset": 10, "limit": True, "encoding": "x"},
        {"path": "src/a.ts", "offset": 10},
    ),
    ("omp.read", {"path": "/abs/b.ts", "limit": 2.5}, {"path": "/abs/b.ts", "limit": 2.5}),
    (
        "pi.grep",
        {"path": "src", "pattern": "secret", "context": 2, "limit": "5"},
        {"path": "src", "context": 2},
    ),
    ("omp.find", {"path": "src", "pattern": "*.ts", "limit": 50}, {"path": "src", "limit": 50}),
    ("pi.ls", {"path": "C:\\Users\\dev", "limit": math.nan}, {"path": "C:\\Users\\dev"}),
    ("pi.edit", {"path": "a.ts", "edits": [{"oldText": "a", "newText": "b"}]}, {"path": "a.ts"}),
    ("omp.write", {"path": "b.ts", "content": "body"}, {"path": "b.ts"}),
    ("pi.bash", {"command": "npm test", "timeout": 60}, {"command": "npm test"}),
    ("agents.run", {"id": "agent-1", "task": "do secret things"}, {"id": "agent-1"}),
    ("agents.status", {"id": "agent-1", "verbose": True}, {"id": "agent-1"}),
    ("agents.spawn", {"id": "agent-1", "task": "x"}, {}),
    (
        "mesh.publish",
        {"topic": "builds", "to": "peer-2", "message": "hi", "data": {}},
        {"topic": "builds", "to": "peer-2"},
    ),
    (
        "mesh.read",
        {"topic": "builds", "after": 4, "limit": 10, "payload": "x"},
        {"topic": "builds", "after": 4, "limit": 10},
    ),
    ("mesh.get", {"key": "cfg/1"}, {"key": "cfg/1"}),
    ("mesh.put", {"key": "cfg/1", "value": "secret"}, {"key": "cfg/1"}),
    ("mesh.delete", {"key": "cfg/1", "limit": 1}, {"key": "cfg/1"}),
    ("mesh.list", {"prefix": "cfg/", "limit": 3}, {"prefix": "cfg/", "limit": 3}),
    ("fabric.discovery.providers", {"x": 1}, {}),
    (
        "fabric.discovery.catalog",
        {"provider": "github", "limit": 5},
        {"provider": "github", "limit": 5},
    ),
    (
        "fabric.discovery.list",
        {"provider": "has space", "namespace": "ns.v1", "query": "q"},
        {"namespace": "ns.v1"},
    ),
    ("fabric.discovery.search", {"query": "secret", "limit": 6}, {"limit": 6}),
    ("fabric.discovery.describe", {"ref": "pi.read", "x": 1}, {"ref": "pi.read"}),
    ("fabric.workflow.configure", {"name": "Ship", "description": "d"}, {"name": "Ship"}),
    (
        "fabric.workflow.phase",
        {"name": "Plan ✓", "id": "p0", "total": 2, "description": "d"},
        {"name": "Plan ✓", "id": "p0", "total": 2},
    ),
    (
        "fabric.workflow.item",
        {
            "id": "i1",
            "status": "done",
            "phase": "p0",
            "kind": "task",
            "total": 3,
            "completed": 1,
            "label": "secret",
        },
        {"id": "i1", "status": "done", "phase": "p0", "kind": "task", "total": 3, "completed": 1},
    ),
    ("fabric.workflow.event", {"level": "warn", "message": "m"}, {"level": "warn"}),
    ("fabric.workflow.progress", {"message": "m"}, {}),
    (
        "fabric.workflow.parallel",
        {"kind": "parallel", "itemCount": 2, "concurrency": 4},
        {"kind": "parallel", "itemCount": 2, "concurrency": 4},
    ),
    (
        "fabric.workflow.pipeline",
        {"kind": "pipeline", "itemCount": 2, "stageCount": 3},
        {"kind": "pipeline", "itemCount": 2, "stageCount": 3},
    ),
    ("memory.search", {"query": "q"}, {}),
    ("state.get", {"key": "k"}, {}),
    ("schema.describe", {"ref": "r"}, {}),
    ("compact.run", {"x": 1}, {}),
    ("mcp.github.search", {"query": "q"}, {}),
    ("ext.custom", {"path": "a"}, {}),
    ("unknown", {"path": "a"}, {}),
    ("PI.READ", {"path": "a"}, {}),
]


@pytest.mark.parametrize(
    ("ref", "args", "expected"), PROJECTION_CASES, ids=[c[0] for c in PROJECTION_CASES]
)
def test_projection_keeps_only_the_refs_allowlist(
    ref: str, args: dict[str, Any], expected: dict[str, Any]
) -> None:
    """Each ref family keeps exactly its allowlisted, well-typed arguments."""
    assert project_args(ref, args) == expected
    assert projection_violations(ref, project_args(ref, args)) == []


@pytest.mark.parametrize(
    "path",
    [
        "https://example.com/x?y#z",
        "file:///etc/passwd",
        "s3://bucket/key",
        "//host/share/x",
        "\\\\server\\share\\x",
        " https://x.dev/a",
        "mailto:a@b.c",
        "C:relative",
        "a.ts:12",
        "?only-query",
        "#only-fragment",
        "",
        "a\0b",
        7,
        None,
    ],
)
def test_projection_drops_urls_and_non_paths(path: Any) -> None:
    """URLs, network paths, empty results and non-strings never survive as a path."""
    assert project_args("pi.read", {"path": path}) == {}


def test_projection_bounds_bash_commands() -> None:
    """A huge command is cut to 16 KiB of UTF-8 with a marker; a normal one is kept whole."""
    projected = project_args("pi.bash", {"command": "é" * 20_000})["command"]
    assert len(projected.encode()) <= 16 * 1024 and projected.endswith("…[truncated]")
    assert projection_violations("pi.bash", {"command": "é" * 20_000}) == [
        "command: exceeds the command bound"
    ]


def test_projection_results_keep_only_write_creation() -> None:
    """Only pi.write/omp.write keep a result, and only {created: true}."""
    assert project_result("pi.write", {"created": True, "bytes": 10}) == {"created": True}
    assert project_result("omp.write", {"details": {"created": True}}) == {"created": True}
    assert project_result("pi.write", {"created": False}) is None
    assert project_result("pi.read", {"created": True}) is None


def test_projection_violations_name_rules_never_values() -> None:
    """Violations name the key and the rule broken, never the offending value."""
    violations = projection_violations(
        "pi.read",
        {
            "path": "https://tok:SECRET1@host/x",
            "offset": "SECRET2",
            "content": "SECRET3",
            "limit": 3,
        },
    )
    assert violations == [
        "path: not a plain local path",
        "offset: not a finite number",
        "content: not kept for pi.read",
    ]
    assert projection_violations("pi.read", {"path": "a.ts?token=SECRET"}) == [
        "path: keeps a query or fragment"
    ]
    assert projection_violations("fabric.discovery.list", {"provider": "a b"}) == [
        "provider: not identifier-shaped"
    ]
    assert not any("SECRET" in v for v in violations)


def test_projection_matches_corpus_traces(corpus_dir: Path) -> None:
    """Projecting each persisted audit's arguments reproduces its trace operation's args."""
    pairs = 0
    for source in sorted((corpus_dir / "sessions").rglob("*.jsonl")):
        for line in source.read_bytes().split(b"\n"):
            try:
                raw = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            message = raw.get("message") if isinstance(raw, dict) else None
            if not isinstance(message, dict) or message.get("toolName") != "fabric_exec":
                continue
            details = message.get("details") or {}
            trace = read_fabric_execution_trace_v1(details.get("trace"))
            if trace is None:
                continue
            for op in trace["operations"]:
                assert projection_violations(op["ref"], op["args"]) == []
                assert op.get("result", {"created": True}) == {"created": True}
            if not isinstance(details.get("audits"), list) or not details["audits"]:
                continue
            for audit, op in zip(details["audits"], trace["operations"], strict=True):
                assert audit["ref"] == op["ref"]
                projected = project_args(audit["ref"], audit["args"])
                assert list(projected.items()) == list(op["args"].items())
                pairs += 1
    assert pairs > 3000
