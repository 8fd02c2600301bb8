"""Closure: where a compaction may cut a branch so every tool call stays with its result.

A cut keeps the entries from its position on. It may not separate a tool call from
the result answering it (in whichever order they were written), start on a tool
result or on a compaction, or reach back before the live window the latest
compaction left.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import accumulate

from ..view import EntryView, ToolCall


def index_tool_calls(entries: Iterable[EntryView]) -> dict[str, ToolCall]:
    """Every tool call on ``entries`` by call id (the first one wins on a repeat)."""
    calls: dict[str, ToolCall] = {}
    for view in entries:
        for call in view.tool_calls:
            calls.setdefault(call.call_id, call)
    return calls


def tool_spans(
    branch: Sequence[EntryView], calls: Mapping[str, ToolCall]
) -> list[tuple[int, int]]:
    """``(earlier, later)`` branch positions of every tool call and a result answering it,
    in whichever order they were written (``calls``: :func:`index_tool_calls` of the branch)."""
    answers = [(index, view.call_id) for index, view in enumerate(branch) if view.call_id]
    if not answers:
        return []
    positions = {view.id: index for index, view in enumerate(branch)}
    spans = []
    for index, call_id in answers:
        call = calls.get(call_id)
        if call is not None and call.entry_id in positions:
            at = positions[call.entry_id]
            spans.append((at, index) if at < index else (index, at))
    return spans


def splits_pair(branch: Sequence[EntryView], calls: Mapping[str, ToolCall]) -> list[bool]:
    """For every cut position ``0..len(branch)``: whether cutting there (keeping entries
    from that position on) separates a tool call from its result."""
    crossing = [0] * (len(branch) + 2)
    for earlier, later in tool_spans(branch, calls):
        if earlier < later:
            crossing[earlier + 1] += 1
            crossing[later + 1] -= 1
    return [running > 0 for running in accumulate(crossing[: len(branch) + 1])]


def window_start(branch: Sequence[EntryView]) -> int:
    """Where the live context starts: the latest compaction's first kept entry, or the
    entry after it when that boundary keeps nothing (``""``, its own id, unknown)."""
    compactions = [i for i, view in enumerate(branch) if view.type == "compaction"]
    if not compactions:
        return 0
    latest = compactions[-1]
    first_kept = branch[latest].raw.get("firstKeptEntryId")
    for index in range(latest):
        if branch[index].id == first_kept and branch[index].type != "compaction":
            return index
    return latest + 1


def safe_cut(
    branch: Sequence[EntryView], cut: int, floor: int, calls: Mapping[str, ToolCall]
) -> int | None:
    """The nearest position at or before ``cut`` (and after ``floor``) that keeps every
    tool call with its result and does not start on a tool result or a compaction."""
    split = splits_pair(branch, calls)
    for position in range(cut, floor, -1):
        if position < len(branch) and (
            branch[position].role == "toolResult" or branch[position].type == "compaction"
        ):
            continue
        if not split[position]:
            return position
    return None
