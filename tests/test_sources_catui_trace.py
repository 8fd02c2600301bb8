"""Catui run traces: read whole as Catui's reader does, or rejected with ``file:line``."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_memory.errors import NotASessionError
from fabric_memory.session import hash_file
from fabric_memory.sources.catui_trace import (
    INVALID_TRACE,
    MAX_FILE_BYTES,
    MAX_LINE_BYTES,
    read_run_trace,
)

from .conftest import FIXTURES

CATUI = FIXTURES / "agents" / "catui"
WORKSPACE = CATUI / "catui-demo"
TRACES = WORKSPACE / ".catui" / "traces"
REJECTED = CATUI / "rejected"
WRITTEN = TRACES / "run-2b9d7e41-5c3a-4f68-9e1d-0a7b6c5d4e3f.jsonl"
RUNS = sorted(p for p in TRACES.glob("*.jsonl") if p.name != "latest.jsonl")

# Each rejected fixture, the line it breaks (None: the file as a whole) and the rule named.
BROKEN = {
    "invalid-json": (3, "invalid JSON"),
    "unsupported-version": (2, "unsupported run trace version 2"),
    "mixed-run-ids": (4, "differs from the trace's"),
    "duplicate-event-id": (5, "duplicate eventId"),
    "parent-not-earlier": (6, "names no earlier event"),
    "sequence-gap": (7, "sequence 8 where 7 was due"),
    "empty-line": (4, "empty line"),
    "bad-payload": (6, "payload.decision of policy.decided: expected one of allow, deny, pause"),
    "unknown-kind": (5, 'unsupported run trace kind "tool.exploded"'),
    "empty": (None, "holds no event"),
}


@pytest.mark.parametrize("path", RUNS, ids=[p.name for p in RUNS])
def test_reads_every_event_with_its_exact_line(path: Path) -> None:
    """Each accepted trace yields one event per line, in order, whose span is its line's bytes."""
    trace = read_run_trace(path)
    data = path.read_bytes()
    lines = data.split(b"\n")[:-1]
    assert [e.line for e in trace.events] == list(range(1, len(lines) + 1))
    for event, line in zip(trace.events, lines, strict=True):
        assert data[event.offset : event.offset + event.length] == line
        value = orjson.loads(line)
        assert (event.event_id, event.sequence, event.kind) == (
            value["eventId"], value["sequence"], value["kind"])
        assert event.payload == value["payload"]
    assert trace.run_id == path.stem
    assert trace.source_hash == hash_file(str(path))
    assert trace.size == len(data)


def test_real_trace_holds_its_tool_calls_policy_and_outcomes() -> None:
    """The real run-4f70e336 trace: 30 events of one session, three tool calls allowed, the
    first failing."""
    trace = read_run_trace(TRACES / "run-4f70e336-cbd4-47f2-94e4-0aed03609a99.jsonl")
    assert len(trace.events) == 30
    assert trace.session_ids == {"cecbe0e3-9b5d-4571-b53a-2239e63b9f98"}
    decided = [(e.payload["toolCallId"], e.payload["decision"]) for e in trace.events
               if e.kind == "policy.decided"]
    outcomes = [(e.payload["toolName"], e.payload["outcome"]) for e in trace.events
                if e.kind == "tool.completed"]
    assert [d for _, d in decided] == ["allow", "allow", "allow"]
    assert decided[0][0] == "call-1846bae2-cacf-4e88-abec-e48c3c53d221"
    assert outcomes == [("read", "error"), ("bash", "success"), ("bash", "success")]


def test_written_trace_keeps_parents_checkpoints_and_clear_input() -> None:
    """The written trace: parent links resolve, the paused call is denied at its checkpoint,
    and tool.requested keeps its clear input."""
    trace = read_run_trace(WRITTEN)
    ids = {e.event_id for e in trace.events}
    assert all(e.parent_event_id in ids for e in trace.events if e.parent_event_id)
    assert [e.kind for e in trace.events if e.kind.startswith("checkpoint.")] == [
        "checkpoint.created", "checkpoint.resolved"]
    requested = next(e for e in trace.events if e.kind == "tool.requested")
    assert requested.payload["input"]["command"].endswith("./scripts/deploy.sh staging")


@pytest.mark.parametrize("name", sorted(BROKEN), ids=sorted(BROKEN))
def test_each_rule_rejects_the_file_at_its_line(name: str) -> None:
    """A trace breaking one of Catui's rules is rejected with ``file:line`` and the rule."""
    path = REJECTED / f"{name}.jsonl"
    line, rule = BROKEN[name]
    with pytest.raises(NotASessionError) as caught:
        read_run_trace(path)
    error = caught.value
    assert (error.code, error.path, error.line) == (INVALID_TRACE, str(path), line)
    assert rule in error.reason
    where = f"{path}:{line}: " if line is not None else f"{path}: "
    assert error.message.startswith(where)
    assert "\n" not in error.message


def test_file_over_64_mib_is_rejected_unread(tmp_path: Path) -> None:
    """A trace over 64 MiB is rejected by its size alone (a sparse file: nothing is read)."""
    path = tmp_path / "run-big.jsonl"
    shutil.copy(WRITTEN, path)
    os.truncate(path, MAX_FILE_BYTES + 1)
    with pytest.raises(NotASessionError) as caught:
        read_run_trace(path)
    assert (caught.value.code, caught.value.line) == (INVALID_TRACE, None)
    assert "over Catui's limit of 67108864" in caught.value.reason


def test_file_of_exactly_64_mib_is_not_refused_for_its_size(tmp_path: Path) -> None:
    """64 MiB itself is within the limit: such a file fails on its contents, not its size."""
    path = tmp_path / "run-edge.jsonl"
    path.write_bytes(b"")
    os.truncate(path, MAX_FILE_BYTES)  # NUL bytes: one line of them, too long
    with pytest.raises(NotASessionError) as caught:
        read_run_trace(path)
    assert caught.value.line == 1
    assert "line over Catui's limit" in caught.value.reason


def _padded(line: bytes, total: int) -> bytes:
    """``line`` (one event) grown to exactly ``total`` bytes by a clear tool input."""
    value = orjson.loads(line)
    value["payload"]["input"] = ""
    bare = len(orjson.dumps(value))
    value["payload"]["input"] = "x" * (total - bare)
    out = orjson.dumps(value)
    assert len(out) == total
    return out


@pytest.mark.parametrize(("extra", "accepted"), [(0, True), (1, False)], ids=["1MiB", "1MiB+1"])
def test_line_limit_is_one_mib(tmp_path: Path, extra: int, accepted: bool) -> None:
    """A line of exactly 1 MiB is read; one byte more rejects the file at that line."""
    lines = WRITTEN.read_bytes().split(b"\n")[:-1]
    at = next(i for i, line in enumerate(lines) if b'"tool.requested"' in line)
    lines[at] = _padded(lines[at], MAX_LINE_BYTES + extra)
    path = tmp_path / "run-long.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    if accepted:
        assert len(read_run_trace(path).events) == len(lines)
        return
    with pytest.raises(NotASessionError) as caught:
        read_run_trace(path)
    assert (caught.value.code, caught.value.line) == (INVALID_TRACE, at + 1)


def _rewrite(tmp_path: Path, line: int, **changes: object) -> Path:
    rows = [orjson.loads(x) for x in WRITTEN.read_bytes().split(b"\n")[:-1]]
    rows[line - 1].update(changes)
    path = tmp_path / "run-edit.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return path


@pytest.mark.parametrize(("changes", "accepted"), [
    ({"version": 1.0}, True),
    ({"sequence": 3.0}, True),
    ({"version": True}, False),
    ({"sequence": 0}, False),
    ({"timestamp": "2026-08-23T10:00:00Z"}, False),
    ({"sessionId": None}, False),
    ({"turnId": ""}, False),
    ({"eventId": 7}, False),
], ids=["version-1.0", "sequence-3.0", "version-true", "sequence-0", "timestamp-text",
        "sessionId-null", "turnId-empty", "eventId-number"])
def test_envelope_fields_are_judged_as_javascript_does(
    tmp_path: Path, changes: dict[str, object], accepted: bool
) -> None:
    """Envelope numbers follow JavaScript (3.0 is the integer 3, true is no number); optional
    ids must be non-empty strings when present."""
    path = _rewrite(tmp_path, 3, **changes)
    if accepted:
        assert read_run_trace(path).events[2].sequence == 3
        return
    with pytest.raises(NotASessionError) as caught:
        read_run_trace(path)
    assert caught.value.line == 3
    assert next(iter(changes)) in caught.value.reason


def test_parent_may_be_the_event_itself(tmp_path: Path) -> None:
    """As in Catui, an event's own id counts as earlier for its parentEventId."""
    own = orjson.loads(WRITTEN.read_bytes().split(b"\n")[3])["eventId"]
    assert read_run_trace(_rewrite(tmp_path, 4, parentEventId=own)).events[3].parent_event_id == own


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=80) | st.sampled_from([b"", b"{}", b"[]", b"null"]),
                min_size=0, max_size=6))
def test_any_bytes_read_or_rejected_with_a_line(tmp_path_factory: pytest.TempPathFactory,
                                                chunks: list[bytes]) -> None:
    """Whatever the bytes, reading returns a trace or raises one located NotASessionError."""
    lines = WRITTEN.read_bytes().split(b"\n")[:3]
    path = tmp_path_factory.mktemp("fuzz") / "run-fuzz.jsonl"
    path.write_bytes(b"\n".join([*lines, *chunks]))
    try:
        read_run_trace(path)
    except NotASessionError as exc:
        assert exc.code == INVALID_TRACE
        assert exc.message.startswith(str(path))
        assert "\n" not in exc.message


def test_true_is_not_the_number_one(tmp_path: Path) -> None:
    """``"sequence": true`` on the first line is refused, though Python takes True for 1."""
    with pytest.raises(NotASessionError) as caught:
        read_run_trace(_rewrite(tmp_path, 1, sequence=True))
    assert caught.value.line == 1
    assert "sequence: expected an integer of at least 1, got true" in caught.value.reason
