"""Where sessions and the index live by default, and how explicit choices override them."""

from __future__ import annotations

import os
from pathlib import Path

SESSIONS_ENV = "FABRIC_MEMORY_SESSIONS"
HOME_ENV = "FABRIC_MEMORY_HOME"


def sessions_root(explicit: str | os.PathLike[str] | None = None) -> Path:
    """``explicit``, else ``$FABRIC_MEMORY_SESSIONS``, else Pi's ``~/.pi/agent/sessions``."""
    if explicit is not None:
        return Path(explicit).expanduser()
    configured = os.environ.get(SESSIONS_ENV)
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".pi" / "agent" / "sessions"


def index_root(explicit: str | os.PathLike[str] | None = None) -> Path:
    """``explicit``, else ``$FABRIC_MEMORY_HOME/index``, else ``~/.cache/fabric-memory/index``."""
    if explicit is not None:
        return Path(explicit).expanduser()
    home = os.environ.get(HOME_ENV)
    if home:
        return Path(home).expanduser() / "index"
    return Path.home() / ".cache" / "fabric-memory" / "index"


def contains(root: Path, path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` lies inside ``root`` once every symlink and ``..`` is resolved."""
    try:
        return Path(path).resolve().is_relative_to(root.resolve())
    except (OSError, RuntimeError):  # unreadable, or a symlink loop
        return False
