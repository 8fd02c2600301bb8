"""Which reader reads a file (first line and location, never the name) and where the agents
write."""

from __future__ import annotations

import re
import shutil
from collections.abc import Collection, Iterator
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_memory.errors import NotASessionError, SessionError, UsageError
from fabric_memory.memory.locations import sessions_roots
from fabric_memory.sources import AGENTS, READERS, agent_homes, agent_names, read_source, reader_for

from .memory_builder import SessionBuilder

FIXTURES = Path(__file__).parent.parent / "fixtures" / "agents"
CLAUDE = FIXTURES / "claude-code" / "tools_and_summary.jsonl"
CODEX = FIXTURES / "codex" / (
    "rollout-2025-10-03T09-15-00-0199a7c4-1e2f-7a3b-8c4d-5e6f7a8b9c0d.jsonl")
HOME_VARIABLES = ("FABRIC_MEMORY_SESSIONS", "FABRIC_MEMORY_AGENTS", "CATUI_HOME",
                  "CATUI_AGENTS_DIR", "CATUI_CODING_AGENT_DIR",
                  "FABRIC_MEMORY_EXTRA_SESSIONS", "PI_CODING_AGENT_DIR",
                  "PI_CODING_AGENT_SESSION_DIR", "PI_CONFIG_DIR", "CLAUDE_CONFIG_DIR",
                  "CODEX_HOME")


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for name in HOME_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


def test_every_reader_is_named_once_among_the_agents() -> None:
    """Each registered reader's name is one of the agent names --agent takes."""
    assert {reader.name for reader in READERS} <= set(AGENTS)
    assert READERS[-1].name == "pi"  # the reference reads what nothing else claims


def test_a_file_is_recognised_by_its_first_line_not_its_name(tmp_path: Path) -> None:
    """A Claude transcript named like a Codex rollout, a Codex rollout named like a Pi
    session, a Pi session named like a Claude one: each is read by its own reader."""
    swapped = {"rollout-2025-01-01T00-00-00-x.jsonl": CLAUDE, "2025_pi.jsonl": CODEX}
    for name, source in swapped.items():
        shutil.copy(source, tmp_path / name)
    pi = SessionBuilder(tmp_path / "c0000000-0000-4000-8000-000000000001.jsonl", "pi-id")
    pi.user("hello")
    pi.write()
    agents = {path.name: read_source(path).agent for path in tmp_path.iterdir()}
    assert agents == {"rollout-2025-01-01T00-00-00-x.jsonl": "claude-code",
                      "2025_pi.jsonl": "codex",
                      "c0000000-0000-4000-8000-000000000001.jsonl": "pi"}


def test_a_file_nobody_recognises_is_reported_by_pis_reader(tmp_path: Path) -> None:
    """Outside every agent's folder, a file of an unknown shape gets Pi's reason (the
    reference reader's behaviour is unchanged)."""
    path = tmp_path / "x.jsonl"
    path.write_text('{"hello": 1}\n')
    assert reader_for(str(path)).name == "pi"
    with pytest.raises(NotASessionError, match=r"x.jsonl:1: first JSON line is not a session "
                                                r"header"):
        read_source(path)


def test_omp_is_told_from_pi_by_its_folder(home: Path) -> None:
    """A Pi-format file under oh-my-pi's folder is omp's, anywhere else Pi's."""
    for where, session_id in ((home / ".omp" / "agent" / "sessions", "o"),
                              (home / ".pi" / "agent" / "sessions", "p")):
        builder = SessionBuilder(where / "--w--" / "s.jsonl", session_id)
        builder.user("hi")
        builder.write()
    assert read_source(home / ".omp/agent/sessions/--w--/s.jsonl").agent == "omp"
    assert read_source(home / ".pi/agent/sessions/--w--/s.jsonl").agent == "pi"


def test_an_agents_folder_is_looked_up_again_when_it_changes(
    home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The folders are remembered per process, yet a file is judged by the folder as it is
    now: one named by a variable set later, one a symlink points somewhere else later."""
    catui = tmp_path / "catui-a" / "sessions"
    builder = SessionBuilder(catui / "--w--" / "s.jsonl", "c")
    builder.user("hi")
    builder.write()
    path = str(builder.path)
    assert reader_for(path).name == "pi"
    monkeypatch.setenv("CATUI_CODING_AGENT_DIR", str(tmp_path / "catui-a"))
    assert reader_for(path).name == "catui"
    link = tmp_path / "linked"
    link.symlink_to(tmp_path / "catui-a")
    monkeypatch.setenv("CATUI_CODING_AGENT_DIR", str(link))
    assert reader_for(path).name == "catui"
    (tmp_path / "catui-b" / "sessions").mkdir(parents=True)
    link.unlink()
    link.symlink_to(tmp_path / "catui-b")
    assert reader_for(path).name == "pi"


def test_agent_names_are_checked() -> None:
    """--agents takes known names (comma-separated, repeated or not); any other name is a
    usage error listing them."""
    assert agent_names("pi, codex") == frozenset({"pi", "codex"})
    assert agent_names(["claude-code", "omp,pi"]) == frozenset({"claude-code", "omp", "pi"})
    assert agent_names(None) is None
    with pytest.raises(UsageError, match="unknown agent 'claude': use one of pi, omp"):
        agent_names("claude")


def test_discovery_finds_each_agent_folder_that_exists(
        home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """With no folder named, every agent folder that exists is a root (Pi first), the extra
    folders setting adds more, --agents narrows them; CLAUDE_CONFIG_DIR and CODEX_HOME move
    the agents' folders; FABRIC_MEMORY_SESSIONS lists exactly its folders."""
    pi = home / ".pi" / "agent" / "sessions"
    claude = home / ".claude" / "projects"
    codex = tmp_path / "codex-home" / "sessions"
    exports = tmp_path / "exports"
    for folder in (pi, claude, codex, exports):
        folder.mkdir(parents=True)
    assert sessions_roots() == (pi, claude)
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex-home"))
    monkeypatch.setenv("FABRIC_MEMORY_EXTRA_SESSIONS", f"{exports}:{tmp_path / 'missing'}")
    assert sessions_roots() == (pi, claude, codex, exports)
    assert agent_homes(agents=frozenset({"codex"})) == (codex,)
    assert sessions_roots(agents="codex,claude-code") == (claude, codex, exports)
    monkeypatch.setenv("FABRIC_MEMORY_AGENTS", "pi")
    assert sessions_roots() == (pi, exports)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-config"))
    monkeypatch.setenv("FABRIC_MEMORY_SESSIONS", f"{codex}:{exports}")
    assert sessions_roots() == (codex, exports)
    assert sessions_roots(f"{exports}") == (exports,)


class _Projects(Collection[str]):
    """Projects by agent; iterating them is recorded (it reads the index's catalog)."""

    def __init__(self, by_agent: dict[str, list[str]], agent: str | None = None) -> None:
        self.by_agent, self.agent, self.read = by_agent, agent, [] if agent is None else None

    def of(self, agent: str) -> _Projects:
        narrowed = _Projects(self.by_agent, agent)
        narrowed.read = self.read
        return narrowed

    def _all(self) -> list[str]:
        assert self.read is not None
        self.read.append(self.agent or "all")
        return [p for a, ps in self.by_agent.items() if self.agent in (None, a) for p in ps]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())

    def __contains__(self, item: object) -> bool:
        return item in self._all()


def test_workspace_folders_come_from_that_agents_sessions_only(
        home: Path, tmp_path: Path) -> None:
    """Catui's trace folders are looked for in the projects of Catui's sessions only, and
    not at all (the catalog unread) while Catui's sessions folder does not exist."""
    catui_work, other_work = tmp_path / "catui-work", tmp_path / "other-work"
    for work in (catui_work, other_work):
        (work / ".catui" / "traces").mkdir(parents=True)
    projects = _Projects({"catui": [str(catui_work)], "codex": [str(other_work)]})
    assert agent_homes(projects) == () and projects.read == []
    (home / ".catui" / "agents" / "default" / "sessions").mkdir(parents=True)
    assert set(agent_homes(projects)) == {home / ".catui/agents/default/sessions",
                                          catui_work / ".catui" / "traces"}
    assert projects.read == ["catui"]


_KEYS = ["type", "id", "timestamp", "sessionId", "uuid", "payload", "event", "ts", "run_id",
         "runId", "eventId", "sequence", "version", "kind", "properties", "message", "cwd"]
_JSON = st.recursive(st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1)
                     | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.sampled_from(_KEYS), inner, max_size=5),
                     max_leaves=14)


@settings(max_examples=150, deadline=None)
@given(st.lists(_JSON.map(orjson.dumps) | st.binary(max_size=30), min_size=1, max_size=5))
def test_any_file_is_read_or_refused_with_a_located_reason(
    tmp_path_factory: pytest.TempPathFactory, lines: list[bytes]
) -> None:
    """Whatever a file's lines are, some reader takes it and either reads it or refuses it
    with a SessionError naming the file; nothing else escapes."""
    path = tmp_path_factory.mktemp("any") / "x.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    try:
        session = read_source(path)
    except SessionError as error:
        assert error.message.startswith(str(path))
    else:
        assert session.agent in AGENTS


def test_a_tool_name_two_agents_share_is_read_one_way() -> None:
    """Where two agents name a tool alike (Pi's and Copilot CLI's `edit`), both tables hold
    the same reading of it: the merged table cannot pick one agent's over another's."""
    seen: dict[str, tuple[str, object]] = {}
    for reader in READERS:
        for name, tool in reader.tools.items():
            first = seen.setdefault(name, (reader.name, tool))
            assert first[1] is tool, f"{first[0]} and {reader.name} read {name!r} differently"


AGENT_ROW = re.compile(r"^\| [^|]+ \| `([a-z-]+)` \|", re.MULTILINE)


def test_the_agents_table_of_the_docs_names_every_agent() -> None:
    """docs/agents.md's table has one row per agent --agent takes, in the registry's order,
    and no row for an agent the registry does not know."""
    table = (Path(__file__).parent.parent / "docs" / "agents.md").read_text(encoding="utf-8")
    assert AGENT_ROW.findall(table) == list(AGENTS)
