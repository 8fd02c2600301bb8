"""The compaction summary (bounded, sectioned, addressed) and its versioned details.

The summary never exceeds :data:`SUMMARY_MAX_BYTES` of UTF-8. Each section has a base
byte budget; bytes a section does not need go to the sections that overflow, so a
rich source fills the summary instead of throwing information away. A section that
still overflows keeps its earliest and latest items, names the omitted middle with
an explicit line (count, first and last address, how to expand it) and fills what
is left with one item cut at a character boundary. Nothing here reads a clock:
the same state gives the same bytes. Nothing here masks secrets either: every text
taken from the state was masked where it entered the state (:mod:`.text`), and the
rest is fixed wording, counts, addresses and the session id.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from .details import CumulativeState, LiveRange, Rendered, Section
from .ledger import LEDGERS, Item, Ledger
from .text import bounded, shown_id, utf8_size

SUMMARY_MAX_BYTES: Final = 32 * 1024
MIN_PARTIAL_BYTES: Final = 48
"""A cut item is shown only when at least this many bytes are left for it."""
HEAD_SHARE: Final = 4
"""A sampled section gives its earliest items up to 1/HEAD_SHARE of its room."""
UNKNOWN_SESSION: Final = "<session>"


@dataclass(frozen=True, slots=True)
class SectionSpec:
    name: str
    title: str
    budget: int
    counted: bool = False
    """Whether the heading shows the section's total item count."""


SECTIONS: Final = (
    SectionSpec("goal", "Goal", 1536),
    SectionSpec("constraints", "Constraints", 1536),
    SectionSpec("facts", "Facts to keep", 2560),
    SectionSpec("status", "Current status", 1536),
    SectionSpec("errors", "Outstanding errors", 4096, counted=True),
    SectionSpec("plan", "Open items", 1536, counted=True),
    SectionSpec("identifiers", "Exact facts", 3072, counted=True),
    SectionSpec("files", "Files", 4096, counted=True),
    SectionSpec("changes", "File changes", 3072, counted=True),
    SectionSpec("commits", "Commits and releases", 2048, counted=True),
    SectionSpec("commands", "Commands and what they printed", 2048, counted=True),
    SectionSpec("checks", "Checks", 1536, counted=True),
    SectionSpec("activity", "Fabric activity", 8704, counted=True),
    SectionSpec("turns", "Earlier turns", 6656, counted=True),
)
SPARE_ORDER: Final = (
    "goal",
    "constraints",
    "facts",
    "errors",
    "plan",
    "status",
    "identifiers",
    "checks",
    "commits",
    "files",
    "turns",
    "changes",
    "commands",
    "activity",
)
"""Who gets unused bytes first (and, read backwards, who gives them up first): what the
user stated and what is still broken before the history."""


# --- lines ---------------------------------------------------------------------------


def _line(item: Item, text: str | None = None) -> str:
    """``item`` as a summary line, its addresses as they are (:func:`plain_ids` said so)."""
    body = item.text if text is None else text
    if item.tags:
        body = f"{body} ({', '.join(item.tags)})"
    if not item.first:
        return f"- {body}\n"
    where = item.first if item.last == item.first else f"{item.first} ... {item.last}"
    return f"- [{where}] {body}\n"


def _quoted_line(item: Item, text: str | None = None) -> str:
    """:func:`_line` with each address as :func:`shown_id` shows it."""
    return _line(Item(shown_id(item.first) if item.first else "", shown_id(item.last),
                      item.text, item.key, item.tags), text)


def _cut_line(item: Item, room: int, line: Callable[..., str]) -> str | None:
    """``item``'s line cut to ``room`` bytes (addresses kept whole), or None if too small."""
    frame = utf8_size(line(item, ""))
    if room - frame < MIN_PARTIAL_BYTES // 2:
        return None
    text = item.text if not item.tags else f"{item.text} ({', '.join(item.tags)})"
    return line(Item(item.first, item.last, bounded(text, room - frame)))


def _omission(count: int, first: str, last: str, session: str) -> str:
    first, last = shown_id(first), shown_id(last)
    where = first if first == last else f"{first} ... {last}"
    return (
        f"- ... {count} more omitted here [{where}]; "
        f"expand: `fabric-memory expand {session} --address {first}`\n"
    )


# --- sections ------------------------------------------------------------------------


def _heading(spec: SectionSpec, total: int) -> str:
    return f"## {spec.title} ({total})\n" if spec.counted else f"## {spec.title}\n"


class _Layout:
    """A section's lines, laid out once per summary whatever budgets it is then tried at:
    each item's line and size, the heading, and the bytes the whole section needs."""

    __slots__ = ("body", "heading", "heading_size", "items", "ledger", "line", "lines", "need",
                 "session", "sizes", "spec")

    def __init__(self, spec: SectionSpec, ledger: Ledger, session: str, plain: bool) -> None:
        self.spec = spec
        self.ledger = ledger
        self.session = session
        self.items = ledger.items
        self.heading = _heading(spec, ledger.total)
        self.heading_size = utf8_size(self.heading)
        self.line = _line if plain else _quoted_line
        self.lines = [self.line(item) for item in self.items]
        self.body = "".join(self.lines)
        # Lines are sized in one C loop: by ``len`` when ASCII (the usual case), else encoded.
        if self.body.isascii():
            self.sizes = list(map(len, self.lines))
            body_size = len(self.body)
        else:
            self.sizes = list(map(len, map(str.encode, self.lines)))
            body_size = sum(self.sizes)
        # With nothing omitted: heading, every line, the closing blank line (and the line
        # naming what the state itself already dropped).
        self.need = self.heading_size + body_size + 1
        if ledger.dropped:
            bounds = (ledger.dropped_first or "", ledger.dropped_last or "")
            self.need += utf8_size(_omission(ledger.dropped, *bounds, session))

    def within(self, budget: int) -> Section:
        """The section within ``budget`` bytes: earliest and latest items, one cut item
        next to the gap, and a line naming what was omitted."""
        ledger, items, sizes = self.ledger, self.items, self.sizes
        n = len(items)
        if not ledger.dropped and self.need <= budget:
            text = self.heading + self.body + "\n"
            return self._section(budget, text, self.need, n, 0, False, None)
        # Neither end may reach past the state's own gap: the omission line must cover it.
        front_limit = len(ledger.head) if ledger.dropped else n
        back_limit = len(ledger.tail) if ledger.dropped else n
        quoted = self.line is _quoted_line
        widest = max(
            (utf8_size(shown_id(address)) if address else 0) if quoted else len(address)
            for address in (ledger.dropped_first or "", ledger.dropped_last or "",
                            *[a for item in items for a in (item.first, item.last)])
        )
        # The first address is named twice (range and expand command), the last once.
        reserve = utf8_size(_omission(ledger.total, "x", "y", self.session)) + 3 * max(
            widest - 1, 0
        )
        room = budget - self.heading_size - 1 - reserve
        head = tail = used = 0
        while head < front_limit and used + sizes[head] <= room // HEAD_SHARE:
            used += sizes[head]
            head += 1
        while tail < back_limit and head + tail < n and used + sizes[n - 1 - tail] <= room:
            used += sizes[n - 1 - tail]
            tail += 1
        while head < front_limit and head + tail < n and used + sizes[head] <= room:
            used += sizes[head]
            head += 1
        cut: str | None = None
        if tail < back_limit and head + tail < n and room - used >= MIN_PARTIAL_BYTES:
            cut = _cut_line(items[n - 1 - tail], room - used, self.line)
        shown_tail = tail + (cut is not None)
        gap = ledger.gap(head, shown_tail)
        middle = (_omission(*gap, self.session) if gap is not None else "") + (cut or "")
        text = self.heading + "".join(self.lines[:head]) + middle + "".join(self.lines[n - tail :])
        size = self.heading_size + used + utf8_size(middle) + 1
        return self._section(budget, text + "\n", size, head, shown_tail, cut is not None, gap)

    def _section(
        self,
        budget: int,
        text: str,
        size: int,
        head: int,
        tail: int,
        truncated: bool,
        gap: tuple[int, str, str] | None,
    ) -> Section:
        spec = self.spec
        omitted, first, last = gap if gap is not None else (0, None, None)
        return Section(spec.name, spec.title, budget, text, size, self.ledger.total, head, tail,
                       omitted, truncated, first, last)

    def addresses(self, section: Section) -> list[str]:
        """The addresses ``section`` names, with repeats (and ``""``): its shown items' and
        the bounds of its gap."""
        items = self.items
        shown = items[: section.head] + items[len(items) - section.tail :]
        found = [address for item in shown for address in (item.first, item.last)]
        if section.omitted:
            found += (section.omitted_first or "", section.omitted_last or "")
        return found


# --- the summary ---------------------------------------------------------------------


def _status_ledger(state: CumulativeState, live: LiveRange) -> Ledger:
    items: list[Item] = []
    for item in state.status:
        label = "last user request" if item.key == "user" else "last assistant reply"
        items.append(Item(item.first, item.last, f'{label}: "{item.text}"'))
    coverage, counts = state.coverage, state.counts
    if coverage.first and coverage.last:
        outstanding = state.ledgers["errors"].total
        items.append(
            Item(
                coverage.first,
                coverage.last,
                f"summarized so far: {coverage.entries} entries, {counts.get('turns', 0)} turns, "
                f"{counts.get('operations', 0)} Fabric operations "
                f"({counts.get('failedOperations', 0)} not succeeded), "
                f"{counts.get('resolvedErrors', 0)} errors resolved later, "
                f"{outstanding} outstanding",
            )
        )
    if live.first and live.last:
        items.append(Item(live.first, live.last, f"this compaction added {live.entries} entries"))
    if live.first_kept_entry_id:
        kept = live.first_kept_entry_id
        items.append(Item(kept, kept, "the live context continues verbatim from this entry"))
    else:
        items.append(Item("", "", "nothing before this compaction is kept verbatim"))
    return Ledger(tuple(items))


def _allocate(needs: dict[str, int], room: int) -> dict[str, int]:
    budget = {spec.name: min(needs[spec.name], spec.budget) for spec in SECTIONS}
    spare = room - sum(budget.values())
    for name in reversed(SPARE_ORDER):
        if spare >= 0:
            break
        give = min(budget[name], -spare)
        budget[name] -= give
        spare += give
    for name in SPARE_ORDER:
        extra = min(max(needs[name] - budget[name], 0), spare)
        budget[name] += extra
        spare -= extra
    return budget


def render_summary(
    state: CumulativeState, live: LiveRange, *, session_id: str | None, plain: bool
) -> Rendered:
    """The summary of ``state`` within :data:`SUMMARY_MAX_BYTES` (``plain``: every address
    the state holds is plain, :func:`~.text.plain_ids`, and is shown as it is; otherwise each
    is shown as :func:`~.text.shown_id` shows it)."""
    session = shown_id(session_id) if session_id else UNKNOWN_SESSION
    title = "# Compacted session context (fabric-memory)\n\n"
    footer = _footer(state, live, session, plain)
    ledgers: dict[str, Ledger] = {name: state.ledgers[name] for name in LEDGERS}
    ledgers["status"] = _status_ledger(state, live)
    layouts = [
        _Layout(spec, ledgers[spec.name], session, plain)
        for spec in SECTIONS
        if ledgers[spec.name].total
    ]
    needs = dict.fromkeys(ledgers, 0) | {layout.spec.name: layout.need for layout in layouts}
    frame = utf8_size(title) + utf8_size(footer)
    budgets = _allocate(needs, SUMMARY_MAX_BYTES - frame)
    while True:
        sections = [layout.within(budgets[layout.spec.name]) for layout in layouts]
        size = frame + sum(section.size for section in sections)
        excess = size - SUMMARY_MAX_BYTES
        # Sections keep to their budgets; should one overshoot, the biggest one pays.
        if excess <= 0 or max(budgets.values()) <= excess:
            break
        budgets[max(budgets, key=lambda name: budgets[name])] -= excess
    summary = title + "".join(section.text for section in sections) + footer
    if size > SUMMARY_MAX_BYTES:
        summary = bounded(summary, SUMMARY_MAX_BYTES)
        size = utf8_size(summary)
    named = zip(layouts, sections, strict=True)
    addresses = dict.fromkeys([a for layout, section in named for a in layout.addresses(section)])
    for bound in (state.coverage.first, state.coverage.last, live.first, live.last):
        if bound:
            addresses[bound] = None
    addresses.pop("", None)
    return Rendered(summary, size, tuple(sections), tuple(addresses))


def _footer(state: CumulativeState, live: LiveRange, session: str, plain: bool) -> str:
    coverage = state.coverage
    shown = (lambda address: address) if plain else shown_id
    if coverage.first and coverage.last:
        source = (
            f"Source: session {session}, entries [{shown(coverage.first)}] ... "
            f"[{shown(coverage.last)}] "
            f"({coverage.entries} entries, cumulative over every compaction)"
        )
    else:
        source = f"Source: session {session}, no entries summarized"
    if live.first and live.last:
        source += f"; this compaction added [{shown(live.first)}] ... [{shown(live.last)}]"
    return (
        f"---\n{source}.\n"
        f"Each [address] is exact: `fabric-memory expand {session} --address <address>` returns "
        f"the verbatim entry or operation; search everything with "
        f'`fabric-memory recall "<words>" --session {session}`.\n'
    )
