"""``fabric-memory quickstart``: the user's own sessions when an agent folder holds one,
else the bundled samples into the clone's own index; a recall and the sessions shown, and
every address it prints expands."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import orjson

from fabric_memory.quickstart import SAMPLES, SAMPLES_HOME

from .conftest import FIXTURES, REPO

LOCATIONS = ("FABRIC_MEMORY_SESSIONS", "FABRIC_MEMORY_HOME", "FABRIC_MEMORY_AGENTS",
             "FABRIC_MEMORY_EXTRA_SESSIONS", "PI_CODING_AGENT_DIR", "PI_CODING_AGENT_SESSION_DIR",
             "PI_CONFIG_DIR", "CLAUDE_CONFIG_DIR", "CODEX_HOME", "CATUI_HOME")


def run(home: Path, *argv: str, **extra: str) -> subprocess.CompletedProcess[str]:
    """``fabric-memory ARGV`` with ``home`` as HOME and no location variable of ours."""
    env = {k: v for k, v in os.environ.items() if k not in LOCATIONS}
    env.update(HOME=str(home), **extra)
    return subprocess.run([sys.executable, "-m", "fabric_memory.cli", *argv], cwd=home,
                          env=env, capture_output=True, text=True, timeout=120, check=False)


def test_without_sessions_it_indexes_the_samples_into_the_clone(tmp_path: Path) -> None:
    """With no agent folder holding a session, the bundled samples go into the clone's
    .fabric-memory/ index (never the user's), the output says so, shows failed Fabric
    operations and the sessions, and each printed expand command reads its entry back in
    the environment the output says to export."""
    done = run(tmp_path, "quickstart", FABRIC_MEMORY_HOME=str(tmp_path / "mine"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("No agent folder holds a session yet, so the bundled samples")
    assert f"--sessions {SAMPLES} --index {SAMPLES_HOME / 'index'}" in done.stdout
    assert not (tmp_path / "mine").exists()
    exported = dict(re.findall(r"(FABRIC_MEMORY_\w+)=(\S+)", done.stdout.splitlines()[0]))
    assert exported == {"FABRIC_MEMORY_HOME": str(SAMPLES_HOME),
                        "FABRIC_MEMORY_SESSIONS": str(SAMPLES)}
    expands = re.findall(r"expand: fabric-memory (expand .+)", done.stdout)
    assert expands
    for command in expands:
        page = run(tmp_path, *command.split(), "--json", **exported)
        assert page.returncode == 0, page.stderr
        assert orjson.loads(page.stdout)["entries"]


def test_with_sessions_it_indexes_the_users_own(tmp_path: Path) -> None:
    """A Claude Code session in ~/.claude/projects makes quickstart index the user's
    sessions into the default index, show that user's prompts, and list the session."""
    project = tmp_path / ".claude" / "projects" / "-home-me-app"
    project.mkdir(parents=True)
    shutil.copy(FIXTURES / "agents" / "claude-code" / "tools_and_summary.jsonl", project)
    done = run(tmp_path, "quickstart", "--json", FABRIC_MEMORY_HOME=str(tmp_path / "fm"))
    assert done.returncode == 0, done.stderr
    report = orjson.loads(done.stdout)
    assert report["source"] == "yours"
    assert report["index"] == str(tmp_path / "fm" / "index")
    assert report["reindex"]["indexed"] == 1
    assert report["recall"]["hits"] and {h["role"] for h in report["recall"]["hits"]} == {"user"}
    assert [s["agent"] for s in report["sessionsList"]["sessions"]] == ["claude-code"]
    assert report["recallCommand"] == "fabric-memory recall --role user --limit 3"


def test_a_whole_file_json_chat_alone_counts_as_the_users_sessions(tmp_path: Path) -> None:
    """A Gemini CLI chat written as one JSON file (no ``*.jsonl`` anywhere) is the user's
    own session: quickstart indexes it, not the bundled samples."""
    chats = tmp_path / ".gemini" / "tmp" / "a1b2c3" / "chats"
    chats.mkdir(parents=True)
    shutil.copy(FIXTURES / "agents" / "gemini" / "authored" /
                "session-2026-03-02T09-00-7f3a9c2e.json", chats)
    done = run(tmp_path, "quickstart", "--json", FABRIC_MEMORY_HOME=str(tmp_path / "fm"))
    assert done.returncode == 0, done.stderr
    report = orjson.loads(done.stdout)
    assert report["source"] == "yours"
    assert [s["agent"] for s in report["sessionsList"]["sessions"]] == ["gemini"]


def test_samples_stay_out_of_the_package() -> None:
    """The samples quickstart falls back to are the clone's fixtures/sessions."""
    assert SAMPLES == REPO / "fixtures" / "sessions" and SAMPLES.is_dir()
