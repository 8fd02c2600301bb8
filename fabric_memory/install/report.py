"""What an install changed, file by file, as JSON and as the lines a person reads."""

from __future__ import annotations

from typing import Literal, TypedDict

Action = Literal["added", "updated", "unchanged", "removed", "absent"]


class Change(TypedDict):
    file: str
    item: str
    """What was installed there: ``MCP server fabric-memory``, ``SessionStart(compact) hook``."""
    action: Action
    detail: str
    """The command, key or hash the item holds."""


class HostReport(TypedDict):
    host: str
    executable: str
    changes: list[Change]
    removedFiles: list[str]
    """Files the uninstall emptied and deleted (they held nothing else)."""
    notes: list[str]


def note_new_sessions(report: HostReport, host: str) -> None:
    """A host reads these files when a session starts: say so when they changed."""
    if any(change["action"] in ("added", "updated", "removed") for change in report["changes"]):
        report["notes"].append(f"{host} reads these when a session starts: start a new "
                               "session (or restart it) for the change to take effect")


_VERB = {
    "added": "added {item} to {file}: {detail}",
    "updated": "updated {item} in {file}: {detail}",
    "unchanged": "already in {file}: {item} (nothing written)",
    "removed": "removed {item} from {file}",
    "absent": "not in {file}: {item} (nothing to remove)",
}


def render_host_report(report: HostReport) -> str:
    lines = [_VERB[change["action"]].format(**change) for change in report["changes"]]
    lines.extend(f"deleted {path} (it held nothing else)" for path in report["removedFiles"])
    lines.extend(report["notes"])
    return "\n".join(lines)
