"""Fake homes for the Catui and Fabro tests: the fixtures copied where the agents put them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from .conftest import FIXTURES
from .stores import cursor_store as cursor_store

CATUI = FIXTURES / "agents" / "catui"
FABRO = FIXTURES / "agents" / "fabro"
FIXTURE_CWD = "/home/dev/catui-demo"
"""The ``cwd`` the Catui fixture sessions name (rewritten to the copied workspace)."""


@dataclass(frozen=True, slots=True)
class CatuiHome:
    home: Path
    """What ``$CATUI_HOME`` names (holds ``agents/default/sessions``)."""
    sessions: Path
    workspace: Path
    traces: Path

    def session(self, session_id: str) -> Path:
        return next(self.sessions.rglob(f"*_{session_id}.jsonl"))


def catui_home(base: Path, name: str = "catui") -> CatuiHome:
    """The Catui fixtures under ``base``: ``<name>/agents/default/sessions/--<cwd>--/`` whose
    session headers name ``base/catui-demo`` (which holds the traces) as their ``cwd``
    (``name=".catui"`` with ``base`` as HOME: where Catui writes by default)."""
    home = base / name
    workspace = base / "catui-demo"
    shutil.copytree(CATUI / "catui-demo", workspace)
    source = CATUI / "home" / ".catui" / "agents" / "default" / "sessions"
    folder = home / "agents" / "default" / "sessions" / (
        "--" + str(workspace).lstrip("/").replace("/", "-") + "--")
    folder.mkdir(parents=True)
    for path in source.rglob("*.jsonl"):
        lines = path.read_bytes().split(b"\n")
        header = orjson.loads(lines[0])
        assert header["cwd"] == FIXTURE_CWD
        header["cwd"] = str(workspace)
        (folder / path.name).write_bytes(b"\n".join([orjson.dumps(header), *lines[1:]]))
    return CatuiHome(home, home / "agents" / "default" / "sessions", workspace,
                     workspace / ".catui" / "traces")


def fabro_exports(base: Path) -> Path:
    """The Fabro fixture exports copied to ``base/fabro-exports`` (a folder a user names)."""
    target = base / "fabro-exports"
    shutil.copytree(FABRO, target, ignore=shutil.ignore_patterns("*.md"))
    return target


LOCATION_VARIABLES = (
    "FABRIC_MEMORY_SESSIONS", "FABRIC_MEMORY_HOME", "FABRIC_MEMORY_AGENTS",
    "FABRIC_MEMORY_EXTRA_SESSIONS", "PI_CODING_AGENT_DIR", "PI_CODING_AGENT_SESSION_DIR",
    "PI_CONFIG_DIR", "CLAUDE_CONFIG_DIR", "CODEX_HOME", "CATUI_HOME", "CATUI_AGENTS_DIR",
    "CATUI_CODING_AGENT_DIR", "COPILOT_HOME", "XDG_STATE_HOME", "KIMI_SHARE_DIR",
    "GOOSE_PATH_ROOT", "XDG_DATA_HOME", "GEMINI_CLI_HOME", "XDG_CONFIG_HOME", "APPDATA",
    "QWEN_RUNTIME_DIR", "CONTINUE_GLOBAL_DIR", "FACTORY_HOME", "CLINE_DIR", "CLINE_DATA_DIR")


def fake_home(base: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty HOME with no location variable set and the index in ``base/fm``."""
    for variable in LOCATION_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    home = base / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("FABRIC_MEMORY_HOME", str(base / "fm"))
    return home


def line_at(path: Path, number: int) -> str:
    """Line ``number`` (1-based) of ``path``, as ``expand`` returns an entry's text."""
    return path.read_bytes().split(b"\n")[number - 1].decode()


def cli_json(*argv: str) -> Any:
    """``fabric-memory ARGV --json`` run as a user runs it, in this test's environment."""
    done = subprocess.run([sys.executable, "-m", "fabric_memory.cli", *argv, "--json"],
                          capture_output=True, check=True, env=dict(os.environ))
    return orjson.loads(done.stdout)


def mcp_answers(calls: list[tuple[str, dict[str, Any]]], cwd: Path | None = None) -> list[Any]:
    """The structured answers of a real ``fabric-memory serve`` (started with no folder,
    in this test's environment, in ``cwd`` when given) to ``(tool, arguments)`` calls, in
    order; an argument holding ``"$next"`` is the previous answer's ``next``."""
    answers: list[Any] = []

    async def ask() -> None:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "fabric_memory.cli", "serve", "--no-watch"],
            env={**os.environ, "PYTHONUNBUFFERED": "1"}, cwd=cwd)
        async with Client(params) as client:
            for tool, arguments in calls:
                if arguments == {"$next": True}:
                    arguments = answers[-1]["next"]
                answer = await client.call_tool(tool, arguments)
                assert not answer.is_error, answer
                answers.append(answer.structured_content)

    anyio.run(ask)
    return answers


AGENT_FIXTURES = FIXTURES / "agents"


def agent_home(home: Path, agent: str, folder: str) -> Path:
    """The ``agent``'s fixture ``folder`` copied where the agent writes by default under
    ``home`` (``fixtures/agents/<agent>/<folder>`` → ``home/.<agent>/<folder>``); the copy's
    root."""
    target = home / f".{agent}" / folder
    shutil.copytree(AGENT_FIXTURES / agent / folder, target)
    return target


def goose_home(home: Path) -> Path:
    """Goose's folder under ``home`` (``~/.local/share/goose/sessions``) with the fixture
    database built from its SQL (Goose's schema) and the earlier JSON Lines session."""
    import sqlite3

    folder = home / ".local" / "share" / "goose" / "sessions"
    folder.mkdir(parents=True)
    source = AGENT_FIXTURES / "goose"
    shutil.copy(source / "20250701_100000.jsonl", folder)
    db = sqlite3.connect(folder / "sessions.db")
    try:
        db.executescript((source / "sessions.sql").read_text(encoding="utf-8"))
    finally:
        db.close()
    return folder
