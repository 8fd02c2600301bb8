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

import os
from pathlib import Path
from typing import Any, Literal, TypedDict

from ..errors import UsageError
from ..install.files import edit_json, make_folder
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
    make_folder(path.parent, "Pi's agent folder")
    report["settingsRemoved"] = edit_json(
        path, "Pi's settings", "another writer (Pi?)",
        lambda settings: _edit(settings, path, package, uninstall, report),
        remove_empty=uninstall)
    return report


def _edit(settings: dict[str, Any], path: Path, package: Path, uninstall: bool,
          report: InstallReport) -> bool:
    """Add or remove the package in ``settings``; whether anything changed."""
    listed = settings.get("packages", [])
    if not isinstance(listed, list):
        raise UsageError(f"{path}: $.packages is not a list; fix it, then rerun")
    ours = [entry for entry in listed if _names(entry, path.parent, package)]
    if not uninstall:
        if ours:
            return False
        settings["packages"] = [*listed, str(package)]
        report["action"] = "added"
        return True
    if not ours:
        report["action"] = "absent"
        return False
    kept = [entry for entry in listed if not _names(entry, path.parent, package)]
    if kept:
        settings["packages"] = kept
    else:
        del settings["packages"]
    report["action"] = "removed"
    return True


def render_install(report: InstallReport) -> str:
    where, package = report["settings"], report["package"]
    return {
        "added": f"added {package} to packages in {where}",
        "unchanged": f"already in packages of {where}: {package} (nothing written)",
        "removed": f"removed {package} from packages in {where}"
        + (" (the file held nothing else and was deleted)" if report["settingsRemoved"] else ""),
        "absent": f"not in packages of {where}: nothing to remove",
    }[report["action"]]


def lists_extension(settings: dict[str, Any], path: Path,
                    package: Path = EXTENSION_DIR) -> bool:
    """Whether Pi's settings at ``path`` list the extension among ``packages``."""
    packages = settings.get("packages")
    return isinstance(packages, list) and any(
        _names(entry, path.parent, package) for entry in packages)


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
