"""The head of a ranking, read: each entry scored by its best passage, near-identical tool
outputs folded into one hit.

The index ranks a whole entry: a 40 KB paste holding many of a question's words, each far
from the others, earns the held-word bonus for every one of them and outranks the short
entry that answers. So the first :data:`HEAD` hits are read and each entry keeps the bonus
of the words in its best passage (what its snippet shows) whole, and of its other words only
in proportion to how much of it that passage is. The same command run many times (a build,
a test suite) leaves outputs that differ only in timings, sizes and hashes: in one session,
they fold into the best-ranked of them, which names the others. Plain data in, plain data out;
the index layer reads the documents (docs/memory-index.md#recall).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..words import positioned, words

HEAD = 20
"""Hits of a text query read and rescored before the page is cut; the rest keep the index's
order after them."""
PASSAGE_CHARS = 500
"""A passage: the best window of an entry this long (an entry no longer is its own)."""
SHORT_CHARS = 300
"""An entry this short is weighed here, from its words (held words, pairs standing
together); a longer one by a search of the index over the head's long entries (reading
their words here would cost more)."""
SHAPE_CHARS = 2000
"""What of each output is compared to find near-identical ones (its start)."""
SAME_SHARE = 0.8
"""Two outputs of the same tool are near-identical when this share of their words (all
words without a digit, of their first :data:`SHAPE_CHARS` characters) is common to both."""
OUTPUT_ROLES = frozenset(("toolResult", "bashExecution"))
"""Entries that are a command's or tool's output: only these fold (two user messages alike
are still two things the user said)."""


@dataclass(frozen=True, slots=True)
class Pair:
    """Two neighbouring words of a question, and what finding them as near adds."""

    first: str
    second: str
    gap: int
    """Words the question has between them: the most allowed between them in a text."""
    weight: float


def weigh(text: str, names: frozenset[str], pairs: Sequence[Pair]) -> tuple[int, float]:
    """How many of ``names`` a short ``text`` holds, and the bonus of the ``pairs`` it holds
    in order with at most their gap between (as the index's sloppy phrase finds them)."""
    wanted = names.union(*((pair.first, pair.second) for pair in pairs))
    found: dict[str, list[int]] = {}
    for at, word in positioned(text):
        if word in wanted:
            found.setdefault(word, []).append(at)
    bonus = sum(pair.weight for pair in pairs if any(
        0 < later - at <= pair.gap + 1 for at in found.get(pair.first, ())
        for later in found.get(pair.second, ())))
    return len(names & found.keys()), bonus


@dataclass(frozen=True, slots=True)
class Candidate:
    """One hit of the head, as read."""

    part: int
    """0: it holds every word of the query; 1: some (part 0 comes first)."""
    value: float
    """Its score (rescored: see :func:`passage_discount`)."""
    text: str
    session: str = ""
    role: str | None = None
    tool: str | None = None


def passage_discount(length: int, held: float, passage: str,
                     weights: Mapping[str, float]) -> float:
    """How much of the held-word bonus a ``length``-character entry did not earn: ``held``
    is the bonus of every query word it holds, ``passage`` its best window; the words held
    outside it count by the share of the entry the passage is."""
    if length <= PASSAGE_CHARS or not weights:
        return 0.0
    inside = sum(weights.get(word, 0.0) for word in set(words(passage)))
    return max(held - inside, 0.0) * (1.0 - PASSAGE_CHARS / length)


def fold(candidates: Sequence[Candidate]) -> list[tuple[int, list[int]]]:
    """The candidates in rank order (part, then value, ties in the given order), each output
    near-identical to a better one of the same session folded into it: ``(index, the
    indexes folded into it)``."""
    order = sorted(range(len(candidates)),
                   key=lambda at: (candidates[at].part, -candidates[at].value))
    kept: list[tuple[int, list[int]]] = []
    shapes: dict[int, frozenset[str]] = {}
    for at in order:
        candidate = candidates[at]
        if candidate.role in OUTPUT_ROLES:
            shape = shapes[at] = _shape(candidate.text)
            twin = next((folded for first, folded in kept if _alike(
                candidates[first], candidate, shapes.get(first), shape)), None)
            if twin is not None:
                twin.append(at)
                continue
        kept.append((at, []))
    return kept


def _shape(text: str) -> frozenset[str]:
    """The words of an output's start that do not change from run to run (no digits)."""
    return frozenset(word for word in words(text[:SHAPE_CHARS]) if word.isalpha())


def _alike(first: Candidate, second: Candidate, shape: frozenset[str] | None,
           other: frozenset[str]) -> bool:
    if shape is None or (first.session, first.role, first.tool) != (
            second.session, second.role, second.tool):
        return False
    if not shape and not other:
        return first.text == second.text
    return len(shape & other) >= SAME_SHARE * len(shape | other)
