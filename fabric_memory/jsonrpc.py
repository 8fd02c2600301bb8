"""One JSON-RPC 2.0 message per line (the MCP stdio door): read a line within a bound, and
tell what a line the protocol library could not take gets back.

JSON-RPC promises a reply to every request: a line that is not JSON gets a Parse error
(-32700) with ``id: null``; a request that is JSON but not a request the library can
decode gets an error for its id when the id can be read (-32602 when only its params are
at fault, -32600 otherwise); a notification (no id) gets no reply, whatever is wrong with
it. Without this, such a line was dropped in silence and its client waited for ever.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import IO, Any

import orjson

from .arguments import MAX_JSON_BYTES, json_value, lone_surrogate

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
MAX_LINE_BYTES = MAX_JSON_BYTES
"""Longest request line read whole; a longer one is skipped to its end and refused (for the
id it starts with, when it starts with one)."""
REASON_CHARS = 500
_PREFIX_BYTES = 64 * 1024
_LEADING_ID = re.compile(
    rb'\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?\d{1,18}|"[^"\\]{0,256}")\s*[,}]'
)
"""The id of a request written the usual way (``{"jsonrpc": "2.0", "id": …``), read from
the start of a line too long to parse."""

RequestId = int | str | None


@dataclass(frozen=True, slots=True)
class Refusal:
    """What a line the library cannot take gets: an error reply for ``id``, or (``reply``
    false: a notification) nothing but a line in the log."""

    id: RequestId
    code: int
    message: str
    reply: bool = True

    def error(self) -> dict[str, Any]:
        """The JSON-RPC error response."""
        return {"jsonrpc": "2.0", "id": self.id,
                "error": {"code": self.code, "message": self.message}}


@dataclass(frozen=True, slots=True)
class Line:
    """One line read from the client: its bytes, or (``size`` past the bound) the first
    bytes of a line that was skipped."""

    data: bytes
    size: int

    @property
    def too_long(self) -> bool:
        return self.size > MAX_LINE_BYTES


def read_line(stream: IO[bytes]) -> Line | None:
    """The next line of ``stream`` (None at its end), never holding more than
    :data:`MAX_LINE_BYTES` of it."""
    data = stream.readline(MAX_LINE_BYTES + 1)
    if not data:
        return None
    size = len(data)
    if size <= MAX_LINE_BYTES or data.endswith(b"\n"):
        return Line(data, size)
    prefix = data[:_PREFIX_BYTES]
    del data
    while True:  # skip to the end of the line
        chunk = stream.readline(1024 * 1024)
        size += len(chunk)
        if not chunk or chunk.endswith(b"\n"):
            return Line(prefix, size)


def screen(line: Line) -> tuple[str | None, Any]:
    """``(text, message)`` of a line to hand to the protocol library: its text and its JSON
    value, or ``(None, None)`` for a blank line. Raises :class:`Refused` with what the line
    gets instead when it cannot be a message: too long, not JSON, a batch, not an object,
    a string holding a lone surrogate (``\\udc80``: not Unicode text)."""
    if line.too_long:
        match = _LEADING_ID.match(line.data)
        ident = orjson.loads(match.group(1)) if match else None
        raise Refused(Refusal(ident, INVALID_REQUEST,
                              f"Invalid Request: the line is {line.size:,} bytes; the limit is "
                              f"{MAX_LINE_BYTES:,}"))
    text = line.data.decode("utf-8", "replace").strip()
    if not text:
        return None, None
    try:
        message = json_value(text)
    except ValueError as exc:
        raise Refused(Refusal(None, PARSE_ERROR, f"Parse error: {exc}")) from None
    if isinstance(message, list):
        raise Refused(Refusal(None, INVALID_REQUEST, "Invalid Request: a batch (a JSON array) "
                              "is not supported; send one request object per line"))
    if not isinstance(message, dict):
        raise Refused(Refusal(None, INVALID_REQUEST,
                              "Invalid Request: a request is a JSON object"))
    where = lone_surrogate(message)
    if where is not None:
        raise Refused(refusal_for(message, f"{where} holds a lone surrogate (a \\ud800-\\udfff "
                                           "escape alone), which is not Unicode text"))
    if "id" in message and not _readable(message["id"]):
        # The SDK would take it for a notification (and answer nothing).
        raise Refused(Refusal(None, INVALID_REQUEST,
                              "Invalid Request: an id is a string or an integer"))
    return text, message


def _readable(ident: Any) -> bool:
    return (isinstance(ident, int | str) and not isinstance(ident, bool)
            and lone_surrogate(ident) is None)


def refusal_for(message: dict[str, Any], reason: str) -> Refusal:
    """The refusal of a JSON object the library could not decode, for its id when it can be
    read: Invalid params when the envelope is sound, Invalid Request otherwise; no reply
    for a notification."""
    ident = message.get("id")
    if "id" not in message and isinstance(message.get("method"), str):
        return Refusal(None, INVALID_REQUEST, f"notification: {reason}", reply=False)
    readable = _readable(ident)
    sound = (message.get("jsonrpc") == "2.0" and isinstance(message.get("method"), str)
             and readable and isinstance(message.get("params", {}), dict))
    code = INVALID_PARAMS if sound else INVALID_REQUEST
    label = "Invalid params" if sound else "Invalid Request"
    return Refusal(ident if readable else None, code, f"{label}: {reason[:REASON_CHARS]}")


class Refused(Exception):
    """A line that gets :attr:`refusal` instead of reaching the protocol library."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.message)
        self.refusal = refusal
