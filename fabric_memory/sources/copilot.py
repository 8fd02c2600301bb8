"""GitHub Copilot CLI: ``~/.copilot/session-state/<id>/events.jsonl``, and the older flat
``~/.copilot/session-state/<id>.jsonl`` and ``~/.copilot/history-session-state/<id>.jsonl``
(``$COPILOT_HOME`` moves ``~/.copilot``).

Every line is one event ``{type, data, id, timestamp, parentId}``: ``session.start`` (the
session's id, folder, git state), ``user.message``, ``assistant.message`` (its text, its
``reasoningText`` and the calls it makes in ``toolRequests``), ``assistant.reasoning``,
``tool.execution_start`` / ``tool.execution_complete`` (a call and its result, paired by
``toolCallId``), ``session.compaction_complete`` (Copilot's own summary), errors, warnings,
and events that hold no conversation (turn marks, permissions, hooks, usage, the system
prompt), which are not read but passed through, so the parent chain goes on across them.
An event whose ``parentId`` names an event the file does not hold (Copilot 1.0.x chains
events it never writes, its streaming deltas) hangs on the event before it in the file.
Each entry's address is its event's ``id`` (``L<line>`` for an event without one).
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import orjson

from ..errors import NotASessionError, clipped
from .codex import TOOLS as CODEX_TOOLS
from .pi import TOOLS as PI_TOOLS
from .reader import (
    Entries,
    JsonLines,
    SourceLine,
    SourceReader,
    build_session,
    compaction,
    event,
    message,
    name_ids,
    string,
    text_block,
    thinking_block,
    tool_call_block,
    tool_result,
    under,
)
from .tools import (
    Tool,
    checklist_tool,
    editor_tool,
    file_tool,
    search_tool,
    shell_tool,
)

if TYPE_CHECKING:  # loaded when a file is read (see fabric_memory.sources.reader)
    from ..session import Session

AGENT: Final = "copilot"
HOME_ENV: Final = "COPILOT_HOME"
PASSED: Final = frozenset({
    "system.message", "assistant.turn_start", "assistant.turn_end", "assistant.intent",
    "assistant.usage", "assistant.message_delta", "assistant.reasoning_delta",
    "assistant.streaming_delta", "permission.requested", "permission.completed", "hook.start",
    "hook.end", "session.usage_info", "session.usage_record", "session.idle", "session.shutdown",
    "session.compaction_start", "session.title_changed", "session.mode_changed",
    "session.context_changed", "session.workspace_file_changed", "session.truncation",
    "session.snapshot_rewind", "session.handoff", "session.plan_changed",
    "pending_messages.modified", "tool.execution_partial_result", "tool.execution_progress",
    "tool.user_requested", "user_input.requested", "user_input.completed", "elicitation.requested",
    "elicitation.completed", "external_tool.requested", "external_tool.completed",
    "command.queued", "command.completed", "exit_plan_mode.requested",
    "exit_plan_mode.completed",
})
"""Event types that hold no conversation (turn marks, streaming, permissions, hooks, usage,
the system prompt the model already has): not read, passed through in the parent chain."""
NOTICES: Final = frozenset({"session.info", "session.warning", "session.error", "abort",
                            "session.model_change", "session.task_complete", "skill.invoked",
                            "subagent.started", "subagent.completed", "subagent.failed",
                            "subagent.selected"})
"""Events kept as text entries (what happened around the conversation)."""
_EXIT_CODE: Final = re.compile(
    r"<(?:exited|shellId: [^>]* completed) with exit code (-?\d+)>\s*\Z")
"""How a shell's output ends: ``<exited with exit code N>`` (1.0.6x), ``<shellId: 0
completed with exit code N>`` (1.0.10x, which also gives ``shellExecution.exitCode``)."""


def copilot_home() -> Path:
    """``$COPILOT_HOME``, else ``~/.copilot``."""
    configured = os.environ.get(HOME_ENV)
    return Path(configured).expanduser() if configured else Path.home() / ".copilot"


def _homes(projects: Collection[str]) -> tuple[Path, ...]:
    """The session folders: ``session-state`` (both layouts) and the legacy
    ``history-session-state`` of Copilot's home; before 1.0.4 a set ``$XDG_STATE_HOME``
    moved that home to ``$XDG_STATE_HOME/.copilot``."""
    homes = [copilot_home()]
    if not os.environ.get(HOME_ENV) and (state := os.environ.get("XDG_STATE_HOME")):
        homes.append(Path(state).expanduser() / ".copilot")
    return tuple(home / folder for home in homes
                 for folder in ("session-state", "history-session-state"))


def recognises(first: Any, path: str) -> bool:
    """A Copilot CLI event log: the first line is an event ``{type: "session.start", data}``
    (or, under Copilot's folders, any ``{type: "<a>.<b>", data}`` event)."""
    if type(first) is not dict or type(first.get("data")) is not dict:
        return False
    kind = string(first.get("type"))
    if kind == "session.start":
        return True
    return kind is not None and "." in kind and any(under(home, path) for home in _homes(()))


def read(path: str, max_line_bytes: int) -> Session:
    lines = JsonLines(path, max_line_bytes)
    state = _State(Entries())
    for line in lines:
        value = line.value
        if type(value) is not dict:
            state.entries.note(line, "not a JSON object; skipped")
            continue
        _read_event(line, value, state)
    if state.events == 0:
        raise NotASessionError(path, None, "empty file: no Copilot CLI event" if not lines.size
                               else "no line is a Copilot CLI event {type, data}")
    session_id = state.session_id or _id_from_path(path)
    return build_session(lines, state.entries, agent=AGENT, session_id=session_id,
                         project=state.project,
                         header={"sessionId": session_id, "cwd": state.project})


class _State:
    """What reading one file keeps between its lines."""

    __slots__ = ("announced", "entries", "events", "links", "previous", "project", "seen",
                 "session_id", "tools")

    def __init__(self, entries: Entries) -> None:
        self.entries = entries
        self.tools: dict[str, str] = {}
        """toolCallId -> tool name."""
        self.announced: set[str] = set()
        """Calls an ``assistant.message`` already made (its ``tool.execution_start`` adds none)."""
        self.links: dict[str, str | None] = {}
        """id -> parentId of the events passed through."""
        self.seen: set[str] = set()
        """The ids of the events read so far (entries and those passed through)."""
        self.previous: str | None = None
        """The id of the last event read that has one."""
        self.session_id: str | None = None
        self.project: str | None = None
        self.events = 0


def _read_event(line: SourceLine, value: dict[str, Any], state: _State) -> None:
    given, data = value.get("type"), value.get("data")
    kind = string(given)
    if kind is None or type(data) is not dict:
        state.entries.note(line, "not a Copilot CLI event (no 'type' and 'data'); skipped")
        return
    state.events += 1
    event_id = string(value.get("id"))
    given = string(value.get("parentId"))
    if event_id is None:  # an event without an id hangs on the one before it
        parent = state.entries.last_id
    elif given is not None and given not in state.seen:
        # Copilot 1.0.x does not write every event it chains (streaming deltas, usage):
        # one whose parent the file does not hold hangs on the event before it.
        parent = _through(state.previous, state.links)
    else:
        parent = _through(given, state.links)
    if event_id is not None:
        state.seen.add(event_id)
        state.previous = event_id
    where = {"address": event_id, "parent": parent, "timestamp": string(value.get("timestamp"))}
    raw = _entry(kind, data, state, line)
    if raw is None:
        if event_id is not None:
            state.links[event_id] = parent
        return
    entry = state.entries.add(line, raw, **where)
    if kind in ("session.start", "session.resume"):
        name_ids(entry.raw, [string(data.get("sessionId"))])


def _entry(kind: str, data: dict[str, Any], state: _State,
           line: SourceLine) -> dict[str, Any] | None:
    """The Pi-shaped entry of one event; None for one passed through."""
    if kind in ("session.start", "session.resume"):
        given = data.get("context")
        context: dict[str, Any] = given if type(given) is dict else {}
        state.session_id = state.session_id or string(data.get("sessionId"))
        state.project = state.project or string(context.get("cwd"))
        words = [data.get("sessionId"), data.get("copilotVersion"),
                 *(context.get(key) for key in ("cwd", "gitRoot", "repository", "branch",
                                                "headCommit"))]
        return event(kind, " ".join(word for word in words if isinstance(word, str) and word))
    if kind == "user.message":
        return message("user", [text_block(string(data.get("content")) or "")])
    if kind == "assistant.message":
        return _assistant(data, state)
    if kind == "assistant.reasoning":
        text = string(data.get("content"))
        return message("assistant", [thinking_block(text)] if text else [])
    if kind == "tool.execution_start":
        call_id = string(data.get("toolCallId")) or ""
        name = string(data.get("toolName")) or state.tools.get(call_id) or ""
        state.tools.setdefault(call_id, name)
        if call_id in state.announced:
            return None
        state.announced.add(call_id)
        return message("assistant", [tool_call_block(call_id, name,
                                                     _arguments(data.get("arguments")))])
    if kind == "tool.execution_complete":
        return _result(data, state)
    if kind == "session.compaction_complete":
        summary = string(data.get("summaryContent"))
        if summary is not None:
            return compaction(summary)
        return event(kind, string(data.get("error")) or "compaction without a summary")
    if kind in NOTICES:
        return event(kind, _notice(data))
    if kind not in PASSED:
        state.entries.note(line, f"unknown Copilot CLI event type {clipped(kind)}; skipped")
    return None


def _assistant(data: dict[str, Any], state: _State) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = []
    if reasoning := string(data.get("reasoningText")):
        blocks.append(thinking_block(reasoning))
    if text := string(data.get("content")):
        blocks.append(text_block(text))
    requests = data.get("toolRequests")
    for request in requests if type(requests) is list else ():
        if type(request) is not dict:
            continue
        call_id = string(request.get("toolCallId")) or ""
        name = string(request.get("name")) or ""
        state.tools[call_id] = name
        state.announced.add(call_id)
        blocks.append(tool_call_block(call_id, name, _arguments(request.get("arguments"))))
    return message("assistant", blocks)


def _result(data: dict[str, Any], state: _State) -> dict[str, Any]:
    """A call's result: its text (``result.content``, else ``detailedContent``), an error's
    message, and a shell's exit code (``shellExecution.exitCode``, else what its output
    ends with)."""
    call_id = string(data.get("toolCallId")) or ""
    given = data.get("result")
    result: dict[str, Any] = given if type(given) is dict else {}
    error = data.get("error")
    parts = [string(result.get("content")) or string(result.get("detailedContent")) or ""]
    said = string(error.get("message")) if type(error) is dict else string(error)
    if said:
        parts.append(said)
    text = "\n".join(part for part in parts if part)
    shell = data.get("shellExecution")
    code = shell.get("exitCode") if type(shell) is dict else None
    if type(code) is not int:
        found = _EXIT_CODE.search(parts[0])
        code = int(found.group(1)) if found else None
    failed = data.get("success") is False or bool(code)
    name = string(data.get("toolName")) or state.tools.get(call_id)
    return tool_result(call_id, name, text, is_error=failed, exit_code=code)


def _notice(data: dict[str, Any]) -> str:
    """What a notice says: its message, summary, reason, model or agent, as given."""
    keys = ("message", "summary", "reason", "newModel", "errorType", "infoType", "warningType",
            "agentName", "agentDisplayName", "skill", "name", "error")
    return " ".join(value for key in keys if (value := string(data.get(key))))


def _through(parent: str | None, links: dict[str, str | None]) -> str | None:
    """The nearest read event up the chain from ``parent``, past those passed through."""
    seen: set[str] = set()
    while parent is not None and parent in links and parent not in seen:
        seen.add(parent)
        parent = links[parent]
    return parent


def _arguments(value: object) -> dict[str, Any]:
    """A call's arguments as an object (older versions write them as a JSON string)."""
    if isinstance(value, str):
        try:
            parsed = orjson.loads(value)
        except orjson.JSONDecodeError:
            return {"input": value}
        return parsed if type(parsed) is dict else {"input": value}
    return value if type(value) is dict else {"input": value}


def _id_from_path(path: str) -> str:
    """``<id>`` of ``<id>/events.jsonl`` or of the flat ``<id>.jsonl``."""
    file = Path(path)
    return file.parent.name if file.name == "events.jsonl" else file.stem


TOOLS: Final[Mapping[str, Tool]] = {
    "bash": PI_TOOLS["bash"],
    "powershell": shell_tool("command"),
    "view": file_tool("read", "read", ("path", "file_path")),
    "create": file_tool("write", "created", "path", (), ("file_text",)),
    "edit": PI_TOOLS["edit"],
    "str_replace_editor": editor_tool("create", "created"),
    "apply_patch": CODEX_TOOLS["apply_patch"],
    "glob": search_tool("pattern"),
    "grep": search_tool("pattern"),
    "rg": search_tool("pattern"),
    "update_todo": checklist_tool("todos"),
}
"""Copilot CLI's tools as the work trail reads them (``bash``, ``edit`` and ``apply_patch``
are read as Pi's and Codex's tools of those names are: the same arguments)."""

COPILOT = SourceReader(AGENT, recognises, read, _homes, tools=TOOLS)
