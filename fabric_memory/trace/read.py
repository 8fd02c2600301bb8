"""Reading one ``fabric_exec`` result: the strict per-entry decision (:func:`read_fabric_result`,
with the legacy audits adapter) and the lenient render-side reader."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from .guard import read_fabric_execution_trace_v1, trace_rejection
from .shapes import (
    FabricExecutionTraceOperationV1,
    FabricExecutionTraceV1,
    FabricRenderDetails,
    Verdict,
)


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


# --- the per-entry decision ----------------------------------------------------------


# Built per entry on the hook's path and never changed afterwards; not ``frozen``, which
# would make building it ~5x slower (each field set through ``object.__setattr__``).
@dataclass(slots=True)
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


# Built per entry on the hook's path and never changed afterwards; not ``frozen``, which
# would make building it ~5x slower (each field set through ``object.__setattr__``).
@dataclass(slots=True)
class TracePhase:
    """One phase occurrence of a valid trace, in order (repeats stay in place)."""

    address: str
    index: int
    name: str


# Built per entry on the hook's path and never changed afterwards; not ``frozen``, which
# would make building it ~5x slower (each field set through ``object.__setattr__``).
@dataclass(slots=True)
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
    prefix = entry_id + "/"
    operations: list[TraceOperation] = []
    append = operations.append
    for op in cast(list[dict[str, Any]], trace["operations"]):
        # The guard passed: sequence is an integral number (``int`` unless written ``3.0``).
        sequence = op["sequence"]
        if type(sequence) is not int:
            sequence = int(sequence)
        get = op.get
        append(TraceOperation(
            prefix + str(sequence), sequence, op["ref"], get("provider"), get("action"),
            op["args"], op["outcome"], get("failureStage"), get("error"), op,
        ))
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
        prefix = entry_id + "/phase:"
        phases = tuple([
            TracePhase(prefix + str(index), index, name)
            for index, name in enumerate(trace["phases"])
        ])
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
