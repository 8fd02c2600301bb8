"""The MCP server in a host's JSON file of servers (``mcpServers``: Claude Code's
``~/.claude.json``, GitHub Copilot CLI's ``~/.copilot/mcp-config.json``, Cursor's
``~/.cursor/mcp.json``), and ``fabric-memory install copilot|cursor``, which register only
that (neither host runs a hook after its compaction that could hand a packet to the model).

Copilot CLI 1.0 (checked with its own ``copilot mcp add NAME -- COMMAND ARGS``): a local
server ``{"type": "local", "command", "args", "tools": ["*"]}`` in
``$COPILOT_HOME/mcp-config.json`` (``~/.copilot``). Cursor (docs: cursor.com/docs/context/mcp):
``{"command", "args", "env"}`` in ``~/.cursor/mcp.json``, read by the editor and its
``cursor-agent`` CLI alike.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UsageError
from .command import executable
from .files import edit_json
from .hooks import server_action
from .report import Action, Change, HostReport, note_new_sessions

SERVER = "fabric-memory"
SERVER_ITEM = f"MCP server {SERVER}"

Edit = Callable[[dict[str, Any]], tuple[Action, str]]


def server_change(data: dict[str, Any], wanted: dict[str, Any], where: Path,
                  uninstall: bool) -> tuple[Action, str]:
    """Add (``uninstall``: remove) our entry among ``mcpServers`` of ``data``."""
    servers = data.get("mcpServers")
    if servers is not None and not isinstance(servers, dict):
        raise UsageError(f"{where}: $.mcpServers is not an object; fix it, then rerun")
    servers = servers or {}
    detail = " ".join([wanted["command"], *wanted["args"]])
    if uninstall:
        if SERVER not in servers:
            return "absent", detail
        del servers[SERVER]
        if not servers:
            del data["mcpServers"]
        return "removed", detail
    data["mcpServers"] = servers
    return server_action(servers, SERVER, wanted), detail


def edit_file(path: Path, report: HostReport, change: Edit, item: str, uninstall: bool,
              what: str, holder: str) -> None:
    """Apply ``change`` to one JSON file and report it; write only when it changed."""
    if uninstall and not path.exists():
        report["changes"].append(Change(file=str(path), item=item, action="absent", detail=""))
        return

    def edit(data: dict[str, Any]) -> bool:
        action, detail = change(data)
        report["changes"].append(Change(file=str(path), item=item, action=action,
                                        detail=detail))
        return action not in ("unchanged", "absent")

    if edit_json(path, what, holder, edit, remove_empty=uninstall):
        report["removedFiles"].append(str(path))


@dataclass(frozen=True, slots=True)
class JsonHost:
    """A host whose MCP servers live under ``mcpServers`` of one JSON file."""

    name: str
    """What ``install NAME`` takes."""
    title: str
    file: Callable[[], Path]
    entry: Callable[[Path], dict[str, Any]]
    """Our server's entry, as the host's own command would write it."""


def copilot_file() -> Path:
    configured = os.environ.get("COPILOT_HOME")
    home = Path(configured).expanduser() if configured else Path.home() / ".copilot"
    return home.absolute() / "mcp-config.json"


def cursor_file() -> Path:
    return Path.home() / ".cursor" / "mcp.json"


HOSTS: dict[str, JsonHost] = {
    "copilot": JsonHost(
        "copilot", "Copilot CLI", copilot_file,
        lambda program: {"type": "local", "command": str(program), "args": ["serve"],
                         "tools": ["*"]}),
    "cursor": JsonHost(
        "cursor", "Cursor", cursor_file,
        lambda program: {"command": str(program), "args": ["serve"], "env": {}}),
}


def install_json_host(name: str, *, uninstall: bool = False,
                      program: Path | None = None) -> HostReport:
    """Register (``uninstall``: remove) the MCP server in host ``name``'s file."""
    host = HOSTS[name]
    program = program or executable()
    path = host.file()
    report: HostReport = {"host": name, "executable": str(program), "changes": [],
                          "removedFiles": [], "notes": []}
    edit_file(path, report,
              lambda data: server_change(data, host.entry(program), path, uninstall),
              SERVER_ITEM, uninstall, f"{host.title}'s MCP servers", f"another writer "
              f"({host.title}?)")
    note_new_sessions(report, host.title)
    return report
