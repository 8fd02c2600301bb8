"""Endurance: N compaction cycles on one growing session, and the maximal rich source.

:class:`EnduranceScript` writes the session one turn at a time through
:class:`~fabric_memory.certify.generate.SessionBuilder` and remembers, for every
Fabric operation and tool call it wrote, its address, its target and whether it
succeeded. From that record alone (never from the compactor) the harness knows
which files and which unresolved errors every compaction must still address.

Each cycle runs the host's path (:mod:`fabric_memory.certify.cycle`) and checks
every per-cycle property of docs/certification.md#checks; the summary sizes then give
the steady-state bounds, and one compaction of
:func:`~fabric_memory.certify.generate.rich_session` gives the saturation bound.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson

from ..compaction.render import SUMMARY_MAX_BYTES
from ..errors import CertificationError
from ..session import Session, read_session
from .cycle import (
    POISON,
    Compacted,
    Hook,
    HookCall,
    call_hook,
    closure_problems,
    first_kept_problems,
    persist,
    retained_context_problems,
    round_trip_problems,
    summarized_ids,
)
from .generate import (
    EPOCH_MS,
    FAILURE_STAGES,
    OperationSpec,
    SessionBuilder,
    encoded_cwd,
    phase_operations,
    rich_session,
    session_file_name,
)
from .report import Check, Problems

STEADY_WINDOW: Final = 20
STEADY_RANGE_BYTES: Final = 512
STEADY_SLOPE_BYTES: Final = 16.0
RICH_MIN_BYTES: Final = 24 * 1024
START_MS: Final = EPOCH_MS + 60 * 86_400_000
"""The endurance session starts after every corpus session: it is among the newest."""
CWD: Final = "/home/dev/endurance-zürich"

PATHS: Final = (
    "src/parser.ts", "src/lexer.ts", "src/net/client.ts", "README.md", "docs/説明.md",
    "src/Überarbeitung/größe.rs", "tests/тест_parser.py", "src/東京/設定.ts", "package.json",
    "src/ast/nodes.ts",
)
COMMANDS: Final = ("pnpm test -- --run", "npm run build", "cargo check")
TOPICS: Final = ("build/alpha", "build/東京")
FILE_REFS: Final = frozenset({"pi.read", "pi.edit", "pi.write"})
PHASE_NAMES: Final = ("Plan", "Implement", "Verify", "Prüfung")

ProgressCallback = Callable[[str, int, int], None]


# --- the session script ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Written:
    """One operation or tool result as written: where it is and what it did."""

    entry_id: str
    address: str
    key: tuple[str, str]
    """(ref or tool name, target): what a later success on the same target resolves."""
    succeeded: bool
    path: str | None
    """The file a successful read/edit/write touched."""


@dataclass(slots=True)
class EnduranceScript:
    """The endurance session: a goal, a constraint and a pinned Unicode fact, then turns
    of parallel Fabric programs (phases A→B→A, file operations, failures with stages,
    results in either order) and plain bash calls that sometimes fail."""

    builder: SessionBuilder
    goal: str
    constraint: str
    fact: str
    written: list[Written] = field(default_factory=list)

    @classmethod
    def start(cls, seed: int | str) -> EnduranceScript:
        rng = random.Random(f"{seed}:endurance")
        builder = SessionBuilder(rng, cwd=CWD, start_ms=START_MS, flavour="pi")
        tag = f"{rng.getrandbits(24):06x}"
        script = cls(
            builder,
            goal=f"GOAL_{tag}: make the parser accept trailing commas in nested arrays",
            constraint=f"CONSTRAINT_{tag}: never modify src/legacy/compat.ts",
            fact=f"CERT_PIN_{tag} — Zürich→東京 ✓ Größe: the staging port is 26077",
        )
        builder.model_change()
        builder.thinking_level_change("medium")
        builder.user(f"{script.goal}. {script.constraint}. Keep the public API stable.")
        builder.assistant("Understood. I will keep the public API stable.")
        builder.user(f"Please remember this exactly: {script.fact}")
        builder.assistant("Noted; I will keep that exactly.")
        return script

    def file_name(self, root: Path) -> Path:
        return root / encoded_cwd(CWD) / session_file_name(START_MS, self.builder.session_id)

    def turn(self, cycle: int) -> None:
        builder = self.builder
        rng = builder.rng
        builder.user(f"Turn {cycle}: continue with step {cycle} of the parser work and report "
                     "what changed.")
        programs = [self._operations(cycle, part) for part in range(2)]
        calls = [builder.fabric_call([spec for spec, _ in program]) for program in programs]
        builder.assistant(f"Step {cycle}: two programs in parallel.", calls=calls,
                          thinking=f"Step {cycle}: read first, then edit.")
        order = list(zip(calls, programs, strict=True))
        if rng.random() < 0.5:
            order.reverse()  # parallel results come back in either order
        for call, program in order:
            entry_id = builder.fabric_result(call, delay=(500, 60_000))
            written = builder.operations[len(builder.operations) - len(program):]
            for (spec, target), operation in zip(program, written, strict=True):
                if operation.ref != spec.ref:
                    raise CertificationError(f"endurance entry {entry_id}: wrote {operation.ref} "
                                             f"where the script planned {spec.ref}")
                if spec.ref == "fabric.workflow.phase":
                    continue  # phases always succeed and no failure shares their target
                succeeded = operation.outcome == "succeeded"
                path = target if succeeded and spec.ref in FILE_REFS else None
                self.written.append(
                    Written(entry_id, operation.address, (spec.ref, target), succeeded, path)
                )
        builder.assistant(f"Step {cycle} done: the parser handles case {cycle}.")
        # A second, shorter turn: one plain bash check that sometimes fails.
        command = COMMANDS[cycle % len(COMMANDS)]
        builder.user(f"Turn {cycle}b: run {command} and tell me the result.")
        call = builder.tool_call("bash", {"command": command, "timeout": 120})
        builder.assistant(f"Running {command}.", calls=[call])
        failed = rng.random() < 0.3
        text = f"Error: {command} exited with code 1" if failed else "✓ all tests passed"
        entry_id = builder.tool_result(call, text, is_error=failed)
        self.written.append(Written(entry_id, entry_id, ("bash", command), not failed, None))
        builder.assistant(f"{command}: {'failed, see above' if failed else 'green'}.")

    def _operations(self, cycle: int, part: int) -> list[tuple[OperationSpec, str]]:
        rng = self.builder.rng
        body: list[tuple[OperationSpec, str]] = []
        for index in range(4):
            ref, args, target = self._call(rng, cycle * 8 + part * 4 + index)
            roll = rng.random()
            if roll < 0.18:
                spec = OperationSpec(ref, args, "failed", rng.choice(FAILURE_STAGES))
            elif roll < 0.22:
                spec = OperationSpec(ref, args, "timed_out")
            else:
                spec = OperationSpec(ref, args, created=ref == "pi.write" and roll > 0.8)
            body.append((spec, target))
        first, second = rng.sample(PHASE_NAMES, 2)
        a, b, c = ((spec, "") for spec in phase_operations((first, second, first)))
        return [a, *body[:2], b, *body[2:], c]

    @staticmethod
    def _call(rng: random.Random, slot: int) -> tuple[str, dict[str, Any], str]:
        kind = slot % 6
        path = PATHS[rng.randrange(len(PATHS))]
        if kind == 0:
            return "pi.read", {"path": path, "offset": 1, "limit": 80}, path
        if kind == 1:
            return "pi.edit", {"path": path, "edits": [{"oldText": "a,", "newText": "a"}]}, path
        if kind == 2:
            return "pi.write", {"path": path, "content": "export {};\n"}, path
        if kind == 3:
            return "pi.grep", {"path": path, "pattern": "TODO", "context": 2}, path
        if kind == 4:
            command = COMMANDS[rng.randrange(len(COMMANDS))]
            return "pi.bash", {"command": command, "timeout": 120}, command
        topic = TOPICS[rng.randrange(len(TOPICS))]
        return "mesh.publish", {"topic": topic, "text": "build finished"}, topic

    def expected_files(self, summarized: set[str]) -> dict[str, tuple[str, str]]:
        """Every file a summarized operation touched: its first and latest address."""
        files: dict[str, tuple[str, str]] = {}
        for item in self.written:
            if item.path is not None and item.entry_id in summarized:
                first = files[item.path][0] if item.path in files else item.address
                files[item.path] = (first, item.address)
        return files

    def expected_errors(self, summarized: set[str]) -> list[str]:
        """Addresses of summarized failures no later summarized success on the same
        target resolved, in source order."""
        open_failures: dict[tuple[str, str], list[str]] = {}
        for item in self.written:
            if item.entry_id not in summarized:
                continue
            if item.succeeded:
                open_failures.pop(item.key, None)
            else:
                open_failures.setdefault(item.key, []).append(item.address)
        order = {item.address: i for i, item in enumerate(self.written)}
        return sorted((a for group in open_failures.values() for a in group), key=order.__getitem__)


# --- addresses the compactor emitted --------------------------------------------------

_LINE = re.compile(r"^- \[([^\]\s]+)(?: \.\.\. ([^\]\s]+))?\]", re.MULTILINE)
_OMITTED = re.compile(r"omitted here \[([^\]\s]+)(?: \.\.\. ([^\]\s]+))?\]")
_RANGE = re.compile(r"(?:entries|added) \[([^\]\s]+)\] \.\.\. \[([^\]\s]+)\]")
_EXPAND_HINT = re.compile(r"--address ([^\s`]+)`")


def summary_addresses(summary: str) -> set[str]:
    """Every address the summary text names (item lines, omissions, ranges, hints)."""
    found: set[str] = set()
    for pattern in (_LINE, _OMITTED, _RANGE):
        for match in pattern.finditer(summary):
            found.update(group for group in match.groups() if group)
    found.update(_EXPAND_HINT.findall(summary))
    found.discard("<address>")
    return found


def details_addresses(details: Mapping[str, Any]) -> set[str]:
    """Every address the details name: the address list, coverage, section bounds, and
    each item and gap bound of the carried state."""
    found: set[str] = set(_strings(details.get("addresses")))
    coverage = details.get("coverage")
    if isinstance(coverage, Mapping):
        for part in ("source", "live"):
            bounds = coverage.get(part)
            if isinstance(bounds, Mapping):
                for key in ("first", "last", "firstKeptEntryId"):
                    found.update(_strings([bounds.get(key)]))
    for section in details.get("sections") or ():
        if isinstance(section, Mapping):
            found.update(_strings([section.get("omittedFirst"), section.get("omittedLast")]))
    state = details.get("state")
    if isinstance(state, Mapping):
        found.update(_item_addresses(state.get("status")))
        ledgers = state.get("ledgers")
        for ledger in ledgers.values() if isinstance(ledgers, Mapping) else ():
            if isinstance(ledger, Mapping):
                found.update(_item_addresses(ledger.get("head")))
                found.update(_item_addresses(ledger.get("tail")))
                found.update(_strings([ledger.get("droppedFirst"), ledger.get("droppedLast")]))
    return found


def _strings(values: Any) -> Iterator[str]:
    for value in values if isinstance(values, list | tuple) else ():
        if isinstance(value, str) and value:
            yield value


def _item_addresses(items: Any) -> Iterator[str]:
    """``[address, text]`` items name one address; longer items name first and last."""
    for item in items if isinstance(items, list) else ():
        if isinstance(item, list) and len(item) >= 2:
            yield from _strings(item[:1] if len(item) == 2 else item[:2])


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def ledger_items(details: Mapping[str, Any], name: str) -> tuple[list[list[Any]], int] | None:
    """The items and dropped count of one ledger of the carried state (None if absent)."""
    state = details.get("state")
    ledgers = state.get("ledgers") if isinstance(state, Mapping) else None
    ledger = ledgers.get(name) if isinstance(ledgers, Mapping) else None
    if not isinstance(ledger, Mapping):
        return None
    items = [
        item
        for part in ("head", "tail")
        for item in _list(ledger.get(part))
        if isinstance(item, list) and len(item) >= 2
    ]
    dropped = ledger.get("dropped")
    return items, dropped if type(dropped) is int else -1


# --- the run ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EnduranceResult:
    """The endurance run: its checks, the summary sizes, every address it emitted."""

    checks: tuple[Check, ...]
    path: Path
    session_id: str
    sizes: tuple[int, ...]
    emitted: frozenset[str]
    entries: int
    file_bytes: int


@dataclass(slots=True)
class _Tally:
    """Per-cycle verdicts gathered over the run."""

    problems: Problems = field(default_factory=Problems)
    compacted: int = 0
    prepared: int = 0
    exposed: int = 0
    reads: int = 0
    leaks: int = 0
    sizes: list[int] = field(default_factory=list)
    emitted: set[str] = field(default_factory=set)
    stored: list[tuple[str, str, Compacted]] = field(default_factory=list)
    """(entry id, summary as stored, compaction) of every persisted compaction."""


def run_endurance(
    root: Path,
    *,
    cycles: int,
    seed: int | str,
    hook: Hook,
    progress: ProgressCallback | None = None,
) -> EnduranceResult:
    """Run exactly ``cycles`` compactions on one session written under ``root``."""
    script = EnduranceScript.start(seed)
    path = script.file_name(root)
    script.builder.write(path)
    tally = _Tally()
    for cycle in range(cycles):
        script.turn(cycle)
        script.builder.append(path)
        session = read_session(path)
        if tally.stored:
            # After each later append the context still equals that of the retained entries.
            tally.problems.add("endurance.context_equivalence",
                               _at(cycle, retained_context_problems(session)))
        _cycle(script, path, session, cycle, hook, tally)
        if progress is not None:
            progress("endurance cycle", cycle + 1, cycles)
    final = read_session(path)
    for entry_id, stored, compacted in tally.stored:
        tally.problems.add("endurance.round_trip",
                           _at(cycles, round_trip_problems(final, entry_id, stored, compacted)))
    return EnduranceResult(
        checks=_checks(tally, cycles),
        path=path,
        session_id=script.builder.session_id,
        sizes=tuple(tally.sizes),
        emitted=frozenset(tally.emitted),
        entries=len(final.entries),
        file_bytes=final.size,
    )


def _at(cycle: int, messages: Sequence[str]) -> list[str]:
    return [f"cycle {cycle}: {message}" for message in messages]


def _cycle(
    script: EnduranceScript, path: Path, session: Session, cycle: int, hook: Hook, tally: _Tally
) -> None:
    problems = tally.problems
    called = call_hook(hook, session)
    if isinstance(called, str):
        problems.add("endurance.preparation", _at(cycle, [called]))
        return
    tally.prepared += 1
    if not called.should_compact:
        problems.add("endurance.preparation", _at(cycle, [
            f"shouldCompact is false at {called.context_tokens} context tokens"]))
    _check_previous_summary(called, cycle, tally)
    compacted = called.compacted
    if compacted is None:
        problems.add("endurance.cycles", _at(cycle, [called.problem or "no compaction"]))
        return
    emitted = compacted.summary + _json_text(compacted.details)
    leaked = POISON in emitted
    tally.leaks += leaked
    problems.add("endurance.poison_absent", _at(cycle, [
        f"the output holds {POISON}<cycle> from an earlier summary"] if leaked else []))
    _check_pinned(script, compacted, cycle, problems)
    data = compacted.summary.encode("utf-8", errors="surrogatepass")
    tally.sizes.append(len(data))
    problems.add("size.summary_max", _at(cycle, _size_problems(data)))
    tally.emitted |= summary_addresses(compacted.summary) | details_addresses(compacted.details)
    entry_id, stored = persist(script.builder, path, compacted, f"\n\n{POISON}{cycle}")
    tally.compacted += 1
    tally.stored.append((entry_id, stored, compacted))
    after = read_session(path)
    problems.add("endurance.round_trip",
                 _at(cycle, round_trip_problems(after, entry_id, stored, compacted)))
    problems.add("endurance.first_kept_on_branch", _at(cycle, first_kept_problems(after)))
    problems.add("endurance.closure", _at(cycle, closure_problems(after)))
    problems.add("endurance.context_equivalence", _at(cycle, retained_context_problems(after)))
    _check_cumulative(script, after, compacted, cycle, problems)


def _json_text(value: Any) -> str:
    return orjson.dumps(value).decode()


def _check_previous_summary(called: HookCall, cycle: int, tally: _Tally) -> None:
    problems = tally.problems
    if tally.stored:
        offered = called.event_preparation.get("previousSummary")
        if offered == tally.stored[-1][1]:
            tally.exposed += 1
        else:
            problems.add("endurance.previous_summary_exposed", _at(cycle, [
                "the preparation does not carry the exact stored previous summary"]))
    if called.read_previous_summary:
        tally.reads += 1
        problems.add("endurance.previous_summary_unread", _at(cycle, [
            "the hook read preparation.previousSummary"]))


def _check_pinned(
    script: EnduranceScript, compacted: Compacted, cycle: int, problems: Problems
) -> None:
    lost = [
        f"lost the {name} {text!r}"
        for name, text in (("goal", script.goal), ("constraint", script.constraint),
                           ("rare fact", script.fact))
        if text not in compacted.summary
    ]
    problems.add("endurance.pinned", _at(cycle, lost))


def _size_problems(data: bytes) -> list[str]:
    problems = []
    if len(data) > SUMMARY_MAX_BYTES:
        problems.append(f"summary is {len(data)} bytes (limit {SUMMARY_MAX_BYTES})")
    try:
        data.decode("utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        problems.append(f"summary is not valid UTF-8 at byte {exc.start}")
    return problems


def _check_cumulative(
    script: EnduranceScript, after: Session, compacted: Compacted, cycle: int, problems: Problems
) -> None:
    """Coverage, files and unresolved errors of the details against what was written."""
    branch = after.active_branch()
    summarized = summarized_ids(branch)
    details = compacted.details
    first = next((entry.id for entry in branch if entry.type != "compaction"), None)
    wanted = {"first": first, "last": summarized[-1] if summarized else None,
              "entries": len(summarized)}
    coverage = details.get("coverage")
    source = coverage.get("source") if isinstance(coverage, Mapping) else None
    got = {key: source.get(key) for key in wanted} if isinstance(source, Mapping) else None
    problems.add("endurance.source_range", _at(cycle, [] if got == wanted else [
        f"coverage.source is {got}, the summarized entries give {wanted}"]))
    covered = set(summarized)
    problems.add("endurance.file_addresses", _at(cycle, _file_problems(
        script.expected_files(covered), details, compacted.summary)))
    problems.add("endurance.error_addresses", _at(cycle, _error_problems(
        script.expected_errors(covered), details, compacted.summary)))


def _file_problems(
    expected: dict[str, tuple[str, str]], details: Mapping[str, Any], summary: str
) -> list[str]:
    ledger = ledger_items(details, "files")
    if ledger is None:
        return ["details.state.ledgers.files is missing"]
    items, dropped = ledger
    got = {
        str(item[3]): (str(item[0]), str(item[1]))
        for item in items
        if len(item) == 5 and isinstance(item[3], str)
    }
    problems = [] if dropped == 0 else [f"the files ledger dropped {dropped} items"]
    for path, (first, last) in expected.items():
        if got.get(path) != (first, last):
            problems.append(f"file {path}: details hold {got.get(path)}, expected {(first, last)}")
        elif f"[{first}" not in summary or last not in summary:
            problems.append(f"file {path}: the summary does not name [{first} ... {last}]")
    problems.extend(f"file {path}: addressed but never touched"
                    for path in sorted(set(got) - set(expected)))
    return problems


def _error_problems(expected: list[str], details: Mapping[str, Any], summary: str) -> list[str]:
    ledger = ledger_items(details, "errors")
    if ledger is None:
        return ["details.state.ledgers.errors is missing"]
    items, dropped = ledger
    got = [str(item[0]) for item in items]
    problems = [] if dropped == 0 else [f"the errors ledger dropped {dropped} items"]
    if got != expected:
        missing = [a for a in expected if a not in got]
        extra = [a for a in got if a not in expected]
        problems.append(f"outstanding errors differ: missing {missing[:5]}, extra {extra[:5]}")
    problems.extend(f"outstanding error {a} is not in the summary" for a in expected
                    if f"[{a}]" not in summary)
    counts = details.get("counts")
    outstanding = counts.get("outstandingErrors") if isinstance(counts, Mapping) else None
    if outstanding != len(expected):
        problems.append(f"counts.outstandingErrors is {outstanding}, expected {len(expected)}")
    return problems


def _checks(tally: _Tally, cycles: int) -> tuple[Check, ...]:
    problems = tally.problems
    if tally.compacted < cycles:
        problems.add("endurance.cycles", [f"{tally.compacted} of {cycles} cycles persisted a "
                                          "compaction"])
    later = max(cycles - 1, 0)
    checks = [
        problems.check("endurance.cycles", {"cycles": tally.compacted, "of": cycles},
                       {"cycles": cycles}),
        problems.check("endurance.preparation", {"prepared": tally.prepared, "of": cycles},
                       {"prepared": cycles, "shouldCompact": True}),
        problems.check("endurance.previous_summary_exposed",
                       {"exposed": tally.exposed, "of": later}, {"exposed": later}),
        problems.check("endurance.previous_summary_unread",
                       {"readsOfPreviousSummary": tally.reads, "cycles": tally.prepared},
                       {"readsOfPreviousSummary": 0}),
        problems.check("endurance.poison_absent", {"leaks": tally.leaks}, {"leaks": 0}),
    ]
    for name in ("pinned", "source_range", "file_addresses", "error_addresses", "closure",
                 "first_kept_on_branch", "round_trip", "context_equivalence"):
        check_id = f"endurance.{name}"
        checks.append(problems.check(check_id, {"failures": problems.counts[check_id],
                                                "cycles": tally.compacted}, {"failures": 0}))
    sizes = tally.sizes
    checks.append(problems.check("size.summary_max", {"maxBytes": max(sizes, default=0)},
                                 {"maxBytes": SUMMARY_MAX_BYTES, "utf8": "strict"}))
    checks.extend(steady_state_checks(sizes))
    return tuple(checks)


def least_squares_slope(values: Sequence[int]) -> float:
    """Slope of the least-squares line through ``(i, values[i])``."""
    n = len(values)
    if n < 2:
        return 0.0
    mean_x, mean_y = (n - 1) / 2, sum(values) / n
    numerator = sum((x - mean_x) * (y - mean_y) for x, y in enumerate(values))
    return numerator / sum((x - mean_x) ** 2 for x in range(n))


def steady_state_checks(sizes: Sequence[int]) -> list[Check]:
    """The last 20 sizes span at most 512 bytes and their slope is at most 16 bytes/cycle."""
    window = list(sizes[-STEADY_WINDOW:])
    enough = len(window) == STEADY_WINDOW
    short = () if enough else (f"only {len(window)} summaries; the window needs "
                               f"{STEADY_WINDOW}",)
    spread = max(window) - min(window) if window else 0
    slope = least_squares_slope(window)
    return [
        Check("size.steady_range", enough and spread <= STEADY_RANGE_BYTES,
              {"rangeBytes": spread, "window": len(window)},
              {"rangeBytes": STEADY_RANGE_BYTES, "window": STEADY_WINDOW},
              short or ((f"last {len(window)} sizes: {window}",) if spread > STEADY_RANGE_BYTES
                        else ())),
        Check("size.steady_slope", enough and abs(slope) <= STEADY_SLOPE_BYTES,
              {"slopeBytesPerCycle": round(slope, 3), "window": len(window)},
              {"absSlopeBytesPerCycle": STEADY_SLOPE_BYTES, "window": STEADY_WINDOW},
              short or ((f"last {len(window)} sizes: {window}",)
                        if abs(slope) > STEADY_SLOPE_BYTES else ())),
    ]


# --- the maximal source ----------------------------------------------------------------


def run_rich(path: Path, *, seed: int | str, hook: Hook) -> tuple[Check, int]:
    """Compact the ~330 KiB rich source once: the summary uses its budget (≥ 24 KiB), stays
    within 32 KiB and is strict UTF-8. Returns the check and the source size."""
    written = rich_session(path, seed=f"{seed}:rich")
    called = call_hook(hook, read_session(path))
    threshold = {"minBytes": RICH_MIN_BYTES, "maxBytes": SUMMARY_MAX_BYTES, "utf8": "strict"}
    if isinstance(called, str) or called.compacted is None:
        reason = called if isinstance(called, str) else called.problem or "no compaction"
        return Check("size.rich_summary", False, {"sourceBytes": written.size}, threshold,
                     (reason,)), written.size
    data = called.compacted.summary.encode("utf-8", errors="surrogatepass")
    problems = _size_problems(data)
    if len(data) < RICH_MIN_BYTES:
        problems.append(f"summary is {len(data)} bytes; a rich source must fill at least "
                        f"{RICH_MIN_BYTES}")
    measured = {"summaryBytes": len(data), "sourceBytes": written.size}
    return Check("size.rich_summary", not problems, measured, threshold, tuple(problems)), \
        written.size
