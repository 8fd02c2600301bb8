"""``expand``: hydrate exact addresses of one session from its source file.

The session file is hashed on every call and compared with the index's record:
when they agree, selectors are resolved through the index and each entry's text
is read straight from the file by byte offset and length (no re-parse); when the
file has changed since it was indexed, the file itself is read and normalized.
An entry's text is rendered for a reader from its per-entry view
(:mod:`~fabric_memory.memory.readable`); with ``raw`` it is its verbatim source: its line,
its node of a whole-file JSON session (both read by offset and length), or the source its
reader gives an entry that is no span of its file (``Entry.source``: a database row). An
operation or phase address gives its normalized record, rendered the same way (``raw``:
:func:`~fabric_memory.memory.normalize.record_text`). Secrets in either are masked
(``[REDACTED:<kind>]``, :func:`~fabric_memory.redact.redact_json`) unless the caller
asks for them with ``show_secrets`` (docs/secrets.md): the bytes are verified against the
sourceHash first either way.

Selectors take what summaries, recall hits and ``sessions`` print: addresses (``L12``,
``a1b2c3d4/3``, ``.../phase:0``), a range of entry addresses (``L12:L31``, as a summary's
``[L12 ... L31]``), entry positions and position ranges, and ``before``/``after`` entries
around each entry, address or anchor (docs/addresses.md).
Pages are bounded by ``max_entries`` and ``max_chars`` (clamped to their maximum,
:func:`~fabric_memory.arguments.bounded`); ``next`` continues the selection (and long texts)
pinned to the sourceHash the first page reported. Paging counts characters of the text
as answered (rendered, or raw).
"""

from __future__ import annotations

import os
import re
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NotRequired, Protocol, TypedDict, cast

from ..arguments import Clamped, Kind, bounded, check_names, checked_request
from ..errors import ExpandError, MemoryIndexError, SessionError, UsageError, clipped
from ..redact import redact_json, redact_json_text
from ..session import Entry, Session, hash_file, open_regular
from ..sources import read_source, reader_for
from ..sources.reader import LINE_ADDRESS, LINE_AGENTS
from ..sources.registry import by_line
from ..view import EntryView, view_entry
from .catalog import SessionRecord, default_roots, load_catalog
from .locations import session_files
from .normalize import line_value, normalize_session, record_text, source_records
from .readable import KINDS, entry_kinds, render_entry, render_record
from .sharded import Memory
from .tombstones import Tombstone, load_tombstones

MAX_SELECTORS = 100
DEFAULT_MAX_ENTRIES = MAX_ENTRIES = 200
"""Pages are bounded by their text (``maxChars``); this only bounds the entries one page
looks up."""
DEFAULT_MAX_CHARS = 20_000
MAX_CHARS = 24_000
DEFAULT_ENTRY_CHARS = 1_200
"""Characters of one entry shown in a range or neighbourhood: a longer entry shows its head
and tail and the call that reads the rest."""
_PHASE = re.compile(r"(.+)/phase:(\d+)")
REQUEST_KINDS: dict[str, Kind] = {
    "session": "name", "entries": "names", "addresses": "names", "indices": "integers",
    "range": "name", "positions": "name", "anchor": "name", "before": "integer",
    "after": "integer",
    "expectedSourceHash": "name", "expectedLineageFingerprint": "name",
    "maxEntries": "integer", "maxChars": "integer", "entryOffset": "integer",
    "textOffset": "integer", "entryChars": "integer", "kinds": "names", "showSecrets": "boolean",
    "raw": "boolean", "index": "name", "sessions": "name"}
"""The expand request's keys and the kind of each value (see :mod:`fabric_memory.arguments`)."""
REQUEST_DEFAULTS: dict[str, Any] = {
    "before": 0, "after": 0, "maxEntries": DEFAULT_MAX_ENTRIES, "maxChars": DEFAULT_MAX_CHARS,
    "entryChars": DEFAULT_ENTRY_CHARS, "entryOffset": 0, "textOffset": 0, "showSecrets": False,
    "raw": False}
"""The value each optional request key has when left out."""


class ExpandRequest(TypedDict, total=False):
    """The JSON shape of an expand call (``follow`` of a recall hit, ``next`` of a page)."""

    session: str
    entries: list[str]
    addresses: list[str]
    indices: list[int]
    range: str
    positions: str
    anchor: str
    before: int
    after: int
    expectedSourceHash: str
    expectedLineageFingerprint: str
    maxEntries: int
    maxChars: int
    entryOffset: int
    textOffset: int
    entryChars: int
    kinds: list[str]
    showSecrets: bool
    raw: bool
    index: str
    sessions: str


class ExpandedEntry(TypedDict):
    kind: str
    address: str
    entryId: str
    index: int
    line: int
    byteOffset: int
    byteLength: int
    text: str
    textOffset: int
    textLength: int
    complete: bool
    type: NotRequired[str]
    sequence: NotRequired[int]
    tail: NotRequired[str]
    """A long entry of a range: its last characters (``text`` is its head)."""
    tailOffset: NotRequired[int]
    """Where ``tail`` starts in the entry's text."""
    rest: NotRequired[ExpandRequest]
    """The call that reads the entry on from where ``text`` stops (``tail`` included)."""


class ExpandPage(TypedDict):
    sessionId: str
    path: str
    sourceHash: str
    lineageFingerprint: str
    selected: int
    """Entries (and records) the selection holds, after the ``kinds`` filter."""
    entryOffset: int
    """Where in the selection this page starts."""
    entries: list[ExpandedEntry]
    next: ExpandRequest | None
    filtered: NotRequired[int]
    """With ``kinds``: the selected entries of other kinds, left out."""
    clamped: NotRequired[Clamped]
    """Limits asked above their maximum: key → [asked, used]."""
    snapped: NotRequired[list[str]]
    """A ``range`` end that fell between entries, and the entry it was moved to."""


@dataclass(frozen=True, slots=True)
class Located:
    """Where one selected item's source is: its entry line, and what it is."""

    kind: str
    address: str
    entry_id: str
    position: int
    type: str
    line: int
    offset: int
    length: int
    sequence: int | None = None


class Source(Protocol):
    """A session version that selectors resolve against."""

    source_hash: str
    lineage_fingerprint: str
    entries: int

    def find(self, addresses: Sequence[str]) -> dict[str, list[Located]]: ...

    def at(self, positions: Sequence[int]) -> dict[int, Located]: ...

    def line(self, located: Located) -> bytes: ...

    def value(self, located: Located, line: bytes) -> Any:
        """The entry ``located`` names as the view reads it (see :func:`_entry_value`)."""
        ...




def expand(
    session: str,
    *,
    entries: Sequence[str] = (),
    addresses: Sequence[str] = (),
    indices: Sequence[int] = (),
    range: str | None = None,
    positions: str | None = None,
    anchor: str | None = None,
    before: int = 0,
    after: int = 0,
    expected_source_hash: str | None = None,
    expected_lineage_fingerprint: str | None = None,
    max_entries: int = DEFAULT_MAX_ENTRIES,
    max_chars: int = DEFAULT_MAX_CHARS,
    entry_offset: int = 0,
    text_offset: int = 0,
    entry_chars: int = DEFAULT_ENTRY_CHARS,
    kinds: Sequence[str] = (),
    show_secrets: bool = False,
    raw: bool = False,
    index: str | os.PathLike[str] | None = None,
    sessions: str | os.PathLike[str] | None = None,
) -> ExpandPage:
    """One page of the selected entries of ``session`` (an id or a path), rendered for a
    reader (``raw``: verbatim), secrets masked unless ``show_secrets``.

    A selection of more than one entry shows each readable entry within ``entry_chars`` (its
    head and tail, and the call that reads the rest) and only the entries of ``kinds``
    (:data:`~fabric_memory.memory.readable.KINDS`) when given."""
    check_names(("SESSION", session), ("--index", index), ("--sessions", sessions),
                ("--range", range), ("--position-range", positions), ("--anchor", anchor),
                ("--expected-source-hash", expected_source_hash),
                ("--expected-lineage", expected_lineage_fingerprint))
    selectors = len(entries) + len(addresses) + len(indices) + (range is not None) + (
        positions is not None) + (anchor is not None)
    if selectors == 0:
        raise UsageError("expand needs a selector: --address, --range, --entry, --position, "
                         "--position-range, --anchor")
    if selectors > MAX_SELECTORS:
        raise UsageError(
            f"expand got {selectors} selectors; at most {MAX_SELECTORS} per call "
            "(split the request and follow each `next`)"
        )
    check_names(*(("--entry", entry) for entry in entries),
                *(("--address", address) for address in addresses))
    clamped: Clamped = {}
    max_entries = bounded(max_entries, "maxEntries", "--max-entries", 1, MAX_ENTRIES, clamped)
    max_chars = bounded(max_chars, "maxChars", "--max-chars", 1, MAX_CHARS, clamped)
    entry_chars = bounded(entry_chars, "entryChars", "--entry-chars", 1, MAX_CHARS, clamped)
    _check_bounds(entry_offset, text_offset, before, after)
    wanted = _kinds(kinds)
    request = _request(session, entries, addresses, indices, range, positions, anchor, before,
                       after, expected_lineage_fingerprint, max_entries, max_chars,
                       show_secrets, raw, index, sessions)
    if entry_chars != DEFAULT_ENTRY_CHARS:
        request["entryChars"] = entry_chars
    if wanted:
        request["kinds"] = sorted(wanted)
    roots, handle = default_roots(sessions, index)
    record = _record(handle, session, roots)
    source = _open_source(handle, record)
    if expected_source_hash is not None and expected_source_hash != source.source_hash:
        raise ExpandError(
            "stale_pointer",
            f"{record.path}: sourceHash is {source.source_hash}, the pointer expects "
            f"{clipped(expected_source_hash)}; the session changed, recall again",
        )
    if (expected_lineage_fingerprint is not None
            and expected_lineage_fingerprint != source.lineage_fingerprint):
        raise ExpandError(
            "stale_pointer",
            f"{record.path}: lineage fingerprint is {source.lineage_fingerprint}, the pointer "
            f"expects {clipped(expected_lineage_fingerprint)}; the branch changed, recall again",
        )
    snapped: list[str] = []
    selection = _select(source, record, entries, addresses, indices, range, positions, anchor,
                        before, after, snapped)
    bounds = Bounds(max_entries, max_chars, entry_chars)
    page = _page(source, record, selection, request, bounds, entry_offset, text_offset,
                 show_secrets, raw, wanted)
    if clamped:
        page["clamped"] = clamped
    if snapped:
        page["snapped"] = snapped
    return page


def expand_request(request: Mapping[str, Any]) -> ExpandPage:
    """:func:`expand` from its JSON request shape (a hit's ``follow``, a page's ``next``),
    each value checked for its JSON type first."""
    names = {
        "entries": "entries", "addresses": "addresses", "indices": "indices", "range": "range",
        "positions": "positions", "anchor": "anchor", "before": "before", "after": "after",
        "expectedSourceHash": "expected_source_hash",
        "expectedLineageFingerprint": "expected_lineage_fingerprint",
        "maxEntries": "max_entries", "maxChars": "max_chars", "entryOffset": "entry_offset",
        "textOffset": "text_offset", "entryChars": "entry_chars", "kinds": "kinds",
        "showSecrets": "show_secrets", "raw": "raw", "index": "index", "sessions": "sessions",
    }
    checked = checked_request("expand request", request, REQUEST_KINDS)
    session = checked.pop("session", None)
    if session is None:
        raise UsageError("expand request: 'session' must be a session id or path")
    return expand(session, **{names[key]: value for key, value in checked.items()})


def _kinds(kinds: Sequence[str]) -> frozenset[str]:
    """The kinds asked for (each name may list several, comma-separated), checked."""
    wanted = frozenset(part.strip() for name in kinds for part in name.split(",") if part.strip())
    unknown = sorted(wanted - set(KINDS))
    if unknown:
        raise UsageError(f"--kinds {clipped(','.join(unknown))}: use any of {', '.join(KINDS)}")
    return wanted


def _check_bounds(entry_offset: int, text_offset: int, before: int, after: int) -> None:
    for name, value in (("--entry-offset", entry_offset), ("--text-offset", text_offset),
                        ("--before", before), ("--after", after)):
        if value < 0:
            raise UsageError(f"{name} {clipped(value)}: must not be negative")


def _request(
    session: str, entries: Sequence[str], addresses: Sequence[str], indices: Sequence[int],
    range_: str | None, positions: str | None, anchor: str | None, before: int, after: int,
    lineage: str | None, max_entries: int, max_chars: int, show_secrets: bool, raw: bool,
    index: str | os.PathLike[str] | None, sessions: str | os.PathLike[str] | None,
) -> dict[str, Any]:
    request: dict[str, Any] = {"session": session}
    for key, value in (("entries", list(entries)), ("addresses", list(addresses)),
                       ("indices", list(indices)), ("range", range_),
                       ("positions", positions), ("anchor", anchor)):
        if value:
            request[key] = value
    if before or after:
        request.update(before=before, after=after)
    if lineage is not None:
        request["expectedLineageFingerprint"] = lineage
    request.update(maxEntries=max_entries, maxChars=max_chars)
    if show_secrets:
        request["showSecrets"] = True
    if raw:
        request["raw"] = True
    for key, where in (("index", index), ("sessions", sessions)):
        if where is not None:
            request[key] = os.fspath(where)
    return request


# --- sources -------------------------------------------------------------------------


class IndexedSource:
    """The file is byte-identical to what the index holds: resolve through the index and
    read lines from the descriptor that was hashed (see :func:`_open_source`)."""

    def __init__(self, handle: Memory, record: SessionRecord, fd: int):
        self.handle = handle
        self.record = record
        self._fd = fd
        weakref.finalize(self, os.close, fd)
        self.source_hash = record.source_hash
        self.lineage_fingerprint = record.lineage_fingerprint
        self.entries = record.entries
        self._read: Mapping[str, Entry] | None = None

    def find(self, addresses: Sequence[str]) -> dict[str, list[Located]]:
        found: dict[str, list[Located]] = {}
        for doc in self.handle.lookup(self.record.path, addresses=addresses):
            found.setdefault(str(doc["address"]), []).append(_located(doc))
        return found

    def at(self, positions: Sequence[int]) -> dict[int, Located]:
        docs = self.handle.lookup(self.record.path, positions=positions)
        return {int(doc["position"]): _located(doc) for doc in docs}

    def line(self, located: Located) -> bytes:
        if located.length == 0:  # no span of the file: its reader holds the raw source
            return _entry_source(self._entries(), located, self.record.path)
        return _read_line(self._fd, located, self.record.path)

    def value(self, located: Located, line: bytes) -> Any:
        if self.record.agent in LINE_AGENTS:
            return line_value(line, located.line, located.entry_id)
        return _entry_raw(self._entries(), located)

    def _entries(self) -> Mapping[str, Entry]:
        """The file read once, by its reader, only when another agent's entry is asked for."""
        if self._read is None:
            self._read = _read_as_hashed(self.record.path, self.source_hash).by_id
        return self._read


class ParsedSource:
    """The file changed since it was indexed: read and normalize it now (its lines are read
    from ``fd``, which must hash to ``current_hash``, the version that was parsed)."""

    def __init__(self, path: str, fd: int, current_hash: str) -> None:
        self.path = path
        self._fd = fd
        weakref.finalize(self, os.close, fd)
        session = _read_as_hashed(path, current_hash, " (the index holds an older version; "
                                  "run `fabric-memory reindex`)")
        self.source_hash = session.source_hash
        self.lineage_fingerprint = session.lineage_fingerprint("active")
        self._agent, self._read = session.agent, session.by_id
        normalized = normalize_session(session)
        self.entries = normalized.entries
        self._by_address: dict[str, list[Located]] = {}
        self._by_position: dict[int, Located] = {}
        for item in normalized.items:
            located = Located(item.kind, item.address, item.entry_id, item.position, item.type,
                              item.line, item.offset, item.length, item.sequence)
            self._by_address.setdefault(item.address, []).append(located)
            if item.kind == "entry":
                self._by_position[item.position] = located

    def find(self, addresses: Sequence[str]) -> dict[str, list[Located]]:
        return {a: self._by_address[a] for a in addresses if a in self._by_address}

    def at(self, positions: Sequence[int]) -> dict[int, Located]:
        return {p: self._by_position[p] for p in positions if p in self._by_position}

    def line(self, located: Located) -> bytes:
        if located.length == 0:  # no span of the file: its reader holds the raw source
            return _entry_source(self._read, located, self.path)
        return _read_line(self._fd, located, self.path)

    def value(self, located: Located, line: bytes) -> Any:
        if self._agent in LINE_AGENTS:
            return line_value(line, located.line, located.entry_id)
        return _entry_raw(self._read, located)


def _read_as_hashed(path: str, source_hash: str, advice: str = "") -> Session:
    """The file read by its agent's reader, which must find the bytes that were hashed
    (``source_hash``); ``advice`` follows a reader's own error."""
    try:
        session = read_source(path)
    except SessionError as exc:
        raise ExpandError("source_unavailable", exc.message + advice) from None
    if session.source_hash != source_hash:
        raise ExpandError("source_unavailable", f"{path}: changed while it was being read; "
                          "expand again")
    return session


def _entry_raw(entries: Mapping[str, Entry], located: Located) -> Any:
    """The Pi-shaped entry another agent's reader made of the line (``{}`` if it is gone)."""
    entry = entries.get(located.entry_id)
    return entry.raw if entry is not None and entry.line == located.line else {}


def _entry_source(entries: Mapping[str, Entry], located: Located, path: str) -> bytes:
    """The raw source a reader gave an entry that is no span of its file (a row)."""
    entry = entries.get(located.entry_id)
    if entry is None or entry.source is None or entry.line != located.line:
        raise ExpandError("source_unavailable", f"{path}: entry {located.entry_id} is no "
                          "longer where the index found it; run `fabric-memory reindex`")
    return entry.source


def _read_line(fd: int, located: Located, path: str) -> bytes:
    data = os.pread(fd, located.length, located.offset)
    if len(data) != located.length:
        raise ExpandError("source_unavailable", f"{path}: truncated while it was being read; "
                          "expand again")
    return data


def _located(doc: Mapping[str, Any]) -> Located:
    sequence = doc.get("sequence")
    return Located(str(doc["kind"]), str(doc["address"]), str(doc["entry_id"]),
                   int(doc["position"]), str(doc["type"]), int(doc["line"]), int(doc["offset"]),
                   int(doc["length"]), int(sequence) if sequence is not None else None)


def _record(handle: Memory, session: str, roots: tuple[Path, ...]) -> SessionRecord:
    """The index's record of ``session``; when the index does not hold it (or there is no
    index yet), the one file under ``roots`` that holds it
    (:func:`~.locations.session_files`), read as it is now: a session's addresses expand
    before any reindex has seen it. A forgotten session is ``session_forgotten``."""
    forgotten = load_tombstones(handle.root)
    _refuse_forgotten(forgotten.of_id(session), session)
    try:
        record = load_catalog(handle).resolve(session, roots)
    except (ExpandError, MemoryIndexError) as exc:
        if isinstance(exc, ExpandError) and exc.code != "session_not_found":
            raise
        files = session_files(session, roots)
        if len(files) != 1:
            if len(files) > 1:
                raise ExpandError("ambiguous_session", f"session {clipped(session)}: id "
                                  f"shared by {len(files)} files "
                                  f"({', '.join(map(str, files))}); pass the path") from None
            raise
        path = str(files[0])
        _refuse_forgotten(forgotten.of_path(os.path.realpath(path)), session)
        return SessionRecord(path, session, 0, 0, "", "", 0, 0, "",
                             agent=reader_for(path).name)
    _refuse_forgotten(forgotten.refuses(record.path, record.session_id), session)
    return record


def _refuse_forgotten(stone: Tombstone | None, session: str) -> None:
    if stone is not None:
        raise ExpandError("session_forgotten", f"session {clipped(session)}: forgotten on "
                          f"{stone.forgotten_at} (fabric-memory forget); bring it back with "
                          f"`fabric-memory forget --undo {stone.session_id}`")


def _open_source(handle: Memory, record: SessionRecord) -> Source:
    """The session as it is now, read through one descriptor that is hashed first.

    Lines are read from that descriptor, never by path (the path may since name another
    file) and never through a memory map (a file truncated by another process would kill
    this one with SIGBUS).
    """
    try:
        fd = open_regular(record.path)
    except OSError as exc:
        raise ExpandError(
            "source_unavailable",
            f"{record.path}: cannot read the session file ({exc.strerror or exc})",
        ) from None
    try:
        current = hash_file(fd, record.path)
    except OSError as exc:
        os.close(fd)
        raise ExpandError("source_unavailable", f"{record.path}: cannot read the session file "
                          f"({exc.strerror or exc})") from None
    if current == record.source_hash:
        return IndexedSource(handle, record, fd)
    return ParsedSource(record.path, fd, current)


# --- selection and pages ---------------------------------------------------------------

Target = tuple[str, str | int]
"""("entry", id), ("address", address) or ("position", entry position)."""


def _select(
    source: Source, record: SessionRecord, entries: Sequence[str], addresses: Sequence[str],
    indices: Sequence[int], range_: str | None, positions: str | None, anchor: str | None,
    before: int, after: int, snapped: list[str] | None = None,
) -> list[Target]:
    """The ordered, de-duplicated selection (addresses are resolved later, per page).

    ``before``/``after`` add the entries around each entry, address, position and the
    anchor; an entry address with neighbours is selected by its position, so an entry is
    never shown twice.
    """
    named: list[Target] = [("entry", entry_id) for entry_id in entries]
    named.extend(("address", address) for address in addresses)
    named.extend(("position", _position(p, source.entries, record)) for p in indices)
    targets: list[Target] = []
    if before or after:
        resolved = _resolve(source, record, [t for t in named if t[0] != "position"])
        for target in named:
            if target[0] == "position":
                targets.extend(_around(source, int(target[1]), before, after))
                continue
            located = resolved[target]
            around = _around(source, located.position, before, after)
            if located.kind == "entry" and _PHASE.fullmatch(str(target[1])) is None:
                targets.extend(around)
            else:  # an operation or a phase: itself, amid its entry's neighbours
                at = around.index(("position", located.position))
                targets.extend([*around[:at], target, *around[at + 1 :]])
    else:
        targets.extend(named)
    if range_ is not None:
        first, last = _address_range(range_, source, record, snapped)
        targets.extend(("position", p) for p in range(first, last + 1))
    if positions is not None:
        first, last = _range(positions, source.entries, record)
        targets.extend(("position", p) for p in range(first, last + 1))
    if anchor is not None:
        center = _resolve(source, record, [("entry", anchor)])[("entry", anchor)].position
        targets.extend(_around(source, center, before, after))
    return list(dict.fromkeys(targets))


def _around(source: Source, center: int, before: int, after: int) -> list[Target]:
    low, high = max(0, center - before), min(source.entries - 1, center + after)
    return [("position", p) for p in range(low, high + 1)]


_RANGE = re.compile(r"\s*(.+?)\s*(?:\.\.\.?|:|\s)\s*(.+?)\s*")
"""FIRST:LAST, or a summary's ``FIRST ... LAST`` (``..`` too)."""


def _address_range(text: str, source: Source, record: SessionRecord,
                   snapped: list[str] | None = None) -> tuple[int, int]:
    """The entry positions from address FIRST to address LAST, inclusive.

    A line address (``L1805``) that names no entry (the line is bookkeeping, or not an
    entry's) is moved to the nearest entry inside the range (FIRST to the next entry, LAST
    to the one before), else to the nearest one at all, and ``snapped`` says so. Two plain
    numbers that are not both entry ids of the session are entry positions (the spelling
    ``--range`` had before it took addresses; ``--position-range`` says it unambiguously).
    """
    match = _RANGE.fullmatch(text)
    if match is None:
        raise UsageError(f"--range {clipped(text)}: use FIRST:LAST entry addresses, e.g. "
                         "L12:L31 (a summary's [L12 ... L31])")
    first, last = match.group(1), match.group(2)
    lines = by_line(record.agent)
    found = _find(source, [first, last], lines)
    if (first not in found or last not in found) and first.isdigit() and last.isdigit():
        return _range(f"{first}:{last}", source.entries, record)
    ends: list[int] = []
    for end, address in (("first", first), ("last", last)):
        line = LINE_ADDRESS.fullmatch(address)
        number = int(line.group(1)) if lines and line is not None and not line.group(2) else 0
        at = _snap(source, number, end == "first") if number and address not in found else None
        if at is not None:
            to = source.at([at])[at]
            if snapped is not None:
                snapped.append(f"--range {end} {address} names no entry; moved to the "
                               f"{'next' if to.line > number else 'previous'} entry, "
                               f"{to.address} (line {to.line})")
            ends.append(at)
        else:
            ends.append(_resolve(source, record, [("address", address)])[
                ("address", address)].position)
    low, high = ends
    if low > high:
        raise UsageError(f"--range {clipped(text)}: {first} comes after {last} in the session; "
                         "give the earlier address first")
    return low, high


def _first_at_line(source: Source, line: int) -> int:
    """The position of the first entry whose line is ``line`` or later (``entries``: none),
    by a binary search over positions (entries are in file order)."""
    low, high = 0, source.entries
    while low < high:
        middle = (low + high) // 2
        if source.at([middle])[middle].line < line:
            low = middle + 1
        else:
            high = middle
    return low


def _snap(source: Source, line: int, forward: bool) -> int | None:
    """The position of the entry nearest ``line`` on the range's inside (``forward``: the
    first entry after it, else the last before it; else the one on the other side); None
    when ``line`` lies past the session's last entry (no entry is near it: it is wrong)."""
    after = _first_at_line(source, line)
    if after >= source.entries:
        return None
    before = after - 1
    return after if forward or before < 0 else before


def _own(address: str, located: Located) -> str:
    """``address`` as the session itself spells it: a line address found by its line
    (``L877``, ``L877/3``, ``L877/phase:0``) becomes the entry's own id, its operation's
    address, or its phase's; any other address as it is."""
    if address == located.address or not LINE_ADDRESS.match(address):
        return address
    phase = _PHASE.fullmatch(address)
    if phase is not None:
        return f"{located.entry_id}/phase:{phase.group(2)}"
    return located.address


def _find(source: Source, addresses: Sequence[str],
          lines: bool = True) -> dict[str, list[Located]]:
    """:meth:`Source.find`, and (``lines``: the agent's entries are lines that stay put,
    ``SourceReader.by_line``) a line address (``L877``, ``L877.1``, ``L877/3``) of an entry
    whose id is not one (a Claude Code entry's is a UUID) found by its line."""
    found = source.find(addresses)
    if not lines:
        return found
    for address in addresses:
        if address in found:
            continue
        head, slash, rest = address.partition("/")
        line = LINE_ADDRESS.fullmatch(head)
        if line is None or not source.entries:
            continue
        at = _first_at_line(source, int(line.group(1))) + int(line.group(2) or 0)
        if at >= source.entries:
            continue
        entry = source.at([at])[at]
        if entry.line != int(line.group(1)):
            continue
        real = entry.address + slash + rest
        hits = source.find([real]).get(real)
        if hits:
            found[address] = hits
    return found


def _resolve(source: Source, record: SessionRecord, targets: Sequence[Target]) -> dict[
        Target, Located]:
    """Where each target's source is; ``address_not_found`` / ``ambiguous_address`` else.

    A phase address resolves to its parent entry (its record is read from that line).
    """
    named = {t: _PHASE.fullmatch(str(t[1])) for t in targets if t[0] != "position"}
    lookup = {t: (m.group(1) if m else str(t[1])) for t, m in named.items()}
    found = (_find(source, list(dict.fromkeys(lookup.values())), by_line(record.agent))
             if lookup else {})
    positions = [int(t[1]) for t in targets if t[0] == "position"]
    at = source.at(positions) if positions else {}
    resolved: dict[Target, Located] = {}
    for target in targets:
        if target[0] == "position":
            resolved[target] = at[int(target[1])]
            continue
        entry_only = target[0] == "entry" or named[target] is not None
        hits = [h for h in found.get(lookup[target], []) if h.kind == "entry" or not entry_only]
        if not hits:
            what = "entry" if entry_only else "address"
            raise ExpandError("address_not_found",
                              f"{record.path}: no {what} {clipped(lookup[target])} in session "
                              f"{record.session_id}")
        if len(hits) > 1:
            raise ExpandError("ambiguous_address",
                              f"{record.path}: address {clipped(lookup[target])} occurs "
                              f"{len(hits)} "
                              "times (duplicate entry ids); select by --position instead")
        resolved[target] = hits[0]
    return resolved


def _position(value: int, count: int, record: SessionRecord) -> int:
    if not 0 <= value < count:
        raise ExpandError("index_out_of_bounds",
                          f"{record.path}: position {value} is outside 0..{count - 1}")
    return value


def _range(text: str, count: int, record: SessionRecord) -> tuple[int, int]:
    first, sep, last = text.partition(":")
    try:
        low, high = int(first), int(last)
    except ValueError:
        raise UsageError(
            f"--position-range {clipped(text)}: use FIRST:LAST entry positions, e.g. 0:9"
        ) from None
    if not sep or low > high:
        raise UsageError(f"--position-range {clipped(text)}: use FIRST:LAST with FIRST <= LAST")
    return _position(low, count, record), _position(high, count, record)


@dataclass(frozen=True, slots=True)
class Bounds:
    """How much one page shows: entries, characters, and characters of one entry of a range."""

    entries: int
    chars: int
    entry_chars: int


def _page(
    source: Source, record: SessionRecord, selection: list[Target], request: dict[str, Any],
    bounds: Bounds, entry_offset: int, text_offset: int, show_secrets: bool, raw: bool,
    kinds: frozenset[str],
) -> ExpandPage:
    # A range or neighbourhood shows each entry's shape: a long one is cut to its head and
    # tail (verbatim lines never are), and entries are not split across pages.
    shape = len(selection) > 1 and not raw
    selected = len(selection)
    if kinds:
        selection = _of_kinds(source, record, selection, kinds)
    if entry_offset > len(selection) or (entry_offset == len(selection) and selection):
        raise ExpandError("index_out_of_bounds",
                          f"{record.path}: entryOffset {entry_offset} is past the "
                          f"{len(selection)} selected entries")
    window = selection[entry_offset : entry_offset + bounds.entries]
    # The first page checks every named address, so a bad one fails at once; later pages
    # (pinned to the same sourceHash by ``next``) resolve only what they show.
    check = [t for t in selection if t[0] != "position"] if entry_offset == 0 else []
    resolved = _resolve(source, record, list(dict.fromkeys([*check, *window])))
    records: dict[int, dict[str, dict[str, Any]]] = {}
    out: list[ExpandedEntry] = []
    used = 0
    position = entry_offset
    offset = text_offset
    following: tuple[int, int] | None = None
    for target in window:
        located = resolved[target]
        address = _own(str(target[1]), located) if target[0] != "position" else None
        text = _text(source, located, address, records, raw, show_secrets)
        if offset > len(text) or (offset == len(text) and offset > 0):
            raise ExpandError("text_offset_out_of_bounds",
                              f"{record.path}: textOffset {offset} is past the {len(text)} "
                              f"characters of {located.address}")
        if shape:
            item = _shaped(located, address, text, offset, min(bounds.entry_chars, bounds.chars),
                           request, source.source_hash)
            size = len(item["text"]) + len(item.get("tail", ""))
            if out and used + size > bounds.chars:
                break
            out.append(item)
            used += size
            position += 1
            offset = 0
            continue
        chunk = text[offset : offset + (bounds.chars - used)]
        out.append(_expanded(located, address, chunk, offset, len(text)))
        used += len(chunk)
        if offset + len(chunk) < len(text):
            following = (position, offset + len(chunk))
            break
        position += 1
        offset = 0
        if used >= bounds.chars:
            break
    if following is None and position < len(selection):
        following = (position, 0)
    next_request: ExpandRequest | None = None
    if following is not None:
        next_request = cast(ExpandRequest, {
            **request, "expectedSourceHash": source.source_hash,
            "entryOffset": following[0], "textOffset": following[1],
        })
    page: ExpandPage = {
        "sessionId": record.session_id, "path": record.path, "sourceHash": source.source_hash,
        "lineageFingerprint": source.lineage_fingerprint, "selected": len(selection),
        "entryOffset": entry_offset, "entries": out, "next": next_request,
    }
    if kinds:
        page["filtered"] = selected - len(selection)
    return page


def _of_kinds(source: Source, record: SessionRecord, selection: list[Target],
              kinds: frozenset[str]) -> list[Target]:
    """The selected entries of one of ``kinds``; a named operation or phase always stays."""
    resolved = _resolve(source, record, selection)
    kept: list[Target] = []
    for target in selection:
        located = resolved[target]
        named = target[0] != "position" and str(target[1]) != located.address
        if located.kind != "entry" or named:
            kept.append(target)
            continue
        view = _view(source.value(located, source.line(located)), located, show_secrets=True)
        if entry_kinds(view) & kinds:
            kept.append(target)
    return kept


def _shaped(located: Located, address: str | None, text: str, offset: int, bound: int,
            request: Mapping[str, Any], source_hash: str) -> ExpandedEntry:
    """One entry of a range: whole from ``offset`` when it fits ``bound``, else its head and
    tail (each ending at a line break when one is near) and ``rest``, the call that reads on
    from the head's end."""
    if len(text) - offset <= bound:
        return _expanded(located, address, text[offset:], offset, len(text))
    head_end = offset + bound * 2 // 3
    tail_start = len(text) - (bound - bound * 2 // 3)
    head_end = max(text.rfind("\n", (offset + head_end) // 2, head_end) + 1, 0) or head_end
    tail_start = text.find("\n", tail_start, (tail_start + len(text)) // 2) + 1 or tail_start
    item = _expanded(located, address, text[offset:head_end], offset, len(text))
    rest: dict[str, Any] = {"session": request["session"],
                            "addresses": [address or located.address],
                            "expectedSourceHash": source_hash, "textOffset": head_end}
    rest.update((key, request[key]) for key in ("expectedLineageFingerprint", "showSecrets",
                                                "index", "sessions") if key in request)
    item["tail"] = text[tail_start:]
    item["tailOffset"] = tail_start
    item["rest"] = cast(ExpandRequest, rest)
    return item


def _text(
    source: Source, located: Located, address: str | None,
    records: dict[int, dict[str, dict[str, Any]]], raw: bool, show_secrets: bool,
) -> str:
    """The answer for one selected item: rendered (``raw``: verbatim), secrets masked unless
    ``show_secrets``."""
    line = source.line(located)
    if located.kind == "entry" and (address is None or address == located.address):
        if raw:
            text = line.decode("utf-8", errors="replace")
            return text if show_secrets else redact_json_text(text)
        return render_entry(_view(source.value(located, line), located, show_secrets),
                            located.address)
    parsed = records.get(located.position)
    if parsed is None:
        value = line_value(line, located.line, located.entry_id)
        parsed = records[located.position] = source_records(
            located.entry_id, value if isinstance(value, dict) else {})
    wanted = address or located.address
    found = parsed.get(wanted)
    if found is None:
        raise ExpandError("address_not_found",
                          f"line {located.line}: no operation or phase {clipped(wanted)} "
                          "in the trace")
    if raw:
        text = record_text(found)
        return text if show_secrets else redact_json_text(text)
    return render_record(found if show_secrets else redact_json(found))


def _view(value: Any, located: Located, show_secrets: bool) -> EntryView:
    """The per-entry view of one entry's value (its strings masked unless ``show_secrets``)."""
    entry = value if isinstance(value, dict) else {}
    if not show_secrets:
        entry = redact_json(entry)
    timestamp = entry.get("timestamp")
    parent = entry.get("parentId")
    return view_entry(located.entry_id, located.type,
                      parent if isinstance(parent, str) else None,
                      timestamp if isinstance(timestamp, str) else None, entry)


def _expanded(
    located: Located, address: str | None, chunk: str, offset: int, length: int
) -> ExpandedEntry:
    wanted = address or located.address
    phase = _PHASE.fullmatch(wanted)
    kind = "phase" if phase and located.kind == "entry" else located.kind
    item: ExpandedEntry = {
        "kind": kind, "address": wanted, "entryId": located.entry_id,
        "index": located.position, "line": located.line, "byteOffset": located.offset,
        "byteLength": located.length, "text": chunk, "textOffset": offset,
        "textLength": length, "complete": offset + len(chunk) == length,
    }
    if kind == "entry":
        item["type"] = located.type
    if located.sequence is not None:
        item["sequence"] = located.sequence
    return item
