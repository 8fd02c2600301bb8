"""Make Pi load the extension: the extension directory is a local Pi package, listed in
``packages`` of Pi's settings, exactly as ``pi install PATH`` (``-l``: the project's) does
(Pi 1.6.0's pi-coding-agent/docs/packages.md and .../settings.md). Installing twice
changes nothing; uninstalling removes that entry, and the ``packages`` list or the
settings file when it leaves them empty.

Pi's agent directory is ``$PI_CODING_AGENT_DIR``, else ``~/.pi/agent``
(pi-coding-agent/docs/configuration.md); ``local`` uses ``.pi/`` of the current
directory, which Pi reads once the project is trusted.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, TypedDict

from ..errors import UsageError
from ..sources.pi import pi_agent_dir
from . import EXTENSION_DIR

Action = Literal["added", "unchanged", "removed", "absent"]


class InstallReport(TypedDict):
    settings: str
    package: str
    action: Action
    settingsRemoved: bool


def settings_file(agent: str | os.PathLike[str] | None = None, *, local: bool = False) -> Path:
    """The settings file ``install`` edits: the agent directory's, or the project's."""
    if local:
        if agent is not None:
            raise UsageError("--local and --agent-dir name different settings files; give one")
        return Path.cwd() / ".pi" / "settings.json"
    return pi_agent_dir(agent) / "settings.json"


def install(
    agent: str | os.PathLike[str] | None = None, *, local: bool = False, uninstall: bool = False,
    package: Path = EXTENSION_DIR,
) -> InstallReport:
    """Add (or with ``uninstall`` remove) the extension package in Pi's settings, holding
    Pi's own settings lock from reading the file to writing it back."""
    path = settings_file(agent, local=local).absolute()
    report: InstallReport = {"settings": str(path), "package": str(package), "action": "unchanged",
                             "settingsRemoved": False}
    if uninstall and not path.parent.is_dir():
        report["action"] = "absent"
        return report
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{path.parent}: cannot create Pi's agent folder "
                         f"({exc.strerror or exc})") from None
    with _locked(path):
        _edit(path, package, uninstall, report)
    return report


def _edit(path: Path, package: Path, uninstall: bool, report: InstallReport) -> None:
    settings = _read(path)
    listed = settings.get("packages", [])
    if not isinstance(listed, list):
        raise UsageError(f"{path}: $.packages is not a list; fix it, then rerun")
    ours = [entry for entry in listed if _names(entry, path.parent, package)]
    if not uninstall:
        if not ours:
            settings["packages"] = [*listed, str(package)]
            _write(path, settings)
            report["action"] = "added"
        return
    if not ours:
        report["action"] = "absent"
        return
    kept = [entry for entry in listed if not _names(entry, path.parent, package)]
    if kept:
        settings["packages"] = kept
    else:
        del settings["packages"]
    report["action"] = "removed"
    if settings or path.is_symlink():  # a link (dotfiles) stays, leading to "{}"
        _write(path, settings)
    else:
        path.unlink()
        report["settingsRemoved"] = True


LOCK_WAIT_SECONDS = 10.0
"""Longest ``install`` waits for another writer of the settings file."""
LOCK_STALE_SECONDS = 10.0
"""A lock untouched this long was left by a writer that died (proper-lockfile's default)."""


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Pi's own lock on its settings file: proper-lockfile's ``<file>.lock`` folder, made
    by ``mkdir`` (atomic) beside the file as named (Pi locks with ``realpath: false``), and
    taken over once stale. Pi and other installs wait for each other; no update is lost."""
    lock = path.with_name(path.name + ".lock")
    deadline = time.monotonic() + LOCK_WAIT_SECONDS
    while True:
        try:
            os.mkdir(lock)
            break
        except FileExistsError:
            try:
                stale = time.time() - lock.stat().st_mtime > LOCK_STALE_SECONDS
            except FileNotFoundError:  # released meanwhile
                continue
            if stale:
                with contextlib.suppress(OSError):
                    os.rmdir(lock)
                continue
            if time.monotonic() >= deadline:
                raise UsageError(f"{lock}: another writer (Pi?) holds the settings lock after "
                                 f"{LOCK_WAIT_SECONDS:g}s; rerun when it is done") from None
            time.sleep(0.02)
        except OSError as exc:
            raise UsageError(f"{lock}: cannot take Pi's settings lock "
                             f"({exc.strerror or exc})") from None
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(lock)


def render_install(report: InstallReport) -> str:
    where, package = report["settings"], report["package"]
    return {
        "added": f"added {package} to packages in {where}",
        "unchanged": f"already in packages of {where}: {package} (nothing written)",
        "removed": f"removed {package} from packages in {where}"
        + (" (the file held nothing else and was deleted)" if report["settingsRemoved"] else ""),
        "absent": f"not in packages of {where}: nothing to remove",
    }[report["action"]]


def _names(entry: Any, base: Path, package: Path) -> bool:
    """Whether a ``packages`` entry (a source string or ``{"source": ...}``) is ``package``;
    relative sources resolve from the settings file's directory, as Pi resolves them."""
    source = entry.get("source") if isinstance(entry, dict) else entry
    if not isinstance(source, str):
        return False
    try:
        return (base / Path(source).expanduser()).resolve() == package.resolve()
    except (OSError, RuntimeError):
        return False


def _read(path: Path) -> dict[str, Any]:
    """The settings as JSON Pi can read and this module can write back unchanged; anything
    else is refused with ``path:line`` and left as it is."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise UsageError(f"{path}: cannot read Pi's settings ({exc.strerror or exc})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _left(path, data.count(b"\n", 0, exc.start) + 1, "not valid UTF-8") from None
    try:
        value = json.loads(text, parse_constant=_not_json, parse_float=_finite)
    except _NotFinite as exc:
        raise _left(path, _line_of_number(text, exc.text),
                    f"the number {exc.text} does not fit a 64-bit float (written back it would "
                    "be Infinity or NaN, which is not JSON)") from None
    except ValueError as exc:
        where = exc.lineno if isinstance(exc, json.JSONDecodeError) else None
        raise _left(path, where, "not valid JSON") from None
    lone = _lone_surrogate_line(text)
    if lone is not None:
        raise _left(path, lone, "a \\u escape names a lone surrogate, which is not text")
    if not isinstance(value, dict):
        raise _left(path, None, "$ is not a JSON object")
    return value


def _left(path: Path, line: int | None, reason: str) -> UsageError:
    where = f"{path}:{line}" if line is not None else str(path)
    return UsageError(f"{where}: {reason}, so it was left as it is; fix it, then rerun")


class _NotFinite(ValueError):
    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


def _not_json(text: str) -> float:
    """``NaN``, ``Infinity``, ``-Infinity``: Python's json reads them, JSON has none."""
    raise _NotFinite(text)


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise _NotFinite(text)
    return number


def _line_of_number(text: str, number: str) -> int | None:
    found = re.search(rf"(?<![\w.\"]){re.escape(number)}(?![\w.])", text)
    return text.count("\n", 0, found.start()) + 1 if found else None


_SURROGATE_ESCAPE = re.compile(r"(\\+)u([dD][89abAB][0-9a-fA-F]{2}|[dD][c-fC-F][0-9a-fA-F]{2})")


def _lone_surrogate_line(text: str) -> int | None:
    """The line of the first ``\\uD800``-``\\uDFFF`` escape that is not half of a pair."""
    pending: re.Match[str] | None = None  # a high half waiting for its low half
    for found in _SURROGATE_ESCAPE.finditer(text):
        if len(found.group(1)) % 2 == 0:  # an escaped backslash, then plain "u..."
            continue
        high = found.group(2)[1] in "89abAB"
        if pending is not None and not high and found.start() == pending.end():
            pending = None
        elif pending is not None or not high:
            return text.count("\n", 0, (pending or found).start()) + 1
        else:
            pending = found
    return None if pending is None else text.count("\n", 0, pending.start()) + 1


def _write(path: Path, settings: dict[str, Any]) -> None:
    """Replace the file in one rename, with the mode it had (Pi's own two-space layout).
    A symlinked settings file (dotfiles) stays a link: the file it leads to is replaced.
    A read-only file is refused."""
    target = Path(os.path.realpath(path))
    try:
        mode = target.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o644
    else:
        if not mode & 0o222 or not os.access(target, os.W_OK):
            raise UsageError(f"{path}: read-only (mode {mode:04o}), so it was left as it is; "
                             "make it writable, then rerun")
    text = json.dumps(settings, indent=2, ensure_ascii=False, allow_nan=False)
    try:
        fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=".settings.", suffix=".tmp")
    except OSError as exc:
        raise UsageError(f"{path}: cannot write Pi's settings in {target.parent} "
                         f"({exc.strerror or exc})") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        os.unlink(temporary)
        raise
