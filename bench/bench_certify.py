"""The default certification run (1,000 sessions, 100 cycles) against its 120 s budget.

Run with ``pytest bench/bench_certify.py``. One round only: the run builds its own
seeded data in a temporary directory and takes tens of seconds, so repeating it
only multiplies the wait. The per-phase timings land in the benchmark's
``extra_info``.
"""

from __future__ import annotations

from typing import Any

from fabric_memory.certify.harness import Config, certify

BUDGET_SECONDS = 120.0


def test_default_certify_run(benchmark: Any) -> None:
    """The full-scale run (docs/certification.md) passes every check within the 120 s budget."""
    report = benchmark.pedantic(certify, args=(Config(),), rounds=1, iterations=1)
    benchmark.extra_info.update(report.timings)
    assert report.full_scale and report.passed, report.failed
    assert report.timings["total"] < BUDGET_SECONDS
