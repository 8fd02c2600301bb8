"""Small session builders for the memory tests: corpus copies, clones with new ids, and
tiny generated sessions with valid Fabric traces (written with the real envelope writer)."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from fabric_memory.trace import create_fabric_persisted_execution_details

# Big corpus files are left out of bulk clones to keep the 1,000-session run quick.
CLONE_SKIP = ("big-3000", "rich-330k")


def copy_corpus(corpus_dir: Path, dest: Path) -> Path:
    """A writable copy of the corpus sessions (the corpus itself is read-only)."""
    target = dest / "sessions"
    shutil.copytree(corpus_dir / "sessions", target)
    for path in target.rglob("*"):
        path.chmod(0o700 if path.is_dir() else 0o600)
    return target


def indexed_copy(fixture: Path, dest: Path) -> tuple[Path, dict[str, Path]]:
    """``fixture`` copied into ``dest/sessions`` and indexed into ``dest/index``: the copy
    and the places to pass to recall and expand."""
    from fabric_memory.memory.reindex import reindex

    where = {"sessions": dest / "sessions", "index": dest / "index"}
    where["sessions"].mkdir(parents=True)
    copy = where["sessions"] / fixture.name
    copy.write_bytes(fixture.read_bytes())
    reindex(**where, workers=1)
    return copy, where


def corpus_sessions(corpus_dir: Path) -> list[tuple[str, Path]]:
    """(truth name, path) of every valid corpus session, in INDEX order."""
    index = orjson.loads((corpus_dir / "truth" / "INDEX.json").read_bytes())
    return [(item["name"], corpus_dir / item["file"]) for item in index["files"]
            if item["file"].endswith(".jsonl") and item.get("entryCount")]


def clone_sessions(corpus_dir: Path, dest: Path, count: int) -> list[Path]:
    """``count`` sessions cloned round-robin from the corpus, each with a fresh header id,
    its own file name and one appended user message ``CLONE_FACT_<n>``."""
    sources = [path for name, path in corpus_sessions(corpus_dir) if name not in CLONE_SKIP]
    written = []
    for n in range(count):
        source = sources[n % len(sources)]
        lines = source.read_bytes().split(b"\n")
        session_id = str(uuid.UUID(int=n + 1, version=4))
        header_at = 0 if b'"type":"session"' in lines[0] else 1
        header = orjson.loads(lines[header_at])
        header["id"] = session_id
        lines[header_at] = orjson.dumps(header)
        body = [line for line in lines if line.strip()]
        if not _parses(body[-1]):
            body.pop()
        leaf = orjson.loads(body[-1]).get("id")
        body.append(_user_line(f"c{n:07x}", leaf, f"clone {n}: CLONE_FACT_{n} recorded"))
        folder = dest / f"--clone-{n % 7}--"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"2026-03-01T00-00-00-000Z_{session_id}.jsonl"
        path.write_bytes(b"\n".join(body) + b"\n")
        written.append(path)
    return written


def _parses(line: bytes) -> bool:
    try:
        orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    return True


def _user_line(entry_id: str, parent: str | None, text: str) -> bytes:
    return orjson.dumps({
        "type": "message", "id": entry_id, "parentId": parent,
        "timestamp": "2026-03-01T00:00:00.000Z",
        "message": {"role": "user", "content": text, "timestamp": 1772323200000},
    })


def operation(sequence: int, ref: str, args: dict[str, Any], outcome: str = "succeeded",
              **extra: Any) -> dict[str, Any]:
    provider, _, action = ref.partition(".")
    return {"type": "call", "sequence": sequence, "ref": ref, "provider": provider,
            "action": action, "args": args, "outcome": outcome, **extra}


class SessionBuilder:
    """Writes a small v3 session line by line; ids are ``e001``, ``e002``, ..."""

    def __init__(self, path: Path, session_id: str | None = None) -> None:
        self.path = path
        self.session_id = session_id or str(uuid.uuid4())
        self.lines: list[bytes] = [orjson.dumps({
            "type": "session", "version": 3, "id": self.session_id,
            "timestamp": "2026-01-02T10:00:00.000Z", "cwd": "/repo",
        })]
        self.leaf: str | None = None
        self.count = 0

    def _entry(self, entry_type: str, parent: str | None = None, **fields: Any) -> str:
        self.count += 1
        entry_id = f"e{self.count:03d}"
        entry = {"type": entry_type, "id": entry_id,
                 "parentId": self.leaf if parent is None else parent,
                 "timestamp": f"2026-01-02T10:{self.count // 60:02d}:{self.count % 60:02d}.000Z",
                 **fields}
        self.lines.append(orjson.dumps(entry))
        self.leaf = entry_id
        return entry_id

    def user(self, text: str, parent: str | None = None) -> str:
        return self._entry("message", parent,
                           message={"role": "user", "content": text, "timestamp": 0})

    def assistant_call(self, call_id: str, tool: str, arguments: dict[str, Any]) -> str:
        return self._entry("message", message={
            "role": "assistant", "timestamp": 0, "stopReason": "toolUse",
            "content": [{"type": "toolCall", "id": call_id, "name": tool,
                         "arguments": arguments}],
        })

    def tool_result(self, call_id: str, tool: str, *, is_error: bool = False) -> str:
        """A plain (not Fabric) tool's result."""
        return self._entry("message", message={
            "role": "toolResult", "toolCallId": call_id, "toolName": tool,
            "content": [{"type": "text", "text": "failed" if is_error else "ok"}],
            "isError": is_error, "timestamp": 0,
        })

    def assistant(self, content: list[dict[str, Any]],
                  usage: dict[str, Any] | None = None) -> str:
        """An assistant message with these content blocks (text, thinking, toolCall) and,
        when given, the turn's ``usage`` (Pi's shape)."""
        return self._entry("message", message={
            "role": "assistant", "timestamp": 0, "stopReason": "stop", "content": content,
            **({"usage": usage} if usage is not None else {})})

    def bash(self, command: str, output: str, exit_code: int = 0) -> str:
        """A user ``!command`` run: Pi's bashExecution message."""
        return self._entry("message", message={
            "role": "bashExecution", "command": command, "output": output,
            "exitCode": exit_code, "cancelled": False, "truncated": False, "timestamp": 0})

    def custom_message(self, custom_type: str, content: str) -> str:
        return self._entry("custom_message", customType=custom_type, content=content,
                           display=True)

    def compaction(self, summary: str, first_kept: str) -> str:
        """A compaction entry written by another compactor (no fabric-memory details)."""
        return self._entry("compaction", summary=summary, firstKeptEntryId=first_kept,
                           tokensBefore=1000)

    def fabric_result(
        self, call_id: str, operations: Sequence[dict[str, Any]], *, outer: str = "ok",
        audits: Iterable[dict[str, Any]] = (), phases: Sequence[str] = (),
        details: dict[str, Any] | None = None,
    ) -> str:
        """A ``fabric_exec`` result; ``details`` overrides the (valid) envelope."""
        if details is None:
            trace = {"kind": "pi-fabric.execution", "version": 1, "outcome": "succeeded",
                     "phases": list(phases), "operations": list(operations),
                     "counts": {"droppedValues": 0, "truncatedValues": 0,
                                "redactedValues": 0, "droppedOperations": 0}}
            details = create_fabric_persisted_execution_details(
                success=True, trace=trace, audits=list(audits), phases=list(phases))
        return self._entry("message", message={
            "role": "toolResult", "toolCallId": call_id, "toolName": "fabric_exec",
            "content": [{"type": "text", "text": outer}], "isError": False,
            "timestamp": 0, "details": details,
        })

    def write(self, mtime: float | None = None) -> Path:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_bytes(b"\n".join(self.lines) + b"\n")
        if mtime is not None:
            os.utime(self.path, (mtime, mtime))
        return self.path

    def append(self, text: str) -> Path:
        """Append one user message to the written file (a session being continued)."""
        self.user(text)
        with open(self.path, "ab") as stream:
            stream.write(self.lines[-1] + b"\n")
        return self.path


# --- the shared indexed corpus ---------------------------------------------------------

HOT_SESSIONS = 8
UNICODE_FACT = "ФАКТ_Ω_東京タワー_ß42"
UNICODE_WORD = "東京タワー"
SECRETS = {"outer": "XYZZYOUTERSECRET", "audit": "XYZZYAUDITSECRET",
           "code": "XYZZYCODESECRET", "result": "XYZZYRESULTSECRET"}
VISIBLE = "XYZZYVISIBLEWORD"
OLD_MTIME = 1_600_000_000.0


@dataclass(frozen=True, slots=True)
class MemoryCorpus:
    """A writable corpus copy plus planted sessions, indexed once (treat as read-only)."""

    sessions: Path
    index: Path
    unicode_session: Path
    secret_session: Path


def _stamp(path: Path) -> float:
    """Seconds since the epoch from a Pi file name (``2026-01-02T09-12-01-408Z_...``)."""
    head = path.name.split("_", 1)[0]
    try:
        moment = datetime.strptime(head, "%Y-%m-%dT%H-%M-%S-%fZ").replace(tzinfo=UTC)
    except ValueError:
        return OLD_MTIME
    return moment.timestamp()


def build_memory_corpus(base: Path, corpus_dir: Path) -> MemoryCorpus:
    from fabric_memory.memory.reindex import reindex

    sessions = copy_corpus(corpus_dir, base)
    for path in sessions.rglob("*.jsonl"):
        os.utime(path, (_stamp(path), _stamp(path)))
    unicode_session = SessionBuilder(sessions / "--planted--" / "unicode.jsonl")
    unicode_session.user(f"Bitte merken: {UNICODE_FACT} (Zürich→東京 ✓)")
    unicode_session.write(mtime=OLD_MTIME)
    secret = secret_session(sessions / "--planted--" / "secret.jsonl")
    secret.write(mtime=OLD_MTIME + 1)
    reindex(sessions=sessions, index=base / "index", workers=1)
    return MemoryCorpus(sessions, base / "index", unicode_session.path, secret.path)


def secret_session(path: Path) -> SessionBuilder:
    """A session whose secrets live only where memory must not look: the outer output,
    the audits, the fabric_exec source code and an operation result."""
    builder = SessionBuilder(path)
    builder.user(f"please look, {VISIBLE}")
    builder.assistant_call("call-1", "fabric_exec",
                           {"code": f"await pi.read({{path: '/{SECRETS['code']}'}})"})
    op = operation(1, "pi.read", {"path": "src/app.ts"}, result=SECRETS["result"])
    audit = {"ref": "pi.read", "args": {"path": f"/{SECRETS['audit']}.ts"}, "success": True,
             "result": SECRETS["audit"]}
    builder.fabric_result("call-1", [op], outer=f"read {SECRETS['outer']}", audits=[audit])
    return builder


def refuse_opening(monkeypatch: Any, folder: Path) -> None:
    """Make ``os.open`` of any file under ``folder`` fail the test (a run that must read
    none of them: a no-op reindex)."""
    inside = str(folder)
    real_open = os.open

    def guarded(path: Any, *args: Any, **kwargs: Any) -> int:
        if str(path).startswith(inside):
            raise AssertionError(f"opened {path}, which this run must not read")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", guarded)
