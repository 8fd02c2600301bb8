"""Compaction, one job per module: Pi's preparation (:mod:`.prepare`), the compactor
(:mod:`.compactor`: branch → state → summary), closure (:mod:`.closure`: the safe cut),
ledgers (:mod:`.ledger`), the persisted details, both sides (:mod:`.details`), the
summary (:mod:`.render`), the host hook (:mod:`.hook`) and session files
(:mod:`.files`: compact a file, append the compaction).

Names load on first use (PEP 562): the hook, which a host calls with Pi's preparation
already made, starts without the session reader or the preparation rules."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_attributes

if TYPE_CHECKING:
    from .compactor import Cancel, Compaction, SpanState, compact_branch, summarize_span
    from .files import SessionCompaction, append_compaction, compact_session
    from .hook import compaction_hook, run_hook
    from .prepare import (
        ALREADY_COMPACTED,
        NOTHING_TO_COMPACT,
        CompactionSettings,
        ContextMessage,
        ContextTokens,
        FileOps,
        NoPreparation,
        Preparation,
        PreparationJson,
        ProjectedEntry,
        SessionContext,
        build_session_context,
        current_system_message,
        entry_messages,
        estimate_context_tokens,
        estimate_projected_context_tokens,
        estimate_tokens,
        explain_preparation,
        prepare_compaction,
        project_branch,
        should_compact,
        usage_tokens,
    )


_HOMES: dict[str, tuple[str, ...]] = {
    ".compactor": ("Cancel", "Compaction", "SpanState", "compact_branch", "summarize_span"),
    ".files": ("SessionCompaction", "append_compaction", "compact_session"),
    ".hook": ("compaction_hook", "run_hook"),
    ".prepare": (
        "ALREADY_COMPACTED", "NOTHING_TO_COMPACT", "CompactionSettings", "ContextMessage",
        "ContextTokens", "FileOps", "NoPreparation", "Preparation", "PreparationJson",
        "ProjectedEntry", "SessionContext", "build_session_context", "current_system_message",
        "entry_messages", "estimate_context_tokens", "estimate_projected_context_tokens",
        "estimate_tokens", "explain_preparation", "prepare_compaction", "project_branch",
        "should_compact", "usage_tokens",
    ),
}
if not TYPE_CHECKING:  # (hidden from type checkers, which then still flag unknown names)
    __getattr__ = lazy_attributes(globals(), _HOMES)


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "ALREADY_COMPACTED",
    "NOTHING_TO_COMPACT",
    "Cancel",
    "Compaction",
    "CompactionSettings",
    "ContextMessage",
    "ContextTokens",
    "FileOps",
    "NoPreparation",
    "Preparation",
    "PreparationJson",
    "ProjectedEntry",
    "SessionCompaction",
    "SessionContext",
    "SpanState",
    "append_compaction",
    "build_session_context",
    "compact_branch",
    "compact_session",
    "compaction_hook",
    "current_system_message",
    "entry_messages",
    "estimate_context_tokens",
    "estimate_projected_context_tokens",
    "estimate_tokens",
    "explain_preparation",
    "prepare_compaction",
    "project_branch",
    "run_hook",
    "should_compact",
    "summarize_span",
    "usage_tokens",
]
