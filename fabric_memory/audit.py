"""``audit``: persisted traces that kept more than the exact-ref projection allows.

A Fabric trace may keep, per exact ref, only the argument keys and shapes of the
write-side projection (docs/trace.md#projection) and, from ``pi.write``/``omp.write``, the result
``{"created": true}``. This walks every session under a root, reads each
``fabric_exec`` result through the guard (each entry's view, :mod:`fabric_memory.view`)
and reports every operation of a valid trace that kept more: by address and rule
(:func:`~fabric_memory.trace.projection_violations`), never with the kept value, which
is exactly what leaked. Audits and outer output are verbatim by design and not judged.

``audit --secrets`` (:func:`audit_secrets`) reports where credentials sit in the session
files, by the same rules that mask them in the memory index and in answers
(:mod:`fabric_memory.redact`): ``path:line address kind``, never the value.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterator
from itertools import chain
from pathlib import Path
from typing import Any, TypedDict

from .errors import SessionError, UsageError
from .memory.locations import sessions_roots
from .redact import secret_kinds
from .session import Entry, Session, decode_line, iter_session_files
from .sources import read_source
from .trace import TraceOperation, project_result, projection_violations

_SHOWN_KEY = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]{0,39}\Z")
"""Argument keys shown as they are; any other key could itself be leaked text."""


class AuditFinding(TypedDict):
    path: str
    line: int
    sessionId: str
    address: str
    ref: str
    key: str
    """The argument key (``result`` for a kept result); ``<key #i>`` when not a plain name."""
    rule: str


class UnreadableSession(TypedDict):
    path: str
    reason: str


class AuditReport(TypedDict):
    sessionsRoot: str
    sessionsRoots: list[str]
    sessions: int
    unreadable: list[UnreadableSession]
    traces: int
    operations: int
    findings: list[AuditFinding]
    rules: dict[str, int]
    """Findings per rule (without the ref: ``not kept``, ``keeps a query or fragment``, ...)."""


def audit_sessions(sessions: str | os.PathLike[str] | None = None) -> AuditReport:
    """Every projection violation in the valid traces of the sessions under ``sessions``
    (default ``$FABRIC_MEMORY_SESSIONS`` or ``~/.pi/agent/sessions``)."""
    roots = _roots(sessions)
    report: AuditReport = {"sessionsRoot": str(roots[0]), "sessionsRoots": list(map(str, roots)),
                           "sessions": 0, "unreadable": [], "traces": 0, "operations": 0,
                           "findings": [], "rules": {}}
    for session in _read_all(roots, report["unreadable"]):
        report["sessions"] += 1
        for entry in session.entries:
            fabric = entry.view.fabric
            if fabric is None or fabric.verdict != "valid":
                continue
            report["traces"] += 1
            for op in fabric.operations:
                report["operations"] += 1
                for key, rule in operation_violations(op):
                    report["findings"].append({
                        "path": session.path, "line": entry.line,
                        "sessionId": session.session_id, "address": op.address,
                        "ref": op.ref, "key": key, "rule": rule,
                    })
    rules = Counter(f["rule"].removesuffix(f" for {f['ref']}") for f in report["findings"])
    report["rules"] = dict(sorted(rules.items()))
    return report


def _roots(sessions: str | os.PathLike[str] | None) -> tuple[Path, ...]:
    roots = sessions_roots(sessions)
    for root in roots:
        if not root.exists():
            raise UsageError(f"{root}: sessions directory does not exist; pass --sessions DIR")
    return roots


def _read_all(roots: tuple[Path, ...], unreadable: list[UnreadableSession]) -> Iterator[Session]:
    """Every session under ``roots``, whichever agent wrote it; a file that cannot be read
    is listed and skipped."""
    for path in chain.from_iterable(map(iter_session_files, roots)):
        try:
            yield read_source(path)
        except SessionError as exc:
            unreadable.append({"path": str(path), "reason": exc.message})


def operation_violations(op: TraceOperation) -> list[tuple[str, str]]:
    """``(key, rule)`` for every argument (and a result) the operation should not have kept."""
    found: list[tuple[str, str]] = []
    for index, (key, value) in enumerate(op.args.items()):
        for violation in projection_violations(op.ref, {key: value}):
            shown = key if _SHOWN_KEY.match(key) else f"<key #{index}>"
            found.append((shown, _rule(violation, key, op.ref)))
    if "result" in op.record:
        result: Any = op.record["result"]
        kept = project_result(op.ref, result)
        if kept is None or kept != result:
            what = "keeps more than {created: true}" if kept is not None else "not kept"
            found.append(("result", f"{what} for {op.ref}"))
    return found


def _rule(violation: str, key: str, ref: str) -> str:
    """The rule part of ``"<key>: <rule>"`` (a key that is not a plain name is never kept)."""
    if _SHOWN_KEY.match(key):
        return violation.split(": ", 1)[1]
    return f"not kept for {ref}"


def render_audit(report: AuditReport) -> str:
    """Human text: one line per finding (``path:line address ref key: rule``), then totals."""
    lines = [
        f"{f['path']}:{f['line']} {f['address']} {f['ref']} {f['key']}: {f['rule']}"
        for f in report["findings"]
    ]
    lines.extend(f"{u['path']}: unreadable: {u['reason']}" for u in report["unreadable"])
    verdict = (f"{len(report['findings'])} projection violations"
               if report["findings"] else "no projection violations")
    lines.append(
        f"{verdict} in {report['operations']} operations of {report['traces']} valid traces "
        f"({report['sessions']} sessions, {len(report['unreadable'])} unreadable) under "
        f"{' and '.join(report['sessionsRoots'])}"
    )
    return "\n".join(lines)


# --- secrets ---------------------------------------------------------------------------


class SecretFinding(TypedDict):
    path: str
    line: int
    sessionId: str
    address: str
    """The operation's address for a secret in a valid trace's arguments, else the entry's."""
    kind: str
    count: int


class SecretAuditReport(TypedDict):
    sessionsRoot: str
    sessionsRoots: list[str]
    sessions: int
    entries: int
    unreadable: list[UnreadableSession]
    findings: list[SecretFinding]
    kinds: dict[str, int]
    """Secrets per kind, all sessions together."""


def audit_secrets(sessions: str | os.PathLike[str] | None = None) -> SecretAuditReport:
    """Where secrets sit in the sessions under ``sessions``: every string of every entry
    (keys included), by address and kind, never the value."""
    roots = _roots(sessions)
    report: SecretAuditReport = {"sessionsRoot": str(roots[0]),
                                 "sessionsRoots": list(map(str, roots)), "sessions": 0,
                                 "entries": 0, "unreadable": [], "findings": [], "kinds": {}}
    totals: Counter[str] = Counter()
    for session in _read_all(roots, report["unreadable"]):
        report["sessions"] += 1
        written = _written(session)
        for entry in session.entries:
            report["entries"] += 1
            found = secret_kinds(entry.raw if written is None else written.pop(entry.line, None))
            if not found:
                continue
            places: list[tuple[str, Counter[str]]] = []
            fabric = entry.view.fabric
            if fabric is not None and fabric.verdict == "valid":
                for op in fabric.operations:
                    in_op = secret_kinds(op.record)
                    if in_op:
                        places.append((op.address, in_op))
                        found -= in_op
            if found:
                places.insert(0, (entry.id, found))
            for address, kinds in places:
                totals.update(kinds)
                report["findings"].extend({
                    "path": session.path, "line": entry.line, "sessionId": session.session_id,
                    "address": address, "kind": kind, "count": count,
                } for kind, count in sorted(kinds.items()))
    report["kinds"] = dict(sorted(totals.items()))
    return report


def _written(session: Session) -> dict[int, Any] | None:
    """Line number → the JSON value written on that line, for another agent's file (its
    reader keeps only what memory needs of a line, so the line itself is searched); None
    for a Pi-format session, whose entries are searched as Pi holds them."""
    if session.header.get("type") == "session":
        return None
    try:
        data = Path(session.path).read_bytes()
    except OSError:
        return {entry.line: entry.raw for entry in session.entries}
    return {entry.line: _decoded(data[entry.offset:entry.offset + entry.length], entry)
            for entry in session.entries}


def _decoded(line: bytes, entry: Entry) -> Any:
    try:
        return decode_line(line)
    except ValueError:  # changed since it was read: what the reader saw
        return entry.raw


def render_secret_audit(report: SecretAuditReport) -> str:
    """Human text: ``path:line address kind`` per finding (`` xN`` when N of a kind), totals."""
    lines = [
        f"{f['path']}:{f['line']} {f['address']} {f['kind']}"
        + (f" x{f['count']}" if f["count"] > 1 else "")
        for f in report["findings"]
    ]
    lines.extend(f"{u['path']}: unreadable: {u['reason']}" for u in report["unreadable"])
    total = sum(report["kinds"].values())
    kinds = ", ".join(f"{kind} {n}" for kind, n in report["kinds"].items())
    verdict = f"{total} secrets ({kinds})" if total else "no secrets"
    lines.append(
        f"{verdict} in {report['entries']} entries of {report['sessions']} sessions "
        f"({len(report['unreadable'])} unreadable) under "
        f"{' and '.join(report['sessionsRoots'])}"
    )
    return "\n".join(lines)
