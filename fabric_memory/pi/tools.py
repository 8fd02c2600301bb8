"""The memory tools the Pi extension offers the model: ``memory_recall`` and
``memory_expand``, each one JSON request in, one answer out: ``text`` for the model (what the
CLI prints, its next calls written as these tools' calls) and ``details``, the JSON value
(what the CLI's ``--json`` prints).

The model fills these requests, so it never chooses where to read: the location keys a
request shape can carry (``index``, ``sessions``) are refused, and the user's configured
sessions root and index are used.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final, TypedDict

from ..arguments import MAX_JSON_BYTES, json_value, lone_surrogate
from ..errors import LocationRefusedError, UsageError
from ..memory.expand import expand_request
from ..memory.locations import working_folder
from ..memory.recall import recall_request
from ..memory.render import Door, render_expand, render_recall

LOCATION_KEYS: Final = ("index", "sessions", "hotSessions")
"""Request keys that pick what is read (or how much is re-checked): the user's to set."""

TOOLS: Final[dict[str, tuple[Callable[[Mapping[str, Any]], Any], Callable[[Any, Door], str]]]] = {
    "memory_recall": (recall_request, render_recall),
    "memory_expand": (expand_request, render_expand),
}


def read_arguments(name: str, data: bytes) -> Any:
    """A tool's arguments from the bytes of its stdin: one JSON value, of Unicode text, at
    most :data:`~fabric_memory.arguments.MAX_JSON_BYTES`; else a usage error saying where."""
    if len(data) > MAX_JSON_BYTES:
        raise UsageError(f"{name}: the arguments are over {MAX_JSON_BYTES:,} bytes; send one "
                         "JSON object of arguments of a few kilobytes")
    try:
        arguments = json_value(data.decode("utf-8", "replace"))
    except ValueError as exc:
        raise UsageError(f"{name}: stdin is not a JSON object of arguments: {exc}") from None
    where = lone_surrogate(arguments)
    if where is not None:
        raise UsageError(f"{name}: {where} holds a lone surrogate (a \\ud800-\\udfff escape "
                         "alone), which is not Unicode text; send valid Unicode")
    return arguments


class ToolAnswer(TypedDict):
    text: str
    """What the model reads."""
    details: Any
    """The JSON value, for the extension and the session file."""


def call_tool(name: str, arguments: Any) -> ToolAnswer:
    """The answer of tool ``name`` to the model's ``arguments`` (a JSON object)."""
    tool = TOOLS.get(name)
    if tool is None:
        raise UsageError(f"{name}: no such tool; the tools are {', '.join(TOOLS)}")
    if not isinstance(arguments, Mapping):
        raise UsageError(f"{name}: the arguments must be a JSON object")
    chosen = sorted(key for key in LOCATION_KEYS if key in arguments)
    if chosen:
        raise LocationRefusedError(
            f"{name}: {', '.join(chosen)} may not be set by a tool call; the memory tools "
            "read the sessions and index the user configured (FABRIC_MEMORY_SESSIONS, "
            "FABRIC_MEMORY_HOME)"
        )
    if name == "memory_recall" and not {"project", "preferProject"} & arguments.keys():
        folder = working_folder()
        if folder is not None:  # Pi runs its tools in the project: its sessions first
            arguments = {**arguments, "preferProject": folder}
    run, render = tool
    value = run(arguments)
    return {"text": render(value, "pi"), "details": value}
