"""Reading one ``fabric_exec`` result: the strict per-entry decision (:func:`read_fabric_result`,
with the legacy audits adapter) and the lenient render-side reader."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
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


def _adapt_legacy_audits(
    details: object,
) -> tuple[list[dict[str, Any]] | None, str | None]:
    """Every audit of ``details`` as a trace-shaped operation (``sequence`` = its index,
    ``outcome`` from ``success``), or None and why the first one that breaks a rule does."""
    if type(details) is not dict:
        return None, "details is not an object"
    audits = cast(dict[str, Any], details).get("audits")
    if type(audits) is not list:
        return None, "audits is not an array"
    adapted: list[dict[str, Any]] = []
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
        if "error" in record and type(record["error"]) is not str:
            return None, f"{where}.error is not a string"
        op = {"type": "call", "sequence": index, "ref": ref, "args": args,
              "outcome": "succeeded" if success else "failed"}
        for key in ("error", "result"):
            if key in record:
                op[key] = record[key]
        adapted.append(op)
    return adapted, None


# --- the per-entry decision ----------------------------------------------------------


def operation_address(entry_id: str, sequence: int | float) -> str:
    """``<entryId>/<sequence>`` (docs/addresses.md); a sequence written ``3.0`` reads ``3``."""
    return f"{entry_id}/{sequence if type(sequence) is int else int(sequence)}"


def phase_address(entry_id: str, index: int) -> str:
    """``<entryId>/phase:<i>``: the ``i``-th phase occurrence of that entry's trace."""
    return f"{entry_id}/phase:{index}"


# Built on request only (the compaction hook reads the operation objects themselves); not
# ``frozen``, which would make building it ~5x slower (each field set through
# ``object.__setattr__``).
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


# Built on request only; not ``frozen`` (see :class:`TraceOperation`).
@dataclass(slots=True)
class TracePhase:
    """One phase occurrence of a valid trace, in order (repeats stay in place)."""

    address: str
    index: int
    name: str


def _trace_operation(
    entry_id: str, op: FabricExecutionTraceOperationV1, record: dict[str, Any]
) -> TraceOperation:
    # The guard passed: sequence is an integral number (``int`` unless written ``3.0``).
    sequence = op["sequence"]
    if type(sequence) is not int:
        sequence = int(sequence)
    return TraceOperation(
        f"{entry_id}/{sequence}", sequence, op["ref"], op.get("provider"), op.get("action"),
        op["args"], op["outcome"], op.get("failureStage"), op.get("error"), record,
    )


# Built per ``fabric_exec`` result on the hook's path; not ``frozen`` (see
# :class:`TraceOperation`).
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
    records: Sequence[FabricExecutionTraceOperationV1] = ()
    """The operations as trace operation objects, unaddressed: a valid trace's own (guarded,
    never copied) or each admitted legacy audit adapted to that shape. A reader that
    writes only some of them (the compaction hook) reads these and addresses an operation
    (:func:`operation_address`) only when it writes it."""
    phase_names: Sequence[str] = ()
    """A valid trace's ``phases``, in order (:func:`phase_address` addresses them)."""
    audits: Sequence[dict[str, Any]] | None = None
    """Legacy only: the audits exactly as persisted, one per record."""
    _operations: tuple[TraceOperation, ...] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    _phases: tuple[TracePhase, ...] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    @property
    def operations(self) -> tuple[TraceOperation, ...]:
        """The operations, addressed (built on first use)."""
        operations = self._operations
        if operations is None:
            entry_id, records = self.entry_id, self.records
            persisted = self.audits if self.audits is not None else records
            operations = self._operations = tuple([
                _trace_operation(entry_id, op, cast(dict[str, Any], record))
                for op, record in zip(records, persisted, strict=True)
            ])
        return operations

    @property
    def phases(self) -> tuple[TracePhase, ...]:
        """The phase occurrences, addressed (built on first use)."""
        phases = self._phases
        if phases is None:
            entry_id = self.entry_id
            phases = self._phases = tuple([
                TracePhase(phase_address(entry_id, index), index, name)
                for index, name in enumerate(self.phase_names)
            ])
        return phases


def read_fabric_result(entry_id: str, message: Mapping[str, Any]) -> FabricResult | None:
    """The verdict, operations and phases of one ``fabric_exec`` tool result message.

    None unless ``message`` is a ``toolResult`` of ``fabric_exec``: other tools'
    results never yield operations, whatever their details hold.
    """
    if message.get("role") != "toolResult" or message.get("toolName") != "fabric_exec":
        return None
    details = message.get("details")
    if type(details) is not dict:
        return FabricResult(entry_id, "none", "no details", None, None)
    envelope: dict[str, Any] = details
    if "trace" in envelope:
        raw = envelope["trace"]
        reason = trace_rejection(raw)
        if reason is not None:
            kind = raw.get("kind") if type(raw) is dict else None
            return FabricResult(
                entry_id, "invalid", reason, kind if type(kind) is str else None, None
            )
        trace: FabricExecutionTraceV1 = raw
        return FabricResult(
            entry_id, "valid", None, trace["kind"], trace["outcome"], trace["operations"],
            trace["phases"],
        )
    if "audits" not in envelope:
        return FabricResult(entry_id, "none", "no trace and no audits", None, None)
    adapted, why = _adapt_legacy_audits(envelope)
    if adapted is None:
        return FabricResult(entry_id, "invalid", f"legacy audits rejected: {why}", None, None)
    return FabricResult(
        entry_id, "legacy", None, None, None, cast(list[FabricExecutionTraceOperationV1], adapted),
        (), envelope["audits"],
    )
