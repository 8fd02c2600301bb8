"""Benchmark data: seeded corpora from the certify generator, built once and cached.

Everything here comes from :mod:`fabric_memory.certify.generate` with fixed seeds,
so two runs measure the same bytes. Corpora and indexes live under
:func:`cache_root` (``$FABRIC_MEMORY_BENCH_CACHE``, else
``~/.cache/fabric-memory-bench``) in directories named after what they depend on
(generator source, parameters; for indexes also the normalizer, the index layer and
the Tantivy version), so a change rebuilds them and an unchanged tree reuses them.
A directory is complete only once its ``done`` marker exists.
"""

from __future__ import annotations

import inspect
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import xxhash

from fabric_memory.certify import generate
from fabric_memory.certify.generate import generate_corpus, rich_session
from fabric_memory.memory import index as memory_index
from fabric_memory.memory import normalize
from fabric_memory.memory.reindex import ReindexReport, reindex

if TYPE_CHECKING:
    from fabric_memory.session import Session

CACHE_ENV = "FABRIC_MEMORY_BENCH_CACHE"
SEED = 991
RICH_BYTES = 1024 * 1024
DONE = "done"


@dataclass(frozen=True, slots=True)
class Scale:
    """How much data each figure runs on (``FULL`` for the table, ``QUICK`` for smoke)."""

    name: str
    corpus_sessions: int
    """Small generated sessions (Pi's folder layout): reindex, no-op reindex, reading."""
    medium_rich: int
    """1 MiB rich sessions added to the corpus for the ~100k-document recall index."""
    large_rich: int
    """... and for the >= 1M-document recall index."""
    rss_sessions: tuple[int, int]
    """Corpus sizes of the two peak-RSS reindex runs."""
    compaction_kib: tuple[int, ...]
    queries: int
    """Timed recall calls per (index, mode)."""
    expands: int
    """Timed expand calls per selector count."""
    repeats: int
    """Timed repetitions of the heavier figures (median reported)."""
    plateau_cycles: int
    """Compaction cycles of the summary-size plateau (the certification runs 100)."""


FULL = Scale("full", 1000, 45, 520, (500, 2000), (10, 32, 100, 320, 1024), 200, 100, 3, 100)
QUICK = Scale("quick", 40, 1, 2, (20, 60), (10, 32, 100), 20, 10, 1, 50)


def cache_root() -> Path:
    override = os.environ.get(CACHE_ENV)
    return Path(override) if override else Path.home() / ".cache" / "fabric-memory-bench"


@cache
def _source_key(*modules: str) -> str:
    digest = xxhash.xxh3_64()
    for name in modules:
        digest.update(Path(name).read_bytes())
    return digest.hexdigest()[:12]


def generator_key() -> str:
    """Changes whenever the generator's source does (its output may change with it)."""
    return _source_key(generate.__file__)


def index_key() -> str:
    """Changes with whatever decides the documents: the generator, the normalizer, the
    document builder and schema of the index layer, and the Tantivy version."""
    digest = xxhash.xxh3_64()
    for part in (inspect.getsource(memory_index.item_json), inspect.getsource(
            memory_index._schema), memory_index.SCHEMA_TAG,
            metadata.version("tantivy")):
        digest.update(part.encode())
    return f"{_source_key(generate.__file__, normalize.__file__)}-{digest.hexdigest()[:6]}"


def _built(target: Path, build: Callable[[Path], None]) -> Path:
    """``target`` after ``build`` filled it, unless a finished copy is already there."""
    if (target / DONE).is_file():
        return target
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    build(target)
    (target / DONE).write_text("ok\n")
    return target


def corpus(root: Path, sessions: int, seed: int = SEED) -> Path:
    """A directory of ``sessions`` small seeded sessions (``generate_corpus``)."""
    target = root / f"corpus-{sessions}-s{seed}-{generator_key()}"

    def build(where: Path) -> None:
        generate_corpus(where / "sessions", sessions=sessions, seed=seed)

    return _built(target, build) / "sessions"


def rich_sessions(root: Path, count: int, target_bytes: int = RICH_BYTES) -> list[Path]:
    """``count`` rich sessions of at least ``target_bytes`` each (seeds 0..count-1)."""
    target = root / f"rich-{target_bytes}-{generator_key()}"
    target.mkdir(parents=True, exist_ok=True)
    paths = []
    for seed in range(count):
        path = target / f"rich-{seed:04d}.jsonl"
        done = path.with_suffix(".done")
        if not done.is_file():
            rich_session(path, target_bytes, seed=seed)
            done.touch()
        paths.append(path)
    return paths


def mixed_sessions(root: Path, name: str, sessions: int, rich: int) -> Path:
    """A sessions directory holding the small corpus and ``rich`` rich sessions (hard links:
    no second copy on disk, and every file is a plain file to the session walker)."""
    small = corpus(root, sessions)
    rich_paths = rich_sessions(root, rich)
    target = root / f"{name}-{sessions}-{rich}-{generator_key()}"

    def build(where: Path) -> None:
        tree = where / "sessions"
        shutil.copytree(small, tree / "corpus", copy_function=os.link)
        (tree / "rich").mkdir()
        for path in rich_paths:
            os.link(path, tree / "rich" / path.name)

    return _built(target, build) / "sessions"


@dataclass(frozen=True, slots=True)
class BuiltIndex:
    sessions: Path
    index: Path
    documents: int
    sessions_count: int
    build_seconds: float | None
    """Seconds of the reindex that built it here, or None when it was reused."""


def built_index(root: Path, name: str, sessions: Path) -> BuiltIndex:
    """An up-to-date memory index of ``sessions`` (reindexed incrementally when reused);
    indexes of the same name built by other versions of the code are removed."""
    index = root / f"index-{name}-{index_key()}"
    for old in root.glob(f"index-{name}-*"):
        if old != index and old.is_dir():
            shutil.rmtree(old)
    report: ReindexReport = reindex(sessions=sessions, index=index)
    built = float(report["seconds"]) if report["indexed"] else None
    stats = _stats(index)
    return BuiltIndex(sessions, index, stats[0], stats[1], built)


def sharded_index(root: Path, name: str, sessions: Path, shards: int) -> BuiltIndex:
    """The sessions of ``name`` as an up-to-date sharded index of ``shards`` shards (the
    build a cluster runs, here on this machine's worker processes)."""
    index = root / f"sharded-{name}-{shards}-{index_key()}"
    for old in root.glob(f"sharded-{name}-{shards}-*"):
        if old != index and old.is_dir():
            shutil.rmtree(old)
    size = sum(path.stat().st_size for path in sessions.rglob("*.jsonl"))
    report = reindex(sessions=sessions, index=index, sharded=True,
                     shard_bytes=-(-size // shards))
    built = float(report["seconds"]) if report["indexed"] else None
    documents, count = _stats(index)
    return BuiltIndex(sessions, index, documents, count, built)


def _stats(index: Path) -> tuple[int, int]:
    from fabric_memory.memory.catalog import stats

    report = stats(index=index)
    return report["documents"], report["sessions"]


def fabric_result_lines(paths: list[Path]) -> list[bytes]:
    """The source lines of every ``fabric_exec`` tool result in ``paths``."""
    from fabric_memory.session import read_session

    lines: list[bytes] = []
    for path in paths:
        session = read_session(path)
        data = path.read_bytes()
        lines.extend(
            data[e.offset : e.offset + e.length]
            for e in session.entries
            if e.tool_name == "fabric_exec"
        )
    return lines


def trace_bytes(lines: list[bytes]) -> list[bytes]:
    """``details.trace`` of each ``fabric_exec`` result line, as its own JSON document."""
    out = []
    for line in lines:
        details = orjson.loads(line)["message"].get("details")
        if isinstance(details, dict) and "trace" in details:
            out.append(orjson.dumps(details["trace"]))
    return out


AGENT_LAYOUTS = ("pi", "claude-code", "codex")


def agents_corpus(root: Path, sessions: int, seed: int = SEED) -> Path:
    """``sessions`` seeded sessions of several agents, each in its agent's own format and
    folder layout: the small corpus's sessions taken in turn as Pi's (copied), Claude
    Code's and Codex's (their messages, tool calls and results rewritten in that agent's
    format, one line each)."""
    small = corpus(root, sessions, seed)
    target = root / f"agents-{sessions}-s{seed}-{_source_key(generate.__file__, __file__)}"

    def build(where: Path) -> None:
        from fabric_memory.session import iter_session_files, read_session

        for number, path in enumerate(iter_session_files(small)):
            layout = AGENT_LAYOUTS[number % len(AGENT_LAYOUTS)]
            session = read_session(path)
            if layout == "pi":
                target_path = where / "sessions" / "pi" / path.relative_to(small)
                target_path.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target_path)
                continue
            writer, name = _FORMAT_WRITERS[layout]
            target_path = where / "sessions" / layout / name.format(id=session.session_id)
            target_path.parent.mkdir(parents=True, exist_ok=True)
            target_path.write_bytes(b"".join(orjson.dumps(line) + b"\n"
                                             for line in writer(session)))

    return _built(target, build) / "sessions"


def _messages(session: Session) -> list[tuple[str, str | None, dict[str, Any]]]:
    """(entry id, timestamp, message) of each message entry of a Pi session."""
    found = []
    for entry in session.entries:
        message = entry.message
        if message is not None and message.get("role") in ("user", "assistant", "toolResult"):
            found.append((entry.id, entry.timestamp, message))
    return found


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [block for block in content if isinstance(block, dict)] if isinstance(
        content, list) else []


def _text(message: dict[str, Any]) -> str:
    return "\n".join(str(b.get("text", "")) for b in _blocks(message) if b.get("type") == "text")


def _claude_lines(session: Session) -> list[dict[str, Any]]:
    session_id, cwd = session.session_id, "/work/bench-project"
    lines: list[dict[str, Any]] = []
    parent = None
    for entry_id, stamp, message in _messages(session):
        role = message["role"]
        base = {"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": cwd,
                "sessionId": session_id, "version": "1.0.98", "uuid": f"{session_id}-{entry_id}",
                "timestamp": stamp}
        if role == "assistant":
            content = [{"type": "text", "text": b["text"]} if b.get("type") == "text" else
                       {"type": "tool_use", "id": b.get("id"), "name": b.get("name"),
                        "input": b.get("arguments")}
                       for b in _blocks(message) if b.get("type") in ("text", "toolCall")]
            line = {**base, "type": "assistant", "message": {"role": "assistant",
                                                             "content": content}}
        elif role == "toolResult":
            line = {**base, "type": "user", "message": {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": message.get("toolCallId"),
                 "content": _text(message), "is_error": bool(message.get("isError"))}]}}
        else:
            line = {**base, "type": "user", "message": {"role": "user", "content": _text(message)}}
        lines.append(line)
        parent = base["uuid"]
    return lines


FORMATS = ("pi", "claude-code", "codex", "copilot", "kimi", "qwen", "aider", "goose", "cursor",
           "gemini", "cline")
"""The session formats whose reindex throughput is measured side by side
(``bench/test_reindex.py``): JSON Lines, Aider's Markdown, the SQLite stores of Goose
(every session in one database) and Cursor (one database per chat), and the whole-file
JSON of Gemini CLI (pretty-printed, read by its message nodes) and Cline (one line)."""


def format_corpus(root: Path, agent: str, sessions: int, seed: int = SEED) -> Path:
    """The small corpus's ``sessions`` seeded sessions, all rewritten in ``agent``'s format
    and laid out as that agent lays them out: the same conversations in every format."""
    small = corpus(root, sessions, seed)
    target = root / f"format-{agent}-{sessions}-s{seed}-{_source_key(generate.__file__, __file__)}"

    def build(where: Path) -> None:
        from fabric_memory.session import iter_session_files, read_session

        sessions = [(path, read_session(path)) for path in iter_session_files(small)]
        if agent in _STORE_WRITERS:
            _STORE_WRITERS[agent](where / "sessions", [session for _, session in sessions])
            return
        for path, session in sessions:
            if agent == "pi":
                name = path.relative_to(small)
                data = path.read_bytes()
            else:
                writer, name = _FORMAT_WRITERS[agent]
                data = b"".join(orjson.dumps(line) + b"\n" for line in writer(session))
                name = Path(name.format(id=session.session_id))
            target_path = where / "sessions" / name
            target_path.parent.mkdir(parents=True, exist_ok=True)
            target_path.write_bytes(data)

    return _built(target, build) / "sessions"


def _copilot_lines(session: Session) -> list[dict[str, Any]]:
    """A Copilot CLI ``events.jsonl``: session.start, then user messages, assistant
    messages with their toolRequests, tool.execution_start/complete, parent-linked."""
    session_id = session.session_id
    lines: list[dict[str, Any]] = []

    def add(kind: str, data: dict[str, Any], stamp: str | None) -> None:
        parent = lines[-1]["id"] if lines else None
        lines.append({"type": kind, "data": data, "id": f"{session_id}-{len(lines)}",
                      "timestamp": stamp, "parentId": parent})

    add("session.start", {"sessionId": session_id, "version": 1, "producer": "copilot-agent",
                          "copilotVersion": "1.0.102",
                          "context": {"cwd": "/work/bench-project"}}, None)
    for _, stamp, message in _messages(session):
        role = message["role"]
        if role == "toolResult":
            add("tool.execution_complete", {
                "toolCallId": message.get("toolCallId"), "success": not message.get("isError"),
                "result": {"content": _text(message)}}, stamp)
        elif role == "assistant":
            calls = [{"toolCallId": b.get("id"), "name": b.get("name"),
                      "arguments": b.get("arguments"), "type": "function"}
                     for b in _blocks(message) if b.get("type") == "toolCall"]
            add("assistant.message", {"messageId": f"m{len(lines)}", "content": _text(message),
                                      "toolRequests": calls}, stamp)
            for call in calls:
                add("tool.execution_start", {"toolCallId": call["toolCallId"],
                                             "toolName": call["name"],
                                             "arguments": call["arguments"]}, stamp)
        else:
            add("user.message", {"content": _text(message)}, stamp)
    return lines


def _kimi_lines(session: Session) -> list[dict[str, Any]]:
    """A Kimi CLI ``context.jsonl``: a checkpoint, then messages in the shape Kimi sends its
    model (OpenAI-style tool calls, tool messages), a usage record after each reply."""
    lines: list[dict[str, Any]] = [{"role": "_checkpoint", "id": 0}]
    for _, _, message in _messages(session):
        role = message["role"]
        text = [{"type": "text", "text": _text(message)}]
        if role == "toolResult":
            lines.append({"role": "tool", "content": text,
                          "tool_call_id": message.get("toolCallId")})
        elif role == "assistant":
            calls = [{"type": "function", "id": b.get("id"), "function": {
                "name": b.get("name"), "arguments": orjson.dumps(b.get("arguments")).decode()}}
                for b in _blocks(message) if b.get("type") == "toolCall"]
            lines.append({"role": "assistant", "content": text, "tool_calls": calls})
            lines.append({"role": "_usage", "token_count": 1000 + len(lines)})
        else:
            lines.append({"role": "user", "content": text})
    return lines


def _codex_lines(session: Session) -> list[dict[str, Any]]:
    session_id = session.session_id
    lines: list[dict[str, Any]] = [{"timestamp": "2026-01-02T10:00:00.000Z",
                                       "type": "session_meta", "payload": {
                                           "id": session_id, "cwd": "/work/bench-project",
                                           "originator": "codex_cli_rs"}}]
    for _, stamp, message in _messages(session):
        role = message["role"]
        items: list[dict[str, Any]] = []
        if role == "toolResult":
            items.append({"type": "function_call_output", "call_id": message.get("toolCallId"),
                          "output": _text(message)})
        else:
            kind = "output_text" if role == "assistant" else "input_text"
            if text := _text(message):
                items.append({"type": "message", "role": role,
                              "content": [{"type": kind, "text": text}]})
            items.extend({"type": "function_call", "name": b.get("name"), "call_id": b.get("id"),
                          "arguments": orjson.dumps(b.get("arguments")).decode()}
                         for b in _blocks(message) if b.get("type") == "toolCall")
        lines.extend({"timestamp": stamp, "type": "response_item", "payload": item}
                     for item in items)
    return lines


def _qwen_lines(session: Session) -> list[dict[str, Any]]:
    """A Qwen Code chat: uuid-linked records with Gemini's content parts."""
    lines: list[dict[str, Any]] = []
    parent = None
    for entry_id, stamp, message in _messages(session):
        role = message["role"]
        base = {"uuid": entry_id, "parentUuid": parent, "sessionId": session.session_id,
                "timestamp": stamp, "cwd": "/work/bench-project", "version": "0.24.4"}
        if role == "toolResult":
            call = message.get("toolCallId")
            line = {**base, "type": "tool_result", "message": {"role": "user", "parts": [
                {"functionResponse": {"id": call, "name": message.get("toolName"),
                                      "response": {"output": _text(message)}}}]},
                "toolCallResult": {"callId": call, "status": "error" if message.get(
                    "isError") else "success"}}
        else:
            parts: list[dict[str, Any]] = [{"text": _text(message)}]
            parts.extend({"functionCall": {"id": b.get("id"), "name": b.get("name"),
                                           "args": b.get("arguments")}}
                         for b in _blocks(message) if b.get("type") == "toolCall")
            line = {**base, "type": role, "message": {
                "role": "model" if role == "assistant" else "user", "parts": parts}}
        lines.append(line)
        parent = entry_id
    return lines


def _gemini_chats(where: Path, sessions: list[Session]) -> None:
    """Gemini CLI's whole-file chats (pretty-printed), tool results inside their calls."""
    for session in sessions:
        messages: list[dict[str, Any]] = []
        calls: dict[str, dict[str, Any]] = {}
        for entry_id, stamp, message in _messages(session):
            role = message["role"]
            if role == "toolResult":
                call = calls.get(str(message.get("toolCallId")))
                if call is not None:
                    call.update(result=[{"functionResponse": {
                        "id": call["id"], "name": call["name"],
                        "response": {"output": _text(message)}}}],
                        status="error" if message.get("isError") else "success")
                continue
            record: dict[str, Any] = {"id": entry_id, "timestamp": stamp,
                                      "type": "gemini" if role == "assistant" else "user",
                                      "content": [{"text": _text(message)}]}
            made = [{"id": b.get("id"), "name": b.get("name"), "args": b.get("arguments"),
                     "status": "success", "timestamp": stamp}
                    for b in _blocks(message) if b.get("type") == "toolCall"]
            if made:
                record["toolCalls"] = made
                calls.update((str(call["id"]), call) for call in made)
            messages.append(record)
        target = (where / "0a1b2c3d" / "chats"
                  / f"session-2026-01-02T10-00-{session.session_id[:8]}.json")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(orjson.dumps(
            {"sessionId": session.session_id, "projectHash": "0a1b2c3d",
             "startTime": "2026-01-02T10:00:00.000Z", "messages": messages},
            option=orjson.OPT_INDENT_2))


def _cline_tasks(where: Path, sessions: list[Session]) -> None:
    """Cline's tasks: one line of Anthropic messages per ``api_conversation_history.json``."""
    for session in sessions:
        messages: list[dict[str, Any]] = []
        for _, _, message in _messages(session):
            role = message["role"]
            if role == "toolResult":
                messages.append({"role": "user", "content": [{
                    "type": "tool_result", "tool_use_id": message.get("toolCallId"),
                    "content": [{"type": "text", "text": _text(message)}],
                    "is_error": bool(message.get("isError"))}]})
                continue
            blocks: list[dict[str, Any]] = [{"type": "text", "text": _text(message)}]
            blocks.extend({"type": "tool_use", "id": b.get("id"), "name": b.get("name"),
                           "input": b.get("arguments")}
                          for b in _blocks(message) if b.get("type") == "toolCall")
            messages.append({"role": role, "content": blocks})
        target = where / session.session_id / "api_conversation_history.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(orjson.dumps(messages))


_FORMAT_WRITERS: dict[str, tuple[Callable[[Session], list[dict[str, Any]]], str]] = {
    "qwen": (_qwen_lines, "-work-bench-project/chats/{id}.jsonl"),
    "claude-code": (_claude_lines, "{id}.jsonl"),
    "codex": (_codex_lines, "2026/01/02/rollout-2026-01-02T10-00-00-{id}.jsonl"),
    "copilot": (_copilot_lines, "{id}/events.jsonl"),
    "kimi": (_kimi_lines, "0d1c2b3a4f5e6d7c8b9a0f1e2d3c4b5a/{id}/context.jsonl"),
}


def _aider_text(session: Session) -> bytes:
    """An Aider history of the session: its start line, the user's input (``####``), the
    replies, and what Aider reports (``>``): edits applied, commands run and their output."""
    out = ["", "# aider chat started at 2026-01-02 10:00:00", ""]
    calls: dict[str, dict[str, Any]] = {}
    for _, _, message in _messages(session):
        role = message["role"]
        if role == "user":
            out.extend([*(f"#### {line}  " for line in _text(message).splitlines() or [""]),
                        ""])
        elif role == "assistant":
            if text := _text(message):
                out.extend([text, ""])
            for block in _blocks(message):
                if block.get("type") == "toolCall":
                    calls[str(block.get("id"))] = block
        else:
            call = calls.get(str(message.get("toolCallId")), {})
            arguments = call.get("arguments") or {}
            path = arguments.get("path") or arguments.get("file_path")
            if path and call.get("name") in ("edit", "write"):
                out.append(f"> Applied edit to {path}  ")
            else:
                out.append(f"> Running {arguments.get('command') or call.get('name')}  ")
                out.extend(f"> {line}  " for line in _text(message).splitlines()[:20])
            out.append("")
    return "\n".join(out).encode() + b"\n"


def _goose_content(message: dict[str, Any]) -> list[dict[str, Any]]:
    if message["role"] == "toolResult":
        return [{"type": "toolResponse", "id": message.get("toolCallId"), "toolResult": {
            "status": "success", "value": {"content": [{"type": "text", "text": _text(message)}],
                                           "isError": bool(message.get("isError"))}}}]
    parts: list[dict[str, Any]] = [{"type": "text", "text": _text(message)}]
    parts.extend({"type": "toolRequest", "id": b.get("id"), "toolCall": {
        "status": "success", "value": {"name": b.get("name"), "arguments": b.get("arguments")}}}
        for b in _blocks(message) if b.get("type") == "toolCall")
    return parts


def _goose_database(where: Path, sessions: list[Session]) -> None:
    """Every session in one Goose ``sessions.db`` (Goose's schema)."""
    import sqlite3

    from tests.stores import goose_schema

    where.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(where / "sessions.db")
    try:
        db.executescript(goose_schema())
        for number, session in enumerate(sessions):
            goose_id = f"20260102_{number + 1}"
            db.execute("INSERT INTO sessions (id, name, working_dir) VALUES (?, ?, ?)",
                       (goose_id, session.session_id, "/work/bench-project"))
            db.executemany(
                "INSERT INTO messages (message_id, session_id, role, content_json, "
                "created_timestamp) VALUES (?, ?, ?, ?, ?)",
                [(f"msg_{goose_id}_{index}", goose_id,
                  "assistant" if message["role"] == "assistant" else "user",
                  orjson.dumps(_goose_content(message)).decode(), 1767348000 + index)
                 for index, (_, _, message) in enumerate(_messages(session))])
        db.commit()
    finally:
        db.close()


def _cursor_stores(where: Path, sessions: list[Session]) -> None:
    """Each session a Cursor agent chat: ``chats/<md5>/<id>/store.db``."""
    from tests.stores import cursor_store

    for session in sessions:
        messages: list[dict[str, Any]] = []
        for _, _, message in _messages(session):
            role = message["role"]
            if role == "toolResult":
                messages.append({"role": "tool", "content": [{
                    "type": "tool-result", "toolCallId": message.get("toolCallId"),
                    "result": _text(message)}]})
                continue
            parts: list[dict[str, Any]] = [{"type": "text", "text": _text(message)}]
            parts.extend({"type": "tool-call", "toolCallId": b.get("id"),
                          "toolName": b.get("name"), "args": b.get("arguments")}
                         for b in _blocks(message) if b.get("type") == "toolCall")
            messages.append({"role": role, "content": parts})
        cursor_store(where / "chats" / "0123456789abcdef0123456789abcdef" / session.session_id
                     / "store.db", {"workspace": "file:///work/bench-project", "messages": messages,
                                    "meta": {"agentId": session.session_id, "name": "bench"}})


def _aider_histories(where: Path, sessions: list[Session]) -> None:
    for session in sessions:
        target = where / session.session_id / ".aider.chat.history.md"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(_aider_text(session))


_STORE_WRITERS: dict[str, Callable[[Path, list[Session]], None]] = {
    "aider": _aider_histories,
    "gemini": _gemini_chats,
    "cline": _cline_tasks,
    "goose": _goose_database,
    "cursor": _cursor_stores,
}

