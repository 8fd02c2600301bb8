"""Which reader reads a file, and where the agents write: the list of sources, in order.

Adding an agent: one module under :mod:`fabric_memory.sources` with a
:class:`~fabric_memory.sources.reader.SourceReader`, and one line in :data:`ORDER`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from functools import cache
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ..errors import UsageError
from .reader import SourceReader, first_value, never, under

if TYPE_CHECKING:  # loaded when a file is read (see fabric_memory.sources.reader)
    from ..session import Session
    from .tools import Tool

    READERS: tuple[SourceReader, ...]
    TOOLS: Mapping[str, Tool]

DEFAULT_MAX_LINE_BYTES: Final = 8 * 1024 * 1024
"""The session reader's default (:data:`fabric_memory.session.DEFAULT_MAX_LINE_BYTES`)."""

ORDER: Final = (
    ("qwen", "QWEN"),
    ("claude_code", "CLAUDE_CODE"),
    ("codex", "CODEX"),
    ("copilot", "COPILOT"),
    ("kimi", "KIMI"),
    ("goose", "DATABASE_READER"),
    ("goose", "LINES_READER"),
    ("aider", "AIDER"),
    ("cursor", "CURSOR"),
    ("crush", "CRUSH"),
    ("droid", "DROID"),
    ("catui", "TRACES_READER"),
    ("fabro", "FABRO"),
    ("gemini", "GEMINI"),
    ("continue_dev", "CONTINUE"),
    ("opencode", "OPENCODE"),
    ("opencode", "LEGACY"),
    ("cline", "ROO_CODE"),
    ("cline", "KILO_CODE"),
    ("cline", "CLINE"),
    ("catui", "SESSIONS"),
    ("pi", "OMP"),
    ("pi", "PI"),
)
"""The readers (module under :mod:`fabric_memory.sources`, name), tried in this order on a
file's first line; the first that recognises it reads it. Pi-format flavours told apart by
location (``omp``) come before ``pi``, which is last. A reader's module is imported when it
is first tried (:func:`readers`), so reading a Claude Code file never loads the Aider or
database readers: a hook's start-up pays only for the readers it reaches."""

_loaded: dict[int, SourceReader] = {}


def readers() -> Iterator[SourceReader]:
    """The readers in :data:`ORDER`, each module imported when its reader is first reached."""
    for at in range(len(ORDER)):
        yield _reader(at)


def _reader(at: int) -> SourceReader:
    reader = _loaded.get(at)
    if reader is None:  # (two threads may both import it: the same module, the same reader)
        module, name = ORDER[at]
        reader = _loaded.setdefault(at, getattr(import_module(f".{module}", __package__), name))
    return reader


def __getattr__(name: str) -> object:
    """:data:`READERS` (every reader, in :data:`ORDER`) and :data:`TOOLS` (every agent's tool
    names → what the work trail reads of their calls: the readers' tables merged,
    :mod:`fabric_memory.sources.tools`), built on first use."""
    if name == "READERS":
        value: object = tuple(readers())
    elif name == "TOOLS":
        value = {key: tool for reader in readers() for key, tool in reader.tools.items()}
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


AGENTS: Final = ("pi", "omp", "claude-code", "codex", "catui", "fabro", "copilot", "kimi",
                  "gemini", "goose", "cline", "roo-code", "kilo-code", "aider",
                  "cursor", "crush", "qwen", "continue", "opencode", "droid")
"""Every agent name ``--agent`` / ``--agents`` accept (docs/agents.md)."""


def reader_for(path: str, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> SourceReader:
    """The reader of ``path``: the first of :data:`ORDER` that recognises its first line;
    else the one whose home folder holds it (so the file is reported in that agent's own
    terms, e.g. Codex's ``unsupported version``); else Pi's, the reference."""
    first = first_value(path, max_line_bytes)
    for reader in readers():
        if reader.recognises(first, path):
            return reader
    for reader in readers():
        if any(under(home, path) for home in reader.homes(())):
            return reader
    return _reader(len(ORDER) - 1)  # Pi's


def read_source(path: str | os.PathLike[str],
                max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> Session:
    """Read one file of any agent into the normalized stage (see :mod:`fabric_memory.sources`);
    raise :class:`~fabric_memory.errors.SessionError` (located) when it cannot be read."""
    name = os.fspath(path)
    return reader_for(name, max_line_bytes).read(name, max_line_bytes)


def session_files(root: str | os.PathLike[str]) -> Iterator[Path]:
    """Every session file under ``root``: each ``*.jsonl`` file and each file a reader
    :func:`listed`, sorted by path (:func:`fabric_memory.session.iter_session_files`)."""
    from ..session import iter_session_files

    return iter_session_files(root, listed)


def by_line(agent: str) -> bool:
    """Whether ``agent``'s entries are also addressed by their lines (``SourceReader.by_line``:
    every reader of that agent says so)."""
    return all(reader.by_line for reader in readers() if reader.name == agent)


def listed(path: str) -> bool:
    """Whether some reader lists ``path``, a file not named ``*.jsonl``, as one of its
    sessions (see ``SourceReader.lists``)."""
    return any(reader.lists(path) for reader in readers())


def skipped(path: str) -> bool:
    """Whether some reader says ``path`` is no session of its own (see ``SourceReader.skips``)."""
    return any(skips(path) for skips in _skips())


@cache
def _skips() -> tuple[Callable[[str], bool], ...]:
    """The readers' own ``skips`` (most skip nothing: asked of every file a walk finds)."""
    return tuple(reader.skips for reader in readers() if reader.skips is not never)


def agent_names(text: str | Iterable[str] | None) -> frozenset[str] | None:
    """The agents ``--agents a,b`` (or several ``--agent``) names; ``None`` for all of them.
    An unknown name is a usage error that lists the known ones."""
    if text is None:
        return None
    parts = text.split(",") if isinstance(text, str) else [
        part for item in text for part in item.split(",")]
    names = frozenset(part.strip() for part in parts if part.strip())
    unknown = sorted(names - set(AGENTS))
    if unknown:
        raise UsageError(f"unknown agent {unknown[0]!r}: use one of {', '.join(AGENTS)}")
    return names or None


def agent_homes(projects: Collection[str] = (),
                agents: frozenset[str] | None = None) -> tuple[Path, ...]:
    """Every folder the agents (``agents``: only those) write to by default that exists, each
    once by its real path, in :data:`AGENTS` order. ``projects``: the working folders of
    indexed sessions (where workspace-relative folders, such as Catui's traces, are); each
    reader is given those of its own agent's sessions when ``projects`` can narrow itself
    (an ``of(agent)`` method, as the catalog's has)."""
    found: dict[Path, None] = {}
    ordered = sorted(readers(), key=lambda reader: AGENTS.index(reader.name))
    for reader in ordered:
        if agents is not None and reader.name not in agents:
            continue
        narrow = getattr(projects, "of", None)
        for home in reader.homes(narrow(reader.name) if callable(narrow) else projects):
            if home.is_dir():
                found.setdefault(home.resolve(), None)
    return tuple(found)
