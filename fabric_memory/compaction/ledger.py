"""Ledgers: the sampled lists a compaction carries (goal, constraints, facts, errors, open
items, exact identifiers, files, file changes, commits, commands, checks, activity, turns).

A :class:`Ledger` keeps the earliest items (``head``), a counted gap of items that no
longer fit (``dropped``, with the addresses that bound it) and the latest items
(``tail``), each part bounded in bytes (:data:`CAPS`), so the state, like the summary,
stops growing however long the session runs. A :class:`LedgerBuilder` takes one cycle's
items; an item may arrive :class:`Pending` (its text not yet written), and only the items
that end up kept are ever written: a long cycle costs a count for the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypedDict, cast

from .._js import is_count

LedgerName = Literal[
    "goal", "constraints", "facts", "errors", "plan", "identifiers", "files", "changes",
    "commits", "commands", "checks", "activity", "turns",
]
LEDGERS: Final[tuple[LedgerName, ...]] = (
    "goal",
    "constraints",
    "facts",
    "errors",
    "plan",
    "identifiers",
    "files",
    "changes",
    "commits",
    "commands",
    "checks",
    "activity",
    "turns",
)


# Built per entry on the hook's path and never changed afterwards; not ``frozen``, which
# would make building it ~5x slower (each field set through ``object.__setattr__``).
@dataclass(slots=True)
class Item:
    """One line of a section: the addresses it stands for and its text.

    ``key`` identifies it for de-duplication (statements), upserts (files, by path) and
    resolution (errors, by target); ``tags`` are a file's actions.
    """

    first: str
    last: str
    text: str
    key: str = ""
    tags: tuple[str, ...] = ()
    _weight: int = field(default=-1, init=False, repr=False, compare=False)

    @property
    def weight(self) -> int:
        """Approximate rendered bytes, used to bound the state (measured once)."""
        if self._weight < 0:
            text = self.text  # (utf8_size written out: weighed for every item kept)
            self._weight = (
                (len(text) if text.isascii() else len(text.encode()))
                + len(self.first)
                + (len(self.last) if self.last != self.first else 0)
                + (sum(len(tag) + 2 for tag in self.tags) if self.tags else 0)
                + 8
            )
        return self._weight

    @property
    def addresses(self) -> tuple[str, ...]:
        return (self.first,) if self.last == self.first else (self.first, self.last)

    def to_json(self) -> list[Any]:
        """``[address, text]``, ``[first, last, text]`` or ``[first, last, text, key, tags]``."""
        if self.key or self.tags:
            return [self.first, self.last, self.text, self.key, list(self.tags)]
        if self.last == self.first:
            return [self.first, self.text]
        return [self.first, self.last, self.text]

    @staticmethod
    def from_json(value: Any) -> Item | None:
        if not isinstance(value, list) or len(value) not in (2, 3, 5):
            return None
        if not all(isinstance(part, str) for part in value[:3]):
            return None
        if len(value) == 2:
            return Item(value[0], value[0], value[1])
        if len(value) == 3:
            return Item(value[0], value[1], value[2])
        key, tags = value[3], value[4]
        if not isinstance(key, str) or not isinstance(tags, list):
            return None
        if not all(isinstance(tag, str) for tag in tags):
            return None
        return Item(value[0], value[1], value[2], key, tuple(tags))


class LedgerJson(TypedDict):
    head: list[list[Any]]
    tail: list[list[Any]]
    dropped: int
    droppedFirst: str | None
    droppedLast: str | None


# Built for every ledger of every compaction (and shared, never changed afterwards); not
# ``frozen``, which would make building it ~5x slower (each field set through
# ``object.__setattr__``).
@dataclass(slots=True)
class Ledger:
    """Earliest items, a counted gap, latest items (in source order)."""

    head: tuple[Item, ...] = ()
    tail: tuple[Item, ...] = ()
    dropped: int = 0
    dropped_first: str | None = None
    dropped_last: str | None = None

    @property
    def items(self) -> tuple[Item, ...]:
        return self.head + self.tail

    @property
    def total(self) -> int:
        return len(self.head) + self.dropped + len(self.tail)

    def gap(self, head: int, tail: int) -> tuple[int, str, str] | None:
        """What showing only the first ``head`` and last ``tail`` items leaves out: how many
        items and the first and last address of that range (None when nothing is)."""
        items = self.items
        n = len(items)
        split = len(self.head)
        if self.dropped and (head > split or tail > len(self.tail)):
            raise ValueError("a sample may not reach past the gap the ledger already has")
        omitted = n - min(n, head + tail) + self.dropped
        if not omitted:
            return None
        middle = items[head : n - tail]
        if not self.dropped:
            return omitted, middle[0].first, middle[-1].last
        before, after = items[head:split], items[split : n - tail]
        first = before[0].first if before else self.dropped_first
        last = after[-1].last if after else self.dropped_last
        return omitted, first or "", last or ""

    def sample(self, head: int, tail: int) -> Ledger:
        """Only the first ``head`` and last ``tail`` items, the rest counted in the gap."""
        gap = self.gap(head, tail)
        if gap is None:
            return self
        items = self.items
        return Ledger(items[:head], items[len(items) - tail :], *gap)

    def to_json(self) -> LedgerJson:
        # (most ledgers of a short session are empty: no comprehension for them)
        return {
            "head": [item.to_json() for item in self.head] if self.head else [],
            "tail": [item.to_json() for item in self.tail] if self.tail else [],
            "dropped": self.dropped,
            "droppedFirst": self.dropped_first,
            "droppedLast": self.dropped_last,
        }

    @staticmethod
    def from_json(value: Any) -> Ledger | None:
        if not isinstance(value, Mapping):
            return None
        head, tail = value.get("head"), value.get("tail")
        dropped = value.get("dropped")
        first, last = value.get("droppedFirst"), value.get("droppedLast")
        if not isinstance(head, list) or not isinstance(tail, list):
            return None
        if not is_count(dropped):
            return None
        if not all(bound is None or isinstance(bound, str) for bound in (first, last)):
            return None
        if dropped and (first is None or last is None):
            return None
        items = [Item.from_json(item) for item in head + tail]
        if any(item is None for item in items):
            return None
        parsed = cast(list[Item], items)
        return Ledger(tuple(parsed[: len(head)]), tuple(parsed[len(head) :]), dropped, first, last)


@dataclass(frozen=True, slots=True)
class Cap:
    """How many bytes of earliest and of latest items a ledger keeps."""

    head: int
    tail: int


CAPS: Final[Mapping[LedgerName, Cap]] = {
    "goal": Cap(2048, 2048),
    "constraints": Cap(2048, 3072),
    "facts": Cap(2048, 4096),
    "errors": Cap(3072, 9216),
    "plan": Cap(1024, 3072),
    "identifiers": Cap(3072, 0),
    "files": Cap(2048, 9216),
    "changes": Cap(1024, 6144),
    "commits": Cap(1024, 3072),
    "commands": Cap(1024, 7168),
    "checks": Cap(512, 2560),
    "activity": Cap(4096, 16384),
    "turns": Cap(4096, 16384),
}


# Built per entry on the hook's path and never changed afterwards; not ``frozen``, which
# would make building it ~5x slower (each field set through ``object.__setattr__``).
@dataclass(slots=True)
class Pending:
    """An item whose text is written only if the ledger keeps it (``key``: the written
    item's, so that a keyed item can be removed unwritten)."""

    first: str
    last: str
    write: Callable[[], Item]
    key: str = ""


# Not frozen: see :class:`Item`.
@dataclass(slots=True)
class Run:
    """Items from one source (a Fabric result's phases or operations), item ``i`` written as
    ``write(owner, i)`` only if the ledger keeps it; until then a run costs nothing per item
    (and no per-run closure: ``owner`` is what ``write`` reads from)."""

    sources: Sequence[Any]
    write: Callable[[Any, int], Item]
    owner: Any


def _written(entry: Item | Pending) -> Item:
    return entry if type(entry) is Item else cast(Pending, entry).write()


def _walk(tail: list[Item | Pending | Run], backward: bool) -> Iterator[Item]:
    """Every item in ``tail`` (runs expanded, items written as they are reached), from the
    end when ``backward``; stop iterating to stop writing."""
    for entry in reversed(tail) if backward else tail:
        if isinstance(entry, Item):  # (isinstance narrows in C: no typing.cast call per item)
            yield entry
        elif isinstance(entry, Pending):
            yield entry.write()
        else:
            write, owner, n = entry.write, entry.owner, len(entry.sources)
            for index in range(n - 1, -1, -1) if backward else range(n):
                yield write(owner, index)


def _bound(tail: list[Item | Pending | Run], at: int) -> tuple[str, str]:
    """The first and last address of item ``at`` of ``tail`` (runs expanded); a run's item
    is written to learn them (a settle asks for two bounds at most)."""
    for entry in tail:
        if type(entry) is Run:
            if at < len(entry.sources):
                item = entry.write(entry.owner, at)
                return item.first, item.last
            at -= len(entry.sources)
        elif at:
            at -= 1
        else:
            pending = cast(Item | Pending, entry)
            return pending.first, pending.last
    raise IndexError(at)


class LedgerBuilder:
    """A ledger being updated by one cycle's items.

    Keyed items are also listed by key (``keys``), so removing a key costs its own items
    only: removed items are marked and left out when the ledger settles, instead of
    rebuilding the lists on every removal."""

    def __init__(self, ledger: Ledger) -> None:
        self.head = list(ledger.head)
        self.tail: list[Item | Pending | Run] = list(ledger.tail)
        self.dropped = ledger.dropped
        self.dropped_first = ledger.dropped_first
        self.dropped_last = ledger.dropped_last
        self.keys: dict[str, list[Item | Pending]] = {}
        """key → its items, earliest first (a key stays listed, empty, once popped)."""
        self.removed: set[int] = set()
        """``id()`` of removed items still in ``head``/``tail``."""
        self.more = 0
        """Items the runs in ``tail`` hold beyond one each (a run is never removed)."""
        if ledger.head or ledger.tail:  # (a new ledger, or one never used: nothing to list)
            for item in ledger.items:
                if item.key:
                    self.keys.setdefault(item.key, []).append(item)

    def add(self, item: Item | Pending) -> None:
        self.tail.append(item)
        if item.key:
            self.keys.setdefault(item.key, []).append(item)

    def add_latest(self, item: Item, keep: int) -> None:
        """Add a keyed item, keeping only the latest ``keep`` items of its key."""
        self.add(item)
        items = self.keys[item.key]
        while len(items) > keep:
            self.removed.add(id(items.pop(0)))

    def add_pending(self, item: Pending | Run) -> None:
        """Add items to be written only if kept."""
        self.tail.append(item)
        if type(item) is Run:
            self.more += len(item.sources) - 1

    def add_unique(self, item: Item) -> None:
        if item.key not in self.keys:
            self.add(item)

    def _purge(self) -> None:
        """Drop the removed items from ``head`` and ``tail``."""
        removed = self.removed
        if removed:
            self.head = [item for item in self.head if id(item) not in removed]
            self.tail = [entry for entry in self.tail if id(entry) not in removed]
            removed.clear()

    def pop_last(self) -> Item | None:
        """Take back the latest item (not one past the gap)."""
        self._purge()
        source = self.tail if self.tail else self.head if not self.dropped else []
        if not source:
            return None
        item = _written(cast(Item | Pending, source.pop()))  # turns never hold runs
        if item.key:
            self.keys[item.key].pop()
        return item

    def remove(self, key: str) -> list[Item | Pending]:
        """Remove every item with ``key``; return them, earliest first."""
        items = self.keys.get(key)
        if not items:
            return []
        del self.keys[key]
        self.removed.update(id(item) for item in items)
        return items

    def settle(self, cap: Cap) -> Ledger:
        """The ledger within ``cap``: the longest run of latest items that fits the tail's
        bytes, earlier items to the head while it has room and nothing was dropped yet, the
        rest counted in the gap. Only kept items (and the gap's two bounds) are written."""
        self._purge()
        if not self.tail:  # (most ledgers of a short cycle: nothing to walk)
            return Ledger(tuple(self.head), (), self.dropped, self.dropped_first,
                          self.dropped_last)
        kept: list[Item] = []
        room = cap.tail
        for item in _walk(self.tail, backward=True):
            weight = item.weight
            if weight > room:
                break
            room -= weight
            kept.append(item)
        kept.reverse()
        start = len(self.tail) + self.more - len(kept)
        moved = 0
        if start and not self.dropped:
            head_bytes = sum(item.weight for item in self.head)
            for item in _walk(self.tail, backward=False):
                if moved == start or head_bytes + item.weight > cap.head:
                    break
                self.head.append(item)
                head_bytes += item.weight
                moved += 1
        if moved < start:
            self.dropped += start - moved
            self.dropped_first = self.dropped_first or _bound(self.tail, moved)[0]
            self.dropped_last = _bound(self.tail, start - 1)[1]
        return Ledger(
            tuple(self.head),
            tuple(kept),
            self.dropped,
            self.dropped_first,
            self.dropped_last,
        )
