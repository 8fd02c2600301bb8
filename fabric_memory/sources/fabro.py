"""Fabro: run events exported as JSONL, in folders the user names (no fixed home).

``fabro dump -o DIR RUN`` writes ``DIR/events.jsonl``, one event envelope a line with its
``seq``; ``fabro events RUN --json`` prints the same envelopes without ``seq``. An
envelope is ``{id, ts, run_id, event, session_id, parent_session_id, node_id, node_label,
stage_id, tool_call_id, properties}``. Agent events carry their body either flat in
``properties`` (``agent.tool.started {tool_name, tool_call_id, arguments}``) or nested as
the agent's own envelope (``properties.event.ToolCallStarted{…}``); exports seen in the
wild also omit ``id`` and ``run_id``.

Read: agent input and messages, tool calls with their arguments and their results (paired
by ``tool_call_id``, with ``is_error``), and every other event (stages and their outcomes,
the run's start and end, git, checkpoints, names Fabro may add later) as text. Addresses:
the event's ``id``; else ``<run_id>:<seq>`` (``seq:<seq>`` without a run id); else the
line, ``L<line>``. Entries chain in file order.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import orjson

from ..errors import NotASessionError
from .reader import (
    Entries,
    JsonLines,
    SourceReader,
    build_session,
    event,
    message,
    name_ids,
    string,
    text_block,
    tool_call_block,
    tool_result,
)

if TYPE_CHECKING:  # loaded when a file is read (see fabric_memory.sources.reader)
    from ..session import Session

AGENT: Final = "fabro"
BOOKKEEPING: Final = frozenset({"usage", "billing", "billing_by_model", "total_usd_micros",
                                "context_values", "node_visits"})
"""Properties memory leaves out: token counts, costs, snapshots of the whole context."""


def recognises(first: Any, path: str) -> bool:
    """A Fabro event export: its first line is an envelope (an ``event`` name, its ``ts``
    and ``properties``)."""
    return (type(first) is dict and isinstance(first.get("event"), str) and "ts" in first
            and "properties" in first)


def read(path: str, max_line_bytes: int) -> Session:
    lines = JsonLines(path, max_line_bytes)
    entries = Entries()
    tools: dict[str, str] = {}
    """tool_call_id -> tool name, to name a result that does not say it."""
    run_id = project = None
    named: set[str] = set()
    """Envelope ids already given to an entry: the first event under each holds it."""
    for line in lines:
        value = line.value
        if type(value) is not dict or not isinstance(value.get("event"), str):
            entries.note(line, "not a Fabro event envelope (no 'event' name); skipped")
            continue
        run_id = run_id or string(value.get("run_id"))
        project = project or _project(value)
        ids = [given for key in STRUCTURAL_IDS
               if (given := string(value.get(key))) is not None and given not in named]
        named.update(ids)
        name_ids(entries.add(line, _raw(value, tools), address=_address(value),
                             parent=entries.last_id, timestamp=string(value.get("ts"))).raw, ids)
    if not entries.entries:
        raise NotASessionError(path, None, "no Fabro event in the file")
    session_id = run_id or _named_by_file(path)
    return build_session(lines, entries, agent=AGENT, session_id=session_id, project=project,
                         header={"runId": run_id, "cwd": project})


STRUCTURAL_IDS: Final = ("session_id", "parent_session_id", "stage_id")
"""Envelope ids the first event under each is recalled by (an event's own ``id`` is its
address; its tool call's id is in the call and the result)."""


def _address(value: Mapping[str, Any]) -> str | None:
    own = string(value.get("id"))
    if own is not None:
        return own
    seq = value.get("seq")
    if type(seq) is int:
        return f"{string(value.get('run_id')) or 'seq'}:{seq}"
    return None  # the line


def _named_by_file(path: str) -> str:
    """An export without run ids is named by its file (``events.jsonl`` by its folder)."""
    file = Path(path)
    return file.parent.name if file.stem == "events" and file.parent.name else file.stem


def _project(value: Mapping[str, Any]) -> str | None:
    properties = value.get("properties")
    if value.get("event") != "run.created" or type(properties) is not dict:
        return None
    return string(properties.get("source_directory"))


def _body(properties: object) -> tuple[str | None, dict[str, Any]]:
    """The agent event's variant and body when ``properties`` nests it as the agent's
    envelope (``{seq, stream_id, …, "event": {"ToolCallStarted": {…}}}``: one key, a
    variant's name), else ``(None, properties)``."""
    if type(properties) is not dict:
        return None, {}
    nested = properties.get("event")
    if type(nested) is dict and len(nested) == 1:
        ((variant, body),) = nested.items()
        if type(body) is dict and variant[:1].isupper():
            return variant, body
    return None, properties


def _raw(value: dict[str, Any], tools: dict[str, str]) -> dict[str, Any]:
    """The Pi-shaped entry of one event (the builders of :mod:`fabric_memory.sources.reader`)."""
    name: str = value["event"]
    variant, body = _body(value.get("properties"))
    if name in ("agent.input", "agent.message") and (text := string(body.get("text"))):
        role = "user" if name == "agent.input" else "assistant"
        model = string(body.get("model"))
        return message(role, [text_block(text)], **({"model": model} if model else {}))
    call_id = string(body.get("tool_call_id")) or string(value.get("tool_call_id"))
    if name == "agent.tool.started" and call_id is not None:
        tool = string(body.get("tool_name")) or ""
        tools[call_id] = tool
        arguments = body.get("arguments")
        return message("assistant", [tool_call_block(
            call_id, tool, arguments if type(arguments) is dict else {"input": arguments})])
    if name == "agent.tool.completed" and call_id is not None:
        tool = string(body.get("tool_name")) or tools.get(call_id, "")
        return tool_result(call_id, tool, _text(body.get("output")),
                           is_error=body.get("is_error") is True)
    return event(name, _event_text(value, variant, body))


def _text(output: object) -> str:
    """A tool's output as text: a string as is, anything else as compact JSON."""
    return output if isinstance(output, str) else orjson.dumps(output).decode()


def _event_text(value: Mapping[str, Any], variant: str | None,
                body: Mapping[str, Any]) -> str:
    """The event's node (and the agent event's variant), then ``key: value`` for each leaf
    of its properties, bookkeeping left out. The event's name is the entry's
    ``customType``, searchable beside it."""
    node = string(value.get("node_label")) or string(value.get("node_id"))
    head = " ".join(part for part in (node, variant) if part)
    return "\n".join([*([head] if head else []),
                      *(f"{key}: {leaf}" for key, leaf in _leaves(body))])


def _leaves(body: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """``(dotted path, value)`` of every string, number and boolean under ``body``."""
    stack: list[tuple[str, object]] = [(key, item) for key, item in reversed(list(
        body.items())) if key not in BOOKKEEPING]
    while stack:
        path, current = stack.pop()
        if isinstance(current, dict):
            stack.extend((f"{path}.{key}", item) for key, item in reversed(list(
                current.items())) if key not in BOOKKEEPING)
        elif isinstance(current, list):
            stack.extend((f"{path}[{at}]", item) for at, item in reversed(list(
                enumerate(current))))
        elif isinstance(current, bool):
            yield path, "true" if current else "false"
        elif isinstance(current, str | int | float) and current != "":
            yield path, str(current)


def _homes(projects: Collection[str]) -> tuple[Path, ...]:
    return ()  # exports live where the user puts them (docs/agents.md)


FABRO = SourceReader(AGENT, recognises, read, _homes)
