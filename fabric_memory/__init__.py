"""fabric-memory: compaction and memory indexing for Pi coding-agent sessions.

The public names load on first use (PEP 562): ``import fabric_memory.cli`` must not
pull in Tantivy or the compactor before a command needs them, since agents start the
CLI once per call.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_HOMES = {
    ".audit": ("audit_sessions",),
    ".compaction": ("append_compaction", "compact_session", "compaction_hook"),
    ".errors": ("FabricMemoryError",),
    ".memory.catalog": ("list_sessions", "stats", "verify"),
    ".memory.expand": ("expand", "expand_request"),
    ".memory.recall": ("recall", "recall_request"),
    ".memory.reindex": ("reindex",),
    ".session": ("Entry", "Session", "iter_session_files", "read_session"),
    ".trace": (
        "FabricResult", "TraceOperation", "TracePhase",
        "create_fabric_persisted_execution_details", "is_fabric_execution_trace_operation_v1",
        "is_fabric_execution_trace_v1", "project_args", "read_fabric_execution_render_details",
        "read_fabric_execution_trace_v1", "read_fabric_result", "trace_rejection",
    ),
}
_MODULE_OF = {name: module for module, names in _HOMES.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


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
