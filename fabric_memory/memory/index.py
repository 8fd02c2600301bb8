"""The Tantivy layer: schema, the on-disk index, the writer lock and the queries.

This is the only module that imports ``tantivy``; every ``ValueError`` it raises is
translated here into :mod:`fabric_memory.errors` classes. One directory per schema
version (``<index>/v<N>-<rules>``) holds the Tantivy files, so a schema change never
reads an old layout: the writer removes the old directory with a one-line notice and
rebuilds. The redaction rules' fingerprint is part of the version: an index built
under other rules holds text they did not mask, so it is rebuilt too (docs/secrets.md).
Per-session catalog records are ``session`` documents in the same index, so one commit
updates documents and catalog together and a crash leaves both at the previous commit.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import itertools
import math
import os
import re
import threading
import time
import weakref
from collections.abc import Container, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, NoReturn

import orjson
import tantivy

from ..errors import IndexBusyError, IndexLockedError, MemoryIndexError, QueryError, clipped
from ..redact import RULES_FINGERPRINT
from ..words import CJK_CLASS, MAX_WORD_BYTES, STOP_WORDS, cjk_pairs, is_cjk
from .locations import make_private_dirs
from .rerank import HEAD, PASSAGE_CHARS, Candidate, Pair, fold, held_bonus, weigh

if TYPE_CHECKING:  # the normalizer (and the trace guard it imports) is for writers only
    from .normalize import Item

SCHEMA_VERSION = 4
SCHEMA_TAG = f"{SCHEMA_VERSION}-{RULES_FINGERPRINT}"
"""The index directory's version: the layout and the redaction rules it was built under."""
TEXT_TOKENIZER = "fm_text"
MAX_TOKEN_CHARS = MAX_WORD_BYTES
"""Longest word the index keeps: a ``sha256`` or ``sha512`` hex digest is one word, and
identifiers are recalled by value; longer runs (base64 blobs) are left out."""
WORD_PATTERN = rf"[{CJK_CLASS}]|[[\p{{Alphabetic}}\p{{N}}]--[{CJK_CLASS}]]+"
"""One index word: a CJK character alone, or a run of other letters and digits (Rust's
``char::is_alphanumeric``, what Tantivy's simple tokenizer splits on)."""
MAX_REGEX_CHARS = 256
MAX_REGEX_SECONDS = 2.0
"""Longest a regex may take to compile (Tantivy builds its automaton holding the GIL)."""
LOCK_NAME = "writer.lock"
BUSY_SECONDS = 2.0
"""Longest a query waits for Tantivy's meta lock before it answers from the commit it
already has open, or fails with ``index_busy`` when it has none (a fresh process). Each
holder keeps it for milliseconds: to list a commit's segments or delete unused files."""

# Exact-match fields: ids, refs, outcomes, addresses (raw tokenizer, fast for filters).
RAW_FIELDS = (
    "kind", "path", "session_id", "entry_id", "parent_id", "address", "type", "role",
    "tool", "ref", "provider", "action", "outcome", "failure_stage", "timestamp", "agent",
    "project",
)
# (name, indexed, fast)
INT_FIELDS = (
    ("time_ms", True, True), ("position", True, True), ("sequence", False, False),
    ("line", False, False), ("offset", False, False), ("length", False, False),
    ("mtime_ns", False, True), ("entries", False, False), ("operations", False, False),
)
BOOL_FIELDS = ("is_error", "on_active")
I64_MIN, I64_MAX = -(2**63), 2**63 - 1
"""What Tantivy's integer fields hold; every number is brought inside before it is added."""
ITEM_KINDS = ("entry", "operation")
SESSION_KIND = "session"
MASK_KIND = "mask"
"""In the delta shard of a sharded index: the documents of this path in the other shards are
outdated (the delta holds the session's new ones, or the file is gone)."""

TextMode = Literal["literal", "phrase", "regex"]
_VERSION_DIR = re.compile(r"v(\d+(?:-[0-9a-f]+)?)")


def _schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    for name in RAW_FIELDS:
        builder.add_text_field(name, stored=True, fast=True, tokenizer_name="raw")
    builder.add_text_field("text", stored=True, tokenizer_name=TEXT_TOKENIZER)
    for name, indexed, fast in INT_FIELDS:
        builder.add_integer_field(name, stored=True, indexed=indexed, fast=fast)
    for name in BOOL_FIELDS:
        builder.add_boolean_field(name, stored=True, indexed=True, fast=True)
    builder.add_bytes_field("record", stored=True)
    return builder.build()


def _analyzer() -> tantivy.TextAnalyzer:
    # Unicode-aware word split (letters and digits of any script), lowercased, no
    # stemming or folding: "Zürich" is matched exactly as written, "東京" as the phrase of
    # its two characters (fabric_memory.words).
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.regex(WORD_PATTERN))
        .filter(tantivy.Filter.remove_long(MAX_TOKEN_CHARS + 1))  # keeps len < limit
        .filter(tantivy.Filter.lowercase())
        .build()
    )


SCHEMA = _schema()
ANALYZER = _analyzer()


def analyze(text: str) -> list[str]:
    """The searchable words of ``text``, exactly as the index tokenizes them."""
    return list(ANALYZER.analyze(text))


def item_json(item: Item, path: str, session_id: str, agent: str = "pi",
              project: str | None = None) -> str:
    """One document as JSON for the writer (built in worker processes, added in one)."""
    doc: dict[str, Any] = {
        "kind": item.kind, "path": path, "session_id": session_id, "agent": agent,
        "entry_id": item.entry_id, "address": item.address, "type": item.type,
        "position": item.position, "line": item.line, "offset": item.offset,
        "length": item.length, "is_error": item.is_error, "on_active": item.on_active,
        "text": item.text,
    }
    # The rest may be absent (None): left out of the document.
    for name, value in (
        ("parent_id", item.parent_id), ("role", item.role), ("tool", item.tool),
        ("ref", item.ref), ("provider", item.provider), ("action", item.action),
        ("outcome", item.outcome), ("failure_stage", item.failure_stage),
        ("timestamp", item.timestamp), ("time_ms", item.time_ms), ("sequence", item.sequence),
        ("project", project),
    ):
        if value is not None:
            doc[name] = value
    return orjson.dumps(doc).decode()


# --- the writer lock -------------------------------------------------------------------


class IndexLock:
    """An advisory ``flock`` on ``<index>/writer.lock``: one writer at a time, across
    processes. The kernel drops it when its holder dies, so a ``kill -9`` never
    leaves the index locked."""

    def __init__(self, root: Path) -> None:
        self.path = root / LOCK_NAME
        self._fd: int | None = None

    def acquire(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds; raise :class:`IndexLockedError` past it."""
        try:
            make_private_dirs(self.path.parent)
            if self.path.is_dir() and not self.path.is_symlink():
                import shutil  # (writers and repairs only: a query's start-up skips it)

                shutil.rmtree(self.path)  # never a lock: flock needs a file we can open
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise MemoryIndexError(
                f"{self.path}: cannot create the lock ({exc.strerror or exc}); "
                "pass --index DIR on a writable disk"
            ) from None
        try:
            taken = _flock_within(fd, timeout, 0.2)
        except OSError as exc:
            os.close(fd)
            raise MemoryIndexError(f"{self.path}: cannot lock ({exc.strerror})") from exc
        if not taken:
            holder = _read_pid(fd)
            os.close(fd)
            who = f" (pid {holder})" if holder else ""
            raise IndexLockedError(
                f"{self.path}: another writer{who} holds the memory index lock after "
                f"waiting {timeout:g}s; retry when it finishes"
            )
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> IndexLock:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()


def _flock_within(fd: int, timeout: float, longest_sleep: float) -> bool:
    """Take an exclusive ``flock`` on ``fd`` within ``timeout`` seconds (polling, the sleeps
    doubling up to ``longest_sleep``); False past it. Raises ``OSError`` when the file
    cannot be locked at all."""
    deadline = time.monotonic() + max(timeout, 0.0)
    delay = 0.001
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
        if time.monotonic() >= deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 2, longest_sleep)


def _read_pid(fd: int) -> str:
    with contextlib.suppress(OSError):
        return os.pread(fd, 32, 0).decode(errors="replace").strip()
    return ""


# --- searching -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SearchSpec:
    """A recall query in index terms: text (by mode) plus exact filters."""

    text: str = ""
    mode: TextMode = "literal"
    match_all: bool = False
    equals: tuple[tuple[str, tuple[str | bool, ...]], ...] = ()
    """(field, accepted values): values of one field are OR-ed, fields AND-ed."""
    excluded: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """(field, refused values): a document with any of them is left out."""
    since_ms: int | None = None
    until_ms: int | None = None
    kinds: tuple[str, ...] = ITEM_KINDS


@dataclass(frozen=True, slots=True)
class Hit:
    score: float | None
    fields: dict[str, Any]
    snippet: str
    words: int | None = None
    """How many of the query's ranking words the document holds (None without text, or
    for a regex); :attr:`HitPage.words` says of how many."""
    similar: tuple[str, ...] = ()
    """The addresses of the near-identical outputs folded into this hit (:mod:`.rerank`)."""


@dataclass(frozen=True, slots=True)
class HitPage:
    total: int
    hits: list[Hit] = field(default_factory=list)
    all_words: int | None = None
    """Of ``total``, the documents holding every word of the query (they come first); None
    when every hit must hold every word anyway (one word, a phrase, a regex, ``match_all``)."""
    words: int | None = None
    """How many words the query ranks by (its words without the stop words, a CJK run as
    its pairs); None without text, or for a regex."""


@dataclass(frozen=True, slots=True)
class Ranked:
    """One hit before its document is read (or once read, for the head of a text query)."""

    part: int
    """0: the hit holds every word of a query whose words need not all match (or the query
    has no such parts); 1: only some. Part 0 comes first."""
    value: float
    """Its score (rescored in the head, :mod:`.rerank`), or its time (ms) when the query has
    no text (newest first)."""
    address: tantivy.DocAddress
    head: bool = False
    """Whether it was read and rescored: the head of a part comes before the rest of it."""
    similar: tuple[str, ...] = ()
    """The addresses of the near-identical outputs folded into it."""
    doc: tantivy.Document | None = field(default=None, compare=False)
    """Its document, when the head read it."""
    held: int | None = None
    """How many of the query's words it holds, when the head counted them (some-words part)."""

    def key(self) -> tuple[int, bool, float]:
        """Where the hit falls in an order merged from several rankings (smaller first)."""
        return (self.part, not self.head, -self.value)


@dataclass(frozen=True, slots=True)
class Ranking:
    """The first hits of one search in order, and what reading them needs."""

    total: int
    found: list[Ranked]
    searcher: tantivy.Searcher
    where: str
    plan: _Plan | None = None
    """How the query's text was searched (None without text)."""
    all_words: int | None = None
    """See :attr:`HitPage.all_words`."""

    @property
    def words(self) -> int | None:
        """See :attr:`HitPage.words`."""
        return self.plan.words if self.plan is not None else None

    def read(self, chosen: Sequence[Ranked], snippet_chars: int) -> list[Hit]:
        """The documents of ``chosen`` (hits of this ranking), with their snippets and how
        many of the query's words each holds."""
        plan = self.plan
        generator = None
        with _translated(self.where):
            if plan is not None and plan.snippet is not None:
                generator = tantivy.SnippetGenerator.create(self.searcher, plan.snippet,
                                                            SCHEMA, "text")
                generator.set_max_num_chars(snippet_chars)
            docs = [ranked.doc if ranked.doc is not None else self.searcher.doc(ranked.address)
                    for ranked in chosen]
            held = self._words_held([doc for ranked, doc in zip(chosen, docs, strict=True)
                                     if ranked.part == 1 and ranked.held is None])
            hits = []
            for ranked, doc in zip(chosen, docs, strict=True):
                fields = _first_values(doc)
                snippet = generator.snippet_from_doc(doc).fragment() if generator else ""
                text = fields.pop("text", "")
                if not snippet:
                    snippet = _head(text, snippet_chars)
                score = ranked.value if plan is not None else None
                words = (self.words if not ranked.part else ranked.held
                         if ranked.held is not None else held.get(_doc_key(ranked.address),
                                                                   self.words))
                hits.append(Hit(score, fields, snippet, words, ranked.similar))
        return hits

    def _words_held(self, some: list[tantivy.Document]) -> dict[tuple[int, int], int]:
        """How many of the plan's words each document of the some-words part holds."""
        if self.plan is None:
            return {}
        counts = _held(self.searcher, some, self.plan.counted, [1.0] * len(self.plan.counted))
        return {key: round(score) for key, score in counts.items()}


def _held(searcher: tantivy.Searcher, some: Sequence[tantivy.Document],
          words: Sequence[tantivy.Query], weights: Sequence[float]) -> dict[tuple[int, int], float]:
    """The sum of the ``weights`` of the ``words`` each of ``some`` documents holds: one
    search over those documents alone (by path and address), each word scoring its weight."""
    if not some or not words:
        return {}
    # Each document by its path and address: two term postings intersected, read lazily
    # (a term set would collect every document of those sessions first).
    each = tantivy.Query.boolean_query([(tantivy.Occur.Should, tantivy.Query.boolean_query([
        (tantivy.Occur.Must, tantivy.Query.term_query(SCHEMA, name, str(doc.get_first(name))))
        for name in ("path", "address")])) for doc in some])
    query = tantivy.Query.boolean_query(
        [(tantivy.Occur.Must, tantivy.Query.const_score_query(each, 0.0))]
        + [(tantivy.Occur.Should, tantivy.Query.const_score_query(word, weight))
           for word, weight in zip(words, weights, strict=True)])
    result = searcher.search(query, limit=len(some), count=True)
    if _count(result) > len(result.hits):
        result = searcher.search(query, limit=_count(result))
    return {_doc_key(address): score for score, address in result.hits}


def _read_head(searcher: tantivy.Searcher, plan: _Plan,
               head: list[Ranked]) -> tuple[list[Ranked], list[Ranked]]:
    """The head of a text query's ranking read and rescored (:mod:`.rerank`), near-identical
    outputs folded into the best of them. Returns the head and the hits folded away."""
    docs = [searcher.doc(ranked.address) for ranked in head]
    texts = [str(doc.get_first("text") or "") for doc in docs]
    values = [ranked.value for ranked in head]
    counts = _weigh_head(searcher, plan, head, docs, texts, values)
    candidates = [Candidate(ranked.part, value, text, str(doc.get_first("path")),
                            _str(doc.get_first("role")), _str(doc.get_first("tool")))
                  for ranked, value, text, doc in zip(head, values, texts, docs, strict=True)]
    kept = fold(candidates)
    chosen = {at for at, _ in kept}
    return ([Ranked(head[at].part, values[at], head[at].address, True,
                    tuple(str(docs[other].get_first("address")) for other in folded), docs[at],
                    counts.get(at))
             for at, folded in kept],
            [ranked for at, ranked in enumerate(head) if at not in chosen])


def _weigh_head(searcher: tantivy.Searcher, plan: _Plan, head: list[Ranked],
                docs: list[tantivy.Document], texts: list[str],
                values: list[float]) -> dict[int, int]:
    """Add to ``values`` what the head's hits earn beyond BM25: the bonus of the pairs of the
    question's words standing together in their best passage, and (the some-words part) of
    the words they hold, those outside the best passage counting by the share of the entry
    the passage is (:func:`~.rerank.held_bonus`). Returns how many of the query's words
    each hit of the some-words part holds.

    An entry no longer than a passage is weighed from its words; the longer ones' held
    words come from one search over their documents (a word scores a unit, a power of two
    above every bonus together, plus its bonus) and their passage from the snippet
    generator."""
    some = [ranked.part == 1 for ranked in head]
    names = plan.names if any(some) else ()
    pairs = plan.proximity
    if not names and not pairs:
        return {}
    bonus = dict(zip(plan.names, plan.bonus, strict=False))
    long = [at for at, text in enumerate(texts) if len(text) > PASSAGE_CHARS]
    found: dict[tuple[int, int], float] = {}
    unit = 2.0 ** math.ceil(math.log2(sum(plan.bonus) + 1.0))
    if long and names:
        found = _held(searcher, [docs[at] for at in long], plan.counted,
                      [unit + weight for weight in plan.bonus])
    passages = None
    counts = {}
    for at, text in enumerate(texts):
        if at in long:
            if passages is None:
                passages = tantivy.SnippetGenerator.create(searcher, plan.snippet or plan.first,
                                                           SCHEMA, "text")
                passages.set_max_num_chars(PASSAGE_CHARS)
            score = found.get(_doc_key(head[at].address), 0.0)
            count = int(score // unit)
            passage = passages.snippet_from_doc(docs[at]).fragment()
            inside, near = weigh(passage, frozenset(names), pairs)
            values[at] += near + (held_bonus(len(text), score - count * unit, inside, bonus)
                                  if some[at] else 0.0)
        else:
            held, near = weigh(text, frozenset(names), pairs)
            count = len(held)
            values[at] += near + (sum(bonus.get(word, 0.0) for word in held) if some[at]
                                  else 0.0)
        if some[at]:
            counts[at] = count
    return counts


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _doc_key(address: tantivy.DocAddress) -> tuple[int, int]:
    return (address.segment_ord, address.doc)


def _ranked(part: int, found: Sequence[tuple[Any, tantivy.DocAddress]]) -> list[Ranked]:
    return [Ranked(part, float(value if value is not None else I64_MIN), address)
            for value, address in found]


LOCATION_FIELDS = ("kind", "address", "entry_id", "position", "type", "line", "offset", "length",
                   "sequence")
"""What :meth:`MemoryIndex.lookup` returns of each document: where its source is."""


def _first_values(doc: tantivy.Document) -> dict[str, Any]:
    return {name: values[0] for name, values in doc.to_dict().items() if values}


REBUILD = "run `fabric-memory reindex --full` to rebuild it from the sessions"


@contextlib.contextmanager
def _translated(where: str) -> Iterator[None]:
    """Tantivy's errors as one :class:`MemoryIndexError` line: its ``ValueError`` and the
    ``PanicException`` pyo3 raises when Rust code panics (on a damaged file, say)."""
    try:
        yield
    except ValueError as exc:
        raise MemoryIndexError(f"{where}: {_first_line(exc)}; {_advice(str(exc))}") from None
    except BaseException as exc:
        if type(exc).__name__ != "PanicException":
            raise
        raise MemoryIndexError(
            f"{where}: the index is damaged (Tantivy failed: {_first_line(exc)}); {REBUILD}"
        ) from None


_DISK_ADVICE = (
    ("No space left on device", "free disk space (or pass --index DIR on another disk) and "
     "run the command again"),
    ("Read-only file system", "pass --index DIR on a writable disk"),
    ("Permission denied", "pass --index DIR you may write (or run as the index's owner)"),
)


def _advice(error: str) -> str:
    """A fix that works for the error: a full or read-only disk is not cured by rebuilding."""
    return next((fix for cause, fix in _DISK_ADVICE if cause in error), REBUILD)


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def writer_options(threads: int = 0) -> tuple[int, int]:
    """``(heap bytes, threads)`` of the index writer (``threads`` 0: up to 4, one per CPU)."""
    threads = threads or min(4, os.cpu_count() or 1)
    return max(64, 32 * threads) * 1_000_000, threads


# --- the index -------------------------------------------------------------------------


class MemoryIndex:
    """One on-disk index. Readers reload after another process commits (a cheap stat of
    ``meta.json`` per call); writers go through :meth:`writer`, which holds the lock."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.directory = root / f"v{SCHEMA_TAG}"
        self.generation = 0
        self._index: tantivy.Index | None = None
        self._meta_key: tuple[int, int, int] | None = None
        # A server answers queries while its live-index thread commits: both reload.
        self._reload = threading.RLock()

    # opening ---------------------------------------------------------------------------

    def exists(self) -> bool:
        return (self.directory / "meta.json").is_file()

    def _open(self) -> tantivy.Index:
        with self._reload:
            return self._opened()

    def _opened(self) -> tantivy.Index:
        if self._index is None:
            if not self.exists():
                raise MemoryIndexError(self._missing_reason())
            where = self.directory
            if not _writable(self.directory):
                where = self._read_only_view()
            await_meta_lock(where, BUSY_SECONDS)
            with _translated(str(self.directory)):
                try:
                    index = tantivy.Index.open(str(where))
                except ValueError:
                    if not tantivy.Index.is_compatible(str(where)):
                        raise MemoryIndexError(
                            f"{self.directory}: index written by another Tantivy format; "
                            "run `fabric-memory reindex` to rebuild it"
                        ) from None
                    raise
                index.register_tokenizer(TEXT_TOKENIZER, ANALYZER)
            self._index = index
            self._meta_key = self._stat_meta()
            self.generation += 1
        return self._index

    def _read_only_view(self) -> Path:
        """A private folder of symlinks to the index files, for an index this process may not
        write (a read-only disk, another user's index): Tantivy takes a lock file to read,
        and creates it beside the links instead. Made afresh per open (a commit adds files)."""
        import shutil
        import tempfile

        view = Path(tempfile.mkdtemp(prefix="fabric-memory-read-"))
        weakref.finalize(self, shutil.rmtree, view, True)
        for entry in os.scandir(self.directory):
            if entry.name not in TANTIVY_LOCKS:
                os.symlink(entry.path, view / entry.name)
        return view

    def _missing_reason(self) -> str:
        others = _version_dirs(self.root) - {SCHEMA_TAG}
        if others:
            old = max(others)
            return (
                f"{self.root}: memory index has schema v{old}, this engine needs "
                f"v{SCHEMA_TAG}; run `fabric-memory reindex` to rebuild it"
            )
        return f"{self.root}: no memory index yet; run `fabric-memory reindex`"

    def _stat_meta(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.directory / "meta.json")
        except OSError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def refresh(self) -> int:
        """Reload if another writer committed since; return the reader generation."""
        with self._reload:
            return self._refreshed()

    def _refreshed(self) -> int:
        index = self._opened()
        key = self._stat_meta()
        if key is None:  # removed or renamed under us (another process rebuilt it)
            self._index = None
            raise MemoryIndexError(self._missing_reason())
        if key != self._meta_key:
            if not _writable(self.directory):  # the view lacks the new files: open anew
                self._index = None
                self._open()
                return self.generation
            try:
                await_meta_lock(self.directory, BUSY_SECONDS)
            except IndexBusyError:
                return self.generation  # the commit already open answers; reload next call
            with _translated(str(self.directory)):
                index.reload()
            self._meta_key = key
            self.generation += 1
        return self.generation

    def prepare_for_writing(self, *, rebuild: bool = False,
                            wait: float = BUSY_SECONDS) -> str | None:
        """Create the index directory (mode 0700), or rebuild an incompatible one (and, with
        ``rebuild``, a damaged one: whatever state it is in).

        Call with the writer lock held. Returns the one-line notice of a rebuild.
        """
        import shutil

        make_private_dirs(self.root)
        notice = None
        for version in sorted(_version_dirs(self.root) - {SCHEMA_TAG}):
            shutil.rmtree(self.root / f"v{version}")
            notice = (
                f"memory index at {self.root} had schema v{version}; rebuilt with schema "
                f"v{SCHEMA_TAG}"
            )
        _clear_tantivy_locks(self.directory)
        self._index = None
        damage = self._damage(wait) if self.directory.exists() else None
        if damage is not None and (rebuild or damage in (INCOMPATIBLE, NO_META)):
            shutil.rmtree(self.directory)
            notice = f"memory index at {self.root} {damage}; rebuilt from the sessions"
        elif damage is not None:
            raise MemoryIndexError(f"{self.directory}: the index {damage}; {REBUILD}")
        if not self.exists():
            self._index = None
            make_private_dirs(self.directory)
            with _translated(str(self.directory)):
                index = tantivy.Index(SCHEMA, path=str(self.directory), reuse=False)
                index.register_tokenizer(TEXT_TOKENIZER, ANALYZER)
                # An empty first commit makes the directory a readable index at once.
                writer = index.writer(heap_size=15_000_000, num_threads=1)
                writer.commit()
                writer.wait_merging_threads()
            make_private(self.directory)
            self._index = None
        return notice

    def _damage(self, wait: float) -> str | None:
        """Why the index directory cannot be used as it is, or None when it opens and every
        segment loads (a deleted or truncated segment file fails here); the index opened is
        kept for the writer. Waits up to ``wait`` s for Tantivy's meta lock."""
        if not self.exists():
            return NO_META
        await_meta_lock(self.directory, wait)
        try:
            with _translated(str(self.directory)):
                try:
                    index = tantivy.Index.open(str(self.directory))
                except ValueError:
                    if not tantivy.Index.is_compatible(str(self.directory)):
                        return INCOMPATIBLE
                    raise
                index.register_tokenizer(TEXT_TOKENIZER, ANALYZER)
                index.searcher()
        except MemoryIndexError as exc:
            return f"is damaged ({exc.message.split(': ', 1)[-1].rsplit('; ', 1)[0]})"
        self._index = index
        self._meta_key = self._stat_meta()
        self.generation += 1
        return None

    def writer(self, *, timeout: float, threads: int = 0, rebuild: bool = False) -> Writer:
        """Take the writer lock (waiting up to ``timeout`` s) and open a Tantivy writer;
        ``rebuild``: start from an empty index if the present one is damaged."""
        lock = IndexLock(self.root)
        lock.acquire(timeout)
        try:
            try:
                notice = self.prepare_for_writing(rebuild=rebuild,
                                                  wait=max(timeout, BUSY_SECONDS))
            except OSError as exc:
                raise MemoryIndexError(
                    f"{self.root}: cannot create the index ({exc.strerror or exc}); "
                    "pass --index DIR on a writable disk"
                ) from None
            index = self._open()
            heap, threads = writer_options(threads)
            with _translated(str(self.directory)):
                raw = index.writer(heap_size=heap, num_threads=threads)
        except BaseException:
            lock.release()
            raise
        return Writer(self, raw, lock, notice, max(timeout, BUSY_SECONDS))

    # reading ---------------------------------------------------------------------------

    def searcher(self) -> tantivy.Searcher:
        self.refresh()
        return self._open().searcher()

    def frequencies(self, terms: Sequence[str]) -> tuple[int, list[int]]:
        """How many documents this index holds, and how many of them hold each of
        ``terms`` (index words of the text)."""
        searcher = self.searcher()
        return searcher.num_docs, [searcher.doc_freq("text", term) for term in terms]

    def search(self, spec: SearchSpec, *, limit: int, offset: int, snippet_chars: int) -> HitPage:
        """Hits of ``spec``: by relevance when it has text, else newest first. A literal query
        of several words that need not all match ranks the documents holding every word
        first, then those holding some, more and rarer words first (see :func:`_plan`)."""
        ranking = self.rank(spec, limit=limit, offset=offset)
        return HitPage(ranking.total, ranking.read(ranking.found, snippet_chars),
                       ranking.all_words, ranking.words)

    def rank(self, spec: SearchSpec, *, limit: int, offset: int) -> Ranking:
        """The order of :meth:`search`, no document read yet but the head of a text query's
        (:func:`_read_head`): a sharded index ranks every shard, merges the rankings, then
        reads only the hits it keeps."""
        searcher = self.searcher()
        where = str(self.directory)
        with _translated(where):
            plan = _plan(spec, searcher)
            if plan is None:
                result = searcher.search(_combine(None, spec), limit=limit, offset=offset,
                                         count=True, order_by_field="time_ms",
                                         order=tantivy.Order.Desc)
                return Ranking(_count(result), _ranked(0, result.hits), searcher, where)
            # The page is cut from the whole order after the head is read (it may fold
            # hits, so the index is asked for as many more).
            depth = offset + limit + HEAD
            all_words: int | None = None
            if plan.rest is None or plan.every is None:
                result = searcher.search(_combine(plan.first, spec), limit=depth, count=True)
                found, total = _ranked(0, result.hits), _count(result)
            else:  # two parts, one ranking: every word, then some words but not every one
                first = searcher.search(_combine(plan.first, spec), limit=depth, count=True)
                all_words = _count(first)
                rest_query = _combine(plan.rest if not all_words else tantivy.Query.boolean_query(
                    [(tantivy.Occur.Should, plan.rest), (tantivy.Occur.MustNot, plan.every)]),
                    spec)
                wanted = depth - len(first.hits)
                rest = searcher.search(rest_query, limit=max(wanted, 1), count=True)
                found = _ranked(0, first.hits) + _ranked(1, rest.hits[:max(wanted, 0)])
                total = all_words + _count(rest)
            head, folded = _read_head(searcher, plan, found[:HEAD])
            if all_words is not None:
                all_words -= sum(ranked.part == 0 for ranked in folded)
            ordered = head + found[HEAD:]
            return Ranking(total - len(folded), ordered[offset:offset + limit], searcher, where,
                           plan, all_words)

    def lookup(
        self, path: str, *, addresses: Sequence[str] = (), positions: Sequence[int] = (),
        fields: Sequence[str] = LOCATION_FIELDS,
    ) -> list[dict[str, Any]]:
        """Where the session's documents with these addresses or entry positions are: their
        :data:`LOCATION_FIELDS` (or the stored ``fields`` named)."""
        wanted: list[tuple[tantivy.Occur, tantivy.Query]] = []
        if addresses:
            wanted.append((tantivy.Occur.Should,
                           tantivy.Query.term_set_query(SCHEMA, "address", list(addresses))))
        if positions:
            by_position = tantivy.Query.boolean_query([
                (tantivy.Occur.Must, tantivy.Query.term_query(SCHEMA, "kind", "entry")),
                (tantivy.Occur.Must,
                 tantivy.Query.term_set_query(SCHEMA, "position", list(positions))),
            ])
            wanted.append((tantivy.Occur.Should, by_position))
        if not wanted:
            return []
        query = tantivy.Query.boolean_query([
            (tantivy.Occur.Must, tantivy.Query.term_query(SCHEMA, "path", path)),
            (tantivy.Occur.Must, tantivy.Query.boolean_query(wanted)),
        ])
        expected = 2 * (len(addresses) + len(positions)) + 8
        return self._all_docs(query, expected, fields)

    def session_records(self) -> list[bytes]:
        """The catalog record of every indexed session."""
        return self.records().all()

    def records(self) -> RecordSnapshot:
        """The catalog records of the current commit, fetched only as they are asked for."""
        return RecordSnapshot(self.searcher(), str(self.directory))

    def paths_of(self, kind: str) -> frozenset[str]:
        """The paths of the documents of ``kind`` (a delta shard's records and masks)."""
        query = tantivy.Query.term_query(SCHEMA, "kind", kind)
        return frozenset(str(doc["path"]) for doc in self._all_docs(query, 64, ("path",)))

    def count(self, kind: str, path: str | None = None, excluded: Sequence[str] = ()) -> int:
        """Documents of ``kind`` (of one ``path``; not of the ``excluded`` paths)."""
        clauses = [(tantivy.Occur.Must, tantivy.Query.term_query(SCHEMA, "kind", kind))]
        if path is not None:
            clauses.append((tantivy.Occur.Must, tantivy.Query.term_query(SCHEMA, "path", path)))
        if excluded:
            clauses.append((tantivy.Occur.MustNot,
                            tantivy.Query.term_set_query(SCHEMA, "path", list(excluded))))
        searcher = self.searcher()
        with _translated(str(self.directory)):
            result = searcher.search(tantivy.Query.boolean_query(clauses), limit=1, count=True)
        return _count(result)

    def _all_docs(
        self, query: tantivy.Query, expected: int = 64, fields: Sequence[str] = ()
    ) -> list[dict[str, Any]]:
        """The stored ``fields`` (those a document has) of every match, one search when
        ``expected`` covers them. Only the named fields are converted: a document's
        text can be long."""
        return _all_docs(self.searcher(), str(self.directory), query, expected, fields)

    def unreadable_documents(self, sample: int) -> tuple[int, list[str]]:
        """Read the stored fields of up to ``sample`` documents spread over the whole index;
        return how many were read and why each unreadable one failed."""
        searcher = self.searcher()
        with _translated(str(self.directory)):
            total = searcher.num_docs
            result = searcher.search(tantivy.Query.all_query(), limit=max(min(total, 200_000), 1))
            addresses = [address for _, address in result.hits]
        step = max(len(addresses) // max(sample, 1), 1)
        chosen = addresses[::step][:sample]
        problems = []
        for address in chosen:
            try:
                with _translated(str(self.directory)):
                    searcher.doc(address).to_dict()
            except MemoryIndexError as exc:
                problems.append(f"stored document {address.segment_ord}/{address.doc} cannot be "
                                f"read ({exc.message.split(': ', 1)[-1].rsplit('; ', 1)[0]})")
        return len(chosen), problems

    def size_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.directory.iterdir() if p.is_file())


def _all_docs(
    searcher: tantivy.Searcher, where: str, query: tantivy.Query, expected: int,
    fields: Sequence[str],
) -> list[dict[str, Any]]:
    with _translated(where):
        result = searcher.search(query, limit=max(expected, 1), count=True)
        total = _count(result)
        if total > len(result.hits):
            result = searcher.search(query, limit=total)
        found = []
        for _, address in result.hits:
            doc = searcher.doc(address)
            values = {name: doc.get_first(name) for name in fields}
            found.append({name: value for name, value in values.items() if value is not None})
        return found


class RecordSnapshot:
    """The catalog records (``session`` documents) of one commit, by query: a recall
    answers from the few records it names (the hot tier, its hits' sessions) instead of
    decoding every record of the index. A sharded index's snapshot reads every shard's."""

    def __init__(self, searcher: tantivy.Searcher, where: str) -> None:
        self.where = where
        self._parts: list[_RecordPart] = [_RecordPart(searcher)]

    def add(self, searcher: tantivy.Searcher, excluded: Sequence[str] = (),
            holds: Container[str] | None = None) -> None:
        """Read another shard's records too, but those of ``excluded`` paths (a newer shard
        holds them); ``holds``: the only paths and session ids it has records of (a lookup
        by path or id skips a shard that cannot have it)."""
        self._parts.append(_RecordPart(searcher, list(excluded), holds))

    def all(self) -> list[bytes]:
        return self._records([])

    def by_paths(self, paths: Sequence[str]) -> list[bytes]:
        found = []
        for part in self._parts:
            wanted = [path for path in paths if part.holds is None or path in part.holds]
            if wanted:
                query = tantivy.Query.term_set_query(SCHEMA, "path", wanted)
                found.extend(self._records([query], len(wanted), [part]))
        return found

    def by_id(self, session_id: str) -> list[bytes]:
        parts = [p for p in self._parts if p.holds is None or session_id in p.holds]
        return self._records([tantivy.Query.term_query(SCHEMA, "session_id", session_id)], 2,
                             parts)

    def folders(self, prefix: str) -> set[str]:
        """The folders the live documents name in their ``project`` field that start with
        ``prefix``, read from the term dictionary (no document is fetched; a folder whose
        documents are all deleted or outdated does not count)."""
        found: set[str] = set()
        with _translated(self.where):
            for part in self._parts:
                live = tantivy.Query.all_query() if not part.excluded else (
                    tantivy.Query.boolean_query([
                        (tantivy.Occur.Must, tantivy.Query.all_query()),
                        (tantivy.Occur.MustNot,
                         tantivy.Query.term_set_query(SCHEMA, "path", part.excluded))]))
                found.update(term for term, count in part.searcher.terms_with_prefix(
                    "project", prefix, filter_query=live) if count)
        return found

    def newest(self, count: int) -> list[bytes]:
        """The records of the ``count`` newest files by mtime (of each shard), and of every
        file that ties with the last of them (the caller orders, cuts and breaks ties)."""
        if count <= 0:
            return []
        return [record for part in self._parts
                for record in self._newest(part.searcher, self._query([], part.excluded), count)]

    def _newest(self, searcher: tantivy.Searcher, query: tantivy.Query, count: int) -> list[bytes]:
        limit = count + 16
        with _translated(self.where):
            while True:
                result = searcher.search(query, limit=limit, count=True,
                                         order_by_field="mtime_ns", order=tantivy.Order.Desc)
                docs = [searcher.doc(address) for _, address in result.hits]
                if len(docs) <= count or len(docs) >= _count(result):
                    break
                last = docs[count - 1].get_first("mtime_ns")
                if docs[-1].get_first("mtime_ns") != last:
                    break
                limit *= 2  # the tie runs past what was fetched
            if len(docs) > count:
                last = docs[count - 1].get_first("mtime_ns")
                docs = docs[:count] + [d for d in docs[count:]
                                       if d.get_first("mtime_ns") == last]
            records = (d.get_first("record") for d in docs)
            return [record for record in records if isinstance(record, bytes)]

    def _query(self, clauses: list[tantivy.Query], excluded: list[str]) -> tantivy.Query:
        kind = tantivy.Query.term_query(SCHEMA, "kind", SESSION_KIND)
        parts = [(tantivy.Occur.Must, q) for q in [kind, *clauses]]
        if excluded:
            parts.append((tantivy.Occur.MustNot,
                          tantivy.Query.term_set_query(SCHEMA, "path", excluded)))
        return tantivy.Query.boolean_query(parts)

    def _records(self, clauses: list[tantivy.Query], expected: int = 64,
                 parts: Sequence[_RecordPart] | None = None) -> list[bytes]:
        return [doc["record"] for part in (self._parts if parts is None else parts)
                for doc in _all_docs(part.searcher, self.where,
                                     self._query(clauses, part.excluded), expected, ("record",))
                if "record" in doc]


@dataclass(frozen=True, slots=True)
class _RecordPart:
    searcher: tantivy.Searcher
    excluded: list[str] = field(default_factory=list)
    holds: Container[str] | None = None


class Writer:
    """The single writer: replace a session's documents and its catalog record, commit."""

    def __init__(
        self, index: MemoryIndex, raw: tantivy.IndexWriter, lock: IndexLock, notice: str | None,
        wait: float = BUSY_SECONDS,
    ) -> None:
        self.index = index
        self.notice = notice
        self._raw = raw
        self._lock = lock
        self._wait = wait
        self.pending = 0
        self.masks = False
        """Set on a sharded index's delta shard: each session written or removed here masks
        its documents in the other shards (:data:`MASK_KIND`)."""

    def _mask(self, path: str) -> None:
        if self.masks:
            self._raw.add_document(tantivy.Document(kind=MASK_KIND, path=path))

    def replace_session(self, path: str, documents: Iterable[str]) -> str | None:
        """Delete every document of ``path`` and add ``documents`` (from :func:`item_json`).

        Returns why Tantivy refused one of them, after deleting what was added of the
        session (its record too): one file's bad value never stops the batch.
        """
        with _translated(str(self.index.directory)):
            self._raw.delete_documents_by_term("path", path)
            for document in documents:
                try:
                    self._raw.add_json(document)
                except ValueError as exc:
                    self._raw.delete_documents_by_term("path", path)
                    return _first_line(exc)
                self.pending += 1
            self._mask(path)
        return None

    def remove_session(self, path: str) -> None:
        """Delete every document of ``path``: its entries, operations and catalog record."""
        with _translated(str(self.index.directory)):
            self._raw.delete_documents_by_term("path", path)
            self._mask(path)
        self.pending += 1

    def put_record(self, path: str, session_id: str, mtime_ns: int, record: bytes) -> None:
        """Replace the catalog record of ``path`` (its entry documents stay as they are)."""
        doc = tantivy.Document(kind=SESSION_KIND, path=path, session_id=session_id,
                               mtime_ns=mtime_ns)
        doc.add_bytes("record", record)
        query = tantivy.Query.boolean_query([
            (tantivy.Occur.Must, tantivy.Query.term_query(SCHEMA, "kind", SESSION_KIND)),
            (tantivy.Occur.Must, tantivy.Query.term_query(SCHEMA, "path", path)),
        ])
        with _translated(str(self.index.directory)):
            self._raw.delete_documents_by_query(query)
            self._raw.add_document(doc)
        self.pending += 1

    def commit(self) -> None:
        # The commit deletes unused files under Tantivy's meta lock, waiting without a bound.
        await_meta_lock(self.index.directory, self._wait)
        with _translated(str(self.index.directory)):
            self._raw.commit()
        make_private(self.index.directory)
        self.pending = 0
        self.index.refresh()

    def close(self) -> None:
        """Wait for merges, drop unused files and release the lock (uncommitted work is lost)."""
        try:
            await_meta_lock(self.index.directory, self._wait)
            with _translated(str(self.index.directory)):
                self._raw.garbage_collect_files()
                self._raw.wait_merging_threads()
            make_private(self.index.directory)  # merges wrote new segment files
        finally:
            self._lock.release()

    def __enter__(self) -> Writer:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


QueryWord = tuple[str, ...]
"""One word of a query in index terms: a term, or the two characters of a CJK pair (a
two-term phrase, see :mod:`fabric_memory.words`)."""
COVERAGE = 2.0
"""What a held query word adds to the score of a hit of the head (:mod:`.rerank`), times the
word's IDF, where the query's words need not all match, on top of its BM25 (at most
(k1 + 1) = 2.2 times the IDF, less the longer the text): hits holding more and rarer words
come first. A
document whose held words' IDFs sum to over 2.1 times another's always ranks above it;
closer sums are ordered by how often, in how short a text, and how near together. A larger
weight sinks the short entry that answers among long texts that hold every word by chance
(measured on the pi-mono questions of tests/test_memory_recall.py: at 10 the answers rank
up to 8th; at 2, 4th at worst)."""
PROXIMITY = 1.0
"""What two neighbouring words of the question standing as near in a hit's best passage
add, times the sum of their IDFs (about half a BM25 saturation of both)."""
MAX_PAIRS = 8
"""Pairs of neighbouring query words given the proximity bonus (the first ones)."""
PAIR_SHARE = 0.02
MIN_PAIR_DOCS = 5000
"""A pair gets the bonus only when one of its words is in at most this share of the
documents (or this many): two common words found together say little."""
MAX_GAP = 3
"""Words between two query words in the question beyond which they are not a pair."""


@dataclass(frozen=True, slots=True)
class _Plan:
    """How a text query is searched: ``first`` ranks the only part, or the documents
    holding every word (``every``); ``rest`` ranks those holding some words but not every
    one (``every`` is taken out of them), by BM25 alone. ``counted`` are the words a hit's
    count of held words is over (``words`` of them: the count of every hit of ``first``);
    ``names``, ``bonus`` and ``proximity`` are what the head weighs (:func:`_weigh_head`)."""

    first: tantivy.Query
    rest: tantivy.Query | None = None
    every: tantivy.Query | None = None
    snippet: tantivy.Query | None = None
    counted: tuple[tantivy.Query, ...] = ()
    words: int | None = None
    names: tuple[str, ...] = ()
    """The counted words as :func:`fabric_memory.words.words` reads them."""
    bonus: tuple[float, ...] = ()
    """What holding each counted word adds to a document's score (COVERAGE times its IDF)."""
    proximity: tuple[Pair, ...] = ()
    """Pairs of neighbouring words of the question, and what each adds to a hit of the head
    that holds them as near (:func:`_proximity`)."""


def query_words(text: str) -> list[tuple[int, QueryWord]]:
    """The words of ``text`` as the index holds them, in order, each with its position:
    every word a term, but a run of CJK characters as its overlapping pairs (one character
    alone as its term), as :func:`fabric_memory.words.words` reads it."""
    found: list[tuple[int, QueryWord]] = []
    run: list[tantivy.Token] = []

    def flush() -> None:
        if run:
            pairs = cjk_pairs("".join(token.text for token in run))
            found.extend((run[at].position, tuple(pair)) for at, pair in enumerate(pairs))
            run.clear()

    for token in ANALYZER.pre_tokenize(text).tokens:
        if len(token.text) == 1 and is_cjk(token.text):
            if run and run[-1].char_offset_to != token.char_offset_from:
                flush()
            run.append(token)
        else:
            flush()
            found.append((token.position, (token.text,)))
    flush()
    return found


def _plan(spec: SearchSpec, searcher: tantivy.Searcher) -> _Plan | None:
    """The queries of ``spec``'s text (None without text)."""
    if not spec.text:
        return None
    if spec.mode == "regex":
        return _Plan(_regex(spec.text))
    located = query_words(spec.text)
    if not located:
        _no_words(spec.text)
    if spec.mode == "phrase":
        terms = analyze(spec.text)
        phrase = (tantivy.Query.phrase_query(SCHEMA, "text", list[str | tuple[int, str]](terms))
                  if len(terms) > 1 else _word_query((terms[0],)))
        return _Plan(phrase, snippet=phrase, words=len(set(terms)))
    every_word = list(dict.fromkeys(word for _, word in located))
    content = _content(located, spec)
    words = list(dict.fromkeys(word for _, word in content))
    queries = {word: _word_query(word) for word in every_word}
    snippet = _any_of_queries([queries[word] for word in words])
    if len(every_word) == 1:
        return _Plan(queries[every_word[0]], snippet=snippet, words=1)
    # Held words and words standing together earn their bonus in the head only
    # (:func:`_read_head`): scored over every document holding one of the words, they
    # cost a long question two thirds of its search.
    proximity = _proximity(content, searcher)
    every = tantivy.Query.boolean_query(
        [(tantivy.Occur.Must, queries[word]) for word in every_word])
    if spec.match_all:
        return _Plan(every, snippet=snippet, words=len(words),
                     names=tuple("".join(word) for word in words), proximity=proximity)
    total = max(searcher.num_docs, 1)
    held = tuple(COVERAGE * _idf(_frequency(searcher, word), total) for word in words)
    rest = tantivy.Query.boolean_query([(tantivy.Occur.Should, queries[word]) for word in words])
    return _Plan(every, rest, every, snippet, tuple(queries[word] for word in words),
                 len(words), tuple("".join(word) for word in words), held, proximity)


def _no_words(text: str) -> NoReturn:
    if any(word.isalnum() for word in text.split()):
        raise QueryError(
            f"query {clipped(text)}: every word is longer than {MAX_TOKEN_CHARS} "
            f"characters, and the index keeps no word that long; search for shorter "
            "words of the same entry"
        )
    raise QueryError(f"query {clipped(text)} has no searchable words (letters or digits)")


def _regex(pattern: str) -> tantivy.Query:
    if len(pattern) > MAX_REGEX_CHARS:
        raise QueryError(f"regex is {len(pattern)} characters; the limit is {MAX_REGEX_CHARS}")
    _check_regex_cost(pattern, MAX_REGEX_SECONDS)
    try:
        return tantivy.Query.regex_query(SCHEMA, "text", pattern)
    except ValueError as exc:
        raise QueryError(f"regex {clipped(pattern)}: {_regex_reason(exc)}") from None


def _content(located: list[tuple[int, QueryWord]],
             spec: SearchSpec) -> list[tuple[int, QueryWord]]:
    """The words that rank: without :data:`STOP_WORDS` when the query need not match every
    word (and some other word remains)."""
    if spec.match_all:
        return located
    content = [(at, word) for at, word in located if word[0] not in STOP_WORDS]
    return content or located


def _word_query(word: QueryWord) -> tantivy.Query:
    if len(word) == 1:
        return tantivy.Query.term_query(SCHEMA, "text", word[0])
    return tantivy.Query.phrase_query(SCHEMA, "text", list[str | tuple[int, str]](word))


def _any_of_queries(queries: list[tantivy.Query]) -> tantivy.Query:
    if len(queries) == 1:
        return queries[0]
    return tantivy.Query.boolean_query([(tantivy.Occur.Should, q) for q in queries])


def _frequency(searcher: tantivy.Searcher, word: QueryWord) -> int:
    """How many documents hold ``word`` (a pair: at most as many as its rarer character)."""
    return min(searcher.doc_freq("text", term) for term in word)


def _idf(frequency: int, total: int) -> float:
    """BM25's inverse document frequency, as Tantivy computes it."""
    return math.log(1.0 + (total - frequency + 0.5) / (frequency + 0.5))


def _proximity(content: list[tuple[int, QueryWord]],
               searcher: tantivy.Searcher) -> tuple[Pair, ...]:
    """The pairs of consecutive words of the question that earn a bonus found as near in a
    hit (a CJK pair already is a phrase), each with as many words between as the question
    has, and the bonus."""
    found: list[Pair] = []
    total = max(searcher.num_docs, 1)
    for (at, word), (next_at, following) in itertools.pairwise(content):
        if len(found) == MAX_PAIRS:
            break
        gap = next_at - at - 1
        if len(word) > 1 or len(following) > 1 or word == following or not 0 <= gap <= MAX_GAP:
            continue
        frequencies = [_frequency(searcher, w) for w in (word, following)]
        if min(frequencies) > max(PAIR_SHARE * total, MIN_PAIR_DOCS):
            continue  # both common: found together by chance, it says little
        weight = PROXIMITY * sum(_idf(frequency, total) for frequency in frequencies)
        found.append(Pair(word[0], following[0], gap, weight))
    return tuple(found)


def _regex_reason(exc: ValueError) -> str:
    """The regex parser's complaint on one line (it draws a caret under the pattern)."""
    text = str(exc).split("RegexQueryError: ", 1)[-1].strip("'\n ")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    error = next((line.removeprefix("error: ") for line in lines if line.startswith("error:")),
                 lines[-1] if lines else "invalid")
    return error if len(lines) <= 1 else f"{error} (regex syntax error)"


_CHEAP_REGEX = re.compile(r"[A-Za-z0-9_]*(?:\.[*+?]?)?[A-Za-z0-9_]*")
"""Regexes that always compile in milliseconds: ASCII word characters around at most one
wildcard (``kest.*``, ``alph.``). The slowest of them at the length cap compile in under
40 ms, far inside the cap, so the child process (tens of milliseconds itself) is skipped."""


def _check_regex_cost(pattern: str, seconds: float) -> None:
    """Raise :class:`QueryError` unless ``pattern`` compiles within ``seconds``.

    Tantivy compiles a regex into an automaton while holding the GIL, so neither a thread
    nor a signal can stop it: a forked child compiles it first and is killed past the cap.
    """
    if len(pattern) <= MAX_REGEX_CHARS and _CHEAP_REGEX.fullmatch(pattern):
        return
    pid = os.fork()
    if pid == 0:  # the child: compile, report nothing, exit at once
        with contextlib.suppress(BaseException):
            close_inherited_locks()
            tantivy.Query.regex_query(SCHEMA, "text", pattern)
        os._exit(0)
    deadline = time.monotonic() + seconds
    delay = 0.001
    while os.waitpid(pid, os.WNOHANG) == (0, 0):
        if time.monotonic() >= deadline:
            import signal

            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise QueryError(
                f"regex {clipped(pattern)}: too expensive (not compiled within {seconds:g}s); use "
                "fewer nested repetitions and narrower classes ([a-z] instead of \\w)"
            )
        time.sleep(delay)
        delay = min(delay * 2, 0.02)


INCOMPATIBLE = "was written by another Tantivy format"
NO_META = "had no meta.json (an interrupted first run)"
TANTIVY_LOCKS = (".tantivy-writer.lock", ".tantivy-meta.lock")


LOCK_FILES = frozenset((LOCK_NAME, *TANTIVY_LOCKS))


def await_meta_lock(directory: Path, timeout: float) -> None:
    """Return once Tantivy's meta lock in ``directory`` is free (or absent); raise
    :class:`IndexBusyError` naming its holder when it stays taken past ``timeout`` s.

    Tantivy takes that lock to open or reload a reader and to delete unused files, and
    waits for it without a bound: this bounds the wait. Only a lock taken in the instant
    between this check and Tantivy's own can still hold it up, and every holder of ours
    keeps it for milliseconds."""
    path = directory / TANTIVY_LOCKS[1]
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return  # no lock file yet: nobody holds it (or Tantivy reports the real problem)
    try:
        if _flock_within(fd, timeout, 0.05):
            fcntl.flock(fd, fcntl.LOCK_UN)
            return
        holder = lock_holder(fd)
        who = f" (pid {holder})" if holder else ""
        raise IndexBusyError(
            f"{path}: another process{who} has held Tantivy's meta lock for {timeout:g}s; "
            "retry in a moment (if it lasts, that process is stuck: stop it)"
        )
    except OSError:
        return  # flock not supported here: leave it to Tantivy
    finally:
        os.close(fd)


def lock_holder(fd: int) -> str:
    """The pid that took the ``flock`` on ``fd``'s file, from ``/proc/locks`` ("" when
    unknown: no ``/proc``, or the lock was just released)."""
    try:
        inode = os.fstat(fd).st_ino
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return ""
    for line in lines:
        parts = line.split()
        # "1: FLOCK  ADVISORY  WRITE 4242 fe:00:2156618 0 EOF"
        if len(parts) > 5 and parts[1] == "FLOCK" and parts[5].rsplit(":", 1)[-1] == str(inode):
            return parts[4]
    return ""


def close_inherited_locks() -> None:
    """In a process just forked, close every descriptor it inherited of an index lock file.

    A ``flock`` belongs to the open file, which a fork shares: a child forked while a
    thread of its parent held a lock (a Tantivy reader's watcher reloads on its own thread,
    under ``.tantivy-meta.lock``) would hold it for as long as it lives, and every process
    that opens the index would wait for it, its parent too (docs/reliability.md#hangs)."""
    for fd, path in _descriptors():
        if os.path.basename(path) in LOCK_FILES:
            with contextlib.suppress(OSError):
                os.close(fd)


def _descriptors() -> Iterator[tuple[int, str]]:
    """This process's open descriptors and the path each names (Linux and macOS)."""
    folder = "/proc/self/fd" if os.path.isdir("/proc/self/fd") else "/dev/fd"
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        fd = int(name)
        try:
            if folder == "/proc/self/fd":
                path = os.readlink(f"{folder}/{name}")
            else:  # macOS: F_GETPATH
                path = fcntl.fcntl(fd, 50, bytes(1024)).split(b"\0", 1)[0].decode()
        except (OSError, UnicodeDecodeError):
            continue
        yield fd, path


def _writable(directory: Path) -> bool:
    """Whether this process can create Tantivy's lock files in ``directory``."""
    lock = directory / TANTIVY_LOCKS[1]
    return os.access(directory, os.W_OK) and (not lock.exists() or os.access(lock, os.W_OK))


def _clear_tantivy_locks(directory: Path) -> None:
    """Remove a folder (or anything but a file) where Tantivy keeps its lock files: it would
    wait on it forever. Only a writer holding our lock calls this, so no Tantivy writer
    of ours can be using them."""
    import shutil

    for name in TANTIVY_LOCKS:
        path = directory / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() and not path.is_file():
            path.unlink()


def make_private(directory: Path) -> None:
    """Owner-only index files: Tantivy creates them under the process umask (often 0644)."""
    with os.scandir(directory) as entries:
        for entry in entries:
            with contextlib.suppress(FileNotFoundError):  # a merge removed it meanwhile
                if entry.is_file(follow_symlinks=False) and entry.stat().st_mode & 0o077:
                    os.chmod(entry.path, 0o600)


def _combine(text_query: tantivy.Query | None, spec: SearchSpec) -> tantivy.Query:
    filters = [_any_of(name, values) for name, values in spec.equals]
    if spec.since_ms is not None or spec.until_ms is not None:
        filters.append(tantivy.Query.range_query(
            SCHEMA, "time_ms", tantivy.FieldType.Integer, spec.since_ms, spec.until_ms
        ))
    clauses = [(tantivy.Occur.Must, tantivy.Query.const_score_query(f, 0.0)) for f in filters]
    if text_query is not None:
        clauses.append((tantivy.Occur.Must, text_query))
    clauses.extend((tantivy.Occur.MustNot, _any_of(name, values))
                   for name, values in spec.excluded)
    if clauses and set(spec.kinds) == set(ITEM_KINDS):
        # Every document is an entry, an operation, a session record or (in a delta shard)
        # a mask, so "neither a record nor a mask" is the same filter as "an item", and
        # excluding those few is far cheaper than intersecting every match with the
        # posting list of all items.
        # (Two term queries: a term set costs a single index's recall ~40% more.)
        clauses.extend((tantivy.Occur.MustNot, tantivy.Query.term_query(SCHEMA, "kind", kind))
                       for kind in (SESSION_KIND, MASK_KIND))
    else:
        kinds = tantivy.Query.const_score_query(_any_of("kind", spec.kinds), 0.0)
        clauses.insert(0, (tantivy.Occur.Must, kinds))
    return tantivy.Query.boolean_query(clauses)


def _any_of(name: str, values: Sequence[str | bool]) -> tantivy.Query:
    """Documents whose ``name`` is one of ``values`` (a plain term query for one value)."""
    if len(values) == 1:
        return tantivy.Query.term_query(SCHEMA, name, values[0])
    return tantivy.Query.term_set_query(SCHEMA, name, list(values))


def _count(result: tantivy.SearchResult) -> int:
    # ``count`` exists at runtime (search(count=True)) but is missing from the stubs.
    return int(getattr(result, "count", 0) or 0)


def _head(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def _version_dirs(root: Path) -> set[str]:
    try:
        names = os.listdir(root)
    except OSError:
        return set()
    found = set()
    for name in names:
        match = _VERSION_DIR.fullmatch(name)
        if match and (root / name).is_dir():
            found.add(match.group(1))
    return found


_OPEN: dict[Path, MemoryIndex] = {}
_RESOLVED: dict[Path, Path] = {}


def open_index(root: Path) -> MemoryIndex:
    """The process-wide handle of the index at ``root`` (kept open between calls; a
    server asks for it on every call, so each spelling is resolved once)."""
    key = _RESOLVED.get(root)
    if key is None:
        key = root.resolve()
        if root.is_absolute():  # a relative spelling depends on the working directory
            _RESOLVED[root] = key
    handle = _OPEN.get(key)
    if handle is None:
        handle = _OPEN[key] = MemoryIndex(key)
    return handle
