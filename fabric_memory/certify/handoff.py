"""Continuation QA: plant a task, compact it, resume it through the simulator, score it.

The source phase writes a session holding the ``CERT_TASK_V1`` message, compacts it
through the hook and persists the handoff (summary and details, nothing else) as a
JSON file. The resume phase runs after the memory index holds the session: the
simulator gets the parsed handoff and a :class:`RecordingMemory`, and the oracle
(a separate process) scores the repository. Whether the task's address was
resolved is read from what memory actually returned, never from the simulator.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson

from ..errors import ExpandError, FabricMemoryError
from ..memory.catalog import list_sessions
from ..memory.expand import ExpandPage
from ..session import hash_file, read_session
from .continuation import ContinuationFixture, encode_task, run_oracle, task_message
from .cycle import Hook, call_hook, persist
from .generate import EPOCH_MS, SessionBuilder, encoded_cwd, session_file_name
from .memory_checks import Expand, Locations
from .report import Check
from .simulator import Pointer, Simulator

START_MS: Final = EPOCH_MS + 61 * 86_400_000

RepositoryChange = Callable[[ContinuationFixture], None]


@dataclass(frozen=True, slots=True)
class Planted:
    """A task session after its compaction, and the persisted handoff."""

    fixture: ContinuationFixture
    path: Path
    session_id: str
    task_entry: str
    handoff: Path
    problem: str | None = None
    oracle_before: bool | None = None
    """Whether the oracle passed before anything was applied (it must not)."""


def plant(
    fixture: ContinuationFixture, sessions: Path, handoffs: Path, *, seed: int | str, hook: Hook
) -> Planted:
    """Write the task session under ``sessions``, compact it and persist its handoff."""
    name = fixture.name
    cwd = f"/home/dev/{name}"
    builder = SessionBuilder(random.Random(f"{seed}:continuation:{name}"), cwd=cwd,
                             start_ms=START_MS, flavour="pi")
    builder.model_change()
    builder.user(f"GOAL_{name}: keep the {name} repository maintained across sessions.")
    builder.assistant("Understood.")
    task_entry = builder.user(task_message(fixture.task))
    builder.assistant("I will apply it exactly after the handoff.")
    builder.user("Compact now; a fresh session continues from the summary alone.")
    builder.assistant("Ready for the handoff.")
    path = sessions / encoded_cwd(cwd) / session_file_name(START_MS, builder.session_id)
    builder.write(path)
    handoff = handoffs / f"{name}.json"
    before = run_oracle(fixture).passed
    called = call_hook(hook, read_session(path))
    if isinstance(called, str) or called.compacted is None:
        problem = called if isinstance(called, str) else called.problem
        return Planted(fixture, path, builder.session_id, task_entry, handoff, problem, before)
    compacted = called.compacted
    persist(builder, path, compacted, "")
    handoffs.mkdir(parents=True, exist_ok=True)
    handoff.write_bytes(orjson.dumps({"summary": compacted.summary,
                                      "details": compacted.details}))
    return Planted(fixture, path, builder.session_id, task_entry, handoff, None, before)


@dataclass(slots=True)
class RecordingMemory:
    """The memory a resumed session gets, recording every expansion and its pages."""

    locations: Locations
    expand_function: Expand
    pages: list[tuple[dict[str, Any], ExpandPage]] = field(default_factory=list)

    def pointer(self, session_id: str) -> Pointer:
        listing = list_sessions(index=self.locations.index)["sessions"]
        for item in listing:
            if item["sessionId"] == session_id:
                return {"session": session_id, "sourceHash": item["sourceHash"],
                        "lineageFingerprint": item["lineageFingerprint"]}
        raise ExpandError("session_not_found",
                          f"session {session_id!r}: not in the memory index; run reindex")

    def expand(self, request: Mapping[str, Any]) -> ExpandPage:
        sent = self.locations.request(request)
        page = self.expand_function(sent)
        self.pages.append((sent, page))
        return page

    def resolved(self, entry_id: str, source_hash: str) -> str:
        """The text memory returned for ``entry_id`` on requests bound to ``source_hash``."""
        text = ""
        for request, page in self.pages:
            if request.get("expectedSourceHash") != source_hash:
                continue
            for item in page["entries"]:
                if item["entryId"] == entry_id and item["kind"] == "entry":
                    text = text + item["text"] if item["textOffset"] == len(text) else text
        return text


def resume(
    planted: Planted,
    locations: Locations,
    *,
    expand: Expand,
    simulator: Simulator,
    change: RepositoryChange | None,
) -> tuple[Check, Check]:
    """Hand the persisted handoff to ``simulator``; score address resolution and the oracle."""
    name = planted.fixture.name
    memory = RecordingMemory(locations, expand)
    problems = [planted.problem] if planted.problem else []
    error = None
    if planted.problem is None:
        handoff = orjson.loads(planted.handoff.read_bytes())
        try:
            simulator(handoff, memory, planted.fixture.repo.parent)
        except FabricMemoryError as exc:
            error = f"the simulator failed: {exc.code}: {exc.message}"
    if change is not None:
        change(planted.fixture)
    current = hash_file(str(planted.path))
    text = memory.resolved(planted.task_entry, current)
    resolved = encode_task(planted.fixture.task) in text
    if not resolved:
        problems.append(f"memory never returned entry {planted.task_entry} holding the task "
                        f"on a request bound to sourceHash {current}")
    if error:
        problems.append(error)
    score = run_oracle(planted.fixture)
    oracle_problems = []
    if planted.oracle_before is not False:
        oracle_problems.append("the oracle did not fail before the task was applied")
    if not score.passed:
        oracle_problems.append(
            f"oracle exit {score.process_status}: check {score.check_status}, exact "
            f"{dict(score.exact_files)}, forbidden intact {dict(score.forbidden_intact)}, "
            f"unexpected {list(score.unexpected_changes)}")
    return (
        Check(f"continuation.{name}.address_resolved", resolved and not problems,
              {"resolved": resolved, "entryId": planted.task_entry,
               "expansions": len(memory.pages)},
              {"resolved": True, "expectedSourceHash": "bound"}, tuple(problems)),
        Check(f"continuation.{name}.oracle", not oracle_problems,
              {"before": planted.oracle_before, "after": score.passed,
               "exitStatus": score.process_status},
              {"before": False, "after": True}, tuple(oracle_problems)),
    )


def pass_rate(checks: list[Check], fixtures: int) -> Check:
    """Continuation passes for a fixture only when its address resolved and its oracle passed."""
    failed = {check.id.split(".")[1] for check in checks if not check.passed}
    passed = fixtures - len(failed)
    rate = round(passed / fixtures, 6) if fixtures else 0.0
    return Check("continuation.pass_rate", fixtures > 0 and passed == fixtures,
                 {"rate": rate, "passed": passed, "fixtures": fixtures}, {"rate": 1.0},
                 tuple(f"fixture {name} failed" for name in sorted(failed)))
