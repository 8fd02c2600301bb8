"""What each page of ``fabric-memory ui`` shows, as JSON values: the page's JSON twin, and
what its template renders (so both always hold the same fields).

Every value comes from the memory library the other doors use: the catalog and
:func:`~fabric_memory.memory.catalog.list_sessions` (forgotten or unindexed sessions are
simply not there), :func:`~fabric_memory.memory.recall.recall` with its ranking and filters,
:func:`~fabric_memory.memory.expand.expand` for the verbatim line, each agent's reader and
the per-entry view (:mod:`fabric_memory.view`) for a session's timeline. Secrets are masked
the way ``expand`` masks them (:func:`~fabric_memory.redact.redact_json`) before anything
is rendered.
"""

from __future__ import annotations

import difflib
import os
import re
import shlex
import threading
from collections import Counter, OrderedDict, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NotRequired, TypedDict

import orjson

from ..arguments import check_name
from ..compaction.span import session_addresses, summarize_session
from ..errors import (
    ExpandError,
    FabricMemoryError,
    SessionChangedError,
    SessionError,
    UsageError,
    clipped,
)
from ..memory.catalog import (
    Catalog,
    SessionListing,
    SessionRecord,
    StatKey,
    default_roots,
    list_sessions,
    load_catalog,
    stat_key,
)
from ..memory.expand import expand
from ..memory.index import Hit, SearchSpec, analyze
from ..memory.recall import MAX_LIMIT, RecallHit, recall
from ..memory.sharded import Memory
from ..redact import redact_json
from ..session import Session
from ..sources import read_source
from ..sources.registry import AGENTS, TOOLS
from ..view import MAX_TIME_MS, EntryView, TokenUsage, view_entry
from ..words import CJK_CLASS, strip_controls

LIST_PAGE = 50
"""Sessions per page of the list."""
TIMELINE_PAGE = 200
"""Entries per page of a session: a 3,000-entry session paints its first page at once."""
RESULT_LINES = 6
"""A tool result longer than this many lines is shown collapsed."""
WRITE_LINES = 200
"""Lines of a written file shown as its diff (the rest is one line of ``…``)."""
TITLE_CHARS = 120
RAW_PAGES = 64
"""Most expand pages one raw line is read in (64 × 24,000 characters)."""


@dataclass(frozen=True, slots=True)
class Places:
    """Where the server reads: the same options every command takes (None: the default,
    ``FABRIC_MEMORY_HOME`` / ``FABRIC_MEMORY_SESSIONS`` / the agents' folders)."""

    sessions: str | None = None
    index: str | None = None

    def open(self) -> tuple[tuple[Path, ...], Memory]:
        return default_roots(self.sessions, self.index)

    def where(self) -> dict[str, str]:
        """These places as request keys (only those given)."""
        return {key: value for key, value in (("sessions", self.sessions),
                                              ("index", self.index)) if value is not None}


# --- per-session facts -----------------------------------------------------------------


class Facts(TypedDict):
    title: str
    firstAt: str | None
    lastAt: str | None
    compactions: int
    failures: int


_FACTS: dict[tuple[str, str], tuple[str, Facts]] = {}
"""(index, path) → the facts of the file's version with that sourceHash: one per session,
replaced when it changes."""
_COUNTS: dict[tuple[str, str], tuple[str, tuple[int, int]]] = {}
_FACTS_LOCK = threading.Lock()


def session_facts(places: Places, handle: Memory, record: SessionRecord) -> Facts:
    """What a row of the list shows beyond the catalog record: the first user words, the
    time span, compactions and failures. Counted in the index (a few searches) and the
    first user entry read back by ``expand``; cached for this version of the file."""
    key = (str(handle.root), record.path)
    found = _FACTS.get(key)
    if found is not None and found[0] == record.source_hash:
        return found[1]
    path = ("path", (record.path,))
    timed = SearchSpec(equals=(path,), kinds=("entry",), since_ms=-MAX_TIME_MS)

    def ends(spec: SearchSpec) -> tuple[Hit | None, Hit | None]:
        """The oldest and the newest entry of ``spec`` (newest first without a query)."""
        newest = handle.search(spec, limit=1, offset=0, snippet_chars=1)
        if not newest.hits:
            return None, None
        oldest = newest if newest.total == 1 else handle.search(
            spec, limit=1, offset=newest.total - 1, snippet_chars=1)
        return oldest.hits[0], newest.hits[0]

    first, last = ends(timed)
    said = ends(replace(timed, equals=(path, ("role", ("user",)))))[0] or ends(
        SearchSpec(equals=(path, ("role", ("user",))), kinds=("entry",)))[0]
    compactions, failures = session_counts(handle, record)
    facts: Facts = {
        "title": _first_words(places, record, str(said.fields["address"])) if said else "",
        "firstAt": first.fields.get("timestamp") if first is not None else None,
        "lastAt": last.fields.get("timestamp") if last is not None else None,
        "compactions": compactions, "failures": failures,
    }
    with _FACTS_LOCK:
        _FACTS[key] = (record.source_hash, facts)
    return facts


def session_counts(handle: Memory, record: SessionRecord) -> tuple[int, int]:
    """The session's compactions and failures (failed tool results, and Fabric operations
    that did not succeed), counted in the index; cached for this version of the file (what
    the list's filters need of every session)."""
    key = (str(handle.root), record.path)
    found = _COUNTS.get(key)
    if found is not None and found[0] == record.source_hash:
        return found[1]
    path = ("path", (record.path,))

    def count(kinds: tuple[str, ...], *equals: tuple[str, tuple[str | bool, ...]],
              excluded: tuple[tuple[str, tuple[str, ...]], ...] = ()) -> int:
        spec = SearchSpec(equals=(path, *equals), excluded=excluded, kinds=kinds)
        return handle.search(spec, limit=1, offset=0, snippet_chars=1).total

    counts = (count(("entry",), ("type", ("compaction",))),
              count(("entry",), ("is_error", (True,)))
              + count(("operation",), excluded=(("outcome", ("succeeded",)),)))
    with _FACTS_LOCK:
        _COUNTS[key] = (record.source_hash, counts)
    return counts


def _first_words(places: Places, record: SessionRecord, address: str) -> str:
    """What the entry at ``address`` said, on one line, as ``expand`` reads it (the index's
    text of an entry holds more than what was said: ids, tool names)."""
    try:
        page = expand(record.path, addresses=[address], max_chars=TITLE_CHARS * 4,
                      index=places.index, sessions=places.sessions)
    except FabricMemoryError:
        return ""
    text = page["entries"][0]["text"] if page["entries"] else ""
    return _one_line(text.split("\n", 1)[1] if "\n" in text else "")


def _one_line(text: str) -> str:
    line = " ".join(strip_controls(text).split())
    return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1] + "…"


# --- the sessions list -----------------------------------------------------------------


class SessionRow(SessionListing):
    handle: str
    """How the session is named in a URL and a command: its id when unique, else its path."""
    facts: Facts


class SessionsFilters(TypedDict, total=False):
    agent: str
    project: str
    since: str
    until: str
    compacted: bool
    failed: bool


class SessionsPage(TypedDict):
    total: int
    page: int
    pages: int
    perAgent: dict[str, int]
    """Sessions of each agent under the other filters."""
    filters: SessionsFilters
    sessions: list[SessionRow]
    indexing: bool
    """No index yet: the live index is building it (the page fills in when it commits)."""


def sessions_page(places: Places, filters: SessionsFilters, page: int = 1) -> SessionsPage:
    """One page of every agent's sessions, newest first, under ``filters``."""
    if page < 1:
        raise UsageError(f"page {clipped(page)}: pages count from 1")
    agent = filters.get("agent")
    if agent is not None and agent not in AGENTS:
        raise UsageError(f"agent {clipped(agent)}: use one of {', '.join(AGENTS)}")
    _, handle = places.open()
    if not handle.exists():  # the live index is reading the sessions for the first time
        return {"total": 0, "page": 1, "pages": 1, "perAgent": {}, "filters": filters,
                "sessions": [], "indexing": True}
    listing = list_sessions(index=places.index, sessions=places.sessions,
                            project=filters.get("project"), since=filters.get("since"),
                            until=filters.get("until"))["sessions"]
    catalog = load_catalog(handle)
    counted = any(filters.get(name) is not None for name in ("compacted", "failed"))
    rows = []
    for item in listing:
        record = catalog.record(item["path"])
        if record is None or (counted and not _counts_match(handle, record, filters)):
            continue
        rows.append((item, record))
    per_agent = Counter(item["agent"] for item, _ in rows)
    rows = [row for row in rows if agent in (None, row[0]["agent"])]
    pages = max((len(rows) + LIST_PAGE - 1) // LIST_PAGE, 1)
    shown = rows[(page - 1) * LIST_PAGE: page * LIST_PAGE]
    sessions: list[SessionRow] = [
        {**item, "handle": catalog.handle(record),
         "facts": session_facts(places, handle, record)}
        for item, record in shown]
    return {"total": len(rows), "page": page, "pages": pages,
            "perAgent": dict(sorted(per_agent.items())), "filters": filters,
            "sessions": sessions, "indexing": False}


def warm_counts(places: Places, stop: threading.Event) -> None:
    """Count every indexed session's compactions and failures ahead of the list's filters
    (a few searches each: seconds for a thousand sessions), until done or ``stop``."""
    try:
        _, handle = places.open()
        if not handle.exists():
            return
        for record in load_catalog(handle).records:
            if stop.is_set():
                return
            session_counts(handle, record)
    except FabricMemoryError:
        return  # the filters count what they need when they are used


def _counts_match(handle: Memory, record: SessionRecord, filters: SessionsFilters) -> bool:
    counts = session_counts(handle, record)
    for name, count in zip(("compacted", "failed"), counts, strict=True):
        wanted = filters.get(name)
        if wanted is not None and wanted != (count > 0):
            return False
    return True


# --- one session -----------------------------------------------------------------------


class CallJSON(TypedDict):
    name: str
    arguments: str
    """The call's arguments as JSON (secrets masked)."""
    diffs: list[DiffJSON]


class DiffJSON(TypedDict):
    path: str
    lines: list[str]
    """A unified diff (an edit), or the written content as added lines."""


class OperationJSON(TypedDict):
    address: str
    ref: str
    outcome: str | None


class EntryJSON(TypedDict):
    address: str
    """What summaries and ``expand`` print for the entry: its line address (``L877``) for an
    agent whose own ids are long, else its id."""
    entryId: str
    """The entry's own id (what recall hits name); the element is found by either."""
    position: int
    line: int
    type: str
    role: str | None
    tool: str | None
    time: str | None
    isError: bool
    text: str
    thinking: str
    result: str
    calls: list[CallJSON]
    operations: list[OperationJSON]
    summary: str | None
    """What a compaction (or a branch summary) holds."""
    expandCommand: str
    tokensBefore: NotRequired[int]


class SessionPage(TypedDict):
    sessionId: str
    handle: str
    path: str
    agent: str
    project: str | None
    sourceHash: str
    entries: int
    page: int
    pages: int
    pageEntries: int
    shown: list[EntryJSON]
    addressPages: dict[str, int]
    """The page of every entry address of the session (links in summaries use it)."""
    expandCommand: str


def find_record(places: Places, session: str) -> tuple[Catalog, SessionRecord, Memory]:
    """The indexed session named ``session`` (an id, or a path under the sessions roots):
    expand's ``session_not_found`` otherwise, so a forgotten session or a path outside the
    roots is simply not found."""
    check_name("session", session)
    roots, handle = places.open()
    catalog = load_catalog(handle)
    return catalog, catalog.resolve(session, roots), handle


def session_page(places: Places, session: str, page: int | None = None,
                 at: str | None = None) -> SessionPage:
    """One page of the timeline of ``session`` as it is now (``at``: the page holding that
    address)."""
    check_name("at", at)
    catalog, record, _ = find_record(places, session)
    read = _read(record)
    short = session_addresses(read)
    positions = {entry.id: position for position, entry in enumerate(read.entries)}
    positions.update((short[entry.id], at) for at, entry in enumerate(read.entries)
                     if entry.id in short)
    pages = max((len(read.entries) + TIMELINE_PAGE - 1) // TIMELINE_PAGE, 1)
    if at is not None:
        where = positions.get(at, positions.get(at.split("/", 1)[0]))
        if where is None:
            raise ExpandError("address_not_found",
                              f"{record.path}: no entry has the address {clipped(at)}")
        page = where // TIMELINE_PAGE + 1
    page = page or 1
    if not 1 <= page <= pages:
        raise UsageError(f"page {clipped(page)}: this session has {pages} pages")
    handle_name = catalog.handle(record)
    start = (page - 1) * TIMELINE_PAGE
    shown = [entry_json(read, position, handle_name, places, short)
             for position in range(start, min(start + TIMELINE_PAGE, len(read.entries)))]
    return {
        "sessionId": record.session_id, "handle": handle_name, "path": record.path,
        "agent": record.agent, "project": record.cwd, "sourceHash": read.source_hash,
        "entries": len(read.entries), "page": page, "pages": pages,
        "pageEntries": TIMELINE_PAGE, "shown": shown,
        "addressPages": {address: at // TIMELINE_PAGE + 1 for address, at in positions.items()},
        "expandCommand": shlex.join([
            "fabric-memory", "expand", handle_name, "--range",
            f"{_short(read.entries[0].id, short)}:{_short(read.entries[-1].id, short)}",
            *_where_args(places)]) if read.entries else "",
    }


def entries_after(places: Places, session: str, after: int) -> list[EntryJSON]:
    """The entries of ``session`` from position ``after`` on (what a live page appends)."""
    catalog, record, _ = find_record(places, session)
    read = _read(record)
    name, short = catalog.handle(record), session_addresses(read)
    return [entry_json(read, position, name, places, short)
            for position in range(max(after, 0), len(read.entries))]


READ_CACHE = 4
"""Sessions kept read (by path and stat): paging through one, or a live page following it,
reads its file once per change, not once per request."""
_READ: OrderedDict[str, tuple[StatKey | None, Session]] = OrderedDict()
_READ_LOCK = threading.Lock()


def _read(record: SessionRecord) -> Session:
    """The session file as it is now (read again once when it changed while being read: an
    agent appending to it); the last :data:`READ_CACHE` read are kept while their files'
    stat stays the same."""
    key = stat_key(record.path)
    with _READ_LOCK:
        kept = _READ.get(record.path)
        if kept is not None and key is not None and kept[0] == key:
            _READ.move_to_end(record.path)
            return kept[1]
    session = _read_now(record)
    with _READ_LOCK:
        _READ[record.path] = (key, session)
        _READ.move_to_end(record.path)
        while len(_READ) > READ_CACHE:
            _READ.popitem(last=False)
    return session


def _read_now(record: SessionRecord) -> Session:
    for attempt in range(2):
        try:
            return read_source(record.path)
        except SessionChangedError:
            if attempt:
                raise ExpandError("source_unavailable", f"{record.path}: changed while it was "
                                  "being read; load the page again") from None
        except FabricMemoryError as exc:
            raise ExpandError("source_unavailable", exc.message) from None
    raise AssertionError("unreachable")


def _short(entry_id: str, short: Mapping[str, str]) -> str:
    return short.get(entry_id, entry_id)


def entry_json(read: Session, position: int, session: str, places: Places,
               short: Mapping[str, str]) -> EntryJSON:
    """One entry of the timeline, its strings masked as ``expand`` masks them; ``short``:
    the session's line addresses (:func:`~fabric_memory.compaction.span.session_addresses`)."""
    entry = read.entries[position]
    view = view_entry(entry.id, entry.type, entry.parent_id, entry.timestamp,
                      redact_json(entry.raw))
    address = _short(entry.id, short)
    fabric = view.fabric
    operations: list[OperationJSON] = [
        {"address": f"{address}/{op.sequence}", "ref": op.ref, "outcome": op.outcome}
        for op in (fabric.operations if fabric is not None and fabric.verdict == "valid"
                   else ())]
    item: EntryJSON = {
        "address": address, "entryId": entry.id, "position": position, "line": entry.line,
        "type": entry.type,
        "role": view.role, "tool": view.tool_name, "time": view.timestamp,
        "isError": view.is_error, "text": strip_controls(view.text),
        "thinking": view.thinking, "result": strip_controls(view.result_text),
        "calls": [_call(call.name, call.arguments) for call in view.tool_calls],
        "operations": operations,
        "summary": strip_controls(view.summary) if view.summary is not None else None,
        "expandCommand": shlex.join(["fabric-memory", "expand", session, "--address",
                                     address, *_where_args(places)]),
    }
    before = view.raw.get("tokensBefore")
    if isinstance(before, int):
        item["tokensBefore"] = before
    if not (item["text"] or item["result"] or item["calls"] or item["summary"]
            or item["thinking"]):
        item["text"] = _other_fields(view)
    return item


def _where_args(places: Places) -> list[str]:
    return [arg for key, value in places.where().items() for arg in (f"--{key}", value)]


def _call(name: str, arguments: Mapping[str, Any]) -> CallJSON:
    tool = TOOLS.get(name)
    diffs: list[DiffJSON] = []
    if tool is not None and tool.kind in ("edit", "write"):
        for work in tool.use(arguments).files:
            if work.new is None:
                continue
            if work.old is not None:
                lines = list(difflib.unified_diff(work.old.splitlines(), work.new.splitlines(),
                                                  "before", "after", lineterm="", n=2))[2:]
            else:
                written = work.new.splitlines()
                lines = [f"+{line}" for line in written[:WRITE_LINES]]
                if len(written) > WRITE_LINES:
                    lines.append(f"… {len(written) - WRITE_LINES} more lines")
            diffs.append({"path": work.path, "lines": lines})
    shown = orjson.dumps(arguments, option=orjson.OPT_INDENT_2).decode() if arguments else ""
    return {"name": name, "arguments": shown, "diffs": diffs}


def _other_fields(view: EntryView) -> str:
    """A non-message entry's own fields (a model change, a label), one per line."""
    skip = {"type", "id", "parentId", "timestamp"}
    return "\n".join(f"{key}: {orjson.dumps(value).decode()}" for key, value in
                     view.raw.items() if key not in skip and not key.startswith("_"))


def raw_line(places: Places, session: str, address: str) -> str:
    """The verbatim line of one entry, secrets masked as ``expand --raw`` masks them."""
    page = expand(session, addresses=[address], raw=True, sessions=places.sessions,
                  index=places.index, max_chars=24_000)
    parts = [page["entries"][0]["text"]]
    for _ in range(RAW_PAGES):
        following = page["next"]
        if following is None:
            return "".join(parts)
        page = expand(session, addresses=[address], raw=True, sessions=places.sessions,
                      index=places.index, max_chars=24_000,
                      expected_source_hash=following.get("expectedSourceHash"),
                      text_offset=following.get("textOffset", 0))
        parts.append(page["entries"][0]["text"])
    return "".join(parts) + "\n[cut: read the rest with fabric-memory expand --raw]"


ADDRESS_WORD = re.compile(r"[A-Za-z0-9_.:-]+(?:/(?:phase:)?\d+)?")


def address_spans(text: str, known: Mapping[str, int]) -> list[tuple[str, str | None]]:
    """``text`` cut into (part, address) pieces: an address is a word of the text that
    names an entry of the session (``known``), or one of its operations or phases."""
    pieces: list[tuple[str, str | None]] = []
    done = 0
    for match in ADDRESS_WORD.finditer(text):
        word = match.group()
        if word.split("/", 1)[0] not in known:
            continue
        pieces.append((text[done:match.start()], None))
        pieces.append((word, word))
        done = match.end()
    pieces.append((text[done:], None))
    return [piece for piece in pieces if piece[0]]


class SummaryPage(TypedDict):
    sessionId: str
    handle: str
    agent: str
    until: str | None
    """The last summarized entry's address (the cut)."""
    entries: int
    summary: str
    note: str | None
    addressPages: dict[str, int]
    """The timeline page of every entry address (the summary's addresses are links)."""
    page: int
    """0: every link goes to the timeline page that holds its address."""


def summary_page(places: Places, session: str, until: str | None = None) -> SummaryPage:
    """The summary engine's summary of ``session`` from its start through ``until`` (an
    address; None: the whole active branch), secrets masked, every address a link."""
    check_name("until", until)
    catalog, record, _ = find_record(places, session)
    try:
        summary = summarize_session(record.path, until)
    except SessionError as exc:  # the file went bad since it was indexed
        raise ExpandError("source_unavailable", exc.message) from None
    read = _read(record)
    short = session_addresses(read)
    pages = {entry.id: at // TIMELINE_PAGE + 1 for at, entry in enumerate(read.entries)}
    pages.update((short[entry.id], at // TIMELINE_PAGE + 1)
                 for at, entry in enumerate(read.entries) if entry.id in short)
    return {"sessionId": record.session_id, "handle": catalog.handle(record),
            "agent": summary.agent, "until": summary.until,
            "entries": summary.summarized.live.entries,
            "summary": strip_controls(redact_json(summary.summary)),
            "note": summary.note, "addressPages": pages, "page": 0}


# --- search ----------------------------------------------------------------------------


class SearchFilters(TypedDict, total=False):
    agent: str
    project: str
    role: str
    tool: str
    outcome: str
    since: str
    until: str


class SearchGroup(TypedDict):
    sessionId: str
    handle: str
    agent: str
    project: str | None
    path: str
    hits: list[SearchHit]


class SearchHit(TypedDict):
    address: str
    role: str | None
    tool: str | None
    timestamp: str | None
    snippet: str
    marked: list[tuple[str, bool]]
    """The snippet in pieces, each with whether it is a word of the query."""
    follow: dict[str, Any]


class SearchPage(TypedDict):
    query: str
    filters: SearchFilters
    total: int
    offset: int
    limit: int
    matched: str
    groups: list[SearchGroup]
    nextOffset: int | None


def search_page(places: Places, query: str, filters: SearchFilters,
                offset: int = 0) -> SearchPage:
    """``recall`` of ``query`` under ``filters`` (its ranking), the hits grouped by session."""
    if not query.strip() and not filters:
        return {"query": query, "filters": filters, "total": 0, "offset": 0,
                "limit": MAX_LIMIT, "matched": "all", "groups": [], "nextOffset": None}
    answer = recall(query, offset=offset, limit=MAX_LIMIT, sessions=places.sessions,
                    index=places.index, **filters)
    words = set(analyze(query))
    groups: dict[str, SearchGroup] = {}
    for hit in answer["hits"]:
        group = groups.get(hit["path"])
        if group is None:
            group = groups[hit["path"]] = {
                "sessionId": hit["sessionId"], "handle": hit["follow"]["session"],
                "agent": hit["agent"], "project": hit["project"], "path": hit["path"],
                "hits": []}
        group["hits"].append(_search_hit(hit, words))
    following = answer["next"]
    return {"query": query, "filters": filters, "total": answer["total"], "offset": offset,
            "limit": MAX_LIMIT, "matched": answer["matched"], "groups": list(groups.values()),
            "nextOffset": following.get("offset") if following is not None else None}


_SNIPPET_WORD = re.compile(rf"[{CJK_CLASS}]|[^\W_{CJK_CLASS}]+")
"""A word as the index reads one (:data:`~fabric_memory.memory.index.WORD_PATTERN`): a CJK
character alone, or a run of other letters and digits."""


def _search_hit(hit: RecallHit, words: set[str]) -> SearchHit:
    snippet = strip_controls(hit["snippet"])
    return {"address": hit["address"], "role": hit.get("role"), "tool": hit.get("tool"),
            "timestamp": hit.get("timestamp"), "snippet": snippet,
            "marked": marked(snippet, words), "follow": dict(hit["follow"])}


def marked(text: str, words: Iterable[str]) -> list[tuple[str, bool]]:
    """``text`` in pieces, each with whether it is one of ``words`` (as the index reads a
    word: lowercased; a CJK character alone)."""
    wanted = {word.lower() for word in words}
    pieces: list[tuple[str, bool]] = []
    done = 0
    for match in _SNIPPET_WORD.finditer(text):
        if match.group().lower() in wanted:
            pieces.append((text[done:match.start()], False))
            pieces.append((match.group(), True))
            done = match.end()
    pieces.append((text[done:], False))
    return [piece for piece in pieces if piece[0]]


# --- stats -----------------------------------------------------------------------------


class Usage(TypedDict):
    input: int
    output: int
    cacheRead: int
    cacheWrite: int
    cost: float | None
    """``None``: no session counted here records a cost (only Pi's do)."""


class DayRow(TypedDict):
    day: str
    sessions: int
    entries: int
    toolCalls: int
    usage: Usage


class GroupRow(TypedDict):
    name: str
    sessions: int
    entries: int
    toolCalls: int
    usage: Usage


class ToolRow(TypedDict):
    tool: str
    calls: int
    failures: int
    failureRate: float


class CompactionRow(TypedDict):
    sessionId: str
    handle: str
    address: str
    time: str | None
    tokensBefore: int | None


class StatsPage(TypedDict):
    sessions: int
    entries: int
    toolCalls: int
    usage: Usage
    days: list[DayRow]
    agents: list[GroupRow]
    projects: list[GroupRow]
    tools: list[ToolRow]
    compactions: list[CompactionRow]
    unreadable: list[str]


@dataclass(frozen=True, slots=True)
class _Numbers:
    """What one version of one session file adds to the stats."""

    days: dict[str, tuple[int, int]]
    """Day → (entries, tool calls)."""
    day_usage: dict[str, Usage]
    tools: dict[str, tuple[int, int]]
    """Tool → (results, failed results)."""
    usage: Usage
    compactions: tuple[tuple[str, str | None, int | None], ...]


_NUMBERS: dict[str, tuple[str, _Numbers]] = {}
"""Path → the numbers of the file's version with that sourceHash (one per session)."""


def stats_page(places: Places) -> StatsPage:
    """Sessions, entries and tool calls per day, agent and project; failure rate per tool;
    tokens and cost where the agent records usage; every compaction and its
    ``tokensBefore``. Each session file is read once per version (then cached)."""
    catalog = load_catalog(places.open()[1])
    listing = list_sessions(index=places.index, sessions=places.sessions)["sessions"]
    days: dict[str, list[Any]] = defaultdict(lambda: [set(), 0, 0, _usage()])
    groups: dict[str, dict[str, GroupRow]] = {"agent": {}, "project": {}}
    tools: Counter[tuple[str, bool]] = Counter()
    total = _usage()
    compactions: list[CompactionRow] = []
    unreadable = []
    for item in listing:
        record = catalog.record(item["path"])
        if record is None:
            continue
        try:
            numbers = _numbers_of(record)
        except ExpandError as exc:
            unreadable.append(exc.message)
            continue
        name = catalog.handle(record)
        entries = sum(count for count, _ in numbers.days.values())
        calls = sum(calls for _, calls in numbers.days.values())
        for day, (count, called) in numbers.days.items():
            row = days[day]
            row[0].add(record.path)
            row[1] += count
            row[2] += called
            _add_usage(row[3], numbers.day_usage.get(day) or _usage())
        for kind, key in (("agent", record.agent), ("project", record.cwd or "(none)")):
            group = groups[kind].setdefault(key, {"name": key, "sessions": 0, "entries": 0,
                                                  "toolCalls": 0, "usage": _usage()})
            group["sessions"] += 1
            group["entries"] += entries
            group["toolCalls"] += calls
            _add_usage(group["usage"], numbers.usage)
        _add_usage(total, numbers.usage)
        for tool, (results, failed) in numbers.tools.items():
            tools[(tool, False)] += results
            tools[(tool, True)] += failed
        compactions.extend({"sessionId": record.session_id, "handle": name, "address": address,
                            "time": time, "tokensBefore": before}
                           for address, time, before in numbers.compactions)
    tool_names = sorted({tool for tool, _ in tools})
    return {
        "sessions": sum(1 for item in listing if catalog.record(item["path"]) is not None),
        "entries": sum(row[1] for row in days.values()),
        "toolCalls": sum(row[2] for row in days.values()),
        "usage": total,
        "days": [{"day": day, "sessions": len(row[0]), "entries": row[1], "toolCalls": row[2],
                  "usage": row[3]} for day, row in sorted(days.items())],
        "agents": sorted(groups["agent"].values(), key=lambda g: -g["sessions"]),
        "projects": sorted(groups["project"].values(), key=lambda g: -g["sessions"]),
        "tools": sorted(({"tool": tool, "calls": tools[(tool, False)],
                          "failures": tools[(tool, True)],
                          "failureRate": round(tools[(tool, True)] / tools[(tool, False)], 4)
                          if tools[(tool, False)] else 0.0} for tool in tool_names),
                        key=lambda row: (-row["failures"], -row["calls"], row["tool"])),
        "compactions": sorted(compactions, key=lambda c: c["time"] or "", reverse=True),
        "unreadable": unreadable,
    }


def _usage() -> Usage:
    return {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "cost": None}


def _add_usage(usage: Usage, more: Usage | TokenUsage) -> None:
    """Add ``more`` (a session's usage, or one entry's) to ``usage``."""
    if isinstance(more, TokenUsage):
        more = {"input": more.input, "output": more.output, "cacheRead": more.cache_read,
                "cacheWrite": more.cache_write, "cost": more.cost}
    usage["input"] += more["input"]
    usage["output"] += more["output"]
    usage["cacheRead"] += more["cacheRead"]
    usage["cacheWrite"] += more["cacheWrite"]
    if more["cost"] is not None:
        usage["cost"] = round((usage["cost"] or 0.0) + more["cost"], 6)


def _numbers_of(record: SessionRecord) -> _Numbers:
    found = _NUMBERS.get(record.path)
    if found is not None and found[0] == record.source_hash:
        return found[1]
    read = _read(record)
    days: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    tools: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    usage = _usage()
    day_usage: dict[str, Usage] = defaultdict(_usage)
    compactions = []
    for entry in read.entries:
        view = entry.view
        moment = view.time_ms
        day = (datetime.fromtimestamp(moment / 1000, UTC).strftime("%Y-%m-%d")
               if moment is not None else "(no time)")
        days[day][0] += 1
        days[day][1] += len(view.tool_calls)
        if view.role == "toolResult":
            counted = tools[view.tool_name or "(unnamed)"]
            counted[0] += 1
            counted[1] += view.is_error
            fabric = view.fabric
            for op in (fabric.operations if fabric is not None and fabric.verdict == "valid"
                       else ()):  # each operation of a Fabric run counts as its own tool
                counted = tools[op.ref]
                counted[0] += 1
                counted[1] += op.outcome != "succeeded"
        used = view.usage
        if used is not None:
            _add_usage(usage, used)
            _add_usage(day_usage[day], used)
        if entry.type == "compaction":
            before = entry.raw.get("tokensBefore")
            compactions.append((entry.id, view.timestamp,
                                before if isinstance(before, int) else None))
    numbers = _Numbers({day: (row[0], row[1]) for day, row in days.items()},
                       dict(day_usage),
                       {tool: (row[0], row[1]) for tool, row in tools.items()},
                       usage, tuple(compactions))
    _NUMBERS[record.path] = (record.source_hash, numbers)
    return numbers


def generation(places: Places) -> int:
    """The index's commit generation: it changes whenever the live index (or any writer)
    commits; -1 while there is no index yet."""
    handle = places.open()[1]
    return handle.refresh() if handle.exists() else -1


def stat_of(places: Places, session: str) -> tuple[int, int] | None:
    """The session file's (mtime, size) now, for a live page to notice an append."""
    _, record, _ = find_record(places, session)
    try:
        st = os.stat(record.path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)
