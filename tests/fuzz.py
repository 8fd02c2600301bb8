"""A seeded mutation fuzzer and hypothesis strategies for session files (tests only).

:func:`generate` turns seed sessions into mutated byte strings (byte flips,
truncation, duplicated/reordered lines, invalid UTF-8, NUL bytes, CRLF, JSON nested
past every limit, 400-digit numbers, lone surrogate escapes, type confusion ...).
:class:`Fuzzer` pushes each one through the reader, the trace guard, normalization
and the compactor, and a batch of them through ``reindex`` and ``expand`` (including
files changed after indexing). Every outcome must be a result or a
:class:`~fabric_memory.errors.FabricMemoryError` that names where it happened; anything
else (another exception, a case past its time limit) raises :class:`FuzzFailure`
naming the seed and case, so ``FUZZ_SEED=<s> FUZZ_CASES=<n> pytest tests/test_fuzz.py``
reproduces it.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import orjson
from hypothesis import strategies as st

from fabric_memory.compaction import Cancel, Compaction, compact_session, compaction_hook
from fabric_memory.compaction.prepare import CompactionSettings
from fabric_memory.errors import ExpandError, FabricMemoryError, SessionError
from fabric_memory.memory.catalog import load_catalog
from fabric_memory.memory.expand import expand
from fabric_memory.memory.index import open_index
from fabric_memory.memory.normalize import normalize_session
from fabric_memory.memory.reindex import reindex
from fabric_memory.session import Session, read_session
from fabric_memory.trace import (
    is_fabric_execution_trace_v1,
    read_fabric_execution_render_details,
    read_fabric_result,
    trace_rejection,
)

from .reliability import Expected, expected_texts

CASE_SECONDS = 10.0
"""No single case may take longer than this (a hang is a failure, not a slow test)."""
EXPAND_SAMPLE = 40
"""Indexed files per batch that are expanded (half of them again after a change)."""
SMALL_SETTINGS = CompactionSettings(reserve_tokens=63, keep_recent_tokens=1)
"""Certification's settings: every session with two turns has something to compact."""
NEST_DEPTHS = (15, 16, 254, 256, 1000, 1023, 1024, 1025, 10_000)
HUGE_NUMBERS = (
    b"1" * 400, b"-" + b"9" * 400, b"0." + b"0" * 400 + b"1", b"1e400", b"-1e-400",
    b"9007199254740993", b"18446744073709551617", b"1" * 25, b"-0", b"2.0", b"1.0e0",
)
SURROGATES = (b'"\\ud800"', b'"a\\udfffb"', b'"\\ud800\\u0041"', b'"\\udc00\\ud800"',
              b'"\\ud83d"', b'"ok \\ud83d\\ude00"')
INVALID_UTF8 = (b"\xff", b"\xfe\xff", b"\xc3(", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80",
                b"\xe2\x82", b"\x80")
FOCUS_KEYS = ("message", "details", "trace", "operations", "args", "content", "arguments",
              "audits", "phases", "counts", "sequence", "result", "firstKeptEntryId", "parentId",
              "id", "summary", "version", "usage")


class FuzzFailure(AssertionError):
    """A case produced something other than a result or a located typed error."""


class FuzzHang(BaseException):
    """A case ran past :data:`CASE_SECONDS` (BaseException: a guard's ``except Exception``
    must not swallow it)."""


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Raise :class:`FuzzHang` in the main thread when the block runs too long."""

    def expire(signum: int, frame: FrameType | None) -> None:
        raise FuzzHang(f"case ran longer than {seconds:g}s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# --- mutators -------------------------------------------------------------------------

Mutator = Callable[[random.Random, bytes], bytes]


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def _string_position(rng: random.Random, data: bytes) -> int:
    """A position just inside a JSON string when there is one (else anywhere)."""
    quotes = [i + 1 for i in range(len(data)) if data[i : i + 1] == b'"'][:4096]
    return rng.choice(quotes) if quotes else rng.randint(0, len(data))


def flip_bytes(rng: random.Random, data: bytes) -> bytes:
    if not data:
        return bytes([rng.randrange(256)])
    out = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        at = rng.randrange(len(out))
        out[at] ^= rng.randint(1, 255)
    return bytes(out)


def truncate(rng: random.Random, data: bytes) -> bytes:
    return data[: rng.randint(0, len(data))]


def duplicate_line(rng: random.Random, data: bytes) -> bytes:
    lines = _lines(data)
    lines.insert(rng.randint(0, len(lines)), rng.choice(lines))
    return b"\n".join(lines)


def reorder_lines(rng: random.Random, data: bytes) -> bytes:
    lines = _lines(data)
    if rng.random() < 0.5:
        rng.shuffle(lines)
    else:
        a, b = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[a], lines[b] = lines[b], lines[a]
    return b"\n".join(lines)


def drop_line(rng: random.Random, data: bytes) -> bytes:
    lines = _lines(data)
    del lines[rng.randrange(len(lines))]
    return b"\n".join(lines)


def invalid_utf8(rng: random.Random, data: bytes) -> bytes:
    at = _string_position(rng, data)
    return data[:at] + rng.choice(INVALID_UTF8) + data[at:]


def nul_bytes(rng: random.Random, data: bytes) -> bytes:
    at = _string_position(rng, data) if rng.random() < 0.7 else rng.randint(0, len(data))
    return data[:at] + b"\x00" * rng.randint(1, 3) + data[at:]


def crlf(rng: random.Random, data: bytes) -> bytes:
    if rng.random() < 0.8:
        return data.replace(b"\n", b"\r\n")
    return data.replace(b"\n", b"\r")  # old-Mac line ends: one huge line


def line_separators(rng: random.Random, data: bytes) -> bytes:
    at = _string_position(rng, data)
    return data[:at] + rng.choice(("\u2028", "\u2029", "\u0085")).encode() + data[at:]


def _json_lines(data: bytes) -> list[tuple[int, Any]]:
    found = []
    for number, line in enumerate(_lines(data)):
        with contextlib.suppress(orjson.JSONDecodeError):
            value = orjson.loads(line)
            if isinstance(value, dict):
                found.append((number, value))
    return found


def _containers(value: Any, depth: int = 0) -> Iterator[tuple[Any, Any, int]]:
    """(container, key, depth) for every slot of a parsed line, focus keys first."""
    if depth > 12:
        return
    if isinstance(value, dict):
        keys = sorted(value, key=lambda k: (k not in FOCUS_KEYS, k))
        for key in keys:
            yield value, key, depth
            yield from _containers(value[key], depth + 1)
    elif isinstance(value, list):
        for index, item in enumerate(value[:20]):
            yield value, index, depth
            yield from _containers(item, depth + 1)


SENTINEL = "\u0000FUZZ_SLOT\u0000"


def _splice_value(rng: random.Random, data: bytes, raw: bytes) -> bytes:
    """Replace one JSON value somewhere in one line with ``raw`` bytes (any JSON, or not)."""
    candidates = _json_lines(data)
    if not candidates:
        return data + b"\n" + raw
    number, value = rng.choice(candidates)
    slots = list(_containers(value))
    if not slots:
        return data
    focused = [slot for slot in slots if slot[1] in FOCUS_KEYS]
    container, key, _ = rng.choice(focused if focused and rng.random() < 0.7 else slots)
    container[key] = SENTINEL
    try:
        line = orjson.dumps(value).replace(orjson.dumps(SENTINEL), raw, 1)
    except orjson.JSONEncodeError:  # an earlier splice nested it past orjson's own limit
        return data + b"\n" + raw
    lines = _lines(data)
    lines[number] = line
    return b"\n".join(lines)


def deep_nesting(rng: random.Random, data: bytes) -> bytes:
    depth = rng.choice(NEST_DEPTHS)
    opener, closer = (b"[", b"]") if rng.random() < 0.5 else (b'{"a":', b"}")
    raw = opener * depth + b"0" + closer * depth
    return _splice_value(rng, data, raw)


def huge_number(rng: random.Random, data: bytes) -> bytes:
    return _splice_value(rng, data, rng.choice(HUGE_NUMBERS))


def lone_surrogate(rng: random.Random, data: bytes) -> bytes:
    if rng.random() < 0.3:  # as an object key
        return _splice_value(rng, data, b"{" + rng.choice(SURROGATES) + b":1}")
    return _splice_value(rng, data, rng.choice(SURROGATES))


CONFUSIONS = (b"null", b"true", b"false", b"0", b"-1", b"1.5", b'""', b"[]", b"{}", b'"x"',
              b'[{"type":"call"}]', b'{"kind":"pi-fabric.execution","version":1}', b"[null]",
              b'"' + b"w" * 70_000 + b'"', b'{"__proto__":1}')


def type_confusion(rng: random.Random, data: bytes) -> bytes:
    return _splice_value(rng, data, rng.choice(CONFUSIONS))


def duplicate_key(rng: random.Random, data: bytes) -> bytes:
    lines = _lines(data)
    number = rng.randrange(len(lines))
    line = lines[number]
    if line.endswith(b"}") and len(line) > 2:
        key = rng.choice((b'"id"', b'"type"', b'"parentId"', b'"message"', b'"trace"'))
        lines[number] = line[:-1] + b"," + key + b":" + rng.choice(CONFUSIONS[:10]) + b"}"
    return b"\n".join(lines)


def splice_foreign(rng: random.Random, data: bytes, others: Sequence[bytes]) -> bytes:
    lines = _lines(data)
    donor = _lines(rng.choice(others))
    lines.insert(rng.randint(0, len(lines)), rng.choice(donor))
    return b"\n".join(lines)


MUTATORS: dict[str, Mutator] = {
    "flip_bytes": flip_bytes,
    "truncate": truncate,
    "duplicate_line": duplicate_line,
    "reorder_lines": reorder_lines,
    "drop_line": drop_line,
    "invalid_utf8": invalid_utf8,
    "nul_bytes": nul_bytes,
    "crlf": crlf,
    "line_separators": line_separators,
    "deep_nesting": deep_nesting,
    "huge_number": huge_number,
    "lone_surrogate": lone_surrogate,
    "type_confusion": type_confusion,
    "duplicate_key": duplicate_key,
}
"""Every mutator; ``splice_foreign`` (needs the other seeds) is applied on top."""


@dataclass(frozen=True, slots=True)
class Case:
    number: int
    seed_name: str
    steps: tuple[str, ...]
    data: bytes

    def describe(self, seed: int) -> str:
        return f"case {self.number} (FUZZ_SEED={seed}): {self.seed_name} <- {'+'.join(self.steps)}"


def load_seeds(paths: Sequence[Path]) -> list[tuple[str, bytes]]:
    return [(path.name, path.read_bytes()) for path in paths]


def generate(seeds: Sequence[tuple[str, bytes]], count: int, seed: int) -> Iterator[Case]:
    """``count`` mutated sessions; mutator kinds rotate so each is exercised evenly."""
    rng = random.Random(seed)
    names = list(MUTATORS)
    bodies = [data for _, data in seeds]
    for number in range(count):
        seed_name, data = seeds[number % len(seeds)]
        first = names[number % len(names)]
        steps = [first, *rng.sample(names, rng.choice((0, 0, 1, 2)))]
        for step in steps:
            data = MUTATORS[step](rng, data)
        if rng.random() < 0.1:
            data = splice_foreign(rng, data, bodies)
            steps.append("splice_foreign")
        yield Case(number, seed_name, tuple(steps), data)


# --- driving one case -------------------------------------------------------------------


def _require_located(error: FabricMemoryError, where: str, what: str) -> str:
    """The error's code, after checking it names ``where``."""
    if where not in error.message:
        raise FuzzFailure(f"{what}: {type(error).__name__} does not name {where!r}: {error}")
    if "\n" in error.message:
        raise FuzzFailure(f"{what}: error message is not one line: {error.message!r}")
    return error.code


def _require_encodable(value: Any, what: str) -> None:
    """What the CLI prints must encode as JSON (orjson refuses integers past 64 bits)."""
    try:
        orjson.dumps(value, option=orjson.OPT_INDENT_2)
    except TypeError as error:
        raise FuzzFailure(f"{what}: result is not JSON-encodable ({error})") from error


@dataclass
class Fuzzer:
    """Runs cases and tallies ``(stage, outcome)``; raises :class:`FuzzFailure` on a crash."""

    seed: int
    workdir: Path
    tally: Counter[tuple[str, str]] = field(default_factory=Counter)
    cases: int = 0

    def run(self, case: Case, path: Path) -> Session | None:
        """Write the case to ``path``; reader, guard, normalization, compactor and hook.

        Returns the session when the file reads as one.
        """
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(case.data)
        what = case.describe(self.seed)
        try:
            with deadline(CASE_SECONDS):
                session = self.check_file(path, what)
        except (FuzzFailure, FuzzHang) as failure:
            raise FuzzFailure(f"{what}: {failure}") from failure
        except Exception as crash:
            raise FuzzFailure(f"{what}: {type(crash).__name__}: {crash}") from crash
        self.cases += 1
        return session

    def check_file(self, path: Path, what: str) -> Session | None:
        name = str(path)
        try:
            session = read_session(path)
        except SessionError as error:
            if error.path != name:
                raise FuzzFailure(f"{what}: SessionError names {error.path!r}") from error
            self.tally["reader", _require_located(error, name, what)] += 1
            return None
        self.tally["reader", "ok"] += 1
        self.check_guard(session, what)
        normalized = normalize_session(session)
        self.tally["normalize", "ok" if normalized.items or not session.entries else "empty"] += 1
        try:
            result = compact_session(path, SMALL_SETTINGS, context_window=64)
        except FabricMemoryError as error:
            self.tally["compact", _require_located(error, name, what)] += 1
        else:
            outcome = result.outcome
            _require_encodable(result.to_json(), f"{what}: compact_session")
            self.tally["compact", "cancel" if isinstance(outcome, Cancel) else "compaction"] += 1
            if isinstance(outcome, Compaction):
                self.check_hook(session, outcome, what)
        return session

    def check_guard(self, session: Session, what: str) -> None:
        for entry in session.entries:
            message = entry.message
            if message is None:
                continue
            result = read_fabric_result(entry.id, message)
            if result is None:
                continue
            self.tally["guard", result.verdict] += 1
            details = message.get("details")
            trace = details.get("trace") if isinstance(details, dict) else None
            valid = is_fabric_execution_trace_v1(trace)
            rejection = trace_rejection(trace)
            if valid != (rejection is None):
                raise FuzzFailure(f"{what}: guard and rejection disagree on {entry.id}")
            if isinstance(details, dict) and "trace" in details and valid != (
                result.verdict == "valid"
            ):
                raise FuzzFailure(f"{what}: read_fabric_result disagrees with the guard")
            read_fabric_execution_render_details(details)

    def check_hook(self, session: Session, compaction: Compaction, what: str) -> None:
        """The same branch through the in-process hook (the host's path) gives the same
        compaction as :func:`compact_session` did from the file."""
        event = {
            "type": "session_before_compact",
            "preparation": {"firstKeptEntryId": compaction.requested_first_kept_entry_id,
                            "tokensBefore": compaction.tokens_before},
            "branchEntries": [entry.raw for entry in session.active_branch()],
            "sessionId": session.session_id,
        }
        try:
            result = compaction_hook(event)
        except FabricMemoryError as error:
            self.tally["hook", _require_located(error, "$", what)] += 1
            return
        if result != compaction.to_hook_result():
            raise FuzzFailure(f"{what}: the hook and compact_session disagree")
        _require_encodable(result, f"{what}: the hook")
        self.tally["hook", "compaction" if "compaction" in result else "cancel"] += 1

    # --- reindex and expand, a batch at a time ------------------------------------------

    def run_batch(self, sessions: Path, index: Path, good: dict[Path, Session],
                  rng: random.Random) -> None:
        """Reindex every case file under ``sessions``; expand a sample of the indexed ones;
        then change some files and expand again: verbatim bytes of the file as it is now,
        or one of expand's codes (``stale_pointer`` for a pointer to the old bytes)."""
        what = f"batch under {sessions} (FUZZ_SEED={self.seed})"
        try:
            with deadline(CASE_SECONDS * 6):
                self._reindex_and_expand(sessions, index, good, rng, what)
        except (FuzzFailure, FuzzHang) as failure:
            raise FuzzFailure(f"{what}: {failure}") from failure
        except Exception as crash:
            raise FuzzFailure(f"{what}: {type(crash).__name__}: {crash}") from crash

    def _reindex_and_expand(self, sessions: Path, index: Path, good: dict[Path, Session],
                            rng: random.Random, what: str) -> None:
        files = sorted(sessions.rglob("*.jsonl"))
        report = reindex(sessions=sessions, index=index, workers=1)
        invalid = {item["path"] for item in report["invalid"]}
        if report["sessions"] != len(files) or report["indexed"] + len(invalid) != len(files):
            raise FuzzFailure(f"{what}: reindex counts do not add up: {report}")
        for item in report["invalid"]:
            if not item["reason"].startswith(item["path"]):
                raise FuzzFailure(f"{what}: invalid reason does not name its file: {item}")
        self.tally["reindex", "indexed"] += report["indexed"]
        self.tally["reindex", "invalid"] += len(invalid)
        catalog = load_catalog(open_index(index))
        for path, session in good.items():
            record = catalog.by_path.get(str(path))
            # Entry documents: the entries, then the objects salvaged from glued lines.
            documents = len(session.entries) + sum(len(g.objects) for g in session.glued)
            if record is None or record.entries != documents:
                raise FuzzFailure(f"{what}: {path} indexed as {record}, "
                                  f"read {documents} entry documents")
        sample = rng.sample(sorted(good), k=min(len(good), EXPAND_SAMPLE))
        for path in sample:
            self.expand_all(path, sessions, index, None, what)
        for path in sample[: len(sample) // 2]:
            old_hash = good[path].source_hash
            change = rng.choice(("mutate", "append", "truncate", "delete", "replace"))
            _change_file(rng, path, change)
            self.tally["changed", change] += 1
            self.expand_all(path, sessions, index, old_hash, what)

    def expand_all(self, path: Path, sessions: Path, index: Path, expected_hash: str | None,
                   what: str) -> None:
        """Expand entries and addresses of ``path``; each page must match the file as it is
        now, byte for byte, or fail with one of expand's codes."""
        current = expected_texts(path)
        selectors = list(current.addresses)[:20]
        for expectation in (expected_hash, None):
            request: dict[str, Any] = {
                "addresses": selectors, "positions": f"0:{max(current.entries, 1) - 1}",
                "expected_source_hash": expectation, "max_entries": 20, "max_chars": 24_000,
                "index": index, "sessions": sessions, "show_secrets": True, "raw": True,
            }
            # The raw bytes are compared (show_secrets, raw); the default answer of the same
            # selection (masked, rendered as text) must not crash either (its masking is
            # tested in test_redact and test_secret_leaks).
            with contextlib.suppress(FabricMemoryError):
                expand(str(path), **{**request, "show_secrets": False, "raw": False})
            try:
                pages = 0
                while request is not None and pages < 200:
                    page = expand(str(path), **request)
                    pages += 1
                    for item in page["entries"]:
                        self._check_text(item, current, what)
                    request = _next_request(page["next"])
                    if request is not None:
                        request.update(index=index, sessions=sessions)
            except ExpandError as error:
                code = _require_located(error, str(path), what)
                if current.source_hash is None and code != "source_unavailable":
                    raise FuzzFailure(f"{what}: {path} is gone but expand said {code}") from error
                if (expectation is not None and expectation != current.source_hash
                        and code not in ("stale_pointer", "source_unavailable")):
                    raise FuzzFailure(f"{what}: changed {path}: expected stale_pointer, got "
                                      f"{code}") from error
                self.tally["expand", code] += 1
                continue
            except FabricMemoryError as error:
                self.tally["expand", _require_located(error, "", what)] += 1
                continue
            if expectation is not None and expectation != current.source_hash:
                raise FuzzFailure(f"{what}: {path} changed but an expectation still expanded")
            self.tally["expand", "ok"] += 1

    def _check_text(self, item: Mapping[str, Any], current: Expected, what: str) -> None:
        if not current.agrees(item):
            raise FuzzFailure(f"{what}: expand returned bytes that are not the source's for "
                              f"{item['address']} (index {item['index']})")


_NEXT_KEYS = {
    "entries": "entries", "addresses": "addresses", "indices": "indices", "range": "range",
    "positions": "positions", "anchor": "anchor", "before": "before", "after": "after",
    "expectedSourceHash": "expected_source_hash",
    "expectedLineageFingerprint": "expected_lineage_fingerprint", "maxEntries": "max_entries",
    "maxChars": "max_chars", "entryOffset": "entry_offset", "textOffset": "text_offset",
    "showSecrets": "show_secrets", "raw": "raw",
}


def _next_request(following: Any) -> dict[str, Any] | None:
    if following is None:
        return None
    return {_NEXT_KEYS[k]: v for k, v in following.items() if k in _NEXT_KEYS}


def _change_file(rng: random.Random, path: Path, change: str) -> None:
    """Change a session file after it was indexed, as the world might."""
    data = path.read_bytes()
    if change == "delete":
        path.unlink()
    elif change == "append":
        with open(path, "ab") as stream:
            stream.write(b'{"type":"label","id":"zz-appended","parentId":null,"label":"x"}\n')
    elif change == "truncate":
        path.write_bytes(data[: rng.randint(0, len(data))])
    elif change == "replace":
        replacement = path.with_suffix(".tmp")
        replacement.write_bytes(reorder_lines(rng, data))
        replacement.replace(path)
    else:
        path.write_bytes(MUTATORS[rng.choice(list(MUTATORS))](rng, data))


# --- hypothesis strategies ------------------------------------------------------------


def json_scalars() -> st.SearchStrategy[Any]:
    """JSON leaves, including what orjson would never produce (big ints, NaN, surrogates)."""
    return _SCALARS


def json_values(max_leaves: int = 30) -> st.SearchStrategy[Any]:
    """Any JSON-ish value with at most ``max_leaves`` leaves (strategies are built once)."""
    if max_leaves not in _VALUES:
        _VALUES[max_leaves] = st.recursive(
            _SCALARS,
            lambda children: st.one_of(
                st.lists(children, max_size=4),
                st.dictionaries(st.text(max_size=8) | st.sampled_from(FOCUS_KEYS), children,
                                max_size=4),
            ),
            max_leaves=max_leaves,
        )
    return _VALUES[max_leaves]


_SCALARS: st.SearchStrategy[Any] = st.one_of(
    st.none(), st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["\ud800", "a\udfffb", "\x00", "\u2028", "pi.read", "succeeded", "call"]),
)
_VALUES: dict[int, st.SearchStrategy[Any]] = {}


def nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


COUNTS = {"droppedValues": 0, "truncatedValues": 0, "redactedValues": 0, "droppedOperations": 0}


@st.composite
def operations(draw: st.DrawFn, sequence: int = 0) -> dict[str, Any]:
    op: dict[str, Any] = {
        "type": "call", "sequence": sequence,
        "ref": draw(st.sampled_from(["pi.read", "pi.grep", "omp.bash", "mesh.get", "x.y"])),
        "args": draw(_ARGS),
        "outcome": draw(st.sampled_from(["succeeded", "failed", "aborted", "timed_out"])),
    }
    if draw(st.booleans()):
        op["result"] = draw(_RESULTS)
    return op


_ARGS = st.dictionaries(st.text(max_size=6), json_values(8), max_size=3)
_RESULTS = st.one_of(json_values(8), st.integers(0, 40).map(nested))


@st.composite
def traces(draw: st.DrawFn) -> Any:
    """Mostly well-formed V1 traces, then (often) one slot replaced by anything at all."""
    count = draw(st.integers(0, 3))
    trace: dict[str, Any] = {
        "kind": draw(st.sampled_from(["pi-fabric.execution", "omp-fabric.execution"])),
        "version": draw(st.sampled_from([1, 1.0, 1, True, "1", 2])),
        "outcome": draw(st.sampled_from(["succeeded", "failed", "aborted", "timed_out"])),
        "phases": draw(st.lists(st.text(max_size=8), max_size=3)),
        "operations": [draw(operations(sequence=i)) for i in range(count)],
        "counts": dict(COUNTS),
    }
    if draw(st.booleans()):
        slots = list(_containers(trace))
        container, key, _ = draw(st.sampled_from(slots))
        container[key] = draw(json_values(10))
    return trace


_TEXTS = st.text(max_size=24)


@st.composite
def session_bytes(draw: st.DrawFn) -> bytes:
    """A session file of random entries (some with Fabric results), maybe damaged."""
    lines = [orjson.dumps({"type": "session", "version": draw(st.sampled_from([1, 2, 3, 3])),
                           "id": "fuzz-session", "cwd": "/repo"})]
    parent: str | None = None
    kinds = draw(st.lists(st.sampled_from(["user", "assistant", "fabric", "compaction", "other"]),
                          max_size=8))
    for index, kind in enumerate(kinds):
        entry_id = f"e{index}"
        entry: dict[str, Any] = {"type": "message", "id": entry_id, "parentId": parent,
                                 "timestamp": "2026-01-02T10:00:00.000Z"}
        if kind == "user":
            entry["message"] = {"role": "user", "content": draw(_TEXTS)}
        elif kind == "assistant":
            entry["message"] = {"role": "assistant", "content": [
                {"type": "text", "text": draw(_TEXTS)},
                {"type": "toolCall", "id": f"c{index}", "name": "fabric_exec",
                 "arguments": draw(json_values(4))}],
                "usage": {"totalTokens": draw(st.integers(0, 10**6))}}
        elif kind == "fabric":
            entry["message"] = {"role": "toolResult", "toolCallId": f"c{index - 1}",
                                "toolName": "fabric_exec", "content": [],
                                "details": {"success": True, "trace": draw(traces())}}
        elif kind == "compaction":
            entry.update(type="compaction", summary=draw(_TEXTS),
                         firstKeptEntryId=draw(st.sampled_from(["", "e0", entry_id, "nope"])),
                         tokensBefore=draw(st.integers(0, 1000)), details=draw(json_values(4)))
        else:
            entry.update(type=draw(st.sampled_from(["label", "custom", "mode_change", "x"])),
                         data=draw(json_values(4)))
        try:
            line = orjson.dumps(entry)
        except orjson.JSONEncodeError:  # surrogates or huge ints: write what JSON allows
            line = orjson.dumps({"type": "label", "id": entry_id, "parentId": parent})
        lines.append(line)
        parent = entry_id if draw(st.integers(0, 5)) else None
    data = b"\n".join(lines) + b"\n"
    damage = draw(st.sampled_from([None, None, *sorted(MUTATORS)]))
    if damage is not None:
        data = MUTATORS[damage](random.Random(draw(st.integers(0, 2**32))), data)
    return data


def case_budget(default: int) -> int:
    """``FUZZ_CASES`` scales the run; the default keeps CI under a minute."""
    configured = os.environ.get("FUZZ_CASES")
    return int(configured) if configured else default


def fuzz_seed(default: int = 20_260_107) -> int:
    configured = os.environ.get("FUZZ_SEED")
    return int(configured) if configured else default
