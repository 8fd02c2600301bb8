"""``fabric-memory certify``: the whole certification run, offline and seeded.

What it checks and reports: docs/certification.md.

Phases, in order, all under one working directory (a temporary one unless given):

1. a seeded corpus of ``sessions`` small sessions (:func:`generate_corpus`);
2. endurance: exactly ``cycles`` compactions of one growing session, then the
   maximal rich source (:mod:`.endurance`);
3. the six closure fixtures (:mod:`.closure`);
4. Continuation QA, source phase: two task repositories, a session per task,
   compacted, the handoff persisted (:mod:`.handoff`);
5. one ``reindex`` of every session, then the memory checks (:mod:`.memory_checks`);
6. Continuation QA, resume phase: the simulator, then the oracle.

Every component a check depends on is injectable through :class:`Components`, so
a test can swap in a broken one and see the right check fail.
"""

from __future__ import annotations

import importlib.metadata
import platform
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson

from .. import __version__
from .._gc import no_cyclic_gc
from ..compaction.hook import compaction_hook
from ..compaction.render import SUMMARY_MAX_BYTES
from ..errors import CertificationError, UsageError
from ..memory.expand import MAX_SELECTORS, expand_request
from .closure import FIXTURES as CLOSURE_FIXTURES
from .closure import run_closure
from .continuation import create_fixtures
from .cycle import CONTEXT_WINDOW, SETTINGS, Hook
from .endurance import (
    RICH_MIN_BYTES,
    STEADY_RANGE_BYTES,
    STEADY_SLOPE_BYTES,
    STEADY_WINDOW,
    run_endurance,
    run_rich,
)
from .generate import DEFAULT_SEED, generate_corpus
from .handoff import RepositoryChange, pass_rate, plant, resume
from .memory_checks import (
    HOT_SESSIONS,
    Expand,
    Locations,
    MemoryInputs,
    Reindexer,
    index_sessions,
    run_memory,
)
from .report import Check, Report
from .simulator import Simulator, simulate_handoff

FULL_SCALE_SESSIONS: Final = 1000
FULL_SCALE_CYCLES: Final = 100

ProgressCallback = Callable[[str, int, int], None]


@dataclass(frozen=True, slots=True)
class Config:
    """What to run: corpus size, compaction cycles, seed, where to work and report."""

    sessions: int = FULL_SCALE_SESSIONS
    cycles: int = FULL_SCALE_CYCLES
    seed: int | str = DEFAULT_SEED
    workdir: Path | None = None
    """Keep every file here (must be empty or new); None: a temporary directory, removed."""
    report_path: Path | None = None
    """Also write the JSON report here."""

    @property
    def full_scale(self) -> bool:
        return self.sessions >= FULL_SCALE_SESSIONS and self.cycles >= FULL_SCALE_CYCLES

    def to_json(self) -> dict[str, Any]:
        return {"sessions": self.sessions, "cycles": self.cycles, "seed": self.seed,
                "workdir": str(self.workdir) if self.workdir is not None else None}


@dataclass(frozen=True, slots=True)
class Components:
    """The parts under certification; each can be replaced (tests break them on purpose)."""

    compaction_hook: Hook = compaction_hook
    reindex: Reindexer = index_sessions
    expand: Expand = expand_request
    simulator: Simulator = simulate_handoff
    change_repository: RepositoryChange | None = None
    """Runs after the simulator, before the oracle (a change the oracle must catch)."""


def parse_seed(text: str | None) -> int | str:
    """A seed from the command line: an integer when it is one, else the text itself;
    the default seed when none is given."""
    if text is None:
        return DEFAULT_SEED
    return int(text) if text.lstrip("-").isdigit() else text


def thresholds(config: Config) -> dict[str, Any]:
    return {
        "cycles": config.cycles,
        "contextWindow": CONTEXT_WINDOW,
        "reserveTokens": SETTINGS.reserve_tokens,
        "keepRecentTokens": SETTINGS.keep_recent_tokens,
        "summaryMaxBytes": SUMMARY_MAX_BYTES,
        "steadyWindow": STEADY_WINDOW,
        "steadyRangeBytes": STEADY_RANGE_BYTES,
        "steadyAbsSlopeBytesPerCycle": STEADY_SLOPE_BYTES,
        "richSummaryMinBytes": RICH_MIN_BYTES,
        "richSummaryMaxBytes": SUMMARY_MAX_BYTES,
        "minCorpusSessions": config.sessions,
        "maxHotSessions": HOT_SESSIONS,
        "addressExpansionRate": 1.0,
        "expansionAgreementRate": 1.0,
        "maxSelectorsPerExpand": MAX_SELECTORS,
        "continuationPassRate": 1.0,
        "closureFixtures": len(CLOSURE_FIXTURES),
        "fullScale": {"sessions": FULL_SCALE_SESSIONS, "cycles": FULL_SCALE_CYCLES},
    }


def certify(
    config: Config | None = None,
    components: Components | None = None,
    *,
    progress: ProgressCallback | None = None,
) -> Report:
    """Run the certification; the report says which checks passed (it never raises for a
    failed check, only when the run itself cannot proceed)."""
    config = config or Config()
    components = components or Components()
    if config.sessions < 2 or config.cycles < 1:
        raise UsageError(f"certify: --count {config.sessions} must be at least 2 and "
                         f"--cycles {config.cycles} at least 1")
    if config.workdir is None:
        with tempfile.TemporaryDirectory(prefix="fabric-memory-certify-") as temporary:
            report = _run(Path(temporary), config, components, progress)
    else:
        workdir = config.workdir.absolute()
        if workdir.exists() and (not workdir.is_dir() or any(workdir.iterdir())):
            raise UsageError(f"--workdir {workdir}: not an empty directory; pass a new or "
                             "empty one")
        workdir.mkdir(parents=True, exist_ok=True)
        report = _run(workdir, config, components, progress)
    if config.report_path is not None:
        try:
            config.report_path.write_bytes(
                orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2) + b"\n"
            )
        except OSError as exc:
            raise CertificationError(
                f"{config.report_path}: cannot write the report ({exc.strerror or exc}); "
                "pass a writable --report PATH"
            ) from None
    return report


@dataclass(slots=True)
class _Clock:
    timings: dict[str, float] = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.timings[name] = round(time.perf_counter() - start, 3)

    def total(self) -> dict[str, float]:
        return {**self.timings, "total": round(time.perf_counter() - self.started, 3)}


def _run(
    work: Path, config: Config, components: Components, progress: ProgressCallback | None
) -> Report:
    clock = _Clock()
    sessions = work / "sessions"
    locations = Locations(sessions, work / "index")
    hook = components.compaction_hook
    checks: list[Check] = []
    with no_cyclic_gc():
        with clock.phase("corpus"):
            if progress is not None:
                progress("generating sessions", 0, config.sessions)
            manifest = generate_corpus(sessions, sessions=config.sessions, seed=config.seed)
        with clock.phase("endurance"):
            endurance = run_endurance(sessions, cycles=config.cycles, seed=config.seed,
                                      hook=hook, progress=progress)
            checks.extend(endurance.checks)
        with clock.phase("rich"):
            rich, rich_bytes = run_rich(work / "rich" / "rich.jsonl", seed=config.seed, hook=hook)
            checks.append(rich)
        with clock.phase("closure"):
            (work / "closure").mkdir()
            checks.extend(run_closure(work / "closure", seed=config.seed, hook=hook))
        with clock.phase("continuation_source"):
            fixtures = create_fixtures(work / "repositories")
            planted = [plant(fixture, sessions, work / "handoff", seed=config.seed, hook=hook)
                       for fixture in fixtures]
        with clock.phase("reindex"):
            if progress is not None:
                progress("indexing sessions", 0, config.sessions)
            indexed = components.reindex(sessions, locations.index)
        with clock.phase("memory"):
            if progress is not None:
                progress("checking memory", 0, 1)
            memory = run_memory(MemoryInputs(
                locations=locations, manifest=manifest, report=indexed,
                minimum_sessions=config.sessions, endurance_path=endurance.path,
                endurance_session_id=endurance.session_id, emitted=endurance.emitted,
            ), components.expand)
            checks.extend(memory.checks)
        with clock.phase("continuation"):
            continuation: list[Check] = []
            for done, item in enumerate(planted):
                if progress is not None:
                    progress("continuation QA", done, len(planted))
                continuation.extend(resume(item, locations, expand=components.expand,
                                           simulator=components.simulator,
                                           change=components.change_repository))
            checks.extend(continuation)
            checks.append(pass_rate(continuation, len(planted)))
    sizes = endurance.sizes
    counts = {
        "cycles": len(sizes), "enduranceEntries": endurance.entries,
        "closureFixtures": len(CLOSURE_FIXTURES), "continuationFixtures": len(planted),
        **memory.counts,
    }
    byte_sizes = {
        "enduranceSource": endurance.file_bytes, "richSource": rich_bytes,
        "corpusSource": sum(written.size for written in manifest.sessions),
        "summaryMax": max(sizes, default=0), "summaryLast": sizes[-1] if sizes else 0,
        **memory.bytes,
    }
    return Report(
        checks=tuple(checks),
        config=config.to_json(),
        thresholds=thresholds(config),
        full_scale=config.full_scale,
        counts=counts,
        bytes=byte_sizes,
        timings=clock.total(),
        versions=_versions(),
    )


def _versions() -> dict[str, str]:
    found = {"fabric-memory": __version__, "python": platform.python_version()}
    for name in ("tantivy", "orjson", "xxhash"):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "unknown"
    return found
