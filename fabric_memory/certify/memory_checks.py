"""Cross-layer memory: a seeded corpus indexed, recalled and expanded exactly.

Everything goes through the public memory functions (``reindex``, ``recall``,
``expand``, the catalog views); expectations come from the generator's manifest
and from a fresh read and normalization of the source files, never from the
index itself. Expansion goes through an injectable function so the harness can
prove that a wrong page is caught.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from ..errors import ExpandError, FabricMemoryError
from ..memory.catalog import SessionListing, list_sessions, stats
from ..memory.expand import MAX_CHARS, MAX_ENTRIES, MAX_SELECTORS, ExpandPage
from ..memory.normalize import normalize_session, record_text, source_records
from ..memory.recall import RecallHit, recall
from ..memory.reindex import reindex
from ..memory.report import ReindexReport
from ..session import hash_file, iter_session_files, read_session
from .generate import CorpusManifest, WrittenSession
from .report import Check

HOT_SESSIONS: Final = 8
WRONG_HASH: Final = "0" * 32

Expand = Callable[[Mapping[str, Any]], ExpandPage]
Reindexer = Callable[[Path, Path], ReindexReport]


def index_sessions(sessions: Path, index: Path) -> ReindexReport:
    """The default reindexer: ``reindex`` of ``sessions`` into ``index``."""
    return reindex(sessions=sessions, index=index)


@dataclass(frozen=True, slots=True)
class Locations:
    """Where the sessions and the index of this run live (added to every request)."""

    sessions: Path
    index: Path

    def request(self, request: Mapping[str, Any]) -> dict[str, Any]:
        return {**request, "sessions": os.fspath(self.sessions), "index": os.fspath(self.index)}


@dataclass(slots=True)
class Expansion:
    """Every page fetched for a selection: the text per address, the hashes seen, errors."""

    texts: dict[str, str] = field(default_factory=dict)
    complete: set[str] = field(default_factory=set)
    hashes: list[str] = field(default_factory=list)
    session_ids: set[str] = field(default_factory=set)
    errors: dict[str, str] = field(default_factory=dict)
    pages: int = 0

    def add_page(self, page: ExpandPage) -> None:
        self.pages += 1
        self.hashes.append(page["sourceHash"])
        self.session_ids.add(page["sessionId"])
        for item in page["entries"]:
            address = item["address"]
            text = self.texts.get(address, "")
            if item["textOffset"] != len(text):
                self.errors[address] = (
                    f"chunk at textOffset {item['textOffset']} does not continue the "
                    f"{len(text)} characters already read"
                )
                continue
            self.texts[address] = text + item["text"]
            if item["complete"]:
                self.complete.add(address)

    def forget(self, addresses: Sequence[str]) -> None:
        """Drop what was read of ``addresses`` (before fetching them again)."""
        for address in addresses:
            self.texts.pop(address, None)
            self.complete.discard(address)


def expand_all(expand: Expand, request: Mapping[str, Any], into: Expansion) -> None:
    """Fetch the first page of ``request`` and every page its ``next`` leads to."""
    page = expand(request)
    into.add_page(page)
    while page["next"] is not None:
        page = expand(page["next"])
        into.add_page(page)


def expand_addresses(
    expand: Expand, locations: Locations, session: str, addresses: Sequence[str]
) -> Expansion:
    """Expand ``addresses`` in batches of at most 100 selectors, following ``next``; a
    failing batch is retried address by address so each failure is named."""
    expansion = Expansion()
    for start in range(0, len(addresses), MAX_SELECTORS):
        batch = list(addresses[start : start + MAX_SELECTORS])
        try:
            expand_all(expand, _selection(locations, session, batch), expansion)
        except FabricMemoryError:
            expansion.forget(batch)  # pages before the failure are fetched again, one by one
            for address in batch:
                try:
                    expand_all(expand, _selection(locations, session, [address]), expansion)
                except FabricMemoryError as exc:
                    expansion.errors[address] = f"{exc.code}: {exc.message}"
    return expansion


def _selection(locations: Locations, session: str, addresses: list[str]) -> dict[str, Any]:
    return locations.request({"session": session, "addresses": addresses, "raw": True,
                              "maxEntries": MAX_ENTRIES, "maxChars": MAX_CHARS})


def source_texts(path: Path) -> dict[str, str]:
    """What expansion must return for every address of the file, from a fresh read and
    normalization: an entry's verbatim line, an operation's or phase's record."""
    session = read_session(path)
    data = path.read_bytes()
    texts: dict[str, str] = {}
    for item in normalize_session(session).items:
        if item.kind == "entry":
            texts[item.address] = data[item.offset : item.offset + item.length].decode("utf-8")
            entry = session.by_id[item.entry_id]
            for address, record in source_records(entry.id, entry.raw).items():
                texts.setdefault(address, record_text(record))
        elif item.record is not None:
            texts[item.address] = record_text(item.record)
    return texts


@dataclass(frozen=True, slots=True)
class MemoryInputs:
    """What the memory checks look at."""

    locations: Locations
    manifest: CorpusManifest
    report: ReindexReport
    minimum_sessions: int
    endurance_path: Path
    endurance_session_id: str
    emitted: frozenset[str]


@dataclass(frozen=True, slots=True)
class MemoryResult:
    checks: tuple[Check, ...]
    counts: dict[str, int]
    bytes: dict[str, int]


def run_memory(inputs: MemoryInputs, expand: Expand) -> MemoryResult:
    """Every memory check of docs/certification.md#checks on an indexed run."""
    locations = inputs.locations
    listing = {item["path"]: item for item in
               list_sessions(index=locations.index, hot_sessions=HOT_SESSIONS)["sessions"]}
    totals = stats(index=locations.index, hot_sessions=HOT_SESSIONS)
    checks = [
        _coverage(inputs, listing, totals["documents"]),
        _tiers(inputs.manifest, listing),
        *_rare_fact(inputs, expand),
        *_structural(inputs, expand),
        _negative_control(inputs),
    ]
    expansion_checks, counts = _addresses(inputs, expand, listing)
    checks.extend(expansion_checks)
    counts.update({
        "eligibleSessions": inputs.report["sessions"], "indexedSessions": len(listing),
        "staleSessions": sum(item["stale"] for item in listing.values()),
        "invalidSessions": len(inputs.report["invalid"]),
        "corpusSessions": len(inputs.manifest.sessions), "entries": totals["entries"],
        "operations": totals["operations"], "documents": totals["documents"],
        "hotSessions": totals["hot"],
    })
    sizes = {"indexBytes": totals["indexBytes"], "sourceBytes": totals["sourceBytes"]}
    return MemoryResult(tuple(checks), counts, sizes)


def _coverage(
    inputs: MemoryInputs, listing: Mapping[str, SessionListing], documents: int
) -> Check:
    """≥ N eligible sessions, every one indexed, none invalid, stale or incomplete, and the
    records and document count agree with what was written."""
    report = inputs.report
    files = [str(path) for path in iter_session_files(inputs.locations.sessions)]
    problems = [f"{item['path']}: {item['reason']}" for item in
                (*report["invalid"], *report["stale"], *report["incomplete"])]
    problems += [f"{path}: not indexed" for path in files if path not in listing]
    expected_documents = 0
    for written in inputs.manifest.sessions:
        item = listing.get(written.path)
        if item is None:
            continue
        problems += _record_problems(written, item)
    for item in listing.values():
        expected_documents += item["entries"] + item["operations"]
        if item["stale"] or not item["complete"]:
            problems.append(f"{item['path']}: stale or incomplete in the index")
    if documents != expected_documents:
        problems.append(f"the index holds {documents} documents; its records count "
                        f"{expected_documents} entries and operations")
    eligible = len(files)
    if len(inputs.manifest.sessions) < inputs.minimum_sessions:
        problems.append(f"{len(inputs.manifest.sessions)} corpus sessions, fewer than "
                        f"{inputs.minimum_sessions}")
    indexed = sum(path in listing for path in files)
    return Check(
        "memory.coverage", not problems,
        {"eligible": eligible, "indexed": indexed, "documents": documents,
         "coverage": round(indexed / eligible, 6) if eligible else 0.0},
        {"minCorpusSessions": inputs.minimum_sessions, "coverage": 1.0},
        tuple(problems[:5]),
    )


def _record_problems(written: WrittenSession, item: SessionListing) -> list[str]:
    wanted = {"sessionId": written.session_id, "entries": len(written.entry_ids),
              "operations": len(written.operations), "sourceHash": written.source_hash}
    got = {"sessionId": item["sessionId"], "entries": item["entries"],
           "operations": item["operations"], "sourceHash": item["sourceHash"]}
    return [] if got == wanted else [f"{written.path}: record {got} != written {wanted}"]


def _tiers(manifest: CorpusManifest, listing: Mapping[str, SessionListing]) -> Check:
    hot = sum(item["tier"] == "hot" for item in listing.values())
    rare = listing.get(manifest.rare_fact.path)
    grep = listing.get(manifest.grep_session_path)
    measured = {"hot": hot, "rareFactTier": rare["tier"] if rare else None,
                "grepTier": grep["tier"] if grep else None}
    problems = []
    if hot > HOT_SESSIONS:
        problems.append(f"{hot} sessions are hot (at most {HOT_SESSIONS})")
    for name in ("rareFactTier", "grepTier"):
        if measured[name] != "cold":
            problems.append(f"{name} is {measured[name]}, expected cold")
    return Check("memory.tiers", not problems, measured,
                 {"maxHot": HOT_SESSIONS, "rareFactTier": "cold", "grepTier": "cold"},
                 tuple(problems))


def _recall(inputs: MemoryInputs, **filters: Any) -> tuple[int, list[RecallHit]]:
    response = recall(hot_sessions=HOT_SESSIONS, index=inputs.locations.index,
                      sessions=inputs.locations.sessions, **filters)
    return response["total"], response["hits"]


def _hydrate(expand: Expand, follow: Mapping[str, Any]) -> tuple[Expansion, str | None]:
    """Expand a hit's ``follow`` as the verbatim source (``raw``), to compare byte for byte."""
    expansion = Expansion()
    try:
        expand_all(expand, {**follow, "raw": True}, expansion)
    except FabricMemoryError as exc:
        return expansion, f"hydration failed: {exc.code}: {exc.message}"
    return expansion, None


def _rare_fact(inputs: MemoryInputs, expand: Expand) -> list[Check]:
    """The cold rare-fact session is found by its exact words (ASCII and Unicode) and the
    hit hydrates to the source line holding the fact."""
    rare = inputs.manifest.rare_fact
    written = inputs.manifest.session(rare.path)
    checks = []
    for name, fact in (("ascii", rare.ascii), ("unicode", rare.unicode)):
        total, hits = _recall(inputs, query=fact, mode="phrase", match="all")
        problems = []
        hit = hits[0] if hits else None
        if total != 1 or hit is None:
            problems.append(f"phrase {fact!r} matched {total} documents, expected exactly 1")
        if hit is not None:
            got = (hit["sessionId"], hit["entryId"], hit["tier"])
            if got != (rare.session_id, rare.entry_id, "cold"):
                problems.append(f"hit {got} != {(rare.session_id, rare.entry_id, 'cold')}")
            expansion, failure = _hydrate(expand, hit["follow"])
            problems += [failure] if failure else []
            text = expansion.texts.get(rare.entry_id, "")
            if fact not in text:
                problems.append(f"the hydrated entry {rare.entry_id} does not hold the fact")
            problems += _hash_problems(expansion, written.source_hash)
        checks.append(Check(
            f"memory.rare_fact_{name}", not problems,
            {"total": total, "tier": hit["tier"] if hit else None,
             "entryId": hit["entryId"] if hit else None},
            {"total": 1, "tier": "cold", "entryId": rare.entry_id}, tuple(problems)))
    return checks


def _hash_problems(expansion: Expansion, source_hash: str) -> list[str]:
    wrong = sorted({h for h in expansion.hashes if h != source_hash})
    return [f"a page reported sourceHash {h}, the file's is {source_hash}" for h in wrong]


def _structural(inputs: MemoryInputs, expand: Expand) -> list[Check]:
    """The cold failed ``*.grep`` operation is selected by exact ref and outcome alone, and
    its ``follow`` hydrates it bound to the session's sourceHash and lineage."""
    manifest = inputs.manifest
    grep = manifest.grep_operation
    path = Path(manifest.grep_session_path)
    written = manifest.session(manifest.grep_session_path)
    total, hits = _recall(inputs, ref=grep.ref, outcome=grep.outcome)
    hit = hits[0] if hits else None
    selection = []
    if total != 1 or len(manifest.operations_matching(grep.ref, grep.outcome)) != 1:
        selection.append(f"ref {grep.ref} outcome {grep.outcome} matched {total}, expected 1")
    if hit is not None:
        got = (hit["kind"], hit["address"], hit["sessionId"], hit["tier"])
        wanted = ("operation", grep.address, grep.session_id, "cold")
        if got != wanted:
            selection.append(f"hit {got} != {wanted}")
    hydration: list[str] = []
    measured: dict[str, Any] = {"address": grep.address}
    if hit is None:
        hydration.append("nothing to hydrate: the structural selection found no operation")
    else:
        follow = hit["follow"]
        bound = (follow.get("expectedSourceHash"), follow.get("expectedLineageFingerprint"))
        if bound != (written.source_hash, read_session(path).lineage_fingerprint("active")):
            hydration.append(f"follow is bound to {bound}, not to the session's hash and lineage")
        expansion, failure = _hydrate(expand, follow)
        hydration += [failure] if failure else []
        measured["agrees"] = expansion.texts.get(grep.address) == source_texts(path).get(
            grep.address)
        if not measured["agrees"]:
            hydration.append(f"{grep.address} hydrated to a text that differs from the source")
        hydration += _hash_problems(expansion, written.source_hash)
        for key in ("expectedSourceHash", "expectedLineageFingerprint"):
            stale = _stale_pointer_problems(expand, {**follow, key: WRONG_HASH}, key)
            measured[f"wrong{key.removeprefix('expected')}Refused"] = not stale
            hydration += stale
    return [
        Check("memory.structural_selection", not selection,
              {"total": total, "address": hit["address"] if hit else None,
               "tier": hit["tier"] if hit else None},
              {"total": 1, "address": grep.address, "tier": "cold"}, tuple(selection)),
        Check("memory.hydration", not hydration, measured,
              {"agrees": True, "wrongSourceHashRefused": True,
               "wrongLineageFingerprintRefused": True}, tuple(hydration)),
    ]


def _stale_pointer_problems(expand: Expand, request: Mapping[str, Any], key: str) -> list[str]:
    """A pointer with a wrong hash or lineage must fail with ``stale_pointer``."""
    try:
        expand(request)
    except ExpandError as exc:
        if exc.code == "stale_pointer":
            return []
        return [f"a wrong {key} failed with {exc.code}, not stale_pointer"]
    except FabricMemoryError as exc:
        return [f"a wrong {key} failed with {exc.code}, not stale_pointer"]
    return [f"a wrong {key} still hydrated: the pointer is not bound to it"]


def _negative_control(inputs: MemoryInputs) -> Check:
    absent = inputs.manifest.absent_ref
    total, hits = _recall(inputs, ref=absent)
    problems = [] if total == 0 and not hits else [f"ref {absent} matched {total} documents"]
    return Check("memory.negative_control", not problems, {"total": total, "ref": absent},
                 {"total": 0}, tuple(problems))


def _addresses(
    inputs: MemoryInputs, expand: Expand, listing: Mapping[str, SessionListing]
) -> tuple[list[Check], dict[str, int]]:
    """Every distinct address the compactions emitted expands from the index and agrees with
    a fresh normalization of the source, on pages that all carry the file's sourceHash."""
    path = inputs.endurance_path
    session_id = inputs.endurance_session_id
    addresses = sorted(inputs.emitted)
    expansion = expand_addresses(expand, inputs.locations, session_id, addresses)
    expected = source_texts(path)
    current = hash_file(str(path))
    unknown = [a for a in addresses if a not in expected]
    failed = {a: expansion.errors.get(a, "not returned") for a in addresses
              if a not in expansion.complete or a in expansion.errors}
    disagree = [a for a in addresses if a in expansion.complete and a not in failed
                and expansion.texts.get(a) != expected.get(a)]
    total = len(addresses)
    expanded = total - len(failed)
    agreeing = expanded - len(disagree)
    hashes = set(expansion.hashes)
    header = read_session(path).header.get("id")
    record = listing.get(str(path))
    identity = {"header": header, "record": record["sessionId"] if record else None,
                "pages": sorted(expansion.session_ids)}
    identity_problems = []
    if header != session_id or identity["record"] != session_id or identity["pages"] != [
            session_id]:
        identity_problems.append(f"session ids {identity} != the written id {session_id}")
    checks = [
        Check("memory.session_id", not identity_problems, identity,
              {"sessionId": session_id}, tuple(identity_problems)),
        Check("memory.address_expansion", total > 0 and expanded == total,
              {"rate": _rate(expanded, total), "expanded": expanded, "emitted": total},
              {"rate": 1.0, "maxSelectorsPerCall": MAX_SELECTORS},
              tuple([f"{a}: {why}" for a, why in failed.items()][:5]
                    + [f"{a}: not an address of {path.name}" for a in unknown][:5]
                    + ([] if total else ["no addresses were emitted"]))),
        Check("memory.expansion_agreement", expanded > 0 and agreeing == expanded,
              {"rate": _rate(agreeing, expanded), "agreeing": agreeing, "expanded": expanded},
              {"rate": 1.0}, tuple(f"{a}: expanded text differs from the source"
                                   for a in disagree[:5])),
        Check("memory.source_hash", hashes == {current} and expansion.pages > 0,
              {"pages": expansion.pages, "distinctHashes": len(hashes)},
              {"distinctHashes": 1, "sourceHash": current},
              tuple(_hash_problems(expansion, current)[:5])),
    ]
    counts = {"emittedAddresses": total, "expandedAddresses": expanded,
              "expansionPages": expansion.pages,
              "expansionBatches": -(-total // MAX_SELECTORS)}
    return checks, counts


def _rate(part: int, whole: int) -> float:
    return round(part / whole, 6) if whole else 0.0

