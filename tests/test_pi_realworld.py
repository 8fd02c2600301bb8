"""Old and odd session files read exactly as Pi 1.6.0 reads them.

``fixtures/pi-1.6.0-realworld`` holds real-world-style sessions made with Pi's own code by
``tests/pi/realworld.mjs`` (v1 and v2 files with one and two compactions, a v1 file that
ends on a compaction and a prefix of one, repeated header lines, lines without an id, a
malformed line, two objects glued on one line) and, in ``truth.json``, what Pi computes
from each: its branch, context, ``prepareCompaction`` at three settings and
``shouldCompact``. Version 1 entries get random ids from Pi, so entries are compared by
their physical line.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import orjson
import pytest

from fabric_memory import session as session_module
from fabric_memory.cli import main
from fabric_memory.compaction import Compaction, compact_session
from fabric_memory.compaction.prepare import (
    CompactionSettings,
    build_session_context,
    estimate_projected_context_tokens,
    prepare_compaction,
    should_compact,
)
from fabric_memory.errors import CompactionError
from fabric_memory.session import Session, read_session

from .conftest import FIXTURES, REPO

REALWORLD = FIXTURES / "pi-1.6.0-realworld"
PI_HOST = REPO / "tests" / "pi"
NODE = PI_HOST / "node_modules" / ".bin" / "node"
TRUTH: dict[str, Any] = orjson.loads((REALWORLD / "truth.json").read_bytes())
NAMES = sorted(TRUTH["files"])
SETTINGS = sorted(TRUTH["settings"])


@cache
def _session(name: str) -> Session:
    return read_session(REALWORLD / "sessions" / name)


def _settings(key: str) -> CompactionSettings:
    row = TRUTH["settings"][key]
    return CompactionSettings(row["enabled"], row["reserveTokens"], row["keepRecentTokens"])


def _id(session: Session, entry_id: str) -> str | None:
    """An entry id as the truth records it: Pi's ids of a v1 file are random, so none."""
    return entry_id if session.version >= 2 else None


def test_fixtures_cover_the_cases() -> None:
    """Every kind of file the issue names is in the set, with Pi's answers for it."""
    assert len(NAMES) == 13
    versions = {TRUTH["files"][name]["version"] for name in NAMES}
    assert versions == {1, 2, 3}
    cuts = [TRUTH["files"][name]["prepare"]["keep75000"] for name in NAMES]
    assert sum(cut is not None for cut in cuts) >= 5  # most files compact at 75,000


@pytest.mark.parametrize("name", NAMES)
def test_branch_matches_pi(name: str) -> None:
    """Entry count, leaf and active branch (physical lines, and ids for v2/v3) equal Pi's."""
    truth = TRUTH["files"][name]
    session = _session(name)
    assert session.version == truth["version"]
    assert len(session.entries) == truth["entryCount"]
    leaf = session.by_id.get(session.leaf_id) if session.leaf_id else None
    assert (leaf.line if leaf else None) == truth["leafLine"]
    branch = session.active_branch()
    assert [e.line for e in branch] == truth["branchLines"]
    assert [_id(session, e.id) for e in branch] == truth["branchIds"]


@pytest.mark.parametrize("name", NAMES)
def test_context_matches_pi(name: str) -> None:
    """The built context (message count, roles, source lines), its token estimate and
    shouldCompact at two windows equal Pi's."""
    truth = TRUTH["files"][name]
    session = _session(name)
    context = build_session_context(session.entries, session.leaf_id)
    assert len(context.messages) == truth["context"]["messageCount"]
    assert [item.role for item in context.messages] == truth["context"]["roles"]
    assert [p.entry.line for p in context.entries if p.messages] == truth["context"]["entryLines"]
    tokens = estimate_projected_context_tokens(context, session.active_branch()).tokens
    assert tokens == truth["contextTokens"]
    for window, expected in truth["shouldCompact"].items():
        assert should_compact(tokens, int(window), _settings("default")) is expected


@pytest.mark.parametrize("key", SETTINGS)
@pytest.mark.parametrize("name", NAMES)
def test_prepare_matches_pi(name: str, key: str) -> None:
    """prepareCompaction's cut (line and id), tokensBefore, split turn and message counts
    equal Pi's at default settings, at reserve 63/keep 1 and at keep 75,000."""
    expected = TRUTH["files"][name]["prepare"][key]
    session = _session(name)
    prepared = prepare_compaction(session.active_branch(), _settings(key))
    if expected is None:
        assert prepared is None
        return
    assert prepared is not None
    first = session.by_id[prepared.first_kept_entry_id]
    assert {
        "firstKeptLine": first.line,
        "firstKeptEntryId": _id(session, first.id),
        "tokensBefore": prepared.tokens_before,
        "isSplitTurn": prepared.is_split_turn,
        "messagesToSummarize": len(prepared.messages_to_summarize),
        "turnPrefixMessages": len(prepared.turn_prefix_messages),
    } == expected


@pytest.mark.parametrize("name", NAMES)
def test_compact_at_75000_cuts_where_pi_does(name: str) -> None:
    """``compact --keep-recent-tokens 75000`` compacts exactly when Pi prepares a
    compaction, asking to keep Pi's first kept entry."""
    expected = TRUTH["files"][name]["prepare"]["keep75000"]
    path = REALWORLD / "sessions" / name
    if expected is None:
        with pytest.raises(CompactionError, match="nothing to compact"):
            compact_session(path, _settings("keep75000"))
        return
    result = compact_session(path, _settings("keep75000"))
    assert isinstance(result.outcome, Compaction)
    requested = result.outcome.requested_first_kept_entry_id
    assert result.session.by_id[requested].line == expected["firstKeptLine"]
    assert result.outcome.tokens_before == expected["tokensBefore"]


def test_cli_compacts_the_v1_prefix_as_pi_would(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On the prefix of a v1 file with compactions, the CLI reports shouldCompact at a
    128,000 window and compacts at keep 75,000 (Pi does both)."""
    path = tmp_path / "v1-prefix.jsonl"
    shutil.copy(REALWORLD / "sessions" / "v1-prefix.jsonl", path)
    status = main(["compact", str(path), "--json", "--keep-recent-tokens", "75000",
                   "--context-window", "128000"])
    result = orjson.loads(capsys.readouterr().out)
    assert status == 0, result
    assert result["shouldCompact"] is True
    assert result["compaction"]["tokensBefore"] == TRUTH["files"]["v1-prefix.jsonl"][
        "prepare"]["keep75000"]["tokensBefore"]


def test_fixtures_are_what_pi_computes_now(tmp_path: Path) -> None:
    """Re-running the generator with the pinned Pi gives the committed files and truth,
    byte for byte, so the fixtures stay tied to Pi. CI installs Pi (``npm ci`` in
    tests/pi); there a missing install fails instead of skipping."""
    if not NODE.exists():
        message = f"Pi is not installed: run `npm ci --no-audit --no-fund` in {PI_HOST}"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message)
        pytest.skip(message)
    subprocess.run([str(NODE), str(PI_HOST / "realworld.mjs"), str(tmp_path)], check=True,
                   timeout=600, capture_output=True)
    made = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    committed = sorted(
        p.relative_to(REALWORLD)
        for p in REALWORLD.rglob("*")
        if p.is_file() and p.name != "README.md"
    )
    assert made == committed
    changed = [str(p) for p in made if (tmp_path / p).read_bytes() != (REALWORLD / p).read_bytes()]
    assert changed == [], (
        "regenerate: tests/pi/node_modules/.bin/node tests/pi/realworld.mjs "
        "fixtures/pi-1.6.0-realworld"
    )


def test_regeneration_check_fails_in_ci_without_pi(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under ``CI=true`` a missing Pi install fails the tie to Pi instead of skipping it."""
    monkeypatch.setattr(f"{__name__}.NODE", tmp_path / "no-node")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="npm ci"):
        test_fixtures_are_what_pi_computes_now(tmp_path)


def test_ignoring_first_kept_entry_index_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sabotage: a reader that leaves v1 compactions without firstKeptEntryId (the old
    behaviour) disagrees with Pi's context on the v1 files with compactions."""
    monkeypatch.setattr(session_module, "_first_kept_by_index", lambda raw, *_: raw)
    wrong = []
    for name in NAMES:
        session = read_session(REALWORLD / "sessions" / name)
        context = build_session_context(session.entries, session.leaf_id)
        if len(context.messages) != TRUTH["files"][name]["context"]["messageCount"]:
            wrong.append(name)
    assert {"v1-one-compaction.jsonl", "v1-two-compactions.jsonl", "v1-prefix.jsonl",
            "v1-ends-on-compaction.jsonl"} <= set(wrong)


def test_reading_strict_json_only_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sabotage: a reader that drops the lines only JSON.parse reads (a lone surrogate
    escape, a number past the double range) breaks Pi's branch on v3-odd-json."""
    monkeypatch.setattr(session_module, "_decode_as_javascript", lambda _: session_module._REFUSED)
    session = read_session(REALWORLD / "sessions" / "v3-odd-json.jsonl")
    truth = TRUTH["files"]["v3-odd-json.jsonl"]
    assert len(session.malformed) == 2
    assert [e.line for e in session.active_branch()] != truth["branchLines"]
