"""``fabric-memory quickstart``: the first run. Index the user's own sessions when any
agent's folder holds one (the default index), else the samples bundled with a clone
(``fixtures/sessions``) into the clone's own ``.fabric-memory/`` index, so they never mix
with the user's; then show a recall and the sessions, with the commands that repeat them.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypedDict

from .errors import UsageError
from .memory.locations import index_root, sessions_roots

if TYPE_CHECKING:
    from .memory.catalog import SessionsReport
    from .memory.recall import RecallResponse
    from .memory.reindex import ReindexReport

CLONE = Path(__file__).resolve().parent.parent
SAMPLES = CLONE / "fixtures" / "sessions"
"""The bundled sample sessions: there in a clone (``pip install -e .``)."""
SAMPLES_HOME = CLONE / ".fabric-memory"
SHOWN_SESSIONS = 5


class Quickstart(TypedDict):
    source: Literal["yours", "samples"]
    sessions: list[str]
    """The folders indexed."""
    index: str
    reindex: ReindexReport
    recall: RecallResponse
    recallCommand: str
    sessionsList: SessionsReport
    sessionsCommand: str


def has_sessions(roots: tuple[Path, ...]) -> bool:
    """Whether any of ``roots`` holds a session file of any agent — a ``*.jsonl`` file or one
    a reader lists (Gemini's ``.json`` chats, SQLite stores, Aider's history); stops at the
    first."""
    from .sources.registry import session_files

    return any(next(iter(session_files(root)), None) is not None for root in roots)


def quickstart() -> Quickstart:
    from .memory.catalog import list_sessions
    from .memory.recall import recall
    from .memory.reindex import reindex

    roots = sessions_roots()
    if has_sessions(roots):
        source: Literal["yours", "samples"] = "yours"
        folders: str | None = None
        index = index_root()
        where: list[str] = []
        asked: dict[str, str] = {"role": "user"}
    else:
        if not SAMPLES.is_dir():
            looked = ", ".join(str(root) for root in roots)
            raise UsageError(f"no agent folder holds a session ({looked}) and the bundled "
                             f"samples are not here ({SAMPLES}: they come with a clone); "
                             "run fabric-memory quickstart again once an agent has written "
                             "a session")
        source = "samples"
        roots = (SAMPLES,)
        folders = str(SAMPLES)
        index = SAMPLES_HOME / "index"
        where = ["--sessions", str(SAMPLES), "--index", str(index)]
        asked = {"tool": "fabric_exec", "outcome": "failed"}
    indexed = reindex(sessions=folders, index=index)
    found = recall(role=asked.get("role"), tool=asked.get("tool"), outcome=asked.get("outcome"),
                   limit=3, index=index, sessions=folders)
    listed = list_sessions(index=index, sessions=folders, limit=SHOWN_SESSIONS)
    filters = [word for key, value in asked.items() for word in (f"--{key}", value)]
    return Quickstart(
        source=source, sessions=[str(root) for root in roots], index=str(index),
        reindex=indexed, recall=found,
        recallCommand=shlex.join(["fabric-memory", "recall", *filters, "--limit", "3", *where]),
        sessionsList=listed,
        sessionsCommand=shlex.join(["fabric-memory", "sessions", "--limit",
                                    str(SHOWN_SESSIONS), *where]),
    )


NEXT_STEPS = (
    "Next: fabric-memory install claude (or codex, or pi) gives that agent the memory tools "
    "and the handoff after each compaction; fabric-memory ui shows every session, search "
    "and stats in your browser (pip install -e '.[ui]'); docs/cli.md has every command.")


def render_quickstart(report: Quickstart) -> str:
    from .memory.render import render_recall, render_reindex, render_sessions

    folders = " and ".join(report["sessions"])
    if report["source"] == "yours":
        said = f"Indexed your sessions ({folders})."
    else:
        home = Path(report["index"]).parent
        said = (f"No agent folder holds a session yet, so the bundled samples ({folders}) "
                f"were indexed into this clone's own index ({report['index']}), apart from "
                "yours. To keep using them: export "
                f"FABRIC_MEMORY_HOME={shlex.quote(str(home))} "
                f"FABRIC_MEMORY_SESSIONS={shlex.quote(folders)}")
    return "\n".join([
        said, render_reindex(report["reindex"]), "",
        f"$ {report['recallCommand']}", render_recall(report["recall"]), "",
        f"$ {report['sessionsCommand']}", render_sessions(report["sessionsList"]), "",
        NEXT_STEPS,
    ])
