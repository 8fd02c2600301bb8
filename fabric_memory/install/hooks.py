"""What Claude Code and Codex share in shape, edited over plain JSON values and tomlkit's
tables alike: our hooks in a hooks table (``hooks.<Event>`` is a list of matcher groups,
each with a list of handlers: one function adds one, one removes it) and the MCP server's
entry (``server_action``). Two hooks run ``fabric-memory handoff``: SessionStart with
matcher ``compact`` (the packet after the host's compaction) and UserPromptSubmit (the
prompt's context; the event takes no matcher)."""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, MutableSequence
from dataclasses import dataclass
from typing import Any

from ..errors import UsageError
from .command import HOOK_TIMEOUT_SECONDS, is_hook_command
from .report import Action


@dataclass(frozen=True, slots=True)
class HookEvent:
    """A host event our hook answers: its name, its matcher group's ``matcher`` (None: the
    group has none) and Codex's name for it in a hook's trust key and hash."""

    name: str
    matcher: str | None
    key: str

    @property
    def item(self) -> str:
        """How a report names the hook."""
        return f"{self.name}({self.matcher}) hook" if self.matcher else f"{self.name} hook"


COMPACT = HookEvent("SessionStart", "compact", "session_start")
"""SessionStart's ``source`` after the host's own compaction."""
PROMPT = HookEvent("UserPromptSubmit", None, "user_prompt_submit")
EVENTS = (COMPACT, PROMPT)


def handler(command: str) -> dict[str, Any]:
    return {"type": "command", "command": command, "timeout": HOOK_TIMEOUT_SECONDS}


def new_group(event: HookEvent, command: str) -> dict[str, Any]:
    """A new matcher group holding our hook for ``event``."""
    matcher = {} if event.matcher is None else {"matcher": event.matcher}
    return {**matcher, "hooks": [handler(command)]}


@dataclass(frozen=True, slots=True)
class Placed:
    action: Action
    group: int
    """Index of the matcher group holding the hook (Codex's trust key names it)."""
    handler: int
    removed_groups: tuple[int, ...] = ()
    """Groups that an extra copy of the hook left empty and that were removed."""


def add_hook(settings: MutableMapping[str, Any], command: str, where: str,
             event: HookEvent = COMPACT) -> Placed:
    """Make ``settings`` hold exactly one ``event`` hook running ``command``: add it, or
    bring an earlier install's (another path, another timeout) up to date."""
    hooks = _table(settings, "hooks", where, create=True)
    if event.name not in hooks:
        hooks[event.name] = [new_group(event, command)]
        return Placed("added", 0, 0)
    groups = _groups(hooks, where, event)
    found = _ours(groups)
    if not found:
        groups.append(new_group(event, command))
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


def remove_hook(settings: MutableMapping[str, Any], where: str,
                event: HookEvent = COMPACT) -> Placed:
    """Remove every ``event`` hook of ours, then the groups, the event list and the
    ``hooks`` table it leaves empty."""
    if "hooks" not in settings:
        return Placed("absent", -1, -1)
    hooks = _table(settings, "hooks", where, create=False)
    if event.name not in hooks:
        return Placed("absent", -1, -1)
    groups = _groups(hooks, where, event)
    found = _ours(groups)
    if not found:
        return Placed("absent", -1, -1)
    removed = _remove(groups, found)
    if not groups:
        del hooks[event.name]
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


def holds_hook(settings: Mapping[str, Any], event: HookEvent = COMPACT) -> bool:
    """Whether ``settings`` holds an ``event`` hook of ours."""
    hooks = settings.get("hooks")
    groups = hooks.get(event.name) if isinstance(hooks, Mapping) else None
    return isinstance(groups, MutableSequence) and bool(_ours(groups))


def our_hook(settings: Mapping[str, Any], event: HookEvent = COMPACT) -> tuple[int, int] | None:
    """Where ``settings`` holds our ``event`` hook: (its group, its handler), or None."""
    hooks = settings.get("hooks")
    groups = hooks.get(event.name) if isinstance(hooks, Mapping) else None
    found = _ours(groups) if isinstance(groups, MutableSequence) else []
    return found[0] if found else None


def _table(settings: MutableMapping[str, Any], key: str, where: str, *,
           create: bool) -> MutableMapping[str, Any]:
    if key not in settings and create:
        settings[key] = {}
    value = settings[key]
    if not isinstance(value, MutableMapping):
        raise UsageError(f"{where}: $.{key} is not an object; fix it, then rerun")
    return value


def _groups(hooks: MutableMapping[str, Any], where: str,
            event: HookEvent) -> MutableSequence[Any]:
    groups = hooks[event.name]
    if not isinstance(groups, MutableSequence):
        raise UsageError(f"{where}: $.hooks.{event.name} is not a list; fix it, then rerun")
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
