"""The compactor: a branch → the cumulative state → the summary and its details.

A compaction summarizes the entries before its cut. :func:`compact_branch` finds
the cut that keeps every tool call with its result (:mod:`.closure`), resumes from
the state the previous compaction carries (:mod:`.details`), and streams the newly
summarized entries' views (:mod:`fabric_memory.view`) once into that state's
ledgers: what the user stated (goal, constraints, facts to keep: from the text the user
wrote, not what they pasted, :mod:`.authored`), files touched and how each changed, commits,
releases and check runs (:mod:`.work`), Fabric phases and operations (only as the view's
guarded ``FabricResult`` says), operation outcomes, turns and the current status. Activity
and turns arrive as :class:`~.ledger.Pending` items, so only what the bounded state keeps is
ever written out. :mod:`.render` then lays the state out as the summary.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, cast

from ..errors import clipped
from ..sources.registry import TOOLS
from ..sources.tools import DONE, FileWork
from ..trace import (
    FabricExecutionTraceOperationV1,
    FabricResult,
    operation_address,
    phase_address,
)
from ..view import EntryView, ToolCall, content_text
from .authored import authored, is_request, sentences_within
from .closure import entry_ids, index_tool_calls, safe_cut, window_start
from .details import (
    Coverage,
    CumulativeState,
    DetailsJson,
    LiveRange,
    build_details,
    previous_state,
)
from .ledger import CAPS, LEDGERS, Item, LedgerBuilder, LedgerName, Pending, Run
from .render import render_summary
from .text import (
    blocks_text,
    clip,
    clip_collapsed,
    collapse,
    mask,
    masking_once,
    plain_ids,
    target_key,
    target_of,
)
from .work import Run as ShellRun
from .work import checks as check_commands
from .work import (
    first_changed_line,
    interesting,
    moves,
    no_match,
    shell_run,
    vcs_events,
    written_lines,
)
from .work import outcome as check_outcome

FILE_ACTIONS: Final = {"read": "read", "write": "written", "edit": "modified"}
"""Tool (or ``pi.*``/``omp.*`` action) → what it did to ``args.path``."""
FILE_TAG_ORDER: Final = ("created", "written", "modified", "read")
FILE_PROVIDERS: Final = frozenset({"pi", "omp"})
FILE_REFS: Final = {f"{p}.{a}": a for p in FILE_PROVIDERS for a in FILE_ACTIONS}
"""Fabric ref (``pi.read``, ``omp.edit``, ...) → its tool in :data:`FILE_ACTIONS`."""

GOAL_BYTES: Final = 600
STATEMENT_BYTES: Final = 300
FACT_BYTES: Final = 600
TARGET_BYTES: Final = 120
ERROR_BYTES: Final = 160
USER_SNIPPET_BYTES: Final = 200
ASSISTANT_SNIPPET_BYTES: Final = 160
STATUS_BYTES: Final = 300
CHANGE_LINE_BYTES: Final = 90
"""An edit's changed line, on each side."""
COMMAND_BYTES: Final = 80
EVENT_BYTES: Final = 200
CHANGES_PER_FILE: Final = 3
"""A file's latest changes kept in the state (older ones leave it as newer ones come)."""
PLAN_KEY: Final = "plan"
"""The key every open item shares: a new plan removes the one before."""
GOAL_ITEMS: Final = 3
"""Bare links or paths the goal takes before the first request that says something."""

_CONSTRAINT_WORDS: Final = (
    "never", "must", "mustn't", "do not", "don't", "always", "constraint", "forbidden",
    "required", "requirement",
)
_GOAL_WORDS: Final = ("goal",)
_FACT_WORDS: Final = ("remember", "don't forget", "do not forget", "keep in mind", "note that")


def _words(words: tuple[str, ...]) -> re.Pattern[str]:
    """Any of ``words`` as a whole word, case-insensitively. The lookahead on the words'
    first letters (same flags, so it admits exactly what the words' own first letters
    would) lets the search skip most positions cheaply: ~3x faster on user messages."""
    firsts = "".join(sorted({word[0] for word in words}))
    return re.compile(rf"\b(?=[{firsts}])(?:{'|'.join(words)})\b", re.IGNORECASE)


_CONSTRAINT = _words(_CONSTRAINT_WORDS)
_GOAL = _words(_GOAL_WORDS)
_FACT = _words(_FACT_WORDS)
_STATEMENT = _words(_CONSTRAINT_WORDS + _GOAL_WORDS + _FACT_WORDS)
"""Any statement word: a text without one states nothing (one search instead of three)."""
_STATEMENT_PARTS: Final = tuple(
    word for word in (_CONSTRAINT_WORDS + _GOAL_WORDS + _FACT_WORDS)
    if not any(other != word and other in word for other in _CONSTRAINT_WORDS + _FACT_WORDS)
)
"""The statement words but those holding another one ("mustn't" holds "must")."""


def _may_state(text: str) -> bool:
    """Whether ``text`` may hold a statement word (False: it states nothing).

    Most user texts are ASCII, where IGNORECASE means ASCII case: there a substring test
    of the lowercased text per word (~2x faster than the regex, which still decides) tells
    the many texts without one. Elsewhere the regex alone (lower() and IGNORECASE differ
    on a few characters)."""
    if not text.isascii():
        return _STATEMENT.search(text) is not None
    lowered = text.lower()
    for part in _STATEMENT_PARTS:  # noqa: SIM110 (any() over a generator or map: ~1.7x slower)
        if part in lowered:
            return True
    return False


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_STATEMENT_LEDGERS: Final[Mapping[str, LedgerName]] = {
    "goal": "goal",
    "constraint": "constraints",
    "fact": "facts",
}


# --- the outcome ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Compaction:
    """A compaction ready for the host (or for :func:`~.files.append_compaction`)."""

    summary: str
    first_kept_entry_id: str
    tokens_before: int
    details: DetailsJson
    requested_first_kept_entry_id: str
    """What the preparation asked for; differs from ``first_kept_entry_id`` when the cut
    moved earlier to keep a tool call with its result."""

    def to_json(self) -> dict[str, Any]:
        return {
            "summary": self.summary,
            "firstKeptEntryId": self.first_kept_entry_id,
            "tokensBefore": self.tokens_before,
            "details": self.details,
        }

    def to_hook_result(self) -> dict[str, Any]:
        return {"compaction": self.to_json()}


@dataclass(frozen=True, slots=True)
class Cancel:
    """No compaction, and why."""

    reason: str

    def to_hook_result(self) -> dict[str, Any]:
        return {"cancel": True, "reason": self.reason}


# --- events --------------------------------------------------------------------------


# Built per entry on the hook's path and never changed afterwards; not ``frozen``, which
# would make building it ~5x slower (each field set through ``object.__setattr__``).
@dataclass(slots=True)
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


def _key_refs(key: str) -> list[str]:
    """Every ref :func:`target_key` could have made ``key`` from (a ref or target may hold
    ``\x00`` itself)."""
    return [key[:at] for at, char in enumerate(key) if char == "\x00"]


def operation_text(event: OperationEvent) -> str:
    """``ref `target` -> outcome at stage: error`` for one operation."""
    return _operation_line(event.ref, event.target, event.outcome, event.stage, event.error,
                           event.origin == "legacy")


def _operation_line(
    ref: str, target: str, outcome: str, stage: str | None, error: str | None, legacy: bool
) -> str:
    ref = mask(ref)  # a tool's name, or a trace's ref: any string
    text = f"{ref} `{clip(target, TARGET_BYTES)}` -> {outcome}" if target else f"{ref} -> {outcome}"
    if stage:
        text += f" at {stage}"
    if error:
        text += f": {clip_collapsed(error, ERROR_BYTES)}"
    if legacy:
        text += " (legacy audit)"
    return text


def _trace_event(entry_id: str, op: FabricExecutionTraceOperationV1) -> OperationEvent:
    """A failed operation of a valid trace, as an outstanding error."""
    return OperationEvent(
        operation_address(entry_id, op["sequence"]), op["ref"], target_of(op["args"]),
        op["outcome"], op.get("failureStage"), op.get("error"), "trace",
    )


def _legacy_item(fabric: FabricResult, index: int) -> Item:
    """A kept legacy audit's line (written straight from the operation: no event)."""
    op = fabric.records[index]
    address = operation_address(fabric.entry_id, op["sequence"])
    text = _operation_line(op["ref"], target_of(op["args"]), op["outcome"], None, None, True)
    return Item(address, address, text)


def _trace_item(fabric: FabricResult, index: int) -> Item:
    """A kept trace operation's line (written straight from the operation: no event)."""
    op = fabric.records[index]
    address = operation_address(fabric.entry_id, op["sequence"])
    text = _operation_line(op["ref"], target_of(op["args"]), op["outcome"],
                           op.get("failureStage"), op.get("error"), False)
    return Item(address, address, text)


def _phase_item(fabric: FabricResult, index: int) -> Item:
    address = phase_address(fabric.entry_id, index)
    return Item(address, address, f'phase "{clip(fabric.phase_names[index], TARGET_BYTES)}"')


def _unread_item(fabric: FabricResult) -> Pending:
    address = fabric.entry_id

    def write() -> Item:
        reason = clip_collapsed(fabric.reason or fabric.verdict, ERROR_BYTES)
        return Item(address, address, f"fabric_exec result not read ({reason})")

    return Pending(address, address, write)


def _statements(address: str, text: str, *, goal: bool) -> Iterator[tuple[str, str]]:
    """What ``text`` (whitespace collapsed) states; the pieces stay collapsed, so they are
    their own de-duplication key once case-folded."""
    if goal:
        yield "goal", clip(sentences_within(text, GOAL_BYTES), GOAL_BYTES)
    if not _may_state(text):
        return
    # A match never spans the whitespace the sentence split removes (no pattern has a
    # sentence end in it), so a text without one has no sentence with one.
    if _CONSTRAINT.search(text) or (not goal and _GOAL.search(text)):
        sentences = _SENTENCE_END.split(text)
    else:
        sentences = []
    for sentence in sentences:
        if not goal and _GOAL.search(sentence):
            yield "goal", clip(sentence, STATEMENT_BYTES)
        if _CONSTRAINT.search(sentence):
            yield "constraint", clip(sentence, STATEMENT_BYTES)
    if _FACT.search(text):
        yield "fact", clip(text, FACT_BYTES)


class _Turn:
    """One user turn over a contiguous run of entries; ``continued`` when the run starts
    inside a turn an earlier cycle began (a split turn)."""

    __slots__ = ("assistant", "failures", "first", "last", "notes", "operations", "tools",
                 "user")

    def __init__(self, first: str, user: str | None) -> None:
        self.first = first
        self.last = first
        self.user = user
        self.assistant = ""
        """The latest assistant text, whitespace not yet collapsed."""
        self.tools: dict[str, int] = {}
        self.operations = 0
        self.failures = 0
        self.notes: list[str] = []

    @property
    def continued(self) -> bool:
        return self.user is None

    def empty(self) -> bool:
        """Settings and system entries before the first user message say nothing."""
        return not (self.user or self.assistant or self.tools or self.operations or self.notes)

    def text(self) -> str:
        parts = [f'user: "{clip(self.user, USER_SNIPPET_BYTES)}"'] if self.user else []
        if self.assistant:
            assistant = clip_collapsed(self.assistant, ASSISTANT_SNIPPET_BYTES)
            parts.append(f'assistant: "{assistant}"')
        if self.tools:
            named = ((mask(name), n) for name, n in self.tools.items())
            parts.append(
                "tools: " + ", ".join(name if n == 1 else f"{name} x{n}" for name, n in named)
            )
        if self.operations:
            failed = f", {self.failures} not succeeded" if self.failures else ""
            parts.append(f"{self.operations} operations{failed}")
        parts.extend(self.notes[:3])
        return " | ".join(parts)


class _Touched:
    """A file this cycle touched: its first and latest address and every action on it."""

    __slots__ = ("first", "last", "tags")

    def __init__(self, first: str, tags: set[str]) -> None:
        self.first = first
        self.last = first
        self.tags = tags


# --- one cycle -----------------------------------------------------------------------


class _Cycle:
    """The previous state advanced entry by entry (each entry's view is read once)."""

    def __init__(self, previous: CumulativeState, calls: Mapping[str, ToolCall]) -> None:
        self.previous = previous
        self.calls = calls
        self.ledgers = {name: LedgerBuilder(previous.ledgers[name]) for name in LEDGERS}
        goals = previous.ledgers["goal"].total
        self.goal_known = bool(goals) and (goals >= GOAL_ITEMS or any(
            is_request(item.text) for item in previous.ledgers["goal"].items
        ))
        self.counts: Counter[str] = Counter()
        self.turns = self.assistant_messages = self.tool_results = 0
        """Counted apart from ``counts``: an attribute is cheaper to bump per entry."""
        self.status: dict[str, tuple[str, str]] = {}
        """role → (address, text); a user's text is collapsed already, an assistant's not."""
        self.user_said = ""
        """The latest user text as it came: its status shows what the user wrote of it."""
        self.resolved = 0
        self.error_refs = {
            ref for item in previous.ledgers["errors"].items for ref in _key_refs(item.key)
        }
        """Refs that may have an outstanding error: a success of any other ref resolves nothing."""
        self.check_errors: dict[str, list[str]] | None = None
        """See :meth:`_failed_checks`."""
        self.touched: dict[str, _Touched] = {}
        """This cycle's files by (masked) path, in order of last touch."""
        self.turn: _Turn | None = None
        self.first: str | None = None
        self.last: str | None = None
        self.entries = 0

    def add(self, view: EntryView) -> None:
        if view.type == "compaction":
            return
        address = view.id
        self.entries += 1
        if not self.first:
            self.first = address
        self.last = address
        role = view.role
        if role == "user":
            text = collapse(blocks_text(view.text, view.blocks))
            self._close_turn()
            self.turn = _Turn(address, text)
            self.turns += 1
            if text:
                # Only a text with a statement word (or before the goal is known) is read
                # for what the user wrote apart from what they pasted: most texts have none.
                if not self.goal_known or _may_state(text):
                    own = authored(view.text)
                    own = text if own is view.text else collapse(own)
                    if own:
                        self._state(address, own)
                self.status["user"] = (address, text)
                self.user_said = view.text
            return
        turn = self.turn
        if turn is None:
            turn = self.turn = _Turn(address, None)
        turn.last = address
        if role == "assistant":
            self.assistant_messages += 1
            text = blocks_text(view.text, view.blocks)
            if text and not text.isspace():
                turn.assistant = text
                self.status["assistant"] = (address, text)
            if view.tool_calls:
                tools = turn.tools
                for call in view.tool_calls:
                    name = call.name or "?"
                    tools[name] = tools.get(name, 0) + 1
        elif role == "toolResult":
            self.tool_results += 1
            fabric = view.fabric
            if fabric is not None:
                self._fabric(fabric, turn)
            else:
                self._tool(view)
        elif role == "bashExecution":
            message = view.message or {}
            command = message.get("command")
            if isinstance(command, str):
                shown = clip(collapse(command), TARGET_BYTES)
                exit_code = message.get("exitCode")
                turn.notes.append(f"ran `{shown}` (exit {mask(str(exit_code))})")
                output = message.get("output")
                if interesting(command):
                    run = shell_run(output if isinstance(output, str) else "", False, exit_code)
                    self._shell(address, command, run)
        elif view.type == "branch_summary":
            turn.notes.append("returned from another branch")
        elif view.type == "custom_message":
            kind = view.raw.get("customType")
            turn.notes.append(f"{mask(kind) if isinstance(kind, str) else 'custom'} message")

    def _state(self, address: str, text: str) -> None:
        """What ``text`` (the user's own words, collapsed) states; the goal is the first
        request that says something (bare links and paths before it are kept beside it).
        The caller read the text only if the goal is unknown or a statement word is in it."""
        request = not self.goal_known and is_request(text)
        goal = request or (not self.goal_known and not text.startswith("/"))
        for kind, statement in _statements(address, text, goal=goal):
            self.ledgers[_STATEMENT_LEDGERS[kind]].add_unique(
                Item(address, address, statement, key=statement.casefold())
            )
        if goal:
            self.goal_known = request or len(self.ledgers["goal"].keys) >= GOAL_ITEMS

    def _close_turn(self) -> None:
        turn = self.turn
        if turn is None or turn.empty():
            return
        turns = self.ledgers["turns"]
        if turn.continued:
            prior = turns.pop_last()
            if prior is not None:
                turns.add(Item(prior.first, turn.last, f"{prior.text} | {turn.text()}"))
            else:
                turns.add(Item(turn.first, turn.last, f"(continued) | {turn.text()}"))
            return
        first, last = turn.first, turn.last
        turns.add_pending(Pending(first, last, lambda: Item(first, last, turn.text())))

    def _fabric(self, fabric: FabricResult, turn: _Turn) -> None:
        counts = self.counts
        counts[f"fabric.{fabric.verdict}"] += 1
        activity = self.ledgers["activity"]
        if fabric.verdict in ("invalid", "none"):
            activity.add_pending(_unread_item(fabric))
            return
        # The result's own operation objects, addressed only when an item is written.
        entry_id, records, names = fabric.entry_id, fabric.records, fabric.phase_names
        if names:
            activity.add_pending(Run(names, _phase_item, fabric))
        counts["phases"] += len(names)
        legacy = fabric.verdict == "legacy"
        if records:
            activity.add_pending(Run(records, _legacy_item if legacy else _trace_item, fabric))
        failed = 0
        error_refs = self.error_refs
        for op in records:
            ref = op["ref"]
            if op["outcome"] != "succeeded":
                failed += 1
                if not legacy:  # outstanding errors follow valid traces (and plain tools) only
                    self._error(_trace_event(entry_id, op))
                continue
            if not legacy and ref in error_refs:
                self._resolve(ref, op["args"])
            if ref in FILE_REFS:
                self._file_touch(entry_id, op)
        operations = len(records)
        counts["operations"] += operations
        counts["failedOperations"] += failed
        turn.operations += operations
        turn.failures += failed

    def _tool(self, view: EntryView) -> None:
        """A plain tool result: its outcome (for outstanding errors) and what the call did,
        as its agent's tool table reads the call's arguments (:data:`TOOLS`); a shell
        command's result text is read for what it reports (commits, checks, searches with
        no match), no other result text is."""
        call = self.calls.get(view.call_id) if view.call_id is not None else None
        name = view.tool_name or (call.name if call is not None else "")
        arguments = call.arguments if call is not None else {}
        message = view.message or {}
        failed = message.get("isError") is True
        tool = TOOLS.get(name)
        use = tool.use(arguments) if tool is not None else None
        command = use.command if use is not None else None
        interrupted = message.get("interrupted") is True
        if command is not None and interesting(command):
            run = shell_run(content_text(message.get("content")), failed,
                            message.get("exitCode"))
            if failed and no_match(command, run):
                self.counts["searchesWithoutMatch"] += 1
                return
            self._shell(view.id, command, run, interrupted)
        target = use.target if use is not None and use.target is not None else None
        if target is None:
            target = target_of(arguments)
        if failed or interrupted:
            key = self._error(OperationEvent(view.id, name, target,
                                             "interrupted" if interrupted else "failed", None,
                                             None, "tool"))
            if command is not None and interesting(command):
                failed_checks = self._failed_checks()
                for check in check_commands(command):
                    failed_checks.setdefault(clip(check, COMMAND_BYTES), []).append(key)
            return
        self._resolve_target(name, target)
        if use is None:
            return
        for work in use.files:
            self._file_work(work, view.id)
        if use.plan is not None:
            self._plan(use.plan, view.id)

    def _file_work(self, work: FileWork, address: str) -> None:
        """A file a call touched (its path masked where it enters the state) and, but for
        a read, how it changed."""
        shown = mask(work.path)
        seen = shown in self.touched or shown in self.ledgers["files"].keys
        if work.action == "deleted":
            self._moved(shown, "deleted", address)
            return
        self._touch(work.path, work.action, address)
        if work.action != "read":
            self._change(shown, work, address, seen)
        if work.moved_to:
            self._moved(shown, f"moved to {work.moved_to}", address)

    def _moved(self, shown: str, what: str, address: str) -> None:
        self.ledgers["changes"].add_latest(
            Item(address, address, f"{shown}: {clip(what, TARGET_BYTES)}", key=shown),
            CHANGES_PER_FILE,
        )

    def _plan(self, steps: tuple[tuple[str, str], ...], address: str) -> None:
        """The plan a call set: its steps not yet done are the open items (each plan
        replaces the one before)."""
        plan = self.ledgers["plan"]
        plan.remove(PLAN_KEY)
        for status, step in steps:
            if status not in DONE:
                shown = f"{mask(status)}: {clip_collapsed(step, STATEMENT_BYTES)}"
                plan.add(Item(address, address, shown, key=PLAN_KEY))

    def _shell(self, address: str, command: str, run: ShellRun,
               interrupted: bool = False) -> None:
        """What a shell command did: check runs by command, the commits, tags, pushes,
        releases and branch switches it reports and (when it succeeded) the files it deleted
        or moved (``command``: one :func:`~.work.interesting` said may do any of it)."""
        checks = check_commands(command)
        if checks:
            passed, failing = (False, "interrupted") if interrupted else check_outcome(run)
            code = None if interrupted else run.exit_code
            for check in checks:
                self._check(address, check, passed, failing, code)
        events = vcs_events(command, run.output, run.failed)
        if events:  # one line per command: a commit and its push, a release and its tag
            self.ledgers["commits"].add(Item(address, address, clip("; ".join(events),
                                                                    EVENT_BYTES)))
        if run.failed or interrupted:
            return
        for path, what in moves(command):
            self._moved(mask(path), what, address)

    def _check(self, address: str, command: str, passed: bool, failing: str,
               exit_code: int | None) -> None:
        """The latest run of ``command`` (masked, clipped: the key its runs share), with how
        many runs it had."""
        key = clip(command, COMMAND_BYTES)
        if passed and self.error_refs:
            errors = self.ledgers["errors"]
            for error in self._failed_checks().pop(key, ()):
                self.resolved += len(errors.remove(error))
        checks = self.ledgers["checks"]
        earlier = checks.remove(key)
        runs = 1
        for item in earlier:
            tag = cast(Item, item).tags[0] if cast(Item, item).tags else ""
            runs += int(tag.split()[0]) if tag[:1].isdigit() else 1
        if passed:
            text = f"`{key}` last run passed"
        else:
            code = f" (exit {exit_code})" if exit_code else ""
            text = f"`{key}` last run failed{code}: {clip_collapsed(failing, ERROR_BYTES)}"
        checks.add(Item(address, address, text, key=key,
                        tags=(f"{runs} run{'s' if runs != 1 else ''}",)))

    def _change(self, shown: str, work: FileWork, address: str, seen: bool) -> None:
        """An edit's first changed line or a write's line count, under its file (``shown``:
        its masked path; ``seen``: touched earlier in the session, so a write overwrites)."""
        if work.action == "modified":
            if work.old is None or work.new is None:
                return
            old, new = (clip(line, CHANGE_LINE_BYTES)
                        for line in first_changed_line(work.old, work.new))
            change = " -> ".join(
                part for part in (old and f"`- {old}`", new and f"`+ {new}`") if part
            ) or "whitespace only"
            change = f"edit {change}"
        else:
            count = written_lines(work.new)
            if count is None:
                return
            created = work.action == "created" or not seen
            change = f"{'created' if created else 'overwritten'} ({count} lines)"
        self.ledgers["changes"].add_latest(
            Item(address, address, f"{shown}: {change}", key=shown), CHANGES_PER_FILE
        )

    def _resolve(self, ref: str, args: Mapping[str, Any]) -> None:
        if ref in self.error_refs:
            self._resolve_target(ref, target_of(args))

    def _resolve_target(self, ref: str, target: str) -> None:
        if ref in self.error_refs:
            key = target_key(mask(ref), mask(target))
            self.resolved += len(self.ledgers["errors"].remove(key))

    def _error(self, event: OperationEvent) -> str:
        """An outstanding error, written only if it is neither resolved nor sampled out.
        Its key is masked like its text: the state carried in the details holds both."""
        address = event.address
        key = target_key(mask(event.ref), mask(event.target))
        self.ledgers["errors"].add(
            Pending(address, address, lambda: Item(address, address, operation_text(event), key),
                    key)
        )
        self.error_refs.add(event.ref)
        return key

    def _failed_checks(self) -> dict[str, list[str]]:
        """Check command → the keys of outstanding errors of shell commands that ran it: a
        later passing run of the check resolves them (``npm run check`` passing resolves a
        failed ``cd pkg && npm run check``). Built from the state's errors on first use."""
        if self.check_errors is None:
            found: dict[str, list[str]] = {}
            for key in self.ledgers["errors"].keys:
                ref, _, target = key.partition("\x00")
                tool = TOOLS.get(ref)
                if tool is not None and tool.kind == "shell" and interesting(target):
                    for check in check_commands(target):
                        found.setdefault(clip(check, COMMAND_BYTES), []).append(key)
            self.check_errors = found
        return self.check_errors

    def _file_touch(self, entry_id: str, op: FabricExecutionTraceOperationV1) -> None:
        """A succeeded operation whose ref is one of :data:`FILE_REFS`: the file it touched."""
        action = FILE_REFS[op["ref"]]
        path = op["args"].get("path")
        if not isinstance(path, str) or not path:
            return
        # The write-side projection keeps exactly ``{created: true}`` as a write's result.
        result = op.get("result")
        created = (
            action == "write" and isinstance(result, Mapping) and result.get("created") is True
        )
        address = operation_address(entry_id, op["sequence"])
        self._touch(path, "created" if created else FILE_ACTIONS[action], address)

    def _touch(self, path: str, action: str, address: str) -> None:
        """Upsert ``path`` (masked here, where it enters the state: the file's text and key)
        as the latest file; its item is written once, when the state is taken."""
        path = mask(path)
        touched = self.touched.pop(path, None)
        if touched is None:
            known = self.ledgers["files"].remove(path)  # earlier cycles' items: never pending
            touched = _Touched(known[0].first if known else address,
                               {tag for item in known for tag in cast(Item, item).tags})
        touched.last = address
        touched.tags.add(action)
        self.touched[path] = touched  # (re)inserted last: the dict is in order of last touch

    def state(self) -> CumulativeState:
        self._close_turn()
        files = self.ledgers["files"]
        for path, touched in self.touched.items():
            tags = tuple(tag for tag in FILE_TAG_ORDER if tag in touched.tags)
            files.add(Item(touched.first, touched.last, path, key=path, tags=tags))
        previous = self.previous
        counts = Counter(previous.counts)
        counts.update(self.counts)
        counts["turns"] += self.turns
        counts["assistantMessages"] += self.assistant_messages
        counts["toolResults"] += self.tool_results
        counts["entries"] += self.entries
        counts["resolvedErrors"] += self.resolved
        status = {item.key: item for item in previous.status}
        for role, (address, text) in self.status.items():
            # A user's text is collapsed already (and shown without what they pasted, unless
            # that is all it holds), an assistant's not.
            if role == "user":
                own = authored(self.user_said)
                if own is not self.user_said and own:
                    text = collapse(own)
                shown = clip(text, STATUS_BYTES)
            else:
                shown = clip_collapsed(text, STATUS_BYTES)
            status[role] = Item(address, address, shown, key=role)
        coverage = Coverage(
            previous.coverage.first or self.first,
            self.last or previous.coverage.last,
            previous.coverage.entries + self.entries,
        )
        return CumulativeState(
            coverage,
            {key: value for key, value in sorted(counts.items()) if value},
            tuple(status[role] for role in ("user", "assistant") if role in status),
            {name: self.ledgers[name].settle(CAPS[name]) for name in LEDGERS},
        )


# --- compacting a branch -------------------------------------------------------------


def _where(first_kept_entry_id: str) -> str:
    return clipped(first_kept_entry_id) if first_kept_entry_id else "the end"


def compact_branch(
    branch: Sequence[EntryView],
    first_kept_entry_id: str,
    tokens_before: int,
    *,
    session_id: str | None = None,
) -> Compaction | Cancel:
    """Compact ``branch`` (entry views, root first) at ``first_kept_entry_id`` (``""``:
    everything)."""
    if not branch:
        return Cancel("the branch is empty")
    ids = entry_ids(branch)
    if first_kept_entry_id:
        try:
            cut = ids.index(first_kept_entry_id)
        except ValueError:
            return Cancel(f"firstKeptEntryId {clipped(first_kept_entry_id)} is not on the branch")
    else:
        cut = len(branch)
    floor = window_start(branch, ids)
    if cut <= floor:
        return Cancel(f"nothing to summarize before {_where(first_kept_entry_id)}")
    calls = index_tool_calls(branch)
    safe = safe_cut(branch, cut, floor, calls, ids)
    if safe is None:
        return Cancel(
            f"no cut point at or before {_where(first_kept_entry_id)} keeps every tool "
            "call with its result"
        )
    previous, resume = previous_state(branch, safe)
    with masking_once():
        cycle = _Cycle(previous, calls)
        for view in branch[resume:safe]:
            cycle.add(view)
        state = cycle.state()
        kept = branch[safe].id if safe < len(branch) else ""
        live = LiveRange(cycle.first, cycle.last, cycle.entries, kept)
        plain = plain_ids(ids) and (resume == 0 or plain_ids(previous.addresses()))
        rendered = render_summary(state, live, session_id=session_id, plain=plain)
    details = build_details(
        state,
        rendered,
        live,
        session_id=session_id,
        adjusted_from=first_kept_entry_id if safe != cut else None,
    )
    return Compaction(rendered.summary, kept, tokens_before, details, first_kept_entry_id)


def trail(span: Sequence[EntryView]) -> CumulativeState:
    """What the work trail reads of ``span`` alone (entry views in order; no earlier state,
    no cut, an agent's own compaction entries passed over): the same ledgers a summary
    carries, for a report about that span (the handoff packet)."""
    calls = index_tool_calls(span)
    with masking_once():
        cycle = _Cycle(CumulativeState(), calls)
        for view in span:
            cycle.add(view)
        return cycle.state()
