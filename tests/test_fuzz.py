"""Bad input never crashes the engine: every outcome is a result or a located typed error.

The seeded mutation fuzzer (``tests/fuzz.py``) and hypothesis strategies drive the
reader, the trace guard, normalization, the compactor and the hook, and batches of
mutated files through ``reindex`` and ``expand``. ``FUZZ_CASES=<n>`` scales the
mutation run (default a few thousand, well under a minute); ``FUZZ_SEED=<s>`` picks
another seed. Each test prints how many cases it ran.
"""

from __future__ import annotations

import random
import resource
import tracemalloc
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabric_memory._js import js_stringify
from fabric_memory.compaction import compact_session, compaction_hook
from fabric_memory.errors import (
    ExpandError,
    FabricMemoryError,
    HookInputError,
    LineTooLongError,
    NotASessionError,
)
from fabric_memory.memory.expand import expand
from fabric_memory.memory.reindex import reindex
from fabric_memory.session import read_session
from fabric_memory.trace import (
    is_fabric_execution_trace_operation_v1,
    is_fabric_execution_trace_v1,
    read_fabric_result,
    trace_rejection,
)

from . import fuzz
from .conftest import CORPUS, FIXTURES
from .corpus import corpus_index
from .fuzz import SMALL_SETTINGS, Fuzzer, FuzzFailure, case_budget, fuzz_seed

MUTATION_CASES = case_budget(3000)
HYPOTHESIS_EXAMPLES = max(MUTATION_CASES // 12, 50)
"""Examples per hypothesis test (generated sessions: half as many, they are bigger)."""
BATCH = 400
"""Mutated files per reindex + expand batch."""
CORPUS_SEEDS = ("fabric-valid-4", "fabric-invalid-1", "legacy-1", "branches-2-summary",
                "compaction-6-malformed-boundary", "misc-entry-types", "dangling-tool-call",
                "omp-flavoured", "plain-chat-1")

HEADER = b'{"type":"session","version":3,"id":"fuzz"}\n'


def _user(entry_id: str, parent: str | None, role: Any = "user") -> bytes:
    return orjson.dumps({"type": "message", "id": entry_id, "parentId": parent,
                         "message": {"role": role, "content": "hello there"}}) + b"\n"


def seed_paths() -> list[Path]:
    paths = [*sorted(FIXTURES.glob("sessions/**/*.jsonl")), *sorted(FIXTURES.glob("closure/*")),
             *sorted(FIXTURES.glob("audit/**/*.jsonl"))]
    index = corpus_index()
    paths += [CORPUS / item["file"] for item in index["files"] if item["name"] in CORPUS_SEEDS]
    return paths


# --- regressions the fuzzer found (each failed before its fix) --------------------------


def test_header_version_nested_deep_is_a_located_not_a_session(tmp_path: Path) -> None:
    """A header whose version is a 1,000-deep array is rejected at line 1 (no RecursionError)."""
    version = b"[" * 1000 + b"]" * 1000
    path = tmp_path / "deep.jsonl"
    path.write_bytes(b'{"type":"session","version":' + version + b',"id":"s"}\n')
    with pytest.raises(NotASessionError) as caught:
        read_session(path)
    assert (caught.value.path, caught.value.line) == (str(path), 1)
    assert "unsupported session version" in caught.value.message
    assert len(caught.value.message) < 400


@pytest.mark.parametrize("role", [[], {}, ["user"], {"user": 1}], ids=repr)
def test_unhashable_role_is_not_a_crash(tmp_path: Path, role: Any) -> None:
    """A message whose role is an array or object is just not a cut point for the compactor."""
    data = HEADER + _user("u1", None) + _user("u2", "u1", role) + _user("u3", "u2") + _user(
        "u4", "u3")
    path = tmp_path / "role.jsonl"
    path.write_bytes(data)
    result = compact_session(path, SMALL_SETTINGS)
    assert "compaction" in result.outcome.to_hook_result()


def test_tool_arguments_nested_as_deep_as_json_allows_are_estimated(tmp_path: Path) -> None:
    """Tool-call arguments nested 1,000 deep (orjson reads up to 1,024) are measured as
    JSON.stringify would, without a RecursionError."""
    deep_list = b"[" * 1000 + b"0" + b"]" * 1000
    deep_object = b'{"a":' * 1000 + b"0" + b"}" * 1000
    assert js_stringify(orjson.loads(deep_list)) == deep_list.decode()
    assert js_stringify(orjson.loads(deep_object)) == deep_object.decode()
    call = {"type": "message", "id": "a1", "parentId": "u1", "message": {
        "role": "assistant", "content": [{"type": "toolCall", "id": "c", "name": "x",
                                          "arguments": "ARGS"}]}}
    line = orjson.dumps(call).replace(b'"ARGS"', deep_list) + b"\n"
    data = HEADER + _user("u1", None) + line + _user("u2", "a1") + _user("u3", "u2")
    path = tmp_path / "deep-args.jsonl"
    path.write_bytes(data)
    result = compact_session(path, SMALL_SETTINGS)
    assert result.context_tokens >= 2000 // 4


# --- the seeded mutation run ------------------------------------------------------------


def _report(capsys: pytest.CaptureFixture[str], line: str) -> None:
    with capsys.disabled():
        print(f"\nfuzz: {line}")


def test_mutation_fuzz(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Mutated fixture and corpus sessions give results or located typed errors in the reader,
    guard, compactor and hook; batches reindex and expand to the file's verbatim bytes."""
    seed = fuzz_seed()
    fuzzer = Fuzzer(seed, tmp_path)
    rng = random.Random(seed)
    batch: dict[Path, Any] = {}
    sessions = tmp_path / "batch-0"
    for case in fuzz.generate(fuzz.load_seeds(seed_paths()), MUTATION_CASES, seed):
        if case.number and case.number % BATCH == 0:
            fuzzer.run_batch(sessions, tmp_path / "index", batch, rng)
            sessions, batch = tmp_path / f"batch-{case.number // BATCH}", {}
        path = sessions / "--fuzz--" / f"case-{case.number:06d}.jsonl"
        session = fuzzer.run(case, path)
        if session is not None:
            batch[path] = session
    fuzzer.run_batch(sessions, tmp_path / "index", batch, rng)
    tally = fuzzer.tally
    _report(capsys, f"{fuzzer.cases} mutation cases (FUZZ_SEED={seed}), 0 crashes; "
            + ", ".join(f"{stage}.{outcome}={n}" for (stage, outcome), n in sorted(tally.items())))
    assert fuzzer.cases == MUTATION_CASES
    # The run reached every stage and both kinds of outcome (it did not just bounce off).
    for stage, outcome in (("reader", "ok"), ("reader", "not_a_session"), ("guard", "valid"),
                           ("guard", "invalid"), ("compact", "compaction"), ("hook", "compaction"),
                           ("reindex", "indexed"), ("reindex", "invalid"), ("expand", "ok")):
        assert tally[stage, outcome] > 0, (stage, outcome)
    if MUTATION_CASES >= BATCH:
        assert tally["expand", "stale_pointer"] > 0


def test_every_mutator_changes_its_input() -> None:
    """Each mutator alters a seed session (a no-op mutator would fuzz nothing)."""
    data = (FIXTURES / "sessions" / "--home-dev-fixture-app--"
            / "2026-01-05T08-00-00-000Z_fabric-valid.jsonl").read_bytes()
    for name, mutate in fuzz.MUTATORS.items():
        changed = sum(mutate(random.Random(n), data) != data for n in range(20))
        assert changed >= 15, name


def test_a_crash_is_reported_with_its_case(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Sabotage: a reader that raises a plain exception makes the fuzzer fail, naming the case."""

    def broken(path: Any, **_: Any) -> Any:
        raise KeyError("boom")

    monkeypatch.setattr(fuzz, "read_session", broken)
    case = fuzz.Case(7, "seed.jsonl", ("flip_bytes",), HEADER)
    with pytest.raises(FuzzFailure, match=r"case 7 .*seed.jsonl <- flip_bytes: KeyError"):
        Fuzzer(1, tmp_path).run(case, tmp_path / "x.jsonl")


def test_an_unlocated_error_is_a_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Sabotage: a typed error that does not name its file fails the run (one that does is
    an accepted outcome)."""

    def located(path: Any, **_: Any) -> Any:
        raise NotASessionError(str(path), 1, "bad")

    def nameless(path: Any, *_: Any, **__: Any) -> Any:
        raise fuzz.FabricMemoryError("something went wrong")

    monkeypatch.setattr(fuzz, "compact_session", nameless)
    with pytest.raises(FuzzFailure, match="does not name"):
        Fuzzer(1, tmp_path).run(fuzz.Case(1, "s", ("x",), HEADER + _user("u1", None)),
                                tmp_path / "y.jsonl")
    monkeypatch.setattr(fuzz, "read_session", located)
    assert Fuzzer(1, tmp_path).run(fuzz.Case(2, "s", ("x",), HEADER), tmp_path / "z.jsonl") is None


def test_a_hang_is_a_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Sabotage: a case that runs past its time limit fails instead of hanging the suite."""
    import time

    def slow(path: Any, **_: Any) -> Any:
        time.sleep(5)

    monkeypatch.setattr(fuzz, "CASE_SECONDS", 0.2)
    monkeypatch.setattr(fuzz, "read_session", slow)
    with pytest.raises(FuzzFailure, match="longer than"):
        Fuzzer(1, tmp_path).run(fuzz.Case(3, "s", ("x",), HEADER), tmp_path / "h.jsonl")


def test_wrong_expanded_bytes_are_a_failure(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Sabotage: an expand that returns bytes other than the file's fails the batch check."""
    path = tmp_path / "s" / "--x--" / "a.jsonl"
    fuzzer = Fuzzer(1, tmp_path)
    session = fuzzer.run(fuzz.Case(1, "s", ("x",), HEADER + _user("u1", None)), path)
    assert session is not None
    real = fuzz.expand

    def lying(*args: Any, **kwargs: Any) -> Any:
        page = real(*args, **kwargs)
        for item in page["entries"]:
            item["text"] = item["text"].replace("hello", "HELLO")
        return page

    monkeypatch.setattr(fuzz, "expand", lying)
    with pytest.raises(FuzzFailure, match="not the source's"):
        fuzzer.run_batch(tmp_path / "s", tmp_path / "index", {path: session}, random.Random(1))


# --- named hazards, each through every stage ----------------------------------------------


def _line(entry_id: str, parent: str | None, content: bytes) -> bytes:
    head = orjson.dumps({"type": "message", "id": entry_id, "parentId": parent,
                         "message": {"role": "user", "content": "SLOT"}})
    return head.replace(b'"SLOT"', content) + b"\n"


GOOD = HEADER + _user("u1", None) + _user("u2", "u1")
HAZARDS: dict[str, tuple[bytes, str, int | None]] = {
    # name: (file bytes, expected reader outcome, the line it names)
    "nested-10000-entry": (GOOD + _line("x", "u2", b"[" * 10_000 + b"]" * 10_000), "malformed", 4),
    "nested-10000-header": (b"[" * 10_000 + b"]" * 10_000 + b"\n" + GOOD, "not_a_session", 1),
    "nested-1000-entry": (GOOD + _line("x", "u2", b"[" * 1000 + b"1" + b"]" * 1000), "ok", None),
    # JSON.parse (Pi's reader) reads numbers past the double range, lone surrogate escapes
    # and invalid UTF-8 (as U+FFFD), so these lines are entries (docs/sessions.md#lines).
    "digits-400": (GOOD + _line("x", "u2", b"1" * 400), "ok", None),
    "digits-400-negative": (GOOD + _line("x", "u2", b"-" + b"9" * 400), "ok", None),
    "digits-400-fraction": (GOOD + _line("x", "u2", b"0." + b"1" * 400), "ok", None),
    "lone-high-surrogate": (GOOD + _line("x", "u2", b'"\\ud800"'), "ok", None),
    "lone-low-surrogate": (GOOD + _line("x", "u2", b'"a\\udfffb"'), "ok", None),
    "surrogate-in-header": (b'{"type":"session","version":3,"id":"\\ud800"}\n' + _user("u1", None),
                            "ok", None),
    "surrogate-pair": (GOOD + _line("x", "u2", b'"\\ud83d\\ude00"'), "ok", None),
    "crlf": (GOOD.replace(b"\n", b"\r\n"), "ok", None),
    "cr-only": (GOOD.replace(b"\n", b"\r"), "not_a_session", 1),
    "nul-raw-in-string": (GOOD + _line("x", "u2", b'"a\x00b"'), "malformed", 4),
    "nul-escaped": (GOOD + _line("x", "u2", b'"a\\u0000b"'), "ok", None),
    "nul-line": (GOOD + b"\x00" * 64 + b"\n" + _user("u3", "u2"), "malformed", 4),
    "invalid-utf8": (GOOD + _line("x", "u2", b'"\xff\xfe"'), "ok", None),
    "overlong-utf8": (GOOD + _line("x", "u2", b'"\xc0\xaf"'), "ok", None),
    "utf8-bom": (b"\xef\xbb\xbf" + GOOD, "not_a_session", 1),
    "line-separators": (GOOD + _line("x", "u2", '"a\u2028b\u2029c"'.encode()), "ok", None),
    "truncated-tail": (GOOD + _line("x", "u2", b'"half')[:-3], "truncated", 4),
}


@pytest.mark.parametrize("name", sorted(HAZARDS))
def test_named_hazard(tmp_path: Path, name: str) -> None:
    """Each named hazard reads as documented (naming its line) and survives every stage."""
    data, expected, line = HAZARDS[name]
    path = tmp_path / "sessions" / "--hazard--" / f"{name}.jsonl"
    fuzzer = Fuzzer(0, tmp_path)
    session = fuzzer.run(fuzz.Case(0, name, (name,), data), path)
    if expected == "not_a_session":
        assert session is None and fuzzer.tally["reader", "not_a_session"] == 1
        with pytest.raises(NotASessionError) as caught:
            read_session(path)
        assert caught.value.line == line
        return
    assert session is not None
    if expected == "malformed":
        assert [p.line for p in session.malformed] == [line]
        assert session.malformed[0].located(str(path)).startswith(f"{path}:{line}: ")
    elif expected == "truncated":
        assert session.truncated_tail is not None and session.truncated_tail.line == line
    else:
        assert not session.malformed and session.truncated_tail is None
    fuzzer.run_batch(tmp_path / "sessions", tmp_path / "index", {path: session},
                     random.Random(0))
    assert fuzzer.tally["expand", "ok"] >= 1


def test_crlf_file_has_the_same_entries_as_lf(tmp_path: Path) -> None:
    """A CRLF session yields the same ids, branch and texts as its LF twin (CR is not data)."""
    lf, crlf = tmp_path / "lf.jsonl", tmp_path / "crlf.jsonl"
    lf.write_bytes(GOOD)
    crlf.write_bytes(GOOD.replace(b"\n", b"\r\n"))
    a, b = read_session(lf), read_session(crlf)
    assert [e.id for e in a.entries] == [e.id for e in b.entries]
    assert [e.raw for e in a.entries] == [e.raw for e in b.entries]
    assert [e.length for e in a.entries] == [e.length for e in b.entries]
    assert a.lineage_fingerprint() == b.lineage_fingerprint()


# --- a 100 MB line -------------------------------------------------------------------------

HUGE_LINE = 100 * 1024 * 1024
PEAK_LIMIT = 24 * 1024 * 1024
"""Far below the line: the 8 MiB line limit plus one 1 MiB read chunk, with slack."""


def _write_huge_line(path: Path) -> None:
    """A session whose third line is 100 MB, written 1 MiB at a time (never held whole)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    chunk = b"a" * (1024 * 1024)
    with open(path, "wb") as stream:
        stream.write(GOOD + b'{"type":"message","id":"big","parentId":"u2","message":'
                     b'{"role":"user","content":"')
        for _ in range(HUGE_LINE // len(chunk)):
            stream.write(chunk)
        stream.write(b'"}}\n' + _user("u3", "big"))


def _peak(call: Any) -> tuple[Any, int]:
    """What ``call()`` returned or raised, and the peak of Python allocations meanwhile."""
    tracemalloc.start()
    try:
        try:
            outcome: Any = call()
        except FabricMemoryError as error:
            outcome = error
        return outcome, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_100_mb_line_is_refused_before_it_is_held(tmp_path: Path) -> None:
    """Reader, compactor, reindex and expand refuse a 100 MB line with LineTooLongError (or its
    code) naming file:line, never holding more than a few MiB of it."""
    sessions = tmp_path / "sessions"
    path = sessions / "--huge--" / "huge.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(GOOD)
    roots = {"sessions": sessions, "index": tmp_path / "index"}
    reindex(**roots, workers=1)
    _write_huge_line(path)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    error, peak = _peak(lambda: read_session(path))
    assert isinstance(error, LineTooLongError) and (error.path, error.line) == (str(path), 4)
    assert peak < PEAK_LIMIT, peak
    error, peak = _peak(lambda: compact_session(path, SMALL_SETTINGS))
    assert isinstance(error, LineTooLongError) and peak < PEAK_LIMIT, peak
    error, peak = _peak(lambda: expand(str(path), indices=[0], **roots))
    assert isinstance(error, ExpandError) and error.code == "source_unavailable", error
    assert f"{path}:4: line longer than" in error.message and peak < PEAK_LIMIT, peak
    report, peak = _peak(lambda: reindex(**roots, workers=1))
    assert [item["path"] for item in report["invalid"]] == [str(path)]
    assert report["invalid"][0]["reason"].startswith(f"{path}:4: line longer than")
    assert peak < PEAK_LIMIT, peak
    # The whole process never grew by anything like the line (RSS high-water mark, KiB).
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before
    assert grown * 1024 < 2 * PEAK_LIMIT, grown


def test_peak_check_has_teeth() -> None:
    """Sabotage: holding a 32 MiB buffer shows up in the measured peak."""
    _, peak = _peak(lambda: len(bytearray(32 * 1024 * 1024)))
    assert peak >= PEAK_LIMIT


# --- hypothesis -----------------------------------------------------------------------------


def test_guard_never_raises_on_any_value(capsys: pytest.CaptureFixture[str]) -> None:
    """The guard returns a verdict for any value (traces perturbed anywhere, any JSON, Python
    values JSON cannot hold) and the verdict agrees with its rejection reason."""
    seen = Counter[str]()

    @settings(max_examples=HYPOTHESIS_EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.one_of(fuzz.traces(), fuzz.json_values()))
    def check(value: Any) -> None:
        valid = is_fabric_execution_trace_v1(value)
        rejection = trace_rejection(value)
        assert valid is (rejection is None)
        assert rejection is None or rejection.split(": ", 1)[0]
        operations = value.get("operations") if isinstance(value, dict) else None
        for op in operations if isinstance(operations, list) else ():
            assert is_fabric_execution_trace_operation_v1(op) in (True, False)
        message = {"role": "toolResult", "toolName": "fabric_exec", "details": {"trace": value}}
        result = read_fabric_result("e1", message)
        assert result is not None and (result.verdict == "valid") is valid
        seen["valid" if valid else "invalid"] += 1

    check()
    total = sum(seen.values())
    _report(capsys, f"{total} guard examples ({seen['valid']} valid)")
    assert seen["valid"] > 0 and seen["invalid"] > 0


def test_generated_sessions_never_crash(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Hypothesis-built sessions (random entries, traces, damage) give results or located
    typed errors in the reader, guard, compactor and hook."""
    fuzzer = Fuzzer(0, tmp_path)

    @settings(max_examples=HYPOTHESIS_EXAMPLES // 2, deadline=None, derandomize=True,
              database=None, suppress_health_check=list(HealthCheck))
    @given(fuzz.session_bytes())
    def check(data: bytes) -> None:
        fuzzer.run(fuzz.Case(fuzzer.cases, "hypothesis", ("session_bytes",), data),
                   tmp_path / "session.jsonl")

    check()
    _report(capsys, f"{fuzzer.cases} generated sessions")
    assert fuzzer.tally["reader", "ok"] > 0 and fuzzer.tally["compact", "compaction"] > 0


def test_hook_events_never_crash(capsys: pytest.CaptureFixture[str]) -> None:
    """Any event gives a JSON-encodable hook result or a HookInputError naming the event's
    JSON path."""
    seen = Counter[str]()
    entry = st.builds(
        lambda i, role, content: {"type": "message", "id": f"e{i}",
                                  "parentId": f"e{i - 1}" if i else None,
                                  "message": {"role": role, "content": content}},
        st.integers(0, 6), st.sampled_from(["user", "assistant", "toolResult", "custom"]),
        st.one_of(st.text(max_size=30), fuzz.json_values(6)))
    good = st.fixed_dictionaries({
        "type": st.just("session_before_compact"),
        "preparation": st.fixed_dictionaries({
            "firstKeptEntryId": st.sampled_from(["", "e1", "e3", "nope"]),
            "tokensBefore": st.one_of(st.integers(0, 10**6),
                                      st.sampled_from([1e300, 2**64 - 1, 2**63, 2**53]))}),
        "branchEntries": st.lists(entry, max_size=8)})
    damaged = st.fixed_dictionaries({
        "type": st.sampled_from(["session_before_compact", "other"]),
        "preparation": st.one_of(fuzz.json_values(4), st.fixed_dictionaries({
            "firstKeptEntryId": fuzz.json_scalars(), "tokensBefore": fuzz.json_scalars()})),
        "branchEntries": st.lists(st.one_of(entry, fuzz.json_values(4)), max_size=8)})
    events = st.one_of(good, damaged, fuzz.json_values(8))

    @settings(max_examples=HYPOTHESIS_EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(events)
    def check(event: Any) -> None:
        try:
            result = compaction_hook(event)
        except HookInputError as error:
            assert error.message.startswith(("$", "stdin")), error.message
            seen["bad_event"] += 1
        else:
            assert "compaction" in result or result.get("cancel") is True
            orjson.dumps(result, option=orjson.OPT_INDENT_2)  # what `fabric-memory hook` prints
            seen["result"] += 1

    check()
    total = sum(seen.values())
    _report(capsys, f"{total} hook events ({seen['result']} compacted or cancelled)")
    assert seen["result"] > 0 and seen["bad_event"] > 0
