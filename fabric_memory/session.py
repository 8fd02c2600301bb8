"""Reading Pi session files: streaming JSONL, branches, hashes.

A session file is read once, in chunks, hashing exactly the bytes read. Lines are
split on ``\\n`` only (U+2028/U+2029 inside strings are data), a trailing ``\\r`` is
stripped, and no line longer than ``max_line_bytes`` is ever held in memory.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Literal

import orjson
import xxhash

from .errors import LineTooLongError, NotASessionError, SessionError
from .view import EntryView, view_entry

DEFAULT_MAX_LINE_BYTES = 8 * 1024 * 1024
CHUNK_BYTES = 1024 * 1024
CURRENT_VERSION = 3

BranchMode = Literal["active", "all"]


@dataclass(frozen=True, slots=True)
class Entry:
    """One session entry: where its line is in the file and what it says."""

    id: str
    parent_id: str | None
    type: str
    timestamp: str | None
    line: int
    """1-based physical line number."""
    offset: int
    """Byte offset of the line's first byte."""
    length: int
    """Byte length of the line without ``\\n`` (and without a stripped ``\\r``)."""
    raw: dict[str, Any]
    migrated: bool = False
    _view: EntryView | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def view(self) -> EntryView:
        """What later stages read of this entry (:mod:`fabric_memory.view`): built on first
        use, then kept, so the message is read and the trace guarded once per entry."""
        view = self._view
        if view is None:
            view = view_entry(self.id, self.type, self.parent_id, self.timestamp, self.raw)
            object.__setattr__(self, "_view", view)
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

    @property
    def leaf_id(self) -> str | None:
        """The last entry in file order is the leaf of the active branch."""
        return self.entries[-1].id if self.entries else None

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


def fingerprint_file(source: str | int) -> FileFingerprint:
    """Hash every byte of a file (a path, or an open descriptor read positionally from 0
    without moving its offset), the way :func:`read_session` computes ``sourceHash``."""
    fd = open_regular(source) if isinstance(source, str) else source
    digest = xxhash.xxh3_128()
    offset = 0
    last = b""
    try:
        while chunk := os.pread(fd, CHUNK_BYTES, offset):
            digest.update(chunk)
            offset += len(chunk)
            last = chunk[-1:]
    finally:
        if fd is not source:
            os.close(fd)
    return FileFingerprint(offset, digest.hexdigest(), last)


def hash_file(source: str | int) -> str:
    """``sourceHash`` of a file's current bytes (see :func:`fingerprint_file`)."""
    return fingerprint_file(source).source_hash


def iter_session_files(root: str | os.PathLike[str]) -> Iterator[Path]:
    """Every ``*.jsonl`` file under ``root``, recursively, sorted by path.

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
    _collect(os.fspath(base), (), found)
    for parts in sorted(found):
        yield base.joinpath(*parts)


_IGNORED_ERRNOS = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP})
"""What ``pathlib`` treats as "no such file" when it asks whether a path is a file/folder."""


def _collect(directory: str, prefix: tuple[str, ...], found: list[tuple[str, ...]]) -> None:
    try:
        with os.scandir(directory) as scan:
            entries = list(scan)
    except PermissionError:
        return
    for entry in entries:
        name = entry.name
        if name.endswith(".jsonl") and (_entry_is(entry, folder=False) or _special(entry)):
            found.append((*prefix, name))
        if _entry_is(entry, folder=True):
            _collect(entry.path, (*prefix, name), found)


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


def _decode(line: bytes) -> Any:
    return orjson.loads(line)


def read_session(
    path: str | os.PathLike[str], *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
) -> Session:
    """Read one session file; raise :class:`NotASessionError` if it is not one."""
    name = os.fspath(path)
    digest = xxhash.xxh3_128()
    try:
        with os.fdopen(open_regular(name), "rb") as stream:
            return _parse(name, iter_lines(stream, name, max_line_bytes, digest), digest)
    except OSError as exc:
        raise SessionError(name, None, f"cannot read file: {exc.strerror or exc}") from exc


def _parse(
    path: str, lines: Iterator[tuple[int, int, bytes, bool]], digest: Any
) -> Session:
    header: dict[str, Any] | None = None
    title: dict[str, Any] | None = None
    entries: list[Entry] = []
    malformed: list[LineProblem] = []
    truncated: LineProblem | None = None
    size = 0
    previous_id: str | None = None
    for number, offset, data, ended in lines:
        size = offset + len(data) + (1 if ended else 0)
        if data.endswith(b"\r"):
            data = data[:-1]
        if not data.strip():
            continue
        try:
            value = _decode(data)
        except orjson.JSONDecodeError as exc:
            if header is None:
                raise NotASessionError(path, number, f"not JSON ({_short(exc)})") from None
            if not ended:
                truncated = LineProblem(number, "truncated_tail: half-written last line ignored")
            else:
                reason = f"malformed JSON line skipped ({_short(exc)})"
                malformed.append(LineProblem(number, reason))
            continue
        if not isinstance(value, dict):
            if header is None:
                raise NotASessionError(path, number, "first line is not a JSON object")
            malformed.append(LineProblem(number, "line is not a JSON object; skipped"))
            continue
        if header is None:
            if value.get("type") == "title" and title is None and not entries:
                title = value
                continue
            _check_header(path, number, value)
            header = value
            continue
        entry = _entry(value, number, offset, len(data), _version(header), previous_id)
        if entry is None:
            malformed.append(LineProblem(number, "entry without a string 'type'/'id'; skipped"))
            continue
        entries.append(entry)
        previous_id = entry.id
    if header is None:
        raise NotASessionError(path, None, "empty file: no session header")
    by_id: dict[str, Entry] = {}
    duplicates: list[str] = []
    for entry in entries:
        if entry.id in by_id:
            duplicates.append(entry.id)
        by_id[entry.id] = entry
    return Session(
        path=path,
        header=header,
        title=title,
        session_id=header["id"],
        version=_version(header),
        entries=tuple(entries),
        source_hash=digest.hexdigest(),
        size=size,
        malformed=tuple(malformed),
        truncated_tail=truncated,
        duplicate_ids=tuple(duplicates),
        by_id=by_id,
    )


def _short(exc: Exception) -> str:
    return str(exc).split(":", 1)[0]


def _check_header(path: str, line: int, value: dict[str, Any]) -> None:
    if value.get("type") != "session":
        raise NotASessionError(path, line, "first line is not a session header (type != 'session')")
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
    """Deterministic id of a v1/v2 entry that has none: ``L<physical line>``.

    Stable across runs and across appends, since an entry's line never moves.
    """
    return f"L{line}"


def _entry(
    value: dict[str, Any],
    line: int,
    offset: int,
    length: int,
    version: int,
    previous_id: str | None,
) -> Entry | None:
    entry_type = value.get("type")
    if not isinstance(entry_type, str):
        return None
    entry_id = value.get("id")
    migrated = False
    if version < CURRENT_VERSION and not (isinstance(entry_id, str) and entry_id):
        # v1/v2 files are linear: each entry's parent is the previous entry.
        entry_id, parent = migrated_id(line), previous_id
        migrated = True
    else:
        if not isinstance(entry_id, str) or not entry_id:
            return None
        parent = value.get("parentId")
        parent = parent if isinstance(parent, str) and parent else None
    timestamp = value.get("timestamp")
    return Entry(
        id=entry_id,
        parent_id=parent,
        type=entry_type,
        timestamp=timestamp if isinstance(timestamp, str) else None,
        line=line,
        offset=offset,
        length=length,
        raw=value,
        migrated=migrated,
    )


def read_line(path: str, entry: Entry) -> bytes:
    """The verbatim source line of ``entry`` (without its line terminator)."""
    with os.fdopen(open_regular(path), "rb") as stream:
        stream.seek(entry.offset)
        return stream.read(entry.length)
