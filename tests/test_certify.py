"""The certification harness: a reduced certify passes, and each sabotage fails the right check."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest

from fabric_memory.certify.continuation import FIXTURES, ContinuationFixture, apply_task
from fabric_memory.certify.cycle import POISON, RecordingPreparation
from fabric_memory.certify.endurance import (
    CWD,
    details_addresses,
    steady_state_checks,
    summary_addresses,
)
from fabric_memory.certify.generate import encoded_cwd
from fabric_memory.certify.harness import Components, Config, certify
from fabric_memory.certify.memory_checks import index_sessions
from fabric_memory.certify.report import Report
from fabric_memory.certify.simulator import MemoryAccess, Resumed, task_address
from fabric_memory.cli import main
from fabric_memory.compaction import compaction_hook
from fabric_memory.compaction.text import clip
from fabric_memory.errors import TaskPayloadError
from fabric_memory.memory.catalog import load_catalog
from fabric_memory.memory.expand import ExpandPage, expand_request
from fabric_memory.memory.index import item_json, open_index
from fabric_memory.memory.normalize import normalize_session
from fabric_memory.memory.reindex import ReindexReport
from fabric_memory.session import read_session

SMALL = Config(sessions=24, cycles=4)
"""Fast, but too few cycles for the steady-state window: those two checks fail here."""
STEADY = Config(sessions=60, cycles=44)
"""The smallest run where the endurance summary has reached its plateau: everything passes."""
STEADY_CHECKS = {"size.steady_range", "size.steady_slope"}


@pytest.fixture(scope="module")
def baseline() -> Report:
    return certify(STEADY)


@pytest.fixture(scope="module")
def small() -> Report:
    return certify(SMALL)


def newly_failed(report: Report, clean: Report) -> set[str]:
    """Checks the sabotaged run fails that the clean run of the same size passes."""
    return {c.id for c in report.checks if not c.passed and clean.check(c.id).passed}


# --- the clean runs ----------------------------------------------------------------------


def test_reduced_certify_passes_every_check(baseline: Report) -> None:
    """At 60 sessions and 44 cycles every check of every family passes, each with a value."""
    assert baseline.passed, [(c.id, c.failures) for c in baseline.checks if not c.passed]
    families = {check.family for check in baseline.checks}
    assert families == {"endurance", "size", "closure", "memory", "continuation"}
    closure = {f"closure.{name}" for name in ("normal", "compact-all", "split-turn",
                                               "parallel-delayed", "reverse-order",
                                               "malformed-prior-boundary")}
    assert closure <= {check.id for check in baseline.checks}
    assert baseline.check("endurance.cycles").measured == {"cycles": 44, "of": 44}
    assert baseline.check("memory.address_expansion").measured["rate"] == 1.0
    assert baseline.check("memory.address_expansion").measured["emitted"] > 100
    assert baseline.check("continuation.pass_rate").measured["rate"] == 1.0
    assert baseline.check("size.rich_summary").measured["summaryBytes"] >= 24 * 1024
    assert not baseline.full_scale


def test_report_json_holds_thresholds_counts_sizes_timings_versions(baseline: Report) -> None:
    """The JSON report carries every check with measured value and threshold, and the figures."""
    report = orjson.loads(orjson.dumps(baseline.to_json()))
    assert report["passed"] is True and report["failed"] == []
    assert report["thresholds"]["summaryMaxBytes"] == 32 * 1024
    assert report["thresholds"]["steadyRangeBytes"] == 512
    assert {"id", "passed", "measured", "threshold", "failures"} <= set(report["checks"][0])
    assert report["counts"]["eligibleSessions"] == 63 and report["counts"]["cycles"] == 44
    assert report["bytes"]["summaryMax"] <= 32 * 1024 and report["bytes"]["indexBytes"] > 0
    assert report["timings"]["total"] > 0 and report["versions"]["tantivy"]


def test_too_few_cycles_fail_only_the_steady_state_window(small: Report) -> None:
    """Four cycles cannot fill the 20-cycle window: exactly the steady-state checks fail."""
    assert set(small.failed) == STEADY_CHECKS
    assert "only 4 summaries" in small.check("size.steady_range").failures[0]


# --- sabotage ------------------------------------------------------------------------------


def test_a_compactor_that_leaks_the_poison_fails(small: Report) -> None:
    """Reading previousSummary and copying its last line into the summary is caught: by the
    read itself, by the poison in endurance, and by the foreign summary's poison in closure."""

    def leaky(event: Mapping[str, Any]) -> Mapping[str, Any]:
        result = compaction_hook(event)
        previous = event["preparation"].get("previousSummary")
        if previous and "compaction" in result:
            result["compaction"]["summary"] += "\n" + previous.splitlines()[-1]
        return result

    report = certify(SMALL, Components(compaction_hook=leaky))
    assert newly_failed(report, small) == {"endurance.previous_summary_unread",
                                           "endurance.poison_absent",
                                           "closure.malformed-prior-boundary"}
    assert POISON in report.check("endurance.poison_absent").failures[0]


def test_a_compactor_that_splits_a_call_from_its_result_fails(small: Report) -> None:
    """Keeping Pi's requested cut unadjusted orphans a tool result in two closure fixtures."""

    def splitting(event: Mapping[str, Any]) -> Mapping[str, Any]:
        result = compaction_hook(event)
        if "compaction" in result:
            result["compaction"]["firstKeptEntryId"] = event["preparation"]["firstKeptEntryId"]
        return result

    report = certify(SMALL, Components(compaction_hook=splitting))
    assert newly_failed(report, small) == {"closure.parallel-delayed", "closure.reverse-order"}
    assert "without its call" in report.check("closure.reverse-order").failures[0]


def test_a_summary_growing_without_bound_fails_the_steady_state(baseline: Report) -> None:
    """A summary that grows 70 bytes a cycle while staying under 32 KiB fails exactly range and
    slope (every summary is still within the 32 KiB bound)."""
    calls = [0]

    def growing(event: Mapping[str, Any]) -> Mapping[str, Any]:
        result = compaction_hook(event)
        calls[0] += 1
        compaction = result["compaction"]
        compaction["summary"] = clip(compaction["summary"], 24_000) + "\n" + "growth " * (
            10 * calls[0])
        return result

    report = certify(STEADY, Components(compaction_hook=growing))
    assert newly_failed(report, baseline) == STEADY_CHECKS
    assert report.check("size.steady_slope").measured["slopeBytesPerCycle"] > 16


def _endurance_file(sessions: Path) -> Path:
    (path,) = (sessions / encoded_cwd(CWD)).glob("*.jsonl")
    return path


def test_an_index_that_drops_one_address_fails(small: Report) -> None:
    """An index missing the document of one emitted address fails expansion and coverage."""

    def dropping(sessions: Path, index: Path) -> ReindexReport:
        report = index_sessions(sessions, index)
        path = _endurance_file(sessions)
        session = read_session(path)
        items = normalize_session(session).items
        kept = [item_json(item, str(path), session.session_id) for item in items[1:]]
        handle = open_index(index)
        record = load_catalog(handle).by_path[str(path)]
        with handle.writer(timeout=10) as writer:
            # Replacing a session's documents drops its catalog record too: put it back.
            writer.replace_session(str(path), kept)
            writer.put_record(record.path, record.session_id, record.mtime_ns, record.encode())
            writer.commit()
        return report

    report = certify(SMALL, Components(reindex=dropping))
    assert newly_failed(report, small) == {"memory.address_expansion", "memory.coverage"}
    assert "address_not_found" in report.check("memory.address_expansion").failures[0]
    assert report.check("memory.address_expansion").measured["rate"] < 1.0


def test_an_expansion_whose_source_hash_changes_mid_way_fails(small: Report) -> None:
    """One continuation page reporting another sourceHash fails the sourceHash check."""
    flipped = [False]

    def flipping(request: Mapping[str, Any]) -> ExpandPage:
        page = expand_request({**request, "maxChars": 2_000})  # small pages: continuations
        if "entryOffset" in request and not flipped[0]:
            flipped[0] = True
            return {**page, "sourceHash": "f" * 32}
        return page

    report = certify(SMALL, Components(expand=flipping))
    assert flipped[0]
    assert newly_failed(report, small) == {"memory.source_hash"}
    assert report.check("memory.source_hash").measured["distinctHashes"] == 2


def test_a_simulator_that_skips_expansion_fails_even_when_the_task_succeeds(
    small: Report,
) -> None:
    """A simulator that applies the task from its own knowledge passes the oracle, yet certify
    fails: the address was never resolved through memory."""

    def skipping(handoff: Mapping[str, Any], memory: MemoryAccess, workspace: Path) -> Resumed:
        del memory  # never asked
        spec = next(spec for spec in FIXTURES if f"repository {spec.name}" in handoff["summary"])
        return Resumed("", spec.task, apply_task(spec.task, workspace))

    report = certify(SMALL, Components(simulator=skipping))
    assert newly_failed(report, small) == {
        "continuation.ledger.address_resolved", "continuation.atlas.address_resolved",
        "continuation.pass_rate",
    }
    assert report.check("continuation.ledger.oracle").passed


def test_a_repository_change_the_oracle_forbids_fails(small: Report) -> None:
    """Touching a must-stay-identical file after the task is applied fails the oracle."""

    def tamper(fixture: ContinuationFixture) -> None:
        target = fixture.repo / fixture.spec.forbidden[0]
        target.write_bytes(target.read_bytes() + b"# tampered\n")

    report = certify(SMALL, Components(change_repository=tamper))
    assert newly_failed(report, small) == {
        "continuation.ledger.oracle", "continuation.atlas.oracle", "continuation.pass_rate",
    }
    assert "forbidden intact" in report.check("continuation.atlas.oracle").failures[0]


# --- pieces ----------------------------------------------------------------------------------


def test_steady_state_checks_have_teeth() -> None:
    """Flat sizes pass; 17 bytes a cycle fails the slope; a 600-byte jump fails the range."""
    assert all(check.passed for check in steady_state_checks([30_000 + n % 3 for n in range(20)]))
    spread, slope = steady_state_checks([30_000 + 17 * n for n in range(20)])
    assert spread.passed and not slope.passed
    spread, slope = steady_state_checks([30_000] * 19 + [30_600])
    assert not spread.passed and spread.measured["rangeBytes"] == 600 and slope.passed


def test_recording_preparation_counts_any_read_of_previous_summary() -> None:
    """get, membership and iteration all count as reading previousSummary."""
    for read in (lambda p: p.get("previousSummary"), lambda p: "previousSummary" in p, dict):
        recording = RecordingPreparation({"previousSummary": "x", "tokensBefore": 1})
        read(recording)
        assert recording.read_previous_summary()
    untouched = RecordingPreparation({"previousSummary": "x", "tokensBefore": 1})
    assert untouched["tokensBefore"] == 1 and not untouched.read_previous_summary()


def test_emitted_addresses_come_from_summary_lines_ranges_and_details() -> None:
    """Item lines, omission ranges, the footer range and every details field are collected."""
    summary = ("## Files (2)\n- [a1 ... a2] src/x.ts (read)\n- [b1/3] pi.read -> failed\n"
               "- ... 4 more omitted here [c1 ... c2]; expand: `fabric-memory expand S "
               "--address c1`\n---\nSource: session S, entries [d1] ... [d2] (9 entries).\n"
               "`fabric-memory expand S --address <address>`\n")
    assert summary_addresses(summary) == {"a1", "a2", "b1/3", "c1", "c2", "d1", "d2"}
    details = {"addresses": ["e1"], "coverage": {"source": {"first": "f1", "last": "f2"},
                                                 "live": {"firstKeptEntryId": "g1"}},
               "sections": [{"omittedFirst": "h1", "omittedLast": None}],
               "state": {"status": [["i1", "text"]], "ledgers": {"files": {
                   "head": [["j1", "j2", "x", "x", ["read"]]], "tail": [["k1", "k2", "t"]],
                   "droppedFirst": "l1", "droppedLast": "l2"}}}}
    assert details_addresses(details) == {"e1", "f1", "f2", "g1", "h1", "i1", "j1", "j2", "k1",
                                          "k2", "l1", "l2"}


def test_task_address_needs_exactly_one_item_naming_the_task() -> None:
    """The simulator refuses to guess: no task item, or two different ones, is an error."""
    one = {"state": {"status": [], "ledgers": {"turns": {"head": [], "tail": [
        ["t1", "t2", 'user: "do CERT_TASK_V1 abc"']]}}}}
    assert task_address(one) == "t1"
    for ledgers in ({}, {"turns": {"head": [["u1", "CERT_TASK_V1 x"]], "tail": [
            ["u2", "CERT_TASK_V1 y"]]}}):
        with pytest.raises(TaskPayloadError, match="exactly one"):
            task_address({"state": {"status": [], "ledgers": ledgers}})


# --- command line ----------------------------------------------------------------------------


def test_cli_writes_the_report_and_exits_1_on_a_failed_threshold(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`certify --report PATH --workdir DIR` prints the summary, writes the report, keeps the
    data, and exits 1 because four cycles cannot satisfy the steady-state window."""
    report_path, workdir = tmp_path / "report.json", tmp_path / "work"
    status = main(["certify", "--count", "24", "--cycles", "4", "--seed", "7",
                   "--report", str(report_path), "--workdir", str(workdir)])
    out = capsys.readouterr().out
    assert status == 1
    assert "FAIL  size.steady_range" in out and "FAILED: 2 of" in out
    report = orjson.loads(report_path.read_bytes())
    assert report["config"]["seed"] == 7 and set(report["failed"]) == STEADY_CHECKS
    assert (workdir / "sessions").is_dir() and (workdir / "index").is_dir()
    assert main(["certify", "--count", "24", "--cycles", "4", "--workdir", str(workdir)]) == 2
    assert "not an empty directory" in capsys.readouterr().err


def test_temporary_data_is_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without --workdir the run works in a temporary directory and removes it."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    report = certify(Config(sessions=4, cycles=1))
    assert report.check("memory.coverage").passed
    assert list(tmp_path.iterdir()) == []
