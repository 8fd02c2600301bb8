"""The seeded session generator writes real Pi v3 files and says exactly what it wrote."""

from __future__ import annotations

import os
import random
import re
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from fabric_memory.certify import generate
from fabric_memory.certify.generate import (
    RESERVED_GREP,
    CorpusManifest,
    SessionBuilder,
    WrittenSession,
    generate_corpus,
    rich_session,
    write_session,
)
from fabric_memory.errors import UsageError
from fabric_memory.session import Session, read_session
from fabric_memory.trace import project_args, read_fabric_result

ENTRY_ID = re.compile(r"[0-9a-f]{8}\Z")
ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\Z")
SESSIONS = 60


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> CorpusManifest:
    return generate_corpus(tmp_path_factory.mktemp("corpus"), sessions=SESSIONS, seed=7)


@pytest.fixture(scope="module")
def sessions(corpus: CorpusManifest) -> list[Session]:
    return [read_session(path) for path in corpus.paths]


def tree(root: Path) -> dict[str, tuple[bytes, int]]:
    return {
        str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*.jsonl"))
    }


def projection_problems(sessions: list[Session]) -> list[str]:
    """Every fabric_exec result whose trace is not valid or whose args are not projected."""
    problems = []
    for session in sessions:
        for entry in session.entries:
            message = entry.message
            result = read_fabric_result(entry.id, message) if message is not None else None
            if result is None:
                continue
            if result.verdict != "valid":
                problems.append(f"{entry.id}: {result.verdict} ({result.reason})")
            problems += [
                f"{op.address}: args not projected"
                for op in result.operations
                if op.args != project_args(op.ref, op.args)
            ]
    return problems


def leaks(corpus: CorpusManifest, sessions: list[Session]) -> list[str]:
    """Secrets that appear anywhere in a session except inside ``details.audits``."""
    found = []
    for written, session in zip(corpus.sessions, sessions, strict=True):
        text = []
        for entry in session.entries:
            raw: dict[str, Any] = orjson.loads(orjson.dumps(entry.raw))
            details = (raw.get("message") or {}).get("details")
            if isinstance(details, dict):
                details.pop("audits", None)
            text.append(orjson.dumps(raw).decode())
        joined = "\n".join(text)
        found += [secret for secret in written.secrets if secret in joined]
    return found


def test_same_seed_writes_the_same_bytes_and_mtimes(tmp_path: Path) -> None:
    """Two runs with one seed give identical files, names and mtimes; another seed differs."""
    generate_corpus(tmp_path / "a", sessions=12, seed="same")
    generate_corpus(tmp_path / "b", sessions=12, seed="same")
    generate_corpus(tmp_path / "c", sessions=12, seed="other")
    first, second, other = tree(tmp_path / "a"), tree(tmp_path / "b"), tree(tmp_path / "c")
    assert len(first) == 12
    assert first == second
    assert set(first) != set(other)
    assert rich_session(tmp_path / "r1.jsonl", 20_000, seed=3).source_hash == rich_session(
        tmp_path / "r2.jsonl", 20_000, seed=3
    ).source_hash


def test_every_file_reads_back_as_the_manifest_says(
    corpus: CorpusManifest, sessions: list[Session]
) -> None:
    """read_session sees no problems, and ids, branch, hash and size match the manifest."""
    assert len(sessions) == SESSIONS == len(set(corpus.session_ids))
    for written, session in zip(corpus.sessions, sessions, strict=True):
        assert not session.malformed and session.truncated_tail is None
        assert not session.duplicate_ids
        assert session.version == 3 and session.session_id == written.session_id
        assert session.source_hash == written.source_hash
        assert session.size == written.size == os.path.getsize(written.path)
        assert tuple(e.id for e in session.entries) == written.entry_ids
        assert tuple(e.id for e in session.active_branch()) == written.active_ids
        assert Path(written.path).name.endswith(f"_{written.session_id}.jsonl")
    assert corpus.entry_count == sum(len(s.entries) for s in sessions)


def test_entries_have_pi_ids_parents_and_advancing_timestamps(sessions: list[Session]) -> None:
    """Ids are 8 hex digits, parents exist, timestamps are ISO and advance in file order."""
    for session in sessions:
        assert ISO.match(session.header["timestamp"])
        previous = session.header["timestamp"]
        assert session.entries[0].parent_id is None
        for entry in session.entries:
            assert ENTRY_ID.match(entry.id)
            assert entry.parent_id is None or entry.parent_id in session.by_id
            assert entry.timestamp is not None and ISO.match(entry.timestamp)
            assert entry.timestamp > previous
            previous = entry.timestamp


def test_tool_calls_and_results_match(sessions: list[Session]) -> None:
    """Every toolCall has exactly one later result of the same tool, and vice versa."""
    reverse_order = 0
    for session in sessions:
        calls: dict[str, str] = {}
        issued: list[str] = []
        for entry in session.entries:
            message = entry.message or {}
            if message.get("role") == "assistant":
                usage = message["usage"]
                parts = ("input", "output", "cacheRead", "cacheWrite")
                assert usage["totalTokens"] == sum(usage[key] for key in parts)
                for part in message["content"]:
                    if part["type"] == "toolCall":
                        calls[part["id"]] = part["name"]
                        issued.append(part["id"])
            elif message.get("role") == "toolResult":
                assert calls.pop(message["toolCallId"]) == message["toolName"]
                if issued and message["toolCallId"] != issued.pop(0):
                    reverse_order += 1
        assert calls == {}
    assert reverse_order > 0, "no parallel results arrived in reverse order"


def test_fabric_traces_pass_the_guard_and_are_projected(
    corpus: CorpusManifest, sessions: list[Session]
) -> None:
    """Each fabric_exec trace is valid, its args are fixed points of project_args, and the
    manifest lists exactly the operations the guard reads."""
    assert projection_problems(sessions) == []
    for written, session in zip(corpus.sessions, sessions, strict=True):
        read = [
            (op.address, op.ref, op.outcome, op.failure_stage)
            for entry in session.entries
            if entry.message is not None
            and (result := read_fabric_result(entry.id, entry.message)) is not None
            for op in result.operations
        ]
        assert read == [
            (op.address, op.ref, op.outcome, op.failure_stage) for op in written.operations
        ]
    assert corpus.operation_count > SESSIONS


def test_projection_check_catches_unprojected_args(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sabotage: writing raw args into traces makes the projection check fail."""
    monkeypatch.setattr(generate, "project_args", lambda ref, args: dict(args))
    sabotaged = generate_corpus(tmp_path, sessions=8, seed=7)
    sessions = [read_session(path) for path in sabotaged.paths]
    assert projection_problems(sessions) != []
    assert leaks(sabotaged, sessions) != []


def test_secrets_live_only_in_audits(corpus: CorpusManifest, sessions: list[Session]) -> None:
    """Every listed secret is in its file, but nowhere outside details.audits."""
    assert corpus.secrets
    for written in corpus.sessions:
        data = Path(written.path).read_text(encoding="utf-8")
        assert all(secret in data for secret in written.secrets)
        assert all(decoy in data for decoy in written.decoy_paths)
    assert leaks(corpus, sessions) == []


def test_corpus_covers_the_trace_varieties(corpus: CorpusManifest, sessions: list[Session]) -> None:
    """Both trace kinds, discovery and workflow refs, failure stages, repeated phases,
    non-fabric tools and branches all occur."""
    kinds = Counter(op.kind for s in corpus.sessions for op in s.operations)
    assert set(kinds) == {"pi-fabric.execution", "omp-fabric.execution"}
    refs = {op.ref for s in corpus.sessions for op in s.operations}
    assert any(ref.startswith("pi.") for ref in refs) and any(r.startswith("omp.") for r in refs)
    assert any(ref.startswith("fabric.discovery.") for ref in refs)
    assert "fabric.workflow.phase" in refs
    stages = {op.failure_stage for s in corpus.sessions for op in s.operations}
    assert {"resolve", "invoke"} <= stages
    repeated = 0
    tools: set[str] = set()
    for session in sessions:
        for entry in session.entries:
            message = entry.message or {}
            if entry.tool_name is not None:
                tools.add(entry.tool_name)
            phases = ((message.get("details") or {}).get("trace") or {}).get("phases", [])
            repeated += any(phases[i] == phases[i + 2] != phases[i + 1]
                            for i in range(len(phases) - 2))
    assert repeated > 0
    assert {"fabric_exec", "read", "bash", "edit"} <= tools
    assert any(len(s.active_ids) < len(s.entry_ids) for s in corpus.sessions)


def test_rare_facts_are_in_their_session(corpus: CorpusManifest) -> None:
    """The ASCII and Unicode rare facts are in the user message the manifest names, and
    nowhere else."""
    fact = corpus.rare_fact
    assert re.fullmatch(r"CERT_FACT_\d{3}_[A-Z]+_[0-9a-f]{4}", fact.ascii)
    assert fact.unicode.startswith("Zürich→東京 ✓") and not fact.unicode.isascii()
    session = read_session(fact.path)
    message = session.by_id[fact.entry_id].message
    assert message is not None and message["role"] == "user"
    assert fact.ascii in message["content"] and fact.unicode in message["content"]
    assert fact.entry_id in session.active_ids()
    holders = [p for p in corpus.paths if fact.ascii in Path(p).read_text(encoding="utf-8")]
    assert holders == [fact.path]
    assert corpus.session(fact.path).facts == (fact.ascii, fact.unicode)


def test_grep_operation_is_unique_and_absent_ref_is_absent(
    corpus: CorpusManifest, sessions: list[Session]
) -> None:
    """The planted omp.grep failure is the only one of its (ref, outcome) and is on the
    active branch; the negative-control ref occurs nowhere."""
    op = corpus.grep_operation
    assert (op.ref, op.outcome) == RESERVED_GREP
    assert corpus.operations_matching(op.ref, op.outcome) == (op,)
    session = read_session(corpus.grep_session_path)
    entry = session.by_id[op.entry_id]
    assert entry.id in session.active_ids() and entry.message is not None
    result = read_fabric_result(entry.id, entry.message)
    assert result is not None
    assert [o.address for o in result.operations if o.ref == op.ref] == [op.address]
    assert corpus.operations_matching(corpus.absent_ref, "succeeded") == ()
    assert all(corpus.absent_ref not in Path(p).read_text(encoding="utf-8") for p in corpus.paths)


def test_rare_fact_and_grep_sessions_are_the_oldest(corpus: CorpusManifest) -> None:
    """Their mtimes (as written and on disk) are older than every other session's."""
    mtimes = {p: os.stat(p).st_mtime_ns for p in corpus.paths}
    assert mtimes == {s.path: s.mtime_ns for s in corpus.sessions}
    newest_first = sorted(mtimes, key=lambda p: (-mtimes[p], p))
    assert newest_first[-2:] == [corpus.grep_session_path, corpus.rare_fact.path]


def test_a_thousand_sessions_generate(tmp_path: Path) -> None:
    """The default corpus size writes 1,000 distinct files that the manifest accounts for."""
    manifest = generate_corpus(tmp_path)
    files = sorted(str(p) for p in tmp_path.rglob("*.jsonl"))
    assert len(files) == 1000 == len(manifest.sessions)
    assert files == sorted(manifest.paths)
    total_lines = sum(Path(p).read_bytes().count(b"\n") for p in files)
    assert total_lines == manifest.entry_count + 1000


def test_rich_session_has_the_requested_size(tmp_path: Path) -> None:
    """A ~330 KiB rich source reaches its target, is multibyte, and every trace is valid."""
    written = rich_session(tmp_path / "rich.jsonl", seed=1)
    assert generate.RICH_TARGET_BYTES <= written.size < generate.RICH_TARGET_BYTES + 16 * 1024
    data = Path(written.path).read_bytes()
    assert len(data) == written.size and len(data.decode("utf-8")) < len(data)
    session = read_session(written.path)
    assert projection_problems([session]) == []
    assert len(written.operations) > 300
    assert {op.failure_stage for op in written.operations} - {None}
    assert written.goals and len(written.constraints) == 2


def test_builder_appends_step_by_step(tmp_path: Path) -> None:
    """write then append yields the same bytes as one write, and read_session sees the new
    entries; an append after someone else changed the file is refused."""
    builder = SessionBuilder(random.Random(4), flavour="omp")
    builder.user("GOAL: first")
    call = builder.fabric_call(generate.random_operations(builder.rng, "omp", 3))
    builder.assistant(calls=[call])
    path = tmp_path / "s.jsonl"
    first: WrittenSession = builder.write(path)
    builder.fabric_result(call)
    kept = builder.assistant("done")
    builder.compaction("summary", kept, 1234, details={"compactor": "test"})
    second = builder.append(path)
    assert path.read_bytes() == builder.to_bytes()
    assert second.entry_ids[: len(first.entry_ids)] == first.entry_ids
    session = read_session(path)
    assert [e.type for e in session.entries][-1] == "compaction"
    assert session.by_id[session.entries[-1].id].raw["firstKeptEntryId"] == kept
    assert session.source_hash == second.source_hash
    with path.open("ab") as stream:
        stream.write(b"\n")
    builder.user("more")
    with pytest.raises(UsageError, match="size changed"):
        builder.append(path)


def test_builder_branches_and_refuses_unknown_calls() -> None:
    """branch_from makes a second child of an earlier entry; a result for a call that is
    not open is refused."""
    builder = SessionBuilder(random.Random(5))
    root = builder.user("one")
    old_tip = builder.assistant("two")
    builder.branch_from(root)
    tip = builder.assistant("two again")
    assert builder.active_ids() == [root, tip]
    assert old_tip in builder.entry_ids and old_tip not in builder.active_ids()
    stray = builder.tool_call("read", {"path": "x"})
    with pytest.raises(UsageError, match="not open"):
        builder.tool_result(stray, "text")
    with pytest.raises(UsageError, match="no entry"):
        builder.branch_from("ffffffff")


def test_write_session_is_small_and_seeded(tmp_path: Path) -> None:
    """One normal session is a few KiB and depends only on its rng's seed."""
    a = write_session(tmp_path / "a.jsonl", random.Random(11))
    b = write_session(tmp_path / "b.jsonl", random.Random(11))
    assert a.source_hash == b.source_hash and a.session_id == b.session_id
    assert 1024 < a.size < 32 * 1024
