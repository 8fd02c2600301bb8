"""Where sessions and the index live by default, and how explicit choices override them."""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable
from pathlib import Path

from ..arguments import check_name
from ..sources import agent_homes, agent_names

SESSIONS_ENV = "FABRIC_MEMORY_SESSIONS"
EXTRA_SESSIONS_ENV = "FABRIC_MEMORY_EXTRA_SESSIONS"
AGENTS_ENV = "FABRIC_MEMORY_AGENTS"
HOME_ENV = "FABRIC_MEMORY_HOME"


def sessions_roots(
    explicit: str | os.PathLike[str] | None = None, *, agents: str | None = None,
    projects: Collection[str] = (),
) -> tuple[Path, ...]:
    """The session folders to read, each once by its real path (the index keys every file
    by its real path): the folders ``explicit`` names, else ``$FABRIC_MEMORY_SESSIONS``
    (several separated by ``:``; ``--sessions`` may be repeated), exactly those whatever
    agents wrote them; else every agent folder that exists (:func:`discovered_roots`).
    When none exists, Pi's, so that reading it says it is missing."""
    check_name("--sessions", explicit)  # before it is resolved as paths
    named = os.fspath(explicit) if explicit is not None else os.environ.get(SESSIONS_ENV)
    if named:
        return _unique(_folders(named))
    from ..sources.pi import pi_sessions_dir

    return discovered_roots(agents, projects) or (pi_sessions_dir().resolve(),)


def discovered_roots(agents: str | None = None,
                     projects: Collection[str] = ()) -> tuple[Path, ...]:
    """Every folder an agent writes to that exists (:func:`fabric_memory.sources.agent_homes`:
    Pi, oh-my-pi, Claude Code, Codex, …; only ``agents``, else ``$FABRIC_MEMORY_AGENTS``,
    when set), then the folders ``$FABRIC_MEMORY_EXTRA_SESSIONS`` adds (``:``-separated:
    sources with no fixed home, such as Fabro exports)."""
    homes = agent_homes(projects, chosen_agents(agents))
    extra = [folder for folder in _folders(os.environ.get(EXTRA_SESSIONS_ENV) or "")
             if folder.is_dir()]
    return _unique([*homes, *extra])


def chosen_agents(agents: str | None = None) -> frozenset[str] | None:
    """The agents ``agents`` (``pi,claude-code``), else ``$FABRIC_MEMORY_AGENTS``, narrows
    reading to; ``None`` for every agent. An unknown name is a usage error."""
    return agent_names(agents if agents is not None else os.environ.get(AGENTS_ENV) or None)


def joined(folders: Iterable[str | os.PathLike[str]] | None) -> str | None:
    """Several ``--sessions`` folders as one value (``:``-separated, as the variable)."""
    names = [os.fspath(folder) for folder in folders or ()]
    return os.pathsep.join(names) if names else None


def _folders(text: str) -> list[Path]:
    return [Path(part).expanduser().resolve() for part in text.split(os.pathsep) if part]


def _unique(folders: Iterable[Path]) -> tuple[Path, ...]:
    return tuple(dict.fromkeys(folders))


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


def session_files(session: str, roots: Iterable[Path]) -> list[Path]:
    """Files under ``roots`` that hold the session ``session`` names before any index
    does: the path itself when it is a file inside a root, else every ``.jsonl`` file
    whose name ends with the id as the agents name their files (Claude Code
    ``<id>.jsonl``, Codex ``rollout-<time>-<id>.jsonl``, Pi ``<time>_<id>.jsonl``).
    Found by walking the roots: what ``expand`` uses when the index does not hold the
    session yet (no reindex since it began)."""
    roots = tuple(roots)
    given = Path(session).expanduser()
    if given.is_absolute() or os.sep in session:
        return [given] if given.is_file() and inside_any(roots, given) else []
    if not session or session.startswith("."):
        return []
    names = (f"{session}.jsonl", f"-{session}.jsonl", f"_{session}.jsonl")
    found: dict[Path, None] = {}
    for root in roots:
        for folder, _, files in os.walk(root):
            for name in files:
                if name.endswith(names):
                    found.setdefault(Path(folder, name).resolve(), None)
    return list(found)


def working_folder() -> str | None:
    """The folder this process was started in, None when it is gone: a door a host starts
    inside a project (the MCP server, Pi's tools) ranks that project's sessions first."""
    try:
        return os.getcwd()
    except OSError:
        return None
