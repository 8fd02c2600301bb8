"""doctor: on a healthy install it says so and exits 0; for each breakage a user can make it
names the problem, and its printed fix, run as printed, makes it healthy again."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from fabric_memory.cli import build_parser, main
from fabric_memory.install.checks import host_checks
from fabric_memory.install.claude import claude_files, install_claude
from fabric_memory.install.codex import install_codex
from fabric_memory.install.goose import install_goose
from fabric_memory.install.mcp_json import HOSTS as JSON_HOSTS
from fabric_memory.install.mcp_json import install_json_host
from fabric_memory.memory.reindex import reindex
from fabric_memory.pi.install import install as install_pi

from .agent_homes import fake_home
from .memory_builder import SessionBuilder

PROGRAM = Path(sys.executable).parent / "fabric-memory"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Claude Code, Codex and Pi installed with a copy of the program in ``tmp/bin``, and
    an index of one session."""
    home = fake_home(tmp_path, monkeypatch)
    for variable in ("GEMINI_CLI_HOME", "GOOSE_PATH_ROOT", "APPDATA"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    sessions = tmp_path / "sessions"
    session = SessionBuilder(sessions / "--repo--" / "one.jsonl")
    session.user("a note")
    session.write()
    monkeypatch.setenv("FABRIC_MEMORY_SESSIONS", str(sessions))
    (home / ".codex").mkdir()
    copy = tmp_path / "bin" / "fabric-memory"
    copy.parent.mkdir()
    shutil.copy2(PROGRAM, copy)
    install_claude(program=copy)
    install_codex(program=copy)
    install_pi()
    for name in JSON_HOSTS:  # Copilot CLI, Cursor, and each mcpServers host added since
        install_json_host(name, program=copy)
    install_goose(program=copy)
    reindex(workers=1)
    return tmp_path


def run_doctor(capsys: pytest.CaptureFixture[str]) -> tuple[int, Any]:
    status = main(["doctor", "--json"])
    return status, orjson.loads(capsys.readouterr().out)


def broken(report: Any) -> list[dict[str, Any]]:
    return [f for f in report["findings"] if f["state"] == "broken"]


def repair(report: Any) -> None:
    """Run each printed fix once, as printed, in a shell."""
    for fix in dict.fromkeys(f["fix"] for f in broken(report)):
        subprocess.run(fix, shell=True, check=True, capture_output=True, timeout=120)


def test_a_healthy_install_says_so(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every host found is checked (its server answers initialize), the index verifies,
    the lock is free: exit 0 and the text says healthy."""
    status, report = run_doctor(capsys)
    assert status == 0 and report["healthy"], broken(report)
    oks = {(f["area"], f["check"]) for f in report["findings"] if f["state"] == "ok"}
    assert {("claude", "MCP server fabric-memory"), ("claude", "SessionStart(compact) hook"),
            ("codex", "MCP server fabric-memory"),
            ("codex", "SessionStart(compact) hook trust"), ("pi", "extension"),
            ("index", "schema"), ("index", "verify"),
            *((name, "MCP server fabric-memory") for name in [*JSON_HOSTS, "goose"])} <= oks
    assert main(["doctor"]) == 0
    assert "healthy: nothing is broken" in capsys.readouterr().out


def test_every_host_install_knows_has_a_row() -> None:
    """Each host ``install`` takes (the installers' list, as the CLI has it) is checked."""
    parser = build_parser("install")
    install = parser._subparsers._group_actions[0].choices["install"]  # type: ignore[union-attr]
    hosts = install._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert {row.name for row in host_checks()} == set(hosts)


def _move_program(base: Path) -> None:
    (base / "bin").rename(base / "moved")


def _remove_claude_hook(base: Path) -> None:
    settings = claude_files()[1]
    value = orjson.loads(settings.read_bytes())
    del value["hooks"]["SessionStart"]
    settings.write_bytes(orjson.dumps(value))


def _edit_codex_hook(base: Path) -> None:
    config = base / "home" / ".codex" / "config.toml"
    text = config.read_text()
    assert "timeout = 10" in text
    config.write_text(text.replace("timeout = 10", "timeout = 30", 1))


def _damage_index(base: Path) -> None:
    meta = next((base / "fm" / "index").glob("v*/meta.json"))
    meta.write_text("{ not json")


BREAKAGES: dict[str, tuple[Callable[[Path], None], str, str]] = {
    "executable moved": (_move_program, "claude", "does not exist"),
    "hook removed": (_remove_claude_hook, "claude", "not registered"),
    "codex hook edited": (_edit_codex_hook, "codex", "Codex skips the hook"),
    "index damaged": (_damage_index, "index", "meta.json"),
}


@pytest.mark.parametrize("name", list(BREAKAGES))
def test_each_breakage_is_named_and_its_fix_works(
        name: str, home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The breakage makes doctor exit 1 naming it; the fixes it prints, run as printed,
    bring it back to healthy."""
    breakage, area, said = BREAKAGES[name]
    breakage(home)
    status, report = run_doctor(capsys)
    assert status == 1 and not report["healthy"]
    named = [f for f in broken(report) if f["area"] == area and said in f["detail"]]
    assert named and all(f["fix"] for f in broken(report)), broken(report)
    repair(report)
    status, report = run_doctor(capsys)
    assert status == 0, broken(report)


@pytest.fixture
def orphan_lock(home: Path) -> Iterator[int]:
    """The index's writer lock held by a child that inherited it from a writer that died
    (what close_inherited_locks prevents in our own workers): its pid."""
    script = textwrap.dedent(f"""
        import os, sys, time
        from pathlib import Path
        from fabric_memory.memory.index import IndexLock
        lock = IndexLock(Path({str(home / 'fm' / 'index')!r}))
        lock.acquire(5)
        child = os.fork()
        if child == 0:
            os.setsid()
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            time.sleep(600)
            os._exit(0)
        print(child, flush=True)
        os._exit(0)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, check=True,
                          timeout=60)
    child = int(done.stdout)
    yield child
    with contextlib.suppress(ProcessLookupError):
        os.kill(child, signal.SIGKILL)


def test_a_lock_held_for_a_dead_writer_is_named_with_its_holder(
        home: Path, orphan_lock: int, capsys: pytest.CaptureFixture[str]) -> None:
    """The lock's writer is gone but a process it forked holds it: doctor names that
    process and prints the kill that frees the index; after it, healthy."""
    status, report = run_doctor(capsys)
    [lock] = [f for f in broken(report) if f["check"] == "writer lock"]
    assert f"held by pid {orphan_lock}" in lock["detail"]
    assert lock["fix"] == f"kill {orphan_lock}"
    repair(report)
    deadline = time.monotonic() + 30
    while os.path.exists(f"/proc/{orphan_lock}") and time.monotonic() < deadline:
        time.sleep(0.05)
    status, report = run_doctor(capsys)
    assert status == 0, broken(report)
