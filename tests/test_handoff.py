"""``fabric-memory handoff``: the SessionStart(compact) packet for Claude Code and Codex —
the span the host summarized, addressed lines that expand, a bound, and failing open."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from fabric_memory.errors import HandoffError
from fabric_memory.handoff import (
    DEFAULT_MAX_BYTES,
    read_hook_input,
    render_packet,
    run_handoff,
)

from .transcripts import ClaudeTranscript, CodexRollout, exec_output

ADDRESS = re.compile(r"^- \[([^\]]+)\] ", re.MULTILINE)


def _event(session_id: str, path: Path, source: str = "compact", **extra: Any) -> bytes:
    return orjson.dumps({"session_id": session_id, "transcript_path": str(path),
                         "cwd": "/home/dev/projects/ledger",
                         "hook_event_name": "SessionStart", "source": source, **extra})


def _packet(output: str | None) -> str:
    assert output is not None
    value = orjson.loads(output)
    assert value["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    return str(value["hookSpecificOutput"]["additionalContext"])


def _run(data: bytes, tmp_path: Path, **options: Any) -> tuple[str | None, str]:
    """The hook in-process: its output and what it logged."""
    log = tmp_path / "handoff.log"
    run = run_handoff(data, log=log, **options)
    return run.output, log.read_text() if log.exists() else ""


def _claude_two_compactions() -> tuple[ClaudeTranscript, dict[str, str]]:
    t = ClaudeTranscript()
    t.user("Fix the cent rounding in ledger/report.py. Never use floats for money.")
    old = t.tool("Edit", {"file_path": "ledger/report.py", "old_string": "float(x)",
                          "new_string": "Decimal(x)"}, "ok")
    t.compact("This session is being continued. The rounding was fixed in report.py.")
    marks = {"old": old}
    marks["task"] = t.user("Now document it in notes/money.md, run the tests and commit.")
    marks["write"] = t.tool("Write", {"file_path": "notes/money.md",
                                      "content": "# Money\n\n"}, "ok")
    marks["failed"] = t.tool("Bash", {"command": "pytest -q tests/test_money.py"},
                             "Exit code 1\nFAILED tests/test_money.py::test_cent - assert",
                             is_error=True)
    marks["commit"] = t.tool("Bash", {"command": "git commit -am 'Document money'"},
                             "[main 7c1d2e3] Document money\n 1 file changed")
    marks["todo"] = t.tool("TodoWrite", {"todos": [
        {"content": "Make test_cent pass", "status": "in_progress"}]}, "ok")
    marks["reply"] = t.assistant("The cent test still fails; next I fix the fixture.")
    return t, marks


def test_claude_code_second_compaction_speaks_of_the_work_after_the_first(
        tmp_path: Path) -> None:
    """Claude Code runs the hook before writing its boundary: the packet covers everything
    after the last boundary on disk (the second span), each fact with its address."""
    t, marks = _claude_two_compactions()
    path = t.write(tmp_path / f"{t.session_id}.jsonl")
    output, log = _run(_event(t.session_id, path), tmp_path)
    packet = _packet(output)
    assert log == ""
    assert f"[{marks['write']}] notes/money.md: created (2 lines)" in packet
    assert f"[{marks['commit']}] commit 7c1d2e3 on main: Document money" in packet
    assert (f"[{marks['failed']}] check: `pytest -q tests/test_money.py` last run failed "
            "(exit 1): FAILED tests/test_money.py::test_cent") in packet
    assert f"[{marks['todo']}] open: in_progress: Make test_cent pass" in packet
    assert f'[{marks["task"]}] task: "Now document it in notes/money.md' in packet
    assert "ledger/report.py" not in packet and marks["old"] not in packet
    assert f"fabric-memory expand {t.session_id} --address <address>" in packet
    assert len(output.encode()) <= DEFAULT_MAX_BYTES  # type: ignore[union-attr]


def test_codex_span_lies_between_the_compacted_items(tmp_path: Path) -> None:
    """Codex writes its compacted item before the hook: the span is between the previous
    compacted item and the last; lines the host's summary states verbatim are left out."""
    r = CodexRollout()
    r.user("Speed up the export.")
    early = r.call("exec_command", {"cmd": "git commit -am 'first'"},
                   exec_output(0, "[main 1111111] first"))
    r.compacted("Earlier: the export was profiled.")
    r.user("Fix the last row of the export and commit.")
    failed = r.call("exec_command", {"cmd": "pytest -q"}, exec_output(1, "FAILED t::last_row"))
    patch = r.patch("*** Begin Patch\n*** Update File: ledger/export.py\n@@\n-    n - 1\n"
                    "+    n\n*** End Patch")
    commit = r.call("shell", {"command": ["bash", "-lc", "git commit -am 'Export every row'"]},
                    orjson.dumps({"output": "[main 2222222] Export every row",
                                  "metadata": {"exit_code": 0}}).decode())
    r.compacted('The user asked: "Fix the last row of the export and commit."')
    path = r.write(tmp_path / f"rollout-2026-07-01T10-00-00-{r.session_id}.jsonl")
    packet = _packet(_run(_event(r.session_id, path, model="gpt-5-codex",
                                 permission_mode="default"), tmp_path)[0])
    assert f"[L{patch}] ledger/export.py: edit `- n - 1` -> `+ n`" in packet
    assert f"[L{commit}] commit 2222222 on main: Export every row" in packet
    assert f"[L{failed}] check: `pytest -q` last run failed (exit 1)" in packet
    assert "1111111" not in packet and f"[L{early}]" not in packet
    assert "Fix the last row" not in packet  # the host's summary says it verbatim


def test_codex_remote_compaction_still_gets_a_packet(tmp_path: Path) -> None:
    """A remote compaction (empty message, encrypted item) leaves the packet as the only
    readable handoff: it covers the whole span before it."""
    r = CodexRollout()
    task = r.user("Rename the export module.")
    patch = r.patch("*** Begin Patch\n*** Update File: a.py\n*** Move to: b.py\n@@\n-x\n+y\n"
                    "*** End Patch")
    r.compacted("")
    path = r.write(tmp_path / "rollout.jsonl")
    packet = _packet(_run(_event(r.session_id, path), tmp_path)[0])
    assert f'[L{task}] task: "Rename the export module."' in packet
    assert f"[L{patch}] a.py: moved to b.py" in packet


def test_every_address_expands_before_any_reindex(tmp_path: Path) -> None:
    """Each address the packet prints expands through `fabric-memory expand` to the line it
    names, with no index built (the session is found by its id in Claude Code's folder)."""
    t, _ = _claude_two_compactions()
    folder = tmp_path / "claude" / "projects" / "-home-dev-projects-ledger"
    folder.mkdir(parents=True)
    path = t.write(folder / f"{t.session_id}.jsonl")
    packet = _packet(_run(_event(t.session_id, path), tmp_path)[0])
    addresses = sorted({part.strip() for found in ADDRESS.findall(packet)
                        for part in found.split("...")})
    assert len(addresses) >= 5
    env = {**os.environ, "CLAUDE_CONFIG_DIR": str(tmp_path / "claude"),
           "FABRIC_MEMORY_HOME": str(tmp_path / "home"), "HOME": str(tmp_path)}
    env.pop("FABRIC_MEMORY_SESSIONS", None)
    argv = [sys.executable, "-m", "fabric_memory.cli", "expand", t.session_id, "--raw",
            "--json", *(arg for a in addresses for arg in ("--address", a))]
    done = subprocess.run(argv, capture_output=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    page = orjson.loads(done.stdout)
    lines = path.read_bytes().split(b"\n")
    got = {entry["address"]: entry for entry in page["entries"]}
    assert set(got) == set(addresses)
    for address, entry in got.items():
        assert orjson.loads(lines[entry["line"] - 1])["uuid"] == address


def test_the_packet_stays_within_its_bound_and_names_what_it_cut(tmp_path: Path) -> None:
    """A span with more than fits: the output stays within --max-bytes and each cut
    section names how many lines it left out and the expand call that reads them."""
    t = ClaudeTranscript()
    t.user("Touch many files.")
    for n in range(120):
        t.tool("Edit", {"file_path": f"src/module_{n:03d}.py", "old_string": f"a = {n}",
                        "new_string": f"a = {n + 1}  # a longer line of code to make room"}, "ok")
    path = t.write(tmp_path / "s.jsonl")
    output, _ = _run(_event(t.session_id, path), tmp_path, max_bytes=2048)
    assert output is not None and len(output.encode()) <= 2048
    packet = _packet(output)
    assert "module_119.py" in packet  # the latest change is kept
    assert "more [" in packet and f"`fabric-memory expand {t.session_id} --range " in packet


def test_render_packet_drops_whole_sections_rather_than_overflow() -> None:
    """However little room there is, the output is never longer than the bound."""
    from fabric_memory.handoff import Line, Section

    sections = [Section("Unfinished", [Line("L1", "L1", "x" * 900)]),
                Section("Commits", [Line("L2", "L2", "y" * 900)])]
    for bound in (1024, 1500, 2500):
        assert len(render_packet(sections, "s", "L1", "L2", 2, bound).encode()) <= bound


def test_hook_input_errors_name_the_json_path() -> None:
    """A missing or mistyped field is named by its JSON path."""
    with pytest.raises(HandoffError, match=r"\$\.transcript_path must be a non-empty string"):
        read_hook_input(b'{"session_id": "s", "hook_event_name": "SessionStart", '
                        b'"source": "compact"}')
    with pytest.raises(HandoffError, match="not JSON"):
        read_hook_input(b"{nope")


def test_other_sources_print_nothing_and_log_nothing(tmp_path: Path) -> None:
    """A SessionStart that is no compaction (startup, resume, clear) gets no packet."""
    t, _ = _claude_two_compactions()
    path = t.write(tmp_path / "s.jsonl")
    assert _run(_event(t.session_id, path, source="startup"), tmp_path) == (None, "")


def _hook(data: bytes, home: Path, *extra: str) -> tuple[subprocess.CompletedProcess[bytes],
                                                          float]:
    env = {**os.environ, "FABRIC_MEMORY_HOME": str(home)}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "fabric_memory.cli", "handoff", *extra],
                          input=data, capture_output=True, env=env, timeout=60)
    return done, time.monotonic() - started


def _pi_session(path: Path) -> Path:
    path.write_text('{"type":"session","version":3,"id":"pi-1","timestamp":'
                    '"2026-07-01T10:00:00.000Z","cwd":"/x"}\n')
    return path


FAILURES = {
    "malformed stdin": lambda tmp: b'{"session_id": "s", "transcript_path": ',
    "no transcript": lambda tmp: _event("s", tmp / "missing.jsonl"),
    "unknown format": lambda tmp: _event("s", _write(tmp / "x.jsonl", b'{"kind": "other"}\n')),
    "a Pi session": lambda tmp: _event("pi-1", _pi_session(tmp / "pi.jsonl")),
    "another session's transcript": lambda tmp: _event(
        "not-this-one", ClaudeTranscript().write(tmp / "c.jsonl")),
}


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("case", list(FAILURES), ids=list(FAILURES))
def test_the_hook_fails_open(case: str, tmp_path: Path) -> None:
    """Bad input of any kind: exit 0, nothing on stdout, one line in the log naming why."""
    t = ClaudeTranscript()
    t.user("hello")
    data = FAILURES[case](tmp_path)
    done, _ = _hook(data, tmp_path / "home")
    assert (done.returncode, done.stdout) == (0, b"")
    log = (tmp_path / "home" / "handoff.log").read_text().splitlines()
    assert len(log) == 1 and " handoff " in log[0]


def test_a_50_mb_transcript_fails_open_within_the_budget(tmp_path: Path) -> None:
    """A 50 MB transcript is not read: exit 0 well within the budget, nothing on stdout,
    the reason in the log."""
    t, _ = _claude_two_compactions()
    path = t.write(tmp_path / "big.jsonl")
    line = orjson.dumps({**t.lines[-1], "message": {"role": "assistant", "content": [
        {"type": "text", "text": "x" * 50_000}]}}) + b"\n"
    with path.open("ab") as stream:
        for _ in range(50 * 2**20 // len(line) + 1):
            stream.write(line)
    assert path.stat().st_size >= 50 * 2**20
    done, took = _hook(_event(t.session_id, path), tmp_path / "home")
    assert (done.returncode, done.stdout) == (0, b"")
    assert took < 2.0 + 1.5  # the budget, and the interpreter's start
    assert "MiB, above the 32 MiB" in (tmp_path / "home" / "handoff.log").read_text()


def test_a_transcript_appended_to_while_read_fails_open(tmp_path: Path) -> None:
    """A transcript another process keeps appending to: exit 0, nothing on stdout, logged."""
    t, _ = _claude_two_compactions()
    path = t.write(tmp_path / "live.jsonl")
    line = orjson.dumps(t.lines[-1]) + b"\n"
    stop = threading.Event()

    def append() -> None:
        with path.open("ab", buffering=0) as stream:
            while not stop.is_set():
                stream.write(line[: len(line) // 2])  # a half-written line, then the rest
                time.sleep(0.0005)
                stream.write(line[len(line) // 2:])

    writer = threading.Thread(target=append, daemon=True)
    writer.start()
    try:
        output, log = _run(_event(t.session_id, path), tmp_path)
    finally:
        stop.set()
        writer.join(5)
    assert output is None
    # (on a loaded machine the growing file may outlast the budget first: also a fail-open)
    assert len(log.splitlines()) == 1
    assert "being written while read" in log or "time budget" in log


def test_the_time_budget_passed_prints_nothing(tmp_path: Path) -> None:
    """Past its time budget the hook returns at once with no output, the reason logged,
    and says its worker is still running (the command then exits)."""
    t = ClaudeTranscript()
    t.user("Work through many files.")
    for n in range(3000):
        t.tool("Read", {"file_path": f"src/m{n}.py"}, "x" * 200)
    path = t.write(tmp_path / "s.jsonl")
    started = time.monotonic()
    run = run_handoff(_event(t.session_id, path), budget_s=0.01, log=tmp_path / "log")
    assert time.monotonic() - started < 1.0
    assert (run.output, run.running) == (None, True)
    assert "time budget of 0.01 s passed" in (tmp_path / "log").read_text()
