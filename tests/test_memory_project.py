"""The project comes first: recall keeps one project's sessions (`--project`), and a door
started inside a project (the MCP server, Pi's tools) ranks that project's sessions first."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fabric_memory.memory.locations import SESSIONS_ENV
from fabric_memory.memory.recall import recall
from fabric_memory.memory.reindex import reindex
from fabric_memory.pi.tools import call_tool

from .agent_homes import mcp_answers
from .transcripts import ClaudeTranscript


@pytest.fixture
def two_projects(tmp_path: Path) -> dict[str, Path]:
    """Three Claude Code sessions: two in project ``alpha`` (one in a subfolder), one in
    ``beta``, each saying "rounding" (beta's says it most, so it ranks first by words)."""
    sessions, index = tmp_path / "sessions", tmp_path / "index"
    sessions.mkdir()
    for n, (cwd, text) in enumerate([
        (str(tmp_path / "beta"), "rounding rounding rounding rounding in beta"),
        (str(tmp_path / "alpha"), "rounding once in alpha"),
        (str(tmp_path / "alpha" / "pkg"), "rounding in a folder of alpha"),
    ]):
        t = ClaudeTranscript(session_id=f"5d3c1b2a-0000-4000-8000-00000000000{n}", cwd=cwd)
        t.user(text)
        t.write(sessions / f"{t.session_id}.jsonl")
    reindex(sessions=sessions, index=index, workers=1)
    return {"sessions": sessions, "index": index, "alpha": tmp_path / "alpha",
            "beta": tmp_path / "beta"}


def _projects(hits: list[dict[str, object]]) -> list[str]:
    return [Path(str(hit["project"])).name for hit in hits]


def test_project_keeps_only_that_projects_sessions(two_projects: dict[str, Path]) -> None:
    """`--project DIR` keeps the sessions that worked in DIR or a folder inside it."""
    places = {"sessions": two_projects["sessions"], "index": two_projects["index"]}
    found = recall("rounding", project=str(two_projects["alpha"]), **places)  # type: ignore[arg-type]
    assert found["total"] == 2
    assert sorted(_projects(found["hits"])) == ["alpha", "pkg"]  # type: ignore[arg-type]
    nowhere = recall("rounding", project=str(two_projects["alpha"] / "nope"),
                     **places)  # type: ignore[arg-type]
    assert nowhere["total"] == 0


def test_a_preferred_project_ranks_first_and_pages_as_one_list(
        two_projects: dict[str, Path]) -> None:
    """The preferred project's hits come first (each part ranked as usual), the others
    after, and paging walks the joined list."""
    places = {"sessions": two_projects["sessions"], "index": two_projects["index"]}
    plain = recall("rounding", **places)  # type: ignore[arg-type]
    assert _projects(plain["hits"])[0] == "beta"  # type: ignore[arg-type]
    first = recall("rounding", prefer_project=str(two_projects["alpha"]),
                   **places)  # type: ignore[arg-type]
    assert first["total"] == 3
    assert _projects(first["hits"])[2] == "beta"  # type: ignore[arg-type]
    assert set(_projects(first["hits"])[:2]) == {"alpha", "pkg"}  # type: ignore[arg-type]
    pages = [recall("rounding", prefer_project=str(two_projects["alpha"]), limit=1, offset=k,
                    **places)["hits"][0] for k in range(3)]  # type: ignore[arg-type]
    assert [hit["path"] for hit in pages] == [hit["path"] for hit in first["hits"]]


def test_pi_tools_rank_the_working_folders_sessions_first(
        two_projects: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """Pi's memory_recall, run in a project, ranks that project's sessions first."""
    monkeypatch.setenv("FABRIC_MEMORY_SESSIONS", str(two_projects["sessions"]))
    monkeypatch.setenv("FABRIC_MEMORY_HOME", str(two_projects["index"].parent))
    two_projects["alpha"].mkdir()
    monkeypatch.chdir(two_projects["alpha"])
    answer = call_tool("memory_recall", {"query": "rounding", "limit": 2})["details"]
    assert sorted(_projects(answer["hits"])) == ["alpha", "pkg"]
    assert answer["next"]["preferProject"] == os.getcwd()
    assert _projects(call_tool("memory_recall", answer["next"])["details"]["hits"]) == ["beta"]


def test_the_mcp_server_started_in_a_project_ranks_it_first(
        two_projects: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """A host starts the MCP server in its project: recall ranks that project's sessions
    first, and the answer's `next` (carrying the preference) pages on through the tool."""
    monkeypatch.setenv("FABRIC_MEMORY_SESSIONS", str(two_projects["sessions"]))
    monkeypatch.setenv("FABRIC_MEMORY_HOME", str(two_projects["index"].parent))
    two_projects["alpha"].mkdir()
    first, rest = mcp_answers([("recall", {"query": "rounding", "limit": 2}),
                               ("recall", {"$next": True})], cwd=two_projects["alpha"])
    assert sorted(_projects(first["hits"])) == ["alpha", "pkg"]
    assert _projects(rest["hits"]) == ["beta"]


def test_a_project_is_its_live_sessions_folders_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder that only shares the project's name as a prefix (``alpha2``) is not inside
    it, and once a project's only session is removed from the index (its documents deleted
    beside live ones of the same segment, whose terms stay until a merge), preferring it
    says nothing (the request does not echo it) and keeping it finds nothing — read as a
    hook reads (its sessions folder from the environment: the index's own terms)."""
    sessions, index = tmp_path / "sessions", tmp_path / "index"
    sessions.mkdir()
    for n, folder in enumerate(["alpha", "alpha2", "beta"]):
        t = ClaudeTranscript(session_id=f"5d3c1b2a-0000-4000-8000-00000000001{n}",
                             cwd=str(tmp_path / folder))
        t.user(f"rounding in {folder}")
        t.write(sessions / f"{t.session_id}.jsonl")
    monkeypatch.setenv(SESSIONS_ENV, str(sessions))
    places = {"index": index}
    reindex(**places, workers=1)  # type: ignore[arg-type]
    found = recall("rounding", project=str(tmp_path / "alpha"), **places)  # type: ignore[arg-type]
    assert _projects(found["hits"]) == ["alpha"]  # type: ignore[arg-type]
    (sessions / "5d3c1b2a-0000-4000-8000-000000000011.jsonl").unlink()
    reindex(**places, workers=1)  # type: ignore[arg-type]
    gone = str(tmp_path / "alpha2")
    assert recall("rounding", project=gone, **places)["total"] == 0  # type: ignore[arg-type]
    preferred = recall("rounding", prefer_project=gone, limit=1,
                       **places)  # type: ignore[arg-type]
    assert preferred["total"] == 2
    assert preferred["next"] is not None and "preferProject" not in preferred["next"]
