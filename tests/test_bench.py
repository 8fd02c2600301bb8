"""Tests for bench.compare: the smoke run prints every figure beside its floor, with a ratio."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import tantivy

from bench import handoff, workloads
from bench.compare import Row, table
from bench.data import QUICK
from fabric_memory.memory import index as memory_index
from fabric_memory.memory.reindex import reindex
from fabric_memory.words import searchable

from .memory_builder import SessionBuilder

REPO = Path(__file__).resolve().parents[1]
MODES = ("literal", "phrase", "structural", "regex")
EXPECTED = (
    "guard",
    "guard.lines",
    "read.small",
    "read.large",
    "reindex.full",
    "reindex.redaction",
    "reindex.noop",
    "reindex.agents",
    *(f"recall.{mode}.{size}" for size in ("medium", "large")
      for mode in (*MODES, "natural")),
    "expand.1",
    "expand.100",
    *(f"compaction.{kib}k" for kib in QUICK.compaction_kib),
    "compaction.growth",
    "plateau",
    *(f"hook.{kind}" for kind in ("plain", "fabric-valid", "fabric-valid.largest", "compaction",
                                  "compaction.80", "rich", "big", "all")),
    "handoff",
    "packet.inproc",
    "packet.process",
    *(f"prompt.{how}.{size}" for size in ("1040", "large") for how in ("inproc", "process")),
    "reindex.rss",
    "certify",
    "mcp.recall",
    "live.freshness",
    "live.idle_cpu",
    "cli.recall",
    *(f"ui.{page}.{size}" for size in ("agent", "large")
      for page in ("list", "session", "search")),
    "ui.first_paint",
    "cluster.reindex.1",
    "cluster.reindex.2",
    *(f"cluster.recall.{shards}" for shards in (1, 4, 16)),
)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "bench.compare", "--quick", "--json"],
        cwd=REPO,
        capture_output=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    result: dict[str, Any] = orjson.loads(done.stdout)
    return result


@pytest.mark.slow
def test_quick_run_has_every_row_with_its_ratio(quick_run: dict[str, Any]) -> None:
    """`python -m bench.compare --quick --json` reports each figure once, measured, with a ratio."""
    rows = quick_run["rows"]
    assert [row["id"] for row in rows] == list(EXPECTED)
    for row in rows:
        assert isinstance(row["ours"], float) and math.isfinite(row["ours"]), row
        assert row["ours"] > 0, row
        assert isinstance(row["ratio"], float) and math.isfinite(row["ratio"]), row
        assert row["ratio"] > 0, row
        assert row["ok"] in (True, False, None), row
        if row["floor"] is not None:
            assert row["floor"] > 0, row
    assert quick_run["scale"] == "quick"
    assert quick_run["machine"]["cores"] >= 1


@pytest.mark.slow
def test_quick_run_measures_what_it_names(quick_run: dict[str, Any]) -> None:
    """Ratios are consistent with the numbers beside them (ours over floor, or as stated)."""
    by_id = {row["id"]: row for row in quick_run["rows"]}
    full = by_id["reindex.full"]
    assert full["ratio"] == pytest.approx(full["ours"] / full["floor"], rel=1e-2)
    noop = by_id["reindex.noop"]
    assert noop["floor"] == pytest.approx(full["ours"], rel=1e-2)  # compared with the full run
    redaction = by_id["reindex.redaction"]
    assert redaction["ratio"] == pytest.approx(redaction["ours"] / redaction["floor"], rel=1e-2)
    guard = by_id["guard"]
    assert guard["ratio"] == pytest.approx(guard["ours"] / guard["floor"], rel=1e-2)
    assert by_id["recall.literal.large"]["detail"]["documents"] > (
        by_id["recall.literal.medium"]["detail"]["documents"]
    )


def test_table_marks_misses_and_rows_without_target() -> None:
    """The printed table shows a miss as a miss, a row without target as '-', and the machine."""
    rows = [
        Row("a", "fast thing", 2.0, 1.0, "ms", 2.0, "ours/floor", "<= 3", True),
        Row("b", "slow thing", 9.0, 1.0, "ms", 9.0, "ours/floor", "<= 3", False),
        Row("c", "info", 5.0, None, "s", 0.5, "ours/budget", "-", None),
    ]
    result = {
        "rows": [row.to_json() for row in rows], "scale": "quick", "seconds": 1.0, "notes": [],
        "machine": {"cores": 2, "ramGiB": 8.0, "python": "3.11", "tantivy": "0.27",
                    "orjson": "3", "date": "2026-01-01"},
    }
    lines = table(result).splitlines()
    assert lines[2].endswith("| ok |") and "fast thing" in lines[2]
    assert lines[3].endswith("| **miss** |") and "9 ms" in lines[3]
    assert lines[4].endswith("| - |") and "| - |" in lines[4]
    assert "2 cores" in lines[-1] and "tantivy 0.27" in lines[-1]


def test_handoff_scores_the_key_strings_each_summary_carries() -> None:
    """A probe scores the share of its key strings a summary carries, ours and Pi's at the same
    cut; a key neither holds scores nothing."""
    probes = [
        {"file": "before-compaction.jsonl", "cut": "L294", "dimension": "commits",
         "question": "latest commit?", "keys": ["7890fb8", "no such key zq"]},
        {"file": "before-compaction.jsonl", "cut": "L294", "dimension": "task",
         "question": "branch?", "keys": ["refactor"]},
    ]
    result = handoff.score(probes)
    commits, task = result["rows"]
    assert commits["ours"] == 0.5  # the commit hash, not the made-up key
    assert task["ours"] == 1.0 and task["pi"] == 1.0  # Pi's summary names the branch too
    assert commits["pi"] == 0.0  # Pi's summary carries no commit hash
    assert result["cuts"]["before-compaction.jsonl@L294"]["piBytes"] > 0


def test_the_reindex_floor_indexes_each_word_as_the_memory_index_does(tmp_path: Path) -> None:
    """The full reindex's floor (the same documents straight into Tantivy) is built with the
    memory index's tokenizer: every word of a mixed-script text (a CJK character alone, a run
    of letters, a colour-coded word) finds the same documents in both, so the ratio measures
    the engine's own work."""
    text = "修复钩子配置 the Zürich gateway \x1b[1mREADY\x1b[0m 東京"
    builder = SessionBuilder(tmp_path / "sessions" / "--repo--" / "s.jsonl")
    builder.user(text)
    builder.user("something else entirely")
    builder.write()
    prebuilt = workloads.prebuild(tmp_path / "sessions")
    workloads.tantivy_floor(prebuilt, tmp_path / "floor")
    reindex(sessions=tmp_path / "sessions", index=tmp_path / "ours", workers=1)
    floor = tantivy.Index.open(str(tmp_path / "floor"))
    floor.register_tokenizer(memory_index.TEXT_TOKENIZER, memory_index.ANALYZER)
    ours = memory_index.open_index(tmp_path / "ours").searcher()
    words = memory_index.analyze(searchable(text))  # (as the normalizer hands it over)
    assert "钩" in words and "zürich" in words and "ready" in words
    for word in words:
        query = tantivy.Query.term_query(memory_index.SCHEMA, "text", word)
        assert floor.searcher().search(query, 10).count == ours.search(query, 10).count == 1, word
