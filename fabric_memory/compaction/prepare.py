"""Pi 1.6.0's compaction preparation and context building, without a host.

The engine compacts a session file on its own (``fabric-memory`` batch runs,
certification) and must then cut exactly where Pi would. This module mirrors Pi's
``estimateTokens``, ``estimateContextTokens``, ``estimateProjectedContextTokens``,
``shouldCompact``, ``prepareCompaction`` and ``buildSessionContext`` and is checked
against what Pi 1.6.0 itself computes for every file of the ground-truth corpus.

JavaScript semantics are reproduced where they change a number: string lengths are
UTF-16 code units, ``JSON.stringify`` writes numbers as JavaScript does (``1.0`` is
``1``, ``1e-7`` stays exponential, integers past 2^53 are rounded to a double), and
``new Date(iso).getTime()`` gives the millisecond timestamps of synthesized messages.

Deliberate differences from Pi, all on input Pi itself would crash on or that a
well-formed session cannot contain:

- a ``message`` entry whose ``message`` is not an object contributes nothing (Pi
  throws); content blocks that are not objects, text that is not a string and tool
  calls without arguments count zero characters (Pi throws or counts ``NaN``);
- a ``context_edit`` without a ``replacement`` key, or with a replacement that is not
  an object, is ignored (Pi throws on the first and drops the content on the second);
- a timestamp without a UTC offset is read as UTC (JavaScript reads it as local
  time); an unparseable one becomes ``null``, as JavaScript's ``NaN`` serializes;
- ``prepare_compaction`` takes the branch as given (root first) instead of re-walking
  parent links from its last entry, which is the same thing for a real branch; the
  walk in :func:`build_session_context` stops at a parent cycle (Pi loops forever);
- file operations are sorted lists (Pi hands over insertion-ordered ``Set`` objects,
  which ``JSON.stringify`` would write as ``{}``; Pi's own summary sorts them too);
- a previous compaction whose ``summary`` is not a string gives no ``previousSummary``;
  a fractional provider usage count is rounded up to an integer.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypedDict, TypeGuard

from .._js import js_length, js_stringify_length, js_time
from ..errors import CompactionError, clipped
from ..session import Entry

ESTIMATED_IMAGE_CHARS: Final = 4800
"""Characters Pi counts for one image block (1,200 tokens)."""

NOTHING_TO_COMPACT: Final = "nothing to compact"
ALREADY_COMPACTED: Final = "last entry is a compaction (Already compacted)"

_EDITABLE_ROLES: Final = frozenset({"user", "assistant", "toolResult", "custom"})
_CUT_POINT_ROLES: Final = frozenset(
    {"user", "assistant", "bashExecution", "custom", "branchSummary", "compactionSummary"}
)
_TURN_START_ROLES: Final = _CUT_POINT_ROLES - {"assistant"}
_FILE_TOOLS: Final = {"read": "read", "write": "written", "edit": "edited"}
_UNDEFINED: Final = object()


# --- JavaScript semantics ------------------------------------------------------------


def _js_truthy(value: Any) -> bool:
    if value is None or value is False or value == "":
        return False
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value != 0 and not math.isnan(value)
    return True


def _is_number(value: Any) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _text(value: Any) -> int:
    return js_length(value) if isinstance(value, str) else 0


# --- token estimates -----------------------------------------------------------------


def estimate_tokens(message: Mapping[str, Any]) -> int:
    """Pi's ``estimateTokens``: ``ceil(chars / 4)`` over what the model reads of a message.

    Text parts, images (4,800 chars each), assistant thinking, tool-call names and
    ``JSON.stringify(arguments)``, bash command and output, summary text, and a system
    message's content, ``sections`` values and ``JSON.stringify(toolsAdded)``. A tool
    result's ``details`` never counts.
    """
    role = message.get("role")
    if role == "system":
        chars = _content_chars(message.get("content"))
        sections = message.get("sections")
        if isinstance(sections, Mapping):
            chars += sum(_text(section) for section in sections.values() if _js_truthy(section))
        tools = message.get("toolsAdded")
        if _js_truthy(tools):
            chars += js_stringify_length(tools)
    elif role in ("user", "custom", "toolResult"):
        chars = _content_chars(message.get("content"))
    elif role == "assistant":
        chars = _assistant_chars(message.get("content"))
    elif role == "bashExecution":
        chars = _text(message.get("command")) + _text(message.get("output"))
    elif role in ("branchSummary", "compactionSummary"):
        chars = _text(message.get("summary"))
    else:
        return 0
    return -(-chars // 4)


def _content_chars(content: Any) -> int:
    if isinstance(content, str):
        return js_length(content)
    if not isinstance(content, list):
        return 0
    chars = 0
    for block in content:
        if not isinstance(block, Mapping):
            continue
        if block.get("type") == "text" and _js_truthy(block.get("text")):
            chars += _text(block.get("text"))
        elif block.get("type") == "image":
            chars += ESTIMATED_IMAGE_CHARS
    return chars


def _assistant_chars(content: Any) -> int:
    chars = 0
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text":
            chars += _text(block.get("text"))
        elif kind == "thinking":
            chars += _text(block.get("thinking"))
        elif kind == "toolCall":
            chars += _text(block.get("name"))
            if "arguments" in block:
                chars += js_stringify_length(block["arguments"])
    return chars


@dataclass(frozen=True, slots=True)
class ContextTokens:
    """Pi's ``ContextUsageEstimate``: the context size and how it was reached."""

    tokens: int
    usage_tokens: int
    trailing_tokens: int
    last_usage_index: int | None
    """Index (into the messages) of the assistant whose usage anchors the estimate."""


def usage_tokens(usage: Mapping[str, Any]) -> float:
    """Pi's ``calculateContextTokens``: ``totalTokens``, else the sum of its parts."""
    total = usage.get("totalTokens")
    if _is_number(total) and _js_truthy(total):
        return total
    parts = (usage.get(key) for key in ("input", "output", "cacheRead", "cacheWrite"))
    return sum(part for part in parts if _is_number(part))


def _assistant_usage(message: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The usage of a successful assistant message with a non-zero context size."""
    if message.get("role") != "assistant" or message.get("stopReason") in ("aborted", "error"):
        return None
    usage = message.get("usage")
    if isinstance(usage, Mapping) and usage_tokens(usage) > 0:
        return usage
    return None


def estimate_context_tokens(messages: Sequence[Mapping[str, Any]]) -> ContextTokens:
    """Pi's ``estimateContextTokens``: the last usable assistant usage plus an estimate of
    every message after it; a pure estimate when no message carries usable usage."""
    for index in range(len(messages) - 1, -1, -1):
        usage = _assistant_usage(messages[index])
        if usage is not None:
            anchored = _int(usage_tokens(usage))
            trailing = sum(estimate_tokens(message) for message in messages[index + 1 :])
            return ContextTokens(anchored + trailing, anchored, trailing, index)
    estimated = sum(estimate_tokens(message) for message in messages)
    return ContextTokens(estimated, 0, estimated, None)


def _int(value: float) -> int:
    return int(value) if float(value).is_integer() else math.ceil(value)


def should_compact(context_tokens: int, context_window: int, settings: CompactionSettings) -> bool:
    """Pi's ``shouldCompact``: enabled and ``contextTokens > contextWindow - reserveTokens``."""
    return settings.enabled and context_tokens > context_window - settings.reserve_tokens


# --- context projection --------------------------------------------------------------


def entry_messages(entry: Entry) -> list[dict[str, Any]]:
    """Pi's ``sessionEntryToContextMessages``: what one entry puts in the model context,
    before context edits. Settings, labels, plain ``custom`` entries and unknown types
    put nothing."""
    raw = entry.raw
    if entry.type == "message":
        message = raw.get("message")
        if not isinstance(message, dict):
            return []
        role = message.get("role")
        if message.get("content") is None:
            if role == "system":
                return [{**message, "content": ""}]
            if role in ("user", "assistant", "toolResult"):
                return [{**message, "content": []}]
        return [message]
    if entry.type == "custom_message":
        content = raw.get("content")
        return [
            _js_object(
                role="custom",
                customType=raw.get("customType", _UNDEFINED),
                content=[] if content is None else content,
                display=raw.get("display", _UNDEFINED),
                details=raw.get("details", _UNDEFINED),
                timestamp=js_time(raw.get("timestamp")),
            )
        ]
    if entry.type == "branch_summary" and _js_truthy(raw.get("summary")):
        return [
            _js_object(
                role="branchSummary",
                summary=raw["summary"],
                fromId=raw.get("fromId", _UNDEFINED),
                timestamp=js_time(raw.get("timestamp")),
            )
        ]
    if entry.type == "compaction":
        # Pi 1.6.0's summary message carries no ``details`` (the context hashes say so).
        summary = _js_object(
            role="compactionSummary",
            summary=raw.get("summary", _UNDEFINED),
            tokensBefore=raw.get("tokensBefore", _UNDEFINED),
            timestamp=js_time(raw.get("timestamp")),
        )
        system = raw.get("systemMessage")
        return [system, summary] if isinstance(system, dict) else [summary]
    return []


def _js_object(**fields: Any) -> dict[str, Any]:
    """A JavaScript object literal as JSON sees it: ``undefined`` fields vanish."""
    return {key: value for key, value in fields.items() if value is not _UNDEFINED}


@dataclass(frozen=True, slots=True)
class ContextMessage:
    """One message of the model context and the entry it comes from."""

    entry: Entry
    message: Mapping[str, Any]

    @property
    def entry_id(self) -> str:
        return self.entry.id

    @property
    def role(self) -> str | None:
        role = self.message.get("role")
        return role if isinstance(role, str) else None


# Built for every entry of a projected branch and never changed afterwards; not ``frozen``,
# which would make building it ~3x slower (each field set through ``object.__setattr__``).
@dataclass(slots=True)
class ProjectedEntry:
    """Pi's ``ProjectedSessionEntry``: a context entry and its messages after edits
    (empty for settings, labels, omitted messages and older compactions)."""

    entry: Entry
    messages: tuple[Mapping[str, Any], ...]


@dataclass(frozen=True, slots=True)
class SessionContext:
    """Pi's session projection: what the model sees on one branch, with provenance.

    The messages and the settings are read out of ``entries`` and ``path`` on each access:
    a compaction cycle needs neither.
    """

    path: tuple[Entry, ...]
    """The branch, root first."""
    entries: tuple[ProjectedEntry, ...]
    """Pi's ``buildContextEntries``: the latest compaction, its kept entries, then the rest."""

    @property
    def messages(self) -> tuple[ContextMessage, ...]:
        return tuple(
            ContextMessage(item.entry, message)
            for item in self.entries
            for message in item.messages
        )

    @property
    def thinking_level(self) -> str:
        return _settings(self.path)[0]

    @property
    def model(self) -> dict[str, Any] | None:
        return _settings(self.path)[1]

    @property
    def context_entry_ids(self) -> list[str]:
        return [projected.entry.id for projected in self.entries]

    def message_dicts(self) -> list[Mapping[str, Any]]:
        return [message for item in self.entries for message in item.messages]

    def message_entry(self, index: int) -> Entry:
        """The entry message ``index`` of :meth:`message_dicts` comes from."""
        for item in self.entries:
            if index < len(item.messages):
                return item.entry
            index -= len(item.messages)
        raise IndexError(index)


def build_session_context(entries: Sequence[Entry], leaf_id: str | None) -> SessionContext:
    """Pi's ``buildSessionContext(entries, leafId)``: the branch ending at ``leaf_id`` (the
    last entry when the id is ``None`` or unknown, as Pi does when the last entry has no
    id), compaction-aware and with context edits applied."""
    return project_branch(_branch(entries, leaf_id))


def _branch(entries: Sequence[Entry], leaf_id: str | None) -> list[Entry]:
    if not entries:
        return []
    by_id = {entry.id: entry for entry in entries if entry.has_id}
    current: Entry | None = (by_id.get(leaf_id) if leaf_id else None) or entries[-1]
    path: list[Entry] = []
    seen: set[str] = set()
    while current is not None and current.id not in seen:
        seen.add(current.id)
        path.append(current)
        current = by_id.get(current.parent_id) if current.parent_id else None
    path.reverse()
    return path


def project_branch(path: Sequence[Entry]) -> SessionContext:
    """Project one branch (root first) into the model context, as Pi does."""
    context_entries = _context_entries(path)
    # The last edit of an entry wins.
    edits = {e.raw.get("targetId"): e for e in context_entries if e.type == "context_edit"}
    # Only the newest compaction (first) contributes its replay and summary.
    projected = tuple(
        ProjectedEntry(
            entry,
            ()
            if entry.type == "compaction" and index > 0
            else tuple(_edited(entry_messages(entry), edits.get(entry.id))),
        )
        for index, entry in enumerate(context_entries)
    )
    return SessionContext(tuple(path), projected)


def _context_entries(path: Sequence[Entry]) -> list[Entry]:
    """Pi's ``buildContextEntries`` over a branch.

    A ``firstKeptEntryId`` that is ``""``, the compaction's own id or absent from the
    branch keeps nothing before the compaction; it may name a non-message entry.
    System messages in the kept range are left out: the compaction replays them. An
    older compaction in the kept range stays as an entry; :func:`project_branch` gives
    it no messages.
    """
    latest = next((i for i in range(len(path) - 1, -1, -1) if path[i].type == "compaction"), None)
    if latest is None:
        return list(path)
    compaction = path[latest]
    first_kept = compaction.raw.get("firstKeptEntryId")
    kept: list[Entry] = [compaction]
    found = False
    for entry in path[:latest]:
        found = found or entry.id == first_kept
        if found and entry.role != "system":
            kept.append(entry)
    kept.extend(path[latest + 1 :])
    return kept


def _edited(messages: list[dict[str, Any]], edit: Entry | None) -> list[dict[str, Any]]:
    if edit is None or "replacement" not in edit.raw:
        return messages
    replacement = edit.raw["replacement"]
    if replacement is None:
        return []
    if not isinstance(replacement, Mapping):
        return messages
    content = replacement.get("content")
    edited: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if not _role_in(message, _EDITABLE_ROLES):
            edited.append(message)
            continue
        if role in ("assistant", "toolResult") and isinstance(content, str):
            edited.append({**message, "content": [{"type": "text", "text": content}]})
        else:
            edited.append({**message, "content": content})
    return edited


def _settings(path: Iterable[Entry]) -> tuple[str, dict[str, Any] | None]:
    thinking_level: str = "off"
    model: dict[str, Any] | None = None
    for entry in path:
        raw = entry.raw
        if entry.type == "thinking_level_change":
            level = raw.get("thinkingLevel")
            thinking_level = level if isinstance(level, str) else thinking_level
        elif entry.type == "model_change":
            model = {"provider": raw.get("provider"), "modelId": raw.get("modelId")}
        elif entry.role == "assistant":
            message = entry.message or {}
            model = {"provider": message.get("provider"), "modelId": message.get("model")}
    return thinking_level, model


def current_system_message(messages: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Pi's ``getCurrentSystemMessage``: every system message replayed into one (content
    appended, sections patched by name, tools added and removed by name)."""
    content: list[str] = []
    sections: dict[str, Any] = {}
    tools: dict[Any, Any] = {}
    timestamp: Any = _UNDEFINED
    for message in messages:
        if message.get("role") != "system":
            continue
        if timestamp is _UNDEFINED or timestamp is None:
            timestamp = message.get("timestamp", _UNDEFINED)
        text = _content_text(message.get("content"))
        if text:
            content.append(text)
        patches = message.get("sections")
        for name, value in patches.items() if isinstance(patches, Mapping) else ():
            if value is None:
                sections.pop(name, None)
            else:
                sections[name] = value
        for tool in _mappings(message.get("toolsRemoved")):
            tools.pop(tool.get("name"), None)
        for tool in _mappings(message.get("toolsAdded")):
            tools[tool.get("name")] = tool
    if timestamp is _UNDEFINED and not tools:
        return None
    replayed: dict[str, Any] = {"role": "system", "content": "\n\n".join(content)}
    if sections:
        replayed["sections"] = sections
    if tools:
        replayed["toolsAdded"] = list(tools.values())
    replayed["timestamp"] = 0 if timestamp is _UNDEFINED or timestamp is None else timestamp
    return replayed


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(
        block["text"]
        for block in _mappings(content)
        if block.get("type") == "text" and isinstance(block.get("text"), str)
    )


def _mappings(value: Any) -> list[Mapping[str, Any]]:
    return [item for item in _list(value) if isinstance(item, Mapping)]


def estimate_projected_context_tokens(
    context: SessionContext, branch_entries: Sequence[Entry] | None = None
) -> ContextTokens:
    """Pi's ``estimateProjectedContextTokens``: trust the last usage only when its entry is
    newer than every ``context_edit`` and ``compaction`` on the branch; otherwise estimate
    the projection, counting the replayed system prompt once."""
    branch = context.path if branch_entries is None else branch_entries
    messages = context.message_dicts()
    estimate = estimate_context_tokens(messages)
    if estimate.last_usage_index is not None:
        usage_entry_id = context.message_entry(estimate.last_usage_index).id
        usage_index = next((i for i, e in enumerate(branch) if e.id == usage_entry_id), -1)
        invalidating = next(
            (
                i
                for i in range(len(branch) - 1, -1, -1)
                if branch[i].type in ("context_edit", "compaction")
            ),
            -1,
        )
        if usage_index > invalidating:
            return estimate
    system = current_system_message(messages)
    tokens = estimate_tokens(system) if system is not None else 0
    tokens += sum(estimate_tokens(m) for m in messages if m.get("role") != "system")
    return ContextTokens(tokens, 0, tokens, None)


# --- preparation ---------------------------------------------------------------------


class SettingsJson(TypedDict):
    enabled: bool
    reserveTokens: int
    keepRecentTokens: int


@dataclass(frozen=True, slots=True)
class CompactionSettings:
    """Pi's ``CompactionSettings`` (defaults are Pi's)."""

    enabled: bool = True
    reserve_tokens: int = 16384
    keep_recent_tokens: int = 20000

    def to_json(self) -> SettingsJson:
        return {
            "enabled": self.enabled,
            "reserveTokens": self.reserve_tokens,
            "keepRecentTokens": self.keep_recent_tokens,
        }

    @classmethod
    def from_json(
        cls, value: Mapping[str, Any], where: str = "$.preparation.settings"
    ) -> CompactionSettings:
        """Read the host's settings object; a missing field takes Pi's default."""
        defaults = cls()
        enabled = value.get("enabled", defaults.enabled)
        if not isinstance(enabled, bool):
            raise CompactionError(
                f"{where}.enabled: expected true or false, got {clipped(enabled)}"
            )
        tokens = []
        for key, default in (
            ("reserveTokens", defaults.reserve_tokens),
            ("keepRecentTokens", defaults.keep_recent_tokens),
        ):
            number = value.get(key, default)
            if not _is_number(number) or number < 0 or not float(number).is_integer():
                raise CompactionError(
                    f"{where}.{key}: expected a non-negative integer, got {clipped(number)}"
                )
            tokens.append(int(number))
        return cls(enabled, tokens[0], tokens[1])


class FileOpsJson(TypedDict):
    read: list[str]
    written: list[str]
    edited: list[str]


@dataclass(frozen=True, slots=True)
class FileOps:
    """Pi's ``FileOperations``: paths of ``read``/``write``/``edit`` tool calls, plus the
    previous Pi compaction's ``readFiles`` (read) and ``modifiedFiles`` (edited), sorted."""

    read: tuple[str, ...] = ()
    written: tuple[str, ...] = ()
    edited: tuple[str, ...] = ()

    def to_json(self) -> FileOpsJson:
        return {"read": list(self.read), "written": list(self.written), "edited": list(self.edited)}


class PreparationJson(TypedDict, total=False):
    firstKeptEntryId: str
    messagesToSummarize: list[Mapping[str, Any]]
    turnPrefixMessages: list[Mapping[str, Any]]
    isSplitTurn: bool
    tokensBefore: int
    previousSummary: str
    fileOps: FileOpsJson
    settings: SettingsJson


@dataclass(frozen=True, slots=True)
class Preparation:
    """What to compact: Pi's ``CompactionPreparation``, with each message's entry kept.

    The messages and file operations are read out of the projected entries on each
    access: the engine's own compactor needs only the cut and ``tokens_before``.
    """

    first_kept_entry_id: str
    is_split_turn: bool
    tokens_before: int
    previous_compaction: Entry | None
    settings: CompactionSettings
    history: tuple[ProjectedEntry, ...]
    """The projected entries the summary covers: after the previous compaction, up to the
    cut (to the split turn's start when the cut splits a turn)."""
    turn_prefix: tuple[ProjectedEntry, ...]
    """The split turn's entries before the cut (none unless ``is_split_turn``)."""

    @property
    def messages_to_summarize(self) -> tuple[ContextMessage, ...]:
        return tuple(_summarizable(self.history))

    @property
    def turn_prefix_messages(self) -> tuple[ContextMessage, ...]:
        return tuple(_summarizable(self.turn_prefix))

    @property
    def file_ops(self) -> FileOps:
        return _file_ops(self.previous_compaction, _summarizable((*self.history,
                                                                   *self.turn_prefix)))

    def to_event(self) -> PreparationJson:
        """The ``preparation`` of the host's ``session_before_compact`` event."""
        event: PreparationJson = {
            "firstKeptEntryId": self.first_kept_entry_id,
            "messagesToSummarize": [item.message for item in self.messages_to_summarize],
            "turnPrefixMessages": [item.message for item in self.turn_prefix_messages],
            "isSplitTurn": self.is_split_turn,
            "tokensBefore": self.tokens_before,
        }
        summary = self.previous_compaction.raw.get("summary") if self.previous_compaction else None
        if isinstance(summary, str):
            event["previousSummary"] = summary
        event["fileOps"] = self.file_ops.to_json()
        event["settings"] = self.settings.to_json()
        return event


@dataclass(frozen=True, slots=True)
class NoPreparation:
    """Why there is nothing to compact (Pi returns ``undefined``)."""

    reason: str


def prepare_compaction(
    branch_entries: Sequence[Entry], settings: CompactionSettings
) -> Preparation | None:
    """Pi's ``prepareCompaction`` on a branch (root first); ``None`` when the branch ends
    on a compaction or nothing visible is left to summarize."""
    prepared = explain_preparation(branch_entries, settings)
    return prepared if isinstance(prepared, Preparation) else None


def explain_preparation(
    branch_entries: Sequence[Entry],
    settings: CompactionSettings,
    context: SessionContext | None = None,
) -> Preparation | NoPreparation:
    """:func:`prepare_compaction`, saying why when there is no preparation (``context``:
    :func:`project_branch` of the branch, when the caller has it already)."""
    if branch_entries and branch_entries[-1].type == "compaction":
        return NoPreparation(ALREADY_COMPACTED)
    if context is None:
        context = project_branch(branch_entries)
    entries = context.entries
    # Only the newest compaction (projected first) contributes messages.
    previous = next(
        (i for i, item in enumerate(entries) if item.entry.type == "compaction" and item.messages),
        -1,
    )
    start = previous + 1 if previous >= 0 else 0
    tokens_before = estimate_projected_context_tokens(context, branch_entries).tokens
    first_kept, turn_start, split = _find_cut(entries, start, settings.keep_recent_tokens)
    if first_kept >= len(entries):
        return NoPreparation(NOTHING_TO_COMPACT)
    history = entries[start : turn_start if split else first_kept]
    prefix = entries[turn_start:first_kept] if split else ()
    if next(_summarizable((*history, *prefix)), None) is None:
        return NoPreparation(NOTHING_TO_COMPACT)
    return Preparation(
        first_kept_entry_id=entries[first_kept].entry.id,
        is_split_turn=split,
        tokens_before=tokens_before,
        previous_compaction=entries[previous].entry if previous >= 0 else None,
        settings=settings,
        history=history,
        turn_prefix=prefix,
    )


def _summarizable(entries: Iterable[ProjectedEntry]) -> Iterator[ContextMessage]:
    """Messages a summary covers: no compaction replay, no system prompt state."""
    return (
        ContextMessage(item.entry, message)
        for item in entries
        if item.entry.type != "compaction"
        for message in item.messages
        if message.get("role") != "system"
    )


def _is_cut_point(item: ProjectedEntry) -> bool:
    return item.entry.type != "compaction" and any(
        _role_in(m, _CUT_POINT_ROLES) for m in item.messages
    )


def _starts_turn(item: ProjectedEntry) -> bool:
    return item.entry.type != "compaction" and any(
        _role_in(m, _TURN_START_ROLES) for m in item.messages
    )


def _role_in(message: Mapping[str, Any], roles: frozenset[str]) -> bool:
    """Whether the message's role is one of ``roles`` (a damaged, non-string role never is)."""
    role = message.get("role")
    return isinstance(role, str) and role in roles


def _find_cut(
    entries: Sequence[ProjectedEntry], start: int, keep_recent_tokens: int
) -> tuple[int, int, bool]:
    """Pi's ``findProjectedCutPoint``: ``(first kept index, turn start index, split turn)``."""
    end = len(entries)
    first = next((i for i in range(start, end) if _is_cut_point(entries[i])), None)
    if first is None:
        return start, -1, False
    accumulated = 0
    exceeded = False
    cut = first
    for i in range(end - 1, start - 1, -1):
        tokens = sum(estimate_tokens(m) for m in entries[i].messages)
        if tokens == 0:
            continue
        accumulated += tokens
        if accumulated >= keep_recent_tokens:
            exceeded = True
            # The first cut point at or after i, else the last one: looked for around i
            # only, since the walk stops near the end of a long branch.
            later = (c for c in range(i, end) if _is_cut_point(entries[c]))
            earlier = (c for c in range(i - 1, first - 1, -1) if _is_cut_point(entries[c]))
            cut = next(itertools.chain(later, earlier))
            break
    if exceeded and _is_recovery_omission_suffix(entries[cut + 1 : end]):
        cut += 1
    # Pull in metadata right before the cut; stop at a compaction or a visible entry.
    while cut > start:
        before = entries[cut - 1]
        if before.entry.type == "compaction" or before.messages:
            break
        cut -= 1
    if _starts_turn(entries[cut]):
        return cut, -1, False
    turn_start = next((i for i in range(cut, start - 1, -1) if _starts_turn(entries[i])), -1)
    return cut, turn_start, turn_start != -1


def _is_recovery_omission_suffix(suffix: Sequence[ProjectedEntry]) -> bool:
    """A closed run of omitted recovery attempts after the cut (an omitted assistant, its
    omission edits, metadata): Pi moves the cut past it."""

    def visible(item: ProjectedEntry) -> bool:
        return item.entry.type != "context_edit" and bool(entry_messages(item.entry))

    def omitted(item: ProjectedEntry) -> bool:
        return not item.messages and visible(item)

    # First: it stops at the suffix's first entry with messages (a cut is most often followed
    # by one), where the rest re-projects every kept entry (0.4 ms at the default keep).
    if not all(
        item.entry.type != "compaction" and (not visible(item) or omitted(item))
        for item in suffix
    ):
        return False
    omitted_ids = {item.entry.id for item in suffix if omitted(item)}
    external_replacement = any(
        item.entry.type == "context_edit"
        and item.entry.raw.get("replacement") is not None
        and item.entry.raw.get("targetId") not in omitted_ids
        for item in suffix
    )
    return not external_replacement and any(
        item.entry.role == "assistant" and omitted(item) for item in suffix
    )


def _file_ops(previous: Entry | None, messages: Iterable[ContextMessage]) -> FileOps:
    ops: dict[str, set[str]] = {"read": set(), "written": set(), "edited": set()}
    if previous is not None and not _js_truthy(previous.raw.get("fromHook")):
        details = previous.raw.get("details")
        if isinstance(details, Mapping):
            for key, bucket in (("readFiles", "read"), ("modifiedFiles", "edited")):
                ops[bucket].update(
                    path for path in _list(details.get(key)) if isinstance(path, str)
                )
    for item in messages:
        if item.message.get("role") != "assistant":
            continue
        for block in _mappings(item.message.get("content")):
            tool = block.get("name")
            kind = _FILE_TOOLS.get(tool) if isinstance(tool, str) else None
            arguments = block.get("arguments")
            if (
                block.get("type") != "toolCall"
                or kind is None
                or not isinstance(arguments, Mapping)
            ):
                continue
            path = arguments.get("path")
            if isinstance(path, str) and path:
                ops[kind].add(path)
    return FileOps(*(tuple(sorted(ops[kind])) for kind in ("read", "written", "edited")))


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
