"""The MCP server in a host's JSON file of servers, and ``fabric-memory install
copilot|cursor|gemini|qwen|cline|roo-code|kilo-code|opencode|continue``, which register only
that: none of these hosts runs a hook after its compaction that could hand a packet to the
model (Gemini CLI's ``PreCompress`` is advisory, its ``SessionStart`` fires on startup,
resume and clear only).

Copilot CLI 1.0 (checked with its own ``copilot mcp add NAME -- COMMAND ARGS``): a local
server ``{"type": "local", "command", "args", "tools": ["*"]}`` in
``$COPILOT_HOME/mcp-config.json`` (``~/.copilot``). Cursor (docs: cursor.com/docs/context/mcp):
``{"command", "args", "env"}`` in ``~/.cursor/mcp.json``, read by the editor and its
``cursor-agent`` CLI alike. Gemini CLI and Qwen Code (what their ``mcp add --scope user``
writes): ``{"command", "args"}`` under ``mcpServers`` of ``~/.gemini/settings.json``
(``$GEMINI_CLI_HOME`` moves ``~``) and ``~/.qwen/settings.json``. Cline, Roo Code and Kilo
Code: ``{"command", "args", "env", "disabled", "autoApprove"}`` under ``mcpServers`` of the
extension's ``settings/cline_mcp_settings.json`` (Roo Code, Kilo Code: ``mcp_settings.json``)
in the first VS Code family editor whose storage holds the extension. OpenCode:
``{"type": "local", "command": [PROGRAM, "serve"], "enabled": true}`` under ``mcp`` of
``$XDG_CONFIG_HOME/opencode/opencode.json``. Continue: a file of its own,
``~/.continue/mcpServers/fabric-memory.json`` (Continue reads Claude-style ``mcpServers``
JSON files in that folder), removed again by ``--uninstall``.
"""

from __future__ import annotations

import os
import re
import shlex
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
                  uninstall: bool, key: str = "mcpServers",
                  action: Callable[[dict[str, Any], str, dict[str, Any]], Action] = server_action,
                  ) -> tuple[Action, str]:
    """Add (``uninstall``: remove) our entry among the servers under ``key`` of ``data``."""
    servers = data.get(key)
    if servers is not None and not isinstance(servers, dict):
        raise UsageError(f"{where}: $.{key} is not an object; fix it, then rerun")
    servers = servers or {}
    command = wanted["command"]
    detail = " ".join([*command] if isinstance(command, list) else [command, *wanted["args"]])
    if uninstall:
        if SERVER not in servers:
            return "absent", detail
        del servers[SERVER]
        if not servers:
            del data[key]
        return "removed", detail
    data[key] = servers
    return action(servers, SERVER, wanted), detail


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


def _same(entry: Any) -> Any:
    return entry


@dataclass(frozen=True, slots=True)
class JsonHost:
    """A host whose MCP servers live under one key of one JSON file."""

    name: str
    """What ``install NAME`` takes."""
    title: str
    file: Callable[[], Path]
    entry: Callable[[Path], dict[str, Any]]
    """Our server's entry, as the host's own command would write it."""
    key: str = "mcpServers"
    action: Callable[[dict[str, Any], str, dict[str, Any]], Action] = server_action
    """How our entry is placed (added, updated keeping the user's additions, or left)."""
    plain: Callable[[Any], Any] = _same
    """Our entry as ``{command, args, env}`` (what ``doctor`` checks)."""
    own_cli: str | None = None
    """The host's own CLI, whose ``mcp add`` / ``mcp remove --scope user`` a user runs
    instead for a settings file with comments (which the host accepts and this installer
    does not rewrite)."""


def copilot_file() -> Path:
    configured = os.environ.get("COPILOT_HOME")
    home = Path(configured).expanduser() if configured else Path.home() / ".copilot"
    return home.absolute() / "mcp-config.json"


def cursor_file() -> Path:
    return Path.home() / ".cursor" / "mcp.json"


def gemini_file() -> Path:
    """Gemini CLI's user settings: ``$GEMINI_CLI_HOME/.gemini/settings.json`` (``~``)."""
    configured = os.environ.get("GEMINI_CLI_HOME")
    home = Path(configured).expanduser() if configured else Path.home()
    return home.absolute() / ".gemini" / "settings.json"


def qwen_file() -> Path:
    """Qwen Code's user settings: ``~/.qwen/settings.json``."""
    return Path.home().absolute() / ".qwen" / "settings.json"


def _extension_file(agent: str, name: str) -> Callable[[], Path]:
    """The MCP settings of a VS Code extension (Cline and its forks): in the first editor
    whose storage holds the extension, else VS Code's."""
    def file() -> Path:
        from ..sources.cline import EXTENSIONS, user_data_dirs

        folders = [data / "globalStorage" / EXTENSIONS[agent] for data in user_data_dirs()]
        found = next((folder for folder in folders if folder.is_dir()), folders[0])
        return found.absolute() / "settings" / name
    return file


def opencode_file() -> Path:
    """OpenCode's global config: ``$XDG_CONFIG_HOME/opencode/opencode.json``
    (``~/.config``)."""
    configured = os.environ.get("XDG_CONFIG_HOME")
    base = Path(configured).expanduser() if configured else Path.home() / ".config"
    return base.absolute() / "opencode" / "opencode.json"


def continue_file() -> Path:
    """A file of Continue's own in its MCP servers folder, ``~/.continue/mcpServers``
    (Continue reads Claude-style ``mcpServers`` JSON files there)."""
    return Path.home().absolute() / ".continue" / "mcpServers" / f"{SERVER}.json"


def _opencode_action(servers: dict[str, Any], name: str, wanted: dict[str, Any]) -> Action:
    """OpenCode's local server: ``command`` is the whole argv; an entry that already runs
    our program's ``serve`` is left as it is (its extra arguments and ``environment``)."""
    current = servers.get(name)
    if not isinstance(current, dict):
        servers[name] = dict(wanted)
        return "added" if current is None else "updated"
    command = current.get("command")
    if isinstance(command, list) and command[:2] == wanted["command"]:
        return "unchanged"
    keep = command[2:] if isinstance(command, list) and command[1:2] == ["serve"] else []
    current.update(type="local", command=[*wanted["command"], *keep])
    return "updated"


def _opencode_plain(entry: Any) -> Any:
    """OpenCode's entry as ``{command, args, env}``."""
    if not isinstance(entry, dict) or not isinstance(entry.get("command"), list) or not entry[
            "command"]:
        return entry
    first, *rest = entry["command"]
    return {"command": first, "args": rest, "env": entry.get("environment")}


def _stdio(program: Path) -> dict[str, Any]:
    """``{command, args}``: what ``gemini mcp add`` and ``qwen mcp add`` write."""
    return {"command": str(program), "args": ["serve"]}


def _extension(program: Path) -> dict[str, Any]:
    """What Cline's MCP panel writes for a local server."""
    return {"command": str(program), "args": ["serve"], "env": {}, "disabled": False,
            "autoApprove": []}


HOSTS: dict[str, JsonHost] = {
    "copilot": JsonHost(
        "copilot", "Copilot CLI", copilot_file,
        lambda program: {"type": "local", "command": str(program), "args": ["serve"],
                         "tools": ["*"]}),
    "cursor": JsonHost(
        "cursor", "Cursor", cursor_file,
        lambda program: {"command": str(program), "args": ["serve"], "env": {}}),
    "gemini": JsonHost("gemini", "Gemini CLI", gemini_file, _stdio, own_cli="gemini"),
    "qwen": JsonHost("qwen", "Qwen Code", qwen_file, _stdio, own_cli="qwen"),
    "cline": JsonHost("cline", "Cline", _extension_file("cline", "cline_mcp_settings.json"),
                      _extension),
    "roo-code": JsonHost("roo-code", "Roo Code",
                         _extension_file("roo-code", "mcp_settings.json"), _extension),
    "kilo-code": JsonHost("kilo-code", "Kilo Code",
                          _extension_file("kilo-code", "mcp_settings.json"), _extension),
    "opencode": JsonHost(
        "opencode", "OpenCode", opencode_file,
        lambda program: {"type": "local", "command": [str(program), "serve"], "enabled": True},
        key="mcp", action=_opencode_action, plain=_opencode_plain),
    "continue": JsonHost("continue", "Continue", continue_file, _stdio),
}


def install_json_host(name: str, *, uninstall: bool = False,
                      program: Path | None = None) -> HostReport:
    """Register (``uninstall``: remove) the MCP server in host ``name``'s file."""
    host = HOSTS[name]
    program = program or executable()
    path = host.file()
    report: HostReport = {"host": name, "executable": str(program), "changes": [],
                          "removedFiles": [], "notes": []}
    try:
        edit_file(path, report,
                  lambda data: server_change(data, host.entry(program), path, uninstall,
                                             host.key, host.action),
                  SERVER_ITEM, uninstall, f"{host.title}'s MCP servers", f"another writer "
                  f"({host.title}?)")
    except UsageError:
        if host.own_cli is None or not _has_comments(path):
            raise
        own = (f"{host.own_cli} mcp remove --scope user {SERVER}" if uninstall else
               f"{host.own_cli} mcp add --scope user {SERVER} {shlex.quote(str(program))} serve")
        raise UsageError(f"{path}: holds comments, which {host.title} accepts and this "
                         f"installer does not rewrite, so it was left as it is; run {host.title}'s "
                         f"own `{own}`") from None
    note_new_sessions(report, host.title)
    return report


_COMMENT = re.compile(r'"(?:[^"\\]|\\.)*"|(//|/\*)')
"""A JSON string (skipped) or the start of a comment outside one."""


def _has_comments(path: Path) -> bool:
    """Whether the file holds a ``//`` or ``/*`` comment outside its strings."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return any(match.group(1) for match in _COMMENT.finditer(text))
