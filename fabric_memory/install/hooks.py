"""What Claude Code and Codex share in shape, edited over plain JSON values and tomlkit's
tables alike: the SessionStart(compact) hook in a hooks table (``hooks.SessionStart`` is a
list of matcher groups, each with a list of handlers: one function adds it, one removes
it) and the MCP server's entry (``server_action``)."""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, MutableSequence
from dataclasses import dataclass
from typing import Any

from ..errors import UsageError
from .command import HOOK_TIMEOUT_SECONDS, is_hook_command
from .report import Action

EVENT = "SessionStart"
MATCHER = "compact"
"""SessionStart's ``source`` after the host's own compaction."""


def handler(command: str) -> dict[str, Any]:
    return {"type": "command", "command": command, "timeout": HOOK_TIMEOUT_SECONDS}


@dataclass(frozen=True, slots=True)
class Placed:
    action: Action
    group: int
    """Index of the matcher group holding the hook (Codex's trust key names it)."""
    handler: int
    removed_groups: tuple[int, ...] = ()
    """Groups that an extra copy of the hook left empty and that were removed."""


def add_hook(settings: MutableMapping[str, Any], command: str, where: str) -> Placed:
    """Make ``settings`` hold exactly one SessionStart(compact) hook running ``command``:
    add it, or bring an earlier install's (another path, another timeout) up to date."""
    hooks = _table(settings, "hooks", where, create=True)
    if EVENT not in hooks:
        hooks[EVENT] = [{"matcher": MATCHER, "hooks": [handler(command)]}]
        return Placed("added", 0, 0)
    groups = _groups(hooks, where)
    found = _ours(groups)
    if not found:
        groups.append({"matcher": MATCHER, "hooks": [handler(command)]})
        return Placed("added", len(groups) - 1, 0)
    (group, index), extra = found[0], found[1:]
    removed = _remove(groups, extra)
    current = groups[group]["hooks"][index]
    wanted = handler(command)
    if all(current.get(key) == value for key, value in wanted.items()):
        return Placed("updated" if removed or extra else "unchanged", group, index, removed)
    for key, value in wanted.items():
        current[key] = value
    return Placed("updated", group, index, removed)


def remove_hook(settings: MutableMapping[str, Any], where: str) -> Placed:
    """Remove every SessionStart hook of ours, then the groups, the event list and the
    ``hooks`` table it leaves empty."""
    if "hooks" not in settings:
        return Placed("absent", -1, -1)
    hooks = _table(settings, "hooks", where, create=False)
    if EVENT not in hooks:
        return Placed("absent", -1, -1)
    groups = _groups(hooks, where)
    found = _ours(groups)
    if not found:
        return Placed("absent", -1, -1)
    removed = _remove(groups, found)
    if not groups:
        del hooks[EVENT]
    if not hooks:
        del settings["hooks"]
    return Placed("removed", found[0][0], found[0][1], removed)


def server_action(servers: MutableMapping[str, Any], name: str,
                  wanted: Mapping[str, Any]) -> Action:
    """Make ``servers[name]`` run ``wanted``'s command with arguments starting with
    ``serve``: an entry that already does is left as it is (the user's ``env`` and extra
    arguments such as ``--sessions`` kept); one of an older install gets the new command,
    keeping the rest."""
    current = servers.get(name)
    if not isinstance(current, MutableMapping):
        servers[name] = dict(wanted)
        return "added" if current is None else "updated"
    args = current.get("args")
    if current.get("command") == wanted["command"] and isinstance(args, list) and args[:1] == [
            "serve"]:
        return "unchanged"
    current["command"] = wanted["command"]
    if not (isinstance(args, list) and args[:1] == ["serve"]):
        current["args"] = list(wanted["args"])
    return "updated"


def holds_hook(settings: Mapping[str, Any]) -> bool:
    """Whether ``settings`` holds a SessionStart hook of ours."""
    hooks = settings.get("hooks")
    groups = hooks.get(EVENT) if isinstance(hooks, Mapping) else None
    return isinstance(groups, MutableSequence) and bool(_ours(groups))


def _table(settings: MutableMapping[str, Any], key: str, where: str, *,
           create: bool) -> MutableMapping[str, Any]:
    if key not in settings and create:
        settings[key] = {}
    value = settings[key]
    if not isinstance(value, MutableMapping):
        raise UsageError(f"{where}: $.{key} is not an object; fix it, then rerun")
    return value


def _groups(hooks: MutableMapping[str, Any], where: str) -> MutableSequence[Any]:
    groups = hooks[EVENT]
    if not isinstance(groups, MutableSequence):
        raise UsageError(f"{where}: $.hooks.{EVENT} is not a list; fix it, then rerun")
    return groups


def _ours(groups: MutableSequence[Any]) -> list[tuple[int, int]]:
    return [
        (number, index)
        for number, group in enumerate(groups) if isinstance(group, MutableMapping)
        and isinstance(group.get("hooks"), MutableSequence)
        for index, entry in enumerate(group["hooks"])
        if isinstance(entry, MutableMapping) and entry.get("type") == "command"
        and is_hook_command(entry.get("command"))
    ]


def _remove(groups: MutableSequence[Any], found: list[tuple[int, int]]) -> tuple[int, ...]:
    """Remove the handlers ``found`` (last first, so indices hold) and the groups they
    leave empty; the indices of those groups, descending."""
    emptied = []
    for number, index in sorted(found, reverse=True):
        del groups[number]["hooks"][index]
        if not groups[number]["hooks"]:
            del groups[number]
            emptied.append(number)
    return tuple(emptied)
