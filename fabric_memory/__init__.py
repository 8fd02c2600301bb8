"""fabric-memory: compaction and memory indexing for Pi coding-agent sessions."""

from .audit import audit_sessions
from .compaction import append_compaction, compact_session, compaction_hook
from .errors import FabricMemoryError
from .memory.catalog import list_sessions, stats, verify
from .memory.expand import expand, expand_request
from .memory.recall import recall, recall_request
from .memory.reindex import reindex
from .session import Entry, Session, iter_session_files, read_session
from .trace import (
    FabricResult,
    TraceOperation,
    TracePhase,
    create_fabric_persisted_execution_details,
    is_fabric_execution_trace_operation_v1,
    is_fabric_execution_trace_v1,
    project_args,
    read_fabric_execution_render_details,
    read_fabric_execution_trace_v1,
    read_fabric_result,
    trace_rejection,
)

__version__ = "0.1.0"

__all__ = [
    "Entry",
    "FabricMemoryError",
    "FabricResult",
    "Session",
    "TraceOperation",
    "TracePhase",
    "__version__",
    "append_compaction",
    "audit_sessions",
    "compact_session",
    "compaction_hook",
    "create_fabric_persisted_execution_details",
    "expand",
    "expand_request",
    "is_fabric_execution_trace_operation_v1",
    "is_fabric_execution_trace_v1",
    "iter_session_files",
    "list_sessions",
    "project_args",
    "read_fabric_execution_render_details",
    "read_fabric_execution_trace_v1",
    "read_fabric_result",
    "read_session",
    "recall",
    "recall_request",
    "reindex",
    "stats",
    "trace_rejection",
    "verify",
]
