"""Where sessions and the index live by default, and how explicit choices override them."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from ..arguments import check_name

SESSIONS_ENV = "FABRIC_MEMORY_SESSIONS"
HOME_ENV = "FABRIC_MEMORY_HOME"
PI_SESSION_DIR_ENV = "PI_CODING_AGENT_SESSION_DIR"
PI_AGENT_DIR_ENV = "PI_CODING_AGENT_DIR"
OMP_CONFIG_DIR_ENV = "PI_CONFIG_DIR"


def sessions_roots(explicit: str | os.PathLike[str] | None = None) -> tuple[Path, ...]:
    """The session folders to read, each by its real path (the index keys every file by its
    real path): ``explicit``, else ``$FABRIC_MEMORY_SESSIONS``, else Pi's (see
    :func:`pi_sessions_dir`) followed by oh-my-pi's (see :func:`omp_sessions_dir`) when
    that folder exists and is another one."""
    if explicit is not None:
        check_name("--sessions", explicit)
        return (Path(explicit).expanduser().resolve(),)
    configured = os.environ.get(SESSIONS_ENV)
    if configured:
        return (Path(configured).expanduser().resolve(),)
    roots = [pi_sessions_dir().resolve()]
    omp = omp_sessions_dir().resolve()
    if omp.is_dir() and omp not in roots:
        roots.append(omp)
    return tuple(roots)


def pi_sessions_dir() -> Path:
    """Where Pi keeps sessions: ``$PI_CODING_AGENT_SESSION_DIR``, else ``sessions`` of its
    agent directory (Pi's pi-coding-agent/docs/environment-variables.md)."""
    configured = os.environ.get(PI_SESSION_DIR_ENV)
    return Path(configured).expanduser() if configured else pi_agent_dir() / "sessions"


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


def index_root(explicit: str | os.PathLike[str] | None = None) -> Path:
    """``explicit``, else ``$FABRIC_MEMORY_HOME/index``, else ``~/.cache/fabric-memory/index``."""
    if explicit is not None:
        check_name("--index", explicit)
        return Path(explicit).expanduser()
    home = os.environ.get(HOME_ENV)
    if home:
        return Path(home).expanduser() / "index"
    return Path.home() / ".cache" / "fabric-memory" / "index"


def make_private_dirs(path: Path) -> None:
    """Create ``path`` and each missing parent owner-only (0700): the engine's home and the
    index inside it. ``mkdir(parents=True)`` would give the parents the umask's mode (often
    0755). Folders that already exist are left as they are."""
    missing = []
    while not path.exists():
        missing.append(path)
        if path.parent == path:
            break
        path = path.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:  # another process made it meanwhile
            continue
        folder.chmod(0o700)  # whatever the umask


def contains(root: Path, path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` lies inside ``root`` once every symlink and ``..`` is resolved."""
    try:
        return Path(path).resolve().is_relative_to(root.resolve())
    except (OSError, RuntimeError):  # unreadable, or a symlink loop
        return False


def inside_any(roots: Iterable[Path], path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` lies inside one of ``roots`` (see :func:`contains`)."""
    return any(contains(root, path) for root in roots)


def holds(roots: Iterable[Path], path: str) -> bool:
    """Whether an indexed file, keyed by its real path, lies under one of ``roots`` (real
    paths too): a prefix test, resolved (see :func:`contains`) only when that fails, for a
    record kept under another spelling of its path."""
    roots = tuple(roots)
    return path.startswith(tuple(os.path.join(root, "") for root in roots)) or inside_any(
        roots, path)
