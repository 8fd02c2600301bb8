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

import json
import os
import tempfile
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
    """Add (or with ``uninstall`` remove) the extension package in Pi's settings."""
    path = settings_file(agent, local=local).absolute()
    settings = _read(path)
    listed = settings.get("packages", [])
    if not isinstance(listed, list):
        raise UsageError(f"{path}: $.packages is not a list; fix it, then rerun")
    ours = [entry for entry in listed if _names(entry, path.parent, package)]
    report: InstallReport = {"settings": str(path), "package": str(package), "action": "unchanged",
                             "settingsRemoved": False}
    if not uninstall:
        if not ours:
            settings["packages"] = [*listed, str(package)]
            _write(path, settings)
            report["action"] = "added"
        return report
    if not ours:
        report["action"] = "absent"
        return report
    kept = [entry for entry in listed if not _names(entry, path.parent, package)]
    if kept:
        settings["packages"] = kept
    else:
        del settings["packages"]
    report["action"] = "removed"
    if settings:
        _write(path, settings)
    else:
        path.unlink()
        report["settingsRemoved"] = True
    return report


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
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise UsageError(f"{path}: cannot read Pi's settings ({exc.strerror})") from None
    try:
        value = json.loads(text)
    except ValueError as exc:
        where = f":{exc.lineno}" if isinstance(exc, json.JSONDecodeError) else ""
        raise UsageError(
            f"{path}{where}: not valid JSON, so it was left as it is; fix it, then rerun"
        ) from None
    if not isinstance(value, dict):
        raise UsageError(f"{path}: $ is not a JSON object, so it was left as it is; fix it, "
                         "then rerun")
    return value


def _write(path: Path, settings: dict[str, Any]) -> None:
    """Replace the file in one rename, with the mode it had (Pi's own two-space layout)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o644
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".settings.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(json.dumps(settings, indent=2, ensure_ascii=False))
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
