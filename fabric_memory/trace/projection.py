"""The write-side argument projection: which call arguments and results a trace may keep."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, Final, cast

from .guard import describe, key_path
from .shapes import MAX_COMMAND_BYTES

_PATH: Final = "path"
_NUMBER: Final = "number"
_STRING: Final = "string"
_IDENTIFIER: Final = "identifier"
_COMMAND: Final = "command"

_LOCAL_TOOLS: Final[dict[str, dict[str, str]]] = {
    "read": {"path": _PATH, "offset": _NUMBER, "limit": _NUMBER},
    "grep": {"path": _PATH, "context": _NUMBER, "limit": _NUMBER},
    "find": {"path": _PATH, "limit": _NUMBER},
    "ls": {"path": _PATH, "limit": _NUMBER},
    "edit": {"path": _PATH},
    "write": {"path": _PATH},
    "bash": {"command": _COMMAND},
}
_ID_ONLY_AGENT_REFS: Final = (
    "agents.run",
    "agents.wait",
    "agents.status",
    "agents.stop",
    "agents.cleanup",
    "agents.ask",
    "agents.tell",
    "agents.steer",
    "agents.followUp",
    "agents.setSteeringMode",
    "agents.setFollowUpMode",
    "agents.compact",
    "agents.actorStatus",
    "agents.setModel",
    "agents.setThinking",
    "agents.setTools",
    "agents.setEvents",
    "agents.setDeliveryPolicy",
    "agents.clearMessages",
    "agents.setInstructions",
    "agents.messages",
    "agents.remove",
    "agents.import",
    "agents.export",
    "agents.log",
)
PROJECTIONS: Final[dict[str, dict[str, str]]] = {
    **{f"{host}.{tool}": keys for host in ("pi", "omp") for tool, keys in _LOCAL_TOOLS.items()},
    **{ref: {"id": _STRING} for ref in _ID_ONLY_AGENT_REFS},
    "mesh.publish": {"topic": _STRING, "to": _STRING},
    "mesh.read": {
        "topic": _STRING,
        "to": _STRING,
        "after": _NUMBER,
        "cursor": _NUMBER,
        "limit": _NUMBER,
    },
    "mesh.get": {"key": _STRING},
    "mesh.put": {"key": _STRING},
    "mesh.delete": {"key": _STRING},
    "mesh.list": {"prefix": _STRING, "limit": _NUMBER},
    "fabric.discovery.providers": {},
    "fabric.discovery.models": {},
    "fabric.discovery.catalog": {"provider": _IDENTIFIER, "limit": _NUMBER},
    "fabric.discovery.list": {"provider": _IDENTIFIER, "namespace": _IDENTIFIER, "limit": _NUMBER},
    "fabric.discovery.search": {"limit": _NUMBER},
    "fabric.discovery.describe": {"ref": _IDENTIFIER},
    "fabric.workflow.configure": {"name": _STRING},
    "fabric.workflow.phase": {"name": _STRING, "id": _IDENTIFIER, "total": _NUMBER},
    "fabric.workflow.item": {
        "id": _IDENTIFIER,
        "status": _IDENTIFIER,
        "phase": _IDENTIFIER,
        "kind": _IDENTIFIER,
        "total": _NUMBER,
        "completed": _NUMBER,
    },
    "fabric.workflow.event": {"level": _IDENTIFIER},
    "fabric.workflow.progress": {},
    "fabric.workflow.parallel": {"kind": _IDENTIFIER, "itemCount": _NUMBER, "concurrency": _NUMBER},
    "fabric.workflow.pipeline": {"kind": _IDENTIFIER, "itemCount": _NUMBER, "stageCount": _NUMBER},
}
"""Which argument keys a trace keeps, by exact ref, and what each must be.

Every ref not listed (memory, state, schema, compact, MCP, extension, unknown) keeps none.
"""

_IDENTIFIER_SHAPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9\-./:_]*\Z")
_WINDOWS_DRIVE = re.compile(r"[A-Za-z]:[\\/]")
_URL_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
_URL_IGNORED = re.compile("[\t\n\r]")


def _local_path(value: object) -> str | None:
    """A plain local path without ``?query``/``#fragment``; None for URLs and non-paths."""
    if type(value) is not str or "\0" in value:
        return None
    text = value
    if not _WINDOWS_DRIVE.match(text):
        # As a WHATWG URL parser reads it: a scheme makes it a URL; two leading
        # slashes (either way) make it a network path with a host. Neither is local.
        probe = _URL_IGNORED.sub("", text).strip("".join(map(chr, range(0x21))))
        if _URL_SCHEME.match(probe) or probe[:2].replace("\\", "/") == "//":
            return None
    end = len(text)
    for mark in ("?", "#"):
        found = text.find(mark)
        if 0 <= found < end:
            end = found
    return text[:end] or None


def _finite_number(value: object) -> int | float | None:
    if type(value) is int or (type(value) is float and math.isfinite(value)):
        return value
    return None


def _bounded_command(value: object) -> str | None:
    if type(value) is not str:
        return None
    text = value
    if len(text) * 4 <= MAX_COMMAND_BYTES or len(_utf8(text)) <= MAX_COMMAND_BYTES:
        return text
    suffix = "…[truncated]"
    budget = MAX_COMMAND_BYTES - len(_utf8(suffix))
    head = _utf8(text)[:budget].decode("utf-8", "ignore")
    return head + suffix


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _project_value(shape: str, value: object) -> object | None:
    if shape == _PATH:
        return _local_path(value)
    if shape == _NUMBER:
        return _finite_number(value)
    if shape == _IDENTIFIER:
        if type(value) is str and _IDENTIFIER_SHAPE.match(value):
            return value
        return None
    if shape == _COMMAND:
        return _bounded_command(value)
    return value if type(value) is str else None


def project_args(ref: str, args: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments a trace may keep for a call of ``ref`` (docs/trace.md#projection).

    Exact refs only (``*`` is ``pi`` or ``omp``); unlisted refs keep nothing. Paths
    stay only when plain and local, minus any ``?query``/``#fragment``; numeric
    fields stay only as finite non-boolean numbers.
    """
    shapes = PROJECTIONS.get(ref) if type(ref) is str else None
    if not shapes or not isinstance(args, Mapping):
        return {}
    projected: dict[str, Any] = {}
    for key, shape in shapes.items():
        if key in args:
            value = _project_value(shape, args[key])
            if value is not None:
                projected[key] = value
    return projected


def project_result(ref: str, result: object) -> dict[str, Any] | None:
    """The result a trace may keep: only ``{"created": true}`` from ``pi.write``/``omp.write``."""
    if ref not in ("pi.write", "omp.write") or type(result) is not dict:
        return None
    record = cast(dict[str, Any], result)
    nested = record.get("details")
    if record.get("created") is True or (type(nested) is dict and nested.get("created") is True):
        return {"created": True}
    return None


_SHAPE_RULES: Final = {
    _PATH: "not a plain local path",
    _NUMBER: "not a finite number",
    _STRING: "not a string",
    _IDENTIFIER: "not identifier-shaped",
    _COMMAND: "not a string",
}


def projection_violations(ref: str, args: Mapping[str, Any]) -> list[str]:
    """Which persisted argument keys of a ``ref`` call break the projection rules.

    Each entry names the key and the rule (``"content: not kept for pi.write"``,
    ``"path: keeps a query or fragment"``), never the offending value.
    """
    if not isinstance(args, Mapping):
        return [f"args: not an object (projection of {ref})"]
    shapes = PROJECTIONS.get(ref, {}) if type(ref) is str else {}
    violations: list[str] = []
    for key, value in args.items():
        name = key_path(key) if type(key) is str else describe(key)
        shape = shapes.get(key) if type(key) is str else None
        if shape is None:
            violations.append(f"{name}: not kept for {ref}")
            continue
        projected = _project_value(shape, value)
        if projected is None:
            violations.append(f"{name}: {_SHAPE_RULES[shape]}")
        elif projected != value:
            rule = "keeps a query or fragment" if shape == _PATH else "exceeds the command bound"
            violations.append(f"{name}: {rule}")
    return violations
