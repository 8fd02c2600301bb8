"""``fabric-memory inspect``: what one session file holds, as the engine reads it (any
agent's file, by its own reader: :mod:`fabric_memory.sources`)."""

from __future__ import annotations

import os
from collections import Counter
from typing import TypedDict

from .session import DEFAULT_MAX_LINE_BYTES
from .sources import read_source


class FabricVerdict(TypedDict, total=False):
    entryId: str
    verdict: str
    reason: str
    addresses: list[str]


class Inspection(TypedDict):
    path: str
    sessionId: str
    agent: str
    version: int
    cwd: str | None
    title: str | None
    leafId: str | None
    activeBranch: list[str]
    roots: list[str]
    offBranchEntryIds: list[str]
    entryCounts: dict[str, int]
    truncatedTail: bool
    malformedLines: list[str]
    duplicateIds: list[str]
    sourceHash: str
    lineageFingerprint: str
    size: int
    fabricResults: list[FabricVerdict]


def inspect_session(
    path: str | os.PathLike[str], *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
) -> Inspection:
    """Read ``path`` and describe it: header, branch, counts, hashes, Fabric verdicts."""
    session = read_source(path, max_line_bytes)
    active = [entry.id for entry in session.active_branch()]
    on_branch = set(active)
    verdicts: list[FabricVerdict] = []
    for entry in session.entries:
        result = entry.view.fabric
        if result is None:
            continue
        verdict: FabricVerdict = {"entryId": entry.id, "verdict": result.verdict}
        if result.reason is not None:
            verdict["reason"] = result.reason
        verdict["addresses"] = [op.address for op in result.operations]
        verdicts.append(verdict)
    title = session.title.get("title") if session.title else None
    return {
        "path": session.path,
        "sessionId": session.session_id,
        "agent": session.agent,
        "version": session.version,
        "cwd": session.project,
        "title": title if isinstance(title, str) else None,
        "leafId": session.leaf_id,
        "activeBranch": active,
        "roots": session.roots(),
        "offBranchEntryIds": [e.id for e in session.entries if e.id not in on_branch],
        "entryCounts": dict(sorted(Counter(e.type for e in session.entries).items())),
        "truncatedTail": session.truncated_tail is not None,
        "malformedLines": [p.located(session.path) for p in session.malformed],
        "duplicateIds": list(session.duplicate_ids),
        "sourceHash": session.source_hash,
        "lineageFingerprint": session.lineage_fingerprint(),
        "size": session.size,
        "fabricResults": verdicts,
    }


def render_inspection(report: Inspection) -> str:
    """Human-readable form of :func:`inspect_session`'s report."""
    counts = ", ".join(f"{name} {n}" for name, n in report["entryCounts"].items()) or "none"
    verdicts = Counter(v["verdict"] for v in report["fabricResults"])
    operations = sum(len(v.get("addresses", [])) for v in report["fabricResults"])
    lines = [
        f"session    {report['sessionId']} ({report['agent']}, v{report['version']})",
        f"path       {report['path']}",
        f"cwd        {report['cwd'] or '-'}",
        f"entries    {sum(report['entryCounts'].values())} ({counts})",
        f"leaf       {report['leafId'] or '-'}; active branch {len(report['activeBranch'])}"
        f" entries, {len(report['offBranchEntryIds'])} off-branch, roots {len(report['roots'])}",
        f"sourceHash {report['sourceHash']}",
        f"fabric     {len(report['fabricResults'])} results"
        + "".join(f", {k} {n}" for k, n in sorted(verdicts.items()))
        + f"; {operations} admitted operations",
    ]
    lines.extend(
        f"  {v['entryId']}: invalid ({v['reason']})"
        for v in report["fabricResults"]
        if v["verdict"] == "invalid" and "reason" in v
    )
    if report["truncatedTail"]:
        lines.append("note       half-written last line ignored (truncated_tail)")
    lines.extend(f"skipped    {problem}" for problem in report["malformedLines"])
    if report["duplicateIds"]:
        lines.append(f"warning    duplicate entry ids: {', '.join(report['duplicateIds'])}")
    return "\n".join(lines)

