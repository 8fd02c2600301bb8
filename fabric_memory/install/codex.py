"""``fabric-memory install codex``: Codex starts ``fabric-memory serve`` as an MCP server
and runs ``fabric-memory handoff`` after each of its compactions and on each prompt, all in
``$CODEX_HOME/config.toml`` (``~/.codex/config.toml``)::

    [mcp_servers.fabric-memory]
    command = "/abs/.venv/bin/fabric-memory"
    args = ["serve"]

    [[hooks.SessionStart]]
    matcher = "compact"

    [[hooks.SessionStart.hooks]]
    type = "command"
    command = "/abs/.venv/bin/fabric-memory handoff"
    timeout = 10

    [hooks.state."<realpath of CODEX_HOME>/config.toml:session_start:0:0"]
    trusted_hash = "sha256:..."

    [[hooks.UserPromptSubmit]]

    [[hooks.UserPromptSubmit.hooks]]
    type = "command"
    command = "/abs/.venv/bin/fabric-memory handoff"
    timeout = 10

    [hooks.state."<realpath of CODEX_HOME>/config.toml:user_prompt_submit:0:0"]
    trusted_hash = "sha256:..."

Codex runs a user's hook only once it is trusted, and skips an untrusted one without a
word. The trust is the hash Codex computes of the hook (``currentHash`` in its app-server's
``hooks/list``): SHA-256 of the compact, key-sorted JSON of the hook's normalized identity
(codex-rs/hooks/src/engine/discovery.rs ``command_hook_hash`` and
codex-rs/config/src/fingerprint.rs ``version_for_toml``, Codex 0.169), recorded under the
hook's positional key. The file is edited as TOML that keeps every comment and key.

Of Codex's hook events, UserPromptSubmit is the one whose output reaches the model after a
compaction: its ``hookSpecificOutput.additionalContext`` (the output schemas in the
0.169 binary: PreCompact and PostCompact take only ``continue``, ``stopReason``,
``suppressOutput`` and ``systemMessage``, which is shown to the user, not the model).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.exceptions import ParseError
from tomlkit.toml_document import TOMLDocument

from ..errors import UsageError
from .command import executable, hook_command
from .files import (
    edit_json,
    left_alone,
    locked,
    make_folder,
    read_json_object,
    read_text,
    remove_or_empty,
    write_through,
)
from .hooks import (
    COMPACT,
    EVENTS,
    HookEvent,
    Placed,
    add_hook,
    holds_hook,
    remove_hook,
    server_action,
)
from .report import Action, Change, HostReport, note_new_sessions

SERVER = "fabric-memory"
WHAT = "Codex's config"
DEFAULT_TIMEOUT_SECONDS = 600
"""What Codex gives a hook with no ``timeout``."""


SERVER_ITEM = f"MCP server {SERVER}"


def trust_item(event: HookEvent) -> str:
    return f"{event.item} trust"


ITEMS = (SERVER_ITEM, *(item for event in EVENTS for item in (event.item, trust_item(event))))
"""The order the report lists them in."""
HOOKS_JSON = "hooks.json"
"""Codex's other place for a layer's hooks, beside config.toml."""

Config = MutableMapping[str, Any]


def codex_home() -> Path:
    configured = os.environ.get("CODEX_HOME")
    return (Path(configured).expanduser() if configured else Path.home() / ".codex").absolute()


def trust_key(config: Path, group: int, handler: int, event: HookEvent = COMPACT) -> str:
    """Codex's key for a hook of ``config``: the file under the real CODEX_HOME (Codex
    resolves the folder, not a symlinked config.toml), the event, the positions."""
    folder = Path(os.path.realpath(config.parent))
    return f"{folder / config.name}:{event.key}:{group}:{handler}"


def trust_hash(matcher: str | None, handler: Mapping[str, Any],
               event: HookEvent = COMPACT) -> str:
    """The ``currentHash`` Codex reports for this hook: only what Codex reads of it, with
    its defaults filled and absent values left out (it hashes through TOML, which has no
    null)."""
    normalized: dict[str, Any] = {
        "type": "command", "command": handler.get("command"),
        "timeout": max(1, int(handler.get("timeout", DEFAULT_TIMEOUT_SECONDS))),
        "async": bool(handler.get("async", False)),
    }
    if handler.get("statusMessage") is not None:
        normalized["statusMessage"] = handler["statusMessage"]
    identity: dict[str, Any] = {"event_name": event.key, "hooks": [normalized]}
    if matcher is not None:
        identity["matcher"] = matcher
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def install_codex(*, uninstall: bool = False, program: Path | None = None) -> HostReport:
    """Register (``uninstall``: remove) the MCP server and the trusted hooks
    (SessionStart(compact), UserPromptSubmit) in Codex's config.toml."""
    program = program or executable()
    path = codex_home() / "config.toml"
    report: HostReport = {"host": "codex", "executable": str(program), "changes": [],
                          "removedFiles": [], "notes": []}
    if uninstall and not path.exists():
        report["changes"] = [Change(file=str(path), item=item, action="absent", detail="")
                             for item in ITEMS]
        return report
    make_folder(path.parent, "Codex's home folder")
    with locked(path, "another writer (Codex?)"):
        _edit(path, program, uninstall, report)
    note_new_sessions(report, "Codex")
    return report


@dataclass(frozen=True, slots=True)
class _Hook:
    """Our hook in one file (config.toml or hooks.json), after the edit: where it is for
    its trust, or where it was."""

    event: HookEvent
    placed: Placed
    file: Path
    matcher: str | None = None
    handler: Mapping[str, Any] | None = None

    @property
    def key(self) -> str:
        return trust_key(self.file, self.placed.group, self.placed.handler, self.event)


def _hook_in(settings: Config, file: Path, command: str | None, event: HookEvent) -> _Hook:
    """Add the ``event`` hook running ``command`` to ``settings`` (``None``: remove it)."""
    if command is None:
        return _Hook(event, remove_hook(settings, str(file), event), file)
    placed = add_hook(settings, command, str(file), event)
    group = settings["hooks"][event.name][placed.group]
    return _Hook(event, placed, file, group.get("matcher"), group["hooks"][placed.handler])


def _edit(path: Path, program: Path, uninstall: bool, report: HostReport) -> None:
    text = read_text(path, WHAT) or ""
    doc = _parse(path, text)
    expected = doc.unwrap()
    command = None if uninstall else hook_command(program)
    # The hook goes where the user keeps this layer's hooks: hooks.json when it holds
    # some (or ours), else config.toml (Codex warns when both hold hooks).
    hooks_json = path.parent / HOOKS_JSON
    listed, _ = read_json_object(hooks_json, "Codex's hooks")
    in_toml = any(holds_hook(expected, event) for event in EVENTS)
    in_json = any(holds_hook(listed, event) for event in EVENTS)
    json_hooks: list[_Hook] = []
    if in_json or (not uninstall and not in_toml and _has_hooks(listed)):
        json_hooks = _edit_hooks_json(hooks_json, command, report)
    # The edit on plain values says what config.toml must mean afterwards; the same edit
    # on tomlkit's document is one way to write it (see _layout_kept for the other).
    toml_in = uninstall or not json_hooks
    changes, toml_hooks = _apply(expected, program, path, command, toml_in, json_hooks)
    _apply(doc, program, path, command, toml_in, json_hooks)
    report["changes"] = sorted(changes + report["changes"], key=lambda change: ITEMS.index(
        change["item"]))
    mine = [change["action"] for change in changes if change["file"] == str(path)]
    if all(action in ("unchanged", "absent") for action in mine):
        return
    result = _layout_kept(text, doc, expected, path, toml_hooks, json_hooks, changes)
    if result.strip() or not uninstall:
        write_through(path, result, WHAT)
    elif remove_or_empty(path, "", WHAT):
        report["removedFiles"].append(str(path))


def _has_hooks(listed: Config) -> bool:
    hooks = listed.get("hooks")
    return isinstance(hooks, Mapping) and any(
        isinstance(groups, list) and groups for groups in hooks.values())


def _edit_hooks_json(path: Path, command: str | None, report: HostReport) -> list[_Hook]:
    found: list[_Hook] = []

    def edit(data: dict[str, Any]) -> bool:
        found[:] = [_hook_in(data, path, command, event) for event in EVENTS]
        return any(hook.placed.action not in ("unchanged", "absent") for hook in found)

    if edit_json(path, "Codex's hooks", "another writer (Codex?)", edit,
                 remove_empty=command is None):
        report["removedFiles"].append(str(path))
    report["changes"].extend(Change(file=str(path), item=hook.event.item,
                                    action=hook.placed.action, detail=command or "")
                             for hook in found)
    return found


def _apply(config: Config, program: Path, path: Path, command: str | None, toml_in: bool,
           json_hooks: list[_Hook]) -> tuple[list[Change], list[_Hook]]:
    """The edit of config.toml: the server, the hooks when they live here, their trust."""
    where = str(path)
    server, detail = _server(config, program, where, command is None)
    changes = [Change(file=where, item=SERVER_ITEM, action=server, detail=detail)]
    toml_hooks = [_hook_in(config, path, command, event) for event in EVENTS] if toml_in else []
    for event in EVENTS:
        toml_hook = next((hook for hook in toml_hooks if hook.event == event), None)
        json_hook = next((hook for hook in json_hooks if hook.event == event), None)
        if toml_hook is not None and (command is not None or toml_hook.placed.action != "absent"
                                      or json_hook is None):
            changes.append(Change(file=where, item=event.item, action=toml_hook.placed.action,
                                  detail=command or ""))
        if command is None:
            trust, digest = _untrust(config, [h for h in (toml_hook, json_hook)
                                              if h is not None])
        else:
            placed = toml_hook or json_hook
            assert placed is not None
            trust, digest = _trust(config, path, placed)
        changes.append(Change(file=where, item=trust_item(event), action=trust, detail=digest))
    return changes, toml_hooks


def _parse(path: Path, text: str) -> TOMLDocument:
    try:
        return tomlkit.parse(text)
    except ParseError as exc:
        reason = re.sub(r" at line \d+ col \d+$", "", str(exc))
        raise left_alone(path, exc.line, f"not valid TOML ({reason})") from None


def _server(doc: Config, program: Path, where: str,
            uninstall: bool) -> tuple[Action, str]:
    detail = f"{program} serve"
    servers = doc.get("mcp_servers")
    if servers is not None and not isinstance(servers, MutableMapping):
        raise UsageError(f"{where}: mcp_servers is not a table; fix it, then rerun")
    current = None if servers is None else servers.get(SERVER)
    if uninstall:
        if current is None:
            return "absent", detail
        assert servers is not None
        del servers[SERVER]
        if not servers:
            del doc["mcp_servers"]
        return "removed", detail
    wanted = {"command": str(program), "args": ["serve"]}
    if servers is None:
        doc["mcp_servers"] = {SERVER: wanted}
        return "added", detail
    return server_action(servers, SERVER, wanted), detail


def _states(doc: Config, create: bool) -> MutableMapping[str, Any] | None:
    if "hooks" not in doc and create:
        doc["hooks"] = {}
    hooks = doc.get("hooks")
    if not isinstance(hooks, MutableMapping):
        return None
    if "state" not in hooks:
        if not create:
            return None
        hooks["state"] = {}
    states = hooks["state"]
    return states if isinstance(states, MutableMapping) else None


def _trust(doc: Config, path: Path, hook: _Hook) -> tuple[Action, str]:
    assert hook.handler is not None
    digest = trust_hash(hook.matcher, hook.handler, hook.event)
    states = _states(doc, create=True)
    if states is None:
        raise UsageError(f"{path}: hooks.state is not a table; fix it, then rerun")
    _shift(states, hook, hook.placed.removed_groups)
    current = states.get(hook.key)
    if isinstance(current, MutableMapping):
        if current.get("trusted_hash") == digest and current.get("enabled", True) is not False:
            return "unchanged", digest
        current["trusted_hash"] = digest
        current.pop("enabled", None)
        return "updated", digest
    states[hook.key] = {"trusted_hash": digest}
    return "added", digest


def _untrust(doc: Config, hooks: list[_Hook]) -> tuple[Action, str]:
    states = _states(doc, create=False)
    removed = [hook for hook in hooks if hook.placed.action == "removed"]
    if not removed or states is None:
        return "absent", ""
    action: Action = "absent"
    for hook in removed:
        if hook.key in states:
            del states[hook.key]
            action = "removed"
        _shift(states, hook, hook.placed.removed_groups)
    if not states:
        del doc["hooks"]["state"]
        if not doc["hooks"]:
            del doc["hooks"]
    return action, ", ".join(hook.key for hook in removed)


def _shift(states: MutableMapping[str, Any], hook: _Hook, removed: tuple[int, ...]) -> None:
    """Keep the trust of the user's own hooks of this file and event whose position moved
    because a group of ours before them was removed (Codex keys trust by position)."""
    if not removed:
        return
    prefix = trust_key(hook.file, 0, 0, hook.event).rsplit(":", 2)[0] + ":"
    moves = {}
    for key in list(states):
        if not key.startswith(prefix):
            continue
        group, _, handler = key[len(prefix):].partition(":")
        if not group.isdigit():
            continue
        below = sum(1 for number in removed if number < int(group))
        if below:
            moves[key] = f"{prefix}{int(group) - below}:{handler}"
    for old in sorted(moves, key=lambda k: int(k[len(prefix):].partition(":")[0])):
        states[moves[old]] = states.pop(old)


# --- layout ----------------------------------------------------------------------------


def _layout_kept(text: str, doc: TOMLDocument, expected: Config, path: Path,
                 toml_hooks: list[_Hook], json_hooks: list[_Hook],
                 changes: list[Change]) -> str:
    """config.toml as text after the edit. What was added whole is appended, what was
    removed whole is cut out, so every other byte stays as it was (and an uninstall gives
    back the file as it was before the install); anything else is tomlkit's rendering of
    the edited document. Only a text that reads back as ``expected`` is written."""
    actions = {change["action"] for change in changes if change["file"] == str(path)}
    # The trust of each event's hook: the one in config.toml, else the one in hooks.json.
    trusted = {hook.event: hook.key for hook in json_hooks + toml_hooks}
    candidates = []
    if actions <= {"removed", "absent"}:
        candidates.append(_cut(text, toml_hooks, [hook.key for hook in toml_hooks + json_hooks]))
    elif actions <= {"added", "unchanged"}:
        candidates.append(_append(text, expected, toml_hooks, trusted, changes))
    candidates.append(tomlkit.dumps(doc))
    for candidate in candidates:
        try:
            if tomlkit.parse(candidate).unwrap() == expected:
                return candidate
        except ParseError:
            continue
    raise UsageError(f"{path}: cannot write this edit without changing other parts of the "
                     "file, so it was left as it is; see docs/codex.md#by-hand for the lines "
                     "to add or remove yourself")


def _table_text(header: str, values: Mapping[str, Any]) -> str:
    body = "".join(f"{key} = {tomlkit.item(value).as_string()}\n" for key, value in values.items())
    return f"{header}\n{body}"


def _quoted(key: str) -> str:
    return tomlkit.key(key).as_string()


def _append(text: str, doc: Config, hooks: list[_Hook], trusted: Mapping[HookEvent, str],
            changes: list[Change]) -> str:
    added = {change["item"] for change in changes if change["action"] == "added"}
    blocks = []
    if SERVER_ITEM in added:
        blocks.append(_table_text(f"[mcp_servers.{SERVER}]", doc["mcp_servers"][SERVER]))
    for hook in hooks:
        if hook.placed.action == "added":
            name = hook.event.name
            group = doc["hooks"][name][hook.placed.group]
            matcher = {"matcher": group["matcher"]} if "matcher" in group else {}
            blocks.append(_table_text(f"[[hooks.{name}]]", matcher) + "\n"
                          + _table_text(f"[[hooks.{name}.hooks]]", group["hooks"][0]))
    for event, key in trusted.items():
        if trust_item(event) in added:
            blocks.append(_table_text(f"[hooks.state.{_quoted(key)}]",
                                      doc["hooks"]["state"][key]))
    if not text:
        return "\n".join(blocks)
    return text + ("" if text.endswith("\n") else "\n") + "".join("\n" + b for b in blocks)


_HEADER = re.compile(r"^\s*\[")


def _cut(text: str, hooks: list[_Hook], keys: list[str]) -> str:
    """``text`` without our whole tables (the server, the hook's group, its trust), each
    with the blank line that set it apart (one not found as we wrote it is left)."""
    lines = text.splitlines(keepends=True)
    tables: list[tuple[str, int, str | None]] = [(f"[mcp_servers.{SERVER}]", 0, None)]
    tables.extend((f"[[hooks.{hook.event.name}]]", hook.placed.group,
                   f"[[hooks.{hook.event.name}.hooks]]")
                  for hook in hooks if hook.placed.action == "removed")
    tables.extend((f"[hooks.state.{_quoted(key)}]", 0, None) for key in keys)
    spans = []
    for header, occurrence, children in tables:
        starts = [n for n, line in enumerate(lines) if line.strip() == header]
        if len(starts) <= occurrence:
            continue
        start = starts[occurrence]
        end = start + 1
        while end < len(lines) and (not _HEADER.match(lines[end])
                                    or (children and lines[end].strip() == children)):
            end += 1
        while end > start + 1 and (not lines[end - 1].strip()
                                   or lines[end - 1].lstrip().startswith("#")):
            end -= 1
        if start > 0 and not lines[start - 1].strip():
            start -= 1
        elif end < len(lines) and not lines[end].strip():
            end += 1
        spans.append((start, end))
    kept = [line for number, line in enumerate(lines)
            if not any(start <= number < end for start, end in spans)]
    return "".join(kept)
