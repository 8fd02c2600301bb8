"""The head of a ranking, read: each entry scored by its best passage, near-identical tool
outputs folded into one hit.

The index orders a text query's hits by BM25 over whole entries. The first :data:`HEAD`
are then read and earn, on top of it, the bonus of the query words they hold and of the
pairs of the question's words standing together. Only the words of an entry's best
passage (the 500-character window the snippet generator picks) earn their bonus whole;
its other words count in proportion to how much of it that passage is, so a 40 KB paste
holding many of a question's words, each far from the others, no longer outranks the
short entry that answers. The same command run many times (a build, a test suite)
leaves outputs that differ only in timings, sizes and hashes: in one session, they fold
into the best-ranked of them, which names the others. Weighing only the head keeps a
long question cheap: its words' and pairs' bonuses over every document holding one of
them cost two thirds of the search. Plain data in, plain data out; the index layer reads
the documents (docs/memory-index.md#plain-questions).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..words import positioned, words

HEAD = 20
"""Hits of a text query read and rescored before the page is cut; the rest keep the index's
order after them."""
PASSAGE_CHARS = 500
"""A passage: the best window of an entry this long (an entry no longer is its own)."""
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


def weigh(text: str, names: frozenset[str],
          pairs: Sequence[Pair]) -> tuple[frozenset[str], float]:
    """Which of ``names`` a passage holds, and the bonus of the ``pairs`` it holds as near as
    the index's sloppy phrase finds them: at most their gap of words between, in order (or
    swapped, which costs two)."""
    wanted = names.union(*((pair.first, pair.second) for pair in pairs))
    found: dict[str, list[int]] = {}
    for at, word in positioned(text):
        if word in wanted:
            found.setdefault(word, []).append(at)
    near = sum(pair.weight for pair in pairs if any(
        later != at and abs(later - at - 1) <= pair.gap for at in found.get(pair.first, ())
        for later in found.get(pair.second, ())))
    return names & found.keys(), near


@dataclass(frozen=True, slots=True)
class Candidate:
    """One hit of the head, as read."""

    part: int
    """0: it holds every word of the query; 1: some (part 0 comes first)."""
    value: float
    """Its score: BM25 and what the head earned (:func:`held_bonus`, :func:`weigh`)."""
    text: str
    session: str = ""
    role: str | None = None
    tool: str | None = None


def held_bonus(length: int, held: float, inside: frozenset[str],
               bonus: Mapping[str, float]) -> float:
    """What the words a ``length``-character entry holds earn it: ``held`` is the bonus of
    every query word it holds, ``inside`` those of its best passage; the words outside it
    count by the share of the entry the passage is."""
    earned = sum(bonus.get(word, 0.0) for word in inside)
    return earned + max(held - earned, 0.0) * min(PASSAGE_CHARS / length, 1.0)


def fold(candidates: Sequence[Candidate]) -> list[tuple[int, list[int]]]:
    """The candidates in rank order (part, then value, ties in the given order), each output
    near-identical to a better one of the same session folded into it: ``(index, the
    indexes folded into it)``."""
    order = sorted(range(len(candidates)),
                   key=lambda at: (candidates[at].part, -candidates[at].value))
    groups = Counter(_group(candidate) for candidate in candidates)
    kept: list[tuple[int, list[int]]] = []
    shapes: dict[int, frozenset[str]] = {}  # (only outputs that have a possible twin)
    for at in order:
        group = _group(candidates[at])
        if group is not None and groups[group] > 1:
            shape = shapes[at] = _shape(candidates[at].text)
            twin = next((folded for first, folded in kept if first in shapes and _alike(
                candidates[first], candidates[at], shapes[first], shape)), None)
            if twin is not None:
                twin.append(at)
                continue
        kept.append((at, []))
    return kept


def _group(candidate: Candidate) -> tuple[str, str, str | None] | None:
    """Outputs fold only within their group: one tool's outputs in one session."""
    if candidate.role not in OUTPUT_ROLES:
        return None
    return (candidate.session, candidate.role or "", candidate.tool)


def _shape(text: str) -> frozenset[str]:
    """The words of an output's start that do not change from run to run (no digits)."""
    return frozenset(word for word in words(text[:SHAPE_CHARS]) if word.isalpha())


def _alike(first: Candidate, second: Candidate, shape: frozenset[str],
           other: frozenset[str]) -> bool:
    if _group(first) != _group(second):
        return False
    if not shape and not other:
        return first.text == second.text
    return len(shape & other) >= SAME_SHARE * len(shape | other)
