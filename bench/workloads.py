"""Each benchmarked figure as a pair of callables: ours, and the floor it is compared with.

Both ``python -m bench.compare`` and the pytest-benchmark suites time these same
callables, so the table and the suites can never measure different things. A floor
is what the dependencies alone must do for the same answer: ``orjson.loads`` for
the guard, orjson per line plus xxh3 for reading, a fresh Tantivy index with the
same schema for reindex (and the same reindex without the redaction stage, for what
redaction costs), the bare Tantivy search for recall, direct reads of the
same lines for expand, reading and parsing the source for compaction.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import tantivy
import xxhash

from fabric_memory.certify.generate import WORDS
from fabric_memory.compaction import compact_session, compaction_hook
from fabric_memory.compaction.prepare import CompactionSettings, prepare_compaction
from fabric_memory.memory import index as memory_index
from fabric_memory.memory import normalize
from fabric_memory.memory.catalog import SessionRecord, now_iso
from fabric_memory.memory.expand import expand
from fabric_memory.memory.normalize import normalize_session
from fabric_memory.memory.recall import recall
from fabric_memory.memory.reindex import default_workers, reindex
from fabric_memory.session import read_session
from fabric_memory.sources import read_source, session_files
from fabric_memory.trace import is_fabric_execution_trace_v1

Call = Callable[[], object]

COMPACTION_SETTINGS = CompactionSettings(keep_recent_tokens=1)
"""Summarize (nearly) the whole source, so the cycle's work grows with the file."""


@dataclass(frozen=True, slots=True)
class Pair:
    """Ours and the floor for one figure; ``units`` is the work one call does."""

    ours: Call
    floor: Call
    units: float = 1.0


# --- guard and reading ----------------------------------------------------------------


def guard_pair(traces: Sequence[bytes]) -> Pair:
    """Parse + V1 guard of every trace vs parsing alone (the same bytes)."""

    def ours() -> int:
        return sum(is_fabric_execution_trace_v1(orjson.loads(data)) for data in traces)

    def floor() -> int:
        return sum(type(orjson.loads(data)) is dict for data in traces)

    return Pair(ours, floor, float(len(traces)))


def guard_lines_pair(lines: Sequence[bytes]) -> Pair:
    """Parse + V1 guard of ``details.trace`` of every ``fabric_exec`` result line (the bytes
    the normalizer and the compactor parse before guarding) vs parsing alone."""

    def ours() -> int:
        return sum(
            is_fabric_execution_trace_v1(orjson.loads(data)["message"]["details"].get("trace"))
            for data in lines
        )

    def floor() -> int:
        return sum(type(orjson.loads(data)) is dict for data in lines)

    return Pair(ours, floor, float(len(lines)))


def parse_floor(path: Path) -> int:
    """Read the file, xxh3-128 it and ``orjson.loads`` every non-empty line."""
    data = path.read_bytes()
    xxhash.xxh3_128_hexdigest(data)
    count = 0
    for line in data.split(b"\n"):
        if line:
            orjson.loads(line)
            count += 1
    return count


def read_pair(paths: Sequence[Path]) -> Pair:
    """``read_session`` of every file vs read + hash + orjson per line."""

    def ours() -> int:
        return sum(len(read_session(path).entries) for path in paths)

    def floor() -> int:
        return sum(parse_floor(path) for path in paths)

    return Pair(ours, floor, float(sum(path.stat().st_size for path in paths)))


# --- reindex --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Prebuilt:
    """Every document a full reindex of ``sessions`` writes, built ahead of time."""

    sessions: Path
    documents: list[str]
    records: list[tuple[str, str, int, bytes]]
    """(path, session id, mtime_ns, encoded catalog record) per session."""

    @property
    def entries_and_operations(self) -> int:
        return len(self.documents)


def prebuild(sessions: Path) -> Prebuilt:
    documents: list[str] = []
    records: list[tuple[str, str, int, bytes]] = []
    for path in session_files(sessions):
        session = read_source(path)
        normalized = normalize_session(session)
        name = str(path)
        documents.extend(
            memory_index.item_json(item, name, session.session_id, session.agent,
                                   session.project) for item in normalized.items
        )
        mtime = path.stat().st_mtime_ns
        record = SessionRecord(
            path=name, session_id=session.session_id, mtime_ns=mtime, size=session.size,
            source_hash=session.source_hash,
            lineage_fingerprint=session.lineage_fingerprint("active"),
            entries=normalized.entries, operations=normalized.operations, indexed_at=now_iso(),
            checked=(mtime, session.size), cwd=session.project, agent=session.agent,
        )
        records.append((name, session.session_id, mtime, record.encode()))
    return Prebuilt(sessions, documents, records)


def tantivy_floor(prebuilt: Prebuilt, directory: Path) -> int:
    """Add the prebuilt documents and records to a fresh index with the same schema, commit.

    Same schema, tokenizer, writer heap and threads as the memory index's writer.
    """
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    index = tantivy.Index(memory_index.SCHEMA, path=str(directory), reuse=False)
    index.register_tokenizer(memory_index.TEXT_TOKENIZER, memory_index.ANALYZER)
    heap, threads = memory_index.writer_options()
    writer = index.writer(heap_size=heap, num_threads=threads)
    for document in prebuilt.documents:
        writer.add_json(document)
    for path, session_id, mtime, record in prebuilt.records:
        doc = tantivy.Document(kind=memory_index.SESSION_KIND, path=path,
                               session_id=session_id, mtime_ns=mtime)
        doc.add_bytes("record", record)
        writer.add_document(doc)
    writer.commit()
    writer.wait_merging_threads()
    return len(prebuilt.documents)


def reindex_pair(prebuilt: Prebuilt, scratch: Path) -> Pair:
    """A full reindex into a fresh directory vs :func:`tantivy_floor` (both rebuilt each call)."""
    ours_dir, floor_dir = scratch / "ours", scratch / "floor"

    def ours() -> int:
        if ours_dir.exists():
            shutil.rmtree(ours_dir)
        report = reindex(sessions=prebuilt.sessions, index=ours_dir, full=True)
        return report["entries"] + report["operations"]

    def floor() -> int:
        return tantivy_floor(prebuilt, floor_dir)

    return Pair(ours, floor, float(len(prebuilt.documents)))


def redaction_pair(sessions: Path, scratch: Path) -> Pair:
    """A full reindex vs the same reindex with the redaction stage switched off (the
    normalizer's one call replaced by the identity; forked workers inherit the switch)."""
    with_dir, without_dir = scratch / "redacted", scratch / "unredacted"

    def full(directory: Path) -> int:
        if directory.exists():
            shutil.rmtree(directory)
        report = reindex(sessions=sessions, index=directory, full=True)
        return report["entries"] + report["operations"]

    def without() -> int:
        saved = normalize.redact_texts
        normalize.redact_texts = _unredacted
        try:
            return full(without_dir)
        finally:
            normalize.redact_texts = saved

    return Pair(lambda: full(with_dir), without)


def _unredacted(texts: Sequence[str], counts: object = None) -> list[str]:
    return list(texts)


def noop_reindex(sessions: Path, index: Path) -> Call:
    """An incremental reindex with nothing changed (``index`` must be up to date)."""

    def run() -> int:
        report = reindex(sessions=sessions, index=index)
        if report["indexed"]:
            raise AssertionError(f"no-op reindex indexed {report['indexed']} sessions")
        return report["skipped"]

    return run


# --- recall ---------------------------------------------------------------------------

STRUCTURAL = (("pi.read", "succeeded"), ("omp.read", "succeeded"), ("pi.edit", "failed"),
              ("omp.grep", "failed"), ("pi.bash", "succeeded"), ("fabric.workflow.phase",
                                                                  "succeeded"),
              ("mesh.publish", "succeeded"), ("pi.write", "failed"))
RECALL_MODES = ("literal", "phrase", "structural", "regex")


def recall_requests(mode: str) -> list[dict[str, Any]]:
    """The rotating requests of one mode (each names words the generator writes)."""
    if mode == "literal":
        return [{"query": word} for word in WORDS]
    if mode == "phrase":
        return [{"query": f"how does {word}", "mode": "phrase"} for word in WORDS]
    if mode == "regex":
        return [{"query": f"{word[:3]}.*", "mode": "regex"} for word in WORDS]
    return [{"ref": ref, "outcome": outcome} for ref, outcome in STRUCTURAL]


def _bare_query(request: dict[str, Any]) -> tuple[tantivy.Query, bool]:
    """The query Tantivy itself would run for ``request`` (no kind filter, no wrapping)."""
    schema = memory_index.SCHEMA
    if "ref" in request:
        return tantivy.Query.boolean_query([
            (tantivy.Occur.Must, tantivy.Query.term_query(schema, "ref", request["ref"])),
            (tantivy.Occur.Must, tantivy.Query.term_query(schema, "outcome",
                                                          request["outcome"])),
        ]), False
    if request.get("mode") == "regex":
        return tantivy.Query.regex_query(schema, "text", request["query"]), True
    words = memory_index.analyze(request["query"])
    if request.get("mode") == "phrase":
        return tantivy.Query.phrase_query(schema, "text", list[str | tuple[int, str]](words)), True
    return tantivy.Query.term_query(schema, "text", words[0]), True


def raw_searcher(index: Path) -> tantivy.Searcher:
    handle = memory_index.MemoryIndex(index)
    raw = tantivy.Index.open(str(handle.directory))
    raw.register_tokenizer(memory_index.TEXT_TOKENIZER, memory_index.ANALYZER)
    return raw.searcher()


def recall_pair(index: Path, sessions: Path, mode: str) -> Pair:
    """One ``recall`` per call (rotating requests) vs the bare Tantivy search + stored docs."""
    requests = recall_requests(mode)
    ours_cycle: Iterator[dict[str, Any]] = itertools.cycle(requests)
    bare = [_bare_query(request) for request in requests]
    floor_cycle = itertools.cycle(bare)
    searcher = raw_searcher(index)

    def ours() -> int:
        return recall(**next(ours_cycle), index=index, sessions=sessions)["total"]

    def floor() -> int:
        query, scored = next(floor_cycle)
        if scored:
            result = searcher.search(query, limit=10, count=True)
        else:
            result = searcher.search(query, limit=10, count=True, order_by_field="time_ms",
                                     order=tantivy.Order.Desc)
        for _, address in result.hits:
            searcher.doc(address).to_dict()
        return len(result.hits)

    return Pair(ours, floor)


def sharded_recall_pair(sharded: Path, single: Path, sessions: Path) -> Pair:
    """Literal recall over a sharded index vs over the single index of the same sessions
    (the same rotating requests)."""
    requests = recall_requests("literal")
    ours_cycle, floor_cycle = itertools.cycle(requests), itertools.cycle(requests)

    def ours() -> int:
        return recall(**next(ours_cycle), index=sharded, sessions=sessions)["total"]

    def floor() -> int:
        return recall(**next(floor_cycle), index=single, sessions=sessions)["total"]

    return Pair(ours, floor)


NATURAL_SHAPES = ("how does {a} interact with the {b} adapter",
                  "make the {a} parser accept trailing commas again",
                  "why did the {a} step fail while we reviewed {b}",
                  "what did we decide about the {a} and {b} adapters")
"""Plain questions of 6-10 words in the generator's own words (its questions ask how one
word interacts with another, its answers name an adapter, its goals a parser)."""


def natural_requests() -> list[dict[str, Any]]:
    """Rotating plain questions, recall's default matching (any word, every word first)."""
    return [{"query": shape.format(a=a, b=b)}
            for shape, a, b in zip(itertools.cycle(NATURAL_SHAPES), WORDS, WORDS[3:] + WORDS[:3],
                                   strict=False)]


def natural_pair(index: Path, sessions: Path) -> Pair:
    """A plain question (ours) vs today's literal recall of one word (the floor): both are
    whole ``recall`` calls, so the ratio is what asking in sentences costs."""
    questions: Iterator[dict[str, Any]] = itertools.cycle(natural_requests())
    words: Iterator[dict[str, Any]] = itertools.cycle(recall_requests("literal"))

    def ours() -> int:
        return recall(**next(questions), index=index, sessions=sessions)["total"]

    def floor() -> int:
        return recall(**next(words), index=index, sessions=sessions)["total"]

    return Pair(ours, floor)


# --- expand ---------------------------------------------------------------------------


def expand_pair(index: Path, sessions: Path, path: Path, selectors: int) -> Pair:
    """``expand`` of ``selectors`` addresses of one session vs reading those lines directly.

    Addresses are spread evenly over the session's documents (entries and operations),
    rotating the starting point between calls.
    """
    session = read_session(path)
    items = normalize_session(session).items
    step = max(1, len(items) // max(selectors, 1))
    batches: list[list[tuple[str, int, int]]] = []
    for start in range(min(step, 16)):
        chosen = items[start::step][:selectors]
        batches.append([(item.address, item.offset, item.length) for item in chosen])
    ours_cycle = itertools.cycle(batches)
    floor_cycle = itertools.cycle(batches)
    name = str(path)

    def ours() -> int:
        batch = next(ours_cycle)
        page = expand(name, addresses=[a for a, _, _ in batch], index=index, sessions=sessions)
        return len(page["entries"])

    def floor() -> int:
        batch = next(floor_cycle)
        with open(name, "rb") as stream:
            return sum(len(stream.read(length)) for _, offset, length in batch
                       if stream.seek(offset) >= 0)

    return Pair(ours, floor, float(selectors))


# --- compaction -----------------------------------------------------------------------


def compaction_pair(path: Path) -> Pair:
    """One compaction cycle of a session file vs reading and parsing that file."""

    def ours() -> int:
        outcome = compact_session(path, COMPACTION_SETTINGS).outcome
        return len(getattr(outcome, "summary", ""))

    def floor() -> int:
        return parse_floor(path)

    return Pair(ours, floor, float(path.stat().st_size))


HOOK_SETTINGS = CompactionSettings(reserve_tokens=63, keep_recent_tokens=1)
"""The small settings the reference's handler was timed at (every corpus call compacts)."""
PI_CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "pi-1.6.0"


@dataclass(frozen=True, slots=True)
class HookCase:
    """One Pi corpus session as the host hands it to the hook in-process."""

    name: str
    category: str
    entries: int
    """Entries on the branch the event carries."""
    event: dict[str, Any]


def hook_cases(corpus: Path = PI_CORPUS) -> list[HookCase]:
    """A ``session_before_compact`` event (Pi's shape: preparation, branch entries, signal)
    for every session of the Pi 1.6.0 corpus that compacts at :data:`HOOK_SETTINGS`."""
    index = orjson.loads((corpus / "truth" / "INDEX.json").read_bytes())
    cases = []
    for item in index["files"]:
        if not item.get("entryCount"):
            continue
        branch = read_session(corpus / item["file"]).active_branch()
        prepared = prepare_compaction(branch, HOOK_SETTINGS)
        if prepared is None:
            continue
        event = {"type": "session_before_compact", "preparation": prepared.to_event(),
                 "branchEntries": [entry.raw for entry in branch], "signal": {"aborted": False}}
        cases.append(HookCase(item["name"], item["category"], len(branch), event))
    return cases


def hook_call(case: HookCase) -> Call:
    """One in-process hook call on ``case``; raises unless it compacts."""

    def run() -> int:
        result = compaction_hook(case.event)
        if "compaction" not in result:
            raise AssertionError(f"{case.name}: the hook did not compact: {result}")
        return len(result["compaction"]["summary"])

    return run


def scratch_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="fm-bench-"))


def workers() -> int:
    return default_workers()
