"""export: a real session as Markdown holds every user message and tool call, in order,
each under an address expand takes back; secrets stay masked; HTML and JSON say the same."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest

from fabric_memory.cli import main
from fabric_memory.memory.export import export, render_export
from fabric_memory.memory.reindex import reindex
from fabric_memory.sources import read_source

from .memory_builder import SessionBuilder

REPO = Path(__file__).resolve().parents[1]
REAL = [REPO / "fixtures" / "handoff" / "entire-commit-and-failed-check.jsonl",
        REPO / "fixtures" / "agents" / "claude-code" / "tools_and_summary.jsonl",
        REPO / "fixtures" / "pi-mono-real" / "session.jsonl"]


@pytest.fixture
def indexed(tmp_path: Path, request: pytest.FixtureRequest) -> dict[str, Any]:
    fixture: Path = request.param
    sessions = tmp_path / "sessions"
    (sessions / "s").mkdir(parents=True)
    copy = sessions / "s" / fixture.name
    shutil.copy(fixture, copy)
    reindex(sessions=sessions, index=tmp_path / "index", workers=1)
    return {"sessions": sessions, "index": tmp_path / "index", "copy": copy}


def expected_marks(path: Path) -> list[str]:
    """What must appear, in this order: each user message's and each tool-calling entry's
    heading (its address and role), and each call's ``call name(`` after its heading."""
    marks = []
    for entry in read_source(path).entries:
        view = entry.view
        if view.role == "user" and view.text.strip():
            marks.append(f"### {entry.id} user ")
        if view.tool_calls:
            marks.append(f"### {entry.id} assistant ")
            marks.extend(f"call {call.name}(" for call in view.tool_calls)
    return marks


@pytest.mark.parametrize("indexed", REAL, ids=[p.name for p in REAL], indirect=True)
def test_a_real_session_exports_every_user_message_and_tool_call_in_order(
        indexed: dict[str, Any]) -> None:
    """Claude Code's and Pi's real sessions: the Markdown holds each mark in file order, and
    every heading's address expands back to that entry."""
    copy = indexed["copy"]
    session_id = read_source(copy).session_id
    exported = export(session_id, index=indexed["index"], sessions=indexed["sessions"])
    markdown = render_export(exported, "markdown")
    marks = expected_marks(copy)
    assert any(m.endswith(" user ") for m in marks)
    assert any(m.startswith("call ") for m in marks)
    at = 0
    for mark in marks:
        found = markdown.find(mark, at)
        assert found >= 0, f"{mark!r} missing or out of order"
        at = found + len(mark)
    [session] = exported["sessions"]
    assert len(session["entries"]) == len(read_source(copy).entries)
    for address in [e["address"] for e in session["entries"]][:: max(len(marks) // 4, 1)]:
        assert f"\n### {address} " in markdown
        assert main(["expand", session_id, "--address", address, "--index",
                     str(indexed["index"]), "--sessions", str(indexed["sessions"])]) == 0


def test_secrets_and_private_text_stay_masked_in_every_format(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A token and a <private> span are masked in Markdown, HTML and JSON, and in a search
    export; --show-secrets shows them; --output writes the file owner-only."""
    sessions = tmp_path / "sessions"
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    builder = SessionBuilder(sessions / "p" / "s.jsonl")
    builder.user(f"use {token} for the deploy; <private>door code 4711</private> ok")
    builder.assistant_call("c1", "bash", {"command": f"gh auth login --with-token {token}"})
    builder.tool_result("c1", "bash")
    builder.write()
    where = ["--sessions", str(sessions), "--index", str(tmp_path / "index")]
    reindex(sessions=sessions, index=tmp_path / "index", workers=1)
    for argv in ([builder.session_id], ["--query", "deploy"]):
        for form in ("markdown", "html", "json"):
            assert main(["export", *argv, "--format", form, *where]) == 0
            out = capsys.readouterr().out
            assert token not in out and "4711" not in out, form
            assert "[REDACTED:github-token]" in out and "[REDACTED:private]" in out
    assert main(["export", builder.session_id, "--show-secrets", *where]) == 0
    assert token in capsys.readouterr().out
    target = tmp_path / "out.md"
    assert main(["export", builder.session_id, "--output", str(target), *where]) == 0
    assert "wrote" in capsys.readouterr().out
    assert target.stat().st_mode & 0o777 == 0o600 and "e001 user" in target.read_text()
    assert main(["export", builder.session_id, "--format", "json", *where]) == 0
    value = orjson.loads(capsys.readouterr().out)
    assert [e["address"] for e in value["sessions"][0]["entries"]] == ["e001", "e002", "e003"]


def test_a_range_exports_only_those_entries(tmp_path: Path) -> None:
    """--range FIRST:LAST keeps those entries; a wrong call says how to call it."""
    sessions = tmp_path / "sessions"
    builder = SessionBuilder(sessions / "p" / "s.jsonl")
    for n in range(6):
        builder.user(f"message {n}")
    builder.write()
    reindex(sessions=sessions, index=tmp_path / "index", workers=1)
    exported = export(builder.session_id, range="e002:e004", index=tmp_path / "index",
                      sessions=sessions)
    assert [e["address"] for e in exported["sessions"][0]["entries"]] == ["e002", "e003", "e004"]
    assert main(["export", "--index", str(tmp_path / "index")]) == 2
