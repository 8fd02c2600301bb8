"""Codex CLI: ``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`` (``$CODEX_HOME``
moves ``~/.codex``).

Two shapes are read. The current one: every line ``{timestamp, type, payload}`` with
``type`` one of ``session_meta`` (id, cwd, git; a resumed or forked session repeats its
parent's), ``response_item`` (the conversation: ``message``, ``reasoning``,
``function_call`` / ``function_call_output``, ``custom_tool_call`` /
``custom_tool_call_output``, ``local_shell_call``, ``web_search_call``, and
``ghost_snapshot``, the commit Codex makes before a turn), ``event_msg`` (``error``
events are read, and a ``token_count`` event's tokens are kept beside the entry before it;
the rest repeat response items or report progress), ``turn_context``
and ``compacted`` (Codex's own compaction summary). The earlier one: a first line
``{id, timestamp, instructions, git}`` (``instructions`` and ``git`` optional), then bare
response items separated by ``{"record_type": "state"}`` lines, without a time per line.
Any other first line is ``unsupported version``. Codex lines have no id of their own:
each entry's address is its line, ``L<line>``, its parent the entry before it.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import orjson

from ..errors import NotASessionError, clipped
from .reader import (
    NOT_JSON,
    Entries,
    JsonLines,
    SourceLine,
    SourceReader,
    add_usage,
    block_text,
    build_session,
    compaction,
    event,
    message,
    string,
    text_block,
    thinking_block,
    tokens,
    tool_call_block,
    tool_result,
    user_message,
)
from .tools import Action, FileWork, Tool, Use, argument, plan_tool

if TYPE_CHECKING:  # loaded when a file is read (see fabric_memory.sources.reader)
    from ..session import Session

AGENT: Final = "codex"
HOST_MARKS: Final = ("<environment_context>", "<user_instructions>",
                                 "# AGENTS.md instructions for ", "<INSTRUCTIONS>")
"""How the user turns Codex writes itself begin: the working folder and shell, the
project's AGENTS.md."""
HOME_ENV: Final = "CODEX_HOME"
LINE_TYPES: Final = frozenset({"session_meta", "response_item", "event_msg", "turn_context",
                               "compacted"})
READ_EVENTS: Final = frozenset({"error", "stream_error"})
_CALLS: Final = {"function_call": "arguments", "custom_tool_call": "input",
                 "local_shell_call": "action", "web_search_call": "action"}
_OUTPUTS: Final = frozenset({"function_call_output", "custom_tool_call_output"})
_EXIT_HEADER: Final = re.compile(r"^(?:Exit code: |Process exited with code )(-?\d+)$",
                                 re.MULTILINE)
HEADER_CHARS: Final = 512
"""Where a command's output reports its exit code (the header before ``Output:``)."""
_SHELLS: Final = frozenset({"bash", "sh", "zsh", "dash"})
_PATCH_HEADER: Final = re.compile(r"^\*\*\* (Add|Delete|Update) File: (.+)$")
_PATCH_ACTIONS: Final[Mapping[str, Action]] = {"Add": "created", "Delete": "deleted",
                                               "Update": "modified"}


def codex_sessions_dir() -> Path:
    """``$CODEX_HOME/sessions``, else ``~/.codex/sessions``."""
    configured = os.environ.get(HOME_ENV)
    return (Path(configured).expanduser() if configured else Path.home() / ".codex") / "sessions"


def _is_current(first: Any) -> bool:
    return (type(first) is dict and first.get("type") == "session_meta"
            and type(first.get("payload")) is dict)


def _is_earlier(first: Any) -> bool:
    """The earlier shape's first line: ``{id, timestamp, instructions?, git?}``, no ``type``."""
    return (type(first) is dict and "type" not in first and "record_type" not in first
            and isinstance(first.get("id"), str) and isinstance(first.get("timestamp"), str))


def recognises(first: Any, path: str) -> bool:
    """A Codex rollout: a ``session_meta`` first line, or the earlier shape's meta line."""
    return _is_current(first) or _is_earlier(first)


def read(path: str, max_line_bytes: int) -> Session:
    lines = JsonLines(path, max_line_bytes)
    entries = Entries()
    tools: dict[str, str] = {}
    meta: dict[str, Any] | None = None
    earlier = False
    totals = _Totals()
    for line in lines:
        value = line.value
        if meta is None:
            meta, earlier = _meta(path, line)
            _add(entries, line, event("session_meta", _meta_text(meta)),
                 string(meta.get("timestamp")))
            continue
        if type(value) is not dict:
            entries.note(line, "not a JSON object; skipped")
        elif earlier:
            if value.get("record_type") != "state":
                _item(entries, line, value, None, tools)
        else:
            _current(entries, line, value, tools, totals)
    if meta is None:
        raise NotASessionError(path, None, "empty file: no Codex session_meta line")
    session_id = string(meta.get("id")) or Path(path).stem
    return build_session(lines, entries, agent=AGENT, session_id=session_id,
                         project=string(meta.get("cwd")), header=meta,
                         version=1 if earlier else 2)


def _meta(path: str, line: SourceLine) -> tuple[dict[str, Any], bool]:
    """The session's metadata from its first line, and whether it is the earlier shape."""
    first = line.value
    if _is_current(first):
        return dict(first["payload"], timestamp=first["payload"].get("timestamp")
                    or first.get("timestamp")), False
    if _is_earlier(first):
        return dict(first), True
    shown = (f"type {clipped(first.get('type'))}" if type(first) is dict and "type" in first
             else "not JSON" if first is NOT_JSON else f"JSON {clipped(first)}")
    raise NotASessionError(path, line.number, f"unsupported version: first line is {shown}, "
                           "neither a session_meta line nor the earlier {id, timestamp, "
                           "instructions} line")


def _meta_text(meta: dict[str, Any]) -> str:
    """What a ``session_meta`` says: the session's id (a resumed or forked session's file
    holds its parent's ``session_meta`` too, so the parent's id finds it), folder, client and
    git state."""
    git = meta.get("git")
    words = [meta.get("id"), meta.get("cwd"), meta.get("originator"), meta.get("cli_version")]
    if type(git) is dict:
        words.extend(git.get(key) for key in ("repository_url", "branch", "commit_hash"))
    return " ".join(word for word in words if isinstance(word, str) and word)


def _current(entries: Entries, line: SourceLine, value: dict[str, Any],
             tools: dict[str, str], totals: _Totals) -> None:
    given, payload, stamp = value.get("type"), value.get("payload"), string(value.get("timestamp"))
    kind = string(given)  # a set lookup of a list or an object would raise
    if kind not in LINE_TYPES:
        entries.note(line, f"unknown Codex line type {clipped(given)}; skipped")
    elif type(payload) is not dict:
        entries.note(line, f"{kind} line without a 'payload' object; skipped")
    elif kind == "response_item":
        _item(entries, line, payload, stamp, tools)
    elif kind == "compacted":
        _add(entries, line, compaction(string(payload.get("message")) or ""), stamp)
    elif kind == "turn_context":
        words = (payload.get(key) for key in ("model", "cwd", "approval_policy"))
        _add(entries, line, event("turn_context", " ".join(
            word for word in words if isinstance(word, str) and word)), stamp)
    elif kind == "session_meta":
        _add(entries, line, event("session_meta", _meta_text(payload)), stamp)
    elif kind == "event_msg" and string(payload.get("type")) in READ_EVENTS:
        _add(entries, line, event(f"event:{payload['type']}",
                                  string(payload.get("message")) or ""), stamp)
    elif kind == "event_msg" and payload.get("type") == "token_count":
        _token_count(entries, payload.get("info"), totals)


class _Totals:
    """The session's running ``total_token_usage`` as last reported."""

    __slots__ = ("last",)

    def __init__(self) -> None:
        self.last: dict[str, Any] | None = None


def _token_count(entries: Entries, info: object, totals: _Totals) -> None:
    """Record a turn's tokens on the entry before its ``token_count`` event. Codex reports
    ``last_token_usage`` (the turn) and ``total_token_usage`` (the session so far), and
    repeats an event unchanged (a rate-limit update): an event whose total has not moved
    counts nothing; one with a total but no turn counts the total's growth. Codex's
    ``input_tokens`` holds ``cached_input_tokens``: only the rest is counted as input."""
    if type(info) is not dict:
        return
    total, turn = info.get("total_token_usage"), info.get("last_token_usage")
    if type(total) is dict:
        if total == totals.last:
            return
        before, totals.last = totals.last or {}, total
        if type(turn) is not dict:
            turn = {key: tokens(total, key) - tokens(before, key) for key in total}
    if type(turn) is not dict:
        return
    cached = tokens(turn, "cached_input_tokens")
    add_usage(entries.entries[-1], tokens(turn, "input_tokens") - cached,
              tokens(turn, "output_tokens"), cached, tokens(turn, "cache_write_input_tokens"))


def _item(entries: Entries, line: SourceLine, item: dict[str, Any], stamp: str | None,
          tools: dict[str, str]) -> None:
    """One response item (a ``response_item`` payload, or a bare item of the earlier shape)."""
    given = item.get("type")
    kind = string(given)
    if kind == "message":
        role = string(item.get("role")) or ""
        text = block_text(item.get("content"))
        raw = (user_message(text, HOST_MARKS) if role == "user"
               else message(role, [text_block(text)]) if role == "assistant"
               else event(f"message:{role}", text))
        _add(entries, line, raw, stamp)
    elif kind == "reasoning":
        parts = (block_text(item.get("summary")), block_text(item.get("content")))
        text = "\n".join(part for part in parts if part)
        _add(entries, line, message("assistant", [thinking_block(text)] if text else []), stamp)
    elif kind in _CALLS:
        call_id = string(item.get("call_id")) or string(item.get("id")) or ""
        name = string(item.get("name")) or kind.removesuffix("_call")
        tools[call_id] = name
        arguments = _arguments(item.get(_CALLS[kind]))
        _add(entries, line, message("assistant", [tool_call_block(call_id, name, arguments)]),
             stamp)
    elif kind in _OUTPUTS:
        call_id = string(item.get("call_id")) or ""
        text, failed, code = _output(item.get("output"))
        _add(entries, line, tool_result(call_id, tools.get(call_id), text, is_error=failed,
                                        exit_code=code), stamp)
    elif kind == "ghost_snapshot":
        _add(entries, line, event("ghost_snapshot", _ghost_text(item.get("ghost_commit"))), stamp)
    else:
        entries.note(line, f"response item of type {clipped(given)} not read")


def _ghost_text(commit: object) -> str:
    """A ghost snapshot (the git commit Codex makes of the work tree before a turn, for
    undo): its commit id and parent, so either recalls the turn."""
    if type(commit) is not dict:
        return ""
    words = [f"{key} {value}" for key, value in (("commit", commit.get("id")),
                                                 ("parent", commit.get("parent")))
             if isinstance(value, str) and value]
    return ", ".join(words)


def _add(entries: Entries, line: SourceLine, raw: dict[str, Any], stamp: str | None) -> None:
    entries.add(line, raw, parent=entries.last_id, timestamp=stamp)


def _arguments(value: object) -> dict[str, Any]:
    """A call's arguments as an object: Codex writes them as a JSON string."""
    if isinstance(value, str):
        try:
            parsed = orjson.loads(value)
        except orjson.JSONDecodeError:
            return {"input": value}
        return parsed if type(parsed) is dict else {"input": value}
    return value if type(value) is dict else {"input": value}


def _output(output: object) -> tuple[str, bool, int | None]:
    """A call's output text, whether it failed and its exit code: the shell's ``{output,
    metadata: {exit_code}}`` JSON string, text that reports ``Exit code: N`` or ``Process
    exited with code N`` in its header, a ``{content, success}`` object, or plain text."""
    if isinstance(output, str):
        try:
            parsed = orjson.loads(output) if output.startswith("{") else None
        except orjson.JSONDecodeError:
            parsed = None
        if type(parsed) is dict and isinstance(parsed.get("output"), str):
            metadata = parsed.get("metadata")
            code = metadata.get("exit_code") if type(metadata) is dict else None
            code = code if type(code) is int else None
            return parsed["output"], bool(code), code
        found = _EXIT_HEADER.search(output, 0, HEADER_CHARS)
        code = int(found.group(1)) if found else None
        return output, bool(code), code
    if type(output) is dict:
        return block_text(output.get("content")), output.get("success") is False, None
    return block_text(output), False, None


def _command(value: object) -> str | None:
    """A command line from a shell call's ``command`` (a list of words: ``bash -lc
    "<line>"`` gives the line) or ``cmd`` (a string)."""
    if isinstance(value, str):
        return value
    if type(value) is not list or not all(isinstance(word, str) for word in value):
        return None
    if len(value) == 3 and value[0].rsplit("/", 1)[-1] in _SHELLS and value[1] in ("-c", "-lc"):
        return str(value[2])
    return shlex.join(value)


def _shell(arguments: Mapping[str, Any]) -> Use:
    """``shell`` / ``local_shell`` (``command``: words) and ``exec_command`` (``cmd``); an
    ``apply_patch`` run through the shell is a patch."""
    words = arguments.get("command")
    if type(words) is list and len(words) == 2 and words[0] == "apply_patch":
        return _patch({"input": words[1]})
    command = _command(words if words is not None else arguments.get("cmd"))
    return Use(command=command, target=command)


def _patch(arguments: Mapping[str, Any]) -> Use:
    """``apply_patch``: every file its patch adds, deletes, updates or moves."""
    patch = argument(arguments, "input", "patch")
    files = patch_files(patch) if patch else ()
    return Use(files=files, target=files[0].path if files else "")


def patch_files(patch: str) -> tuple[FileWork, ...]:
    """The files of an ``apply_patch`` patch (``*** Add File:`` / ``*** Delete File:`` /
    ``*** Update File:`` with ``*** Move to:``): an added file with its content, an
    update with its hunks' lines before and after (``-``/``+``/`` ``)."""
    found: list[FileWork] = []
    old: list[str] = []
    new: list[str] = []

    def close() -> None:
        last = found[-1] if found else None
        if last is not None and last.action == "created":
            last.new = "\n".join(new) + ("\n" if new else "")
        elif last is not None and last.action == "modified" and (old or new):
            last.old, last.new = "\n".join(old), "\n".join(new)
        old.clear()
        new.clear()

    for line in patch.splitlines():
        header = _PATCH_HEADER.match(line)
        if header:
            close()
            action: Action = _PATCH_ACTIONS[header.group(1)]
            found.append(FileWork(header.group(2).strip(), action))
        elif line.startswith("*** Move to: ") and found:
            found[-1].moved_to = line.removeprefix("*** Move to: ").strip()
        elif not found or line.startswith(("***", "@@")):
            continue
        elif line.startswith("+"):
            new.append(line[1:])
        elif line.startswith("-"):
            old.append(line[1:])
        elif line.startswith(" "):
            old.append(line[1:])
            new.append(line[1:])
    close()
    return tuple(found)


TOOLS: Final[Mapping[str, Tool]] = {
    "shell": Tool("shell", _shell),
    "local_shell": Tool("shell", _shell),
    "exec_command": Tool("shell", _shell),
    "apply_patch": Tool("patch", _patch),
    "update_plan": plan_tool("plan", "step"),
}
"""Codex's tools as the work trail reads them."""


def _homes(projects: Collection[str]) -> tuple[Path, ...]:
    return (codex_sessions_dir(),)


CODEX = SourceReader(AGENT, recognises, read, _homes, tools=TOOLS)
