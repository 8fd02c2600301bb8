"""Reading Catui run traces (Run Trace V1) as strictly as Catui's own reader does.

Catui writes one trace per prompt to ``<workspace>/.catui/traces/<runId>.jsonl`` and a copy
of the newest to ``latest.jsonl``. Its ``readRunTraceJsonl`` accepts a file only whole: at
most 64 MiB, no line over 1 MiB, no empty line, every line JSON, every event a valid V1
envelope with a valid payload for its kind, one ``runId``, sequences ``1, 2, 3…`` with no
gap, no ``eventId`` twice, every ``parentEventId`` naming an event at or before it. Any
breach rejects the file: :func:`read_run_trace` raises a
:class:`~fabric_memory.errors.NotASessionError` (code ``invalid_run_trace``) that names
``file:line`` and the rule; reading a batch reports that file and goes on with the others.

One pass over the lines: where a file breaks several rules, the first broken line is the
one named (Catui reads every line before it checks the order, so it may name another).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson
import xxhash

from .._gc import no_cyclic_gc
from ..errors import LineTooLongError, NotASessionError, SessionError, clipped
from ..session import decode_line, iter_lines, open_regular

MAX_FILE_BYTES: Final = 64 * 1024 * 1024
MAX_LINE_BYTES: Final = 1024 * 1024
INVALID_TRACE: Final = "invalid_run_trace"
"""The error code of a rejected trace file."""


# Built for every line of every trace read and never changed afterwards; not ``frozen``,
# which would make building it several times slower (as for ``session.Entry``).
@dataclass(slots=True)
class TraceEvent:
    """One V1 event of a run trace, and where its line is."""

    event_id: str
    sequence: int
    timestamp: float
    """Epoch milliseconds, as Catui writes them."""
    run_id: str
    session_id: str | None
    turn_id: str | None
    parent_event_id: str | None
    kind: str
    payload: Mapping[str, Any]
    line: int
    offset: int
    length: int


@dataclass(frozen=True, slots=True)
class RunTrace:
    """A whole, valid run trace file."""

    path: str
    run_id: str
    events: tuple[TraceEvent, ...]
    source_hash: str
    size: int

    @property
    def session_ids(self) -> frozenset[str]:
        return frozenset(e.session_id for e in self.events if e.session_id is not None)


# --- payload rules (Catui's ``isValidPayload``, one row per kind) ---------------------


@dataclass(frozen=True, slots=True)
class _Field:
    """What one payload field must be."""

    test: Callable[[Any], bool]
    expected: str


def _text(value: Any) -> bool:
    return isinstance(value, str) and value != ""


def _count(minimum: int) -> _Field:
    def test(value: Any) -> bool:
        # JavaScript's Number.isInteger: 3.0 is an integer, true is not a number.
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        return (isinstance(value, int) or value.is_integer()) and value >= minimum
    return _Field(test, f"an integer of at least {minimum}")


def _one_of(*choices: str) -> _Field:
    return _Field(lambda value: isinstance(value, str) and value in choices,
                  "one of " + ", ".join(choices))


_TEXT = _Field(_text, "a non-empty string")
_POSITIVE = _count(1)
_OUTCOME = _one_of("success", "error", "denied", "paused", "skipped")
_PAYLOADS: Final[dict[str, tuple[tuple[str, _Field], ...]]] = {
    "run.started": (("loopFramework", _one_of("standard", "weak-model-compatible")),
                    ("inputFingerprint", _TEXT)),
    "run.completed": (("stopReason", _TEXT), ("turnCount", _count(0)),
                      ("toolCallCount", _count(0)), ("outputFingerprint", _TEXT)),
    "turn.started": (("turn", _POSITIVE),),
    "turn.completed": (("turn", _POSITIVE), ("stopReason", _TEXT), ("outputFingerprint", _TEXT)),
    "model.requested": (("turn", _POSITIVE), ("requestFingerprint", _TEXT)),
    "model.responded": (("turn", _POSITIVE), ("stopReason", _TEXT), ("responseFingerprint", _TEXT)),
    "model.failed": (("turn", _POSITIVE), ("errorSubtype", _TEXT), ("errorFingerprint", _TEXT)),
    "policy.decided": (("toolCallId", _TEXT), ("policyId", _TEXT),
                       ("decision", _one_of("allow", "deny", "pause")),
                       ("inputFingerprint", _TEXT)),
    "tool.requested": (("toolCallId", _TEXT), ("toolName", _TEXT), ("inputFingerprint", _TEXT)),
    "tool.started": (("toolCallId", _TEXT), ("toolName", _TEXT)),
    "tool.completed": (("toolCallId", _TEXT), ("toolName", _TEXT), ("outcome", _OUTCOME),
                       ("outputFingerprint", _TEXT)),
    "checkpoint.created": (("checkpointId", _TEXT), ("policyId", _TEXT), ("toolCallId", _TEXT)),
    "checkpoint.resolved": (("checkpointId", _TEXT),
                            ("resolution", _one_of("approved", "denied", "unavailable"))),
    "progress.observed": (("fingerprint", _TEXT), ("repeatCount", _count(1)),
                          ("outcome", _OUTCOME)),
    "transition.applied": (("reason", _TEXT), ("transitionFingerprint", _TEXT)),
}
KINDS: Final = frozenset(_PAYLOADS)


# --- reading ---------------------------------------------------------------------------


def read_run_trace(path: str | os.PathLike[str]) -> RunTrace:
    """Read one trace file whole; raise :class:`NotASessionError` (code ``invalid_run_trace``)
    naming ``file:line`` and the rule it breaks (:class:`SessionError` when it cannot be read
    at all)."""
    name = os.fspath(path)
    digest = xxhash.xxh3_128()
    try:
        with no_cyclic_gc(), os.fdopen(open_regular(name), "rb") as stream:
            size = os.fstat(stream.fileno()).st_size
            if size > MAX_FILE_BYTES:
                raise _rejected(name, None, f"run trace file is {size} bytes, over Catui's "
                                            f"limit of {MAX_FILE_BYTES} (64 MiB)")
            events, size = _events(name, iter_lines(stream, name, MAX_LINE_BYTES, digest))
    except LineTooLongError as exc:
        raise _rejected(name, exc.line, f"run trace line over Catui's limit of "
                                        f"{MAX_LINE_BYTES} bytes (1 MiB)") from None
    except OSError as exc:
        raise SessionError(name, None, f"cannot read file: {exc.strerror or exc}") from exc
    if not events:
        raise _rejected(name, None, "run trace holds no event")
    return RunTrace(name, events[0].run_id, tuple(events), digest.hexdigest(), size)


def _events(
    path: str, lines: Iterator[tuple[int, int, bytes, bool]]
) -> tuple[list[TraceEvent], int]:
    events: list[TraceEvent] = []
    seen: set[str] = set()
    size = 0
    for number, offset, data, ended in lines:
        size = offset + len(data) + (1 if ended else 0)
        if not data.strip():
            raise _rejected(path, number, "empty line in a run trace")
        try:
            value = decode_line(data)
        except orjson.JSONDecodeError as exc:
            raise _rejected(path, number, f"invalid JSON ({str(exc).split(':', 1)[0]})") from None
        event = _event(path, number, offset, len(data), value)
        _check_order(path, event, events, seen)
        events.append(event)
    return events, size


def _event(path: str, line: int, offset: int, length: int, value: Any) -> TraceEvent:
    """Catui's ``parseRunTraceEvent``: the envelope, then the payload of its kind."""
    def fail(reason: str) -> SessionError:
        return _rejected(path, line, reason)

    if not isinstance(value, dict):
        raise fail("run trace event is not a JSON object")
    version = value.get("version")
    if isinstance(version, bool) or version != 1:
        raise fail(f"unsupported run trace version {clipped(version)} (this reader knows 1)")
    for key in ("eventId", "runId"):
        if not _text(value.get(key)):
            raise fail(f"{key}: expected a non-empty string, got {clipped(value.get(key))}")
    sequence: Any = value.get("sequence")
    if not _POSITIVE.test(sequence):
        raise fail(f"sequence: expected {_POSITIVE.expected}, got {clipped(sequence)}")
    timestamp = value.get("timestamp")
    if isinstance(timestamp, bool) or not isinstance(timestamp, int | float) or (
        isinstance(timestamp, float) and not math.isfinite(timestamp)
    ):
        raise fail(f"timestamp: expected a finite number, got {clipped(timestamp)}")
    for key in ("sessionId", "turnId", "parentEventId"):
        if key in value and not _text(value[key]):
            raise fail(f"{key}: expected a non-empty string, got {clipped(value[key])}")
    kind = value.get("kind")
    if not isinstance(kind, str) or kind not in KINDS:
        raise fail(f"unsupported run trace kind {clipped(kind)}")
    payload = value.get("payload")
    if not isinstance(payload, dict):
        raise fail(f"payload of {kind}: expected an object, got {clipped(payload)}")
    for key, rule in _PAYLOADS[kind]:
        if not rule.test(payload.get(key)):
            raise fail(f"payload.{key} of {kind}: expected {rule.expected}, "
                       f"got {clipped(payload.get(key)) if key in payload else 'nothing'}")
    return TraceEvent(value["eventId"], int(sequence), float(timestamp), value["runId"],
                      value.get("sessionId"), value.get("turnId"), value.get("parentEventId"),
                      kind, payload, line, offset, length)


def _check_order(path: str, event: TraceEvent, before: list[TraceEvent], seen: set[str]) -> None:
    """Catui's ``validateRunTrace``. As there, an event's own id counts as earlier for its
    ``parentEventId`` (it is added to the known ids before the parent is looked up)."""
    if before and event.run_id != before[0].run_id:
        raise _rejected(path, event.line, f"runId {clipped(event.run_id)} differs from the "
                                          f"trace's {clipped(before[0].run_id)} (line "
                                          f"{before[0].line})")
    if event.sequence != len(before) + 1:
        raise _rejected(path, event.line, f"sequence {event.sequence} where {len(before) + 1} "
                                          "was due: a gap")
    if event.event_id in seen:
        raise _rejected(path, event.line, f"duplicate eventId {clipped(event.event_id)}")
    seen.add(event.event_id)
    if event.parent_event_id is not None and event.parent_event_id not in seen:
        raise _rejected(path, event.line, f"parentEventId {clipped(event.parent_event_id)} "
                                          "names no earlier event")


def _rejected(path: str, line: int | None, reason: str) -> NotASessionError:
    return NotASessionError(path, line, reason, code=INVALID_TRACE)
