"""What a host's command hook reads on stdin: one JSON object (Claude Code's and Codex's
hook input), checked at its root; each hook then reads its own event's fields."""

from __future__ import annotations

from typing import Any

import orjson

from .errors import HandoffError


def read_hook_object(data: bytes) -> dict[str, Any]:
    """The hook input as a JSON object; :class:`~fabric_memory.errors.HandoffError` when it
    is not JSON or not an object."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise HandoffError(f"stdin: not JSON ({str(exc).split(':', 1)[0]})") from None
    if type(value) is not dict:
        raise HandoffError(f"stdin: expected a JSON object, got {type(value).__name__}")
    return value
