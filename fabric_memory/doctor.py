"""``fabric-memory doctor``: is everything that should work working, and if not, the exact
command that fixes it.

Three parts: the hosts found on this machine (:mod:`fabric_memory.install.checks`, one row
per host), the memory index (it opens under this schema, ``verify``, the writer lock and
whether its holder lives, how far behind the sessions it is) and the hooks' log (the last
failures, with their reasons). A problem is ``broken`` (exit status 1) or a ``warning``;
each broken one names the command that fixes it, run as printed.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TypedDict

from .errors import FabricMemoryError
from .install.checks import Finding, State, check_hosts
from .install.command import NAME, executable

LOG_LINES = 3
"""The last failures of each hook log shown."""
STALE_SECONDS = 300
"""An unindexed change older than this means no live index is keeping up."""


class DoctorReport(TypedDict):
    healthy: bool
    """No check is broken (warnings allowed)."""
    broken: int
    warnings: int
    findings: list[Finding]


def doctor(*, index: str | os.PathLike[str] | None = None,
           sessions: str | os.PathLike[str] | None = None) -> DoctorReport:
    """Every check (see the module docstring)."""
    findings = [*check_hosts(), *check_index(index, sessions), *check_logs()]
    broken = sum(f["state"] == "broken" for f in findings)
    return {"healthy": broken == 0, "broken": broken,
            "warnings": sum(f["state"] == "warning" for f in findings), "findings": findings}


def _program() -> str:
    try:
        return str(executable())
    except FabricMemoryError:
        return NAME


def _finding(check: str, state: State, detail: str, fix: list[str] | None = None,
             area: str = "index") -> Finding:
    return {"area": area, "check": check, "state": state, "detail": detail,
            "fix": shlex.join(fix) if fix is not None else None}


def check_index(index: str | os.PathLike[str] | None,
                sessions: str | os.PathLike[str] | None) -> list[Finding]:
    from .memory.catalog import stats, verify
    from .memory.locations import index_root

    where = [*(["--index", os.fspath(index)] if index is not None else []),
             *(["--sessions", os.fspath(sessions)] if sessions is not None else [])]
    program = _program()
    root = index_root(index)
    found = list(_locks(root))
    try:
        counts = stats(index=index)
    except FabricMemoryError as exc:
        first = "no memory index yet" in exc.message
        found.insert(0, _finding("schema", "broken", exc.message,
                                 [program, "reindex", *([] if first else ["--full"]), *where]))
        return found
    found.insert(0, _finding("schema", "ok", f"{counts['index']}: schema v"
                             f"{counts['schemaVersion']}, {counts['sessions']} sessions, "
                             f"{counts['documents']} documents"))
    checked = verify(index=index)
    if checked["indexProblems"]:
        shown = "; ".join(checked["indexProblems"][:3])
        more = len(checked["indexProblems"]) - 3
        found.append(_finding("verify", "broken", shown + (f" (and {more} more)" if more > 0
                                                            else ""),
                              [program, "reindex", "--full", *where]))
    else:
        found.append(_finding("verify", "ok", f"{checked['sampledDocuments']} stored documents "
                              "read back, every session's documents counted"))
    found.append(_staleness(checked, sessions, index, [program, "reindex", *where]))
    return found


def _staleness(checked: object, sessions: str | os.PathLike[str] | None,
               index: str | os.PathLike[str] | None, fix: list[str]) -> Finding:
    """How far the index is behind the session files: changed, gone and new files, and
    how long ago the oldest of those changes was made."""
    from .memory.catalog import VerifyReport
    from .memory.ignore import head_folder, ignored
    from .memory.locations import index_root, sessions_roots
    from .memory.tombstones import load_tombstones
    from .session import iter_session_files
    from .sources import skipped

    report: VerifyReport = checked  # type: ignore[assignment]
    known = {item["path"] for item in report["sessions"]}
    behind = [item["path"] for item in report["sessions"] if item["state"] != "ok"]
    forgotten = load_tombstones(index_root(index))
    try:
        roots = sessions_roots(sessions)
    except FabricMemoryError:
        roots = ()
    new = [str(path) for root in roots if root.is_dir() for path in iter_session_files(root)
           if str(path) not in known and not skipped(str(path))
           and forgotten.of_path(str(path)) is None and ignored(head_folder(str(path))) is None]
    waiting = behind + new
    if not waiting:
        return _finding("freshness", "ok", f"every session file is indexed as it is now "
                        f"({len(known)} checked)")
    ages = [time.time() - os.stat(path).st_mtime for path in waiting if os.path.exists(path)]
    oldest = max(ages, default=0.0)
    detail = (f"{len(behind)} indexed sessions changed or gone and {len(new)} new, not indexed "
              f"yet; the oldest change is {_age(oldest)} old")
    if oldest > STALE_SECONDS:
        detail += (" (no live index is keeping up: run `fabric-memory serve` or "
                   "`fabric-memory reindex --watch`, or reindex now)")
    return _finding("freshness", "warning", detail, fix)


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _locks(root: Path) -> Iterator[Finding]:
    """Each writer lock of the index (a sharded index has its build's and its delta's):
    free, held by a writer at work, or held by a process that inherited it from a writer
    that is gone — which blocks every writer until that process ends."""
    from .memory.index import LOCK_NAME
    from .memory.sharded import DELTA

    for path in (root / LOCK_NAME, root / DELTA / LOCK_NAME):
        if path.is_file():
            yield _lock(path)


def _lock(path: Path) -> Finding:
    import fcntl

    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        return _finding("writer lock", "broken", f"{path}: cannot open ({exc.strerror})")
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            pass
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
            return _finding("writer lock", "ok", f"{path}: free")
        written = os.pread(fd, 32, 0).decode(errors="replace").strip()
    finally:
        os.close(fd)
    writer = int(written) if written.isdigit() else None
    holders = [pid for pid in _holders(path) if pid != os.getpid()]
    if writer is not None and _alive(writer) and (not holders or writer in holders):
        return _finding("writer lock", "ok", f"{path}: held by pid {writer} "
                        f"({_command_of(writer)}), a writer at work")
    if not holders:
        return _finding("writer lock", "broken", f"{path}: held, by a process this user "
                        "cannot see; stop the process that holds it", None)
    shown = ", ".join(f"{pid} ({_command_of(pid)})" for pid in holders)
    return _finding("writer lock", "broken", f"{path}: held by pid {shown}, which inherited it "
                    f"from the writer pid {written or '?'}, gone: no reindex, live index or "
                    "forget can write until it ends", ["kill", *map(str, holders)])


def _holders(path: Path) -> list[int]:
    """The processes with ``path`` open (``/proc``; none seen without it)."""
    target = os.path.realpath(path)
    found = []
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                    found.append(pid)
                    break
        except OSError:
            continue
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _command_of(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    words = [word.decode(errors="replace") for word in raw.split(b"\0") if word]
    return " ".join(words)[:80] or "?"


def check_logs() -> list[Finding]:
    """The last failures the hooks logged (each hook fails open and says why only there)."""
    from .handoff import log_path

    path = log_path()
    try:
        with open(path, "rb") as stream:
            start = max(0, os.fstat(stream.fileno()).st_size - 16384)
            stream.seek(start)
            lines = stream.read().decode(errors="replace").splitlines()
    except OSError:
        return []
    lines = lines[1:] if start else lines  # (a cut first line)
    last = [line for line in lines if line.strip()][-LOG_LINES:]
    return [_finding("handoff hook", "warning", f"{path}: {line}", area="logs") for line in last]


def render_doctor(report: DoctorReport) -> str:
    marks = {"ok": "ok", "broken": "BROKEN", "warning": "warn", "absent": "-"}
    lines = []
    for finding in report["findings"]:
        lines.append(f"{finding['area']:<8} {marks[finding['state']]:<6} {finding['check']}: "
                     f"{finding['detail']}")
        if finding["fix"] is not None:
            lines.append(f"{'':<15} fix: {finding['fix']}")
    if report["healthy"]:
        tail = f"; {report['warnings']} warnings" if report["warnings"] else ""
        lines.append(f"healthy: nothing is broken{tail}")
    else:
        lines.append(f"{report['broken']} broken, {report['warnings']} warnings: run each fix "
                     "as printed, then fabric-memory doctor again")
    return "\n".join(lines)
