"""README's Python examples run as written, on the bundled fixtures in a scratch clone."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from .conftest import FIXTURES, REPO

PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", flags=re.M | re.S)


def python_blocks(markdown: str) -> list[str]:
    """The code of every ```python fenced block, in order."""
    return PYTHON_BLOCK.findall(markdown)


def run_block(code: str, workdir: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FABRIC_MEMORY_")}
    env["FABRIC_MEMORY_HOME"] = str(workdir / "home")  # nothing lands in the user's cache
    return subprocess.run([sys.executable, "-c", code], cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=300, check=False)


def test_python_blocks_are_found() -> None:
    """The extractor finds each fenced python block and nothing outside the fences."""
    text = "intro\n```python\nprint(1)\n```\n```sh\nls\n```\n```python\nx = 2\n```\n"
    assert python_blocks(text) == ["print(1)\n", "x = 2\n"]


def test_readme_shows_the_library() -> None:
    """README has a Python example using read_session, compaction_hook, recall and expand."""
    code = "\n".join(python_blocks((REPO / "README.md").read_text(encoding="utf-8")))
    for name in ("read_session(", "compaction_hook(", "recall(", "expand"):
        assert name in code, f"README's Python example does not call {name}"


def test_readme_python_blocks_run(tmp_path: Path) -> None:
    """Every ```python block of README runs to completion from a clone's root."""
    shutil.copytree(FIXTURES / "sessions", tmp_path / "fixtures" / "sessions")
    blocks = python_blocks((REPO / "README.md").read_text(encoding="utf-8"))
    assert blocks
    for number, code in enumerate(blocks, 1):
        done = run_block(code, tmp_path)
        assert done.returncode == 0, f"README python block {number} failed:\n{done.stderr}"
        assert done.stdout.strip(), f"README python block {number} printed nothing"


def test_a_broken_block_fails(tmp_path: Path) -> None:
    """A block that raises is reported as failed (the runner does not swallow errors)."""
    done = run_block("from fabric_memory import read_session\nread_session('missing.jsonl')\n",
                     tmp_path)
    assert done.returncode != 0
    assert "missing.jsonl" in done.stderr
