"""``fabric-memory export``: a session, an address range or a search's hits as a file a
person reads — Markdown, HTML or JSON.

An export is ``expand`` read to the end and laid out as a document: the same readable
text per entry (role, time, what was said, each tool call with its arguments, what came
back), every entry under its address (one ``expand`` takes back), secrets and private text
masked as in every answer (``show_secrets`` asks for them). An entry longer than
:data:`ENTRY_CHARS` keeps its head and tail and says the exact call that reads the rest.
"""

from __future__ import annotations

import html
import os
import re
from collections.abc import Iterator
from typing import Any, Literal, TypedDict

from .._js import iso_time
from ..errors import UsageError
from .expand import MAX_CHARS, MAX_ENTRIES, ExpandedEntry, ExpandPage, expand, expand_request

Format = Literal["markdown", "html", "json"]
FORMATS: tuple[Format, ...] = ("markdown", "html", "json")
ENTRY_CHARS = MAX_CHARS
"""The most of one entry an export shows before it cuts to head and tail."""
MAX_PAGES = 10_000
"""Pages one session may take (a bound on a loop that follows ``next``)."""


class ExportedSession(TypedDict):
    sessionId: str
    path: str
    sourceHash: str
    selected: int
    entries: list[ExpandedEntry]


class Export(TypedDict):
    format: str
    """``fabric-memory-export``."""
    version: int
    exportedAt: str
    title: str
    secretsMasked: bool
    sessions: list[ExportedSession]


def export(
    session: str | None = None, *, range: str | None = None, query: str | None = None,
    limit: int = 20, show_secrets: bool = False,
    index: str | os.PathLike[str] | None = None,
    sessions: str | os.PathLike[str] | None = None,
) -> Export:
    """``session`` whole (or its ``range`` of addresses), or the entries ``query``'s first
    ``limit`` hits name (grouped by session, in rank order)."""
    from datetime import UTC, datetime

    if (session is None) == (query is None):
        raise UsageError("export takes a SESSION (with --range to narrow it) or --query, "
                         "not both and not neither")
    if range is not None and session is None:
        raise UsageError("--range narrows a SESSION; give the session too")
    where = {"index": index, "sessions": sessions, "show_secrets": show_secrets}
    if session is not None:
        chosen = [_session(session, range, where)]
        title = f"session {session}" + (f", {range}" if range else "")
    else:
        assert query is not None
        chosen = _hits(query, limit, where)
        title = f"the hits of {query!r}"
    return {"format": "fabric-memory-export", "version": 1,
            "exportedAt": iso_time(datetime.now(UTC)), "title": title,
            "secretsMasked": not show_secrets, "sessions": chosen}


def _session(session: str, range_: str | None, where: dict[str, Any]) -> ExportedSession:
    if range_ is None:
        first = expand(session, indices=[0], **where)
        from ..sources import read_source  # the count of entries: positions run 0..count-1

        count = len(read_source(first["path"]).entries)
        page = expand(session, positions=f"0:{max(count - 1, 0)}", entry_chars=ENTRY_CHARS,
                      max_chars=MAX_CHARS, max_entries=MAX_ENTRIES, **where)
    else:
        page = expand(session, range=range_, entry_chars=ENTRY_CHARS, max_chars=MAX_CHARS,
                      max_entries=MAX_ENTRIES, **where)
    entries = list(_all_entries(page))
    return {"sessionId": page["sessionId"], "path": page["path"],
            "sourceHash": page["sourceHash"], "selected": page["selected"], "entries": entries}


def _all_entries(page: ExpandPage) -> Iterator[ExpandedEntry]:
    """Every entry of the selection, following ``next``; a long single entry continued on
    the next page is joined to its start."""
    previous: ExpandedEntry | None = None
    for _ in range(MAX_PAGES):
        for entry in page["entries"]:
            if previous is not None and entry["textOffset"] > 0 \
                    and entry["address"] == previous["address"]:
                previous["text"] += entry["text"]
                previous["complete"] = entry["complete"]
                continue
            if previous is not None:
                yield previous
            previous = entry
        following = page["next"]
        if following is None:
            break
        page = expand_request(following)
    if previous is not None:
        yield previous


def _hits(query: str, limit: int, where: dict[str, Any]) -> list[ExportedSession]:
    from .recall import recall

    found = recall(query, limit=limit, index=where["index"], sessions=where["sessions"])
    grouped: dict[str, ExportedSession] = {}
    for hit in found["hits"]:
        follow = dict(hit["follow"])
        follow.update(showSecrets=where["show_secrets"], entryChars=ENTRY_CHARS,
                      maxChars=MAX_CHARS)
        page = expand_request(follow)
        group = grouped.setdefault(page["path"], {
            "sessionId": page["sessionId"], "path": page["path"],
            "sourceHash": page["sourceHash"], "selected": 0, "entries": []})
        for entry in _all_entries(page):
            if entry["address"] not in {e["address"] for e in group["entries"]}:
                group["entries"].append(entry)
                group["selected"] += 1
    return list(grouped.values())


# --- renderings ------------------------------------------------------------------------


def _head_and_body(entry: ExpandedEntry) -> tuple[str, str]:
    """The entry's head line (address, role, time) and the rest of its readable text, the
    cut part named with the call that reads it."""
    from .render import call

    text = entry["text"]
    if "tail" in entry and "rest" in entry:
        cut = entry["tailOffset"] - (entry["textOffset"] + len(text))
        text += (f"\n[... {cut} characters cut; the rest: "
                 f"{call('cli', 'expand', entry['rest'])}]\n{entry['tail']}")
    head, _, body = text.partition("\n")
    return head, body


def render_markdown(exported: Export) -> str:
    lines = [f"# {exported['title']}", "",
             f"Exported by fabric-memory at {exported['exportedAt']}"
             + ("; secrets and private text masked as `[REDACTED:<kind>]`."
                if exported["secretsMasked"] else "; secrets shown as written."), ""]
    for session in exported["sessions"]:
        lines += [f"## Session {session['sessionId']}", "",
                  f"- file: `{session['path']}`", f"- sourceHash: `{session['sourceHash']}`",
                  f"- entries: {len(session['entries'])}", ""]
        for entry in session["entries"]:
            head, body = _head_and_body(entry)
            lines.append(f"### {head}")
            if body.strip():
                fence = "`" * max(3, _longest_backticks(body) + 1)
                lines += ["", f"{fence}text", body, fence]
            lines.append("")
    return "\n".join(lines)


def _longest_backticks(text: str) -> int:
    return max((len(run) for run in re.findall(r"`+", text)), default=0)


def render_html(exported: Export) -> str:
    """One self-contained page: inline style, nothing fetched."""
    parts = ["<!doctype html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>{html.escape(exported['title'])}</title>",
             "<style>body{font:15px/1.45 system-ui,sans-serif;max-width:60rem;margin:2rem auto;"
             "padding:0 1rem}pre{white-space:pre-wrap;background:#f6f6f4;padding:.6rem;"
             "border-radius:4px}h3{font:600 13px ui-monospace,monospace;margin:1.4rem 0 .3rem}"
             "</style></head><body>",
             f"<h1>{html.escape(exported['title'])}</h1>",
             f"<p>Exported by fabric-memory at {html.escape(exported['exportedAt'])}"
             + ("; secrets and private text masked." if exported["secretsMasked"] else ".")
             + "</p>"]
    for session in exported["sessions"]:
        parts += [f"<h2>Session {html.escape(session['sessionId'])}</h2>",
                  f"<p>file <code>{html.escape(session['path'])}</code>, sourceHash "
                  f"<code>{html.escape(session['sourceHash'])}</code></p>"]
        for entry in session["entries"]:
            head, body = _head_and_body(entry)
            anchor = html.escape(entry["address"], quote=True)
            parts.append(f'<h3 id="{anchor}">{html.escape(head)}</h3>')
            if body.strip():
                parts.append(f"<pre>{html.escape(body)}</pre>")
    parts.append("</body></html>")
    return "\n".join(parts)


def render_export(exported: Export, format: Format) -> str:
    if format == "markdown":
        return render_markdown(exported)
    if format == "html":
        return render_html(exported)
    import orjson

    return orjson.dumps(exported, option=orjson.OPT_INDENT_2).decode()


def write_export(exported: Export, format: Format, output: str | os.PathLike[str]) -> str:
    """Write the rendering to ``output`` (owner-only: it may hold what the sessions said)
    and say what was written."""
    text = render_export(exported, format)
    try:
        fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as stream:
            stream.write(text if text.endswith("\n") else text + "\n")
    except OSError as exc:
        raise UsageError(f"--output {output}: cannot write ({exc.strerror or exc})") from None
    entries = sum(len(s["entries"]) for s in exported["sessions"])
    return (f"wrote {output}: {len(exported['sessions'])} sessions, {entries} entries as "
            f"{format}")
