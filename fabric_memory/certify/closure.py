"""The six closure fixtures: sessions where a cut could separate a tool call from its result.

Each fixture is written with :class:`~fabric_memory.certify.generate.SessionBuilder`,
prepared as Pi prepares it (with the ``keepRecentTokens`` that makes Pi ask for
the fixture's cut), compacted through the hook, persisted and read back. The
check is on the file as read back: the built context holds every tool call with
its result, equals the context of the retained entries alone, and every
``firstKeptEntryId`` is on the active branch.

- ``normal``: a plain cut at a turn start.
- ``compact-all``: the preparation says ``firstKeptEntryId: ""`` (keep nothing).
- ``split-turn``: Pi cuts inside a turn (``isSplitTurn``).
- ``parallel-delayed``: two parallel calls; one result arrives after a bash
  execution that Pi takes as the cut, so Pi's cut separates that call from its result.
- ``reverse-order``: results in reverse order around a custom message Pi cuts at.
- ``malformed-prior-boundary``: a foreign earlier compaction whose kept boundary
  already separates a call from its result; the hook must rebuild from the branch.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson

from ..compaction.prepare import CompactionSettings, prepare_compaction
from ..session import Entry, read_session
from .cycle import (
    POISON,
    SETTINGS,
    Hook,
    call_hook,
    closure_problems,
    first_kept_problems,
    persist,
    retained_context_problems,
    round_trip_problems,
    splits_pair_at,
)
from .generate import EPOCH_MS, SessionBuilder
from .report import Check

MAX_KEEP_TOKENS: Final = 512
"""The search for the ``keepRecentTokens`` that makes Pi ask for a fixture's cut stops here."""


@dataclass(slots=True)
class ClosureFixture:
    """A closure session and what Pi's preparation must ask for on it."""

    name: str
    builder: SessionBuilder
    target: str | None = None
    """The entry Pi's preparation must name as first kept (None: keep 1 token)."""
    split_turn: bool = False
    splits_pair: bool = False
    """Whether the cut Pi asks for separates a call from its result (the hook must move it)."""
    overrides: dict[str, Any] = field(default_factory=dict)
    rebuilt_from: str | None = None
    """The first branch entry the details must cover when the previous compaction is foreign
    (its kept boundary already separates a call from its result before the hook runs)."""


def _builder(name: str, seed: int | str) -> SessionBuilder:
    builder = SessionBuilder(random.Random(f"{seed}:closure:{name}"), cwd="/home/dev/closure",
                             start_ms=EPOCH_MS, flavour="pi")
    builder.model_change()
    return builder


def _read_turn(builder: SessionBuilder, goal: str) -> None:
    builder.user(goal)
    call = builder.tool_call("read", {"path": "src/lexer.ts"})
    builder.assistant("Reading the lexer.", calls=[call])
    builder.tool_result(call, "export const lex = (s) => s.split(',');\n")
    builder.assistant("The lexer splits on commas.")


def _normal(seed: int | str) -> ClosureFixture:
    builder = _builder("normal", seed)
    _read_turn(builder, "GOAL_closure_normal: tidy the lexer. Never touch vendor/.")
    target = builder.user("Now tidy the README.")
    builder.assistant("Tidied the README.")
    return ClosureFixture("normal", builder, target=target)


def _compact_all(seed: int | str) -> ClosureFixture:
    builder = _builder("compact-all", seed)
    _read_turn(builder, "GOAL_closure_all: summarize everything. Never keep raw logs.")
    builder.user("Compact everything now.")
    builder.assistant("Ready.")
    return ClosureFixture("compact-all", builder, overrides={"firstKeptEntryId": ""})


def _split_turn(seed: int | str) -> ClosureFixture:
    builder = _builder("split-turn", seed)
    builder.user("GOAL_closure_split: fix the parser. Never modify src/legacy/compat.ts.")
    first = builder.tool_call("read", {"path": "src/parser.ts"})
    builder.assistant("Reading the parser.", calls=[first])
    builder.tool_result(first, "export function parse() {}\n")
    second = builder.tool_call("edit", {"path": "src/parser.ts",
                                        "edits": [{"oldText": "a,", "newText": "a"}]})
    target = builder.assistant("Editing the parser.", calls=[second])
    builder.tool_result(second, "Successfully replaced text in src/parser.ts.")
    builder.assistant("The parser accepts trailing commas now.")
    return ClosureFixture("split-turn", builder, target=target, split_turn=True)


def _bash_execution(builder: SessionBuilder) -> str:
    builder.tick(1_000, 5_000)
    return builder.append_entry("message", {"message": {
        "role": "bashExecution", "command": "git status --short", "output": " M src/parser.ts",
        "exitCode": 0, "cancelled": False, "truncated": False, "timestamp": builder.clock_ms,
    }})


def _custom_message(builder: SessionBuilder) -> str:
    builder.tick(1_000, 5_000)
    return builder.append_entry("custom_message", {
        "customType": "cert-note", "content": "Comparing the results.", "display": True,
    })


ToolStep = tuple[str, dict[str, Any], str]
"""(tool name, arguments, result text)."""


def _parallel_pair(
    name: str, seed: int | str, goal: str, steps: tuple[ToolStep, ToolStep], *,
    reverse: bool, between: Callable[[SessionBuilder], str],
) -> ClosureFixture:
    """Two parallel calls whose results come back (in order, or reversed) on either side of
    an entry Pi takes as its cut: that cut separates the later call from its result."""
    builder = _builder(name, seed)
    builder.user(goal)
    calls = [builder.tool_call(tool, arguments) for tool, arguments, _ in steps]
    builder.assistant("Running both in parallel.", calls=calls)
    first, second = (1, 0) if reverse else (0, 1)
    builder.tool_result(calls[first], steps[first][2])
    target = between(builder)
    builder.tool_result(calls[second], steps[second][2], delay=(60_000, 120_000))
    builder.assistant("Both finished.")
    builder.user("Now summarize what changed.")
    builder.assistant("Summarized.")
    return ClosureFixture(name, builder, target=target, splits_pair=True)


def _parallel_delayed(seed: int | str) -> ClosureFixture:
    return _parallel_pair(
        "parallel-delayed", seed,
        "GOAL_closure_parallel: make the build green. Never touch vendor/.",
        (("bash", {"command": "npm run build"}, "build ok"),
         ("bash", {"command": "npm test"}, "✓ 12 tests passed")),
        reverse=False, between=_bash_execution,
    )


def _reverse_order(seed: int | str) -> ClosureFixture:
    return _parallel_pair(
        "reverse-order", seed,
        "GOAL_closure_reverse: compare the two configs. Do not edit either.",
        (("read", {"path": "config/a.json"}, '{"a": 1}'),
         ("read", {"path": "config/b.json"}, '{"b": 2}')),
        reverse=True, between=_custom_message,
    )


def _malformed_prior_boundary(seed: int | str) -> ClosureFixture:
    builder = _builder("malformed-prior-boundary", seed)
    first_entry = builder.entry_ids[0]
    _read_turn(builder, "GOAL_closure_boundary: fix the lexer. Never modify "
                        "src/legacy/compat.ts.")
    builder.user("Apply the fix.")
    edit = builder.tool_call("edit", {"path": "src/lexer.ts",
                                      "edits": [{"oldText": "','", "newText": "/,\\s*/"}]})
    builder.assistant("Editing the lexer.", calls=[edit])
    orphan = builder.tool_result(edit, "Successfully replaced text in src/lexer.ts.")
    # Another extension's compaction kept the edit's result without its call.
    builder.compaction(f"## Goal\nFix the lexer.\n{POISON}prior (never copy this)", orphan, 180,
                       details={"readFiles": ["src/lexer.ts"], "modifiedFiles": []},
                       from_hook=False)
    builder.user("Run the tests.")
    test = builder.tool_call("bash", {"command": "npm test"})
    target = builder.assistant("Running the tests.", calls=[test])
    builder.tool_result(test, "✓ 9 tests passed")
    builder.assistant("The tests pass.")
    return ClosureFixture("malformed-prior-boundary", builder, target=target, split_turn=True,
                          rebuilt_from=first_entry)


FIXTURES: Final[tuple[Callable[[int | str], ClosureFixture], ...]] = (
    _normal, _compact_all, _split_turn, _parallel_delayed, _reverse_order,
    _malformed_prior_boundary,
)


def settings_for(branch: list[Entry], fixture: ClosureFixture) -> CompactionSettings | None:
    """The settings under which Pi asks for the fixture's cut (and split-turn flag)."""
    if fixture.target is None:
        return SETTINGS
    for keep in range(1, MAX_KEEP_TOKENS):
        settings = CompactionSettings(True, SETTINGS.reserve_tokens, keep)
        prepared = prepare_compaction(branch, settings)
        if prepared is None:
            break
        if (prepared.first_kept_entry_id == fixture.target
                and prepared.is_split_turn == fixture.split_turn):
            return settings
    return None


def run_closure(root: Path, *, seed: int | str, hook: Hook) -> tuple[Check, ...]:
    """Run every closure fixture once; one check per fixture."""
    return tuple(_run(factory(seed), root, hook) for factory in FIXTURES)


def _run(fixture: ClosureFixture, root: Path, hook: Hook) -> Check:
    path = root / f"{fixture.name}.jsonl"
    fixture.builder.write(path)
    session = read_session(path)
    branch = session.active_branch()
    check_id = f"closure.{fixture.name}"
    threshold = {"closure": True, "contextEquivalent": True,
                 "requestedSplitsPair": fixture.splits_pair}
    settings = settings_for(branch, fixture)
    if settings is None:
        return Check(check_id, False, {}, threshold, (
            f"no keepRecentTokens below {MAX_KEEP_TOKENS} makes Pi ask for a cut at "
            f"{fixture.target} (isSplitTurn {fixture.split_turn})",))
    called = call_hook(hook, session, settings=settings, overrides=fixture.overrides)
    if isinstance(called, str) or called.compacted is None:
        reason = called if isinstance(called, str) else called.problem or "no compaction"
        return Check(check_id, False, {}, threshold, (reason,))
    compacted = called.compacted
    requested = str(called.event_preparation["firstKeptEntryId"])
    ids = [entry.id for entry in branch]
    requested_at = ids.index(requested) if requested in ids else len(ids)
    measured: dict[str, Any] = {
        "keepRecentTokens": settings.keep_recent_tokens,
        "isSplitTurn": called.preparation.is_split_turn,
        "requested": requested,
        "requestedSplitsPair": splits_pair_at(branch, requested_at),
        "kept": compacted.first_kept_entry_id,
    }
    problems = []
    if fixture.rebuilt_from is not None:
        measured["priorBoundaryProblems"] = len(closure_problems(session))
        if not measured["priorBoundaryProblems"]:
            problems.append("the prior compaction's boundary was expected to be malformed")
    if measured["requestedSplitsPair"] != fixture.splits_pair:
        problems.append(f"Pi's cut at {requested!r} was expected to "
                        f"{'' if fixture.splits_pair else 'not '}separate a call from its result")
    if fixture.overrides.get("firstKeptEntryId") == "" and compacted.first_kept_entry_id != "":
        problems.append(f"asked to keep nothing, the hook kept {compacted.first_kept_entry_id!r}")
    problems.extend(_output_problems(fixture, compacted.summary, compacted.details))
    entry_id, stored = persist(fixture.builder, path, compacted, "")
    after = read_session(path)
    problems += closure_problems(after) + retained_context_problems(after)
    problems += first_kept_problems(after) + round_trip_problems(after, entry_id, stored, compacted)
    return Check(check_id, not problems, measured, threshold, tuple(problems))


def _output_problems(
    fixture: ClosureFixture, summary: str, details: Mapping[str, Any]
) -> list[str]:
    problems = []
    if POISON in summary + orjson.dumps(details).decode():
        problems.append("the output holds the previous summary's poison")
    if fixture.rebuilt_from is not None:
        coverage = details.get("coverage")
        source = coverage.get("source") if isinstance(coverage, Mapping) else None
        first = source.get("first") if isinstance(source, Mapping) else None
        if first != fixture.rebuilt_from:
            problems.append(f"coverage starts at {first!r}, not at the branch start "
                            f"{fixture.rebuilt_from!r}: the foreign compaction was not rebuilt")
    return problems
