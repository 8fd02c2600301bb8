"""fabric-memory: compaction and memory indexing for Pi coding-agent sessions.

The public surface, grouped by job; the implementation lives in the modules named in
``_HOMES``. Names load on first use (PEP 562), so ``import fabric_memory`` costs almost
nothing until a caller touches the compactor or the index.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._lazy import lazy_attributes

if TYPE_CHECKING:
    from .audit import audit_sessions
    from .compaction import (
        Cancel,
        Compaction,
        CompactionSettings,
        SessionCompaction,
        append_compaction,
        compact_session,
        compaction_hook,
        prepare_compaction,
    )
    from .errors import (
        ClusterError,
        CompactionError,
        ExpandError,
        FabricMemoryError,
        HandoffError,
        HookInputError,
        IndexBusyError,
        IndexLockedError,
        LineTooLongError,
        LocationRefusedError,
        MemoryIndexError,
        MissingExtraError,
        NotASessionError,
        QueryError,
        SessionChangedError,
        SessionError,
        TraceError,
        UsageError,
        WatchError,
    )
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
    from .view import EntryView


_HOMES: dict[str, tuple[str, ...]] = {
    # sessions: reading files, one view per entry
    ".session": ("Entry", "Session", "iter_session_files", "read_session"),
    ".view": ("EntryView",),
    # the Fabric execution trace V1
    ".trace": (
        "FabricResult", "TraceOperation", "TracePhase",
        "create_fabric_persisted_execution_details", "is_fabric_execution_trace_operation_v1",
        "is_fabric_execution_trace_v1", "project_args", "read_fabric_execution_render_details",
        "read_fabric_execution_trace_v1", "read_fabric_result", "trace_rejection",
    ),
    # compaction
    ".compaction": (
        "Cancel", "Compaction", "CompactionSettings", "SessionCompaction", "append_compaction",
        "compact_session", "compaction_hook", "prepare_compaction",
    ),
    # the memory index
    ".memory.reindex": ("reindex",),
    ".memory.recall": ("recall", "recall_request"),
    ".memory.expand": ("expand", "expand_request"),
    ".memory.catalog": ("list_sessions", "stats", "verify"),
    ".audit": ("audit_sessions",),
    # errors a caller catches (all under FabricMemoryError)
    ".errors": (
        "ClusterError", "CompactionError", "ExpandError", "FabricMemoryError", "HandoffError",
        "HookInputError",
        "IndexBusyError", "IndexLockedError", "LineTooLongError", "LocationRefusedError",
        "MemoryIndexError", "MissingExtraError", "NotASessionError",
        "QueryError", "SessionChangedError", "SessionError", "TraceError", "UsageError",
        "WatchError",
    ),
}
_attribute = lazy_attributes(globals(), _HOMES)


if TYPE_CHECKING:
    __version__: str
else:  # (hidden from type checkers, which then still flag unknown names)

    def __getattr__(name: str) -> Any:
        if name == "__version__":  # read from the package metadata on first use: importing
            from importlib import metadata  # importlib.metadata costs more than a recall

            value: Any = metadata.version("fabric-memory")
            globals()[name] = value
            return value
        return _attribute(name)


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "Cancel",
    "ClusterError",
    "Compaction",
    "CompactionError",
    "CompactionSettings",
    "Entry",
    "EntryView",
    "ExpandError",
    "FabricMemoryError",
    "FabricResult",
    "HandoffError",
    "HookInputError",
    "IndexBusyError",
    "IndexLockedError",
    "LineTooLongError",
    "LocationRefusedError",
    "MemoryIndexError",
    "MissingExtraError",
    "NotASessionError",
    "QueryError",
    "Session",
    "SessionChangedError",
    "SessionCompaction",
    "SessionError",
    "TraceError",
    "TraceOperation",
    "TracePhase",
    "UsageError",
    "WatchError",
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
    "prepare_compaction",
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
