"""Human-readable text for the memory commands (``--json`` prints the values instead)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from .index import REBUILD

if TYPE_CHECKING:  # types only: rendering a recall must not load the writer or expand
    from .catalog import SessionsReport, StatsReport, VerifyReport
    from .expand import ExpandPage
    from .recall import RecallResponse
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
    if report["redacted"]:
        masked = ", ".join(f"{kind} {n}" for kind, n in sorted(report["redacted"].items()))
        lines.append(f"secrets masked in the index: {masked}")
    lines.extend(f"invalid: {item['reason']}" for item in report["invalid"])
    lines.extend(f"stale: {item['path']}: {item['reason']}" for item in report["stale"])
    lines.extend(f"incomplete: {item['path']}: {item['reason']}" for item in report["incomplete"])
    lines.extend(f"removed: {item['path']}: {item['reason']}" for item in report["removed"])
    lines.extend(f"note: {item['reason']}" for item in report["notes"])
    lines.extend(f"salvaged: {item['reason']}" for item in report["salvaged"])
    return "\n".join(lines)


def render_recall(response: RecallResponse) -> str:
    hits = response["hits"]
    first = response["offset"] + 1
    every = (f" ({response.get('allWords', 0)} with every word, ranked first)"
             if response["matched"] == "any" else "")
    lines = [f"{response['total']} hits{every}"
             + (f", showing {first}-{first + len(hits) - 1}" if hits else "")]
    lines.extend(_clamped(response.get("clamped", {})))
    for hit in hits:
        what = " ".join(
            str(value) for value in (hit.get("role"), hit.get("ref"), hit.get("outcome")) if value
        )
        stale = " STALE" if hit["stale"] else ""
        lines.append(
            f"{hit['kind']} {hit['address']} [{hit['tier']}{stale}] {what} "
            f"{hit.get('timestamp', '')}".rstrip()
        )
        project = f"  project {hit['project']}" if hit.get("project") else ""
        lines.append(f"  {hit['agent']} session {hit['sessionId']}{project}  {hit['path']}")
        snippet = " ".join(hit["snippet"].split())
        if snippet:
            lines.append(f"  {snippet}")
        follow = hit["follow"]
        lines.append(
            f"  expand: fabric-memory expand {follow['session']} --address {hit['address']} "
            f"--expected-source-hash {follow.get('expectedSourceHash', '')}"
        )
    if response["next"] is not None:
        lines.append(f"more: --offset {response['next'].get('offset')}")
    return "\n".join(lines)


def render_expand(page: ExpandPage) -> str:
    lines = [f"session {page['sessionId']}  {page['path']}  sourceHash {page['sourceHash']}"]
    lines.extend(_clamped(page.get("clamped", {})))
    for entry in page["entries"]:
        span = f"chars {entry['textOffset']}-{entry['textOffset'] + len(entry['text'])}"
        lines.append(
            f"--- {entry['kind']} {entry['address']} (index {entry['index']}, line "
            f"{entry['line']}, {span} of {entry['textLength']})"
        )
        lines.append(entry["text"])
    following = page["next"]
    if following is not None:
        lines.append(
            f"more: --entry-offset {following.get('entryOffset')} "
            f"--text-offset {following.get('textOffset')} "
            f"--expected-source-hash {page['sourceHash']}"
        )
    return "\n".join(lines)


def _clamped(clamped: Mapping[str, list[int]]) -> list[str]:
    return [f"note: {key} {asked} is above its maximum; {used} used"
            for key, (asked, used) in clamped.items()]


def render_sessions(report: SessionsReport) -> str:
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
