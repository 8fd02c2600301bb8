"""``recall``: search the memory index (lexical text plus exact structural filters).

A question in plain words finds its entry: by default (``match="any"``) every document
holding any of the query's words is ranked by relevance (BM25), those holding all of them
first, and ``matched`` says whether the hits needed that relaxation (``"any"``) or every
hit holds every word (``"all"``). ``match="all"`` keeps only documents holding every word.

Every hit says which session and tier it comes from and carries ``follow``: the
exact :func:`~fabric_memory.memory.expand.expand` request, bound to the session's
sourceHash and lineage fingerprint, that hydrates it from the source file. The
response carries ``next`` (the same request at the next offset) or None, and is
kept within :data:`MAX_RESPONSE_CHARS` characters of JSON.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict, cast

import orjson

from .._js import iso_ms
from ..arguments import Clamped, Kind, bounded, check_names, checked_request
from ..errors import QueryError, UsageError, clipped
from ..sources.registry import AGENTS
from .catalog import (
    DEFAULT_HOT_SESSIONS,
    Catalog,
    SessionRecord,
    Tier,
    check_hot_sessions,
    default_roots,
)
from .index import Hit, HitPage, SearchSpec, TextMode
from .sharded import Memory
from .tiers import revalidate

if TYPE_CHECKING:
    from .expand import ExpandRequest

Match = Literal["any", "all"]
Branches = Literal["active", "all"]
MODES: tuple[TextMode, ...] = ("literal", "phrase", "regex")
DEFAULT_LIMIT = 10
MAX_LIMIT = 50
MAX_OFFSET = 10_000
"""Deepest page start: Tantivy collects offset + limit documents to answer a page, so a
huge offset would exhaust memory. Filters (--since, --session, ...) reach older hits."""
MAX_RESPONSE_CHARS = 30_000
SNIPPET_CHARS = 240
SHORT_SNIPPET_CHARS = 80
CLIP_CHARS = 200
"""Longest value kept in a hit that alone would not fit the response."""
MAX_QUERY_CHARS = 4096
"""Longest query text: a response repeats it in ``next``, and it must fit the bound."""
NO_FOLDER = "\x00"
"""A folder no session worked in: what ``--project`` filters on when no indexed session is
there."""
# Filter option → index field, in the order they appear in a request.
FILTERS = (("role", "role"), ("tool", "tool"), ("ref", "ref"), ("provider", "provider"),
           ("action", "action"), ("outcome", "outcome"))
REQUEST_KINDS: dict[str, Kind] = {
    "query": "text", "mode": "text", "match": "text", "role": "name", "tool": "name",
    "ref": "name", "provider": "name", "action": "name", "outcome": "name", "since": "text",
    "until": "text", "session": "name", "agent": "name", "branches": "text", "limit": "integer",
    "offset": "integer", "hotSessions": "integer", "index": "name", "sessions": "name",
    "project": "name", "preferProject": "name"}
"""The recall request's keys and the kind of each value (see :mod:`fabric_memory.arguments`)."""
REQUEST_DEFAULTS: dict[str, Any] = {
    "query": "", "mode": "literal", "match": "any", "branches": "all", "limit": DEFAULT_LIMIT,
    "offset": 0, "hotSessions": DEFAULT_HOT_SESSIONS}
"""The value each optional request key has when left out."""


class RecallRequest(TypedDict, total=False):
    query: str
    mode: TextMode
    match: Match
    role: str
    tool: str
    ref: str
    provider: str
    action: str
    outcome: str
    since: str
    until: str
    session: str
    agent: str
    branches: Branches
    limit: int
    offset: int
    hotSessions: int
    index: str
    sessions: str
    project: str
    preferProject: str


class RecallHit(TypedDict):
    kind: str
    sessionId: str
    path: str
    agent: str
    """The agent that wrote the session (:data:`fabric_memory.sources.AGENTS`)."""
    project: str | None
    """The folder the agent worked in, when the session says."""
    tier: Tier
    stale: bool
    entryId: str
    address: str
    type: str
    snippet: str
    follow: ExpandRequest
    score: NotRequired[float]
    wordsHeld: NotRequired[int]
    """With query text (not a regex): how many of the query's words the hit holds."""
    queryWords: NotRequired[int]
    """... of how many: the words the query ranks by (without the stop words, all of them
    when every word must match; a run of CJK characters counts as its overlapping pairs)."""
    similar: NotRequired[int]
    """How many near-identical outputs of the same session (the same command run again:
    other timings, sizes, hashes) were folded into this hit; they are not hits of their
    own."""
    similarAddresses: NotRequired[list[str]]
    """... their addresses (``expand`` reads them)."""
    parentId: NotRequired[str]
    role: NotRequired[str]
    tool: NotRequired[str]
    ref: NotRequired[str]
    provider: NotRequired[str]
    action: NotRequired[str]
    outcome: NotRequired[str]
    failureStage: NotRequired[str]
    timestamp: NotRequired[str]
    isError: NotRequired[bool]
    onActiveBranch: NotRequired[bool]
    truncated: NotRequired[str]
    """Set when values were cut to fit the response: which, and how to read them whole."""


class RecallResponse(TypedDict):
    total: int
    matched: Match
    """"all": every hit holds every word of the query; "any": some hits hold only some."""
    offset: int
    hits: list[RecallHit]
    next: RecallRequest | None
    allWords: NotRequired[int]
    """With matched "any": how many of ``total`` hold every word (they are ranked first)."""
    clamped: NotRequired[Clamped]
    """Limits asked above their maximum: key → [asked, used]."""


def recall(
    query: str = "",
    *,
    mode: TextMode = "literal",
    match: Match = "any",
    role: str | None = None,
    tool: str | None = None,
    ref: str | None = None,
    provider: str | None = None,
    action: str | None = None,
    outcome: str | None = None,
    since: str | None = None,
    until: str | None = None,
    session: str | None = None,
    agent: str | None = None,
    branches: Branches = "all",
    limit: int = DEFAULT_LIMIT,
    offset: int = 0,
    hot_sessions: int = DEFAULT_HOT_SESSIONS,
    index: str | os.PathLike[str] | None = None,
    sessions: str | os.PathLike[str] | None = None,
    project: str | None = None,
    prefer_project: str | None = None,
    snippet_chars: int = SNIPPET_CHARS,
) -> RecallResponse:
    """Search past sessions; see the module docstring for the response. ``project`` keeps
    the sessions that worked in that folder (or one inside it); ``prefer_project`` ranks
    them first, the others after (what a door started inside a project passes);
    ``snippet_chars`` bounds each hit's snippet (a door showing passages asks for more)."""
    filters = {"role": role, "tool": tool, "ref": ref, "provider": provider,
               "action": action, "outcome": outcome}
    check_names(("--session", session), ("--index", index), ("--sessions", sessions),
                ("--agent", agent), ("--project", project), ("preferProject", prefer_project),
                *((f"--{name}", value) for name, value in filters.items()))
    clamped: Clamped = {}
    limit = bounded(limit, "limit", "--limit", 1, MAX_LIMIT, clamped)
    _check_options(query, mode, match, branches, offset, hot_sessions)
    given: dict[str, Any] = {"query": query, "mode": mode, "match": match, **filters,
                             "since": since, "until": until, "session": session,
                             "agent": agent, "branches": branches, "limit": limit, "offset": offset,
                             "project": project, "preferProject": prefer_project}
    if hot_sessions != DEFAULT_HOT_SESSIONS:
        given["hotSessions"] = hot_sessions
    locations = {"index": index, "sessions": sessions}
    given.update((name, os.fspath(where)) for name, where in locations.items() if where)
    request = cast(RecallRequest, {k: v for k, v in given.items() if v is not None})
    if agent is not None and agent not in AGENTS:
        raise UsageError(f"--agent {clipped(agent)}: use one of {', '.join(AGENTS)}")
    if not query.strip() and not any(filters.values()) and since is None and until is None \
            and agent is None:
        raise QueryError("recall needs a QUERY or at least one filter (--ref, --tool, ...)")
    roots, handle = default_roots(sessions, index)
    view = revalidate(handle, hot_sessions, roots)
    equals: list[tuple[str, tuple[str | bool, ...]]] = []
    excluded: list[tuple[str, tuple[str, ...]]] = []
    for option, name in FILTERS:
        value = filters[option]
        if value is not None:
            equals.append((name, (value,)))
    if session is not None:
        matched = view.catalog.matching(session, roots)
        if not matched:
            raise QueryError(
                f"--session {clipped(session)}: no indexed session has that id or path"
            )
        equals.append(("path", tuple(r.path for r in matched)))
    elif sessions is not None:  # the index may hold other roots' sessions too
        outside = view.catalog.outside(roots)
        if outside:
            excluded.append(("path", tuple(sorted(outside))))
    if agent is not None:
        equals.append(("agent", (agent,)))
    if branches == "active":
        equals.append(("on_active", (True,)))
    if project is not None:
        # By the folder each document names (a few terms), not by the sessions' paths (a
        # term set of hundreds of paths cost a project's recall milliseconds).
        equals.append(("project", view.catalog.folders_of(project) or (NO_FOLDER,)))
    spec = SearchSpec(
        text=query.strip(), mode=mode, match_all=match == "all", equals=tuple(equals),
        excluded=tuple(excluded), since_ms=_time(since, "--since"),
        until_ms=_time(until, "--until"),
    )
    preferred = (view.catalog.folders_of(prefer_project)
                 if prefer_project is not None and project is None and session is None else ())
    if preferred:
        page = _project_first(handle, spec, preferred, limit, offset, snippet_chars)
    else:  # (nothing of that folder indexed: the request says nothing of it)
        request.pop("preferProject", None)
        page = handle.search(spec, limit=limit, offset=offset, snippet_chars=snippet_chars)
    hits = [_hit(hit, page.words, view.catalog, view.hot, view.unrefreshed, locations)
            for hit in page.hits]
    notes: dict[str, Any] = {}
    if page.all_words is not None and page.all_words < page.total:
        notes.update(matched="any", allWords=page.all_words)
    if clamped:
        notes["clamped"] = clamped
    return _bounded(request, page.total, offset, hits, notes)


def _project_first(handle: Memory, spec: SearchSpec, folders: tuple[str, ...], limit: int,
                   offset: int, snippet_chars: int) -> HitPage:
    """One ranking, two parts: the hits of the sessions that worked in ``folders`` (a
    project's), then the others', each part ranked as usual and paged as one list."""
    inside = replace(spec, equals=(*spec.equals, ("project", folders)))
    outside = replace(spec, excluded=(*spec.excluded, ("project", folders)))
    first = handle.search(inside, limit=limit, offset=offset, snippet_chars=snippet_chars)
    wanted = limit - len(first.hits)
    rest = handle.search(outside, limit=max(wanted, 1), offset=max(offset - first.total, 0),
                         snippet_chars=snippet_chars)
    words = (None if first.all_words is None and rest.all_words is None
             else (first.all_words or 0) + (rest.all_words or 0))
    return HitPage(first.total + rest.total, first.hits + rest.hits[:max(wanted, 0)], words,
                   first.words if first.words is not None else rest.words)


def recall_request(request: Mapping[str, Any]) -> RecallResponse:
    """:func:`recall` from its JSON request shape (what ``next`` holds), each value checked
    for its JSON type first."""
    kwargs = checked_request("recall request", request, REQUEST_KINDS)
    if "hotSessions" in kwargs:
        kwargs["hot_sessions"] = kwargs.pop("hotSessions")
    if "preferProject" in kwargs:
        kwargs["prefer_project"] = kwargs.pop("preferProject")
    return recall(**kwargs)


def _check_options(
    query: str, mode: str, match: str, branches: str, offset: int, hot_sessions: int,
) -> None:
    if mode not in MODES:
        raise UsageError(f"--mode {clipped(mode)}: use one of {', '.join(MODES)}")
    if match not in ("any", "all"):
        raise UsageError(f"--match {clipped(match)}: use any or all")
    if branches not in ("active", "all"):
        raise UsageError(f"--branches {clipped(branches)}: use active or all")
    if len(query) > MAX_QUERY_CHARS:
        raise UsageError(f"QUERY is {len(query)} characters; the limit is {MAX_QUERY_CHARS}")
    if not 0 <= offset <= MAX_OFFSET:
        raise UsageError(f"--offset {clipped(offset)}: must be between 0 and {MAX_OFFSET} (narrow "
                         "the query with --since, --until or --session to reach older hits)")
    check_hot_sessions(hot_sessions)


def _time(text: str | None, option: str) -> int | None:
    if text is None:
        return None
    parsed = iso_ms(text.strip())
    if parsed is None:
        raise QueryError(
            f"{option} {clipped(text)}: not an ISO-8601 time (e.g. 2026-01-02T10:00:00Z)"
        )
    return parsed


def _hit(
    hit: Hit,
    words: int | None,
    catalog: Catalog,
    hot: frozenset[str],
    unrefreshed: frozenset[str],
    locations: Mapping[str, str | os.PathLike[str] | None],
) -> RecallHit:
    fields = hit.fields
    path = str(fields["path"])
    record = catalog.record(path)
    follow: ExpandRequest = {
        "session": catalog.handle(record) if record is not None else path,
        "addresses": [str(fields["address"])],
    }
    if record is not None:
        follow["expectedSourceHash"] = record.source_hash
        follow["expectedLineageFingerprint"] = record.lineage_fingerprint
    extra = cast(dict[str, Any], follow)
    extra.update((name, os.fspath(where)) for name, where in locations.items() if where)
    result: RecallHit = {
        "kind": str(fields["kind"]),
        "sessionId": str(fields["session_id"]),
        "path": path,
        "agent": str(fields.get("agent", "pi")),
        "project": str(fields["project"]) if "project" in fields else None,
        "tier": "hot" if path in hot else "cold",
        "stale": _stale(record, path, unrefreshed),
        "entryId": str(fields["entry_id"]),
        "address": str(fields["address"]),
        "type": str(fields["type"]),
        "snippet": hit.snippet,
        "follow": follow,
    }
    if hit.score is not None:
        result["score"] = round(hit.score, 4)
    if hit.words is not None and words is not None:
        result["wordsHeld"] = hit.words
        result["queryWords"] = words
    if hit.similar:
        result["similar"] = len(hit.similar)
        result["similarAddresses"] = list(hit.similar)
    optional = cast(dict[str, Any], result)
    for name, key in (("parent_id", "parentId"), ("role", "role"), ("tool", "tool"),
                      ("ref", "ref"), ("provider", "provider"), ("action", "action"),
                      ("outcome", "outcome"), ("failure_stage", "failureStage"),
                      ("timestamp", "timestamp")):
        if name in fields:
            optional[key] = fields[name]
    optional["isError"] = bool(fields.get("is_error", False))
    optional["onActiveBranch"] = bool(fields.get("on_active", False))
    return result


def _stale(record: SessionRecord | None, path: str, unrefreshed: frozenset[str]) -> bool:
    return record is None or record.stale or path in unrefreshed


def _bounded(
    request: RecallRequest, total: int, offset: int, hits: list[RecallHit],
    notes: Mapping[str, Any],
) -> RecallResponse:
    """Fit the response (with ``notes``: matched, allWords, clamped) in MAX_RESPONSE_CHARS:
    shorten snippets, then carry hits to ``next``."""

    def build(kept: list[RecallHit]) -> RecallResponse:
        end = offset + len(kept)
        following: RecallRequest | None = None
        if end < total and end <= MAX_OFFSET:
            following = {**request, "offset": end}
        response: RecallResponse = {"total": total, "matched": "all", "offset": offset,
                                    "hits": kept, "next": following}
        response.update(cast(RecallResponse, notes))
        return response

    response = build(hits)
    if _size(response) <= MAX_RESPONSE_CHARS:
        return response
    for hit in hits:
        if len(hit["snippet"]) > SHORT_SNIPPET_CHARS:
            hit["snippet"] = hit["snippet"][: SHORT_SNIPPET_CHARS - 1] + "…"
    kept = list(hits)
    response = build(kept)
    while len(kept) > 1 and _size(response) > MAX_RESPONSE_CHARS:
        kept.pop()
        response = build(kept)
    if _size(response) > MAX_RESPONSE_CHARS:  # one hit alone is too large: cut its values
        _clip(kept[0])
        response = build(kept)
    return response


def _clip(hit: RecallHit) -> None:
    """Cut every string value of ``hit`` longer than CLIP_CHARS, and say which were cut."""
    values = cast(dict[str, Any], hit)
    follow = cast(dict[str, Any], hit["follow"])
    cut = [key for key in list(values) if _cut_in(values, key)]
    cut += [f"follow.{key}" for key in list(follow) if _cut_in(follow, key)]
    hit["truncated"] = (f"{', '.join(cut)} cut to {CLIP_CHARS} characters to fit the response; "
                        "expand the session by its path to read the entry whole")


def _cut_in(values: dict[str, Any], key: str) -> bool:
    """Cut ``values[key]`` (a string, or the strings of a list); whether anything was cut."""
    value = values[key]
    items = value if isinstance(value, list) else [value]
    if not any(isinstance(item, str) and len(item) > CLIP_CHARS for item in items):
        return False
    cut = [item[: CLIP_CHARS - 1] + "…" if isinstance(item, str) and len(item) > CLIP_CHARS
           else item for item in items]
    values[key] = cut if isinstance(value, list) else cut[0]
    return True


def _size(response: RecallResponse) -> int:
    """Characters of the response as the CLI prints it (indented JSON): the bound holds for
    what is shown, and compact JSON is never longer."""
    return len(orjson.dumps(response, option=orjson.OPT_INDENT_2).decode())
