"""Session entries → typed compaction events → the cumulative state a compaction carries.

A compaction summarizes the entries before its cut. :func:`project_entries` reads
those entries once and turns them into typed events: what the user stated (goal,
constraints, facts to keep), files touched, Fabric phases and operations (only
through :func:`fabric_memory.trace.read_fabric_result`, which alone decides between
the trace and the strict legacy adapter), operation outcomes, turns and the current
status. :func:`fold` merges those events into the previous :class:`CumulativeState`
(read back from the previous compaction's *details*, never from its summary text).

Every sampled list is a :class:`Ledger`: the earliest items (``head``), a counted
gap of items that no longer fit (``dropped``, with the addresses that bound it) and
the latest items (``tail``), each part bounded in bytes so the state, like the
summary, stops growing however long the session runs.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypedDict, cast

from ..redact import redact
from ..session import Entry
from ..trace import FabricResult, TraceOperation, read_fabric_result

STATE_VERSION: Final = 1

LedgerName = Literal["goal", "constraints", "facts", "errors", "files", "activity", "turns"]
LEDGERS: Final[tuple[LedgerName, ...]] = (
    "goal",
    "constraints",
    "facts",
    "errors",
    "files",
    "activity",
    "turns",
)

TARGET_ARGS: Final = ("path", "command", "key", "id", "topic", "prefix")
"""An operation's target is its ref plus the first of these arguments it carries."""

FILE_ACTIONS: Final = {"read": "read", "write": "written", "edit": "modified"}
"""Tool (or ``pi.*``/``omp.*`` action) → what it did to ``args.path``."""
FILE_TAG_ORDER: Final = ("created", "written", "modified", "read")
FILE_PROVIDERS: Final = frozenset({"pi", "omp"})

GOAL_BYTES: Final = 600
STATEMENT_BYTES: Final = 300
FACT_BYTES: Final = 600
TARGET_BYTES: Final = 120
ERROR_BYTES: Final = 160
USER_SNIPPET_BYTES: Final = 200
ASSISTANT_SNIPPET_BYTES: Final = 160
STATUS_BYTES: Final = 300

_CONSTRAINT = re.compile(
    r"\b(never|must|mustn't|do not|don't|always|constraint|forbidden|required|requirement)\b",
    re.IGNORECASE,
)
_GOAL = re.compile(r"\bgoal\b", re.IGNORECASE)
_FACT = re.compile(
    r"\b(remember|don't forget|do not forget|keep in mind|note that)\b", re.IGNORECASE
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_SPACE = re.compile(r"\s+")


# --- text ----------------------------------------------------------------------------


def clip(text: str, max_bytes: int, marker: str = "...") -> str:
    """``text`` with its secrets masked, cut to at most ``max_bytes`` UTF-8 bytes (marker
    included), never inside a character.

    Every text of the state and the summary is bounded here, so this is where secrets are
    masked (docs/secrets.md): before the cut, which could otherwise leave part of one.
    """
    text = redact(text)
    data = text.encode()
    if len(data) <= max_bytes:
        return text
    room = max_bytes - len(marker.encode())
    if room <= 0:
        return ""
    return data[:room].decode("utf-8", "ignore") + marker


def collapse(text: str) -> str:
    """Whitespace runs (newlines included) as single spaces."""
    return _SPACE.sub(" ", text).strip()


def message_text(content: Any) -> str:
    """The text a user/assistant/custom message shows, whitespace collapsed."""
    if isinstance(content, str):
        return collapse(content)
    if not isinstance(content, list):
        return ""
    parts = [
        block["text"]
        for block in content
        if isinstance(block, Mapping)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
    ]
    return collapse(" ".join(parts))


def target_of(args: Mapping[str, Any]) -> str:
    """The first of ``path|command|key|id|topic|prefix`` that ``args`` holds, as text."""
    for name in TARGET_ARGS:
        value = args.get(name)
        if isinstance(value, str):
            return value
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)
    return ""


def target_key(ref: str, target: str) -> str:
    return f"{ref}\x00{target}"


# --- tool calls ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One ``toolCall`` block of an assistant entry."""

    entry_id: str
    call_id: str
    name: str
    arguments: Mapping[str, Any]


def tool_calls(entry: Entry) -> list[ToolCall]:
    """The tool calls an assistant entry makes, in order."""
    if entry.role != "assistant":
        return []
    content = (entry.message or {}).get("content")
    calls: list[ToolCall] = []
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, Mapping) or block.get("type") != "toolCall":
            continue
        call_id, name, arguments = block.get("id"), block.get("name"), block.get("arguments")
        if isinstance(call_id, str) and call_id:
            calls.append(
                ToolCall(
                    entry.id,
                    call_id,
                    name if isinstance(name, str) else "",
                    arguments if isinstance(arguments, Mapping) else {},
                )
            )
    return calls


def result_call_id(entry: Entry) -> str | None:
    """The ``toolCallId`` a toolResult entry answers."""
    if entry.role != "toolResult":
        return None
    call_id = (entry.message or {}).get("toolCallId")
    return call_id if isinstance(call_id, str) and call_id else None


def index_tool_calls(entries: Iterable[Entry]) -> dict[str, ToolCall]:
    """Every tool call on ``entries`` by call id (the first one wins on a repeat)."""
    calls: dict[str, ToolCall] = {}
    for entry in entries:
        for call in tool_calls(entry):
            calls.setdefault(call.call_id, call)
    return calls


# --- typed events --------------------------------------------------------------------


StatementKind = Literal["goal", "constraint", "fact"]


@dataclass(frozen=True, slots=True)
class Statement:
    """Something the user stated that must survive every cycle."""

    kind: StatementKind
    address: str
    text: str


@dataclass(frozen=True, slots=True)
class FileTouch:
    """A file a successful operation or tool call created, wrote, modified or read."""

    path: str
    action: str
    address: str


@dataclass(frozen=True, slots=True)
class PhaseEvent:
    """One phase occurrence of a valid trace."""

    address: str
    name: str


@dataclass(frozen=True, slots=True)
class OperationEvent:
    """One operation (Fabric trace, legacy audit, or a plain tool call) and its outcome."""

    address: str
    ref: str
    target: str
    outcome: str
    stage: str | None
    error: str | None
    """Only a valid trace's own ``error`` field; never audit prose or result text."""
    origin: Literal["trace", "legacy", "tool"]

    @property
    def succeeded(self) -> bool:
        return self.outcome == "succeeded"

    @property
    def key(self) -> str:
        return target_key(self.ref, self.target)


@dataclass(frozen=True, slots=True)
class UnreadResult:
    """A ``fabric_exec`` result whose operations could not be read, and why."""

    address: str
    verdict: str
    reason: str


@dataclass(frozen=True, slots=True)
class TurnEvent:
    """One user turn over a contiguous run of entries; ``continued`` when the run starts
    inside a turn an earlier cycle began (a split turn)."""

    first: str
    last: str
    text: str
    continued: bool


@dataclass(frozen=True, slots=True)
class StatusEvent:
    """The latest user request or assistant reply."""

    role: Literal["user", "assistant"]
    address: str
    text: str


ActivityEvent = PhaseEvent | OperationEvent | UnreadResult


@dataclass(frozen=True, slots=True)
class Projection:
    """The typed events of one run of entries, in source order."""

    statements: tuple[Statement, ...]
    files: tuple[FileTouch, ...]
    activity: tuple[ActivityEvent, ...]
    outcomes: tuple[OperationEvent, ...]
    turns: tuple[TurnEvent, ...]
    status: tuple[StatusEvent, ...]
    counts: Mapping[str, int]
    first: str | None
    last: str | None
    entries: int


class _Turn:
    """Collects one turn while the entries stream past."""

    def __init__(self, first: str, user: str | None) -> None:
        self.first = first
        self.last = first
        self.user = user
        self.assistant = ""
        self.tools: Counter[str] = Counter()
        self.operations = 0
        self.failures = 0
        self.notes: list[str] = []

    def event(self) -> TurnEvent | None:
        parts = [f'user: "{clip(self.user, USER_SNIPPET_BYTES)}"'] if self.user else []
        if self.assistant:
            parts.append(f'assistant: "{clip(self.assistant, ASSISTANT_SNIPPET_BYTES)}"')
        if self.tools:
            parts.append(
                "tools: "
                + ", ".join(name if n == 1 else f"{name} x{n}" for name, n in self.tools.items())
            )
        if self.operations:
            failed = f", {self.failures} not succeeded" if self.failures else ""
            parts.append(f"{self.operations} operations{failed}")
        parts.extend(self.notes[:3])
        if not parts:
            return None  # settings and system entries before the first user message
        return TurnEvent(self.first, self.last, " | ".join(parts), self.user is None)


def project_entries(
    entries: Sequence[Entry], calls: Mapping[str, ToolCall], *, goal_known: bool
) -> Projection:
    """Typed events of ``entries`` (branch order). ``calls`` indexes the tool calls of
    the whole branch; ``goal_known`` says whether an earlier cycle already has a goal
    (otherwise the first user message states it)."""
    statements: list[Statement] = []
    files: list[FileTouch] = []
    activity: list[ActivityEvent] = []
    outcomes: list[OperationEvent] = []
    turns: list[TurnEvent | None] = []
    status: list[StatusEvent] = []
    counts: Counter[str] = Counter()
    turn: _Turn | None = None
    projected = [entry for entry in entries if entry.type != "compaction"]
    for entry in projected:
        counts["entries"] += 1
        role = entry.role
        message = entry.message or {}
        if role == "user":
            text = message_text(message.get("content"))
            if turn is not None:
                turns.append(turn.event())
            turn = _Turn(entry.id, text)
            counts["turns"] += 1
            if text:
                statements.extend(_statements(entry.id, text, goal=not goal_known))
                goal_known = True
                status.append(StatusEvent("user", entry.id, clip(text, STATUS_BYTES)))
            continue
        if turn is None:
            turn = _Turn(entry.id, None)
        turn.last = entry.id
        if role == "assistant":
            counts["assistantMessages"] += 1
            text = message_text(message.get("content"))
            if text:
                turn.assistant = text
                status.append(StatusEvent("assistant", entry.id, clip(text, STATUS_BYTES)))
            turn.tools.update(call.name or "?" for call in tool_calls(entry))
        elif role == "toolResult":
            counts["toolResults"] += 1
            fabric = read_fabric_result(entry.id, message)
            events = (
                _fabric_events(fabric, counts)
                if fabric is not None
                else _tool_events(entry, message, calls)
            )
            for event in events:
                if isinstance(event, FileTouch):
                    files.append(event)
                    continue
                if fabric is not None:
                    activity.append(event)
                if isinstance(event, OperationEvent):
                    outcomes.append(event)
                    turn.operations += event.origin != "tool"
                    turn.failures += event.origin != "tool" and not event.succeeded
        elif role == "bashExecution":
            command = message.get("command")
            exit_code = message.get("exitCode")
            if isinstance(command, str):
                shown = clip(collapse(command), TARGET_BYTES)
                turn.notes.append(f"ran `{shown}` (exit {exit_code})")
        elif entry.type == "branch_summary":
            turn.notes.append("returned from another branch")
        elif entry.type == "custom_message":
            kind = entry.raw.get("customType")
            turn.notes.append(f"{kind if isinstance(kind, str) else 'custom'} message")
    if turn is not None:
        turns.append(turn.event())
    return Projection(
        statements=tuple(statements),
        files=tuple(files),
        activity=tuple(activity),
        outcomes=tuple(outcomes),
        turns=tuple(turn for turn in turns if turn is not None),
        status=tuple(status),
        counts=counts,
        first=projected[0].id if projected else None,
        last=projected[-1].id if projected else None,
        entries=len(projected),
    )


def _statements(address: str, text: str, *, goal: bool) -> Iterator[Statement]:
    if goal:
        yield Statement("goal", address, clip(text, GOAL_BYTES))
    for sentence in _SENTENCE_END.split(text):
        if not goal and _GOAL.search(sentence):
            yield Statement("goal", address, clip(sentence, STATEMENT_BYTES))
        if _CONSTRAINT.search(sentence):
            yield Statement("constraint", address, clip(sentence, STATEMENT_BYTES))
    if _FACT.search(text):
        yield Statement("fact", address, clip(text, FACT_BYTES))


def _fabric_events(
    fabric: FabricResult, counts: Counter[str]
) -> Iterator[ActivityEvent | FileTouch]:
    counts[f"fabric.{fabric.verdict}"] += 1
    if fabric.verdict in ("invalid", "none"):
        yield UnreadResult(fabric.entry_id, fabric.verdict, fabric.reason or fabric.verdict)
        return
    for phase in fabric.phases:
        counts["phases"] += 1
        yield PhaseEvent(phase.address, phase.name)
    legacy = fabric.verdict == "legacy"
    for op in fabric.operations:
        event = _operation(op, legacy=legacy)
        counts["operations"] += 1
        counts["failedOperations"] += not event.succeeded
        yield event
        touch = _file_touch(op, event)
        if touch is not None:
            yield touch


def _operation(op: TraceOperation, *, legacy: bool) -> OperationEvent:
    return OperationEvent(
        address=op.address,
        ref=op.ref,
        target=target_of(op.args),
        outcome=op.outcome,
        stage=op.failure_stage,
        error=None if legacy else op.error,
        origin="legacy" if legacy else "trace",
    )


def _file_touch(op: TraceOperation, event: OperationEvent) -> FileTouch | None:
    provider, _, action = op.ref.partition(".")
    path = op.args.get("path")
    if (
        not event.succeeded
        or provider not in FILE_PROVIDERS
        or action not in FILE_ACTIONS
        or not isinstance(path, str)
        or not path
    ):
        return None
    # The write-side projection keeps exactly ``{created: true}`` as a write's result.
    result = op.record.get("result")
    created = action == "write" and isinstance(result, Mapping) and result.get("created") is True
    return FileTouch(path, "created" if created else FILE_ACTIONS[action], op.address)


def _tool_events(
    entry: Entry, message: Mapping[str, Any], calls: Mapping[str, ToolCall]
) -> Iterator[OperationEvent | FileTouch]:
    """A plain tool result: its outcome (for outstanding errors) and the file it touched,
    both from the call's arguments; the result text is never read."""
    call_id = result_call_id(entry)
    call = calls.get(call_id) if call_id is not None else None
    name = entry.tool_name or (call.name if call is not None else "")
    arguments = call.arguments if call is not None else {}
    failed = message.get("isError") is True
    event = OperationEvent(
        address=entry.id,
        ref=name,
        target=target_of(arguments),
        outcome="failed" if failed else "succeeded",
        stage=None,
        error=None,
        origin="tool",
    )
    yield event
    path = arguments.get("path")
    if not failed and name in FILE_ACTIONS and isinstance(path, str) and path:
        yield FileTouch(path, FILE_ACTIONS[name], entry.id)


# --- items and ledgers ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Item:
    """One line of a section: the addresses it stands for and its text.

    ``key`` identifies it for de-duplication (statements), upserts (files, by path) and
    resolution (errors, by target); ``tags`` are a file's actions.
    """

    first: str
    last: str
    text: str
    key: str = ""
    tags: tuple[str, ...] = ()

    @property
    def weight(self) -> int:
        """Approximate rendered bytes, used to bound the state."""
        return (
            len(self.text.encode())
            + len(self.first)
            + (len(self.last) if self.last != self.first else 0)
            + sum(len(tag) + 2 for tag in self.tags)
            + 8
        )

    @property
    def addresses(self) -> tuple[str, ...]:
        return (self.first,) if self.last == self.first else (self.first, self.last)

    def to_json(self) -> list[Any]:
        """``[address, text]``, ``[first, last, text]`` or ``[first, last, text, key, tags]``."""
        if self.key or self.tags:
            return [self.first, self.last, self.text, self.key, list(self.tags)]
        if self.last == self.first:
            return [self.first, self.text]
        return [self.first, self.last, self.text]

    @staticmethod
    def from_json(value: Any) -> Item | None:
        if not isinstance(value, list) or len(value) not in (2, 3, 5):
            return None
        if not all(isinstance(part, str) for part in value[:3]):
            return None
        if len(value) == 2:
            return Item(value[0], value[0], value[1])
        if len(value) == 3:
            return Item(value[0], value[1], value[2])
        key, tags = value[3], value[4]
        if not isinstance(key, str) or not isinstance(tags, list):
            return None
        if not all(isinstance(tag, str) for tag in tags):
            return None
        return Item(value[0], value[1], value[2], key, tuple(tags))


class LedgerJson(TypedDict):
    head: list[list[Any]]
    tail: list[list[Any]]
    dropped: int
    droppedFirst: str | None
    droppedLast: str | None


@dataclass(frozen=True, slots=True)
class Ledger:
    """Earliest items, a counted gap, latest items (in source order)."""

    head: tuple[Item, ...] = ()
    tail: tuple[Item, ...] = ()
    dropped: int = 0
    dropped_first: str | None = None
    dropped_last: str | None = None

    @property
    def items(self) -> tuple[Item, ...]:
        return self.head + self.tail

    @property
    def total(self) -> int:
        return len(self.head) + self.dropped + len(self.tail)

    def gap(self, head: int, tail: int) -> tuple[int, str, str] | None:
        """What showing only the first ``head`` and last ``tail`` items leaves out: how many
        items and the first and last address of that range (None when nothing is)."""
        items = self.items
        n = len(items)
        split = len(self.head)
        if self.dropped and (head > split or tail > len(self.tail)):
            raise ValueError("a sample may not reach past the gap the ledger already has")
        omitted = n - min(n, head + tail) + self.dropped
        if not omitted:
            return None
        middle = items[head : n - tail]
        if not self.dropped:
            return omitted, middle[0].first, middle[-1].last
        before, after = items[head:split], items[split : n - tail]
        first = before[0].first if before else self.dropped_first
        last = after[-1].last if after else self.dropped_last
        return omitted, first or "", last or ""

    def sample(self, head: int, tail: int) -> Ledger:
        """Only the first ``head`` and last ``tail`` items, the rest counted in the gap."""
        gap = self.gap(head, tail)
        if gap is None:
            return self
        items = self.items
        return Ledger(items[:head], items[len(items) - tail :], *gap)

    def to_json(self) -> LedgerJson:
        return {
            "head": [item.to_json() for item in self.head],
            "tail": [item.to_json() for item in self.tail],
            "dropped": self.dropped,
            "droppedFirst": self.dropped_first,
            "droppedLast": self.dropped_last,
        }

    @staticmethod
    def from_json(value: Any) -> Ledger | None:
        if not isinstance(value, Mapping):
            return None
        head, tail = value.get("head"), value.get("tail")
        dropped = value.get("dropped")
        first, last = value.get("droppedFirst"), value.get("droppedLast")
        if not isinstance(head, list) or not isinstance(tail, list):
            return None
        if type(dropped) is not int or dropped < 0:
            return None
        if not all(bound is None or isinstance(bound, str) for bound in (first, last)):
            return None
        if dropped and (first is None or last is None):
            return None
        items = [Item.from_json(item) for item in head + tail]
        if any(item is None for item in items):
            return None
        parsed = cast(list[Item], items)
        return Ledger(tuple(parsed[: len(head)]), tuple(parsed[len(head) :]), dropped, first, last)


@dataclass(frozen=True, slots=True)
class Cap:
    """How many bytes of earliest and of latest items a ledger keeps."""

    head: int
    tail: int


CAPS: Final[Mapping[LedgerName, Cap]] = {
    "goal": Cap(2048, 2048),
    "constraints": Cap(2048, 3072),
    "facts": Cap(2048, 4096),
    "errors": Cap(3072, 9216),
    "files": Cap(2048, 9216),
    "activity": Cap(4096, 16384),
    "turns": Cap(4096, 16384),
}


class _Builder:
    """A ledger being updated by one cycle's events."""

    def __init__(self, ledger: Ledger) -> None:
        self.head = list(ledger.head)
        self.tail = list(ledger.tail)
        self.dropped = ledger.dropped
        self.dropped_first = ledger.dropped_first
        self.dropped_last = ledger.dropped_last
        self.keys = Counter(item.key for item in self.head + self.tail if item.key)

    def add(self, item: Item) -> None:
        self.tail.append(item)
        if item.key:
            self.keys[item.key] += 1

    def add_unique(self, item: Item) -> None:
        if item.key not in self.keys:
            self.add(item)

    def pop_last(self) -> Item | None:
        """Take back the latest item (not one past the gap)."""
        source = self.tail if self.tail else self.head if not self.dropped else []
        if not source:
            return None
        item = source.pop()
        if item.key:
            self.keys[item.key] -= 1
        return item

    def remove(self, key: str) -> list[Item]:
        """Remove every item with ``key``; return them, earliest first."""
        if not self.keys.get(key):
            return []
        removed = [item for item in self.head + self.tail if item.key == key]
        self.head = [item for item in self.head if item.key != key]
        self.tail = [item for item in self.tail if item.key != key]
        del self.keys[key]
        return removed

    def settle(self, cap: Cap) -> Ledger:
        weights = [item.weight for item in self.tail]
        tail_bytes = sum(weights)
        head_bytes = sum(item.weight for item in self.head)
        start = 0
        while tail_bytes > cap.tail and start < len(self.tail):
            item, weight = self.tail[start], weights[start]
            start += 1
            tail_bytes -= weight
            if not self.dropped and head_bytes + weight <= cap.head:
                self.head.append(item)
                head_bytes += weight
                continue
            self.dropped += 1
            self.dropped_first = self.dropped_first or item.first
            self.dropped_last = item.last
        return Ledger(
            tuple(self.head),
            tuple(self.tail[start:]),
            self.dropped,
            self.dropped_first,
            self.dropped_last,
        )


# --- the cumulative state ------------------------------------------------------------


class CoverageJson(TypedDict):
    first: str | None
    last: str | None
    entries: int


class StateJson(TypedDict):
    version: int
    coverage: CoverageJson
    counts: dict[str, int]
    status: list[list[Any]]
    ledgers: dict[str, LedgerJson]


@dataclass(frozen=True, slots=True)
class Coverage:
    """The source range summarized so far: first and last entry, and how many entries."""

    first: str | None = None
    last: str | None = None
    entries: int = 0

    def to_json(self) -> CoverageJson:
        return {"first": self.first, "last": self.last, "entries": self.entries}


@dataclass(frozen=True, slots=True)
class CumulativeState:
    """Everything a compaction carries to the next one (inside its details)."""

    coverage: Coverage = Coverage()
    counts: Mapping[str, int] = field(default_factory=dict)
    status: tuple[Item, ...] = ()
    """The latest user request and assistant reply, keyed ``user``/``assistant``."""
    ledgers: Mapping[LedgerName, Ledger] = field(
        default_factory=lambda: {name: Ledger() for name in LEDGERS}
    )

    def to_json(self) -> StateJson:
        return {
            "version": STATE_VERSION,
            "coverage": self.coverage.to_json(),
            "counts": dict(sorted(self.counts.items())),
            "status": [item.to_json() for item in self.status],
            "ledgers": {name: self.ledgers[name].to_json() for name in LEDGERS},
        }

    def sampled(self, shown: Mapping[str, tuple[int, int]]) -> CumulativeState:
        """The state with each named ledger cut to its first/last ``(head, tail)`` items: what
        a summary showed is what the next cycle carries."""
        ledgers = {
            name: self.ledgers[name].sample(*shown[name]) if name in shown else self.ledgers[name]
            for name in LEDGERS
        }
        return CumulativeState(self.coverage, self.counts, self.status, ledgers)

    def addresses(self) -> list[str]:
        """Every address the state holds, in a stable order."""
        found: dict[str, None] = {}
        for bound in (self.coverage.first, self.coverage.last):
            if bound:
                found[bound] = None
        for item in self.status:
            found.update(dict.fromkeys(item.addresses))
        for name in LEDGERS:
            ledger = self.ledgers[name]
            for item in ledger.items:
                found.update(dict.fromkeys(item.addresses))
            for bound in (ledger.dropped_first, ledger.dropped_last):
                if bound:
                    found[bound] = None
        return list(found)


def read_state(value: Any) -> CumulativeState | None:
    """The state stored by :meth:`CumulativeState.to_json`, or None if ``value`` is not one
    (another version, another compactor, or damaged)."""
    if not isinstance(value, Mapping) or value.get("version") != STATE_VERSION:
        return None
    coverage, counts = value.get("coverage"), value.get("counts")
    status, ledgers = value.get("status"), value.get("ledgers")
    if not isinstance(coverage, Mapping) or not isinstance(counts, Mapping):
        return None
    if not isinstance(status, list) or not isinstance(ledgers, Mapping):
        return None
    first, last, entries = coverage.get("first"), coverage.get("last"), coverage.get("entries")
    if not all(bound is None or isinstance(bound, str) for bound in (first, last)):
        return None
    if type(entries) is not int or entries < 0:
        return None
    if not all(isinstance(k, str) and type(v) is int for k, v in counts.items()):
        return None
    status_items = [Item.from_json(item) for item in status]
    parsed = {name: Ledger.from_json(ledgers.get(name)) for name in LEDGERS}
    if any(item is None for item in status_items) or any(v is None for v in parsed.values()):
        return None
    return CumulativeState(
        Coverage(first, last, entries),
        dict(counts),
        tuple(cast(list[Item], status_items)),
        cast(dict[LedgerName, Ledger], parsed),
    )


def fold(previous: CumulativeState, projection: Projection) -> CumulativeState:
    """``previous`` advanced by one cycle's events."""
    builders = {name: _Builder(previous.ledgers[name]) for name in LEDGERS}
    sections: dict[StatementKind, LedgerName] = {
        "goal": "goal",
        "constraint": "constraints",
        "fact": "facts",
    }
    for statement in projection.statements:
        builders[sections[statement.kind]].add_unique(
            Item(statement.address, statement.address, statement.text, key=_norm(statement.text))
        )
    files = builders["files"]
    for touch in projection.files:
        known = files.remove(touch.path)
        tags = {tag for item in known for tag in item.tags} | {touch.action}
        files.add(
            Item(
                known[0].first if known else touch.address,
                touch.address,
                touch.path,
                key=touch.path,
                tags=tuple(tag for tag in FILE_TAG_ORDER if tag in tags),
            )
        )
    for event in projection.activity:
        builders["activity"].add(_activity_item(event))
    errors = builders["errors"]
    resolved = 0
    for outcome in projection.outcomes:
        if outcome.origin == "legacy":
            continue  # outstanding errors follow valid traces (and plain tools) only
        if outcome.succeeded:
            resolved += len(errors.remove(outcome.key))
        else:
            errors.add(Item(outcome.address, outcome.address, operation_text(outcome), outcome.key))
    turns = builders["turns"]
    for turn in projection.turns:
        prior = turns.pop_last() if turn.continued else None
        if prior is not None:
            turns.add(Item(prior.first, turn.last, f"{prior.text} | {turn.text}"))
        else:
            text = f"(continued) | {turn.text}" if turn.continued else turn.text
            turns.add(Item(turn.first, turn.last, text))
    counts = Counter(previous.counts)
    counts.update(projection.counts)
    counts["resolvedErrors"] += resolved
    status = {item.key: item for item in previous.status}
    for latest in projection.status:
        status[latest.role] = Item(latest.address, latest.address, latest.text, key=latest.role)
    coverage = Coverage(
        previous.coverage.first or projection.first,
        projection.last or previous.coverage.last,
        previous.coverage.entries + projection.entries,
    )
    return CumulativeState(
        coverage,
        {key: value for key, value in sorted(counts.items()) if value},
        tuple(status[role] for role in ("user", "assistant") if role in status),
        {name: builders[name].settle(CAPS[name]) for name in LEDGERS},
    )


def _norm(text: str) -> str:
    return collapse(text).casefold()


def operation_text(event: OperationEvent) -> str:
    """``ref `target` -> outcome at stage: error`` for one operation."""
    head = f"{event.ref} `{clip(event.target, TARGET_BYTES)}`" if event.target else event.ref
    text = f"{head} -> {event.outcome}"
    if event.stage:
        text += f" at {event.stage}"
    if event.error:
        text += f": {clip(collapse(event.error), ERROR_BYTES)}"
    if event.origin == "legacy":
        text += " (legacy audit)"
    return text


def _activity_item(event: ActivityEvent) -> Item:
    if isinstance(event, PhaseEvent):
        return Item(event.address, event.address, f'phase "{clip(event.name, TARGET_BYTES)}"')
    if isinstance(event, OperationEvent):
        return Item(event.address, event.address, operation_text(event))
    reason = clip(collapse(event.reason), ERROR_BYTES)
    return Item(event.address, event.address, f"fabric_exec result not read ({reason})")
