"""Certification checks and the report: what was measured, against which threshold.

A :class:`Check` is one pass/fail line of the report with its measured value and
threshold. :class:`Problems` gathers the failures of a per-cycle check across
all cycles (a count and the first few messages). The report is JSON (written
through orjson) and a human summary.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final, TypedDict

SAMPLES: Final = 5
"""Failure messages kept per check."""


class CheckJson(TypedDict):
    id: str
    passed: bool
    measured: Any
    threshold: Any
    failures: list[str]


@dataclass(frozen=True, slots=True)
class Check:
    """One certified property: its id (``family.name``), verdict, measured value, threshold."""

    id: str
    passed: bool
    measured: Any
    threshold: Any
    failures: tuple[str, ...] = ()

    @property
    def family(self) -> str:
        return self.id.split(".", 1)[0]

    def to_json(self) -> CheckJson:
        return {
            "id": self.id,
            "passed": self.passed,
            "measured": self.measured,
            "threshold": self.threshold,
            "failures": list(self.failures),
        }


@dataclass(slots=True)
class Problems:
    """Failures of checks that run many times (per cycle, per address), by check id."""

    counts: Counter[str] = field(default_factory=Counter)
    samples: dict[str, list[str]] = field(default_factory=dict)

    def add(self, check_id: str, messages: Iterable[str]) -> bool:
        """Record ``messages`` as failures of ``check_id``; True when there were none."""
        found = list(messages)
        if not found:
            return True
        self.counts[check_id] += len(found)
        kept = self.samples.setdefault(check_id, [])
        kept.extend(found[: SAMPLES - len(kept)])
        return False

    def check(self, check_id: str, measured: Any, threshold: Any) -> Check:
        """The check for ``check_id``: passed when nothing was recorded against it."""
        return Check(
            check_id,
            self.counts[check_id] == 0,
            measured,
            threshold,
            tuple(self.samples.get(check_id, ())),
        )


class ReportJson(TypedDict):
    tool: str
    passed: bool
    fullScale: bool
    failed: list[str]
    config: dict[str, Any]
    thresholds: dict[str, Any]
    checks: list[CheckJson]
    counts: dict[str, int]
    bytes: dict[str, int]
    timings: dict[str, float]
    versions: dict[str, str]


@dataclass(frozen=True, slots=True)
class Report:
    """The whole certification run."""

    checks: tuple[Check, ...]
    config: dict[str, Any]
    thresholds: dict[str, Any]
    full_scale: bool
    counts: dict[str, int]
    bytes: dict[str, int]
    timings: dict[str, float]
    versions: dict[str, str]

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(check.passed for check in self.checks)

    @property
    def failed(self) -> list[str]:
        return [check.id for check in self.checks if not check.passed]

    def check(self, check_id: str) -> Check:
        """The check with this id (KeyError when the run has none)."""
        for check in self.checks:
            if check.id == check_id:
                return check
        raise KeyError(check_id)

    def to_json(self) -> ReportJson:
        return {
            "tool": "fabric-memory certify",
            "passed": self.passed,
            "fullScale": self.full_scale,
            "failed": self.failed,
            "config": self.config,
            "thresholds": self.thresholds,
            "checks": [check.to_json() for check in self.checks],
            "counts": self.counts,
            "bytes": self.bytes,
            "timings": self.timings,
            "versions": self.versions,
        }


def render_report(report: Report) -> str:
    """The human summary: one line per check, failures under it, then the figures."""
    lines = []
    width = max((len(check.id) for check in report.checks), default=0)
    for check in report.checks:
        mark = "PASS" if check.passed else "FAIL"
        lines.append(
            f"{mark}  {check.id:<{width}}  {_brief(check.measured)}"
            f"  (threshold {_brief(check.threshold)})"
        )
        lines.extend(f"        - {failure}" for failure in check.failures)
    lines.append("")
    lines.append("counts:  " + _pairs(report.counts))
    lines.append("bytes:   " + _pairs(report.bytes))
    lines.append("timings: " + ", ".join(f"{k} {v:.2f}s" for k, v in report.timings.items()))
    lines.append("versions: " + _pairs(report.versions))
    total = len(report.checks)
    failed = report.failed
    verdict = (
        f"PASSED: {total} checks"
        if not failed
        else f"FAILED: {len(failed)} of {total} checks ({', '.join(failed)})"
    )
    if not report.full_scale:
        verdict += (
            f" at reduced scale ({report.config['sessions']} sessions, "
            f"{report.config['cycles']} cycles; full scale is 1,000 and 100)"
        )
    lines.append(verdict)
    return "\n".join(lines) + "\n"


def _pairs(values: dict[str, Any]) -> str:
    return ", ".join(f"{key} {value}" for key, value in values.items())


def _brief(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_brief(v)}" for k, v in value.items()) + "}"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def render_progress(phase: str, done: int, total: int) -> str:
    """One progress line (for a TTY, rewritten in place)."""
    return f"certify: {phase} {done}/{total}".ljust(60)
