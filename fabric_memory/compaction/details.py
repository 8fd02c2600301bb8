"""The persisted compaction details, both sides: what a compaction stores
(docs/compaction-details.md) and how the next compaction reads it back.

The details carry the :class:`CumulativeState` (coverage, counts, the latest status,
every ledger as the summary showed it) under a compactor name and a version. The next
cycle resumes from that state, never from the summary text; details another compactor
(or another version) wrote, or damaged ones, make it rebuild from the branch. The state
names the redaction rules its texts were masked under (``rules``), but whatever it names,
a state read back is masked again by today's rules (:func:`remasked`) before any of it is
shown in the next summary or carried on: it may have been written before a rule existed,
or edited since by anything that can write the session file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, TypedDict, cast

from .._js import is_count
from ..redact import RULES_FINGERPRINT
from ..view import EntryView
from .ledger import LEDGERS, Item, Ledger, LedgerJson, LedgerName
from .text import bounded_id, mask_all

COMPACTOR: Final = "fabric-memory"
DETAILS_VERSION: Final = 1
STATE_VERSION: Final = 2
"""2: the ``changes``, ``commits`` and ``checks`` ledgers (a version 1 state is rebuilt)."""
OPTIONAL_LEDGERS: Final[frozenset[LedgerName]] = frozenset({"plan", "identifiers", "commands"})
"""Ledgers added within version 2: written only when they hold something, read as empty
when absent (a state written before them stays valid, and a session without them keeps
the same details)."""


# --- the cumulative state ------------------------------------------------------------


class CoverageJson(TypedDict):
    first: str | None
    last: str | None
    entries: int


class StateJson(TypedDict):
    version: int
    rules: str
    coverage: CoverageJson
    counts: dict[str, int]
    status: list[list[Any]]
    ledgers: dict[str, LedgerJson]


@dataclass(frozen=True, slots=True)
class Coverage:
    """The source range summarized so far: first and last entry, and how many entries."""

    first: str | None = None
    last: str | None = None
    entries: int = 0

    def to_json(self) -> CoverageJson:
        return {"first": self.first, "last": self.last, "entries": self.entries}


_NO_LEDGERS: Final[Mapping[LedgerName, Ledger]] = {name: Ledger() for name in LEDGERS}
"""A state's ledgers before anything is summarized (a ledger is immutable: shared)."""


# Built a few times per compaction and never changed afterwards; not ``frozen`` (see
# :class:`~.ledger.Ledger`).
@dataclass(slots=True)
class CumulativeState:
    """Everything a compaction carries to the next one (inside its details)."""

    coverage: Coverage = Coverage()
    counts: Mapping[str, int] = field(default_factory=dict)
    status: tuple[Item, ...] = ()
    """The latest user request and assistant reply, keyed ``user``/``assistant``."""
    ledgers: Mapping[LedgerName, Ledger] = field(default_factory=lambda: dict(_NO_LEDGERS))

    def to_json(self) -> StateJson:
        return {
            "version": STATE_VERSION,
            "rules": RULES_FINGERPRINT,
            "coverage": self.coverage.to_json(),
            "counts": dict(sorted(self.counts.items())),
            "status": [item.to_json() for item in self.status],
            "ledgers": {
                name: ledger.to_json() for name in LEDGERS
                if (ledger := self.ledgers[name]).total or name not in OPTIONAL_LEDGERS
            },
        }

    def sampled(self, shown: Mapping[str, tuple[int, int]]) -> CumulativeState:
        """The state with each named ledger cut to its first/last ``(head, tail)`` items: what
        a summary showed is what the next cycle carries."""
        ledgers = {
            name: self.ledgers[name].sample(*shown[name]) if name in shown else self.ledgers[name]
            for name in LEDGERS
        }
        return CumulativeState(self.coverage, self.counts, self.status, ledgers)

    def addresses(self) -> list[str]:
        """Every address the state holds, in a stable order."""
        # One dict in first-seen order, filled in plain loops: most ledgers of a short
        # session are empty, and a comprehension per ledger costs a call each.
        coverage = self.coverage
        found: dict[str, None] = {}
        for bound in (coverage.first, coverage.last):
            if bound:
                found[bound] = None
        for item in self.status:
            found[item.first] = found[item.last] = None
        for name in LEDGERS:
            ledger = self.ledgers[name]
            for item in ledger.head:
                found[item.first] = found[item.last] = None
            for item in ledger.tail:
                found[item.first] = found[item.last] = None
            if ledger.dropped_first:
                found[ledger.dropped_first] = None
            if ledger.dropped_last:
                found[ledger.dropped_last] = None
        return list(found)


def read_state(value: Any) -> CumulativeState | None:
    """The state stored by :meth:`CumulativeState.to_json`, or None if ``value`` is not one
    (another version, another compactor, or damaged)."""
    if not isinstance(value, Mapping) or value.get("version") != STATE_VERSION:
        return None
    coverage, counts = value.get("coverage"), value.get("counts")
    status, ledgers = value.get("status"), value.get("ledgers")
    if not isinstance(coverage, Mapping) or not isinstance(counts, Mapping):
        return None
    if not isinstance(status, list) or not isinstance(ledgers, Mapping):
        return None
    first, last, entries = coverage.get("first"), coverage.get("last"), coverage.get("entries")
    if not all(bound is None or isinstance(bound, str) for bound in (first, last)):
        return None
    if not is_count(entries):
        return None
    if not all(isinstance(k, str) and is_count(v) for k, v in counts.items()):
        return None
    status_items = [Item.from_json(item) for item in status]
    parsed = {
        name: Ledger() if name in OPTIONAL_LEDGERS and name not in ledgers
        else Ledger.from_json(ledgers.get(name))
        for name in LEDGERS
    }
    if any(item is None for item in status_items) or any(v is None for v in parsed.values()):
        return None
    return CumulativeState(
        Coverage(first, last, entries),
        dict(counts),
        tuple(cast(list[Item], status_items)),
        cast(dict[LedgerName, Ledger], parsed),
    )


def remasked(state: CumulativeState) -> CumulativeState:
    """``state`` with every text and key it carries (status, ledger items, count names)
    masked by today's rules, one prefilter pass over all of them; ``state`` itself when
    nothing changes (a state this version wrote)."""
    ledgers = [state.ledgers[name] for name in LEDGERS]
    items = [*state.status, *(item for ledger in ledgers for item in ledger.items)]
    texts = [text for item in items for text in (item.text, item.key)]
    texts.extend(state.counts)
    masked = mask_all(texts)
    if all(new is old for new, old in zip(masked, texts, strict=True)):
        return state
    fresh = iter(masked)
    redone = [Item(item.first, item.last, next(fresh), next(fresh), item.tags) for item in items]
    counts = dict(zip(fresh, state.counts.values(), strict=True))
    status, at = tuple(redone[: len(state.status)]), len(state.status)
    carried: dict[LedgerName, Ledger] = {}
    for name, ledger in zip(LEDGERS, ledgers, strict=True):
        head, tail = len(ledger.head), len(ledger.tail)
        carried[name] = replace(ledger, head=tuple(redone[at : at + head]),
                                tail=tuple(redone[at + head : at + head + tail]))
        at += head + tail
    return CumulativeState(state.coverage, counts, status, carried)


def previous_state(branch: Sequence[EntryView], cut: int) -> tuple[CumulativeState, int]:
    """The state the latest compaction on ``branch`` carries and where projection resumes;
    an empty state from the branch start when that compaction is not ours."""
    latest = next((e for e in reversed(branch) if e.type == "compaction"), None)
    if latest is None:
        return CumulativeState(), 0
    details = latest.raw.get("details")
    if (
        not isinstance(details, Mapping)
        or details.get("compactor") != COMPACTOR
        or details.get("version") != DETAILS_VERSION
    ):
        return CumulativeState(), 0
    stored = details.get("state")
    state = read_state(stored)
    if state is None:
        return CumulativeState(), 0
    state = remasked(state)  # trusting no fingerprint: masking it costs little
    if state.coverage.last is None:
        return state, 0
    resume = next((i for i, e in enumerate(branch) if e.id == state.coverage.last), None)
    if resume is None:
        return CumulativeState(), 0  # our range is not on this branch: rebuild
    return state, min(resume + 1, cut)


# --- the details ---------------------------------------------------------------------


# Not ``frozen`` (see :class:`~.ledger.Ledger`): built per compaction, never changed.
@dataclass(slots=True)
class LiveRange:
    """What this compaction itself added, and where the kept context starts."""

    first: str | None
    last: str | None
    entries: int
    first_kept_entry_id: str

    def to_json(self) -> LiveJson:
        return {
            "first": self.first,
            "last": self.last,
            "entries": self.entries,
            "firstKeptEntryId": self.first_kept_entry_id,
        }


class LiveJson(TypedDict):
    first: str | None
    last: str | None
    entries: int
    firstKeptEntryId: str


class SectionJson(TypedDict):
    name: str
    title: str
    budget: int
    bytes: int
    items: int
    shown: int
    omitted: int
    truncated: bool
    omittedFirst: str | None
    omittedLast: str | None


class CoverageDetailsJson(TypedDict):
    source: CoverageJson
    live: LiveJson


# Built per section on the hook's path and never changed afterwards; not ``frozen``, which
# would make building it ~7x slower (each field set through ``object.__setattr__``).
@dataclass(slots=True)
class Section:
    """One rendered section and what it left out."""

    name: str
    title: str
    budget: int
    text: str
    size: int
    """``text`` in UTF-8 bytes."""
    items: int
    head: int
    """How many of the earliest items are shown."""
    tail: int
    """How many of the latest items are shown (the first of them possibly cut)."""
    omitted: int
    truncated: bool
    omitted_first: str | None
    omitted_last: str | None

    def to_json(self) -> SectionJson:
        return {
            "name": self.name,
            "title": self.title,
            "budget": self.budget,
            "bytes": self.size,
            "items": self.items,
            "shown": self.head + self.tail,
            "omitted": self.omitted,
            "truncated": self.truncated,
            "omittedFirst": self.omitted_first,
            "omittedLast": self.omitted_last,
        }


@dataclass(frozen=True, slots=True)
class Rendered:
    """The summary text and its sections."""

    summary: str
    size: int
    """``summary`` in UTF-8 bytes."""
    sections: tuple[Section, ...]
    addresses: tuple[str, ...]
    """Every address the summary names, in order of first appearance."""



class DetailsJson(TypedDict):
    compactor: str
    version: int
    sessionId: str | None
    summaryBytes: int
    firstKeptAdjustedFrom: str | None
    sections: list[SectionJson]
    coverage: CoverageDetailsJson
    counts: dict[str, int]
    omitted: dict[str, int]
    addresses: list[str]
    state: StateJson


def build_details(
    state: CumulativeState,
    rendered: Rendered,
    live: LiveRange,
    *,
    session_id: str | None,
    adjusted_from: str | None,
) -> DetailsJson:
    """The versioned details stored with the compaction (documented in docs/compaction-details.md).

    The state carried forward keeps, of each sampled list, the items the summary showed.
    """
    carried = state.sampled({s.name: (s.head, s.tail) for s in rendered.sections})
    addresses = dict.fromkeys(rendered.addresses)
    addresses.update(dict.fromkeys(carried.addresses()))
    if live.first_kept_entry_id:
        addresses[live.first_kept_entry_id] = None
    counts = dict(state.counts)
    counts["outstandingErrors"] = state.ledgers["errors"].total
    counts["files"] = state.ledgers["files"].total
    return {
        "compactor": COMPACTOR,
        "version": DETAILS_VERSION,
        "sessionId": session_id if session_id is None else bounded_id(session_id),
        "summaryBytes": rendered.size,
        "firstKeptAdjustedFrom": adjusted_from,
        "sections": [section.to_json() for section in rendered.sections],
        "coverage": {"source": state.coverage.to_json(), "live": live.to_json()},
        "counts": dict(sorted(counts.items())),
        "omitted": {section.name: section.omitted for section in rendered.sections},
        "addresses": list(addresses),
        "state": carried.to_json(),
    }
