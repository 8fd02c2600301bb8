"""Catui: its sessions (Pi's format) and the run traces of the workspaces they name.

Sessions: ``~/.catui/agents/default/sessions/--<cwd>--/<time>_<id>.jsonl`` (Catui's agent
folder moves with ``$CATUI_CODING_AGENT_DIR``, ``$CATUI_AGENTS_DIR`` or ``$CATUI_HOME``),
read by Pi's reader unchanged. Run traces: ``<workspace>/.catui/traces/<runId>.jsonl``
(Run Trace V1, one file per prompt), where the workspaces are the sessions' ``cwd``;
``latest.jsonl`` copies the newest run and is skipped. A trace is accepted only whole, as
Catui's own reader accepts it (:mod:`fabric_memory.sources.catui_trace`).

A trace is one more session of the ``catui`` agent: its id is the ``runId``, its header
names the Catui session it belongs to (``sessionId``), each event is one entry addressed
``<runId>:<sequence>``. Its tool calls join the conversation by ``toolCallId``: the
``tool.requested`` line is the call (its clear ``input`` as arguments, when recorded), the
``tool.completed`` line its result, whose text carries the tool, the call id, the policy's
decision, a checkpoint's resolution and the outcome, so a search for the call, its id or
its decision finds them together, and ``follow`` leads to the line.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Collection, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import orjson

from .._js import iso_time
from .pi import is_pi_session
from .reader import (
    SourceReader,
    event,
    from_environment,
    message,
    text_block,
    tool_call_block,
    tool_result,
    under,
)

if TYPE_CHECKING:  # loaded when a file is read (see fabric_memory.sources.reader)
    from ..session import Entry, Session
    from .catui_trace import RunTrace, TraceEvent

AGENT: Final = "catui"
AGENT_DIR_ENV: Final = "CATUI_CODING_AGENT_DIR"
AGENTS_DIR_ENV: Final = "CATUI_AGENTS_DIR"
HOME_ENV: Final = "CATUI_HOME"
TRACES: Final = (".catui", "traces")
LATEST: Final = "latest.jsonl"
"""Catui's copy of the newest run: never read (the run is read from its own file)."""


@from_environment(AGENT_DIR_ENV, AGENTS_DIR_ENV, HOME_ENV)
def catui_sessions_dir() -> Path:
    """Where Catui keeps sessions, as its ``resolveAgentDirContext`` finds the default
    agent: ``$CATUI_CODING_AGENT_DIR``, else ``$CATUI_AGENTS_DIR/default``, else
    ``$CATUI_HOME/agents/default``, else ``~/.catui/agents/default``; then ``sessions``."""
    agent_dir = os.environ.get(AGENT_DIR_ENV)
    if agent_dir:
        return Path(agent_dir).expanduser() / "sessions"
    agents = os.environ.get(AGENTS_DIR_ENV)
    if agents:
        return Path(agents).expanduser() / "default" / "sessions"
    home = os.environ.get(HOME_ENV)
    base = Path(home).expanduser() if home else Path.home() / ".catui"
    return base / "agents" / "default" / "sessions"


def trace_folder(workspace: str | os.PathLike[str]) -> Path:
    """Where Catui writes the run traces of a workspace."""
    return Path(workspace).joinpath(*TRACES)


# --- sessions -----------------------------------------------------------------------------


def _is_session(first: Any, path: str) -> bool:
    return is_pi_session(first, path) and under(catui_sessions_dir(), path)


def _read_session(path: str, max_line_bytes: int) -> Session:
    from ..session import read_session

    return dataclasses.replace(read_session(path, max_line_bytes=max_line_bytes), agent=AGENT)


def _session_homes(projects: Collection[str]) -> tuple[Path, ...]:
    return (catui_sessions_dir(),)


SESSIONS = SourceReader(AGENT, _is_session, _read_session, _session_homes)
"""Catui's sessions: Pi's format under Catui's folder (before Pi's reader in the registry)."""


# --- run traces ---------------------------------------------------------------------------


def _is_trace(first: Any, path: str) -> bool:
    """A Run Trace: its first line is an event envelope (whatever its version, so that a
    trace of another version is reported as Catui's reader would), or it lies in a
    workspace's trace folder (where Catui's rules judge whatever is there: an empty file,
    a first line that is not JSON)."""
    return _in_trace_folder(path) or (type(first) is dict and all(
        key in first for key in ("eventId", "runId", "sequence", "kind")))


def _in_trace_folder(path: str) -> bool:
    if TRACES[0] not in path:  # (most paths: no path object built for every file read)
        return False
    folder = Path(path).parent
    return (folder.parent.name, folder.name) == TRACES


def _is_latest(path: str) -> bool:
    return path.endswith(LATEST) and Path(path).name == LATEST and _in_trace_folder(path)


def _read_trace(path: str, max_line_bytes: int) -> Session:
    """A trace as a session (the line limit is Catui's own 1 MiB, whatever
    ``max_line_bytes`` says: a trace Catui would not read is not read)."""
    from ..session import Session
    from .catui_trace import read_run_trace

    trace = read_run_trace(path)
    entries = tuple(_entries(trace))
    by_id = {entry.id: entry for entry in entries}  # unique: Catui refuses repeated sequences
    session = next((e.session_id for e in trace.events if e.session_id is not None), None)
    project = _workspace(path)
    return Session(
        path=trace.path, header={"runId": trace.run_id, "sessionId": session, "cwd": project},
        title=None, session_id=trace.run_id, version=1, entries=entries,
        source_hash=trace.source_hash, size=trace.size, by_id=by_id, agent=AGENT,
        project=project)


def _workspace(path: str) -> str | None:
    """The workspace of ``<workspace>/.catui/traces/<file>``."""
    return str(Path(path).parent.parent.parent) if _in_trace_folder(path) else None


def _entries(trace: RunTrace) -> Iterator[Entry]:
    from .reader import Entries, SourceLine

    entries = Entries()
    calls: dict[str, _Call] = {}
    for item in trace.events:
        line = SourceLine(item.line, item.offset, item.length, None)
        yield entries.add(line, _raw(item, calls), address=f"{item.run_id}:{item.sequence}",
                          parent=entries.last_id, timestamp=_iso(item.timestamp))


@dataclasses.dataclass(slots=True)
class _Call:
    """What the trace has said so far about one tool call."""

    tool: str
    input: Any = None
    policy: str | None = None
    checkpoint_id: str | None = None
    checkpoint: str | None = None


def _raw(item: TraceEvent, calls: dict[str, _Call]) -> dict[str, Any]:
    """The Pi-shaped entry of one event (the builders of :mod:`fabric_memory.sources.reader`)."""
    payload = item.payload
    kind = item.kind
    call_id: Any = payload.get("toolCallId")  # every tool and policy event has one
    if kind == "tool.requested":
        tool, arguments = payload["toolName"], payload.get("input")
        calls[call_id] = _Call(tool, arguments)
        return message("assistant", [
            text_block(f"{tool} {call_id} requested (input {payload['inputFingerprint']}), "
                       f"event {item.event_id}"),
            tool_call_block(call_id, tool, arguments if type(arguments) is dict else (
                {} if arguments is None else {"input": arguments}))])
    if kind == "checkpoint.resolved":
        call = next((c for c in calls.values() if c.checkpoint_id == payload["checkpointId"]),
                    None)
    else:
        call = calls.get(call_id) if isinstance(call_id, str) else None
    if call is not None:
        _remember(call, kind, payload)
    if kind == "tool.completed":
        return tool_result(call_id, payload["toolName"], _outcome(item, call),
                           is_error=payload["outcome"] != "success")
    return event(kind, _event_text(item, call))


def _remember(call: _Call, kind: str, payload: Mapping[str, Any]) -> None:
    """What a policy or checkpoint event adds to its call's result."""
    if kind == "policy.decided":
        call.policy = f"policy {payload['policyId']}: {payload['decision']}"
    elif kind == "checkpoint.created":
        call.checkpoint_id = payload["checkpointId"]
        call.checkpoint = f"checkpoint {payload['checkpointId']}: unresolved"
    elif kind == "checkpoint.resolved":
        call.checkpoint = f"checkpoint {payload['checkpointId']}: {payload['resolution']}"


def _outcome(item: TraceEvent, call: _Call | None) -> str:
    """A tool call's result as memory keeps it: the call, the decision, the outcome."""
    payload = item.payload
    lines = [f"{payload['toolName']} {payload['toolCallId']}: {payload['outcome']}"]
    if call is not None:
        lines.extend(part for part in (call.policy, call.checkpoint) if part)
        if call.input is not None:
            lines.append(f"input: {orjson.dumps(call.input).decode()}")
    lines.append(f"output {payload['outputFingerprint']}")
    lines.append(f"event {item.event_id}")
    return "\n".join(lines)


def _event_text(item: TraceEvent, call: _Call | None) -> str:
    """The event's payload on one line (after the tool's name, where the call is known; a
    run's first event names the run and the Catui session it belongs to), then the event's
    own id and its turn's. The event's kind is the entry's ``customType``, searchable
    beside it."""
    fields = [f"{key} {value}" for key, value in item.payload.items()
              if isinstance(value, str | int | float) and not isinstance(value, bool)]
    if item.kind == "run.started":
        fields[:0] = [f"run {item.run_id}"] + (
            [f"session {item.session_id}"] if item.session_id is not None else [])
    fields.append(f"event {item.event_id}")
    if item.turn_id is not None:
        fields.append(f"turn {item.turn_id}")
    subject = f"{call.tool}: " if call is not None else ""
    return subject + ", ".join(fields)


def _iso(milliseconds: float) -> str | None:
    try:
        return iso_time(datetime.fromtimestamp(milliseconds / 1000, UTC))
    except (OverflowError, OSError, ValueError):
        return None


def _trace_homes(projects: Collection[str]) -> tuple[Path, ...]:
    """The trace folder of each project, unless ``.catui`` or ``traces`` is a symlink: Catui
    refuses symlinks below the workspace, and a link must not lead the index out of it.
    None without Catui's sessions folder: the projects (the index's catalog) are then not
    read, which every recall with the default folders would otherwise pay."""
    if not catui_sessions_dir().is_dir():
        return ()
    folders = (trace_folder(project) for project in projects)
    return tuple(folder for folder in folders
                 if not (folder.is_symlink() or folder.parent.is_symlink()))


TRACES_READER = SourceReader(AGENT, _is_trace, _read_trace, _trace_homes, _is_latest)
"""Catui's run traces, found in the workspaces the indexed sessions name."""
