"""The memory commands: thin CLI over the library, JSON errors with the expand codes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from fabric_memory.cli import main
from fabric_memory.errors import ExpandError

from .memory_builder import SessionBuilder, operation


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
                          "--json"])
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
