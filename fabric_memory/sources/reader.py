"""What every source reader is and shares: the reader record, a strict JSONL line scanner,
and the builders of the one normalized stage (Pi-shaped entries).

See :mod:`fabric_memory.sources` for the contract a reader keeps. The session reader (and
the trace guard its entries' views bring) is imported when a file is read, not before:
finding the agents' folders, which every recall does, loads no parser.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol

import orjson

from .._gc import no_cyclic_gc
from ..errors import NotASessionError, SessionError
from .tools import Tool

if TYPE_CHECKING:  # loaded when a file is read (see the module docstring)
    from ..session import Entry, LineProblem, Session

NOT_JSON: Final = object()
IDS: Final = "ids"
"""The key of a Pi-shaped entry holding the ids its line had in structural fields: words of
the entry for recall (:func:`fabric_memory.memory.normalize.entry_text`), not text a
reader is shown."""
"""What :attr:`SourceReader.recognises` is given when a file's first line is not JSON."""

Recognises = Callable[[Any, str], bool]
"""``(first JSON value of the file, its real path) -> whether this reader reads it``."""
Read = Callable[[str, int], "Session"]
"""``(path, max_line_bytes) -> Session``: raises :class:`~fabric_memory.errors.SessionError`."""
Homes = Callable[[Collection[str]], tuple[Path, ...]]
"""``(project folders of indexed sessions) -> the folders this agent writes to by default``
(present or not; environment variables honoured; never reads a file)."""


def never(path: str) -> bool:
    """What :attr:`SourceReader.skips` is for a reader that skips no file."""
    return False


@dataclass(frozen=True, slots=True)
class SourceReader:
    """One agent's reader, as :mod:`fabric_memory.sources.registry` lists it."""

    name: str
    """The agent name every hit and ``sessions`` row shows, and ``--agent`` takes."""
    recognises: Recognises
    read: Read
    homes: Homes
    skips: Callable[[str], bool] = never
    """Whether a file under a sessions root is no session of its own, by its real path
    (Catui's ``latest.jsonl`` copies the newest run): never read, never reported."""
    tools: Mapping[str, Tool] = field(default_factory=dict)
    """The agent's tool names → what the work trail reads of their calls
    (:mod:`fabric_memory.sources.tools`)."""
    by_line: bool = True
    """Whether an entry is also addressed by its line (``L877``, short where the agent's
    own ids are long): only where a line stays where it was written. Not for whole-file JSON
    nodes (a rewrite moves them) nor for a message recorded again further on (Gemini CLI)."""
    lists: Callable[[str], bool] = lambda path: False
    """Whether a file not named ``*.jsonl`` (every such file under a sessions root is
    listed) is one of this agent's sessions, by its path: Gemini CLI's
    ``chats/session-*.json``. Which reader reads it is still told by its content."""


# --- reading lines ----------------------------------------------------------------------


# Built for every line read and never changed afterwards; not ``frozen``, which would make
# building it several times slower (each field set through ``object.__setattr__``).
@dataclass(slots=True)
class SourceLine:
    """One non-blank JSON line of a source file, and where its bytes are."""

    number: int
    """1-based physical line number."""
    offset: int
    length: int
    """Byte length without the ``\\n`` (and a stripped ``\\r``)."""
    value: Any
    data: bytes = b""
    """The line's bytes, kept only by ``JsonLines(keep=True)`` (for :func:`line_nodes`)."""


@dataclass(slots=True)
class JsonLines:
    """Every JSON line of a file, in order (iterate once): blank lines are skipped, a line
    that is not JSON becomes a located :class:`~fabric_memory.session.LineProblem` in
    ``problems`` (a half-written last line: ``truncated``). ``source_hash`` and ``size``
    cover exactly the bytes read, as :func:`fabric_memory.session.read_session` computes
    them (so the ``sourceHash`` check of ``expand`` holds for every source).

    ``text``: the lines of a text file (Aider's Markdown history) instead, each non-blank
    line's ``value`` its decoded text (a line that is not UTF-8 decoded with
    replacements); a last line without its newline is being written: ``truncated``."""

    path: str
    max_line_bytes: int
    text: bool = False
    keep: bool = False
    """Keep each line's bytes (``SourceLine.data``): a reader that addresses nodes inside
    some lines (:func:`line_nodes`)."""
    problems: list[LineProblem] = field(default_factory=list)
    truncated: LineProblem | None = None
    size: int = 0
    _digest: Any = None

    @property
    def source_hash(self) -> str:
        return str(self._digest.hexdigest())

    def __iter__(self) -> Iterator[SourceLine]:
        import xxhash

        from ..session import LineProblem, decode_line, iter_lines, open_regular

        self._digest = xxhash.xxh3_128()
        try:
            with no_cyclic_gc(), os.fdopen(open_regular(self.path), "rb") as stream:
                lines = iter_lines(stream, self.path, self.max_line_bytes, self._digest)
                for number, offset, data, ended in lines:
                    self.size = offset + len(data) + (1 if ended else 0)
                    data = data.removesuffix(b"\r")
                    if not data or data.isspace():
                        continue
                    if self.text:
                        if not ended:
                            self.truncated = LineProblem(
                                number, "truncated_tail: half-written last line ignored")
                            continue
                        yield SourceLine(number, offset, len(data),
                                         data.decode("utf-8", "replace"))
                        continue
                    try:
                        value = decode_line(data)
                    except orjson.JSONDecodeError as exc:
                        reason = str(exc).split(":", 1)[0]
                        if ended:
                            self.problems.append(
                                LineProblem(number, f"malformed JSON line skipped ({reason})"))
                        else:
                            self.truncated = LineProblem(
                                number, "truncated_tail: half-written last line ignored")
                        continue
                    yield SourceLine(number, offset, len(data), value,
                                     data if self.keep else b"")
        except OSError as exc:
            raise SessionError(self.path, None,
                               f"cannot read file: {exc.strerror or exc}") from exc


MAX_DOCUMENT_BYTES: Final = 256 * 1024 * 1024
"""The largest whole-file JSON session read (an agent rewrites such a file on every turn, so
one far larger is no session)."""
_TOKEN: Final = re.compile(rb'"(?:[^"\\]|\\.)*"|[][{}:,]')
"""A JSON string (escapes included) or a structural character: what :func:`node_spans`
walks (numbers, literals and white space lie between tokens)."""


@dataclass(slots=True)
class JsonDocument:
    """A session that is one JSON document (Gemini CLI's legacy chats, Cline's and Continue's
    files): read and hashed whole, as :class:`JsonLines` hashes a file, and parsed once.

    Its entries' sources are the **nodes** of one array (a message of ``messages[]``):
    :meth:`nodes` gives each as a :class:`SourceLine` whose ``offset`` and ``length`` are the
    node's exact bytes in the file and whose ``number`` is the line it starts on, so
    ``expand --raw`` returns the node verbatim (checked against ``sourceHash``) and every
    reader builds its entries with :class:`Entries` as from lines. The node's address is the
    reader's (the message's id, else its index): never the byte offset, which the next
    rewrite of the file moves.
    """

    path: str
    max_bytes: int = MAX_DOCUMENT_BYTES
    data: bytes = b""
    value: Any = None
    source_hash: str = ""
    size: int = 0
    problems: list[LineProblem] = field(default_factory=list)
    """Always empty: a document is read whole or not at all (as :class:`JsonLines` has it)."""
    truncated: LineProblem | None = None

    @classmethod
    def read(cls, path: str, max_bytes: int = MAX_DOCUMENT_BYTES) -> JsonDocument:
        """The document at ``path``; :class:`~fabric_memory.errors.SessionError` (located)
        when it cannot be read, is larger than ``max_bytes`` or is not JSON."""
        import xxhash

        from ..session import decode_line, open_regular

        try:
            with os.fdopen(open_regular(path), "rb") as stream:
                data = stream.read(max_bytes + 1)
        except OSError as exc:
            raise SessionError(path, None, f"cannot read file: {exc.strerror or exc}") from exc
        if len(data) > max_bytes:
            raise SessionError(path, None, f"whole-file JSON session larger than {max_bytes} "
                               "bytes; not read")
        try:
            value = decode_line(data)
        except orjson.JSONDecodeError as exc:
            line = data.count(b"\n", 0, exc.pos) + 1
            reason = str(exc).split(":", 1)[0]
            raise NotASessionError(path, line, f"not a JSON document ({reason}); a file "
                                   "being rewritten is read again on the next reindex") from None
        return cls(path, max_bytes, data, value, xxhash.xxh3_128_hexdigest(data), len(data))

    def nodes(self, *keys: str) -> list[SourceLine]:
        """Each element of the array at ``keys`` (object keys from the top; none: the
        document is the array), in order, with its exact bytes; ``[]`` when there is none."""
        return _nodes(self.path, self.data, self.value, keys, 0, 1)


def line_nodes(path: str, line: SourceLine, *keys: str) -> list[SourceLine]:
    """:meth:`JsonDocument.nodes` inside one line of JSON Lines read with ``keep`` (Gemini
    CLI's checkpoint ``{"$set": {"messages": [...]}}``): each element's exact bytes, at its
    offset in the file."""
    return _nodes(path, line.data, line.value, keys, line.offset, line.number)


def _nodes(path: str, data: bytes, value: Any, keys: tuple[str, ...], base: int,
           first_line: int) -> list[SourceLine]:
    for key in keys:
        value = value.get(key) if type(value) is dict else None
    if type(value) is not list:
        return []
    spans = node_spans(data, keys)
    if len(spans) != len(value):  # cannot be for a document orjson parsed; say so if so
        raise SessionError(path, first_line, f"found {len(spans)} of the {len(value)} "
                           f"elements of {'.'.join(keys) or 'the document'}")
    found: list[SourceLine] = []
    line, counted = first_line, 0
    for (start, end), element in zip(spans, value, strict=True):
        line += data.count(b"\n", counted, start)
        counted = start
        found.append(SourceLine(line, base + start, end - start, element))
    return found


def node_spans(data: bytes, keys: tuple[str, ...]) -> list[tuple[int, int]]:
    """``(start, end)`` byte offsets of each element of the array at ``keys`` in the JSON
    document ``data`` (valid JSON: it was parsed first). Walks strings and structural
    characters only; an element's span is trimmed of the white space around it."""
    path: list[str | None] = []
    """The key each open container sits under (``None``: the top, or an array's element)."""
    key: str | None = None
    last = b""
    tokens = _TOKEN.finditer(data)
    for match in tokens:
        token = match.group()
        first = token[:1]
        if first == b'"':
            last = token
        elif first == b":":
            key = orjson.loads(last)
        elif first in b"{[":
            path.append(key)
            key = None
            if first == b"[" and len(path) == len(keys) + 1 and path[1:] == list(keys):
                return _elements(data, match.end(), tokens)
        else:  # ``,`` or a closing bracket: what follows is a key, or an array's element
            key = None
            if first != b",":
                path.pop()
    return []


def _elements(data: bytes, start: int, tokens: Iterator[re.Match[bytes]]) -> list[tuple[int, int]]:
    """The element spans of the array whose ``[`` ends at ``start`` (``tokens`` go on from it)."""
    spans: list[tuple[int, int]] = []
    depth = 0
    for match in tokens:
        first = match.group()[:1]
        if first in b"{[":
            depth += 1
        elif first in b"}]" and depth:
            depth -= 1
        elif depth == 0 and first in b",]":
            _span(data, start, match.start(), spans)
            if first == b"]":
                return spans
            start = match.end()
    return spans


def _span(data: bytes, start: int, end: int, spans: list[tuple[int, int]]) -> None:
    """Add ``data[start:end]`` trimmed of white space (nothing when it is only that: ``[]``)."""
    while start < end and data[start] in b" \t\r\n":
        start += 1
    while end > start and data[end - 1] in b" \t\r\n":
        end -= 1
    if end > start:
        spans.append((start, end))


SNIFF_BYTES: Final = 16 * 1024
"""What :func:`first_value` reads at a time: a first line (a header) is usually far shorter."""


@dataclass(frozen=True, slots=True)
class JsonHead:
    """What :attr:`SourceReader.recognises` is given for a file whose first line opens a JSON
    document written over several lines (``{`` of a pretty-printed whole-file session): its
    first bytes, which a reader tells its own documents by (their first keys)."""

    data: bytes

    @property
    def first_key(self) -> str | None:
        """The first key of the document when it is an object."""
        match = _FIRST_KEY.match(self.data)
        if match is None:
            return None
        try:
            key = orjson.loads(match.group(1))
        except orjson.JSONDecodeError:  # a control character or a bad escape: not a key
            return None
        return key if isinstance(key, str) else None

    def names(self, key: str) -> bool:
        """Whether ``key`` is a key somewhere in the head."""
        return re.search(rb'"' + re.escape(key.encode()) + rb'"\s*:', self.data) is not None


_FIRST_KEY: Final = re.compile(rb'\s*\{\s*("(?:[^"\\]|\\.)*")\s*:')


def first_value(path: str, max_line_bytes: int) -> Any:
    """The JSON value of the first non-blank line of ``path``: :data:`NOT_JSON` when it is
    not JSON, is longer than ``max_line_bytes``, or there is none; a :class:`JsonHead` when
    it opens a JSON document written over several lines. Reads only that far."""
    from ..session import open_regular

    try:
        fd = open_regular(path)
    except OSError:
        return NOT_JSON
    try:
        pending, start = b"", 0
        while True:
            chunk = os.pread(fd, SNIFF_BYTES, len(pending))
            pending += chunk
            while (end := pending.find(b"\n", start)) >= 0 or not chunk:
                line = pending[start:] if end < 0 else pending[start:end]
                if len(line) > max_line_bytes:
                    return NOT_JSON
                line = line.removesuffix(b"\r")
                if line and not line.isspace():
                    value = _decoded(line)
                    if value is NOT_JSON and line.lstrip()[:1] in (b"{", b"["):
                        return JsonHead(pending[:SNIFF_BYTES])
                    return value
                if end < 0:
                    return NOT_JSON
                start = end + 1
            if len(pending) - start > max_line_bytes:
                return NOT_JSON
    except OSError:
        return NOT_JSON
    finally:
        os.close(fd)


def _decoded(line: bytes) -> Any:
    from ..session import decode_line

    try:
        return decode_line(line)
    except orjson.JSONDecodeError:
        return NOT_JSON


# --- the normalized stage: Pi-shaped entries ---------------------------------------------


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def thinking_block(text: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": text}


def tool_call_block(call_id: str, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """A tool call as Pi writes it; ``arguments`` is a JSON object (wrap anything else)."""
    return {"type": "toolCall", "id": call_id, "name": name, "arguments": arguments}


def message(role: str, content: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    """A ``message`` entry: ``user`` / ``assistant`` (text, thinking and tool-call blocks)."""
    return {"type": "message", "message": {"role": role, "content": content, **fields}}


HOST_CONTEXT: Final = "host-context"
"""The event kind of text a host wrote into a user turn itself (see :func:`user_message`)."""


def user_message(text: str, host_marks: tuple[str, ...] = ()) -> dict[str, Any]:
    """A user turn's text as the user's words; when it starts with one of ``host_marks``
    (what the host itself writes into a user turn: an environment block, a caveat, the
    project's instructions) as the event :data:`HOST_CONTEXT`, found and expanded like any
    entry, never taken for something the user said."""
    if host_marks and text.lstrip().startswith(host_marks):
        return event(HOST_CONTEXT, text)
    return message("user", [text_block(text)] if text else [])


def tool_result(call_id: str, tool: str | None, text: str, *, is_error: bool,
                exit_code: int | None = None, interrupted: bool = False) -> dict[str, Any]:
    """A ``toolResult`` message answering ``call_id`` (its ``tool`` name paired from the call;
    ``None`` when the call is not in the file); a command's ``exitCode`` when the agent
    reports one, ``interrupted`` when it was stopped before it finished."""
    result: dict[str, Any] = {"role": "toolResult", "toolCallId": call_id}
    if tool:
        result["toolName"] = tool
    result.update(content=[text_block(text)], isError=is_error)
    if exit_code is not None:
        result["exitCode"] = exit_code
    if interrupted:
        result["interrupted"] = True
    return {"type": "message", "message": result}


def add_usage(entry: Entry, input: int, output: int, cache_read: int,
              cache_write: int) -> None:
    """Add one turn's tokens to ``entry``'s recorded usage, in Pi's shape, beside its message
    (:data:`fabric_memory.view.USAGE`): what stats read, never compaction's estimate."""
    from ..view import USAGE

    usage = entry.raw.setdefault(USAGE, {"input": 0, "output": 0, "cacheRead": 0,
                                         "cacheWrite": 0})
    for key, number in (("input", input), ("output", output), ("cacheRead", cache_read),
                        ("cacheWrite", cache_write)):
        usage[key] += max(number, 0)


def drop_usage(entry: Entry) -> None:
    """Forget ``entry``'s recorded usage (a later entry records the same turn's)."""
    from ..view import USAGE

    entry.raw.pop(USAGE, None)


def tokens(value: Mapping[str, Any], key: str) -> int:
    """``value[key]`` when it is a whole number of tokens, else 0."""
    number = value.get(key)
    return number if type(number) is int and number > 0 else 0


def compaction(summary: str) -> dict[str, Any]:
    """An agent's own compaction summary (Claude's ``isCompactSummary``, Codex ``compacted``)."""
    return {"type": "compaction", "summary": summary}


def event(kind: str, text: str) -> dict[str, Any]:
    """Anything else worth remembering (a system line, run metadata), kept as text."""
    return {"type": "custom_message", "customType": kind, "content": text}


@dataclass(slots=True)
class Entries:
    """The entries of one source file, built in file order.

    Each :meth:`add` is one entry of ``line`` (a line, or a node of a
    :class:`JsonDocument`): the first keeps ``address`` (the agent's own
    id, else ``L<line>``), a further entry from the same line gets ``<address>.<k>``
    (k = 1, 2, …), as glued Pi lines do. Addresses depend only on their line, so they
    survive appends. Entries of one line chain through each other (``<address>`` →
    ``<address>.1`` → … → the line's parent), so a later line naming ``<address>`` as its
    parent keeps all of them on its branch.
    """

    entries: list[Entry] = field(default_factory=list)
    notes: list[LineProblem] = field(default_factory=list)
    _at: tuple[int, int] = (0, -1)
    _count: int = 0
    _base: str = ""

    def add(self, line: SourceLine, raw: dict[str, Any], *, address: str | None = None,
            parent: str | None = None, timestamp: str | None = None) -> Entry:
        """Add ``raw`` (a builder's result) read from ``line``; returns the entry.

        An entry whose raw source is no span of the file (a database row) is added from
        ``SourceLine(<row number>, 0, 0, row)`` and given its raw source as ``source`` (the
        row as JSON), which ``expand --raw`` returns: ``entries.add(…).source = …``."""
        return self._add(line, raw, address, parent, timestamp, follows=False)

    def follow(self, raw: dict[str, Any]) -> Entry:
        """Add ``raw`` as a further entry of the line (or node) added last that comes
        *after* the entry before it (a tool result after its call in the same node): its
        address is the next ``<address>.<k>``, its parent that entry, its time the same. The
        line's last entry is then the one a later entry follows (:attr:`last_id`)."""
        before = self.entries[-1]
        line = SourceLine(before.line, before.offset, before.length, None)
        entry = self._add(line, raw, self._base, before.id, before.timestamp, follows=True)
        entry.source = before.source
        return entry

    def _add(self, line: SourceLine, raw: dict[str, Any], address: str | None,
             parent: str | None, timestamp: str | None, *, follows: bool) -> Entry:
        from ..session import Entry, migrated_id

        if (line.number, line.offset) != self._at:  # several nodes may share a line
            self._at, self._count = (line.number, line.offset), 0
        base = self._base = address or migrated_id(line.number)
        entry_id = base if self._count == 0 else f"{base}.{self._count}"
        if self._count and not follows:  # the line's parent moves to this entry; the one
            before = self.entries[-1]     # before points here
            before.parent_id = before.raw["parentId"] = entry_id
        self._count += 1
        raw = {"id": entry_id, "parentId": parent, "timestamp": timestamp, **raw}
        kind = raw["type"]
        entry = Entry(entry_id, parent, kind, timestamp, line.number, line.offset, line.length,
                      raw, True, True)
        self.entries.append(entry)
        return entry

    def note(self, line: SourceLine | int, reason: str) -> None:
        """A line (or part of one) that yields no entry, and why (a located note)."""
        from ..session import LineProblem

        number = line if isinstance(line, int) else line.number
        self.notes.append(LineProblem(number, reason))

    @property
    def last_id(self) -> str | None:
        return self.entries[-1].id if self.entries else None


LINE_AGENTS: Final = frozenset({"pi", "omp"})
"""Agents whose lines are the entries themselves (Pi's format): an entry's address is its
own id. Another agent's entry is what its reader made of a line, and is also addressed by
that line (:func:`line_addresses`)."""
LINE_ADDRESS: Final = re.compile(r"L([1-9][0-9]*)(?:\.([1-9][0-9]*))?")
"""``L<line>`` (the first entry of a physical line) or ``L<line>.<k>`` (its k-th further
entry)."""


def line_addresses(entries: Iterable[Entry]) -> dict[str, str]:
    """Entry id → its line address (``L877``; ``L877.1`` for a line's second entry), for the
    entries whose id is not one already: short, and accepted back by ``expand`` for any
    agent whose file has lines (a Claude Code entry's own id is a 36-character UUID)."""
    found: dict[str, str] = {}
    line = count = 0
    for entry in entries:
        if entry.line != line:
            line, count = entry.line, 0
        address = f"L{line}" if count == 0 else f"L{line}.{count}"
        count += 1
        if address != entry.id:
            found[entry.id] = address
    return found


def name_ids(raw: dict[str, Any], ids: Collection[str | None]) -> None:
    """Add ``ids`` (the non-empty ones, once each) to the entry's :data:`IDS`: ids its line
    holds in structural fields (a session's, a stage's), which recall finds the entry by."""
    named = list(dict.fromkeys([*raw.get(IDS, ()), *(value for value in ids if value)]))
    if named:
        raw[IDS] = named


class Source(Protocol):
    """What :func:`build_session` reads of where entries came from: a :class:`JsonLines`,
    a :class:`JsonDocument`, a :class:`~fabric_memory.sources.database.Database`."""

    path: str
    problems: list[LineProblem]
    truncated: LineProblem | None
    size: int

    @property
    def source_hash(self) -> str: ...


def build_session(
    lines: Source, entries: Entries, *, agent: str, session_id: str,
    project: str | None, header: dict[str, Any], version: int = 1,
) -> Session:
    """The :class:`~fabric_memory.session.Session` a source reader returns."""
    from ..session import Session

    by_id: dict[str, Entry] = {}
    duplicates: list[str] = []
    for entry in entries.entries:
        if entry.id in by_id:
            duplicates.append(entry.id)
        by_id[entry.id] = entry
    problems = sorted([*lines.problems, *entries.notes], key=lambda problem: problem.line)
    return Session(
        path=lines.path, header=header, title=None, session_id=session_id, version=version,
        entries=tuple(entries.entries), source_hash=lines.source_hash, size=lines.size,
        malformed=tuple(problems), truncated_tail=lines.truncated,
        duplicate_ids=tuple(duplicates), by_id=by_id, agent=agent, project=project,
    )


def block_text(content: object, kind: str | None = None) -> str:
    """The text of a ``content`` value: the string itself, or the ``text`` of its blocks
    (only those of type ``kind`` when given), one per line."""
    if isinstance(content, str):
        return content
    if type(content) is not list:
        return ""
    return "\n".join(text for block in content if type(block) is dict
                     and (kind is None or block.get("type") == kind)
                     and (text := string(block.get("text"))))


def string(value: object) -> str | None:
    """``value`` when it is a non-empty string."""
    return value if isinstance(value, str) and value else None


def under(root: Path, path: str) -> bool:
    """Whether the real path ``path`` lies inside ``root`` (its symlinks resolved; a folder
    that does not exist holds no file)."""
    real = real_folder(root)
    return real is not None and path.startswith(os.path.join(real, ""))


_REAL: dict[str, tuple[int, int, str]] = {}
"""Folder as named → (device, inode, real path) when last resolved."""


def real_folder(root: str | os.PathLike[str]) -> str | None:
    """The real path of the folder ``root`` (None when there is none). Every file read asks
    whether an agent's home holds it: one ``stat`` (is it still the folder resolved last
    time?) instead of an ``lstat`` per part of the path."""
    name = os.fspath(root)
    try:
        found = os.stat(name)
    except OSError:
        return None
    known = _REAL.get(name)
    if known is not None and known[:2] == (found.st_dev, found.st_ino):
        try:
            again = os.stat(known[2])
        except OSError:
            again = None
        if again is not None and (again.st_dev, again.st_ino) == known[:2]:
            return known[2]
    real = os.path.realpath(name)
    if len(_REAL) >= 64:  # (a handful of homes in practice)
        _REAL.clear()
    _REAL[name] = (found.st_dev, found.st_ino, real)
    return real


def from_environment(*names: str) -> Callable[[Callable[[], Path]], Callable[[], Path]]:
    """Remember the folder ``function`` finds while the environment variables ``names`` (and
    ``HOME``) keep their values: an agent's home is looked up for every file read."""

    def decorate(function: Callable[[], Path]) -> Callable[[], Path]:
        found: dict[tuple[str | None, ...], Path] = {}
        keys = (*names, "HOME")

        @functools.wraps(function)
        def folder() -> Path:
            key = tuple(map(os.environ.get, keys))
            path = found.get(key)
            if path is None:
                if len(found) >= 16:
                    found.clear()
                path = found[key] = function()
            return path

        return folder

    return decorate
