"""What a host runs: the installed ``fabric-memory`` by its absolute path, since a
virtual environment's scripts are not on the PATH a host gives its hooks and servers."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import sysconfig
from pathlib import Path

from ..errors import UsageError

NAME = "fabric-memory"
HOOK_SUBCOMMAND = "handoff"
HOOK_TIMEOUT_SECONDS = 10
"""The host's own bound on the hook (the hook keeps to its 2 s budget and fails open)."""


def executable() -> Path:
    """The ``fabric-memory`` this process belongs to: the script that started it, else the
    one in this Python's scripts folder, else the one on the PATH."""
    started = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    candidates = [started] if started is not None and started.name == NAME else []
    candidates.append(Path(sysconfig.get_path("scripts")) / NAME)
    found = shutil.which(NAME)
    if found:
        candidates.append(Path(found))
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate.absolute()
    raise UsageError(f"no {NAME} executable found beside {sys.executable} or on the PATH; "
                     "install the package (pip install -e . in a clone), then rerun")


def hook_command(program: Path) -> str:
    """The shell command a host runs after its compaction."""
    return shlex.join([str(program), HOOK_SUBCOMMAND])


def is_hook_command(command: object) -> bool:
    """Whether a host's hook command is ours (any install's path: a reinstall from another
    virtual environment replaces it instead of adding a second hook)."""
    if not isinstance(command, str):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    return len(words) == 2 and Path(words[0]).name == NAME and words[1] == HOOK_SUBCOMMAND
