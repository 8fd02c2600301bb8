"""``fabric-memory serve``: the memory index as a Model Context Protocol server over stdio.

Three tools, ``recall``, ``expand`` and ``sessions``: each answers with the text the CLI
prints for a model to read (its next calls written as this server's tool calls) and with
what the CLI's ``--json`` prints as structured content, declared by the tool's output
schema (derived from the answer's TypedDict, :func:`json_schema`). A
failure is a tool error (``is_error``) whose text starts with the error code
(``stale_pointer: …``). The caller is a model: the server answers only from the
sessions root and index it was started with, and refuses a ``follow``/``next`` whose
``index`` or ``sessions`` key names another place. The index stays open between calls
while a background thread keeps it live (:mod:`fabric_memory.memory.live`).

Needs the ``mcp`` extra (``pip install -e '.[mcp]'`` in a clone); the tool names and
parameters are a contract documented in docs/mcp.md.
"""

from __future__ import annotations

import fcntl
import os
import signal
import sys
import threading
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import UnionType
from typing import (
    IO,
    Any,
    Literal,
    NotRequired,
    Union,
    cast,
    get_args,
    get_origin,
    is_typeddict,
)

import anyio
import mcp_types
from anyio.streams.memory import MemoryObjectSendStream
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from mcp.types import Tool as MCPTool
from pydantic import ValidationError

from . import __version__, arguments
from .arguments import check_name
from .errors import FabricMemoryError, LocationRefusedError, clipped
from .jsonrpc import Refusal, Refused, read_line, refusal_for, screen
from .memory import catalog
from .memory import expand as expand_module
from .memory import recall as recall_module
from .memory.catalog import DEFAULT_HOT_SESSIONS, SessionsReport, default_roots, list_sessions
from .memory.expand import REQUEST_KINDS as EXPAND_KINDS
from .memory.expand import ExpandPage, expand_request
from .memory.live import keep_live
from .memory.locations import index_root, working_folder
from .memory.recall import DEFAULT_LIMIT, RecallResponse, recall_request
from .memory.recall import REQUEST_KINDS as RECALL_KINDS
from .memory.render import Door, render_expand, render_recall, render_sessions

INSTRUCTIONS = """\
Memory of past coding-agent sessions (Claude Code, Codex, Gemini CLI, Copilot CLI, OpenCode,
Cline, Aider, Pi and more: `sessions` lists them), searchable by words and by structure.
Use `recall` before redoing work or when the user refers to something from an earlier
session (a decision, an error, a file, a command, an identifier): ask in plain words, as
you would ask a colleague. Answers are text that
prints the exact next calls as a tool name and its JSON arguments: under each session's
hits, `expand: expand {...}` reads them; `more: ...` continues a paged answer; a long
entry cut in a range says the `expand` call that reads it on. Make those calls as
written. The addresses a compaction summary prints (`L12`, `[L12 ... L31]`,
`a1b2c3d4/3`) go to `expand` as they are: `addresses`, or `range: "L12:L31"`.
`stale_pointer` from `expand` means the session changed since the hit: call `recall`
again. (The structured content holds the same answer as JSON: each hit's `follow` and a
page's `next` are those calls' arguments.)"""

RECALL_DESCRIPTION = """\
Search past sessions. Ask in plain words (a sentence or its key words): every entry
holding any of the words is ranked by relevance, entries holding all of them first;
`matched` is "all" when every hit holds every word, "any" when some hold only some
(`allWords` of them hold all). `match: "all"` keeps only entries holding every word;
`mode: "phrase"` finds exact word sequences, `mode: "regex"` single words by pattern.
Exact filters combine with the words or stand alone: `role`
(user, assistant, toolResult), `tool` (tool name), `ref` (Fabric operation ref, e.g.
omp.grep), `provider`, `action`, `outcome` (succeeded, failed, ...), `since`/`until`
(ISO-8601 times), `session` (id or path), `agent` (pi, omp, claude-code, codex, catui,
fabro, copilot, kimi, gemini, …), `branches: "active"` (only the branch the session
continues from).
Give a query or at least one filter. Hits come by relevance (newest first without a query),
grouped by session in the text (the session's agent, project, path and sourceHash once, then
one line per hit and its snippet, then the `expand` call that reads the group's hits); the
structured answer has each hit's `sessionId`, `agent`, `project`, `address`, `snippet`,
`tier`, `stale` and `follow`. To read one hit in full, call `expand` with its `follow`
object exactly as given. `next`
is null on the last page; otherwise pass it unchanged to `recall` for more (`limit` at
most 50 per page: more is clamped and noted under `clamped`; `offset` skips hits)."""

EXPAND_DESCRIPTION = """\
Read entries of one session as text: each entry's address, role and time, what was said,
thinking, tool calls as name(arguments) and tool results (`raw: true` returns the
verbatim JSON lines instead). Pass a recall hit's `follow` object unchanged, or the
addresses a compaction summary prints, as they are: `addresses` (["L12"], ["a1b2c3d4/3"])
or `range` ("L12:L31" for the summary's [L12 ... L31]; an end on a line between entries
moves to the nearest entry, noted under `snapped`); `before`/`after` add that many
neighbouring entries around each address. Also: `entries` (entry ids), `indices` (0-based
entry positions), `positions` ("FIRST:LAST" positions), `anchor` (an entry id). In a range
or neighbourhood each entry shows at most `entryChars` (1200) characters: a longer one
shows its head and tail and the exact `expand` call that reads it on (its address and
`textOffset`); `kinds` (user, assistant, tool, edit, error, other) keeps only those
entries. Pages hold at most `maxChars` (20000; most 24000) characters; larger values are
clamped and noted under `clamped`. The answer says how many entries the selection holds;
when `next` is not null, pass it unchanged to `expand` for the rest (a long entry
continues at `textOffset`). Error `stale_pointer`:
the session changed since recall gave the pointer; call `recall` again and follow the new
hit. Secrets (API keys, tokens,
passwords, private keys) come back masked as `[REDACTED:<kind>]`; set `showSecrets` to
true only when the user explicitly asks for the raw value."""

SESSIONS_DESCRIPTION = """\
List the indexed sessions, newest first: id, path, agent, project folder (`project`),
last modification, tier (hot: checked against its file on every recall), entry and
operation counts, hashes and whether the index copy is stale. Filter by `agent`, by
`project` (a folder: its sessions and those of folders inside it) and by last
modification (`since`, `until`, ISO-8601). Paged by `limit`/`offset`; pass `next`
unchanged for the following page."""

READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
LOCATION_KEYS = ("index", "sessions")
DEFAULT_SESSIONS_LIMIT = 50
RECALL_KEYS = frozenset(RECALL_KINDS)
EXPAND_KEYS = frozenset(EXPAND_KINDS)


@dataclass(frozen=True, slots=True)
class Places:
    """Where this server reads: as given on its command line (None: the default) and
    resolved, to compare with what a request names."""

    sessions: str | None
    index: str | None
    sessions_dirs: tuple[Path, ...]
    index_dir: Path
    agents: str | None = None
    project: str | None = None
    """The folder the server was started in (a host starts it in the project): its
    sessions rank first in recall."""

    @classmethod
    def of(cls, sessions: str | None, index: str | None, agents: str | None = None,
           project: str | None = None) -> Places:
        index_dir = _resolved(index_root(index))
        return cls(sessions, index, default_roots(sessions, index_dir, agents)[0], index_dir,
                   agents, project)

    def bind(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """``request`` without its location keys, plus this server's own, after checking
        that any location key it carries names this server's place."""
        own = {"index": (self.index, (self.index_dir,)),
               "sessions": (self.sessions, self.sessions_dirs)}
        bound = {k: v for k, v in request.items() if k not in LOCATION_KEYS and v is not None}
        for key in LOCATION_KEYS:
            value = request.get(key)
            given, places = own[key]
            if isinstance(value, str):
                check_name(key, value)  # before it is resolved as a path
            if value is not None and (not isinstance(value, str) or not all(
                    _resolved(Path(part)) in places for part in value.split(os.pathsep))):
                where = ", ".join(map(str, places))
                raise LocationRefusedError(
                    f"{key} {clipped(value)}: this server answers only from its own {key} "
                    f"({where}); drop the {key!r} key or pass the object exactly as this "
                    "server gave it"
                )
            if given is not None:
                bound[key] = given
        return bound


def _resolved(path: Path) -> Path:
    return path.expanduser().resolve()


def answer(value: Mapping[str, Any], text: str) -> CallToolResult:
    """A tool's answer: ``text`` for the model, the JSON value as structured content."""
    return CallToolResult(content=[TextContent(type="text", text=text)],
                          structured_content=dict(value))


def json_schema(hint: Any, names: Mapping[str, Any], *, in_list: bool = False) -> dict[str, Any]:
    """The JSON Schema of a type of the answers' TypedDicts (``names`` resolves the names
    their annotations use): objects list their keys, those without ``NotRequired`` (in a
    total TypedDict) required; other keys are allowed, so a field added later breaks no
    client. An object that is an item of a list (a hit, an entry, a session) lists its keys
    by name only: the client checks every answer against the schema, one typed value of
    each item at a time, and a page of ten hits took it milliseconds (docs/mcp.md)."""
    origin, args = get_origin(hint), get_args(hint)
    if is_typeddict(hint):
        hints = {key: _evaluated(value, names) for key, value in hint.__annotations__.items()}
        required = [key for key, value in hints.items()
                    if hint.__total__ and get_origin(value) is not NotRequired]
        return {"type": "object",
                "properties": {key: True if in_list else json_schema(value, names)
                               for key, value in hints.items()},
                "required": required}
    if origin is NotRequired:
        return json_schema(args[0], names)
    if origin is Literal:
        return {"enum": list(args)}
    if origin in (UnionType, Union):
        return {"anyOf": [json_schema(arg, names) for arg in args]}
    if origin is list:
        return {"type": "array", "items": json_schema(args[0], names, in_list=True)}
    if origin is dict:
        return {"type": "object", "additionalProperties": json_schema(args[1], names)}
    return {"type": JSON_TYPES[hint]}


def _evaluated(annotation: Any, names: Mapping[str, Any]) -> Any:
    """An annotation written as a string (``from __future__ import annotations``), evaluated
    with ``names`` (TypedDict keeps its module's, which lack names imported for types only)."""
    text = getattr(annotation, "__forward_arg__", annotation)
    return eval(text, dict(names)) if isinstance(text, str) else text


JSON_TYPES: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean",
                              type(None): "null"}


def refusal(code: str, message: str) -> CallToolResult:
    """A tool error a model can act on: the text starts with the error code."""
    return CallToolResult(content=[TextContent(type="text", text=f"{code}: {message}")],
                          is_error=True)


CALLS_AT_ONCE = 8
"""Tool calls answered at the same time, each in a worker thread: a slow one (a regex at its
time cap, a large session hashed) never holds up the others or the protocol."""
_CALLS = anyio.CapacityLimiter(CALLS_AT_ONCE)


async def _run(call: Callable[[], Any], render: Callable[[Any, Door], str]) -> CallToolResult:
    """``call``'s answer, computed off the event loop and rendered for the model by
    ``render``, or its error as a refusal."""
    try:
        value = await anyio.to_thread.run_sync(call, limiter=_CALLS)
    except FabricMemoryError as exc:
        return refusal(exc.code, exc.message)
    return answer(value, render(value, "mcp"))


def output_schemas() -> dict[str, dict[str, Any]]:
    """Each tool's output schema: the JSON Schema of the TypedDict its answer is."""
    names = {**vars(typing), **vars(arguments), **vars(catalog), **vars(expand_module),
             **vars(recall_module)}
    return {"recall": json_schema(RecallResponse, names),
            "expand": json_schema(ExpandPage, names),
            "sessions": json_schema(SessionsReport, names)}


class MemoryServer(MCPServer):
    """The SDK's server, with argument errors (wrong types, unknown tool) reported as
    ``usage:`` tool errors like every other refusal, and each tool's output schema declared
    (the SDK derives none for a tool that builds its own result)."""

    _schemas: dict[str, dict[str, Any]] | None = None

    async def list_tools(self) -> list[MCPTool]:
        if self._schemas is None:
            self._schemas = output_schemas()
        tools = await super().list_tools()
        for tool in tools:
            tool.output_schema = self._schemas.get(tool.name, tool.output_schema)
        return tools

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if cause is not None and hasattr(cause, "errors"):
                problems = "; ".join(
                    f"{'.'.join(str(p) for p in error['loc'])}: {error['msg']}"
                    for error in cause.errors()
                )
                return refusal("usage", f"{name}: {problems}")
            if isinstance(exc.__cause__, FabricMemoryError):
                return refusal(exc.__cause__.code, exc.__cause__.message)
            raise

    async def run_screened_stdio(self, log: Callable[[str], None] | None = None) -> None:
        """Serve on stdin/stdout as :meth:`run_stdio_async` does, except that every request
        line the SDK could not decode gets its JSON-RPC error (:mod:`fabric_memory.jsonrpc`)
        instead of no reply."""
        lines = _RequestLines(_claimed_stdin(), log)
        async with stdio_server(stdin=cast(Any, lines)) as (read_stream, write_stream):
            lines.answer_to(write_stream)
            lowlevel = self._lowlevel_server
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


def _claimed_stdin() -> IO[bytes]:
    """The client's stream on a private descriptor; fd 0 then reads the null device, so
    nothing this process runs can take the client's bytes (as the SDK's transport does)."""
    try:
        private = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
    except OSError:
        return sys.stdin.buffer
    return os.fdopen(private, "rb", closefd=False)  # a reader thread may still block on it


class _RequestLines:
    """The client's lines, as the SDK's stdio transport iterates them, screened: a line it
    could not decode is answered here (or, a notification, logged) and never reaches it."""

    def __init__(self, stream: IO[bytes], log: Callable[[str], None] | None) -> None:
        self._stream = stream
        self._log = log
        self._replies: MemoryObjectSendStream[SessionMessage] | None = None
        self._ready = anyio.Event()

    def answer_to(self, replies: MemoryObjectSendStream[SessionMessage]) -> None:
        self._replies = replies
        self._ready.set()

    def __aiter__(self) -> _RequestLines:
        return self

    async def __anext__(self) -> str:
        while True:
            line = await anyio.to_thread.run_sync(read_line, self._stream)
            if line is None:
                raise StopAsyncIteration
            try:
                text, message = screen(line)
                if text is None:
                    continue
                _decodable(text, message)
            except Refused as exc:
                await self._refuse(exc.refusal)
                continue
            return text

    async def _refuse(self, refused: Refusal) -> None:
        if self._log is not None:
            answer = "answered" if refused.reply else "a notification, not answered"
            self._log(f"request line refused ({answer}): {refused.message[:200]}")
        if not refused.reply:
            return
        await self._ready.wait()
        assert self._replies is not None
        error = mcp_types.JSONRPCError(
            jsonrpc="2.0", id=refused.id,
            error=mcp_types.ErrorData(code=refused.code, message=refused.message))
        await self._replies.send(SessionMessage(error))


def _decodable(text: str, message: dict[str, Any]) -> None:
    """Raise :class:`Refused` unless the SDK's transport can decode ``text``."""
    try:
        mcp_types.jsonrpc_message_adapter.validate_json(text, by_name=False)
    except ValidationError as exc:
        errors = exc.errors()
        # Of the message kinds the SDK tried, the one this message means to be.
        meant = "JSONRPCRequest" if "id" in message and "method" in message else None
        errors = [e for e in errors if e["loc"][:1] == (meant,)] or errors
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or '$'}: {error['msg']}"
            for error in errors[:3])
        raise Refused(refusal_for(message, problems)) from None


def build_server(places: Places, hot_sessions: int = DEFAULT_HOT_SESSIONS) -> MemoryServer:
    """The MCP server over ``places`` (no transport yet)."""
    server = MemoryServer(name="fabric-memory", version=__version__, instructions=INSTRUCTIONS,
                          log_level="WARNING")
    hot = {} if hot_sessions == DEFAULT_HOT_SESSIONS else {"hotSessions": hot_sessions}

    @server.tool(name="recall", description=RECALL_DESCRIPTION, annotations=READ_ONLY)
    async def recall(
        query: str = "",
        mode: Literal["literal", "phrase", "regex"] = "literal",
        match: Literal["any", "all"] = "any",
        role: str | None = None,
        tool: str | None = None,
        ref: str | None = None,
        provider: str | None = None,
        action: str | None = None,
        outcome: str | None = None,
        since: str | None = None,
        until: str | None = None,
        session: str | None = None,
        agent: str | None = None,
        branches: Literal["active", "all"] = "all",
        limit: int = DEFAULT_LIMIT,
        offset: int = 0,
        hotSessions: int | None = None,
        index: str | None = None,
        sessions: str | None = None,
        project: str | None = None,
        preferProject: str | None = None,
    ) -> CallToolResult:
        given = {k: v for k, v in locals().items() if k in RECALL_KEYS}
        prefer = ({"preferProject": places.project}
                  if places.project and project is None and preferProject is None else {})
        return await _run(lambda: recall_request({**hot, **prefer, **places.bind(given)}),
                          render_recall)

    @server.tool(name="expand", description=EXPAND_DESCRIPTION, annotations=READ_ONLY)
    async def expand(
        session: str,
        entries: list[str] | None = None,
        addresses: list[str] | None = None,
        indices: list[int] | None = None,
        range: str | None = None,
        positions: str | None = None,
        anchor: str | None = None,
        before: int | None = None,
        after: int | None = None,
        expectedSourceHash: str | None = None,
        expectedLineageFingerprint: str | None = None,
        maxEntries: int | None = None,
        maxChars: int | None = None,
        entryOffset: int | None = None,
        textOffset: int | None = None,
        entryChars: int | None = None,
        kinds: list[Literal["user", "assistant", "tool", "edit", "error", "other"]] | None = None,
        showSecrets: bool | None = None,
        raw: bool | None = None,
        index: str | None = None,
        sessions: str | None = None,
    ) -> CallToolResult:
        given = {k: v for k, v in locals().items() if k in EXPAND_KEYS}
        return await _run(lambda: expand_request(places.bind(given)), render_expand)

    @server.tool(name="sessions", description=SESSIONS_DESCRIPTION, annotations=READ_ONLY)
    async def sessions(
        project: str | None = None,
        agent: str | None = None,
        since: str | None = None,
        until: str | None = None,
        limit: int = DEFAULT_SESSIONS_LIMIT,
        offset: int = 0,
        hotSessions: int | None = None,
    ) -> CallToolResult:
        chosen = hot_sessions if hotSessions is None else hotSessions
        return await _run(lambda: list_sessions(
            index=places.index, hot_sessions=chosen, project=project, since=since,
            until=until, limit=limit, offset=offset, agent=agent, sessions=places.sessions),
            render_sessions)

    return server


def serve(
    *,
    sessions: str | None = None,
    index: str | None = None,
    hot_sessions: int = DEFAULT_HOT_SESSIONS,
    live: bool = True,
    log: Callable[[str], None] | None = None,
    agents: str | None = None,
) -> None:
    """Serve MCP on stdin/stdout until stdin closes or SIGTERM/SIGINT arrives; the live
    index thread finishes its step (its commit) before this returns. ``agents`` narrows
    what the live index reads (as ``reindex --agents``)."""
    places = Places.of(sessions, index, agents, working_folder())
    server = build_server(places, hot_sessions)
    stop = threading.Event()
    watcher: threading.Thread | None = None
    if live:
        watcher = threading.Thread(target=_keep_live, args=(places, stop, log),
                                   name="fabric-memory-live", daemon=True)
        watcher.start()

    def finish() -> None:
        stop.set()
        if watcher is not None:
            watcher.join()

    try:
        anyio.run(_serve_until_closed, server, finish, log)
    finally:
        finish()


async def _serve_until_closed(server: MemoryServer, finish: Callable[[], None],
                              log: Callable[[str], None] | None) -> None:
    async with anyio.create_task_group() as group:

        async def on_signal() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as received:
                async for _ in received:
                    # The transport's stdin reader is a thread blocked in read(); nothing
                    # cancels it, so after the live thread's last commit the process ends.
                    finish()
                    sys.stdout.flush()
                    os._exit(0)

        group.start_soon(on_signal)
        await server.run_screened_stdio(log)
        group.cancel_scope.cancel()


def _keep_live(places: Places, stop: threading.Event, log: Callable[[str], None] | None) -> None:
    keep_live(sessions=places.sessions, index=places.index_dir, stop=stop, log=log,
              agents=places.agents)
