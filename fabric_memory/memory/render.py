"""Human-readable text for the memory commands (``--json`` prints the values instead)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, Literal

import orjson

from .index import REBUILD

if TYPE_CHECKING:  # types only: rendering a recall must not load the writer or expand
    from .catalog import SessionsReport, StatsReport, VerifyReport
    from .expand import ExpandedEntry, ExpandPage
    from .forget import ForgetReport
    from .recall import RecallHit, RecallResponse
    from .report import Progress, ReindexReport


def render_progress(progress: Progress) -> str:
    width = 24
    filled = width * progress.done // progress.total if progress.total else width
    return (
        f"reindex [{'#' * filled}{'.' * (width - filled)}] {progress.done}/{progress.total} "
        f"sessions, {progress.indexed} indexed, {progress.skipped} unchanged"
    )


def render_reindex(report: ReindexReport) -> str:
    lines = [
        f"{report['sessions']} sessions under {' and '.join(report['sessionsRoots'])}: "
        f"{report['indexed']} "
        f"indexed, {report['skipped']} unchanged, {len(report['invalid'])} invalid "
        f"({report['entries']} entries, {report['operations']} operations) "
        f"in {report['seconds']:.2f}s",
        f"index: {report['index']}",
    ]
    if "shards" in report:
        shards = report["shards"]
        lines.append(f"shards: {shards['built']} built, {shards['kept']} kept of "
                     f"{shards['total']}, on {shards['engine']}")
    if report["redacted"]:
        masked = ", ".join(f"{kind} {n}" for kind, n in sorted(report["redacted"].items()))
        lines.append(f"secrets masked in the index: {masked}")
    if report["excluded"]:
        lines.append(f"kept out of memory: {len(report['excluded'])} sessions (forgotten, or "
                     "in an ignored folder; --json lists them)")
    lines.extend(f"invalid: {item['reason']}" for item in report["invalid"])
    lines.extend(f"stale: {item['path']}: {item['reason']}" for item in report["stale"])
    lines.extend(f"incomplete: {item['path']}: {item['reason']}" for item in report["incomplete"])
    lines.extend(f"removed: {item['path']}: {item['reason']}" for item in report["removed"])
    lines.extend(f"note: {item['reason']}" for item in report["notes"])
    lines.extend(f"salvaged: {item['reason']}" for item in report["salvaged"])
    return "\n".join(lines)


def render_forget(report: ForgetReport) -> str:
    count = len(report["sessions"])
    sessions = f"{count} session{'' if count == 1 else 's'}"
    head = {("forget", False): f"forgot {sessions}",
            ("forget", True): f"would forget {sessions} (dry run)",
            ("undo", False): f"brought back {sessions} ({report['indexed']} indexed again)",
            ("undo", True): f"would bring back {sessions} (dry run)",
            ("list", False): f"{sessions} forgotten"}[(report["action"], report["dryRun"])]
    lines = [head]
    lines.extend(f"  {s['agent']} {s['sessionId']}  {s['path']}"
                 + (f"  forgotten {s['forgottenAt']}" if report["action"] == "list" else "")
                 for s in report["sessions"])
    if report["next"] is not None:
        lines.append(("to do it: " if report["dryRun"] else "to reverse it: ") + report["next"])
    return "\n".join(lines)


Door = Literal["cli", "mcp", "pi"]
"""Who answers, and so how a next call is written: a shell command (``cli``), or a tool name
and its JSON arguments as the MCP server (``mcp``) or the Pi extension (``pi``) take them."""

TOOL_NAMES: Final[dict[Door, dict[str, str]]] = {
    "cli": {"recall": "fabric-memory recall", "expand": "fabric-memory expand",
            "sessions": "fabric-memory sessions"},
    "mcp": {"recall": "recall", "expand": "expand", "sessions": "sessions"},
    "pi": {"recall": "memory_recall", "expand": "memory_expand"},
}
LOCATION_KEYS: Final = ("index", "sessions")
"""Request keys a tool door fills in itself (and refuses from a model when they differ)."""
CLI_OPTIONS: Final[dict[str, dict[str, str]]] = {
    "recall": {"query": "", "hotSessions": "--hot-sessions"},
    "expand": {"session": "", "entries": "--entry", "addresses": "--address",
               "indices": "--position", "positions": "--position-range",
               "expectedSourceHash": "--expected-source-hash",
               "expectedLineageFingerprint": "--expected-lineage",
               "maxEntries": "--max-entries", "maxChars": "--max-chars",
               "entryChars": "--entry-chars", "entryOffset": "--entry-offset",
               "textOffset": "--text-offset", "showSecrets": "--show-secrets"},
    "sessions": {"hotSessions": "--hot-sessions"},
}
"""A request key's command-line option where it is not ``--`` and the key itself (``""``:
the positional argument)."""


def call(door: Door, tool: str, request: Mapping[str, Any]) -> str:
    """The exact call of ``tool`` with ``request`` (a hit's ``follow``, a page's ``next``) as
    ``door`` takes it: a shell command, or the tool's name and its JSON arguments. Values
    equal to the tool's defaults are left out (the call means the same)."""
    return _call(door, tool, request, _defaults(tool))


def _defaults(tool: str) -> Mapping[str, Any]:
    """The request defaults of ``tool``, from its module (imported here: rendering a recall's
    hits needs none of expand's)."""
    if tool == "recall":
        from .recall import REQUEST_DEFAULTS
    elif tool == "expand":
        from .expand import REQUEST_DEFAULTS
    else:
        from .catalog import REQUEST_DEFAULTS
    return REQUEST_DEFAULTS


def _call(door: Door, tool: str, request: Mapping[str, Any],
          defaults: Mapping[str, Any]) -> str:
    given = {key: value for key, value in request.items()
             if value is not None and defaults.get(key, _UNSET) != value}
    if door != "cli":  # the tool door reads its own places
        given = {key: value for key, value in given.items() if key not in LOCATION_KEYS}
        return f"{TOOL_NAMES[door][tool]} {orjson.dumps(given).decode()}"
    words = [TOOL_NAMES[door][tool]]
    last: list[str] = []  # a positional that looks like an option goes after `--`
    options = CLI_OPTIONS.get(tool, {})
    for key, value in given.items():
        option = options.get(key, "--" + re.sub(r"[A-Z]", lambda m: "-" + m[0].lower(), key))
        if option == "":
            (last if str(value).startswith("-") else words).append(shlex.quote(str(value)))
        elif value is True:
            words.append(option)
        elif key == "kinds":
            words.extend((option, shlex.quote(",".join(value))))
        else:
            for item in value if isinstance(value, list) else [value]:
                words.extend((option, shlex.quote(str(item))))
    return " ".join([*words, "--", *last] if last else words)


_UNSET: Final = object()


def render_recall(response: RecallResponse, door: Door = "cli") -> str:
    """Hits grouped by session, best group first: the session's agent, project, tier, path and
    sourceHash once, then one line per hit (rank, address, role or tool, outcome, time, query
    words held) and its snippet, and the call that reads the group's hits."""
    hits = response["hits"]
    first = response["offset"] + 1
    every = (f" ({response.get('allWords', 0)} with every word, ranked first)"
             if response["matched"] == "any" else "")
    lines = [f"{response['total']} hits{every}"
             + (f", showing {first}-{first + len(hits) - 1}" if hits else "")]
    lines.extend(_clamped(response.get("clamped", {})))
    groups: dict[str, list[tuple[int, RecallHit]]] = {}
    for rank, hit in enumerate(hits, first):
        groups.setdefault(hit["path"], []).append((rank, hit))
    for ranked in groups.values():
        lines.extend(_group(ranked, door))
    if response["next"] is not None:
        lines.append(f"more: {call(door, 'recall', response['next'])}")
    return "\n".join(lines)


def _group(ranked: list[tuple[int, RecallHit]], door: Door) -> list[str]:
    head = ranked[0][1]
    follow = head["follow"]
    project = f"  project {head['project']}" if head.get("project") else ""
    stale = " STALE" if head["stale"] else ""
    lines = [f"{head['agent']} session {head['sessionId']}{project}  [{head['tier']}{stale}]",
             f"  {head['path']}  sourceHash {follow.get('expectedSourceHash', '?')}"]
    for rank, hit in ranked:
        what = [str(value) for value in (hit.get("role"), hit.get("tool"), hit.get("ref"),
                                        hit.get("outcome")) if value]
        if hit["kind"] != "entry":
            what.insert(0, hit["kind"])
        elif hit.get("isError") and "error" not in what:
            what.append("error")
        if hit.get("timestamp"):
            what.append(str(hit.get("timestamp")))
        words = _words(hit)
        lines.append(f"  #{rank} {hit['address']} {' '.join(what)}{words}{_similar(hit)}"
                     .rstrip())
        snippet = " ".join(hit["snippet"].split())
        if snippet:
            lines.append(f"     {snippet}")
        if "truncated" in hit:
            lines.append(f"     note: {hit['truncated']}")
    addresses = list(dict.fromkeys(
        address for _, hit in ranked for address in hit["follow"].get("addresses", [])))
    # A follow holds no value with a default (so expand's defaults need not be loaded).
    lines.append(f"  expand: {_call(door, 'expand', {**follow, 'addresses': addresses}, {})}")
    return lines


def _similar(hit: RecallHit) -> str:
    """`` (+7 near-identical: L40 L52 …)``: the outputs folded into the hit, by address."""
    if not hit.get("similar"):
        return ""
    return f"  (+{hit['similar']} near-identical: {' '.join(hit.get('similarAddresses', []))})"


def _words(hit: RecallHit) -> str:
    """`` (2/3 words)``: how many of the query's words the hit holds, when the index says
    (a query of one word says nothing)."""
    held, of = hit.get("wordsHeld"), hit.get("queryWords")
    return f"  ({held}/{of} words)" if held is not None and of is not None and of > 1 else ""


def render_expand(page: ExpandPage, door: Door = "cli") -> str:
    """The page's entries as text, each after a ``---`` line naming its address; an entry cut to
    its head and tail says the call that reads it whole, and a page that does not end the
    selection says the call for the next."""
    entries = page["entries"]
    start = page.get("entryOffset", 0)
    filtered = page.get("filtered", 0)
    held = f"{page['selected']} entries" + (
        f" ({filtered} of other kinds left out)" if filtered else "")
    shown = (f", showing {start + 1}-{start + len(entries)}"
             if len(entries) < page["selected"] else "")
    lines = [f"session {page['sessionId']}  {page['path']}  sourceHash {page['sourceHash']}",
             f"{held}{shown}"]
    lines.extend(_clamped(page.get("clamped", {})))
    lines.extend(f"note: {note}" for note in page.get("snapped", ()))
    for entry in entries:
        lines.extend(_entry(entry, door))
    following = page["next"]
    if following is not None:
        lines.append(f"more: {call(door, 'expand', following)}")
    return "\n".join(lines)


def _entry(entry: ExpandedEntry, door: Door) -> list[str]:
    kind = "" if entry["kind"] == "entry" else f" {entry['kind']}"
    text, offset, length = entry["text"], entry["textOffset"], entry["textLength"]
    if "tail" in entry:
        return [f"--- {entry['address']}{kind} (characters {offset}-{offset + len(text)} and "
                f"{entry['tailOffset']}-{length} of {length})",
                text,
                f"[... {entry['tailOffset'] - offset - len(text)} characters cut; the rest from "
                f"character {offset + len(text)}: {call(door, 'expand', entry['rest'])}]",
                entry["tail"]]
    span = "" if entry["complete"] and offset == 0 else (
        f" (characters {offset}-{offset + len(text)} of {length})")
    return [f"--- {entry['address']}{kind}{span}", text]


def _clamped(clamped: Mapping[str, list[int]]) -> list[str]:
    return [f"note: {key} {asked} is above its maximum; {used} used"
            for key, (asked, used) in clamped.items()]


def render_sessions(report: SessionsReport, door: Door = "cli") -> str:
    shown = len(report["sessions"])
    lines = [f"{report['total']} sessions in {report['index']}"
             + (f", showing {report['offset'] + 1}-{report['offset'] + shown}"
                if shown < report["total"] else "")]
    for item in report["sessions"]:
        flags = " STALE" if item["stale"] else ""
        flags += " INCOMPLETE" if not item["complete"] else ""
        lines.append(
            f"{item['tier']:4} {item['agent']:11} {item['sessionId']}  "
            f"{item['entries']:>5} entries {item['operations']:>5} ops  "
            f"{item['sourceHash']}{flags}  {item['path']}"
        )
    following = report["next"]
    if following is not None:
        where = {"index": report["index"]} if door == "cli" else {}
        lines.append(f"more: {call(door, 'sessions', {**following, **where})}")
    return "\n".join(lines)


def render_stats(report: StatsReport) -> str:
    return "\n".join([
        f"index {report['index']} (schema v{report['schemaVersion']})",
        f"sessions {report['sessions']} ({report['hot']} hot, {report['cold']} cold, "
        f"{report['stale']} stale, {report['incomplete']} incomplete)",
        f"entries {report['entries']}, operations {report['operations']}, "
        f"documents {report['documents']}",
        f"index {report['indexBytes']} bytes for {report['sourceBytes']} source bytes",
    ])


def render_verify(report: VerifyReport) -> str:
    lines = [f"{report['ok']} ok, {report['changed']} changed, {report['missing']} missing"]
    lines.extend(
        f"{item['state']}: {item['path']}" + (f" ({item['reason']})" if "reason" in item else "")
        for item in report["sessions"]
        if item["state"] != "ok"
    )
    lines.extend(f"index: {problem}" for problem in report["indexProblems"])
    if report["indexProblems"]:
        lines.append(f"index: {REBUILD}")
    return "\n".join(lines)
