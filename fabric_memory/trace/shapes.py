"""The Fabric execution trace V1 wire shapes: the names, enums and JSON objects the guard,
the writer and the readers agree on (see docs/trace.md)."""

from __future__ import annotations

from typing import Any, Final, Literal, NotRequired, TypedDict

from .._js import MAX_SAFE_INTEGER

__all__ = ["MAX_SAFE_INTEGER"]

TRACE_KINDS: Final = frozenset({"pi-fabric.execution", "omp-fabric.execution"})
TRACE_MAX_BYTES: Final = 512 * 1024
DETAILS_MAX_BYTES: Final = 512 * 1024
JSON_MAX_DEPTH: Final = 14
"""The deepest a container may sit inside ``args``/``result`` (the value itself is depth 0)."""
OUTCOMES: Final = frozenset({"succeeded", "failed", "aborted", "timed_out"})
FAILURE_STAGES: Final = frozenset({"resolve", "prepare", "validate", "approve", "invoke", "guard"})
MAX_COMMAND_BYTES: Final = 16 * 1024

TRACE_KEYS: Final = frozenset(
    {"kind", "version", "outcome", "phases", "operations", "counts", "error"}
)
TRACE_REQUIRED: Final = ("kind", "version", "outcome", "phases", "operations", "counts")
OPERATION_KEYS: Final = frozenset(
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
OPERATION_REQUIRED: Final = ("type", "sequence", "ref", "args", "outcome")
COUNT_KEYS: Final = ("droppedValues", "truncatedValues", "redactedValues", "droppedOperations")
COUNT_KEY_SET: Final = frozenset(COUNT_KEYS)
OPTIONAL_STRINGS: Final = ("provider", "action", "error")

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
