"""The Fabric execution trace V1 (docs/trace.md).

``toolResult.details`` of ``fabric_exec`` is the persisted envelope
``{success, trace, audits, phases, error?}``. Everything that interprets it is
here, one job per module: the wire shapes (:mod:`.shapes`), the guard that
decides whether ``details.trace`` is a V1 trace and says why not (:mod:`.guard`,
docs/trace.md#guard-rules),
the writer that bounds a new envelope to 512 KiB (:mod:`.writer`), reading one
result into addressed operations and phases (docs/addresses.md) with the strict legacy adapter, and
the lenient render-side reader (:mod:`.read`), and the write-side argument
projection (:mod:`.projection`).
"""

from .guard import (
    is_fabric_execution_trace_operation_v1,
    is_fabric_execution_trace_v1,
    read_fabric_execution_trace_v1,
    trace_rejection,
)
from .projection import PROJECTIONS, project_args, project_result, projection_violations
from .read import (
    FabricResult,
    TraceOperation,
    TracePhase,
    operation_address,
    phase_address,
    read_fabric_execution_render_details,
    read_fabric_result,
)
from .shapes import (
    DETAILS_MAX_BYTES,
    FAILURE_STAGES,
    JSON_MAX_DEPTH,
    MAX_COMMAND_BYTES,
    MAX_SAFE_INTEGER,
    OUTCOMES,
    TRACE_KINDS,
    TRACE_MAX_BYTES,
    FabricExecutionTraceCountsV1,
    FabricExecutionTraceOperationV1,
    FabricExecutionTraceV1,
    FabricPersistedExecutionDetailsV1,
    FabricRenderDetails,
    Outcome,
    Verdict,
)
from .writer import create_fabric_persisted_execution_details

__all__ = [
    "DETAILS_MAX_BYTES",
    "FAILURE_STAGES",
    "JSON_MAX_DEPTH",
    "MAX_COMMAND_BYTES",
    "MAX_SAFE_INTEGER",
    "OUTCOMES",
    "PROJECTIONS",
    "TRACE_KINDS",
    "TRACE_MAX_BYTES",
    "FabricExecutionTraceCountsV1",
    "FabricExecutionTraceOperationV1",
    "FabricExecutionTraceV1",
    "FabricPersistedExecutionDetailsV1",
    "FabricRenderDetails",
    "FabricResult",
    "Outcome",
    "TraceOperation",
    "TracePhase",
    "Verdict",
    "create_fabric_persisted_execution_details",
    "is_fabric_execution_trace_operation_v1",
    "is_fabric_execution_trace_v1",
    "operation_address",
    "phase_address",
    "project_args",
    "project_result",
    "projection_violations",
    "read_fabric_execution_render_details",
    "read_fabric_execution_trace_v1",
    "read_fabric_result",
    "trace_rejection",
]
