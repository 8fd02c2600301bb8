"""``fabric-memory handoff``: the SessionStart(compact) packet for Claude Code and Codex —
the span the host summarized, addressed lines that expand, a bound, and failing open."""

from __future__ import annotations

import os
import re
import subprocess
import sys
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

from .agent_homes import mcp_answers
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


def _at(path: Path, uuid: str) -> str:
    """The line address of the Claude Code line ``uuid`` in ``path`` (``L<line>``)."""
    for number, line in enumerate(path.read_bytes().split(b"\n"), 1):
        if line.strip() and orjson.loads(line).get("uuid") == uuid:
            return f"L{number}"
    raise AssertionError(f"no line {uuid} in {path}")


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
    at = {name: _at(path, uuid) for name, uuid in marks.items()}
    assert f"[{at['write']}] notes/money.md: created (2 lines)" in packet
    assert f"[{at['commit']}] commit 7c1d2e3 on main: Document money" in packet
    assert (f"[{at['failed']}] check: `pytest -q tests/test_money.py` last run failed "
            "(exit 1): FAILED tests/test_money.py::test_cent") in packet
    assert f"[{at['todo']}] open: in_progress: Make test_cent pass" in packet
    assert f'[{at["task"]}] task: "Now document it in notes/money.md' in packet
    assert "ledger/report.py" not in packet and f"[{at['old']}]" not in packet
    assert f"fabric-memory expand {t.session_id} --address <address>" in packet
    assert "c0000000-" not in packet  # line addresses, never the lines' UUIDs
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
    assert all(re.fullmatch(r"L\d+", address) for address in addresses)
    assert sorted(f"L{entry['line']}" for entry in page["entries"]) == addresses
    for entry in page["entries"]:
        assert orjson.loads(lines[entry["line"] - 1])["uuid"] == entry["address"]


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
    assert re.search(r"^- \.\.\. \d+ more in \[L\d+ \.\.\. L\d+\] \(`--range L\d+:L\d+`\)$",
                     packet, re.MULTILINE)
    assert f"`fabric-memory expand {t.session_id} --address <address>` (a range" in packet


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
    done, took = _hook(data, tmp_path / "home")
    assert (done.returncode, done.stdout) == (0, b"")
    assert took < 2.0 + 1.5  # the budget, and the interpreter's start
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
    """A transcript another process keeps appending to (half lines, then the rest): exit 0,
    nothing on stdout, logged."""
    t, _ = _claude_two_compactions()
    path = t.write(tmp_path / "live.jsonl")
    line = orjson.dumps(t.lines[-1]).decode()
    stop = tmp_path / "stop"
    writer = subprocess.Popen([sys.executable, "-c", (
        "import os, sys, time\n"
        "path, stop, line = sys.argv[1], sys.argv[2], sys.argv[3].encode() + b'\\n'\n"
        "fd = os.open(path, os.O_WRONLY | os.O_APPEND)\n"
        "end = time.monotonic() + 20\n"
        "while not os.path.exists(stop) and time.monotonic() < end:\n"
        "    os.write(fd, line[: len(line) // 2]); time.sleep(0.0002)\n"
        "    os.write(fd, line[len(line) // 2:])\n"
    ), str(path), str(stop), line])
    try:
        started = time.monotonic()
        while path.stat().st_size < 100 * len(line) and time.monotonic() - started < 20:
            time.sleep(0.01)  # until it is writing
        output, log = _run(_event(t.session_id, path), tmp_path)
    finally:
        stop.touch()
        writer.wait(30)
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


# --- real transcripts ------------------------------------------------------------------

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "handoff"
COMMIT_LINE = re.compile(r"^\[([^\]\s]+)(?: \(root-commit\))? ([0-9a-f]{7,40})\] ", re.MULTILINE)
CHECK_COMMAND = re.compile(r"^(?:cd \S+ && )?(go (?:build|test|vet)|make|golangci-lint)\b")


def _lines(path: Path) -> list[dict[str, Any]]:
    """Each line's JSON object, with its line address under ``@line``."""
    return [{**orjson.loads(line), "@line": f"L{number}"}
            for number, line in enumerate(path.read_bytes().splitlines(), 1) if line.strip()]


def _named(lines: list[dict[str, Any]], key: str) -> str:
    """The first ``key`` (``sessionId``, ``cwd``) a line names."""
    return str(next(line[key] for line in lines if key in line))


def _boundaries(lines: list[dict[str, Any]]) -> list[int]:
    return [at for at, line in enumerate(lines) if line.get("subtype") == "compact_boundary"]


def _at_hook_time(source: Path, lines: list[dict[str, Any]], upto: int, tmp_path: Path) -> Path:
    """The transcript as Claude Code leaves it when it runs the hook: everything before the
    boundary it is about to write."""
    kept = source.read_bytes().splitlines(keepends=True)[:upto]
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / f"{_named(lines, 'sessionId')}.jsonl"
    path.write_bytes(b"".join(kept))
    return path


def _span_facts(lines: list[dict[str, Any]]) -> dict[str, Any]:
    """What the span's raw lines say, read without fabric-memory: commits (hash → the
    address of the line reporting it), the files edited or written, and each check
    command's last run (command → address, failed)."""
    calls: dict[str, dict[str, Any]] = {}
    commits: dict[str, str] = {}
    files: set[str] = set()
    checks: dict[str, tuple[str, bool]] = {}
    for line in lines:
        content = (line.get("message") or {}).get("content")
        for block in content if isinstance(content, list) else []:
            if block.get("type") == "tool_use":
                calls[block["id"]] = block
            elif block.get("type") == "tool_result" and block["tool_use_id"] in calls:
                call = calls[block["tool_use_id"]]
                text = block["content"] if isinstance(block["content"], str) else "".join(
                    part.get("text", "") for part in block["content"])
                failed = block.get("is_error") is True
                if call["name"] == "Bash":
                    commits.update((found.group(2), line["@line"])
                                   for found in COMMIT_LINE.finditer(text))
                    command = call["input"]["command"]
                    if CHECK_COMMAND.match(command):  # keyed by the check itself
                        check = re.split(r"\s*(?:&&|\|\|?|;)\s*",
                                         command.removeprefix("cd "))[0 if
                                         not command.startswith("cd ") else 1]
                        checks[check] = (line["@line"], failed)
                elif call["name"] in ("Edit", "Write", "MultiEdit") and not failed:
                    files.add(call["input"]["file_path"])
    return {"commits": commits, "files": files, "checks": checks}


def test_a_real_claude_code_compaction_packet_names_its_work(tmp_path: Path) -> None:
    """On a real Claude Code 2.1 transcript at hook time, every commit, changed file and
    failed check of the compacted span is in the packet with its address, within the bound."""
    source = REAL / "entire-commit-and-failed-check.jsonl"
    lines = _lines(source)
    (boundary,) = _boundaries(lines)
    facts = _span_facts(lines[:boundary])
    assert facts["commits"] and facts["files"]
    assert any(failed for _, failed in facts["checks"].values())
    path = _at_hook_time(source, lines, boundary, tmp_path)
    output, log = _run(_event(_named(lines, "sessionId"), path), tmp_path)
    assert log == "" and output is not None and len(output.encode()) <= DEFAULT_MAX_BYTES
    packet = _packet(output)
    project = _named(lines, "cwd") + "/"
    for hash_, address in facts["commits"].items():
        assert re.search(rf"^- \[{address}(?:\.\d+)?\] commit {hash_} ", packet, re.MULTILINE)
    for file in facts["files"]:
        assert f"] {file.removeprefix(project)}: edit" in packet
    for command, (address, failed) in facts["checks"].items():
        if failed:
            assert re.search(rf"^- \[{address}(?:\.\d+)?\] check: `{re.escape(command)}` last "
                             r"run failed", packet, re.MULTILINE)


def test_the_same_span_when_the_boundary_is_already_on_disk(tmp_path: Path) -> None:
    """Had the host written its boundary and summary before the hook, the span is the same
    (nothing but the compaction follows the last marker); only what the host's summary
    now states verbatim (here the user's request) is left out."""
    source = REAL / "entire-commit-and-failed-check.jsonl"
    lines = _lines(source)
    before = _at_hook_time(source, lines, _boundaries(lines)[0], tmp_path / "a")
    after = tmp_path / "b" / source.name
    after.parent.mkdir()
    after.write_bytes(source.read_bytes())
    hook_time = _packet(_run(_event(_named(lines, "sessionId"), before), tmp_path / "a")[0])
    written = _packet(_run(_event(_named(lines, "sessionId"), after), tmp_path / "b")[0])
    summary = " ".join(next(line["message"]["content"] for line in lines
                            if line.get("isCompactSummary")).split())
    assert hook_time.splitlines()[1] == written.splitlines()[1]  # the same span
    left_out = [line for line in hook_time.splitlines() if line not in written.splitlines()]
    words = [line for line in left_out if line.startswith("- [")]
    assert len(words) == 1 and words[0].split('"')[1] in summary


def test_a_real_second_compaction_speaks_of_the_work_after_the_first(tmp_path: Path) -> None:
    """A real session compacted twice: at the second compaction the packet speaks of the
    work since the first (its commit, its files) and names no address from before it."""
    source = REAL / "entire-two-compactions.jsonl"
    lines = _lines(source)
    first, second = _boundaries(lines)
    path = _at_hook_time(source, lines, second, tmp_path)
    output, _ = _run(_event(_named(lines, "sessionId"), path), tmp_path)
    assert output is not None and len(output.encode()) <= DEFAULT_MAX_BYTES
    packet = _packet(output)
    earlier = {line["@line"] for line in lines[:first]}
    shown = {part.strip() for found in ADDRESS.findall(packet) for part in found.split("...")}
    assert shown and not shown & earlier
    facts = _span_facts(lines[first:second])
    assert facts["commits"]
    project = _named(lines, "cwd") + "/"
    for hash_ in facts["commits"]:
        assert f"commit {hash_} " in packet
    for file in facts["files"]:
        assert f"] {file.removeprefix(project)}: edit" in packet


def test_the_mcp_expand_tool_reads_a_packets_address_before_any_reindex(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The MCP `expand` tool, with the arguments the packet names, finds the session in
    Claude Code's folder although no index exists yet."""
    t, marks = _claude_two_compactions()
    folder = tmp_path / "claude" / "projects" / "-home-dev-projects-ledger"
    folder.mkdir(parents=True)
    path = t.write(folder / f"{t.session_id}.jsonl")
    packet = _packet(_run(_event(t.session_id, path), tmp_path)[0])
    assert f'{{"session": "{t.session_id}", "addresses": ["<address>"]}}' in packet
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude"))
    monkeypatch.setenv("FABRIC_MEMORY_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("FABRIC_MEMORY_SESSIONS", raising=False)
    commit = _at(path, marks["commit"])
    assert f"[{commit}] commit 7c1d2e3" in packet
    (page,) = mcp_answers([("expand", {"session": t.session_id, "addresses": [commit],
                                       "raw": True})])
    assert [entry["address"] for entry in page["entries"]] == [marks["commit"]]
    assert "7c1d2e3" in page["entries"][0]["text"]


def test_the_command_leaves_at_once_past_its_budget(tmp_path: Path) -> None:
    """Past --budget the process exits 0 at once with nothing on stdout (the read it gave
    up on is not waited for), the reason in the log."""
    t = ClaudeTranscript()
    t.user("Read many files.")
    for n in range(3000):
        t.tool("Read", {"file_path": f"src/m{n}.py"}, "x" * 2000)
    path = t.write(tmp_path / "s.jsonl")
    done, took = _hook(_event(t.session_id, path), tmp_path / "home", "--budget", "0.05")
    assert (done.returncode, done.stdout) == (0, b"")
    assert took < 3.5  # (the interpreter's start and imports, on a loaded machine)
    assert "time budget of 0.05 s passed" in (tmp_path / "home" / "handoff.log").read_text()


def test_a_cut_keeps_the_task_and_the_latest_corrections(tmp_path: Path) -> None:
    """With more of the user's words than fit, the packet keeps the first (the task) and
    the latest ones, and names the ones between with the call that reads them."""
    t = ClaudeTranscript()
    said = [t.user(f"Request number {n}: " + "please do the next careful thing " * 6)
            for n in range(40)]
    path = t.write(tmp_path / "s.jsonl")
    packet = _packet(_run(_event(t.session_id, path), tmp_path, max_bytes=2048)[0])
    assert f"[{_at(path, said[0])}] task: \"Request number 0:" in packet
    assert f"[{_at(path, said[-1])}] then: \"Request number 39:" in packet
    assert f"more in [{_at(path, said[1])} ... " in packet


def test_failures_fixed_later_are_not_open(tmp_path: Path) -> None:
    """A failed command that later works by another path or within a later chain, a failed
    write followed by a write of the same file, a failed check that later passes and a
    read of a missing file are not listed as open; a failure nothing fixed is, with its
    address."""
    t = ClaudeTranscript()
    t.user("Set up the build.")
    t.tool("Bash", {"command": "docker --version"}, "Exit code 127\ndocker: command not found",
           is_error=True)
    t.tool("Bash", {"command": "/usr/local/bin/docker --version"}, "Docker version 27.3.1")
    t.tool("Write", {"file_path": "ci/build.yml", "content": "a: 1\n"},
           "Error: parent folder does not exist", is_error=True)
    t.tool("Bash", {"command": "mkdir -p ci"}, "")
    t.tool("Write", {"file_path": "ci/build.yml", "content": "a: 1\n"}, "ok")
    t.tool("Bash", {"command": "cd web && npm test"}, "Exit code 1\n1 failing", is_error=True)
    t.tool("Bash", {"command": "npm test"}, "12 passing")
    t.tool("Bash", {"command": "mise run lint 2>&1"}, "Exit code 1\nlint failed", is_error=True)
    t.tool("Bash", {"command": "mise run lint && mise run test 2>&1 | tail -20"}, "ok")
    t.tool("Read", {"file_path": ".entire/REVIEW.md"}, "File does not exist.", is_error=True)
    still = t.tool("Bash", {"command": "./deploy.sh staging"}, "Exit code 2\nno such host",
                   is_error=True)
    path = t.write(tmp_path / "s.jsonl")
    packet = _packet(_run(_event(t.session_id, path), tmp_path)[0])
    open_part = packet.split("## Still open")[1].split("\n## ")[0]
    assert "docker" not in open_part and "build.yml" not in open_part
    assert "npm test" not in open_part and "mise run lint" not in open_part
    assert "REVIEW.md" not in open_part  # a lookup that found nothing is no open work
    assert f"[{_at(path, still)}] error: Bash `./deploy.sh staging` -> failed" in open_part
    assert "Docker version 27.3.1" in packet  # what the working command printed


def test_the_packet_names_what_the_engines_ledgers_no_longer_hold(tmp_path: Path) -> None:
    """More commands than the engine's bounded ledger keeps: the packet's section says how
    many it no longer holds and their address range, which expands."""
    t = ClaudeTranscript()
    t.user("Probe every port.")
    for n in range(150):
        t.tool("Bash", {"command": f"curl -s localhost:{8000 + n}/health"},
               f"port {8000 + n}: status ok, build 2026.{n}")
    path = t.write(tmp_path / "s.jsonl")
    packet = _packet(_run(_event(t.session_id, path), tmp_path)[0])
    section = packet.split("## Commands and what they printed (150)\n")[1]
    found = re.match(r"- \.\.\. (\d+) more not kept in \[(L\d+) \.\.\. (L\d+)\] "
                     r"\(`--range (L\d+):(L\d+)`\)\n", section)
    assert found, section[:300]
    assert int(found.group(1)) > 0 and found.group(2, 3) == found.group(4, 5)
    assert "localhost:8149/health" in section  # the latest run is shown
