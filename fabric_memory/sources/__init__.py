"""Sources: one reader per coding agent, side by side; everything after reading is shared.

The contract a reader keeps (read this before adding an agent)
---------------------------------------------------------------
**One module per agent** (``pi.py``, ``claude_code.py``, ``codex.py``, …) exposing a
:class:`SourceReader` ``(name, recognises, read, homes)``, **registered** by one line in
:data:`fabric_memory.sources.registry.READERS` (order matters: the first reader whose
``recognises`` says yes reads the file).

``name``
    The agent name hits, ``sessions`` rows and ``--agent`` use: one of
    :data:`~fabric_memory.sources.registry.AGENTS` (``pi``, ``omp``, ``claude-code``,
    ``codex``, ``catui``, ``fabro``, ``copilot``, ``kimi``). A module may hold several
    readers (Catui: its sessions and its run traces), all with the same name.

``recognises(first, path) -> bool``
    Told from the file's **first non-blank line** (its JSON value, or
    :data:`~fabric_memory.sources.reader.NOT_JSON`) and, where formats coincide, from the
    **layout** (the real ``path`` lying under the agent's home, see
    :func:`~fabric_memory.sources.reader.under`): never from a folder's name alone.
    Pi-format flavours (``omp``, Catui sessions) say yes only under their own home and
    come before ``pi``. A file no reader recognises is read by the reader whose home holds
    it (so it is reported in that agent's terms), else by Pi's.

``read(path, max_line_bytes) -> Session``
    Returns the same :class:`fabric_memory.session.Session` Pi's reader returns, with
    ``agent`` (the name), ``project`` (the folder the agent worked in, when the file
    says), ``session_id`` (the agent's own id) and ``source_hash`` / ``size`` over exactly
    the bytes read (use :class:`~fabric_memory.sources.reader.JsonLines`, which hashes as
    Pi's reader does, and :func:`~fabric_memory.sources.reader.build_session`).
    Its ``entries`` are **Pi-shaped**: each ``Entry.raw`` is built with the builders in
    :mod:`fabric_memory.sources.reader` (``message`` user/assistant with ``text_block`` /
    ``thinking_block`` / ``tool_call_block``; ``tool_result`` with the call id, the tool's
    name paired from its call, and ``is_error``; ``compaction`` for an agent's own
    summary; ``event(kind, text)`` for anything else worth remembering), added through
    :class:`~fabric_memory.sources.reader.Entries` with the line it came from. The
    per-entry view (:class:`fabric_memory.view.EntryView`: role, text, tool calls with
    arguments, tool results, time, parent) is then built from ``raw`` exactly as for Pi,
    so normalization, redaction, the index, recall, expand, ``sessions``, the live
    index, MCP and the Pi tools have no per-agent code.

    Each entry has a **stable address** (``Entry.id``): the agent's own id where it has a
    stable one (Claude ``uuid``, Fabro ``id`` / ``seq``, Catui ``runId`` + ``sequence``),
    else ``L<line>``; a second entry from the same line gets ``<address>.1`` and so on
    (the entries of one line chain through each other, so they share the line's branch).
    ``line`` / ``offset`` / ``length`` name the verbatim line, which ``expand`` returns
    byte for byte (checked against ``sourceHash``; a file changed since it was indexed is
    read again by its reader). ``parent_id`` links entries (the active branch is the
    chain ending at the last entry; side chains are off it). Content text is read with
    :func:`~fabric_memory.sources.reader.block_text`.

    **Strict**: a bad line is a located note (``Entries.note`` → ``Session.malformed``),
    never an exception; a file of an unknown shape raises
    :class:`~fabric_memory.errors.NotASessionError` with ``file:line`` and the reason
    (``unsupported version: …``). Nothing here reads outside the file it is given, and
    the session reader is imported only when a file is read (finding folders, which every
    recall does, loads no parser).

``skips(path) -> bool`` (optional)
    A file under a root that is no session of its own (Catui's ``latest.jsonl``): never
    read, never reported.

``tools`` (optional)
    The agent's tool names → a :class:`~fabric_memory.sources.tools.Tool`: what the work
    trail (file changes, commits, checks, errors, open items) reads of each call's
    arguments, in the trail's kinds (:mod:`fabric_memory.sources.tools`). A reader also
    normalizes a command result's exit status onto the tool result (``exitCode``,
    ``interrupted``: the builder :func:`~fabric_memory.sources.reader.tool_result` takes
    both), so the trail never asks which agent ran it.

``homes(projects) -> tuple[Path, ...]``
    Where the agent writes by default (environment variables honoured), present or not;
    ``projects`` are the working folders of indexed sessions, for folders that live
    inside workspaces (Catui's ``<workspace>/.catui/traces``). Reads no file.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_attributes
from .reader import (
    NOT_JSON,
    Entries,
    JsonDocument,
    JsonHead,
    JsonLines,
    SourceLine,
    SourceReader,
    block_text,
    build_session,
    compaction,
    event,
    message,
    text_block,
    thinking_block,
    tool_call_block,
    tool_result,
    under,
)
from .registry import (
    AGENTS,
    agent_homes,
    agent_names,
    listed,
    read_source,
    reader_for,
    session_files,
    skipped,
)
from .tools import FileWork, Tool, Use

if TYPE_CHECKING:
    from .registry import READERS, TOOLS
else:  # built on first use: importing the package loads no agent's reader
    __getattr__ = lazy_attributes(globals(), {".registry": ("READERS", "TOOLS")})

__all__ = [
    "AGENTS",
    "NOT_JSON",
    "READERS",
    "TOOLS",
    "Entries",
    "FileWork",
    "JsonDocument",
    "JsonHead",
    "JsonLines",
    "SourceLine",
    "SourceReader",
    "Tool",
    "Use",
    "agent_homes",
    "agent_names",
    "block_text",
    "build_session",
    "compaction",
    "event",
    "listed",
    "message",
    "read_source",
    "reader_for",
    "session_files",
    "skipped",
    "text_block",
    "thinking_block",
    "tool_call_block",
    "tool_result",
    "under",
]
