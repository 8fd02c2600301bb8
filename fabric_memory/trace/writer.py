"""The envelope writer: the persisted ``fabric_exec`` details, bounded to 512 KiB."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, cast

import orjson

from .._js import js_string_size
from ..errors import TraceError
from .guard import describe, json_failure, json_path, structure_failure
from .shapes import COUNT_KEYS, DETAILS_MAX_BYTES, FabricPersistedExecutionDetailsV1


def _writer_trace(trace: object) -> dict[str, Any]:
    """A copy of ``trace`` the writer may trim without touching the caller's object."""
    delta = [0]
    try:
        failure = structure_failure(trace, delta)
    except Exception as error:
        failure = ("", f"unreadable value ({type(error).__name__})")
    if failure is not None:
        where = json_path("trace", failure[0])
        raise TraceError(
            f"{where}: {failure[1]}; pass a trace that passes is_fabric_execution_trace_v1"
        )
    source = cast(dict[str, Any], trace)
    copy = dict(source)
    copy["phases"] = list(source["phases"])
    copy["operations"] = list(source["operations"])
    copy["counts"] = {key: int(source["counts"][key]) for key in COUNT_KEYS}
    return copy


def _writable_size(value: object, where: str) -> int:
    """:func:`json_size`, for values the writer must also be able to persist with orjson."""
    delta = [0]
    try:
        failure = json_failure(value, 0, delta, max_depth=None)
        if failure is None:
            return len(orjson.dumps(value)) + delta[0]
    except (orjson.JSONEncodeError, RecursionError) as error:
        failure = ("", f"cannot be written as JSON ({error})")
    raise TraceError(
        f"{json_path(where, failure[0])}: {failure[1]}; pass JSON values (valid Unicode, finite"
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
        raise TraceError(f"success: expected a boolean, got {describe(success)}")
    trimmed = _writer_trace(trace)
    audit_list = list(audits)
    phase_list = list(phases)
    for index, phase in enumerate(phase_list):
        if type(phase) is not str:
            raise TraceError(f"phases[{index}]: expected a string, got {describe(phase)}")
    if error is not None and type(error) is not str:
        raise TraceError(f"error: expected a string, got {describe(error)}")
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
        pop_all(phase_list, [js_string_size(p) for p in phase_list], None)
    trace_phases: list[str] = trimmed["phases"]
    if total > DETAILS_MAX_BYTES:
        pop_all(trace_phases, [js_string_size(p) for p in trace_phases], "droppedValues")
    if total > DETAILS_MAX_BYTES and "error" in trimmed:
        total -= len('"error":,') + js_string_size(trimmed.pop("error"))
        before = len(str(counts["droppedValues"]))
        counts["droppedValues"] += 1
        total += len(str(counts["droppedValues"])) - before
    if total > DETAILS_MAX_BYTES and error is not None:
        room = js_string_size(error) - (total - DETAILS_MAX_BYTES)
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
