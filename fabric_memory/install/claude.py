"""``fabric-memory install claude``: Claude Code starts ``fabric-memory serve`` as a
user-scope MCP server and runs ``fabric-memory handoff`` after each of its compactions
(a SessionStart hook with matcher ``compact``) and on each prompt (a UserPromptSubmit
hook: the prompt's context).

Where Claude Code 2.1 keeps them (docs: code.claude.com/docs/en/settings, .../mcp,
.../hooks; checked with the real ``claude mcp add --scope user``): user-scope MCP
servers under ``mcpServers`` of ``~/.claude.json`` (``$CLAUDE_CONFIG_DIR/.claude.json``
when that is set), hooks in ``~/.claude/settings.json`` (``$CLAUDE_CONFIG_DIR/settings.json``).
``--project DIR``: the project's ``.mcp.json`` and ``.claude/settings.json``.
"""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path
from typing import Any

from .command import executable, hook_command
from .hooks import EVENTS, HookEvent, add_hook, remove_hook
from .mcp_json import SERVER, SERVER_ITEM, Edit, edit_file, server_change
from .report import Action, HostReport, note_new_sessions

WHAT = "Claude Code's settings"


def claude_files(project: str | os.PathLike[str] | None = None) -> tuple[Path, Path]:
    """(the file holding the MCP server, the settings file holding the hook)."""
    if project is not None:
        root = Path(project).absolute()
        return root / ".mcp.json", root / ".claude" / "settings.json"
    configured = os.environ.get("CLAUDE_CONFIG_DIR")
    if configured:
        folder = Path(configured).expanduser().absolute()
        return folder / ".claude.json", folder / "settings.json"
    home = Path.home()
    return home / ".claude.json", home / ".claude" / "settings.json"


def server_entry(program: Path) -> dict[str, Any]:
    """What ``claude mcp add --scope user fabric-memory -- PROGRAM serve`` writes."""
    return {"type": "stdio", "command": str(program), "args": ["serve"], "env": {}}


def install_claude(project: str | os.PathLike[str] | None = None, *,
                   uninstall: bool = False, program: Path | None = None) -> HostReport:
    """Register (``uninstall``: remove) the MCP server and the hooks (SessionStart(compact),
    UserPromptSubmit)."""
    program = program or executable()
    servers, settings = claude_files(project)
    report: HostReport = {"host": "claude", "executable": str(program), "changes": [],
                          "removedFiles": [], "notes": []}
    _edit(servers, report,
          lambda data: server_change(data, server_entry(program), servers, uninstall),
          SERVER_ITEM, uninstall)
    for event in EVENTS:
        _edit(settings, report, partial(_hook, command=hook_command(program), where=settings,
                                        uninstall=uninstall, event=event),
              event.item, uninstall)
    if project is not None and not uninstall:
        report["notes"].append(
            f"Claude Code asks once before it starts a project's MCP server: approve "
            f"{SERVER} when it asks, at its next start in {servers.parent}")
    note_new_sessions(report, "Claude Code")
    return report


def _hook(data: dict[str, Any], command: str, where: Path, uninstall: bool,
          event: HookEvent) -> tuple[Action, str]:
    placed = (remove_hook(data, str(where), event) if uninstall
              else add_hook(data, command, str(where), event))
    return placed.action, command


def _edit(path: Path, report: HostReport, change: Edit, item: str, uninstall: bool) -> None:
    edit_file(path, report, change, item, uninstall, WHAT, "another writer (Claude Code?)")
