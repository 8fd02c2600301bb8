"""The work trail's vocabulary: what an agent's tool call does, in the trail's own kinds.

The builders (:func:`file_tool`, :func:`shell_tool`, :func:`plan_tool`,
:func:`search_tool`) give one :class:`Tool` per set of arguments, so two agents naming a
tool alike with the same arguments (``glob``, ``todo_write``) read it one way.

Each reader module keeps one table (``TOOLS``: the agent's tool name → a :class:`Tool`)
beside its reader; :data:`fabric_memory.sources.registry.TOOLS` merges them (names do not
collide: Pi's ``edit``, Claude Code's ``Edit``, Codex's ``apply_patch``). The compaction's
trail (:mod:`fabric_memory.compaction.compactor`) asks the table what a call did and never
which agent made it: a shell command (its result read for checks, commits and moves),
files read, edited, written, created, deleted or moved, a search, or a plan whose steps
not yet completed are the open items. The tables read a call's arguments only; a result's
exit status is the reader's to normalize (``exitCode`` and ``interrupted`` on the
Pi-shaped tool result, :func:`~fabric_memory.sources.reader.tool_result`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

Kind = Literal["read", "edit", "write", "shell", "patch", "search", "plan"]
Action = Literal["read", "modified", "written", "created", "deleted"]
DONE: Final = frozenset({"completed", "complete", "done", "cancelled", "canceled"})
"""Plan statuses that close a step (anything else leaves it open)."""


# Built per tool result on the hook's path; not ``frozen`` (see fabric_memory.view).
@dataclass(slots=True)
class FileWork:
    """One file a call touched and how."""

    path: str
    action: Action
    old: str | None = None
    """An edit's text before (with ``new``: the trail shows the first line they differ on)."""
    new: str | None = None
    """An edit's text after, or a write's whole content (the trail counts its lines)."""
    moved_to: str | None = None


@dataclass(slots=True)
class Use:
    """What one call did, as the trail reads it (all optional: a call may do nothing the
    trail keeps)."""

    command: str | None = None
    """A shell command line (its result is read for checks, commits, deletes and moves)."""
    files: tuple[FileWork, ...] = ()
    plan: tuple[tuple[str, str], ...] | None = None
    """``(status, step)`` of every step of a plan the call sets (the whole plan)."""
    target: str | None = None
    """What an error of the call is about (a path, a command, a pattern); None: the first
    of the usual argument names (:func:`fabric_memory.compaction.text.target_of`)."""


@dataclass(frozen=True, slots=True)
class Tool:
    """One agent tool: its kind and how its arguments say what it did."""

    kind: Kind
    use: Callable[[Mapping[str, Any]], Use]


def argument(arguments: Mapping[str, Any], *keys: str) -> str | None:
    """The first of ``keys`` that ``arguments`` holds as a string."""
    for key in keys:
        value = arguments.get(key)
        if isinstance(value, str):
            return value
    return None


@functools.cache
def file_tool(kind: Kind, action: Action, path_key: str | tuple[str, ...],
              old_keys: tuple[str, ...] = (), new_keys: tuple[str, ...] = ()) -> Tool:
    """A tool that touches the file named by ``path_key`` (or the first of several it
    holds; an edit's texts under the first of ``old_keys``/``new_keys`` it holds, a write's
    content under ``new_keys``)."""
    path_keys = (path_key,) if isinstance(path_key, str) else path_key

    def use(arguments: Mapping[str, Any]) -> Use:
        path = argument(arguments, *path_keys)
        if not path:
            return Use()
        old = argument(arguments, *old_keys) if old_keys else None
        new = argument(arguments, *new_keys) if new_keys else None
        return Use(files=(FileWork(path, action, old, new),), target=path)

    return Tool(kind, use)


@functools.cache
def editor_tool(write_command: str, write_action: Action) -> Tool:
    """One editor tool whose ``command`` says what it does to ``path``: ``write_command``
    writes ``file_text`` (as ``write_action``), ``str_replace``/``insert`` edit ``old_str``
    into ``new_str``, anything else reads (Copilot CLI's ``str_replace_editor``, Goose's
    ``developer__text_editor``)."""

    def use(arguments: Mapping[str, Any]) -> Use:
        path, command = argument(arguments, "path"), argument(arguments, "command")
        if not path:
            return Use()
        if command == write_command:
            work = FileWork(path, write_action, None, argument(arguments, "file_text"))
        elif command in ("str_replace", "insert"):
            work = FileWork(path, "modified", argument(arguments, "old_str") or "",
                            argument(arguments, "new_str"))
        else:
            work = FileWork(path, "read")
        return Use(files=(work,), target=path)

    return Tool("edit", use)


@functools.cache
def shell_tool(key: str) -> Tool:
    """A shell tool whose command line is ``arguments[key]``."""

    def use(arguments: Mapping[str, Any]) -> Use:
        command = argument(arguments, key)
        return Use(command=command, target=command)

    return Tool("shell", use)


@functools.cache
def plan_tool(list_key: str, step_key: str) -> Tool:
    """A tool that sets the whole plan: ``arguments[list_key]`` holds objects with the
    step's text under ``step_key`` and its ``status``."""

    def use(arguments: Mapping[str, Any]) -> Use:
        steps = arguments.get(list_key)
        if not isinstance(steps, list):
            return Use()
        plan = tuple(
            (status if isinstance(status := step.get("status"), str) else "pending", said)
            for step in steps
            if isinstance(step, dict) and isinstance(said := step.get(step_key), str) and said
        )
        return Use(plan=plan, target="plan")

    return Tool("plan", use)


_CHECKLIST: Final = re.compile(r"^\s*[-*]\s*\[([ xX~-])\]\s*(.+?)\s*$", re.MULTILINE)
_MARKS: Final = {"x": "completed", "X": "completed", "~": "in_progress", "-": "in_progress"}


def checklist_tool(key: str) -> Tool:
    """A tool that sets the whole plan as a Markdown checklist in ``arguments[key]``
    (``- [x] step`` done, ``- [ ] step`` open, ``- [~] step`` under way)."""

    def use(arguments: Mapping[str, Any]) -> Use:
        checklist = argument(arguments, key)
        if not checklist:
            return Use()
        plan = tuple((_MARKS.get(mark, "pending"), step)
                     for mark, step in _CHECKLIST.findall(checklist))
        return Use(plan=plan, target="plan")

    return Tool("plan", use)


@functools.cache
def search_tool(pattern_key: str) -> Tool:
    """A search (its failure is about its pattern)."""
    return Tool("search", lambda arguments: Use(target=argument(arguments, pattern_key) or ""))
