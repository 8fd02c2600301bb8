"""Claude Code: ``~/.claude/projects/<encoded cwd>/<session>.jsonl`` (``$CLAUDE_CONFIG_DIR``
moves ``~/.claude``).

Every conversation line carries ``uuid`` (its address), ``parentUuid``, ``sessionId``,
``cwd``, ``timestamp`` and ``isSidechain`` (a subagent's turn, off the main chain). A
``user`` line holds the user's text or ``tool_result`` blocks (each its own entry, paired
with its ``tool_use`` by id), an ``assistant`` line text, ``thinking`` and ``tool_use``
blocks; ``isCompactSummary`` marks Claude's own compaction summary; ``summary`` lines
(a title for a leaf, no ``uuid`` of their own) are addressed by line. A conversation line
without a ``uuid`` is a located note; bookkeeping lines are not read (docs/agents.md).
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ..errors import NotASessionError, clipped
from .reader import (
    Entries,
    JsonLines,
    SourceLine,
    SourceReader,
    add_usage,
    block_text,
    build_session,
    compaction,
    drop_usage,
    event,
    message,
    name_ids,
    string,
    text_block,
    thinking_block,
    tokens,
    tool_call_block,
    tool_result,
)
from .tools import FileWork, Tool, Use, argument, file_tool, plan_tool, search_tool, shell_tool

if TYPE_CHECKING:  # loaded when a file is read (see fabric_memory.sources.reader)
    from ..session import Entry, Session

AGENT: Final = "claude-code"
CONFIG_DIR_ENV: Final = "CLAUDE_CONFIG_DIR"
CONVERSATION: Final = frozenset({"user", "assistant", "system"})
BOOKKEEPING: Final = frozenset({
    "file-history-snapshot", "queue-operation", "attachment", "last-prompt", "cost-state",
    "api-request", "api-request-shape", "api-request-blob", "tools-used", "atis-latch", "mode",
    "progress",
})
"""Line types that hold no conversation (file backups, queued input, and what Claude Code
2.1 records about its requests, costs and the context it attached): not read. An
``attachment`` line still sits in the parent chain (the next turn names it as its parent),
so its link is kept and the chain goes on through it; so does a ``progress`` line (a hook
or a running tool reporting, 2.1). A line of an unknown type is noted and linked through
the same way."""
_FIRST_TYPES: Final = CONVERSATION | BOOKKEEPING | {"summary"}
_EXIT_CODE: Final = re.compile(r"(?:Error: )?Exit code (-?\d+)\b")
INTERRUPTED: Final = "[Request interrupted by user"
"""How a tool result the user stopped begins."""


def _multi_edit(arguments: Mapping[str, Any]) -> Use:
    """``MultiEdit``: the first of its ``edits`` shows the change."""
    path = argument(arguments, "file_path")
    if not path:
        return Use()
    edits = arguments.get("edits")
    first = edits[0] if isinstance(edits, list) and edits and type(edits[0]) is dict else {}
    return Use(files=(FileWork(path, "modified", argument(first, "old_string"),
                               argument(first, "new_string")),), target=path)


def _notebook_edit(arguments: Mapping[str, Any]) -> Use:
    """``NotebookEdit``: a cell replaced or inserted shows its new source; a deleted one
    only touches the notebook."""
    path = argument(arguments, "notebook_path")
    if not path:
        return Use()
    deleted = arguments.get("edit_mode") == "delete"
    source = None if deleted else argument(arguments, "new_source")
    return Use(files=(FileWork(path, "modified", None if deleted else "", source),),
               target=path)


TOOLS: Final[Mapping[str, Tool]] = {
    "Read": file_tool("read", "read", "file_path"),
    "Edit": file_tool("edit", "modified", "file_path", ("old_string",), ("new_string",)),
    "MultiEdit": Tool("edit", _multi_edit),
    "NotebookEdit": Tool("edit", _notebook_edit),
    "Write": file_tool("write", "written", "file_path", (), ("content",)),
    "Bash": shell_tool("command"),
    "Grep": search_tool("pattern"),
    "Glob": search_tool("pattern"),
    "TodoWrite": plan_tool("todos", "content"),
}
"""Claude Code's tools as the work trail reads them."""


def claude_projects_dir() -> Path:
    """``$CLAUDE_CONFIG_DIR/projects``, else ``~/.claude/projects``."""
    configured = os.environ.get(CONFIG_DIR_ENV)
    base = Path(configured).expanduser() if configured else Path.home() / ".claude"
    return base / "projects"


def recognises(first: Any, path: str) -> bool:
    """A Claude Code transcript: its first line is one of Claude's line types and names
    its session (``sessionId``), its leaf (``summary``) or its message (snapshots)."""
    return (type(first) is dict and string(first.get("type")) in _FIRST_TYPES
            and any(key in first for key in ("sessionId", "leafUuid", "messageId")))


def read(path: str, max_line_bytes: int) -> Session:
    lines = JsonLines(path, max_line_bytes)
    entries = Entries()
    tools: dict[str, str] = {}
    """tool_use id -> tool name, to name the result that answers it."""
    links: dict[str, str | None] = {}
    """uuid -> parentUuid of the bookkeeping lines in the parent chain."""
    chain = _Chain()
    turns: dict[tuple[str, str | None], Entry] = {}
    """(message id, request id) -> the entry holding that reply's usage."""
    session_id = project = named = None
    for line in lines:
        value = line.value
        if type(value) is not dict:
            entries.note(line, "not a JSON object; skipped")
            continue
        session_id = session_id or string(value.get("sessionId"))
        project = project or string(value.get("cwd"))
        before = len(entries.entries)
        _read_line(line, value, entries, tools, links, chain, turns)
        # The first entry under each session id (a resumed session's file holds the turns
        # of the one it continues) holds that id, so recalling it finds where it starts.
        line_session = string(value.get("sessionId"))
        if line_session not in (None, named) and len(entries.entries) > before:
            name_ids(entries.entries[before].raw, [line_session])
            named = line_session
    if session_id is None:
        raise NotASessionError(path, None, "no line names its sessionId (not a Claude Code "
                               "transcript, or one holding only summaries)")
    return build_session(lines, entries, agent=AGENT, session_id=session_id, project=project,
                         header={"sessionId": session_id, "cwd": project})


class _Chain:
    """The conversation lines read so far, for parallel tool calls: Claude Code writes each
    call of one reply as its own assistant line (each the child of the one before) and
    each result as the child of its own call's line, so the results of all calls but the
    last hang off the chain on side branches, and the active branch (from the leaf up)
    would lose them. A result line whose parent already has a child is put after the line
    before it instead, when that line descends from the same parent: the results then
    follow their calls in one line, as they were sent to the model."""

    __slots__ = ("children", "parents", "previous")

    DEPTH: Final = 64
    """How far up from the line before a result its parent is looked for."""

    def __init__(self) -> None:
        self.children: set[str] = set()
        self.parents: dict[str, str | None] = {}
        self.previous: str | None = None

    def result_parent(self, parent: str | None) -> str | None:
        """The parent a tool-result line takes, given the one it names."""
        previous = self.previous
        if parent is None or parent not in self.children or previous is None:
            return parent
        up: str | None = previous
        for _ in range(self.DEPTH):
            if up == parent:
                return previous
            up = self.parents.get(up) if up is not None else None
            if up is None:
                break
        return parent

    def add(self, uuid: str, parent: str | None) -> None:
        if parent is not None:
            self.children.add(parent)
        self.parents[uuid] = parent
        self.previous = uuid


def _read_line(line: SourceLine, value: dict[str, Any], entries: Entries,
               tools: dict[str, str], links: dict[str, str | None], chain: _Chain,
               turns: dict[tuple[str, str | None], Entry]) -> None:
    given = value.get("type")
    kind = string(given)  # a set lookup of a list or an object would raise
    if kind in BOOKKEEPING:
        if (uuid := string(value.get("uuid"))) is not None:
            links[uuid] = string(value.get("parentUuid"))
        return
    if kind == "summary":
        summary = string(value.get("summary"))
        if summary is None:
            entries.note(line, "summary line without a 'summary' text; skipped")
        else:
            entries.add(line, event("summary", summary), parent=string(value.get("leafUuid")))
        return
    if kind not in CONVERSATION:
        entries.note(line, f"unknown Claude Code line type {clipped(given)}; skipped")
        if (uuid := string(value.get("uuid"))) is not None:
            links[uuid] = string(value.get("parentUuid"))
        return
    uuid = string(value.get("uuid"))
    if uuid is None:
        entries.note(line, f"{kind} line without a 'uuid' (no address); skipped")
        return
    # After Claude compacts, the boundary line starts a new chain (``parentUuid`` null) and
    # names the turn it follows in ``logicalParentUuid``: the branch goes on through it.
    parent = _through(string(value.get("parentUuid")) or string(value.get("logicalParentUuid")),
                      links)
    body = value.get("message")
    content = body.get("content") if type(body) is dict else None
    if kind == "user" and type(content) is list and any(
            type(block) is dict and block.get("type") == "tool_result" for block in content):
        parent = chain.result_parent(parent)
    chain.add(uuid, parent)
    where = {"address": uuid, "parent": parent, "timestamp": string(value.get("timestamp"))}
    if kind == "system":
        entries.add(line, event(_system_kind(value), _system_text(value)), **where)
        return
    if type(body) is not dict:
        entries.note(line, f"{kind} line {uuid} has no 'message' object; skipped")
        return
    if kind == "assistant":
        entry = entries.add(line, _assistant(content, tools,
                                             value.get("isApiErrorMessage") is True), **where)
        _usage(entry, body, string(value.get("requestId")), turns)
        return
    if value.get("isCompactSummary") is True:
        entries.add(line, compaction(block_text(content, "text")), **where)
        return
    results = [b for b in content if type(b) is dict and b.get("type") == "tool_result"] if (
        type(content) is list) else []
    text = block_text(content, "text")
    if text or not results:
        entries.add(line, message("user", [text_block(text)] if text else []), **where)
    for block in results:
        call_id = string(block.get("tool_use_id")) or ""
        output = block_text(block.get("content"), "text")
        structured = value.get("toolUseResult") if len(results) == 1 else None
        extra = _structured(structured, output) if structured is not None else ""
        failed = block.get("is_error") is True
        exit_code, interrupted = _status(output, structured, failed)
        entries.add(line, tool_result(call_id, tools.get(call_id),
                                      f"{output}\n{extra}" if extra else output,
                                      is_error=failed, exit_code=exit_code,
                                      interrupted=interrupted), **where)


def _usage(entry: Entry, body: dict[str, Any], request: str | None,
           turns: dict[tuple[str, str | None], Entry]) -> None:
    """Record the reply's ``usage`` on ``entry``, once per reply: Claude Code writes each
    block of one reply as its own line, every line repeating the reply's usage with the
    output counted so far, so the last line's usage is the reply's and an earlier line's
    is moved to it."""
    usage = body.get("usage")
    if type(usage) is not dict:
        return
    reply = string(body.get("id"))
    if reply is not None:
        earlier = turns.get((reply, request))
        if earlier is not None:
            drop_usage(earlier)
        turns[(reply, request)] = entry
    add_usage(entry, tokens(usage, "input_tokens"), tokens(usage, "output_tokens"),
              tokens(usage, "cache_read_input_tokens"),
              tokens(usage, "cache_creation_input_tokens"))


def _through(parent: str | None, links: dict[str, str | None]) -> str | None:
    """The nearest conversation line up the chain from ``parent``, past bookkeeping lines
    (each link followed once, so a loop ends)."""
    seen: set[str] = set()
    while parent is not None and parent in links and parent not in seen:
        seen.add(parent)
        parent = links[parent]
    return parent


def _assistant(content: object, tools: dict[str, str], failed: bool) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = []
    for block in content if type(content) is list else [content]:
        if isinstance(block, str):
            blocks.append(text_block(block))
            continue
        if type(block) is not dict:
            continue
        kind = block.get("type")
        if kind == "text" and (text := string(block.get("text"))):
            blocks.append(text_block(text))
        elif kind == "thinking" and (text := string(block.get("thinking"))):
            blocks.append(thinking_block(text))
        elif kind == "tool_use":
            call_id, name = string(block.get("id")) or "", string(block.get("name")) or ""
            tools[call_id] = name
            arguments = block.get("input")
            blocks.append(tool_call_block(call_id, name, arguments if type(arguments) is dict
                                          else {"input": arguments}))
    return message("assistant", blocks, **({"stopReason": "error"} if failed else {}))


def _status(output: str, structured: object, failed: bool) -> tuple[int | None, bool]:
    """A Bash result's exit code (a failed one's text starts ``Exit code N``) and whether
    it was interrupted (``toolUseResult.interrupted``, or the user stopped the call)."""
    code = _EXIT_CODE.match(output) if failed else None
    interrupted = (type(structured) is dict and structured.get("interrupted") is True) or (
        failed and output.startswith(INTERRUPTED))
    return (int(code.group(1)) if code else None), interrupted


def _structured(result: object, output: str) -> str:
    """The string leaves of ``toolUseResult`` (Claude's structured copy of a tool's outcome:
    stdout, stderr, a file's path and content) that the result's text does not already say."""
    leaves: list[str] = []
    stack = [result]
    while stack:
        current = stack.pop()
        if isinstance(current, str):
            if current and current not in output:
                leaves.append(current)
        elif type(current) is dict:
            stack.extend(reversed(list(current.values())))
        elif type(current) is list:
            stack.extend(reversed(current))
    return "\n".join(leaves)


def _system_kind(value: dict[str, Any]) -> str:
    subtype = string(value.get("subtype"))
    return f"system:{subtype}" if subtype else "system"


def _system_text(value: dict[str, Any]) -> str:
    return string(value.get("content")) or ""


def _homes(projects: Collection[str]) -> tuple[Path, ...]:
    return (claude_projects_dir(),)


CLAUDE_CODE = SourceReader(AGENT, recognises, read, _homes, tools=TOOLS)
