"""Pi and oh-my-pi: the reference reader (:func:`fabric_memory.session.read_session`).

Both write the same session format (a ``{"type": "session"}`` header, then entries);
which of them wrote a file is told by where it lies: under oh-my-pi's sessions folder it
is ``omp``, anywhere else ``pi``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .reader import SourceReader, from_environment, real_folder, under
from .tools import Tool, file_tool, shell_tool

if TYPE_CHECKING:  # loaded when a file is read (see fabric_memory.sources.reader)
    from ..session import Session

PI_SESSION_DIR_ENV = "PI_CODING_AGENT_SESSION_DIR"
PI_AGENT_DIR_ENV = "PI_CODING_AGENT_DIR"
OMP_CONFIG_DIR_ENV = "PI_CONFIG_DIR"


@from_environment(PI_SESSION_DIR_ENV, PI_AGENT_DIR_ENV)
def pi_sessions_dir() -> Path:
    """Where Pi keeps sessions: ``$PI_CODING_AGENT_SESSION_DIR``, else ``sessions`` of its
    agent directory (Pi's pi-coding-agent/docs/environment-variables.md)."""
    configured = os.environ.get(PI_SESSION_DIR_ENV)
    return Path(configured).expanduser() if configured else pi_agent_dir() / "sessions"


@from_environment(PI_AGENT_DIR_ENV, OMP_CONFIG_DIR_ENV)
def omp_sessions_dir() -> Path:
    """Where oh-my-pi keeps sessions: ``sessions`` of its agent directory, which is
    ``$PI_CODING_AGENT_DIR`` (the variable Pi reads too), else ``agent`` of its config
    folder ``~/$PI_CONFIG_DIR`` (``~/.omp`` by default)."""
    configured = os.environ.get(PI_AGENT_DIR_ENV)
    if configured:
        return Path(configured).expanduser() / "sessions"
    return Path.home() / (os.environ.get(OMP_CONFIG_DIR_ENV) or ".omp") / "agent" / "sessions"


def pi_agent_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """``explicit``, else ``$PI_CODING_AGENT_DIR``, else ``~/.pi/agent``, as Pi resolves
    its agent directory (Pi's pi-coding-agent/docs/configuration.md)."""
    if explicit is not None:
        return Path(explicit).expanduser()
    configured = os.environ.get(PI_AGENT_DIR_ENV)
    return Path(configured).expanduser() if configured else Path.home() / ".pi" / "agent"


def is_pi_session(first: Any, path: str) -> bool:
    """A Pi-format file: its first line is the session header (or Pi's title line)."""
    return type(first) is dict and first.get("type") in ("session", "title")


def _read_pi(path: str, max_line_bytes: int) -> Session:
    from ..session import read_session

    return read_session(path, max_line_bytes=max_line_bytes)


def _read_omp(path: str, max_line_bytes: int) -> Session:
    return dataclasses.replace(_read_pi(path, max_line_bytes), agent="omp")


def _pi_homes(projects: Collection[str]) -> tuple[Path, ...]:
    return (pi_sessions_dir(),)


def _omp_homes(projects: Collection[str]) -> tuple[Path, ...]:
    return (omp_sessions_dir(),)


TOOLS: dict[str, Tool] = {
    "read": file_tool("read", "read", ("path", "file_path", "filePath")),
    "edit": file_tool("edit", "modified", ("path", "file_path", "filePath"),
                      ("oldText", "old_string", "old_str", "oldString"),
                      ("newText", "new_string", "new_str", "newString")),
    "write": file_tool("write", "written", ("path", "file_path", "filePath"), (), ("content",)),
    "bash": shell_tool("command"),
    "exec": shell_tool("command"),
}
"""Pi's (and oh-my-pi's) tools as the work trail reads them; also those of OpenClaw, which
writes Pi's format (``exec`` for its shell, ``file_path`` beside ``path``), Copilot CLI's
``bash`` and ``edit`` (``old_str`` / ``new_str``) and OpenCode's ``read``, ``edit``,
``write`` and ``bash`` (``filePath``, ``oldString`` / ``newString``), which share their
names."""

PI = SourceReader("pi", is_pi_session, _read_pi, _pi_homes, tools=TOOLS)
"""Pi's sessions; also every Pi-format file no other reader claims by its location."""
def _is_omp_session(first: Any, path: str) -> bool:
    """A Pi-format file under oh-my-pi's folder, when that is not Pi's too
    (``$PI_CODING_AGENT_DIR`` may name one folder for both)."""
    home = omp_sessions_dir()
    return (is_pi_session(first, path) and under(home, path)
            and real_folder(home) != real_folder(pi_sessions_dir()))


OMP = SourceReader("omp", _is_omp_session, _read_omp, _omp_homes, tools=TOOLS)
