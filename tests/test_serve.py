"""``fabric-memory serve``: the official MCP client against the server as a real subprocess.

Tool list and schemas, answers equal to the CLI's ``--json``, errors as tool errors that
start with their code, refused location keys, the live index (a new file, a deleted
file, a CLI reindex meanwhile) and clean exits. Waits poll with a generous deadline:
nothing here asserts a duration.
"""

from __future__ import annotations

import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.types import CallToolResult

from fabric_memory.cli import main
from fabric_memory.memory.expand import ExpandRequest
from fabric_memory.memory.recall import RecallHit, RecallRequest
from fabric_memory.memory.reindex import reindex
from fabric_memory.memory.render import render_expand, render_recall, render_sessions

from .memory_builder import SessionBuilder, operation

DEADLINE = 60.0
"""Longest a live change may take to show before a test gives up (not a timing check)."""


@pytest.fixture
def places(tmp_path: Path) -> dict[str, Path]:
    sessions = tmp_path / "sessions"
    first = SessionBuilder(sessions / "--repo--" / "one.jsonl")
    first.user("please fix the Zürich parser")
    first.assistant_call("c1", "fabric_exec", {"code": "x"})
    first.fabric_result("c1", [operation(0, "pi.grep", {"path": "src"}, "failed",
                                         error="no match")])
    first.write()
    second = SessionBuilder(sessions / "--other--" / "two.jsonl")
    for n in range(14):
        second.user(f"note {n}: the parser keeps quoting rules")
    second.write()
    index = tmp_path / "index"
    reindex(sessions=sessions, index=index, workers=1)
    return {"sessions": sessions, "index": index, "one": first.path, "two": second.path}


def serve_command(places: dict[str, Path], *extra: str) -> list[str]:
    return [sys.executable, "-m", "fabric_memory.cli", "serve", "--sessions",
            str(places["sessions"]), "--index", str(places["index"]), *extra]


@asynccontextmanager
async def connected(places: dict[str, Path], *extra: str, env: dict[str, str] | None = None,
                    stderr: Path | None = None) -> AsyncIterator[Client]:
    command = serve_command(places, *extra)
    if stderr is not None:  # the server's stderr into a file (the client would share ours)
        command = ["sh", "-c", 'exec "$@" 2>"$0"', str(stderr), *command]
    params = StdioServerParameters(command=command[0], args=command[1:],
                                   env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})
    async with Client(params) as client:
        yield client


def run(body: Callable[[Client], Awaitable[None]], places: dict[str, Path],
        *extra: str, env: dict[str, str] | None = None, stderr: Path | None = None) -> None:
    async def go() -> None:
        async with connected(places, *extra, env=env, stderr=stderr) as client:
            await body(client)

    anyio.run(go)


def cli_json(*argv: str) -> Any:
    """What ``fabric-memory ARGV --json`` prints, from a separate process."""
    done = subprocess.run([sys.executable, "-m", "fabric_memory.cli", *argv, "--json"],
                          capture_output=True, check=False)
    return orjson.loads(done.stdout)


def value(result: CallToolResult) -> Any:
    """The structured answer, after checking the text block is what the CLI prints for it with
    this server's calls (:func:`text`)."""
    assert not result.is_error, result.content
    assert len(result.content) == 1
    structured = result.structured_content
    render = (render_recall if "hits" in structured else
              render_expand if "entries" in structured else render_sessions)
    assert text(result) == render(structured, "mcp")  # type: ignore[operator]
    return structured


def text(result: CallToolResult) -> str:
    said: str = getattr(result.content[0], "text", "")
    return said


MCP_CALL = re.compile(r"^(?:  expand|more): (recall|expand|sessions) (\{.*\})", re.MULTILINE)
"""A next call as the server's text writes it: the tool's name and its JSON arguments."""


def error_text(result: CallToolResult) -> str:
    assert result.is_error
    text: str = getattr(result.content[0], "text", "")
    return text


async def poll(check: Callable[[], Awaitable[bool]]) -> bool:
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        if await check():
            return True
        await anyio.sleep(0.1)
    return False


# --- the contract ------------------------------------------------------------------------


def test_tools_and_their_parameters(places: dict[str, Path]) -> None:
    """recall takes exactly the recall request's keys, expand exactly the expand request's
    (session required), sessions its filters and page; all read-only, described for a model
    (plain-word questions, summary addresses as they are printed)."""

    async def body(client: Client) -> None:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(tools) == {"recall", "expand", "sessions"}
        schemas = {name: tool.input_schema for name, tool in tools.items()}
        drift = ("a request key changed: update the tool's parameters in "
                 "fabric_memory/serve.py, REQUEST_KINDS in memory/recall.py or memory/expand.py, "
                 "and docs/mcp.md's tool table")
        assert set(schemas["recall"]["properties"]) == set(RecallRequest.__annotations__), drift
        assert set(schemas["expand"]["properties"]) == set(ExpandRequest.__annotations__), drift
        assert schemas["expand"]["required"] == ["session"]
        assert not schemas["recall"].get("required")
        assert set(schemas["sessions"]["properties"]) == {
            "project", "agent", "since", "until", "limit", "offset", "hotSessions"}
        assert schemas["recall"]["properties"]["mode"]["enum"] == ["literal", "phrase", "regex"]
        for tool in tools.values():
            assert tool.annotations is not None and tool.annotations.read_only_hint
        assert "follow" in (tools["recall"].description or "")
        assert "stale_pointer" in (tools["expand"].description or "")
        # A model learns from the descriptions alone to ask in plain words and to expand
        # the addresses a summary prints.
        assert "plain words" in (tools["recall"].description or "")
        assert schemas["recall"]["properties"]["match"]["default"] == "any"
        assert '"L12:L31"' in (tools["expand"].description or "")
        assert "`raw: true`" in (tools["expand"].description or "")
        assert "next" in (tools["sessions"].description or "")
        assert client.instructions and "recall" in client.instructions
        for tool in tools.values():  # the client checks each answer against its schema
            assert tool.output_schema is not None and tool.output_schema["type"] == "object"
        hit = tools["recall"].output_schema["properties"]["hits"]["items"]  # type: ignore[index]
        assert {"sessionId", "address", "follow", "snippet"} <= set(hit["required"])
        # A hit lists every key it may have, by name only (a cheap check for the client).
        assert hit["properties"] == dict.fromkeys(RecallHit.__annotations__, True)
        assert "kinds" in schemas["expand"]["properties"]

    run(body, places)


def test_answers_are_text_for_the_model_with_this_servers_calls(
    places: dict[str, Path],
) -> None:
    """recall's text names each session's path once above its hits, and its expand and more
    lines are this server's tool calls (name and JSON arguments) that, made as written, answer
    what the hits' follow and next do; expand's text says how many entries it holds and its
    more line continues it."""

    async def body(client: Client) -> None:
        result = await client.call_tool("recall", {"query": "parser", "limit": 3})
        answer = value(result)
        said = text(result)
        assert "fabric-memory" not in said and not said.startswith("{")
        paths = {hit["path"] for hit in answer["hits"]}
        assert len(paths) == 2 and len(answer["hits"]) == 3
        for path in paths:
            assert sum(path in line for line in said.splitlines()) == 1
        calls = [(m.group(1), orjson.loads(m.group(2))) for m in MCP_CALL.finditer(said)]
        assert [tool for tool, _ in calls] == ["expand", "expand", "recall"]
        for tool, arguments in calls[:2]:
            page = value(await client.call_tool(tool, arguments))
            hits = [h for h in answer["hits"] if h["sessionId"] == page["sessionId"]]
            assert [e["address"] for e in page["entries"]] == [h["address"] for h in hits]
        following = value(await client.call_tool("recall", calls[2][1]))
        assert following == value(await client.call_tool("recall", answer["next"]))
        pages = await client.call_tool("expand", {"session": str(places["two"]),
                                                  "positions": "0:13", "maxChars": 300})
        page = value(pages)
        assert f"{page['selected']} entries, showing 1-{len(page['entries'])}" in text(pages)
        tool, arguments = next((m.group(1), orjson.loads(m.group(2)))
                               for m in MCP_CALL.finditer(text(pages)))
        assert tool == "expand" and arguments["entryOffset"] == len(page["entries"])
        assert value(await client.call_tool(tool, arguments))["entryOffset"] == len(
            page["entries"])

    run(body, places)


def test_recall_follow_expand_equal_the_cli(places: dict[str, Path]) -> None:
    """A recall answer, its next page and the expand of a hit's follow (passed unchanged)
    are exactly what the CLI prints with --json."""
    where = ("--sessions", str(places["sessions"]), "--index", str(places["index"]))

    async def body(client: Client) -> None:
        answer = value(await client.call_tool("recall", {"query": "parser", "limit": 2}))
        assert answer == cli_json("recall", "parser", "--limit", "2", *where)
        assert answer["total"] == 15 and answer["next"] is not None
        following = value(await client.call_tool("recall", answer["next"]))
        assert following == cli_json("recall", "parser", "--limit", "2", "--offset", "2",
                                     *where)
        hit = answer["hits"][0]
        page = value(await client.call_tool("expand", hit["follow"]))
        follow = hit["follow"]
        assert page == cli_json(
            "expand", follow["session"], "--address", follow["addresses"][0],
            "--expected-source-hash", follow["expectedSourceHash"],
            "--expected-lineage", follow["expectedLineageFingerprint"], *where)
        assert page["entries"][0]["address"] == hit["address"]
        listing = value(await client.call_tool("sessions", {"project": "/repo", "limit": 1}))
        assert listing == cli_json("sessions", "--project", "/repo", "--limit", "1",
                                   "--index", str(places["index"]))
        assert listing["total"] == 2 and listing["next"] == {"project": "/repo", "limit": 1,
                                                             "offset": 1}

    run(body, places)


def test_plain_questions_summary_ranges_and_clamps_equal_the_cli(
    pi_mono: dict[str, Path],
) -> None:
    """Through the MCP client, on real sessions: a plain question (default matching), a
    summary's range as text and as raw lines, neighbours of an address and a clamped page are
    exactly what the CLI prints with --json."""
    where = ("--sessions", str(pi_mono["sessions"]), "--index", str(pi_mono["index"]))
    question = "what was the fix when no models are available and no API key is set"
    session = str(pi_mono["sessions"] / "compact.jsonl")

    async def body(client: Client) -> None:
        answer = value(await client.call_tool("recall", {"query": question, "limit": 5}))
        assert answer == cli_json("recall", question, "--limit", "5", *where)
        assert answer["matched"] == "any" and "L81" in [h["address"] for h in answer["hits"]]
        strict = value(await client.call_tool("recall", {"query": question, "match": "all"}))
        assert strict == cli_json("recall", question, "--match", "all", *where)
        assert (strict["total"], strict["matched"]) == (0, "all")
        page = value(await client.call_tool("expand", {
            "session": session, "range": "L12:L16", "maxChars": 100_000}))
        assert page == cli_json("expand", session, "--range", "L12:L16", "--max-chars",
                                "100000", *where)
        assert page["clamped"] == {"maxChars": [100_000, 24_000]}
        assert [e["address"] for e in page["entries"]] == ["L12", "L13", "L14", "L15", "L16"]
        raw = value(await client.call_tool("expand", {
            "session": session, "addresses": ["L20"], "before": 1, "after": 1, "raw": True}))
        assert raw == cli_json("expand", session, "--address", "L20", "--before", "1",
                               "--after", "1", "--raw", *where)
        lines = (pi_mono["sessions"] / "compact.jsonl").read_bytes().split(b"\n")
        assert [e["text"].encode() for e in raw["entries"]] == lines[18:21]

    run(body, pi_mono, "--no-watch")


def test_errors_start_with_their_code(places: dict[str, Path]) -> None:
    """Library errors and malformed arguments are tool errors whose text starts with the
    code a model can act on."""

    async def body(client: Client) -> None:
        hit = value(await client.call_tool("recall", {"ref": "pi.grep"}))["hits"][0]
        stale = await client.call_tool("expand", {**hit["follow"],
                                                  "expectedSourceHash": "0" * 32})
        assert error_text(stale).startswith("stale_pointer: ")
        assert "recall again" in error_text(stale)
        missing = await client.call_tool("expand", {"session": "no-such-session",
                                                    "addresses": ["e001"]})
        assert error_text(missing).startswith("session_not_found: ")
        empty = await client.call_tool("recall", {})
        assert error_text(empty).startswith("bad_query: ")
        typed = await client.call_tool("recall", {"query": "x", "limit": "many"})
        assert error_text(typed).startswith("usage: recall: limit: ")
        bounds = await client.call_tool("recall", {"query": "x", "limit": 0})
        assert error_text(bounds).startswith("usage: --limit 0: must be between 1 and 50")

    run(body, places)


def test_location_keys_must_name_the_servers_places(
    places: dict[str, Path], tmp_path: Path
) -> None:
    """index/sessions keys naming another folder are refused; the server's own places
    (even spelled another way) pass."""
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(places["sessions"], elsewhere)

    async def body(client: Client) -> None:
        hit = value(await client.call_tool("recall", {"ref": "pi.grep"}))["hits"][0]
        follow = hit["follow"]
        assert follow["index"] == str(places["index"])
        assert follow["sessions"] == str(places["sessions"])
        for key, other in (("index", tmp_path), ("sessions", elsewhere)):
            refused = await client.call_tool("expand", {**follow, key: str(other)})
            assert error_text(refused).startswith("location_refused: ")
            refused = await client.call_tool("recall", {"ref": "pi.grep", key: str(other)})
            assert error_text(refused).startswith("location_refused: ")
        respelled = {**follow, "index": str(places["index"]) + "/./",
                     "sessions": str(places["sessions"] / ".." / "sessions")}
        assert value(await client.call_tool("expand", respelled))["entries"]
        outside = await client.call_tool("expand", {"session": str(elsewhere / "--repo--" /
                                                                   "one.jsonl"),
                                                    "indices": [0]})
        assert error_text(outside).startswith("session_not_found: ")

    run(body, places)


def test_hostile_values_are_clean_tool_errors(places: dict[str, Path], tmp_path: Path) -> None:
    """A NUL byte in session or index, 1e20 hot sessions, a 2 MB session or location: each is
    a tool error starting with its code that quotes at most 60 characters of the value, and
    the server writes no traceback."""
    stderr = tmp_path / "stderr"
    huge = "a/" * 1_000_000

    async def body(client: Client) -> None:
        hit = value(await client.call_tool("recall", {"ref": "pi.grep"}))["hits"][0]
        calls = [
            ("expand", {"session": "one\0.jsonl", "indices": [0]}),
            ("expand", {**hit["follow"], "index": str(places["index"]) + "\0"}),
            ("recall", {"query": "parser", "index": "\0" + str(places["index"])}),
            ("recall", {"query": "parser", "session": "x\0y"}),
            ("recall", {"query": "parser", "hotSessions": 1e20}),
            ("sessions", {"hotSessions": 1e20}),
            ("expand", {"session": huge, "indices": [0]}),
            ("recall", {"query": "parser", "sessions": huge}),
            ("expand", {**hit["follow"], "index": "/elsewhere/" + "x" * 1_000_000}),
            ("expand", {**hit["follow"], "expectedSourceHash": "f" * 1_000_000}),
            ("recall", {"query": "parser", "index": "/elsewhere/" + "x" * 4000}),
            ("expand", {**hit["follow"], "sessions": "/elsewhere/" + "x" * 4000}),
            ("expand", {**hit["follow"], "expectedSourceHash": "f" * 4000}),
            ("sessions", {"since": "y" * 100_000}),
        ]
        for name, arguments in calls:
            text = error_text(await client.call_tool(name, arguments))
            code = text.split(": ", 1)[0]
            assert code in ("usage", "location_refused", "stale_pointer", "bad_query"), text
            assert not any(c * 61 in text for c in "xfy") and "a/" * 31 not in text, text[:400]
            assert len(text) < 400, text[:400]

    run(body, places, stderr=stderr)
    assert "Traceback" not in stderr.read_text()


SLOW_REGEX = r"(\w+\s?)*(\w+\s?)*(\w+\s?)*x"
"""Short, but Tantivy takes seconds to build its automaton: the call lasts until the regex
time cap (2 s) refuses it."""


def test_a_slow_call_does_not_stall_the_others(places: dict[str, Path]) -> None:
    """While one call is slow (a regex that takes the whole time cap), other calls are
    answered: tools run off the server's event loop."""
    finished: list[str] = []

    async def body(client: Client) -> None:
        async def slow() -> None:
            result = await client.call_tool("recall", {"query": SLOW_REGEX, "mode": "regex"})
            assert not result.is_error or error_text(result).startswith("bad_query: ")
            finished.append("slow")

        async def quick() -> None:
            await anyio.sleep(0.2)  # the slow call is in flight
            for _ in range(3):
                assert value(await client.call_tool("recall", {"query": "Zürich"}))["total"] == 1
            finished.append("quick")

        async with anyio.create_task_group() as group:
            group.start_soon(slow)
            group.start_soon(quick)

    run(body, places)
    assert finished == ["quick", "slow"]


# --- the live index ------------------------------------------------------------------------


async def hits(client: Client, query: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = value(await client.call_tool("recall", {"query": query}))[
        "hits"]
    return found


@pytest.mark.parametrize("watcher", ["events", "polling"])
def test_new_and_deleted_files_follow_the_folder(places: dict[str, Path], watcher: str) -> None:
    """A session written after start becomes recallable, an appended message too, and a
    deleted session stops being found, with no reindex run by anyone (with file events,
    and with the polling fallback where a platform gives none). No session is hot, so no
    query re-checks a file: only the live index can see these changes."""
    fresh = SessionBuilder(places["sessions"] / "--new-project--" / "three.jsonl")
    fresh.user("the heliotrope migration finally passed")

    async def body(client: Client) -> None:
        assert await hits(client, "heliotrope") == []
        fresh.write()

        async def appeared() -> bool:
            return len(await hits(client, "heliotrope")) == 1

        assert await poll(appeared), "the new session never became recallable"
        fresh.append("and the zeppelin cache too")

        async def appended() -> bool:
            return len(await hits(client, "zeppelin")) == 1

        assert await poll(appended), "the appended message never became recallable"
        places["two"].unlink()

        async def gone() -> bool:
            return await hits(client, "quoting") == []

        assert await poll(gone), "the deleted session is still found"
        listing = value(await client.call_tool("sessions", {}))
        assert {Path(s["path"]).name for s in listing["sessions"]} == {"one.jsonl",
                                                                      "three.jsonl"}

    run(body, places, "--hot-sessions", "0",
        env={"WATCHFILES_FORCE_POLLING": "1"} if watcher == "polling" else {})


def test_a_sharded_index_serves_and_stays_live(places: dict[str, Path], tmp_path: Path) -> None:
    """Over a sharded index (one shard per session), the server's recall, expand and sessions
    answer as the CLI does, and a session written after start becomes recallable (the live
    index's catch-up build takes it into a shard, or a live step into the delta)."""
    places = {**places, "index": tmp_path / "sharded"}
    report = reindex(sessions=places["sessions"], index=places["index"], sharded=True,
                     shard_bytes=1, workers=1)
    assert report["shards"]["total"] == 2
    where = ("--sessions", str(places["sessions"]), "--index", str(places["index"]))
    fresh = SessionBuilder(places["sessions"] / "--new-project--" / "three.jsonl")
    fresh.user("the heliotrope migration finally passed")

    async def body(client: Client) -> None:
        answer = value(await client.call_tool("recall", {"query": "parser", "limit": 2}))
        assert answer == cli_json("recall", "parser", "--limit", "2", *where)
        assert answer["total"] == 15
        page = value(await client.call_tool("expand", answer["hits"][0]["follow"]))
        assert page["entries"][0]["address"] == answer["hits"][0]["address"]
        assert value(await client.call_tool("sessions", {}))["total"] == 2
        fresh.write()

        async def appeared() -> bool:
            return len(await hits(client, "heliotrope")) == 1

        assert await poll(appeared), "the new session never became recallable"

    run(body, places)


def test_cli_reindex_while_serving(places: dict[str, Path]) -> None:
    """A CLI reindex takes the same writer lock while the server runs, and both go on:
    the server answers throughout and sees what the CLI indexed."""
    extra = SessionBuilder(places["sessions"] / "--repo--" / "four.jsonl")
    extra.user("a marmalade regression in the importer")

    async def body(client: Client) -> None:
        assert value(await client.call_tool("recall", {"query": "Zürich"}))["total"] == 1
        extra.write()
        status = main(["reindex", "--sessions", str(places["sessions"]), "--index",
                       str(places["index"]), "--workers", "1"])
        assert status == 0

        async def found() -> bool:
            return len(await hits(client, "marmalade")) == 1

        assert await poll(found)
        assert value(await client.call_tool("recall", {"query": "Zürich"}))["total"] == 1

    run(body, places, "--no-watch")


def test_a_watcher_that_cannot_run_is_reported(places: dict[str, Path], tmp_path: Path) -> None:
    """With its sessions root gone, the server says on stderr that the live index is off,
    and still answers from the index."""
    stderr = tmp_path / "stderr"
    shutil.rmtree(places["sessions"])

    async def body(client: Client) -> None:
        assert value(await client.call_tool("recall", {"query": "Zürich"}))["total"] == 1

    run(body, places, "--hot-sessions", "0", stderr=stderr)
    err = stderr.read_text()
    assert f"fabric-memory serve: live index off: {places['sessions']}: sessions directory " \
        "does not exist" in err, err
    assert "Traceback" not in err


# --- the raw protocol: one reply per request --------------------------------------------


class RawServer:
    """``fabric-memory serve`` driven by bytes: lines written to its stdin, replies read from
    its stdout by a thread (each wait bounded)."""

    def __init__(self, places: dict[str, Path]) -> None:
        self.process = subprocess.Popen(serve_command(places, "--no-watch"),
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE)
        self.replies: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.pings = 0

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.replies.put(line)

    def send(self, line: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line)
        self.process.stdin.flush()

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        self.send(orjson.dumps(message) + b"\n")
        reply: dict[str, Any] = orjson.loads(self.replies.get(timeout=DEADLINE))
        return reply

    def replies_to(self, line: bytes, results: set[Any]) -> list[dict[str, Any]]:
        """Every reply the server writes for ``line``: those before its answer to a ping
        sent after it (a refusal is written before the next line is read), and the tool
        results for ``results`` ids (computed in threads, they may come later), up to a
        second ping's answer."""
        self.send(line)
        found: list[dict[str, Any]] = []
        for _ in range(2):
            self.pings += 1
            ident = f"ping-{self.pings}"
            self.send(orjson.dumps({"jsonrpc": "2.0", "id": ident, "method": "ping"}) + b"\n")
            answered = False
            while not answered or results - {reply.get("id") for reply in found}:
                reply = orjson.loads(self.replies.get(timeout=DEADLINE))
                if reply.get("id") == ident:
                    assert reply.get("result") == {}, reply
                    answered = True
                else:
                    found.append(reply)
        return found

    def close(self) -> str:
        """Close stdin; the server exits 0. Its stderr."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            status = self.process.wait(timeout=DEADLINE)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
        stderr = self.process.stderr.read().decode() if self.process.stderr else ""
        assert status == 0, stderr
        return stderr


@pytest.fixture(scope="module")
def raw_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RawServer]:
    root = tmp_path_factory.mktemp("raw")
    sessions = root / "sessions"
    session = SessionBuilder(sessions / "--repo--" / "one.jsonl")
    session.user("please fix the Zürich parser")
    session.write()
    reindex(sessions=sessions, index=root / "index", workers=1)
    server = RawServer({"sessions": sessions, "index": root / "index"})
    initialized = server.request({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}})
    assert initialized["result"]["serverInfo"]["name"] == "fabric-memory"
    server.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    yield server
    stderr = server.close()
    assert "Traceback" not in stderr, stderr


def _call(ident: Any, query: str) -> bytes:
    arguments = {"name": "recall", "arguments": {"query": query}}
    return orjson.dumps({"jsonrpc": "2.0", "id": ident, "method": "tools/call",
                         "params": arguments}) + b"\n"


SURROGATE = (b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"recall",'
             b'"arguments":{"query":"\\udc80"}}}\n')
RAW_LINES: dict[str, tuple[bytes, tuple[tuple[Any, int | None], ...]]] = {
    # name: (line, ((id, error code or None for a result), ...) of the replies it gets)
    "truncated": (_call(1, "Zürich")[:40] + b"\n", ((None, -32700),)),
    "not UTF-8": (_call(3, "Zürich").replace("ü".encode(), b"\xff"), ((3, None),)),
    "lone surrogate": (SURROGATE, ((2, -32602),)),
    "lone surrogate in the id": (SURROGATE.replace(b'"id":2', b'"id":"\\udc80"'),
                                 ((None, -32600),)),
    "10 MB line": (_call(4, "Zürich " * 1_500_000), ((4, None),)),
    "20 MB line": (_call(5, "Zürich " * 3_000_000), ((5, -32600),)),
    "batch": (b"[" + _call(6, "Zürich").strip() + b"]\n", ((None, -32600),)),
    "not an object": (b"42\n", ((None, -32600),)),
    "params not an object": (b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":7}\n',
                             ((7, -32600),)),
    "an id that is true": (b'{"jsonrpc":"2.0","id":true,"method":"ping"}\n', ((None, -32600),)),
    "nested too deeply": (b"[" * 100_000 + b"\n", ((None, -32700),)),
    "unknown method": (b'{"jsonrpc":"2.0","id":8,"method":"nope"}\n', ((8, -32601),)),
    "notification with a bad method": (b'{"jsonrpc":"2.0","method":"notifications/nope"}\n', ()),
    "notification with a lone surrogate": (
        b'{"jsonrpc":"2.0","method":"notifications/x","params":{"a":"\\udc80"}}\n', ()),
    "blank line": (b"\n", ()),
}


@pytest.mark.parametrize("name", list(RAW_LINES))
def test_every_request_line_gets_exactly_one_reply(raw_server: RawServer, name: str) -> None:
    """A line that is not JSON, not a request the SDK can decode, too long or a batch gets
    exactly one JSON-RPC reply (for its id when it can be read; none for a notification or a
    blank line), and the server answers the next request."""
    line, expected = RAW_LINES[name]
    replies = raw_server.replies_to(line, {ident for ident, code in expected if code is None})
    got = tuple((reply.get("id"), reply["error"]["code"] if "error" in reply else None)
                for reply in replies)
    assert got == expected, replies
    for reply in replies:
        assert reply["jsonrpc"] == "2.0"
        if "error" in reply:
            assert reply["error"]["message"], reply
    if name == "10 MB line":  # a result: the tool's own refusal of the long query
        assert replies[0]["result"]["isError"] and "usage:" in str(replies[0]["result"])


# --- exits -------------------------------------------------------------------------------


def _initialize(process: subprocess.Popen[bytes]) -> dict[str, Any]:
    assert process.stdin is not None and process.stdout is not None
    request = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"}}}
    process.stdin.write(orjson.dumps(request) + b"\n")
    process.stdin.flush()
    reply: dict[str, Any] = orjson.loads(process.stdout.readline())
    return reply


@pytest.mark.parametrize("how", ["eof", "sigterm"])
def test_clean_exit(places: dict[str, Path], how: str) -> None:
    """On stdin EOF or SIGTERM the server stops watching, lets its writer commit and exits
    with status 0, leaving the index readable and unlocked."""
    process = subprocess.Popen(serve_command(places), stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert _initialize(process)["result"]["serverInfo"]["name"] == "fabric-memory"
        late = SessionBuilder(places["sessions"] / "--repo--" / "late.jsonl")
        late.user("written while the server runs")
        late.write()
        if how == "eof":
            assert process.stdin is not None
            process.stdin.close()
        else:
            process.send_signal(signal.SIGTERM)
        status = process.wait(timeout=DEADLINE)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    stderr = process.stderr.read().decode() if process.stderr else ""
    assert status == 0, stderr
    assert "Traceback" not in stderr
    report = reindex(sessions=places["sessions"], index=places["index"], lock_timeout=0)
    assert report["invalid"] == []


def test_serve_without_the_extra_says_how_to_install(tmp_path: Path) -> None:
    """Without the mcp package, serve prints one line naming the pip install, exit 1."""
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "mcp.py").write_text("raise ImportError('blocked', name='mcp')\n")
    env = {**os.environ, "PYTHONPATH": f"{blocker}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run([sys.executable, "-m", "fabric_memory.cli", "serve"],
                          capture_output=True, env=env, stdin=subprocess.DEVNULL, check=False)
    lines = done.stderr.decode().strip().splitlines()
    assert done.returncode == 1
    assert lines == ["fabric-memory serve: serve needs the MCP SDK (mcp is missing); "
                     "install it with pip install -e '.[mcp]' in the fabric-memory clone"]


def test_expand_masks_secrets_unless_asked(places: dict[str, Path]) -> None:
    """The expand tool masks secrets by default; `showSecrets: true` returns the raw line,
    and a page's `next` keeps asking for it."""
    token = "ghp_" + "a1B2c3D4e5" * 3 + "f6G7h8"
    leaky = SessionBuilder(places["sessions"] / "--repo--" / "leaky.jsonl")
    first = leaky.user(f"export GITHUB_TOKEN={token}")
    leaky.user("and another line")
    leaky.write()
    reindex(sessions=places["sessions"], index=places["index"], workers=1)

    async def body(client: Client) -> None:
        request = {"session": str(leaky.path), "entries": [first]}
        masked = value(await client.call_tool("expand", request))["entries"][0]["text"]
        assert token not in masked and "[REDACTED:github-token]" in masked
        raw = value(await client.call_tool("expand", {**request, "showSecrets": True}))
        assert token in raw["entries"][0]["text"]
        paged = value(await client.call_tool("expand", {
            "session": str(leaky.path), "range": "0:1", "maxEntries": 1, "showSecrets": True}))
        assert paged["next"]["showSecrets"] is True

    run(body, places)


# --- where agents live ---------------------------------------------------------------------


def test_real_pi_connects_with_readmes_command(places: dict[str, Path], tmp_path: Path) -> None:
    """README's Pi setup, run with the real Pi 1.6.0: `pi mcp add ... --exposure direct --
    fabric-memory serve`, then `pi mcp list` connects and lists the three tools as direct."""
    from .pi_host import pi_environment, pi_host

    host = pi_host()
    env = pi_environment(tmp_path / "home", tmp_path / "pi-sessions")
    pi = [str(host.node), str(host.cli), "mcp"]
    added = subprocess.run(
        [*pi, "add", "fabric-memory", "--exposure", "direct", "--", "fabric-memory", "serve",
         "--sessions", str(places["sessions"]), "--index", str(places["index"])],
        env=env, capture_output=True, text=True, timeout=DEADLINE, check=False)
    assert added.returncode == 0, added.stderr
    config = orjson.loads((tmp_path / "home" / ".pi" / "agent" / "mcp.json").read_bytes())
    assert config["mcpServers"]["fabric-memory"]["exposure"] == "direct"
    listed = subprocess.run([*pi, "list"], env=env, capture_output=True, text=True,
                            timeout=DEADLINE * 2, check=False)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert "fabric-memory: connected, 3 tools (direct" in listed.stdout, listed.stdout
    assert "tools: recall, expand, sessions" in listed.stdout, listed.stdout
