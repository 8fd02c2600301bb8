"""Reading Pi session files: streaming JSONL, branches, hashes.

A session file is read once, in chunks, hashing exactly the bytes read. Lines are
split on ``\\n`` only (U+2028/U+2029 inside strings are data), a trailing ``\\r`` is
stripped, and no line longer than ``max_line_bytes`` is ever held in memory.

Entries, ids, the leaf and version 1/2 migration follow Pi 1.6.0's own reading of a file
(docs/sessions.md lists every rule and the few deliberate differences).
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import re
import stat
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Final, Literal, NamedTuple

import orjson
import xxhash

from ._gc import no_cyclic_gc
from ._wal import write_ahead_log
from .errors import LineTooLongError, NotASessionError, SessionError
from .view import EntryView, view_entry

DEFAULT_MAX_LINE_BYTES = 8 * 1024 * 1024
CHUNK_BYTES = 1024 * 1024
CURRENT_VERSION = 3

BranchMode = Literal["active", "all"]


# Built for every line of every file read and never changed afterwards; not ``frozen``,
# which would make building it ~5x slower (each field set through ``object.__setattr__``).
@dataclass(slots=True)
class Entry:
    """One session entry: where its line is in the file and what it says."""

    id: str
    parent_id: str | None
    type: str
    timestamp: str | None
    line: int
    """1-based physical line number (of a whole-file JSON node: the line it starts on)."""
    offset: int
    """Byte offset of the line's first byte (of a node: its first byte)."""
    length: int
    """Byte length of the line without ``\\n`` (and without a stripped ``\\r``); of a node,
    its exact bytes. 0 when the entry's raw source is no span of the file (``source``)."""
    raw: dict[str, Any]
    """The entry as Pi holds it after migrating the file (for v3 files, the line's object;
    ``{}`` for a line that is valid JSON but not an object)."""
    migrated: bool = False
    """True when ``id`` or ``raw`` is not the line's own (v1/v2 migration, no usable id)."""
    has_id: bool = True
    """False for an entry without a non-empty string id: Pi keeps it, but no parent link
    reaches it, and as the last entry it leaves Pi with no active branch."""
    source: bytes | None = None
    """The entry's raw source when it is no span of the file (a database row, as JSON its
    reader writes): what ``expand --raw`` returns for it; ``offset`` and ``length`` are 0."""
    _view: EntryView | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def view(self) -> EntryView:
        """What later stages read of this entry (:mod:`fabric_memory.view`): built on first
        use, then kept, so the message is read and the trace guarded once per entry."""
        view = self._view
        if view is None:
            view = self._view = view_entry(self.id, self.type, self.parent_id, self.timestamp,
                                           self.raw)
        return view

    @property
    def message(self) -> dict[str, Any] | None:
        message = self.raw.get("message") if self.type == "message" else None
        return message if isinstance(message, dict) else None

    @property
    def role(self) -> str | None:
        message = self.message
        role = message.get("role") if message is not None else None
        return role if isinstance(role, str) else None

    @property
    def tool_name(self) -> str | None:
        message = self.message
        if message is None or message.get("role") != "toolResult":
            return None
        name = message.get("toolName")
        return name if isinstance(name, str) else None


@dataclass(frozen=True, slots=True)
class LineProblem:
    """A line the reader skipped, and why."""

    line: int
    reason: str

    def located(self, path: str) -> str:
        return f"{path}:{self.line}: {self.reason}"


@dataclass(frozen=True, slots=True)
class GluedLine:
    """A line Pi drops because a crash glued complete JSON objects together on it: no
    entry of the session, but its objects can still be remembered (see
    docs/sessions.md#glued-lines)."""

    line: int
    offset: int
    length: int
    objects: tuple[dict[str, Any], ...]


@dataclass(frozen=True, slots=True)
class Session:
    """A parsed session file. Entries are in file order; ``by_id`` maps each id to
    its last occurrence (as Pi's own index does)."""

    path: str
    header: dict[str, Any]
    title: dict[str, Any] | None
    session_id: str
    version: int
    entries: tuple[Entry, ...]
    source_hash: str
    size: int
    malformed: tuple[LineProblem, ...] = ()
    truncated_tail: LineProblem | None = None
    duplicate_ids: tuple[str, ...] = ()
    by_id: Mapping[str, Entry] = field(default_factory=dict)
    glued: tuple[GluedLine, ...] = ()
    """Malformed lines that are complete JSON objects glued together (also in ``malformed``)."""
    agent: str = "pi"
    """The agent that wrote the file (:mod:`fabric_memory.sources`): ``pi`` for Pi's reader."""
    project: str | None = None
    """The folder the agent worked in (Pi's header ``cwd``), when the file says."""

    @property
    def leaf_id(self) -> str | None:
        """The last entry in file order is the leaf of the active branch (Pi's ``leafId``);
        ``None`` when there is none or it has no id of its own (Pi's branch is then empty)."""
        last = self.entries[-1] if self.entries else None
        return last.id if last is not None and last.has_id else None

    def branch(self, leaf_id: str | None) -> list[Entry]:
        """The chain from ``leaf_id`` back to its root, root first; cycles stop the walk."""
        chain: list[Entry] = []
        seen: set[str] = set()
        current = self.by_id.get(leaf_id) if leaf_id is not None else None
        while current is not None and current.id not in seen:
            seen.add(current.id)
            chain.append(current)
            current = self.by_id.get(current.parent_id) if current.parent_id else None
        chain.reverse()
        return chain

    def active_branch(self) -> list[Entry]:
        return self.branch(self.leaf_id)

    def active_ids(self) -> frozenset[str]:
        return frozenset(entry.id for entry in self.active_branch())

    def roots(self) -> list[str]:
        return [e.id for e in self.entries if not e.parent_id or e.parent_id not in self.by_id]

    def lineage_fingerprint(self, mode: BranchMode = "active") -> str:
        """Hash of (mode, leaf, ordered entry ids of the selected branches)."""
        ids = [e.id for e in self.active_branch()] if mode == "active" else [
            e.id for e in self.entries
        ]
        return lineage_fingerprint(mode, self.leaf_id, ids)


def lineage_fingerprint(mode: str, leaf_id: str | None, ids: list[str]) -> str:
    """Hash over the branch mode, the leaf id and the ordered entry ids."""
    digest = xxhash.xxh3_128()
    digest.update(f"{mode}\0{leaf_id or ''}".encode())
    for entry_id in ids:
        digest.update(b"\0")
        digest.update(entry_id.encode())
    return digest.hexdigest()


@dataclass(frozen=True, slots=True)
class FileFingerprint:
    """What a file holds right now: its byte count, ``sourceHash`` and last byte."""

    size: int
    source_hash: str
    last_byte: bytes


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def open_regular(path: str) -> int:
    """A read-only descriptor of ``path``; :class:`OSError` unless it is a regular file.

    ``O_NONBLOCK``: opening a FIFO without a writer would otherwise wait forever (and a
    query refreshing the hot tier would hold the writer lock all that time). It changes
    nothing for a regular file.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    mode = os.fstat(fd).st_mode
    if stat.S_ISREG(mode):
        return fd
    os.close(fd)
    kind = next((name for test, name in _KINDS if test(mode)), "a special file")
    raise OSError(errno.EINVAL, f"not a regular file ({kind})")


def fingerprint_file(source: str | int, path: str | None = None) -> FileFingerprint:
    """Hash every byte of a file (a path, or an open descriptor read positionally from 0
    without moving its offset), the way :func:`read_session` computes ``sourceHash``.

    A session store's write-ahead log (:func:`write_ahead_log`) beside the file (``path``
    names it when ``source`` is a descriptor) is part of it: its rows are read from the
    log too, so its bytes follow the file's in the hash and the size."""
    fd = open_regular(source) if isinstance(source, str) else source
    digest = xxhash.xxh3_128()
    try:
        size, last = _digest(fd, digest)
    finally:
        if fd is not source:
            os.close(fd)
    log = write_ahead_log(source if isinstance(source, str) else path)
    if log is not None:
        try:
            fd = open_regular(log)
        except OSError:
            pass  # gone since (the agent checkpointed and closed): the file holds its rows
        else:
            try:
                size += _digest(fd, digest)[0]
            finally:
                os.close(fd)
    return FileFingerprint(size, digest.hexdigest(), last)


def _digest(fd: int, digest: Any) -> tuple[int, bytes]:
    """Feed every byte of ``fd`` to ``digest``: their count and the last byte."""
    offset = 0
    last = b""
    while chunk := os.pread(fd, CHUNK_BYTES, offset):
        digest.update(chunk)
        offset += len(chunk)
        last = chunk[-1:]
    return offset, last


def hash_file(source: str | int, path: str | None = None) -> str:
    """``sourceHash`` of a file's current bytes (see :func:`fingerprint_file`)."""
    return fingerprint_file(source, path).source_hash


def iter_session_files(root: str | os.PathLike[str],
                       also: Callable[[str], bool] | None = None) -> Iterator[Path]:
    """Every ``*.jsonl`` file under ``root`` (and every other file ``also`` says yes to, by
    its path), recursively, sorted by path.

    What ``sorted(p for p in root.rglob("*.jsonl") if p.is_file())`` gives (symlinked
    folders are not entered, a symlink to a file counts, unreadable folders are
    skipped), from one ``scandir`` per folder: a regular file costs no ``stat``. A FIFO,
    socket or device with such a name is listed too, so that reading it reports it.
    """
    base = Path(root)
    if base.is_file():
        yield base
        return
    if not base.is_dir():
        return
    found: list[tuple[str, ...]] = []
    _collect(os.fspath(base), (), found, also)
    for parts in sorted(found):
        yield base.joinpath(*parts)


_IGNORED_ERRNOS = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP})
"""What ``pathlib`` treats as "no such file" when it asks whether a path is a file/folder."""


def _collect(directory: str, prefix: tuple[str, ...], found: list[tuple[str, ...]],
             also: Callable[[str], bool] | None) -> None:
    try:
        with os.scandir(directory) as scan:
            entries = list(scan)
    except PermissionError:
        return
    for entry in entries:
        name = entry.name
        wanted = name.endswith(".jsonl") or (also is not None and also(entry.path))
        if wanted and (_entry_is(entry, folder=False) or _special(entry)):
            found.append((*prefix, name))
        if _entry_is(entry, folder=True):
            _collect(entry.path, (*prefix, name), found, also)


def _special(entry: os.DirEntry[str]) -> bool:
    """A FIFO, socket or device: listed so that its reader reports it, never opened blocking."""
    try:
        mode = entry.stat().st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _entry_is(entry: os.DirEntry[str], *, folder: bool) -> bool:
    """A folder (not through a symlink), or a file (through one): as ``pathlib`` decides."""
    try:
        return entry.is_dir(follow_symlinks=False) if folder else entry.is_file()
    except OSError as exc:
        if exc.errno not in _IGNORED_ERRNOS:
            raise
        return False


def iter_lines(
    stream: BinaryIO, path: str, max_line_bytes: int, digest: Any
) -> Iterator[tuple[int, int, bytes, bool]]:
    """Yield ``(line_number, offset, line_bytes, ended_with_newline)`` for every line.

    The digest is fed every byte read. A line longer than ``max_line_bytes`` raises
    before more than ``max_line_bytes + CHUNK_BYTES`` bytes of it are held.
    """
    pending = bytearray()
    pending_offset = 0
    line_number = 0
    position = 0
    while True:
        chunk = stream.read(CHUNK_BYTES)
        if not chunk:
            break
        digest.update(chunk)
        start = 0
        while True:
            newline = chunk.find(b"\n", start)
            if newline < 0:
                break
            line_number += 1
            if pending:
                pending += chunk[start:newline]
                line = bytes(pending)
                offset = pending_offset
                pending.clear()
            else:
                line = chunk[start:newline]
                offset = position + start
            if len(line) > max_line_bytes:
                raise _too_long(path, line_number, max_line_bytes)
            yield line_number, offset, line, True
            start = newline + 1
        if start < len(chunk):
            if not pending:
                pending_offset = position + start
            pending += chunk[start:]
            if len(pending) > max_line_bytes:
                raise _too_long(path, line_number + 1, max_line_bytes)
        position += len(chunk)
    if pending:
        yield line_number + 1, pending_offset, bytes(pending), False


def _too_long(path: str, line: int, limit: int) -> LineTooLongError:
    return LineTooLongError(
        path, line, f"line longer than {limit} bytes (raise --max-line-bytes to read it)"
    )


def decode_line(line: bytes) -> Any:
    """The line's JSON value as JavaScript's ``JSON.parse`` reads it (Pi's loader).

    orjson reads almost every line. What it refuses but ``JSON.parse`` accepts is read
    again the JavaScript way: invalid UTF-8 decoded to U+FFFD (Node's decoder), lone
    surrogate escapes kept as U+FFFD (the same length in UTF-16 units, and encodable),
    numbers past the double range as infinities (which serialize as ``null``, as in
    JavaScript). Anything else raises orjson's error.
    """
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        if exc.msg in (_TRAILING, _TOO_DEEP):
            raise
        value = _decode_as_javascript(line)
        if value is _REFUSED:
            raise
        return value


_REFUSED: Final = object()
_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _decode_as_javascript(line: bytes) -> Any:
    def refuse(constant: str) -> Any:
        raise ValueError(constant)  # NaN and Infinity are not JSON

    try:
        value = json.loads(line.decode("utf-8", "replace"), parse_constant=refuse,
                           parse_int=_js_integer)
    except (ValueError, RecursionError):
        return _REFUSED
    return _without_lone_surrogates(value)


def _js_integer(digits: str) -> int | float:
    """An integer as orjson reads it: exact within 64 bits, else a double."""
    value = int(digits)
    return value if -(2**63) <= value < 2**64 else float(digits)


def _without_lone_surrogates(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings (keys too) replaced by U+FFFD."""
    if isinstance(value, str):
        return _fix_text(value)
    stack = [value] if isinstance(value, dict | list) else []
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            node[:] = [_fix_text(item) if isinstance(item, str) else item for item in node]
            stack.extend(item for item in node if isinstance(item, dict | list))
            continue
        pairs = list(node.items())
        node.clear()
        for key, item in pairs:
            node[_fix_text(key)] = _fix_text(item) if isinstance(item, str) else item
            if isinstance(item, dict | list):
                stack.append(item)
    return value


def _fix_text(text: str) -> str:
    return _LONE_SURROGATE.sub("\ufffd", text)


def read_session(
    path: str | os.PathLike[str], *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
) -> Session:
    """Read one session file; raise :class:`NotASessionError` if it is not one."""
    name = os.fspath(path)
    digest = xxhash.xxh3_128()
    try:
        with no_cyclic_gc(), os.fdopen(open_regular(name), "rb") as stream:
            return _parse(name, iter_lines(stream, name, max_line_bytes, digest), digest)
    except OSError as exc:
        raise SessionError(name, None, f"cannot read file: {exc.strerror or exc}") from exc


class _Line(NamedTuple):
    """A JSON value Pi's loader keeps (a truthy value after the header), and where it is."""

    value: Any
    line: int
    offset: int
    length: int


@dataclass(slots=True)
class _Scan:
    """What one pass over a file's lines finds, before any migration."""

    header: dict[str, Any] | None = None
    title: dict[str, Any] | None = None
    version: int = 1
    """The header's version, once it is read."""
    entries: list[Entry] = field(default_factory=list)
    """The entries of a v2/v3 file, built as their lines are read."""
    kept: list[_Line | None] = field(default_factory=list)
    """Pi's parsed values after the header of a v1 file, in order (to be migrated);
    ``None`` for a repeated header."""
    malformed: list[LineProblem] = field(default_factory=list)
    glued: list[GluedLine] = field(default_factory=list)
    truncated: LineProblem | None = None
    not_a_session: NotASessionError | None = None
    """The first line before the header that is not JSON (raised if no header follows)."""
    size: int = 0


def _parse(
    path: str, lines: Iterator[tuple[int, int, bytes, bool]], digest: Any
) -> Session:
    scan = _Scan()
    try:
        for number, offset, data, ended in lines:
            scan.size = offset + len(data) + (1 if ended else 0)
            _scan_line(path, scan, number, offset, data.removesuffix(b"\r"), ended)
    except LineTooLongError:
        if scan.header is None and scan.not_a_session is not None:
            raise scan.not_a_session from None
        raise
    header = scan.header
    if header is None:
        raise scan.not_a_session or NotASessionError(path, None, "empty file: no session header")
    version = scan.version
    entries = _migrate_v1(scan.kept, scan.malformed) if version < 2 else scan.entries
    if version < CURRENT_VERSION:
        entries = [_hook_message_to_custom(entry) for entry in entries]
    by_id: dict[str, Entry] = {}
    duplicates: list[str] = []
    for entry in entries:
        if not entry.has_id:
            continue
        if entry.id in by_id:
            duplicates.append(entry.id)
        by_id[entry.id] = entry
    return Session(
        path=path,
        header=header,
        title=scan.title,
        session_id=header["id"],
        version=version,
        entries=tuple(entries),
        source_hash=digest.hexdigest(),
        size=scan.size,
        malformed=tuple(sorted(scan.malformed, key=lambda problem: problem.line)),
        truncated_tail=scan.truncated,
        duplicate_ids=tuple(duplicates),
        by_id=by_id,
        glued=tuple(scan.glued),
        project=header["cwd"] if isinstance(header.get("cwd"), str) else None,
    )


def _not_json(data: bytes, exc: orjson.JSONDecodeError) -> str:
    """Why a line before any header is no session's first line."""
    if exc.msg == _UNEXPECTED_END and data.lstrip()[:1] in (b"{", b"["):
        return ("not JSON Lines: this line opens a JSON value it does not close (a document "
                "written over several lines, or cut short), and no agent's reader recognises "
                "the file (the session files read: docs/agents.md)")
    return f"not JSON ({_short(exc)})"


def _scan_line(
    path: str, scan: _Scan, number: int, offset: int, data: bytes, ended: bool
) -> None:
    """One line, as Pi 1.6.0's ``loadEntriesFromFile`` and ``_buildIndex`` take it: blank
    lines, malformed JSON and falsy values are skipped everywhere (before the header too);
    a later line whose type is ``session`` (a repeated header) is skipped; every other
    value is an entry, even one without an id or a type."""
    if not data or data.isspace():
        return
    try:
        value = decode_line(data)
    except orjson.JSONDecodeError as exc:
        if scan.header is None and exc.msg == _TOO_DEEP:
            # Valid JSON to Pi (JSON.parse has no depth limit), so not a session header.
            raise NotASessionError(path, number, f"first JSON line is not a session header "
                                   f"({_short(exc)})") from None
        if scan.header is None:
            scan.not_a_session = scan.not_a_session or NotASessionError(
                path, number, _not_json(data, exc)
            )
        elif not ended:
            scan.truncated = LineProblem(number, "truncated_tail: half-written last line ignored")
        else:
            reason = f"malformed JSON line skipped ({_short(exc)})"
            objects = glued_objects(data) if exc.msg == _TRAILING else ()
            if objects:
                scan.glued.append(GluedLine(number, offset, len(data), objects))
                reason = (f"complete JSON objects glued together ({len(objects)} kept for "
                          "memory); skipped as Pi does")
            scan.malformed.append(LineProblem(number, reason))
        return
    if scan.header is None:
        if not _js_truthy(value):
            return
        if isinstance(value, dict) and value.get("type") == "title" and scan.title is None:
            scan.title = value
            return
        try:
            _check_header(path, number, value)
        except NotASessionError as error:
            # The first bad line before it is the likelier cause (a BOM, a torn header).
            raise (scan.not_a_session or error) from None
        scan.header = value
        scan.version = _version(value)
    # An object is always truthy: the exact type test spares almost every line the rest.
    elif type(value) is not dict and not _js_truthy(value):
        scan.malformed.append(LineProblem(number, f"JSON {_js_shown(value)} skipped"))
    elif scan.version < 2:
        repeated_header = type(value) is dict and value.get("type") == "session"
        scan.kept.append(None if repeated_header else _Line(value, number, offset, len(data)))
    elif type(value) is not dict or value.get("type") != "session":
        # Built right away: a second pass over the lines cost a tenth of reading a file.
        scan.entries.append(_line_entry(value, number, offset, len(data)))


_TOO_DEEP = "depth limit exceeded"
"""orjson's message for JSON nested past its limit (1,024 levels)."""
_TRAILING = "unexpected content after document"
"""orjson's message for a complete JSON value followed by more text."""
_UNEXPECTED_END = "unexpected end of data"
"""orjson's message for a JSON value cut short (a document's first line alone)."""
MAX_GLUED_OBJECTS = 64


def glued_objects(data: bytes) -> tuple[dict[str, Any], ...]:
    """The complete JSON objects a line holds back to back (a crash glued lines together),
    in order; an incomplete or non-object rest is left out. At most
    :data:`MAX_GLUED_OBJECTS`."""
    try:
        rest = data.decode()
    except UnicodeDecodeError:
        return ()
    objects: list[dict[str, Any]] = []
    while rest.strip() and len(objects) < MAX_GLUED_OBJECTS:
        try:
            value, rest = orjson.loads(rest), ""
        except orjson.JSONDecodeError as exc:
            if exc.msg != _TRAILING or exc.pos == 0:
                break
            # ``pos`` counts characters of the text orjson was given.
            value, rest = _loads_or_none(rest[: exc.pos]), rest[exc.pos :]
        if not isinstance(value, dict):
            break
        objects.append(value)
    return tuple(objects)


def _loads_or_none(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return None


def _js_truthy(value: Any) -> bool:
    """JavaScript truthiness of a parsed JSON value (``{}`` and ``[]`` are truthy)."""
    if value is None or value is False or value == "":
        return False
    return not (isinstance(value, int | float) and value == 0)


def _js_shown(value: Any) -> str:
    return "null" if value is None else orjson.dumps(value).decode()


def _short(exc: Exception) -> str:
    return str(exc).split(":", 1)[0]


def _check_header(path: str, line: int, value: Any) -> None:
    if not isinstance(value, dict):
        raise NotASessionError(path, line, "first JSON line is not a JSON object")
    if value.get("type") != "session":
        raise NotASessionError(
            path, line, "first JSON line is not a session header (type != 'session')"
        )
    if not isinstance(value.get("id"), str) or not value["id"]:
        raise NotASessionError(path, line, "session header has no string 'id'")
    version = value.get("version", 1)
    if type(version) is not int or not 1 <= version <= CURRENT_VERSION:
        # Only scalars are shown: a container's repr could be huge or nested past recursion.
        shown = repr(version)[:40] if isinstance(version, int | float | str) else type(
            version
        ).__name__
        raise NotASessionError(path, line, f"unsupported session version {shown}")


def _version(header: dict[str, Any]) -> int:
    version = header.get("version", 1)
    return version if type(version) is int else 1


def migrated_id(line: int) -> str:
    """Deterministic id of an entry whose id is not its own: ``L<physical line>``.

    Every entry of a v1 file gets one (Pi gives them random ids when it migrates the
    file); so does a later entry without a usable id, which no parent link can reach.
    Stable across runs and across appends, since an entry's line never moves.
    """
    return f"L{line}"


def _line_entry(value: Any, line: int, offset: int, length: int) -> Entry:
    """An entry of a v2/v3 file. One without a non-empty string id is kept (Pi indexes it
    under ``undefined``): it gets a line-derived id, and no parent link reaches it."""
    raw = value if isinstance(value, dict) else {}
    entry_id, parent = raw.get("id"), raw.get("parentId")
    has_id = isinstance(entry_id, str) and entry_id != ""
    return _entry(
        raw,
        entry_id if isinstance(entry_id, str) and has_id else migrated_id(line),
        parent if isinstance(parent, str) and parent else None,
        line,
        offset,
        length,
        has_id=has_id,
        migrated=not has_id,
    )


def _migrate_v1(kept: list[_Line | None], malformed: list[LineProblem]) -> list[Entry]:
    """Pi's ``migrateV1ToV2``: every entry gets an id and the previous entry as parent, and
    a compaction's ``firstKeptEntryIndex`` (an index into the parsed values, header = 0,
    repeated headers counted) becomes ``firstKeptEntryId``: the id the target has at that
    moment (its own ``id`` field when it comes later), nothing when it is a header."""
    ids: dict[int, str] = {}
    for position, item in enumerate(kept):
        if item is not None and isinstance(item.value, dict | list):
            ids[position] = migrated_id(item.line)
    entries: list[Entry] = []
    previous: str | None = None
    for position, item in enumerate(kept):
        if item is None:
            continue
        if position not in ids:
            # Pi cannot migrate a file with a number or string line (it throws).
            malformed.append(LineProblem(item.line, "v1 entry is not a JSON object; skipped"))
            continue
        # As Pi holds it after migrating: its id and parent set in place.
        raw = dict(item.value) if isinstance(item.value, dict) else {}
        raw["id"], raw["parentId"] = ids[position], previous
        if raw.get("type") == "compaction":
            raw = _first_kept_by_index(raw, position, kept, ids)
        entries.append(
            _entry(raw, ids[position], previous, item.line, item.offset, item.length,
                   has_id=True, migrated=True)
        )
        previous = ids[position]
    return entries


def _first_kept_by_index(
    raw: dict[str, Any], position: int, kept: list[_Line | None], ids: dict[int, str]
) -> dict[str, Any]:
    index = raw.get("firstKeptEntryIndex")
    if not isinstance(index, int | float) or isinstance(index, bool):
        return raw
    migrated = {key: value for key, value in raw.items() if key != "firstKeptEntryIndex"}
    # ``kept`` starts after the header, which is index 0 of Pi's parsed values.
    target = int(index) - 1 if float(index).is_integer() and index >= 1 else None
    if target is None or target >= len(kept) or kept[target] is None:
        return migrated  # no such entry, or a header: firstKeptEntryId stays as it was
    if target <= position:
        migrated["firstKeptEntryId"] = ids.get(target)
    else:
        later = kept[target]
        own = later.value.get("id") if later is not None and isinstance(later.value, dict) else None
        migrated["firstKeptEntryId"] = own
    if migrated["firstKeptEntryId"] is None:
        del migrated["firstKeptEntryId"]  # Pi sets it to undefined
    return migrated


def _hook_message_to_custom(entry: Entry) -> Entry:
    """Pi's ``migrateV2ToV3``: the ``hookMessage`` role is now ``custom``."""
    message = entry.message
    if message is None or message.get("role") != "hookMessage":
        return entry
    raw = {**entry.raw, "message": {**message, "role": "custom"}}
    return dataclasses.replace(entry, raw=raw, migrated=True)


def _entry(
    raw: dict[str, Any],
    entry_id: str,
    parent: str | None,
    line: int,
    offset: int,
    length: int,
    *,
    has_id: bool,
    migrated: bool,
) -> Entry:
    entry_type = raw.get("type")
    timestamp = raw.get("timestamp")
    # Positional: keyword arguments to the dataclass's __init__ took 4x as long (0.5 ms a MiB).
    return Entry(
        entry_id,
        parent,
        entry_type if isinstance(entry_type, str) else "",
        timestamp if isinstance(timestamp, str) else None,
        line,
        offset,
        length,
        raw,
        migrated,
        has_id,
    )


def read_line(path: str, entry: Entry) -> bytes:
    """The verbatim source line of ``entry`` (without its line terminator)."""
    with os.fdopen(open_regular(path), "rb") as stream:
        stream.seek(entry.offset)
        return stream.read(entry.length)
