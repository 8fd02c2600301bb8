"""The default sessions roots: Pi's folder plus oh-my-pi's ``~/.omp/agent/sessions`` when
it exists, read by reindex, recall, expand, the live index and ``serve`` as one memory."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from fabric_memory.cli import main
from fabric_memory.errors import ExpandError, LocationRefusedError, UsageError
from fabric_memory.memory.catalog import list_sessions
from fabric_memory.memory.expand import expand, expand_request
from fabric_memory.memory.locations import sessions_roots
from fabric_memory.memory.recall import recall, recall_request
from fabric_memory.memory.reindex import reindex
from fabric_memory.serve import Places

from .memory_builder import SessionBuilder
from .reliability import until, watching

LOCATION_VARIABLES = ("FABRIC_MEMORY_SESSIONS", "FABRIC_MEMORY_HOME", "PI_CODING_AGENT_DIR",
                      "PI_CODING_AGENT_SESSION_DIR", "PI_CONFIG_DIR")


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A temporary HOME with Pi's sessions folder, no location variables, and the index in
    a temporary engine home."""
    for name in LOCATION_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    pi = SessionBuilder(home / ".pi" / "agent" / "sessions" / "--repo--" / "pi.jsonl", "pi-one")
    pi.user("the pi session talks about a quokka")
    pi.write()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("FABRIC_MEMORY_HOME", str(tmp_path / "fm"))
    return home


@pytest.fixture
def omp(home: Path) -> Path:
    """oh-my-pi's sessions folder next to Pi's, with one session."""
    root = home / ".omp" / "agent" / "sessions"
    session = SessionBuilder(root / "--repo--" / "omp.jsonl", "omp-one")
    session.user("the omp session talks about a quokka too")
    session.write()
    return root


def test_roots_are_pi_then_omp_when_present(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pi = home / ".pi" / "agent" / "sessions"
    assert sessions_roots() == (pi,)
    omp = home / ".omp" / "agent" / "sessions"
    omp.mkdir(parents=True)
    assert sessions_roots() == (pi, omp)
    monkeypatch.setenv("PI_CONFIG_DIR", ".omp-work")  # oh-my-pi's config folder name
    assert sessions_roots() == (pi,)
    (home / ".omp-work" / "agent" / "sessions").mkdir(parents=True)
    assert sessions_roots() == (pi, home / ".omp-work" / "agent" / "sessions")
    # PI_CODING_AGENT_DIR is read by both: one agent folder, one root.
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(home / "agent"))
    assert sessions_roots() == (home / "agent" / "sessions",)
    monkeypatch.setenv("PI_CODING_AGENT_SESSION_DIR", str(home / "pi-sessions"))
    (home / "agent" / "sessions").mkdir(parents=True)
    assert sessions_roots() == (home / "pi-sessions", home / "agent" / "sessions")
    monkeypatch.setenv("FABRIC_MEMORY_SESSIONS", str(home / "ours"))
    assert sessions_roots() == (home / "ours",)
    assert sessions_roots(home / "explicit") == (home / "explicit",)


def test_reindex_recall_expand_read_both_roots(home: Path, omp: Path) -> None:
    report = reindex()
    pi = home / ".pi" / "agent" / "sessions"
    assert report["sessionsRoots"] == [str(pi), str(omp)]
    assert (report["sessions"], report["indexed"]) == (2, 2)
    answer = recall("quokka")
    assert sorted(hit["sessionId"] for hit in answer["hits"]) == ["omp-one", "pi-one"]
    for hit in answer["hits"]:
        page = expand_request(hit["follow"])
        assert "quokka" in page["entries"][0]["text"]
    # A path relative to either root names its session.
    assert expand("--repo--/omp.jsonl", indices=[0])["sessionId"] == "omp-one"
    assert expand("--repo--/pi.jsonl", indices=[0])["sessionId"] == "pi-one"


def test_deleting_in_one_root_forgets_only_that_file(home: Path, omp: Path) -> None:
    reindex()
    (omp / "--repo--" / "omp.jsonl").unlink()
    report = reindex()
    assert [item["path"] for item in report["removed"]] == [str(omp / "--repo--" / "omp.jsonl")]
    assert [hit["sessionId"] for hit in recall("quokka")["hits"]] == ["pi-one"]
    # Indexing Pi's folder alone never forgets oh-my-pi's sessions, nor the reverse.
    again = SessionBuilder(omp / "--repo--" / "omp2.jsonl", "omp-two")
    again.user("a second quokka")
    again.write()
    reindex()
    assert reindex(sessions=home / ".pi" / "agent" / "sessions")["removed"] == []
    assert reindex(sessions=omp)["removed"] == []
    assert sorted(hit["sessionId"] for hit in recall("quokka")["hits"]) == ["omp-two", "pi-one"]


def test_without_omp_nothing_changes(home: Path) -> None:
    report = reindex()
    assert report["sessionsRoots"] == [str(home / ".pi" / "agent" / "sessions")]
    assert report["sessionsRoot"] == report["sessionsRoots"][0]
    assert [hit["sessionId"] for hit in recall("quokka")["hits"]] == ["pi-one"]


def test_expand_stays_inside_the_roots(home: Path, omp: Path, tmp_path: Path) -> None:
    """A session indexed from elsewhere is not reachable through the default roots, and
    --session of reindex must lie under one of them."""
    elsewhere = SessionBuilder(tmp_path / "elsewhere" / "x.jsonl", "elsewhere-one")
    elsewhere.user("a quokka far away")
    elsewhere.write()
    reindex(sessions=tmp_path / "elsewhere")
    reindex()
    with pytest.raises(ExpandError, match="not in the memory index"):
        expand("elsewhere-one", indices=[0])
    with pytest.raises(UsageError, match="not under the sessions root"):
        reindex(session=elsewhere.path)
    assert reindex(session=omp / "--repo--" / "omp.jsonl")["sessions"] == 1


def test_serve_accepts_each_configured_root_and_refuses_others(
    home: Path, omp: Path, tmp_path: Path
) -> None:
    places = Places.of(None, None)
    pi = home / ".pi" / "agent" / "sessions"
    assert places.bind({"query": "q", "sessions": str(omp)}) == {"query": "q"}
    assert places.bind({"query": "q", "sessions": str(pi)}) == {"query": "q"}
    with pytest.raises(LocationRefusedError, match="only from its own sessions"):
        places.bind({"query": "q", "sessions": str(tmp_path)})


def test_watch_follows_both_roots(home: Path, omp: Path) -> None:
    """`reindex --watch` with the default roots indexes a session written in oh-my-pi's
    folder while it runs."""
    with watching(env=dict(os.environ)) as (_, first):
        assert (first["step"], first["sessions"]) == ("catch-up", 2)
        fresh = SessionBuilder(omp / "--later--" / "late.jsonl", "omp-late")
        fresh.user("the pangolin was written under oh-my-pi")
        fresh.write()
        until(lambda: recall("pangolin")["total"] == 1, "the omp session was never indexed")


def test_recall_and_sessions_answer_only_from_the_roots_asked_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With one index holding roots A and B, recall and sessions given --sessions A answer
    from A alone (totals included), and every hit's follow expands."""
    index = tmp_path / "index"
    for name in ("a", "b"):
        for n in range(3):
            session = SessionBuilder(tmp_path / name / "--repo--" / f"{n}.jsonl", f"{name}-{n}")
            session.user(f"root {name} session {n} talks about a quokka")
            session.write()
        reindex(sessions=tmp_path / name, index=index, workers=1)
    answer = recall("quokka", sessions=tmp_path / "a", index=index, limit=2)
    assert answer["total"] == 3 and answer["next"] is not None
    following = recall_request(answer["next"])
    hits = [*answer["hits"], *following["hits"]]
    assert sorted(hit["sessionId"] for hit in hits) == ["a-0", "a-1", "a-2"]
    for hit in hits:
        assert "quokka" in expand_request(hit["follow"])["entries"][0]["text"]
    assert recall("quokka", index=index)["total"] == 6  # no root named: the whole index
    listing = list_sessions(index=index, sessions=tmp_path / "b")
    assert sorted(s["sessionId"] for s in listing["sessions"]) == ["b-0", "b-1", "b-2"]
    assert main(["sessions", "--index", str(index), "--sessions", str(tmp_path / "a"),
                 "--json"]) == 0
    printed = orjson.loads(capsys.readouterr().out)
    assert sorted(s["sessionId"] for s in printed["sessions"]) == ["a-0", "a-1", "a-2"]
