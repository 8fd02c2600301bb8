"""Numeric limits of a request, one rule for every door (CLI, MCP, Pi tools).

A count above its maximum is clamped to it, and the answer says so under ``clamped``
(``{"maxChars": [100000, 24000]}``: asked, used), so a model that asks for too much gets
the most allowed instead of a lost call. Below the minimum, or not a whole number, it is a
usage error.
"""

from __future__ import annotations

from ..errors import UsageError, clipped

Clamped = dict[str, list[int]]
"""Request key → [asked, used], for each value that was clamped."""
LARGEST = 2**63 - 1
"""The largest value clamped: beyond it a number is no count a caller means (and the note
could not carry it as a JSON integer), so it is refused like one below the minimum."""


def bounded(value: object, key: str, option: str, low: int, high: int, clamped: Clamped) -> int:
    """``value`` within ``low..high``: clamped (noted in ``clamped`` under ``key``) above
    ``high``; a :class:`UsageError` naming ``option`` below ``low``, above :data:`LARGEST`
    or when not an integer."""
    if type(value) is not int:  # bool is an int to Python, never a count to a caller
        raise UsageError(f"{option} {clipped(str(value))}: must be a whole number between {low} "
                         f"and {high}")
    if not low <= value <= LARGEST:
        raise UsageError(f"{option} {value}: must be between {low} and {high}")
    if value > high:
        clamped[key] = [value, high]
        return high
    return value
