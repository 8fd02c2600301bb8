"""The summary of any agent's session at any cut (fabric_memory.compaction.span): the one
engine over Claude Code, Codex and Pi spans, line addresses, `compact --until`."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest

from fabric_memory.cli import main
from fabric_memory.compaction.span import summarize_session
from fabric_memory.errors import UsageError

from .conftest import FIXTURES
from .transcripts import CodexRollout, exec_output

CLAUDE = FIXTURES / "handoff" / "entire-two-compactions.jsonl"
ADDRESS = re.compile(r"^- \[([^\]]+)\] ", re.MULTILINE)
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def test_a_claude_code_session_is_summarized_at_a_cut() -> None:
    """A cut at a line address summarizes the branch through that entry only: a commit made
    after the cut is not in it, and is once the cut is the end; every address the summary
    shows is a line address (no entry's UUID)."""
    early = summarize_session(CLAUDE, until="L120")
    whole = summarize_session(CLAUDE)
    assert (early.agent, early.until, early.note) == ("claude-code", "L120", None)
    kept = early.summarized.live.first_kept_entry_id
    assert int(kept.removeprefix("L").split(".")[0]) > 120
    assert "0535c28" not in early.summary and "0535c28" in whole.summary
    for summary in (early, whole):
        body = summary.summary.split("\n---\n")[0]
        shown = {a.strip() for found in ADDRESS.findall(body) for a in found.split("...")}
        assert shown and all(re.fullmatch(r"L\d+(?:\.\d+)?", a) for a in shown), shown
        assert not any(UUID.search(a) for a in shown)
    assert int(early.summarized.live.last.removeprefix("L")) <= 120  # type: ignore[union-attr]


def test_a_cut_between_entries_ends_at_the_entry_before_and_says_so() -> None:
    """`--until` naming a line that holds no entry (bookkeeping) ends the span at the entry
    before it, with a note; an address the session lacks is a usage error naming it."""
    lines = CLAUDE.read_bytes().split(b"\n")
    gap = next(n for n, line in enumerate(lines, 1)
               if line.strip() and orjson.loads(line)["type"] == "progress" and n > 30)
    summary = summarize_session(CLAUDE, until=f"L{gap}")
    assert summary.note is not None and f"--until L{gap} names no entry" in summary.note
    assert int(summary.until.removeprefix("L").split(".")[0]) < gap  # type: ignore[union-attr]
    with pytest.raises(UsageError, match=r'--until "nope": no entry of .* has that address'):
        summarize_session(CLAUDE, until="nope")


def test_compact_summarizes_a_codex_rollout(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """`fabric-memory compact` on a Codex rollout prints the same engine's summary (its
    exact facts and commands with what they printed) instead of `not_a_session`; `--json`
    carries the summary and the state; `--append` is refused for it."""
    r = CodexRollout()
    r.user("Make the export listen on port 8443 and commit.")
    r.call("exec_command", {"cmd": "pytest -q"}, exec_output(1, "FAILED t::port - 8080 != 8443"))
    r.call("exec_command", {"cmd": "git commit -am 'Listen on 8443'"},
           exec_output(0, "[main 3c4d5e6] Listen on 8443"))
    path = r.write(tmp_path / f"rollout-2026-07-01T10-00-00-{r.session_id}.jsonl")
    assert main(["compact", str(path)]) == 0
    text = capsys.readouterr().out
    assert "## Exact facts" in text and "## Commands and what they printed" in text
    assert "commit 3c4d5e6 on main" in text and "8443" in text
    assert f"codex session {r.session_id}:" in text
    assert main(["compact", str(path), "--json"]) == 0
    value = orjson.loads(capsys.readouterr().out)
    assert value["agent"] == "codex" and value["summary"].startswith("# Compacted session")
    assert value["state"]["ledgers"]["commits"]["tail"]
    assert main(["compact", str(path), "--append"]) == 2
    assert "a codex session is printed, never appended" in capsys.readouterr().err


def test_a_pi_session_at_a_cut_is_a_summary_and_without_one_pi_compaction(
        capsys: pytest.CaptureFixture[str]) -> None:
    """A Pi session keeps Pi's own preparation when no cut is given; `--until` summarizes
    it through that entry with its own ids as addresses."""
    path = FIXTURES / "pi-mono-real" / "before-compaction.jsonl"
    assert main(["compact", str(path), "--json"]) == 0
    assert "compaction" in orjson.loads(capsys.readouterr().out)
    summary = summarize_session(path, until="L120")
    assert summary.agent == "pi" and summary.until == "L120"
