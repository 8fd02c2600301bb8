"""Where sessions and the index live by default, and how explicit choices override them."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from ..sources.pi import omp_sessions_dir, pi_sessions_dir

SESSIONS_ENV = "FABRIC_MEMORY_SESSIONS"
HOME_ENV = "FABRIC_MEMORY_HOME"


def sessions_roots(explicit: str | os.PathLike[str] | None = None) -> tuple[Path, ...]:
    """The session folders to read, each by its real path (the index keys every file by its
    real path): ``explicit``, else ``$FABRIC_MEMORY_SESSIONS``, else Pi's (see
    :func:`pi_sessions_dir`) followed by oh-my-pi's (see :func:`omp_sessions_dir`) when
    that folder exists and is another one."""
    if explicit is not None:
        return (Path(explicit).expanduser().resolve(),)
    configured = os.environ.get(SESSIONS_ENV)
    if configured:
        return (Path(configured).expanduser().resolve(),)
    roots = [pi_sessions_dir().resolve()]
    omp = omp_sessions_dir().resolve()
    if omp.is_dir() and omp not in roots:
        roots.append(omp)
    return tuple(roots)


def index_root(explicit: str | os.PathLike[str] | None = None) -> Path:
    """``explicit``, else ``$FABRIC_MEMORY_HOME/index``, else ``~/.cache/fabric-memory/index``."""
    if explicit is not None:
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
