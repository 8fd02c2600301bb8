"""What ``fabric-memory doctor`` checks of each host: one row per host in :func:`host_checks`.

A row names the host as ``install NAME`` does, says whether the host is on this machine,
and checks what ``install NAME`` puts there: the MCP server's entry (its command exists
and answers ``initialize``), the hooks (registered, their program exists), Codex's trust
of each hook (the hash Codex computes now against the one recorded), Pi's extension in
its packages. Every problem carries the command that fixes it — the installer run again
by this program's absolute path, which rewrites exactly what it owns. A host whose files
hold nothing of ours is reported as not installed, which is no problem.

Adding a host: its installer module, and one :class:`HostCheck` row here (a host whose
servers live under ``mcpServers`` of a JSON file gets its row from
:data:`~.mcp_json.HOSTS` without one).
"""

from __future__ import annotations

import os
import select
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypedDict

import orjson

from ..errors import FabricMemoryError
from .command import NAME, executable
from .hooks import EVENTS, HookEvent, our_hook
from .mcp_json import HOSTS as JSON_HOSTS
from .mcp_json import SERVER

State = Literal["ok", "broken", "warning", "absent"]
INITIALIZE_SECONDS = 20.0
"""Longest the server's command may take to answer ``initialize``."""


class Finding(TypedDict):
    area: str
    """The host (``claude``, ``codex``, …), ``index`` or ``logs``."""
    check: str
    state: State
    detail: str
    fix: str | None
    """The exact command that fixes it (None when there is nothing to run)."""


@dataclass(frozen=True, slots=True)
class HostCheck:
    name: str
    """What ``install NAME`` takes."""
    title: str
    found: Callable[[], bool]
    """Whether the host is on this machine (its home folder is there)."""
    check: Callable[[Callable[[str, str, State, str], Finding]], list[Finding]]
    """The host's findings, each made by the function given (area and fix filled in)."""


def install_fix(host: str) -> str:
    """``install HOST`` by the absolute path of this program (a host's PATH may lack it)."""
    try:
        program = str(executable())
    except FabricMemoryError:
        program = NAME
    return shlex.join([program, "install", host])


def check_hosts(rows: tuple[HostCheck, ...] | None = None) -> list[Finding]:
    """Every row's findings, for the hosts found on this machine."""
    findings: list[Finding] = []
    for row in rows if rows is not None else host_checks():
        if not row.found():
            continue
        fix = install_fix(row.name)

        def make(check: str, detail: str, state: State, fixed: str, row: HostCheck = row,
                 fix: str = fix) -> Finding:
            return {"area": row.name, "check": check, "state": state, "detail": detail,
                    "fix": (fixed or fix) if state == "broken" else None}

        try:
            found = row.check(make)
        except FabricMemoryError as exc:
            found = [make("settings", exc.message, "broken", "")]
        if all(f["state"] == "absent" for f in found):
            found = [make("install", f"{row.title}: nothing of fabric-memory here; "
                          f"`{fix}` makes it use fabric-memory", "absent", "")]
        findings.extend(found)
    return findings


# --- shared checks ---------------------------------------------------------------------


Make = Callable[[str, str, State, str], Finding]
_ANSWERED: dict[tuple[str, ...], str | None] = {}


def server_findings(make: Make, entry: Any, where: Path) -> list[Finding]:
    """The MCP server's entry (``{"command", "args", "env"}``): there, its command there,
    and the command answering ``initialize``."""
    item = f"MCP server {SERVER}"
    if not isinstance(entry, Mapping):
        return [make(item, f"{where}: not registered", "absent", "")]
    command, args = entry.get("command"), entry.get("args") or []
    if not isinstance(command, str) or not isinstance(args, list):
        return [make(item, f"{where}: the entry has no command", "broken", "")]
    program = shutil.which(command) if os.sep not in command else command
    if program is None or not os.access(program, os.X_OK) or not os.path.isfile(program):
        return [make(item, f"{where}: its command {command} does not exist (moved or "
                     "removed)", "broken", "")]
    given = entry.get("env")
    env: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
    reason = answers_initialize([program, *map(str, args)], env)
    if reason is not None:
        return [make(item, f"{where}: `{shlex.join([command, *map(str, args)])}` does not "
                     f"answer initialize ({reason})", "broken", "")]
    return [make(item, f"{where}: {command} {' '.join(map(str, args))} answers initialize",
                 "ok", "")]


def answers_initialize(argv: list[str], env: Mapping[str, Any]) -> str | None:
    """None when ``argv`` (an MCP server over stdio) answers ``initialize`` in time, else
    why not. The live index is left off (``--no-watch``): a check writes nothing."""
    key = tuple(argv)
    if key not in _ANSWERED:
        _ANSWERED[key] = _initialize([*argv, "--no-watch"] if "serve" in argv else argv, env)
    return _ANSWERED[key]


def _initialize(argv: list[str], env: Mapping[str, Any]) -> str | None:
    request = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "fabric-memory-doctor", "version": "1"}}}
    try:
        process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env={**os.environ, **{str(k): str(v) for k, v in env.items()}},
            start_new_session=True)
    except OSError as exc:
        return f"cannot start it: {exc.strerror or exc}"
    assert process.stdin is not None and process.stdout is not None
    try:
        process.stdin.write(orjson.dumps(request) + b"\n")
        process.stdin.flush()
        line = _line(process.stdout.fileno(), time.monotonic() + INITIALIZE_SECONDS)
    except OSError as exc:
        return f"it exited at once ({exc.strerror or exc})"
    finally:
        _stop(process)
    if line is None:
        return f"no answer within {INITIALIZE_SECONDS:g}s"
    try:
        answer = orjson.loads(line)
        name = answer["result"]["serverInfo"]["name"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return f"an answer that is not an initialize result: {line[:80]!r}"
    return None if isinstance(name, str) else "no serverInfo in its answer"


def _line(fd: int, deadline: float) -> bytes | None:
    read = b""
    while b"\n" not in read:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, 65536)
        if not chunk:
            return read or None
        read += chunk
    return read.split(b"\n", 1)[0]


def _stop(process: subprocess.Popen[bytes]) -> None:
    for number in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, number)
        except ProcessLookupError:
            break
        try:
            process.wait(timeout=5)
            break
        except subprocess.TimeoutExpired:
            continue


def hook_findings(make: Make, settings: Mapping[str, Any], where: Path,
                  events: tuple[HookEvent, ...] = EVENTS) -> list[Finding]:
    """Each of our hooks in ``settings``: there, and its program there."""
    found = []
    for event in events:
        place = our_hook(settings, event)
        if place is None:
            found.append(make(event.item, f"{where}: not registered", "absent", ""))
            continue
        handler = settings["hooks"][event.name][place[0]]["hooks"][place[1]]
        program = shlex.split(handler["command"])[0]
        if not (os.path.isfile(program) and os.access(program, os.X_OK)):
            found.append(make(event.item, f"{where}: its program {program} does not exist "
                              "(moved or removed)", "broken", ""))
        else:
            found.append(make(event.item, f"{where}: runs {handler['command']}", "ok", ""))
    return found


def partial(make: Make, found: list[Finding]) -> list[Finding]:
    """A host where some of what ``install`` adds is there and some is not: the missing
    parts are problems (removed by hand, or by a host's update), not a choice."""
    if all(f["state"] == "absent" for f in found):
        return found
    return [make(f["check"], f["detail"], "broken", "") if f["state"] == "absent" else f
            for f in found]


# --- the rows --------------------------------------------------------------------------


def _claude(make: Make) -> list[Finding]:
    from .claude import claude_files
    from .files import read_json_object

    servers, settings = claude_files()
    data, _ = read_json_object(servers, "Claude Code's settings")
    entry = (data.get("mcpServers") or {}).get(SERVER) if isinstance(
        data.get("mcpServers"), Mapping) else None
    hooks, _ = read_json_object(settings, "Claude Code's settings")
    return partial(make, server_findings(make, entry, servers)
                  + hook_findings(make, hooks, settings))


def _codex(make: Make) -> list[Finding]:
    import tomlkit
    from tomlkit.exceptions import ParseError

    from .codex import HOOKS_JSON, codex_home, trust_hash, trust_key
    from .files import read_json_object, read_text

    path = codex_home() / "config.toml"
    try:
        config = tomlkit.parse(read_text(path, "Codex's config") or "").unwrap()
    except ParseError as exc:
        return [make("config", f"{path}:{exc.line}: not valid TOML; fix it by hand", "broken",
                     "")]
    servers = config.get("mcp_servers")
    found = server_findings(make, servers.get(SERVER) if isinstance(servers, Mapping)
                            else None, path)
    listed, _ = read_json_object(path.parent / HOOKS_JSON, "Codex's hooks")
    states = (config.get("hooks") or {}).get("state") if isinstance(
        config.get("hooks"), Mapping) else None
    for event in EVENTS:
        holder, file = (listed, path.parent / HOOKS_JSON) if our_hook(listed, event) \
            else (config, path)
        found.extend(hook_findings(make, holder, file, (event,)))
        place = our_hook(holder, event)
        if place is None:
            continue
        group = holder["hooks"][event.name][place[0]]
        digest = trust_hash(group.get("matcher"), group["hooks"][place[1]], event)
        key = trust_key(file, place[0], place[1], event)
        state = states.get(key) if isinstance(states, Mapping) else None
        item = f"{event.item} trust"
        if not isinstance(state, Mapping) or state.get("trusted_hash") != digest:
            recorded = state.get("trusted_hash") if isinstance(state, Mapping) else None
            found.append(make(item, f"{path}: Codex skips the hook without a word: its trust "
                              f"{'is missing' if recorded is None else f'is {recorded}'}, "
                              f"the hook hashes to {digest} now", "broken", ""))
        elif state.get("enabled", True) is False:
            found.append(make(item, f"{path}: the hook is disabled in Codex", "broken", ""))
        else:
            found.append(make(item, f"{path}: trusted ({digest})", "ok", ""))
    return partial(make, found)


def _pi(make: Make) -> list[Finding]:
    from ..pi.install import lists_extension, settings_file
    from .files import read_json_object

    path = settings_file().absolute()
    settings, _ = read_json_object(path, "Pi's settings")
    if lists_extension(settings, path):
        return [make("extension", f"{path}: listed in packages", "ok", "")]
    return [make("extension", f"{path}: not listed in packages", "absent", "")]


def _goose(make: Make) -> list[Finding]:
    from .files import read_text
    from .goose import NAME as EXTENSION
    from .goose import goose_config

    path = goose_config()
    try:
        from ruamel.yaml import YAML
        from ruamel.yaml.error import YAMLError
    except ImportError:
        return [make("config", f"{path}: reading it needs ruamel.yaml (pip install -e "
                     "'.[goose]' in the fabric-memory clone)", "warning", "")]
    try:
        config = YAML(typ="safe").load(read_text(path, "Goose's config") or "") or {}
    except YAMLError:
        return [make("config", f"{path}: not valid YAML; fix it by hand", "broken", "")]
    extensions = config.get("extensions") if isinstance(config, Mapping) else None
    entry = extensions.get(EXTENSION) if isinstance(extensions, Mapping) else None
    if isinstance(entry, Mapping) and entry.get("enabled") is False:
        return [make(f"extension {EXTENSION}", f"{path}: disabled in Goose", "broken", "")]
    plain = {"command": entry.get("cmd"), "args": entry.get("args"),
             "env": entry.get("envs")} if isinstance(entry, Mapping) else None
    return server_findings(make, plain, path)


def _json_host(name: str) -> Callable[[Make], list[Finding]]:
    def check(make: Make) -> list[Finding]:
        from .files import read_json_object

        host = JSON_HOSTS[name]
        path = host.file()
        data, _ = read_json_object(path, f"{host.title}'s MCP servers")
        servers = data.get(host.key)
        return server_findings(make, host.plain(servers.get(SERVER))
                               if isinstance(servers, Mapping) else None, path)

    return check


def _folder_of(file: Callable[[], Path]) -> Callable[[], Path]:
    return lambda: file().parent


def _home(path: Callable[[], Path]) -> Callable[[], bool]:
    return lambda: path().exists()


def host_checks() -> tuple[HostCheck, ...]:
    """The rows, in the order doctor prints them."""
    from ..sources.pi import pi_agent_dir
    from .claude import claude_files
    from .codex import codex_home
    from .goose import goose_config

    rows = [
        HostCheck("claude", "Claude Code", lambda: claude_files()[0].exists()
                  or claude_files()[1].parent.exists(), _claude),
        HostCheck("codex", "Codex", _home(codex_home), _codex),
        HostCheck("pi", "Pi", _home(pi_agent_dir), _pi),
        HostCheck("goose", "Goose", _home(_folder_of(goose_config)), _goose),
    ]
    rows.extend(HostCheck(name, host.title, _home(_folder_of(host.file)), _json_host(name))
                for name, host in JSON_HOSTS.items())
    return tuple(rows)
