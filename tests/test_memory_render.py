"""memory/render.py: one renderer for every door; hits grouped by session, calls in the
door's own form."""

from __future__ import annotations

import shlex
from typing import Any

import orjson

from fabric_memory.cli import build_parser
from fabric_memory.memory.render import call, render_recall


def _hit(session: str, address: str, **extra: Any) -> dict[str, Any]:
    return {"kind": "entry", "sessionId": session, "path": f"/s/{session}.jsonl", "agent": "pi",
            "project": "/repo", "tier": "hot", "stale": False, "entryId": address,
            "address": address, "type": "message", "snippet": f"said at {address}",
            "follow": {"session": session, "addresses": [address],
                       "expectedSourceHash": f"hash-{session}",
                       "expectedLineageFingerprint": f"lineage-{session}",
                       "index": "/idx"},
            **extra}


RESPONSE: Any = {
    "total": 12, "matched": "any", "allWords": 1, "offset": 0,
    "hits": [_hit("one", "L3", role="user", wordsHeld=3, queryWords=3),
             _hit("two", "L9", role="toolResult", tool="bash", isError=True,
                  wordsHeld=2, queryWords=3),
             _hit("one", "L7", role="assistant", wordsHeld=1, queryWords=3)],
    "next": {"query": "the 'odd' parser", "limit": 3, "offset": 3, "mode": "literal",
             "index": "/idx"},
}


def test_hits_are_grouped_by_session_best_first_with_one_header() -> None:
    """The hits of one session sit under one header (path and hash once), in rank order,
    the session of the best hit first; each line says the rank, address, role or tool,
    error and the words held; the group's expand call reads all its hits."""
    text = render_recall(RESPONSE)
    lines = text.splitlines()
    assert lines[0] == "12 hits (1 with every word, ranked first), showing 1-3"
    assert sum("/s/one.jsonl" in line for line in lines) == 1
    assert lines.index("  /s/one.jsonl  sourceHash hash-one") < lines.index(
        "  /s/two.jsonl  sourceHash hash-two")
    assert "  #1 L3 user  (3/3 words)" in lines and "  #3 L7 assistant  (1/3 words)" in lines
    assert "  #2 L9 toolResult bash error  (2/3 words)" in lines
    assert ("  expand: fabric-memory expand one --address L3 --address L7 "
            "--expected-source-hash hash-one --expected-lineage lineage-one --index /idx"
            in lines)


def test_each_door_writes_the_same_call_its_own_way() -> None:
    """The CLI's call parses back to the request (defaults left out, a quote in the query
    kept, a query that starts with a dash after `--`); MCP's and Pi's are the tool's name
    and the request as JSON, without the places those doors fill in themselves."""
    cli = call("cli", "recall", RESPONSE["next"])
    assert cli == ("fabric-memory recall 'the '\"'\"'odd'\"'\"' parser' --limit 3 --offset 3 "
                   "--index /idx")
    parsed = build_parser().parse_args(shlex.split(cli)[1:])
    assert (parsed.query, parsed.limit, parsed.offset, parsed.index_dir) == (
        "the 'odd' parser", 3, 3, "/idx")
    dashed = build_parser().parse_args(shlex.split(call("cli", "recall", {
        "query": "-foo", "offset": 10}))[1:])
    assert (dashed.query, dashed.offset) == ("-foo", 10)
    for door, name in (("mcp", "recall"), ("pi", "memory_recall")):
        tool, _, arguments = call(door, "recall", RESPONSE["next"]).partition(" ")
        assert (tool, orjson.loads(arguments)) == (
            name, {"query": "the 'odd' parser", "limit": 3, "offset": 3})
    expand = {"session": "one", "range": "L1:L9", "kinds": ["edit", "user"],
              "entryOffset": 4, "textOffset": 0, "raw": False, "showSecrets": True}
    cli = call("cli", "expand", expand)
    assert cli == ("fabric-memory expand one --range L1:L9 --kinds edit,user --entry-offset 4 "
                   "--show-secrets")
    parsed = build_parser().parse_args(shlex.split(cli)[1:])
    assert (parsed.kinds, parsed.entry_offset, parsed.show_secrets) == (["edit,user"], 4, True)
    assert call("pi", "expand", expand) == (
        'memory_expand {"session":"one","range":"L1:L9","kinds":["edit","user"],'
        '"entryOffset":4,"showSecrets":true}')
