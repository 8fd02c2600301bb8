"""The real Claude Code, Codex, GitHub Copilot, Gemini CLI, Qwen Code and OpenCode CLIs of
``tests/hosts`` (README's test command runs ``npm ci`` there), and an environment in which
they never reach the network."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

from .conftest import REPO

HOSTS = REPO / "tests" / "hosts"
CLAUDE = HOSTS / "node_modules" / ".bin" / "claude"
CODEX = HOSTS / "node_modules" / ".bin" / "codex"
COPILOT = HOSTS / "node_modules" / ".bin" / "copilot"
GEMINI = HOSTS / "node_modules" / ".bin" / "gemini"
QWEN = HOSTS / "node_modules" / ".bin" / "qwen"
OPENCODE = HOSTS / "node_modules" / "opencode-linux-x64" / "bin" / "opencode"
"""OpenCode's linux-x64 build: the binary ``opencode-ai``'s launcher runs on this machine."""


def host_cli(path: Path) -> str:
    """The CLI's path, with the one step that brings it when it is missing."""
    assert path.exists(), (f"{path} is missing: run `npm ci --no-audit --no-fund` in {HOSTS} "
                           "(README's test command does)")
    return str(path)


QUIET = {
    # Claude Code: no auto-update, telemetry, error reports or other non-essential traffic.
    "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_NON_ESSENTIAL_MODEL_CALLS": "1",
    "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1",
    # Codex: no update check (config also turns analytics and feedback off).
    "CODEX_DISABLE_UPDATE_CHECK": "1",
    # Copilot CLI: no auto-update (telemetry: --disable-client-telemetry on each run).
    "COPILOT_AUTO_UPDATE": "false",
    # OpenCode: no update, no models.dev catalogue fetch, no sharing.
    "OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    # Qwen Code: no notice about --yolo on every headless run.
    "QWEN_CODE_SUPPRESS_YOLO_WARNING": "1",
    # Neither may leave this machine: any proxy-honouring request goes nowhere.
    "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9",
    "NO_PROXY": "127.0.0.1,localhost",
}


def host_env(home: Path, **extra: str) -> dict[str, str]:
    """An environment with ``home`` as HOME, nothing of the caller's agent settings, and
    the hosts kept off the network."""
    keep = ("PATH", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT")
    env = {name: os.environ[name] for name in keep if name in os.environ}
    env.update(QUIET, HOME=str(home), **extra)
    return env


def codex_hooks(env: dict[str, str], cwd: Path, timeout: float = 30.0) -> list[dict[str, object]]:
    """The hooks the real ``codex app-server`` lists for ``cwd`` (``hooks/list``): each with
    its ``key``, ``currentHash`` and ``trustStatus``."""
    import json
    import queue
    import threading

    process = subprocess.Popen([host_cli(CODEX), "app-server"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                               cwd=cwd, text=True, start_new_session=True)
    assert process.stdin is not None and process.stdout is not None
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout],  # type: ignore[union-attr]
                     daemon=True).start()
    try:
        for message in ({"id": 1, "method": "initialize",
                         "params": {"clientInfo": {"name": "fabric-memory-tests",
                                                   "version": "0"}}},
                        {"method": "initialized"},
                        {"id": 2, "method": "hooks/list", "params": {"cwds": [str(cwd)]}}):
            process.stdin.write(json.dumps(message) + "\n")
        process.stdin.flush()
        while True:
            answer = json.loads(lines.get(timeout=timeout))
            if answer.get("id") == 2:
                assert "result" in answer, answer
                return [hook for entry in answer["result"]["data"] for hook in entry["hooks"]]
    finally:
        end_group(process)


def end_group(process: subprocess.Popen[Any]) -> None:
    """Kill a host started in its own session, and every process under it: npm's ``codex``
    is a Node launcher whose native child outlives a kill of the launcher alone."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=10)


def run_host_cli(argv: list[str], cwd: Path, env: dict[str, str],
             timeout: float) -> subprocess.CompletedProcess[str]:
    """Run a host CLI to its end with no input, in its own session, within ``timeout``
    seconds; whatever it started is ended with it."""
    process = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    finally:
        end_group(process)
    return subprocess.CompletedProcess(argv, process.returncode, stdout, stderr)
