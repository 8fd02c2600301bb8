"""One error tree for the whole engine.

Every message is one line that names where the problem is (``file:line``, a JSON
path, an address) and, when there is one, the fix. The library raises these; the
CLI catches :class:`FabricMemoryError` once and exits non-zero.
"""

from __future__ import annotations

import math
from typing import ClassVar

import orjson

SHOWN_CHARS = 60
"""How much of a bad value an error message echoes."""


def clipped(value: object, limit: int = SHOWN_CHARS) -> str:
    """A bad value as an error message shows it, in the one dialect every message uses: a
    JSON scalar as JSON (``"text"``, ``12``, ``true``, ``null``), a container by its kind
    (``an array of 3``, ``an object with 2 keys``: never its contents), anything else by its
    type. Cut to ``limit`` characters with the full length named, so a message stays one
    short line whatever was sent (a 100 KB string, a huge integer)."""
    if isinstance(value, list | tuple):
        return f"an array of {len(value)}"
    if isinstance(value, dict):
        return f"an object with {len(value)} key{'s' if len(value) != 1 else ''}"
    if isinstance(value, float) and not math.isfinite(value):
        text = "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    elif value is None or isinstance(value, bool | int | float | str):
        try:
            text = orjson.dumps(value).decode()
        except orjson.JSONEncodeError:  # a lone surrogate, an int past 64 bits, NaN
            text = _fallback(value)
    else:
        text = f"a Python {type(value).__name__}"
    if len(text) <= limit:
        return text
    return f"{text[: limit - 1]}… ({len(text)} characters)"


def _fallback(value: object) -> str:
    if isinstance(value, str):
        return '"' + value.encode("utf-8", "backslashreplace").decode() + '"'
    try:
        return str(value)  # an integer past 64 bits
    except ValueError:  # an integer past str's digit cap
        return f"a {value.bit_length() if isinstance(value, int) else 0}-bit integer"


def is_utf8(text: str) -> bool:
    """False for a file name that was not UTF-8 (Python keeps its bytes as lone surrogates)."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def printable(text: str) -> str:
    """``text`` as valid UTF-8: a name's undecodable bytes shown as ``\\xNN``."""
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate that no file name decodes to
        raw = text.encode("utf-8", "backslashreplace")
    return raw.decode("utf-8", "backslashreplace")


class FabricMemoryError(Exception):
    """Base class of every error the engine raises on purpose."""

    code: str = "error"
    exit_status: int = 1

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else self.code

    def to_json(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


class UsageError(FabricMemoryError):
    """The caller asked for something malformed (bad option values, too many selectors)."""

    code = "usage"
    exit_status = 2


class MissingExtraError(FabricMemoryError):
    """A feature needs an optional dependency that is not installed (the message says
    which ``pip install`` adds it)."""

    code = "missing_extra"


class LocationRefusedError(UsageError):
    """A request names a sessions root or index other than the server's own."""

    code = "location_refused"


# --- session files -------------------------------------------------------------------


class SessionError(FabricMemoryError):
    """A session file could not be read; the message starts with ``file:line``."""

    code = "session_error"

    def __init__(self, path: str, line: int | None, reason: str, *, code: str | None = None):
        self.path = path
        self.line = line
        self.reason = reason
        where = f"{printable(path)}:{line}" if line is not None else printable(path)
        super().__init__(f"{where}: {reason}", code=code)


class NotASessionError(SessionError):
    """The file is not a Pi session (empty, binary, wrong or missing header)."""

    code = "not_a_session"


class LineTooLongError(SessionError):
    """A line exceeds the configured maximum line size; it was not read into memory."""

    code = "line_too_long"


class SessionChangedError(SessionError):
    """The file changed between reading it and writing to it (append refused)."""

    code = "session_changed"


# --- traces --------------------------------------------------------------------------


class TraceError(FabricMemoryError):
    """A trace or envelope handed to the writer is malformed; the message names the JSON path."""

    code = "invalid_trace"


# --- compaction ----------------------------------------------------------------------


class CompactionError(FabricMemoryError):
    """A compaction event or preparation is malformed."""

    code = "compaction_error"


class HandoffError(FabricMemoryError):
    """No handoff packet can be made (the hook then prints nothing and logs this)."""

    code = "handoff_error"


class HookInputError(CompactionError):
    """The stdio hook received input it cannot use."""

    code = "bad_event"
    exit_status = 2


# --- memory index --------------------------------------------------------------------


class MemoryIndexError(FabricMemoryError):
    """The on-disk memory index is missing, unusable or could not be written."""

    code = "index_error"


class IndexLockedError(MemoryIndexError):
    """Another writer holds the index lock past the wait timeout."""

    code = "index_locked"


class IndexBusyError(MemoryIndexError):
    """Another process held Tantivy's meta lock (``.tantivy-meta.lock``) past the wait: a
    query with no earlier commit to answer from, or a writer, gives up instead of waiting
    forever."""

    code = "index_busy"


class WatchError(MemoryIndexError):
    """The live index cannot watch (part of) a sessions root for now: an unreadable folder,
    a root removed or replaced. The watcher logs it and goes on."""

    code = "watch_error"


class ClusterError(FabricMemoryError):
    """A sharded build could not run on its cluster: the scheduler cannot be reached, or a
    shard's task failed past its retries. The index is left as the last build wrote it."""

    code = "cluster_error"


class QueryError(FabricMemoryError):
    """A recall query is malformed or exceeds its bounds (regex length/time)."""

    code = "bad_query"
    exit_status = 2


class ExpandError(FabricMemoryError):
    """An expand request failed with one of the codes in docs/errors.md#expand."""

    CODES = (
        "stale_pointer",
        "index_out_of_bounds",
        "session_not_found",
        "source_unavailable",
        "address_not_found",
        "ambiguous_address",
        "ambiguous_session",
        "text_offset_out_of_bounds",
        "session_forgotten",
    )
    # Distinct exit status per code so shell callers can branch without parsing JSON
    # (docs/errors.md#expand); written out so that adding a code never renumbers another.
    EXIT_STATUS: ClassVar[dict[str, int]] = {
        "stale_pointer": 10,
        "index_out_of_bounds": 11,
        "session_not_found": 12,
        "source_unavailable": 13,
        "address_not_found": 14,
        "ambiguous_address": 15,
        "ambiguous_session": 16,
        "text_offset_out_of_bounds": 17,
        "session_forgotten": 18,
    }

    def __init__(self, code: str, message: str) -> None:
        if code not in self.CODES:
            raise ValueError(f"unknown expand error code {clipped(code)}")
        super().__init__(message, code=code)
        self.exit_status = self.EXIT_STATUS[code]


# --- certification -------------------------------------------------------------------


class CertificationError(FabricMemoryError):
    """The certification harness could not run (not: a check failed)."""

    code = "certify_error"


class TaskPayloadError(CertificationError):
    """A ``CERT_TASK_V1`` payload is missing, malformed, or cannot be applied exactly."""

    code = "bad_task_payload"
