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
from ..redact import SIGNATURE_REACH
from ..sources.registry import TOOLS
from ..sources.tools import DONE, FileWork, Use
from ..trace import (
    FabricExecutionTraceOperationV1,
    FabricResult,
    operation_address,
    phase_address,
)
from ..view import EntryView, ToolCall, content_text
from .authored import authored, is_request, sentences_within, without_host_metadata
from .closure import entry_ids, index_tool_calls, safe_cut, window_start
from .details import (
    Coverage,
    CumulativeState,
    DetailsJson,
    LiveRange,
    build_details,
    previous_state,
)
from .digest import content_digest, printed
from .facts import SOURCE_WEIGHT, Kind, facts, first_error_line, rank, reports_error
from .ledger import CAPS, LEDGERS, Item, Ledger, LedgerBuilder, LedgerName, Pending, Run
from .render import render_summary
from .text import (
    blocks_text,
    bounded,
    clip,
    clip_collapsed,
    collapse,
    mask,
    masking_once,
    plain_ids,
    target_key,
    target_of,
    whole_or_ends,
)
from .work import Run as ShellRun
from .work import checks as check_commands
from .work import (
    first_changed_line,
    interesting,
    is_check,
    moves,
    no_match,
    programs,
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
STATUS_BYTES: Final = 300
CHANGE_LINE_BYTES: Final = 90
"""An edit's changed line, on each side."""
COMMAND_BYTES: Final = 80
SHOWN_COMMAND_BYTES: Final = 200
"""A command as the commands section shows it (and groups its runs by)."""
PRINTED_BYTES: Final = 400
"""What a command printed, per command."""
DIGEST_BYTES: Final = 300
"""What a write put in its file, per write."""
CONCLUSION_CHARS: Final = 1000
"""How much of the end of a turn's last assistant reply is read for exact facts."""
TOOL_FACT_CHARS: Final = 1500
"""A result of another tool (not a file's, not a shell's) this short is read for exact facts
(a status, a lookup); a longer one is content, not a report."""
ERROR_TEXT_CHARS: Final = 4000
OUTPUT_CHARS: Final = 16_384
"""A command's output longer than this is digested by its start."""
"""How much of a failed tool result is read for exact facts."""
USER_CHARS: Final = 600
"""A user's message up to this many characters is carried whole (longer: start and end)."""
ASSISTANT_CHARS: Final = 160
"""Bytes of an assistant's reply per turn in a large span; a small span gives each turn
more."""
MESSAGE_CHARS: Final = 2000
"""The most of one user message a small span carries whole."""
REPLY_CHARS: Final = 800
"""The most of one assistant reply a small span carries (bytes of its start)."""
SPAN_CHARS: Final = 16_000
"""Characters of user and assistant text a span's turns may share before the bounds above."""
_SHELLS: Final = frozenset({"cmd", "cmd.exe", "bash", "sh", "zsh", "powershell", "pwsh"})
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


_CJK_CONSTRAINT_WORDS: Final = ("必须", "不要", "不能", "禁止", "务必", "一定要", "绝不", "不许",
                                "してはいけない", "しないで", "必ず", "하지 마", "반드시")
_CJK_GOAL_WORDS: Final = ("目标", "目的", "目標", "목표")
_CJK_FACT_WORDS: Final = ("记住", "别忘了", "注意", "覚えて", "忘れないで", "기억해")
"""Statement words of scripts written without spaces: matched anywhere (there is no word
boundary between two such characters)."""


class _Words:
    """Any of some words as a whole word, or of words of scripts without spaces anywhere,
    case-insensitively. The lookahead on the words' first letters (same flags, so it admits
    exactly what the words' own first letters would) lets the search skip most positions
    cheaply: ~3x faster on user messages; an ASCII text is never searched for the others."""

    __slots__ = ("cjk", "parts", "spaced")

    def __init__(self, words: tuple[str, ...], cjk: tuple[str, ...]) -> None:
        firsts = "".join(sorted({word[0] for word in words}))
        self.spaced = re.compile(rf"\b(?=[{firsts}])(?:{'|'.join(words)})\b", re.IGNORECASE)
        self.cjk = re.compile("|".join(cjk))
        self.parts = tuple(word for word in words
                           if not any(other != word and other in word for other in words))
        """The words but those holding another one: in an ASCII text (where IGNORECASE is
        ASCII case), the regex matches only if one of them is in the lowercased text."""

    def search(self, text: str) -> bool:
        if text.isascii():
            lowered = text.lower()
            for part in self.parts:  # (a substring test each: ~10x cheaper than the search)
                if part in lowered:
                    return self.spaced.search(text) is not None
            return False
        return self.spaced.search(text) is not None or self.cjk.search(text) is not None


_CONSTRAINT = _Words(_CONSTRAINT_WORDS, _CJK_CONSTRAINT_WORDS)
_GOAL = _Words(_GOAL_WORDS, _CJK_GOAL_WORDS)
_FACT = _Words(_FACT_WORDS, _CJK_FACT_WORDS)
_STATEMENT = _Words(_CONSTRAINT_WORDS + _GOAL_WORDS + _FACT_WORDS,
                    _CJK_CONSTRAINT_WORDS + _CJK_GOAL_WORDS + _CJK_FACT_WORDS)
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
        return _STATEMENT.search(text)
    lowered = text.lower()
    for part in _STATEMENT_PARTS:  # noqa: SIM110 (any() over a generator or map: ~1.7x slower)
        if part in lowered:
            return True
    return False


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])")
_SYSTEM_NOTICE = re.compile(r"^\s*(?:\[[^\]\n]{1,40}\]\s*)?System(?: \(untrusted\))?:",
                            re.IGNORECASE)
"""A host's system notice delivered as a user message (``System: [time] …``)."""
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

    __slots__ = ("assistant", "assistant_at", "failures", "first", "last", "notes", "operations",
                 "tools", "user")

    def __init__(self, first: str, user: str | None) -> None:
        self.first = first
        self.last = first
        self.user = user
        self.assistant = ""
        """The latest assistant text, whitespace not yet collapsed."""
        self.assistant_at = ""
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

    def text(self, bounds: _Bounds) -> str:
        """The turn in one line: the user's message whole when short (else its start and
        end), the assistant's latest reply within the span's bound, the tools it called."""
        parts = [f'user: "{whole_or_ends(self.user, bounds.user)}"'] if self.user else []
        if self.assistant:
            # Its start, in bytes (a long reply is never masked whole for its start alone).
            assistant = clip_collapsed(self.assistant, bounds.assistant)
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


@dataclass(frozen=True, slots=True)
class _Bounds:
    """Characters per turn the span's size allows: a small span carries more of each turn
    (:func:`span_bounds`)."""

    user: int = USER_CHARS
    assistant: int = ASSISTANT_CHARS


def span_bounds(turns: int) -> _Bounds:
    """The bounds for a span of ``turns`` user turns: :data:`SPAN_CHARS` shared among them,
    never under the large-span bounds, never over :data:`MESSAGE_CHARS` a user message and
    :data:`REPLY_CHARS` an assistant reply."""
    share = SPAN_CHARS // max(turns, 1)
    return _Bounds(max(USER_CHARS, min(MESSAGE_CHARS, share)),
                   max(ASSISTANT_CHARS, min(REPLY_CHARS, share // 2)))


# Built per value on the hook's path; not frozen (see OperationEvent).
@dataclass(slots=True)
class _Sighting:
    """Where an exact value was seen, by whom (the weightiest source) and how often."""

    kind: str
    first: str
    last: str
    source: str
    count: int
    order: int
    """When it was last seen (sightings counted over the cycle; an earlier cycle's: below 0)."""
    start: int
    """When it was first seen."""


class _Touched:
    """A file this cycle touched: its first and latest address and every action on it."""

    __slots__ = ("first", "last", "tags")

    def __init__(self, first: str, tags: set[str]) -> None:
        self.first = first
        self.last = first
        self.tags = tags


def _head(text: str, chars: int) -> str:
    """At most the first ``chars`` characters of ``text``, without the run the cut falls in
    (a secret cut short may no longer look like one)."""
    if len(text) <= chars:
        return text
    head = text[:chars]
    return head.rsplit(None, 1)[0] if not text[chars].isspace() else head


def _tail(text: str, chars: int) -> str:
    """At most the last ``chars`` characters of ``text``, without the run the cut falls in."""
    if len(text) <= chars:
        return text
    tail = text[-chars:]
    return tail.split(None, 1)[-1] if not text[-chars - 1].isspace() else tail


def _main_program(command: str) -> tuple[str, ...]:
    """The simple command whose output matters most: the last well-known one (``git``,
    ``ls``, a test run), else the last one (``cd x && git status`` is ``git status``)."""
    found = programs(command)
    for words in found:  # ``cmd /c "…"``, ``bash -lc '…'``: the command inside
        if len(words) >= 3 and words[0] in _SHELLS and words[1] in ("/c", "-c", "-lc", "/C"):
            return _main_program(words[2])
    for words in reversed(found):
        if (words and words[0] in ("git", "ls", "dir", "tree")) or is_check(words):
            return words
    return found[-1] if found else ()


def _alike(kind: Literal["shell", "write"], target: str) -> str:
    """What a failed shell command or file write is about, for resolving it by a later
    success: a command's main program (:func:`_shell_alike`), a write's or an edit's file
    (masked, as error keys are)."""
    if kind == "write":
        return f"write\x00{mask(target)}"
    found = [words for words in programs(mask(target))
             if words and words[0] not in _FILTERS and words[0] != "cd"]
    return _shell_alike(found[-1]) if found else ""


_FILTERS: Final = frozenset({"tail", "head", "grep", "rg", "wc", "sort", "uniq", "cut", "tee",
                             "less", "more", "jq", "sed", "awk", "tr", "xargs", "true"})
"""Programs a chain pipes another's output through: a failed chain is about the last
command of it that is none of these (``mise run test 2>&1 | tail -20``: ``mise run
test``)."""


def _shell_alike(words: tuple[str, ...]) -> str:
    """A simple command by its words, its program by base name, redirections left out
    (:func:`~.work.programs`): ``docker --version`` and ``/usr/local/bin/docker --version
    2>&1`` are alike; ``cd`` is about nothing."""
    if not words or words[0] == "cd":
        return ""
    return "shell\x00" + " ".join((words[0].rsplit("/", 1)[-1], *words[1:]))


def _error_alike(key: str) -> str:
    """:func:`_alike` of an outstanding error's key (``ref\x00target``), ``""`` for an error
    of another kind of call."""
    ref, _, target = key.partition("\x00")
    tool = TOOLS.get(ref)
    if tool is None or not target:
        return ""
    if tool.kind == "shell":
        return _alike("shell", target)
    return _alike("write", target) if tool.kind in ("edit", "write") else ""


# --- one cycle -----------------------------------------------------------------------


class _Cycle:
    """The previous state advanced entry by entry (each entry's view is read once)."""

    def __init__(self, previous: CumulativeState, calls: Mapping[str, ToolCall],
                 bounds: _Bounds | None = None) -> None:
        self.previous = previous
        self.calls = calls
        self.bounds = bounds or _Bounds()
        self.seen: dict[str, _Sighting] = {}
        self.sightings = 0
        """Exact values this cycle, by value (masked when the state is taken)."""
        self.command_runs: dict[str, int] = {}
        """This cycle's runs per shown command (earlier cycles' are in their items' tags)."""
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
        self.like_errors: dict[str, list[str]] | None = None
        """See :meth:`_errors_alike`."""
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
            said = without_host_metadata(blocks_text(view.text, view.blocks))
            text = collapse(said)
            self._close_turn()
            self.turn = _Turn(address, text)
            self.turns += 1
            if text:
                # Only a text with a statement word (or before the goal is known) is read
                # for what the user wrote apart from what they pasted: most texts have none.
                if not self.goal_known or _may_state(text):
                    own = authored(said)
                    own = text if own is said else collapse(own)
                    if own:
                        self._state(address, own)
                self.status["user"] = (address, text)
                self.user_said = said
                system = _SYSTEM_NOTICE.match(said) is not None
                self._facts(address, text, "system" if system else "user")
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
                turn.assistant_at = address
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
                run = shell_run(output if isinstance(output, str) else "", False, exit_code)
                self._command(address, command, message, run)
                if interesting(command):
                    self._shell(address, command, run)
        elif view.type == "branch_summary":
            turn.notes.append("returned from another branch")
        elif view.type == "custom_message":
            kind = view.raw.get("customType")
            turn.notes.append(f"{mask(kind) if isinstance(kind, str) else 'custom'} message")
            if view.text:
                self._facts(address, view.text, "system")

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

    def _close_turn(self, final: bool = False) -> None:
        turn = self.turn
        if turn is None or turn.empty():
            return
        if turn.assistant and (turn.tools or turn.operations or final):
            # The conclusion of a turn that did work (or of the span's last turn): the end of
            # the assistant's latest reply, with the reach a secret's name may have before
            # its value (masked as context). A chat reply alone states no new value.
            self._facts(turn.assistant_at,
                        _tail(turn.assistant, CONCLUSION_CHARS + SIGNATURE_REACH), "assistant")
        turns = self.ledgers["turns"]
        bounds = self.bounds
        if turn.continued:
            prior = turns.pop_last()
            if prior is not None:
                turns.add(Item(prior.first, turn.last, f"{prior.text} | {turn.text(bounds)}"))
            else:
                turns.add(Item(turn.first, turn.last, f"(continued) | {turn.text(bounds)}"))
            return
        first, last = turn.first, turn.last
        turns.add_pending(Pending(first, last, lambda: Item(first, last, turn.text(bounds))))

    def _facts(self, address: str, text: str, source: str) -> None:
        """Note each exact value ``text`` holds as seen at ``address`` by ``source``: read
        from the text masked whole (a value is masked by its context: ``token: …``), which
        is done only when the text holds a value at all (most hold none, and masking adds
        none)."""
        found = facts(text)
        if not found:
            return
        masked = mask(text)
        if masked != text:  # (nearly always equal: the values as read stand)
            found = facts(masked)
        seen = self.seen
        for kind, value in found:
            self._sighting(address, kind, value, source, seen)

    def _sighting(self, address: str, kind: Kind | str, value: str, source: str,
                  seen: dict[str, _Sighting]) -> None:
        order = self.sightings = self.sightings + 1
        found = seen.get(value)
        if found is None:
            seen[value] = _Sighting(kind, address, address, source, 1, order, order)
            return
        found.last = address
        found.count += 1
        found.order = order
        if SOURCE_WEIGHT.get(source, 1) > SOURCE_WEIGHT.get(found.source, 1):
            found.source = source

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
        details = message.get("details")
        exit_code = message.get("exitCode")
        if type(details) is dict:  # a host's structured outcome (OpenClaw: status, exitCode)
            exit_code = details.get("exitCode", exit_code)
            failed = failed or details.get("status") == "error"
        tool = TOOLS.get(name)
        use = tool.use(arguments) if tool is not None else None
        command = use.command if use is not None else None
        interrupted = message.get("interrupted") is True
        output: str | None = None
        if command is not None:
            failed = failed or (type(exit_code) is int and exit_code != 0)
            if not (failed or interesting(command)):  # its output is read only if kept
                self._command(view.id, command, message, None)
                return self._done(name, use, arguments, view.id)
            output = content_text(message.get("content"))
            run = shell_run(output, failed, exit_code)
            failed = failed or run.failed
            self._command(view.id, command, message, run)
            if run.failed and no_match(command, run):
                self.counts["searchesWithoutMatch"] += 1
                return None
            if interesting(command):
                self._shell(view.id, command, run, interrupted)
        if output is None and tool is None:  # a tool the trail does not know: a report?
            output = content_text(message.get("content"))
            if not failed and reports_error(output):
                failed = True
            elif not failed and len(output) <= TOOL_FACT_CHARS:
                self._facts(view.id, output, "tool")
        target = use.target if use is not None and use.target is not None else None
        if target is None:
            target = target_of(arguments)
        if failed or interrupted:
            self._error_facts(view.id, output if output is not None
                              else content_text(message.get("content")))
            key = self._error(OperationEvent(view.id, name, target,
                                             "interrupted" if interrupted else "failed", None,
                                             None, "tool"))
            if command is not None and interesting(command):
                failed_checks = self._failed_checks()
                for check in check_commands(command):
                    failed_checks.setdefault(clip(check, COMMAND_BYTES), []).append(key)
            return None
        return self._done(name, use, arguments, view.id, target)

    def _done(self, name: str, use: Use | None, arguments: Mapping[str, Any], address: str,
              target: str | None = None) -> None:
        """A call that succeeded: the errors it resolves and what it did to files and plans."""
        if target is None:
            target = use.target if use is not None and use.target is not None else None
            if target is None:
                target = target_of(arguments)
        self._resolve_target(name, target)
        if self.error_refs:
            for work in use.files if use is not None else ():
                if work.action != "read":
                    self._resolve_alike(_alike("write", work.path))
            if use is not None and use.command is not None:
                for words in programs(mask(use.command)):  # each command of a chain that ran
                    self._resolve_alike(_shell_alike(words))
        if use is None:
            return
        for work in use.files:
            self._file_work(work, address)
        if use.plan is not None:
            self._plan(use.plan, address)

    def _error_facts(self, address: str, text: str) -> None:
        """A failed result's first error line and the exact values in it."""
        text = mask(_head(text, ERROR_TEXT_CHARS))
        line = first_error_line(text)
        if line:
            self._sighting(address, "error", line, "error", self.seen)
        seen = self.seen
        for kind, value in facts(text):
            self._sighting(address, kind, value, "error", seen)

    def _command(self, address: str, command: str, message: Mapping[str, Any],
                 run: ShellRun | None) -> None:
        """A shell command's latest run under its shown text, with its exit status and what
        it printed that matters (:func:`~.digest.printed`, written only if kept; ``run``:
        None when it succeeded and nothing read its output yet)."""
        key = clip(collapse(command), SHOWN_COMMAND_BYTES)
        commands = self.ledgers["commands"]
        runs = self.command_runs.get(key, 0) + 1
        for item in commands.remove(key):
            if isinstance(item, Item):  # an earlier cycle's latest run, with its count
                tag = item.tags[0] if item.tags else ""
                runs += int(tag.split()[0]) if tag[:1].isdigit() else 1
        self.command_runs[key] = runs

        def write() -> Item:
            done = run or shell_run(content_text(message.get("content")), False)
            output = done.output
            # Masked whole (a value is masked by its context); a huge output by its start.
            output = mask(output if len(output) <= OUTPUT_CHARS else _head(output, OUTPUT_CHARS))
            said = printed(_main_program(command), output, done.failed)
            status = f"exit {done.exit_code}" if done.failed else "ok"
            text = f"`{key}` -> {status}" + (f": {clip(said, PRINTED_BYTES)}" if said else "")
            return Item(address, address, text, key=key,
                        tags=(f"{runs} runs",) if runs > 1 else ())

        commands.add(Pending(address, address, write, key))

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
            digest = content_digest(work.new or "")
            if digest:
                change += f": {clip(digest, DIGEST_BYTES)}"
            # A file's writes are kept apart from its edits: later edits never push out
            # what an earlier version held.
            self.ledgers["changes"].add_latest(
                Item(address, address, f"{shown}: {change}", key=target_key(shown, "written")),
                CHANGES_PER_FILE,
            )
            return
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
        if self.like_errors is not None:
            alike = _error_alike(key)
            if alike:
                self.like_errors.setdefault(alike, []).append(key)
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

    def _errors_alike(self) -> dict[str, list[str]]:
        """What an outstanding error of a shell command or a file write is about
        (:func:`_alike`) → the keys of those errors: a later success of the same command by
        another path, or a later write of the same file, resolves them. Built from the
        state's errors on first use, then kept up to date by :meth:`_error`."""
        if self.like_errors is None:
            found: dict[str, list[str]] = {}
            for key in self.ledgers["errors"].keys:
                alike = _error_alike(key)
                if alike:
                    found.setdefault(alike, []).append(key)
            self.like_errors = found
        return self.like_errors

    def _resolve_alike(self, alike: str) -> None:
        if alike:
            errors = self.ledgers["errors"]
            for key in self._errors_alike().pop(alike, ()):
                self.resolved += len(errors.remove(key))

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
        self._close_turn(final=True)
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
        ledgers = {name: self.ledgers[name].settle(CAPS[name]) for name in LEDGERS}
        ledgers["identifiers"] = self._identifiers(ledgers["files"])
        return CumulativeState(
            coverage,
            {key: value for key, value in sorted(counts.items()) if value},
            tuple(status[role] for role in ("user", "assistant") if role in status),
            ledgers,
        )

    def _identifiers(self, files: Ledger) -> Ledger:
        """The exact values of every cycle so far, ranked (:func:`~.facts.rank`), the best
        within the ledger's bytes, best first; a path the files section lists is left out.
        Each item is ``kind: `value``` keyed by the value (masked already: values are read
        from masked texts), tagged with who said it and, when more than once, how many
        times."""
        previous = self.previous.ledgers["identifiers"]
        if not self.seen:
            return previous
        known = {item.key for item in files.items}
        merged: dict[str, _Sighting] = {}
        for at, item in enumerate(previous.items):
            kind, _, _ = item.text.partition(": ")
            source = item.tags[0] if item.tags else "assistant"
            count = int(item.tags[1].split()[1]) if len(item.tags) > 1 else 1
            merged[item.key] = _Sighting(kind, item.first, item.last, source, count,
                                         at - len(previous.items), at - len(previous.items))
        for key, seen in self.seen.items():
            if seen.kind == "path" and key in known:
                continue
            earlier = merged.get(key)
            if earlier is None:
                merged[key] = seen  # (this cycle's own: nothing else reads it)
                continue
            earlier.last, earlier.order = seen.last, seen.order
            earlier.count += seen.count
            if SOURCE_WEIGHT.get(seen.source, 1) > SOURCE_WEIGHT.get(earlier.source, 1):
                earlier.source = seen.source
        total = max(self.sightings, 1)
        ranked = sorted(merged.items(), reverse=True, key=lambda pair: rank(
            pair[1].source, pair[1].count, max(pair[1].order, 0), total))
        kept: list[Item] = []
        room = CAPS["identifiers"].head
        for at, (key, seen) in enumerate(ranked):
            times = (f"seen {seen.count} times",) if seen.count > 1 else ()
            item = Item(seen.first, seen.last, f"{seen.kind}: `{bounded(key, ERROR_BYTES)}`",
                        key, (seen.source, *times))
            if item.weight > room:
                # The gap is bounded in source order (the items are in rank order).
                rest = [seen for _, seen in ranked[at:]]
                first = min(rest, key=lambda seen: seen.start).first
                last = max(rest, key=lambda seen: seen.order).last
                return Ledger(tuple(kept), (), previous.dropped + len(rest),
                              previous.dropped_first or first, last)
            room -= item.weight
            kept.append(item)
        return Ledger(tuple(kept), (), previous.dropped, previous.dropped_first,
                      previous.dropped_last)


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
    kept = branch[safe].id if safe < len(branch) else ""
    summarized = summarize_span(branch[resume:safe], previous, calls=calls, kept=kept)
    state, live = summarized.state, summarized.live
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


@dataclass(frozen=True, slots=True)
class SpanState:
    """What :func:`summarize_span` made of a span: the cumulative state (the ledgers every
    rendering lays out) and what the span itself added (``live``)."""

    state: CumulativeState
    live: LiveRange


def summarize_span(
    span: Sequence[EntryView],
    previous: CumulativeState | None = None,
    *,
    calls: Mapping[str, ToolCall] | None = None,
    kept: str = "",
) -> SpanState:
    """The one summary engine: ``span`` (entry views in order, of any agent; an agent's own
    compaction entries are passed over) streamed once into the ledgers, on top of
    ``previous`` (an earlier compaction's state; none: from nothing). ``calls``: the tool
    calls by id (default: those of ``span``); ``kept``: the first entry after the span that
    stays verbatim (``""``: none). Pi's summary (:func:`compact_branch`), the handoff packet
    and a span summary of any session (:mod:`.span`) are renderings of its result."""
    if calls is None:
        calls = index_tool_calls(span)
    with masking_once():
        users = sum(1 for view in span if view.role == "user")
        cycle = _Cycle(previous or CumulativeState(), calls, span_bounds(users))
        for view in span:
            cycle.add(view)
        state = cycle.state()
    return SpanState(state, LiveRange(cycle.first, cycle.last, cycle.entries, kept))
