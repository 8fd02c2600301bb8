"""limits: one rule for every door's numeric limits: clamp above, refuse below or non-numbers."""

from __future__ import annotations

import pytest

from fabric_memory.errors import UsageError
from fabric_memory.memory.limits import Clamped, bounded


def test_above_the_maximum_is_clamped_and_noted() -> None:
    """A value above its maximum becomes the maximum, noted as [asked, used] under its key."""
    clamped: Clamped = {}
    assert bounded(100_000, "maxChars", "--max-chars", 1, 24_000, clamped) == 24_000
    assert bounded(24_000, "maxEntries", "--max-entries", 1, 24_000, clamped) == 24_000
    assert clamped == {"maxChars": [100_000, 24_000]}


@pytest.mark.parametrize("value", [0, -5, 2**63, "12", 2.5, True, None], ids=repr)
def test_below_the_minimum_or_not_an_integer_is_a_usage_error(value: object) -> None:
    """Below the minimum, beyond any 64-bit count, or not a whole number (a bool included) is
    one usage line that names the option and its range."""
    with pytest.raises(UsageError, match=r"^--limit .*: must be .*between 1 and 50$"):
        bounded(value, "limit", "--limit", 1, 50, {})
