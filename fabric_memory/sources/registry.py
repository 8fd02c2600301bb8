"""Which reader reads a file, and where the agents write: the list of sources, in order.

Adding an agent: one module under :mod:`fabric_memory.sources` with a
:class:`~fabric_memory.sources.reader.SourceReader`, and one line in :data:`READERS`.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ..errors import UsageError
from .aider import AIDER
from .catui import SESSIONS as CATUI_SESSIONS
from .catui import TRACES_READER as CATUI_TRACES
from .claude_code import CLAUDE_CODE
from .cline import CLINE, KILO_CODE, ROO_CODE
from .codex import CODEX
from .copilot import COPILOT
from .crush import CRUSH
from .cursor import CURSOR
from .fabro import FABRO
from .gemini import GEMINI
from .goose import DATABASE_READER as GOOSE_DATABASE
from .goose import LINES_READER as GOOSE_LINES
from .kimi import KIMI
from .pi import OMP, PI
from .qwen import QWEN
from .reader import SourceReader, first_value, never, under
from .tools import Tool

if TYPE_CHECKING:  # loaded when a file is read (see fabric_memory.sources.reader)
    from ..session import Session

DEFAULT_MAX_LINE_BYTES: Final = 8 * 1024 * 1024
"""The session reader's default (:data:`fabric_memory.session.DEFAULT_MAX_LINE_BYTES`)."""

READERS: Final[tuple[SourceReader, ...]] = (
    QWEN,
    CLAUDE_CODE,
    CODEX,
    COPILOT,
    KIMI,
    GOOSE_DATABASE,
    GOOSE_LINES,
    AIDER,
    CURSOR,
    CRUSH,
    CATUI_TRACES,
    FABRO,
    GEMINI,
    ROO_CODE,
    KILO_CODE,
    CLINE,
    CATUI_SESSIONS,
    OMP,
    PI,
)
"""Tried in this order on a file's first line; the first that recognises it reads it.
Pi-format flavours told apart by location (``omp``) come before ``pi``, which is last."""

TOOLS: Final[Mapping[str, Tool]] = {
    name: tool for reader in READERS for name, tool in reader.tools.items()
}
"""Every agent's tool names → what the work trail reads of their calls (the readers'
tables merged: :mod:`fabric_memory.sources.tools`)."""

AGENTS: Final = ("pi", "omp", "claude-code", "codex", "catui", "fabro", "copilot", "kimi",
                  "gemini", "goose", "cline", "roo-code", "kilo-code", "aider",
                  "cursor", "crush", "qwen")
"""Every agent name ``--agent`` / ``--agents`` accept (docs/agents.md)."""


def reader_for(path: str, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> SourceReader:
    """The reader of ``path``: the first of :data:`READERS` that recognises its first line;
    else the one whose home folder holds it (so the file is reported in that agent's own
    terms, e.g. Codex's ``unsupported version``); else Pi's, the reference."""
    first = first_value(path, max_line_bytes)
    for reader in READERS:
        if reader.recognises(first, path):
            return reader
    for reader in READERS:
        if any(under(home, path) for home in reader.homes(())):
            return reader
    return PI


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
    return all(reader.by_line for reader in READERS if reader.name == agent)


def listed(path: str) -> bool:
    """Whether some reader lists ``path``, a file not named ``*.jsonl``, as one of its
    sessions (see ``SourceReader.lists``)."""
    return any(reader.lists(path) for reader in READERS)


_SKIPS: Final = tuple(reader.skips for reader in READERS if reader.skips is not never)
"""The readers' own ``skips`` (most skip nothing: asked of every file a walk finds)."""


def skipped(path: str) -> bool:
    """Whether some reader says ``path`` is no session of its own (see ``SourceReader.skips``)."""
    return any(skips(path) for skips in _SKIPS)


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
    ordered = sorted(READERS, key=lambda reader: AGENTS.index(reader.name))
    for reader in ordered:
        if agents is not None and reader.name not in agents:
            continue
        narrow = getattr(projects, "of", None)
        for home in reader.homes(narrow(reader.name) if callable(narrow) else projects):
            if home.is_dir():
                found.setdefault(home.resolve(), None)
    return tuple(found)
