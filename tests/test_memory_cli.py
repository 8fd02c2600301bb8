"""The memory commands: thin CLI over the library, JSON errors with the expand codes."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path
from typing import Any

import orjson
import pytest

from fabric_memory.cli import main
from fabric_memory.errors import ExpandError, clipped
from fabric_memory.memory.recall import MAX_OFFSET

from .conftest import FIXTURES
from .memory_builder import SessionBuilder, operation
from .reliability import cli, finish


@pytest.fixture
def roots(tmp_path: Path) -> dict[str, Any]:
    builder = SessionBuilder(tmp_path / "sessions" / "--repo--" / "one.jsonl")
    builder.user("please fix the Zürich parser")
    builder.assistant_call("c1", "fabric_exec", {"code": "x"})
    entry = builder.fabric_result(
        "c1", [operation(0, "pi.grep", {"path": "src"}, "failed", error="no match")])
    builder.write()
    return {"sessions": str(tmp_path / "sessions"), "index": str(tmp_path / "index"),
            "path": str(builder.path), "entry": entry, "id": builder.session_id}


def _json(capsys: pytest.CaptureFixture[str], argv: list[str], status: int = 0) -> Any:
    assert main(argv) == status
    return orjson.loads(capsys.readouterr().out)


def test_reindex_recall_expand_round_trip(
    roots: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """reindex, then a structural recall, then expand of its address, all as JSON."""
    where = ["--sessions", roots["sessions"], "--index", roots["index"]]
    report = _json(capsys, ["reindex", *where, "--workers", "1", "--json"])
    assert {k: report[k] for k in ("sessions", "indexed", "skipped", "invalid", "entries",
                                   "operations")} == {
        "sessions": 1, "indexed": 1, "skipped": 0, "invalid": [], "entries": 3,
        "operations": 1}
    assert report["seconds"] >= 0
    response = _json(capsys, ["recall", "--ref", "pi.grep", "--outcome", "failed", *where,
                              "--json"])
    hit = response["hits"][0]
    assert (response["total"], hit["address"], response["next"]) == (
        1, f"{roots['entry']}/0", None)
    page = _json(capsys, ["expand", roots["id"], "--address", hit["address"],
                          "--expected-source-hash", hit["follow"]["expectedSourceHash"],
                          "--expected-lineage", hit["follow"]["expectedLineageFingerprint"],
                          "--index", roots["index"], "--sessions", roots["sessions"],
                          "--raw", "--json"])
    assert orjson.loads(page["entries"][0]["text"])["error"] == "no match"
    page = _json(capsys, ["expand", roots["path"], "--position", "0", "--index",
                          roots["index"], "--sessions", roots["sessions"], "--json"])
    assert "Zürich parser" in page["entries"][0]["text"]


def test_human_output_and_catalog_commands(
    roots: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --json each command prints readable lines; verify exits 1 when a file is gone."""
    where = ["--sessions", roots["sessions"], "--index", roots["index"]]
    assert main(["reindex", *where, "--workers", "1"]) == 0
    assert "1 indexed" in capsys.readouterr().out
    assert main(["recall", "zürich", *where]) == 0
    out = capsys.readouterr().out
    assert out.startswith("1 hits") and "expand: fabric-memory expand" in out
    listing = _json(capsys, ["sessions", "--index", roots["index"], "--json"])
    assert [(s["sessionId"], s["tier"]) for s in listing["sessions"]] == [(roots["id"], "hot")]
    numbers = _json(capsys, ["stats", "--index", roots["index"], "--json"])
    assert (numbers["sessions"], numbers["entries"], numbers["operations"]) == (1, 3, 1)
    assert _json(capsys, ["verify", "--index", roots["index"], "--json"])["ok"] == 1
    Path(roots["path"]).unlink()
    assert main(["verify", "--index", roots["index"]]) == 1
    assert "missing: " in capsys.readouterr().out


@pytest.mark.parametrize(("argv", "code"), [
    (["--entry", "nope"], "address_not_found"),
    (["--position", "42"], "index_out_of_bounds"),
    (["--position", "0", "--expected-source-hash", "0" * 32], "stale_pointer"),
    (["--position", "0", "--text-offset", "999999"], "text_offset_out_of_bounds"),
], ids=["address", "position", "stale", "text-offset"])
def test_expand_errors_are_json_with_their_exit_status(
    roots: dict[str, Any], capsys: pytest.CaptureFixture[str], argv: list[str], code: str
) -> None:
    """An expand failure prints {error: {code, message}} and exits with that code's status."""
    assert main(["reindex", "--sessions", roots["sessions"], "--index", roots["index"],
                 "--workers", "1"]) == 0
    capsys.readouterr()
    status = main(["expand", roots["id"], *argv, "--index", roots["index"], "--sessions",
                   roots["sessions"], "--json"])
    captured = capsys.readouterr()
    error = orjson.loads(captured.out)["error"]
    assert error["code"] == code
    assert status == ExpandError.EXIT_STATUS[code]
    assert captured.err.startswith("fabric-memory expand: ")
    assert captured.err.count("\n") == 1


def test_session_not_found_and_usage_errors(
    roots: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """An unknown session and a selector-less expand each fail with one clear line."""
    assert main(["reindex", "--sessions", roots["sessions"], "--index", roots["index"],
                 "--workers", "1"]) == 0
    assert main(["expand", "ghost", "--position", "0", "--index", roots["index"]]) == (
        ExpandError.EXIT_STATUS["session_not_found"])
    assert main(["expand", roots["id"], "--index", roots["index"]]) == 2
    assert "needs a selector" in capsys.readouterr().err
    assert main(["recall", "--index", roots["index"], "--sessions", roots["sessions"]]) == 2


def test_a_file_name_that_is_not_utf8_never_crashes(
    roots: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A session named with bytes that are not UTF-8: reindex reports it invalid (shown with
    \\xNN) and indexes the rest; audit, compact and inspect print valid JSON naming it."""
    source = Path(roots["path"])
    odd = os.fsdecode(os.fsencode(source.parent) + b"/bad\xff.jsonl")
    Path(odd).write_bytes(source.read_bytes())
    shown = f"{source.parent}/bad\\xff.jsonl"
    where = ["--sessions", roots["sessions"], "--index", roots["index"]]
    report = _json(capsys, ["reindex", *where, "--workers", "1", "--json"])
    assert (report["sessions"], report["indexed"]) == (1, 1)
    assert report["invalid"] == [{"path": shown, "reason": f"{shown}: file name is not valid "
                                  "UTF-8; not indexed (rename it to index it)"}]
    assert _json(capsys, ["recall", "zürich", *where, "--json"])["total"] == 1
    audit = _json(capsys, ["audit", "--sessions", roots["sessions"], "--json"])
    assert audit["sessions"] == 2
    inspected = _json(capsys, ["inspect", odd, "--json"])
    assert inspected["path"] == shown
    compacted = _json(capsys, ["compact", odd, "--json", "--keep-recent-tokens", "1",
                               "--reserve-tokens", "63"])
    assert compacted["path"] == shown
    assert main(["inspect", odd]) == 0
    assert shown in capsys.readouterr().out


@pytest.mark.parametrize(("option", "value"), [
    ("--offset", "4294967295"), ("--offset", "99999999999999999999"), ("--offset", "-1"),
    ("--limit", "0"), ("--limit", "99999999999999999999"),
])
def test_recall_offset_and_limit_are_bounded(
    roots: dict[str, Any], option: str, value: str
) -> None:
    """An --offset or --limit out of range (a limit below 1, or beyond any 64-bit count) is one
    usage line and exit 2: never a Rust abort or an OverflowError."""
    where = ("--sessions", roots["sessions"], "--index", roots["index"])
    assert finish(cli("reindex", *where))[0] == 0
    status, out, err = finish(cli("recall", "zürich", *where, option, value, "--json"))
    text = err.decode()
    assert status == 2 and text.count("\n") == 1, text
    assert text.startswith(f"fabric-memory recall: {option} {value}: must be between ")
    assert orjson.loads(out)["error"]["code"] == "usage"


def test_recall_at_the_last_offset_is_an_empty_page(
    roots: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """The largest offset allowed answers (no hits there, no next)."""
    where = ["--sessions", roots["sessions"], "--index", roots["index"]]
    assert main(["reindex", *where]) == 0
    capsys.readouterr()
    page = _json(capsys, ["recall", "zürich", *where, "--offset", str(MAX_OFFSET), "--json"])
    assert (page["total"], page["hits"], page["next"]) == (1, [], None)


@pytest.mark.parametrize(("argv", "message"), [
    (["--mode", "regex", "a(b"], 'regex "a(b": unclosed group (regex syntax error)'),
    (["a" * 129], f"query {clipped('a' * 129)}: every word is longer than 128 characters, and "
                  "the index keeps no word that long; search for shorter words of the same entry"),
    (["--mode", "regex", "x" * 300], "regex is 300 characters; the limit is 256"),
], ids=["regex-syntax", "129-letter-word", "long-regex"])
def test_query_errors_are_one_line_naming_the_real_cause(
    roots: dict[str, Any], argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bad query is one line with its real cause (the parser's complaint without its caret
    drawing; the 128-character word limit), exit 2."""
    where = ["--sessions", roots["sessions"], "--index", roots["index"]]
    assert main(["reindex", *where]) == 0
    capsys.readouterr()
    assert main(["recall", *argv, *where]) == 2
    err = capsys.readouterr().err
    assert err == f"fabric-memory recall: {message}\n"


def test_inspect_reads_any_agents_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """inspect reads a Claude Code transcript with its reader: the agent, the project, the
    branch, and each line it skipped with its file:line."""
    path = tmp_path / "t.jsonl"
    source = FIXTURES / "agents" / "claude-code" / "dag_compact_after_rewind.jsonl"
    path.write_bytes(source.read_bytes() + b'{"type":"user","sessionId":"s1","message":{}}\n')
    report = _json(capsys, ["inspect", str(path), "--json"])
    assert (report["agent"], report["sessionId"], report["cwd"]) == ("claude-code", "s1", "/tmp")
    assert report["leafId"] == "p1a" and report["offBranchEntryIds"] == ["b1u", "b1a"]
    assert report["malformedLines"] == [
        f"{path}:13: user line without a 'uuid' (no address); skipped"]
    assert main(["inspect", str(path)]) == 0
    assert "(claude-code, v1)" in capsys.readouterr().out


def test_expand_prints_text_takes_summary_ranges_and_clamps(
    pi_mono: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """`expand --range L12:L16` prints the entries as text (no JSON lines), `--raw` the lines
    themselves; `--max-chars 100000` and `recall --limit 500` are clamped with a note (in the
    JSON and in the human output), not refused."""
    where = ["--sessions", str(pi_mono["sessions"]), "--index", str(pi_mono["index"])]
    assert main(["expand", "compact.jsonl", "--range", "L12:L16", *where]) == 0
    shown = capsys.readouterr().out
    assert "\nL13 assistant 2025-12-24T00:33:02.568Z\ncall read(path=" in shown
    assert '{"type":"message"' not in shown
    assert main(["expand", "compact.jsonl", "--range", "L12:L16", "--raw", *where]) == 0
    lines = (pi_mono["sessions"] / "compact.jsonl").read_text().split("\n")
    shown = capsys.readouterr().out
    assert all(line in shown for line in lines[11:16])
    page = _json(capsys, ["expand", "compact.jsonl", "--range", "L12:L16", "--max-chars",
                          "100000", *where, "--json"])
    assert page["clamped"] == {"maxChars": [100000, 24000]}
    response = _json(capsys, ["recall", "theme", "--limit", "500", *where, "--json"])
    assert response["clamped"] == {"limit": [500, 50]}
    assert main(["recall", "invalid themes explode", "--limit", "500", *where]) == 0
    head = capsys.readouterr().out.split("\n")[:2]
    assert re.fullmatch(r"\d+ hits \(\d+ with every word, ranked first\), showing 1-\d+", head[0])
    assert head[1] == "note: limit 500 is above its maximum; 50 used"


CLI_CALL = re.compile(r"(?:^  expand: |^more: |characters cut; the rest from character \d+: )"
                      r"(fabric-memory (?:recall|expand) .*?)\]?$", re.MULTILINE)
"""A next call as the CLI's text prints it: a whole shell command."""


def _printed(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[str, Any]:
    """The text a command prints, and its --json value."""
    assert main(argv) == 0
    said = capsys.readouterr().out
    return said, _json(capsys, [*argv, "--json"])


def test_printed_commands_are_the_next_calls(
    pi_mono: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """recall's text prints each session's path once, above its hits, and the commands it
    and expand's text print (a session's hits, the next page, the rest of a cut entry) run
    as written and answer exactly what the JSON's follow, next and rest ask for."""
    from fabric_memory.memory.expand import expand_request
    from fabric_memory.memory.recall import recall_request

    where = ["--sessions", str(pi_mono["sessions"]), "--index", str(pi_mono["index"])]
    said, answer = _printed(capsys, ["recall", "theme watcher reload", "--limit", "6", *where])
    paths = [hit["path"] for hit in answer["hits"]]
    assert len(set(paths)) > 1 and len(paths) > len(set(paths))
    lines = [line.strip() for line in said.splitlines()]
    for hit in answer["hits"]:
        head = f"{hit['path']}  sourceHash {hit['follow']['expectedSourceHash']}"
        assert lines.count(head) == 1 and sum(hit["path"] in line for line in lines) == 1
    commands = CLI_CALL.findall(said)
    assert len(commands) == len(set(paths)) + 1
    for command in commands[:-1]:
        page = _json(capsys, [*shlex.split(command)[1:], "--json"])
        hits = [h for h in answer["hits"] if h["sessionId"] == page["sessionId"]]
        assert page == expand_request({**hits[0]["follow"],
                                       "addresses": [h["address"] for h in hits]})
    assert _json(capsys, [*shlex.split(commands[-1])[1:], "--json"]) == recall_request(
        answer["next"])

    said, page = _printed(capsys, ["expand", "large-session.jsonl", "--range", "L70:L230",
                                   *where])
    assert f"{page['selected']} entries, showing 1-{len(page['entries'])}" in said
    commands = CLI_CALL.findall(said)
    rests = [entry["rest"] for entry in page["entries"] if "rest" in entry]
    assert rests and len(commands) == len(rests) + 1
    for command, rest in zip(commands, [*rests, page["next"]], strict=True):
        assert _json(capsys, [*shlex.split(command)[1:], "--json"]) == expand_request(rest)
