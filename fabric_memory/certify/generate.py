"""Seeded synthetic Pi v3 sessions for certification, tests and benchmarks.

Everything comes from ``random.Random`` instances the caller seeds: no wall clock
and no global random state, so a seed always yields the same bytes, and file
mtimes are set from the sessions' own timestamps. Fabric results are written the
way Fabric writes them: operation arguments through the write-side projection
(:func:`fabric_memory.trace.project_args`), details through the envelope writer
(:func:`fabric_memory.trace.create_fabric_persisted_execution_details`). The
verbatim audits beside each trace carry secrets and decoy paths that no consumer
may index or report; the manifest lists them.

Manifests record what was written, as it was written; nothing is re-parsed.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import orjson
import xxhash

from .._js import iso_time
from ..errors import UsageError
from ..trace import create_fabric_persisted_execution_details, project_args, project_result

TraceFlavour = Literal["pi", "omp"]
Outcome = Literal["succeeded", "failed", "aborted", "timed_out"]

EPOCH_MS = 1_767_258_000_000
"""2026-01-01T09:00:00.000Z: the first session's start; later ones follow it."""
DAY_MS = 86_400_000
RICH_TARGET_BYTES = 330 * 1024
DEFAULT_SEED = 991

TRACE_KINDS: dict[str, str] = {"pi": "pi-fabric.execution", "omp": "omp-fabric.execution"}
FAILURE_STAGES = ("resolve", "prepare", "validate", "approve", "invoke", "guard")
RESERVED_GREP: tuple[str, Outcome] = ("omp.grep", "failed")
"""Only the planted cold operation has this (ref, outcome): selecting it is exact."""

PROJECTS = ("/home/dev/proj-alpha", "/home/dev/beta-service", "/home/dev/monorepo",
            "/srv/work/zürich-tools")
WORDS = ("alpha", "bravo", "cobalt", "delta", "ember", "garnet", "harbor", "juniper", "kestrel",
         "magnet", "nectar", "pylon", "quartz", "saffron", "tundra", "umber", "willow", "xenon",
         "zephyr")
UNICODE_WORDS = ("Größe", "Ångström", "naïveté", "東京タワー", "Привет", "Αθήνα", "façade",
                 "smörgåsbord", "Zürichsee", "京都")
FILES = ("src/parser.ts", "src/lexer.ts", "src/net/client.ts", "src/db/schema.sql", "README.md",
         "package.json", "tests/parser.test.ts", "src/cli/main.ts", "src/ast/nodes.ts")
DIRS = (".", "src", "tests", "src/net", "docs")
COMMANDS = ("git status --short", "npm run build", "pnpm test -- --run",
            "pytest -q tests/test_parser.py", "cargo check", "git diff --stat")
PHASES = ("Plan", "Implement", "Verify", "Review")
THINKING_LEVELS = ("off", "minimal", "low", "medium", "high")
_ID_CHARS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_CALL_ERRORS: dict[str, str] = {"timed_out": "Call timed out", "aborted": "Call aborted"}
_RUN_ERRORS: dict[str, str] = {
    "failed": "Execution failed", "timed_out": "Execution timed out", "aborted": "Execution aborted"
}


# --- records -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OperationSpec:
    """One Fabric call as the guest issued it: raw arguments, before projection."""

    ref: str
    args: dict[str, Any]
    outcome: Outcome = "succeeded"
    failure_stage: str | None = None
    created: bool = False
    """A succeeded ``*.write`` that created its file keeps ``result: {created: true}``."""
    secrets: tuple[str, ...] = ()
    """Strings inside ``args`` that projection must drop (they live only in audits)."""


@dataclass(frozen=True, slots=True)
class Call:
    """A tool call inside an assistant message; Fabric calls carry their operations."""

    id: str
    name: str
    arguments: dict[str, Any]
    operations: tuple[OperationSpec, ...] = ()


@dataclass(frozen=True, slots=True)
class WrittenOperation:
    """A trace operation exactly as written into a ``fabric_exec`` result."""

    session_id: str
    entry_id: str
    sequence: int
    ref: str
    kind: str
    outcome: str
    failure_stage: str | None

    @property
    def address(self) -> str:
        return f"{self.entry_id}/{self.sequence}"


@dataclass(frozen=True, slots=True)
class WrittenSession:
    """One generated session file, as written."""

    path: str
    session_id: str
    cwd: str
    entry_ids: tuple[str, ...]
    """Every entry id in file order (the header has none)."""
    active_ids: tuple[str, ...]
    """The active branch, root first."""
    operations: tuple[WrittenOperation, ...]
    phase_addresses: tuple[str, ...]
    fabric_results: tuple[str, ...]
    goals: tuple[str, ...]
    constraints: tuple[str, ...]
    facts: tuple[str, ...]
    secrets: tuple[str, ...]
    decoy_paths: tuple[str, ...]
    size: int
    source_hash: str
    mtime_ns: int

    @property
    def leaf_id(self) -> str | None:
        return self.entry_ids[-1] if self.entry_ids else None


@dataclass(frozen=True, slots=True)
class RareFact:
    """The planted rare facts and where they were written."""

    ascii: str
    unicode: str
    entry_id: str
    session_id: str
    path: str


@dataclass(frozen=True, slots=True)
class CorpusManifest:
    """What :func:`generate_corpus` wrote: enough to check recall and expand exactly."""

    root: str
    seed: int | str
    sessions: tuple[WrittenSession, ...]
    rare_fact: RareFact
    grep_operation: WrittenOperation
    """The cold failed ``omp.grep`` operation; its (ref, outcome) is unique in the corpus."""
    grep_session_path: str
    absent_ref: str
    """A ref no session contains: the structural negative control."""

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(s.path for s in self.sessions)

    @property
    def session_ids(self) -> tuple[str, ...]:
        return tuple(s.session_id for s in self.sessions)

    @property
    def entry_count(self) -> int:
        return sum(len(s.entry_ids) for s in self.sessions)

    @property
    def operation_count(self) -> int:
        return sum(len(s.operations) for s in self.sessions)

    @property
    def secrets(self) -> tuple[str, ...]:
        return tuple(secret for s in self.sessions for secret in s.secrets)

    def operations_matching(self, ref: str, outcome: str) -> tuple[WrittenOperation, ...]:
        """Every written operation with this exact ref and outcome."""
        return tuple(
            op
            for written in self.sessions
            for op in written.operations
            if op.ref == ref and op.outcome == outcome
        )

    def session(self, key: str) -> WrittenSession:
        """The session with this path or session id."""
        for written in self.sessions:
            if key in (written.path, written.session_id):
                return written
        raise UsageError(f"manifest of {self.root}: no session {key!r}")


# --- small deterministic helpers -----------------------------------------------------


def iso_timestamp(ms: int) -> str:
    """``2026-01-01T09:00:00.000Z`` for epoch milliseconds (UTC)."""
    return iso_time(datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms))


def session_uuid(rng: random.Random, ms: int) -> str:
    """A UUIDv7-shaped id: the start time in its first 48 bits, the rest from ``rng``."""
    value = (ms & (2**48 - 1)) << 80 | 0x7 << 76 | rng.getrandbits(12) << 64
    value |= 0b10 << 62 | rng.getrandbits(62)
    text = f"{value:032x}"
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def session_file_name(start_ms: int, session_id: str) -> str:
    """Pi's file name: the ISO start with ``:`` and ``.`` replaced by ``-``, then the id."""
    stamp = iso_timestamp(start_ms).replace(":", "-").replace(".", "-")
    return f"{stamp}_{session_id}.jsonl"


def encoded_cwd(cwd: str) -> str:
    """Pi's session folder name for a working directory."""
    return "--" + cwd.lstrip("/\\").replace("/", "-").replace("\\", "-").replace(":", "-") + "--"


def _hex(rng: random.Random, digits: int) -> str:
    return f"{rng.getrandbits(4 * digits):0{digits}x}"


def _token(rng: random.Random, length: int) -> str:
    return "".join(rng.choices(_ID_CHARS, k=length))


def _secret(rng: random.Random, label: str) -> str:
    return f"CERT_SECRET_{label}_{_hex(rng, 12)}"


# --- Fabric operations ---------------------------------------------------------------


def random_operation(
    rng: random.Random, flavour: TraceFlavour = "pi", *, failure_rate: float = 0.15
) -> OperationSpec:
    """One plausible Fabric call with raw (unprojected) arguments and an outcome."""
    ref, args, secrets, created = _operation_body(rng, flavour)
    outcome: Outcome = "succeeded"
    stage: str | None = None
    roll = rng.random()
    if roll < failure_rate:
        outcome, stage = "failed", rng.choice(FAILURE_STAGES)
    elif roll < failure_rate * 1.3:
        outcome = "timed_out"
        stage = rng.choice(("invoke", "approve")) if rng.random() < 0.5 else None
    elif roll < failure_rate * 1.4:
        outcome = "aborted"
    if (ref, outcome) == RESERVED_GREP:
        outcome, stage = "timed_out", None
    return OperationSpec(ref, args, outcome, stage, created and outcome == "succeeded",
                         tuple(secrets))


def _operation_body(
    rng: random.Random, flavour: str
) -> tuple[str, dict[str, Any], list[str], bool]:
    secrets: list[str] = []

    def secret(label: str) -> str:
        value = _secret(rng, label)
        secrets.append(value)
        return value

    family = rng.random()
    if family < 0.5:
        action = rng.choice(("read", "read", "grep", "find", "ls", "edit", "write", "bash"))
        ref = f"{flavour}.{action}"
        path = rng.choice(FILES if action in ("read", "edit", "write") else DIRS)
        if action == "read":
            args: dict[str, Any] = {"path": path, "encoding": "utf-8"}
            shape = rng.random()
            if shape < 0.1:
                args["path"] = f"https://cert:{secret('URL')}@example.invalid/{path}"
            elif shape < 0.2:
                args["path"] = f"{path}?rev={secret('QUERY')}#L{rng.randint(1, 99)}"
            if rng.random() < 0.5:
                args["offset"] = rng.randint(1, 400)
            if rng.random() < 0.5:
                args["limit"] = rng.randint(10, 200)
            return ref, args, secrets, False
        if action == "grep":
            return ref, {"path": path, "pattern": secret("PATTERN"), "context": rng.randint(0, 5),
                         "limit": rng.randint(5, 50)}, secrets, False
        if action in ("find", "ls"):
            args = {"path": path, "limit": rng.randint(5, 100)}
            if action == "find":
                args["pattern"] = f"*{secret('GLOB')}*"
            return ref, args, secrets, False
        if action == "edit":
            return ref, {"path": path, "edits": [{"oldText": "a,", "newText": secret("EDIT")}]}, \
                secrets, False
        if action == "write":
            return ref, {"path": path, "content": secret("CONTENT")}, secrets, rng.random() < 0.6
        return ref, {"command": rng.choice(COMMANDS), "timeout": 120,
                     "env": {"TOKEN": secret("ENV")}}, secrets, False
    if family < 0.65:
        name = rng.choice(("configure", "phase", "phase", "item", "event", "progress",
                           "parallel", "pipeline"))
        return f"fabric.workflow.{name}", _workflow_args(rng, name, secret), secrets, False
    if family < 0.78:
        name = rng.choice(("providers", "models", "catalog", "list", "search", "describe"))
        return f"fabric.discovery.{name}", _discovery_args(rng, name, flavour, secret), \
            secrets, False
    if family < 0.9:
        name = rng.choice(("publish", "read", "get", "put", "list"))
        return f"mesh.{name}", _mesh_args(rng, name, secret), secrets, False
    if family < 0.95:
        return "agents.run", {"id": f"agent-{_hex(rng, 6)}", "task": secret("TASK")}, secrets, False
    ref = rng.choice(("mcp.github.search", "memory.store", "state.get", "ext.lint.run"))
    return ref, {"query": secret("OPAQUE")}, secrets, False


def _discovery_args(
    rng: random.Random, name: str, flavour: str, secret: Callable[[str], str]
) -> dict[str, Any]:
    if name in ("providers", "models"):
        return {}
    if name == "catalog":
        return {"provider": flavour, "limit": rng.randint(5, 50)}
    if name == "list":
        return {"provider": flavour, "namespace": "fs", "limit": rng.randint(5, 50),
                "query": secret("QUERY")}
    if name == "search":
        return {"limit": rng.randint(5, 50), "query": secret("QUERY")}
    return {"ref": f"{flavour}.{rng.choice(('read', 'grep', 'bash'))}"}


def _mesh_args(rng: random.Random, name: str, secret: Callable[[str], str]) -> dict[str, Any]:
    topic = f"build/{rng.choice(WORDS)}"
    key = f"cfg/{rng.choice(WORDS)}/{rng.randint(0, 9)}"
    if name == "publish":
        return {"topic": topic, "text": secret("MESH")}
    if name == "read":
        return {"topic": topic, "cursor": rng.randint(0, 99), "limit": rng.randint(1, 20)}
    if name == "get":
        return {"key": key}
    if name == "put":
        return {"key": key, "value": secret("VALUE")}
    return {"prefix": "cfg/", "limit": rng.randint(1, 20)}


def _workflow_args(
    rng: random.Random, name: str, secret: Callable[[str], str]
) -> dict[str, Any]:
    if name == "configure":
        return {"name": f"fix-{rng.choice(WORDS)}", "description": secret("DESCRIPTION")}
    if name == "phase":
        return phase_args(rng.choice(PHASES), rng.randint(0, 3), 4)
    if name == "item":
        return {"id": f"item-{rng.randint(0, 9)}", "status": rng.choice(("running", "done")),
                "phase": "p0", "kind": "task", "total": 4, "completed": rng.randint(0, 4),
                "label": secret("LABEL")}
    if name == "event":
        return {"level": rng.choice(("info", "warn")), "message": secret("EVENT")}
    if name == "progress":
        return {"message": secret("PROGRESS")}
    if name == "parallel":
        return {"kind": "parallel", "itemCount": rng.randint(0, 4),
                "concurrency": rng.randint(1, 4)}
    return {"kind": "pipeline", "itemCount": rng.randint(0, 4), "stageCount": rng.randint(1, 3)}


def phase_args(name: str, index: int, total: int) -> dict[str, Any]:
    """Raw arguments of a ``workflow.phase`` call."""
    return {"name": name, "id": f"p{index}", "total": total, "description": f"{name} step"}


def phase_operations(names: Sequence[str]) -> list[OperationSpec]:
    """``fabric.workflow.phase`` calls in this order (repeats stay: A→B→A)."""
    return [
        OperationSpec("fabric.workflow.phase", phase_args(name, i, len(names)))
        for i, name in enumerate(names)
    ]


def random_operations(
    rng: random.Random, flavour: TraceFlavour, count: int, *, failure_rate: float = 0.15
) -> list[OperationSpec]:
    """``count`` operations, sometimes wrapped in repeated phases (A→B→A)."""
    operations = [random_operation(rng, flavour, failure_rate=failure_rate) for _ in range(count)]
    if rng.random() < 0.25:
        first, second = rng.sample(PHASES, 2)
        a, b, c = phase_operations((first, second, first))
        cut = len(operations) // 2
        operations = [a, *operations[:cut], b, *operations[cut:], c]
    return operations


# --- the builder ---------------------------------------------------------------------


@dataclass(slots=True)
class _State:
    entries: list[dict[str, Any]] = field(default_factory=list)
    lines: list[bytes] = field(default_factory=list)
    parents: dict[str, str | None] = field(default_factory=dict)
    operations: list[WrittenOperation] = field(default_factory=list)
    phase_addresses: list[str] = field(default_factory=list)
    fabric_results: list[str] = field(default_factory=list)
    open_calls: dict[str, Call] = field(default_factory=dict)


class SessionBuilder:
    """Append Pi v3 entries in memory, then write or append them to a file.

    Each entry is serialized once, when it is appended; ``write`` puts the header and
    every entry in a file, ``append`` adds the entries not yet written. Entry ids are
    8 hex digits unique in the session; each entry's parent is the previous one
    unless :meth:`branch_from` moved the leaf.
    """

    def __init__(
        self,
        rng: random.Random,
        *,
        cwd: str = PROJECTS[0],
        start_ms: int = EPOCH_MS,
        flavour: TraceFlavour = "pi",
        session_id: str | None = None,
        parent_session: str | None = None,
    ) -> None:
        self.rng = rng
        self.cwd = cwd
        self.flavour: TraceFlavour = flavour
        self.start_ms = start_ms
        self.clock_ms = start_ms
        self.session_id = session_id or session_uuid(rng, start_ms)
        self.header: dict[str, Any] = {
            "type": "session", "version": 3, "id": self.session_id,
            "timestamp": iso_timestamp(start_ms), "cwd": cwd,
        }
        if parent_session is not None:
            self.header["parentSession"] = parent_session
        self.leaf: str | None = None
        self.goals: list[str] = []
        self.constraints: list[str] = []
        self.facts: list[str] = []
        self.secrets: list[str] = []
        self.decoy_paths: list[str] = []
        self._state = _State()
        self._header_line = orjson.dumps(self.header)
        self._written = 0
        self._written_size = 0
        self._context_chars = 0

    # -- reading back what was appended

    @property
    def entries(self) -> list[dict[str, Any]]:
        return self._state.entries

    @property
    def entry_ids(self) -> list[str]:
        return list(self._state.parents)

    @property
    def operations(self) -> list[WrittenOperation]:
        return self._state.operations

    @property
    def size(self) -> int:
        """Bytes of the whole file (header and every entry, each with its ``\\n``)."""
        return len(self._header_line) + 1 + sum(len(line) + 1 for line in self._state.lines)

    def to_bytes(self) -> bytes:
        return b"\n".join((self._header_line, *self._state.lines)) + b"\n"

    def active_ids(self) -> list[str]:
        """The chain from the last entry back to its root, root first."""
        chain: list[str] = []
        current = self.leaf
        while current is not None:
            chain.append(current)
            current = self._state.parents[current]
        chain.reverse()
        return chain

    # -- appending

    def tick(self, low: int = 500, high: int = 90_000) -> int:
        """Advance the clock by a seeded step; return the new time (epoch ms)."""
        self.clock_ms += self.rng.randint(low, high)
        return self.clock_ms

    def branch_from(self, entry_id: str) -> None:
        """Make the next entry another child of ``entry_id`` (a new branch)."""
        if entry_id not in self._state.parents:
            raise UsageError(f"session {self.session_id}: no entry {entry_id!r} to branch from")
        self.leaf = entry_id

    def append_entry(self, entry_type: str, fields: dict[str, Any]) -> str:
        """Append any entry type; ``id``, ``parentId`` and ``timestamp`` are filled in."""
        parents = self._state.parents
        entry_id = _hex(self.rng, 8)
        while entry_id in parents:
            entry_id = _hex(self.rng, 8)
        entry = {
            "type": entry_type, "id": entry_id, "parentId": self.leaf,
            "timestamp": iso_timestamp(self.clock_ms), **fields,
        }
        parents[entry_id] = self.leaf
        self.leaf = entry_id
        self._state.entries.append(entry)
        self._state.lines.append(orjson.dumps(entry))
        return entry_id

    def model_change(self, provider: str = "anthropic", model_id: str = "claude-sonnet-4-5") -> str:
        self.tick(1_000, 10_000)
        return self.append_entry("model_change", {"provider": provider, "modelId": model_id})

    def thinking_level_change(self, level: str = "medium") -> str:
        self.tick(1_000, 10_000)
        return self.append_entry("thinking_level_change", {"thinkingLevel": level})

    def _message(self, message: dict[str, Any]) -> str:
        message["timestamp"] = self.clock_ms
        return self.append_entry("message", {"message": message})

    def user(self, content: str | list[dict[str, Any]]) -> str:
        self.tick(5_000, 120_000)
        self._context_chars += len(content) if isinstance(content, str) else 0
        return self._message({"role": "user", "content": content})

    def tool_call(
        self, name: str, arguments: dict[str, Any], operations: Sequence[OperationSpec] = ()
    ) -> Call:
        """A new tool call with a fresh ``toolu_…`` id (put it in :meth:`assistant`)."""
        return Call(f"toolu_01{_token(self.rng, 22)}", name, arguments, tuple(operations))

    def fabric_call(self, operations: Sequence[OperationSpec]) -> Call:
        """A ``fabric_exec`` call whose code names a decoy path it never executes."""
        decoy = self._decoy("code")
        lines = [f"// {len(operations)} operations"]
        lines += [f"await {op.ref.removeprefix('fabric.')}({{...}});" for op in operations[:4]]
        lines.append(f'const ghost = await pi.read({{ path: "{decoy}" }}); // never executed')
        lines.append("return { ok: true };")
        arguments = {
            "code": "\n".join(lines),
            "display": {"name": f"Step {self.rng.choice(WORDS)}",
                        "description": "Inspect and patch"},
        }
        return self.tool_call("fabric_exec", arguments, operations)

    def assistant(
        self,
        text: str | None = None,
        *,
        calls: Sequence[Call] = (),
        thinking: str | None = None,
        usage: dict[str, Any] | None = None,
    ) -> str:
        """An assistant message; its tool calls stay open until their results arrive."""
        self.tick(2_000, 30_000)
        content: list[dict[str, Any]] = []
        if thinking is not None:
            content.append({"type": "thinking", "thinking": thinking,
                            "thinkingSignature": _token(self.rng, 40)})
        if text is not None:
            content.append({"type": "text", "text": text})
        for call in calls:
            content.append({"type": "toolCall", "id": call.id, "name": call.name,
                            "arguments": call.arguments})
            self._state.open_calls[call.id] = call
        produced = sum(len(part.get("text", "")) for part in content) + 200 * len(calls)
        self._context_chars += produced
        return self._message({
            "role": "assistant", "content": content, "api": "anthropic-messages",
            "provider": "anthropic", "model": "claude-sonnet-4-5",
            "usage": usage if usage is not None else self._usage(produced // 4 + 1),
            "stopReason": "toolUse" if calls else "stop",
        })

    def _usage(self, output: int) -> dict[str, Any]:
        cache_read = self.rng.randint(0, 4_000)
        prompt = 900 + self._context_chars // 4 + self.rng.randint(0, 64)
        total = prompt + output + cache_read
        cost = {"input": round(prompt * 3e-6, 6), "output": round(output * 15e-6, 6),
                "cacheRead": round(cache_read * 3e-7, 6), "cacheWrite": 0}
        cost["total"] = round(cost["input"] + cost["output"] + cost["cacheRead"], 6)
        return {"input": prompt, "output": output, "cacheRead": cache_read, "cacheWrite": 0,
                "totalTokens": total, "cost": cost}

    def tool_result(
        self,
        call: Call,
        text: str,
        *,
        details: Mapping[str, object] | None = None,
        is_error: bool = False,
        delay: tuple[int, int] = (300, 8_000),
    ) -> str:
        """The result of an open ``call`` (results may arrive in any order)."""
        if self._state.open_calls.pop(call.id, None) is None:
            raise UsageError(f"session {self.session_id}: tool call {call.id} is not open")
        self.tick(*delay)
        self._context_chars += len(text)
        message: dict[str, Any] = {
            "role": "toolResult", "toolCallId": call.id, "toolName": call.name,
            "content": [{"type": "text", "text": text}], "isError": is_error,
        }
        message["timestamp"] = self.clock_ms
        if details is not None:
            message["details"] = details
        return self.append_entry("message", {"message": message})

    def fabric_result(
        self,
        call: Call,
        *,
        outcome: Outcome | None = None,
        delay: tuple[int, int] = (300, 8_000),
    ) -> str:
        """The ``fabric_exec`` result of ``call``: projected trace, verbatim audits.

        Sequences are strictly increasing and may skip numbers (other calls of the
        same bridge take them). By default, half of the runs holding an unsuccessful
        operation end with that operation's outcome; every other run succeeds.
        """
        rng = self.rng
        started = self.clock_ms
        sequence = rng.choice((0, 0, 0, 1, 2))
        operations: list[dict[str, Any]] = []
        audits: list[dict[str, Any]] = []
        phases: list[str] = []
        for spec in call.operations:
            operations.append(self._trace_operation(spec, sequence))
            audits.append(self._audit(spec, started))
            if spec.ref == "fabric.workflow.phase" and spec.outcome == "succeeded":
                phases.append(str(spec.args["name"]))
            self.secrets.extend(spec.secrets)
            sequence += 2 if rng.random() < 0.1 else 1
        if outcome is None:
            failing = [op.outcome for op in call.operations if op.outcome != "succeeded"]
            outcome = failing[0] if failing and rng.random() < 0.5 else "succeeded"
        trace: dict[str, Any] = {
            "kind": TRACE_KINDS[self.flavour], "version": 1, "outcome": outcome,
            "phases": phases, "operations": operations,
            "counts": {"droppedValues": 0, "truncatedValues": 0, "redactedValues": 0,
                       "droppedOperations": 0},
        }
        error = _RUN_ERRORS.get(outcome)
        if error is not None:
            trace["error"] = error
        details = create_fabric_persisted_execution_details(
            success=outcome == "succeeded", trace=trace, audits=audits, phases=phases, error=error
        )
        outer = self._decoy("outer")
        text = (f"```yaml\nok: {str(outcome == 'succeeded').lower()}\nfiles:\n  - {outer}\n"
                f"error: \"Call failed during invoke on {outer}\"\n```")
        entry_id = self.tool_result(call, text, details=details, delay=delay)
        kind = trace["kind"]
        for op in details["trace"]["operations"]:
            self._state.operations.append(WrittenOperation(
                self.session_id, entry_id, op["sequence"], op["ref"], kind, op["outcome"],
                op.get("failureStage"),
            ))
        self._state.phase_addresses.extend(
            f"{entry_id}/phase:{i}" for i in range(len(details["trace"]["phases"]))
        )
        self._state.fabric_results.append(entry_id)
        return entry_id

    def _trace_operation(self, spec: OperationSpec, sequence: int) -> dict[str, Any]:
        operation: dict[str, Any] = {"type": "call", "sequence": sequence, "ref": spec.ref}
        provider, _, action = spec.ref.partition(".")
        if action and self.rng.random() < 0.85:
            operation["provider"] = provider
            operation["action"] = action
        operation["args"] = project_args(spec.ref, spec.args)
        operation["outcome"] = spec.outcome
        if spec.failure_stage is not None:
            operation["failureStage"] = spec.failure_stage
        if spec.outcome != "succeeded":
            operation["error"] = _CALL_ERRORS.get(
                spec.outcome, f"Call failed during {spec.failure_stage or 'invoke'}"
            )
        result = project_result(spec.ref, {"created": True}) if spec.created else None
        if result is not None:
            operation["result"] = result
        return operation

    def _audit(self, spec: OperationSpec, started: int) -> dict[str, Any]:
        decoy = self._decoy("audit")
        provider, _, action = spec.ref.partition(".")
        audit: dict[str, Any] = {
            "ref": spec.ref, "tool": action or provider, "provider": provider,
            "success": spec.outcome == "succeeded", "args": spec.args,
        }
        if spec.outcome == "succeeded":
            audit["result"] = f"AUDIT_ONLY_RESULT {decoy}"
        else:
            audit["error"] = f"ENOENT: no such file or directory, open '{decoy}'"
        audit["preview"] = {"kind": "text", "text": f"preview of {decoy}"}
        audit["startedAt"] = started
        audit["endedAt"] = started + self.rng.randint(50, 900)
        return audit

    def _decoy(self, where: str) -> str:
        path = f"/decoy/{where}_{_hex(self.rng, 8)}.ts"
        self.decoy_paths.append(path)
        return path

    def compaction(
        self,
        summary: str,
        first_kept_entry_id: str,
        tokens_before: int,
        *,
        details: dict[str, Any] | None = None,
        from_hook: bool = True,
    ) -> str:
        """A ``compaction`` entry as Pi persists it."""
        self.tick(1_000, 5_000)
        fields: dict[str, Any] = {
            "summary": summary, "firstKeptEntryId": first_kept_entry_id,
            "tokensBefore": tokens_before,
        }
        if details is not None:
            fields["details"] = details
        fields["fromHook"] = from_hook
        return self.append_entry("compaction", fields)

    # -- files

    def write(self, path: str | os.PathLike[str]) -> WrittenSession:
        """Write the whole session (header and every entry) to ``path``."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        data = self.to_bytes()
        target.write_bytes(data)
        self._written = len(self._state.lines)
        self._written_size = len(data)
        return self._record(target, xxhash.xxh3_128_hexdigest(data))

    def append(self, path: str | os.PathLike[str]) -> WrittenSession:
        """Append the entries not yet written (the whole file if ``path`` is new)."""
        target = Path(path)
        if self._written == 0 or not target.exists():
            return self.write(target)
        if target.stat().st_size != self._written_size:
            raise UsageError(
                f"{target}: size changed since this builder wrote it; write it again instead"
            )
        tail = b"".join(line + b"\n" for line in self._state.lines[self._written:])
        with open(target, "ab") as stream:
            stream.write(tail)
        self._written = len(self._state.lines)
        self._written_size += len(tail)
        return self._record(target, xxhash.xxh3_128_hexdigest(target.read_bytes()))

    def _record(self, target: Path, source_hash: str) -> WrittenSession:
        stamp_ns = self.clock_ms * 1_000_000
        os.utime(target, ns=(stamp_ns, stamp_ns))
        state = self._state
        return WrittenSession(
            path=str(target), session_id=self.session_id, cwd=self.cwd,
            entry_ids=tuple(state.parents), active_ids=tuple(self.active_ids()),
            operations=tuple(state.operations), phase_addresses=tuple(state.phase_addresses),
            fabric_results=tuple(state.fabric_results), goals=tuple(self.goals),
            constraints=tuple(self.constraints), facts=tuple(self.facts),
            secrets=tuple(self.secrets), decoy_paths=tuple(self.decoy_paths),
            size=self._written_size, source_hash=source_hash, mtime_ns=stamp_ns,
        )


# --- whole sessions ------------------------------------------------------------------


def _turn(builder: SessionBuilder, index: int, planted: Sequence[OperationSpec] = ()) -> str:
    """One user question and everything up to the assistant's final answer."""
    rng = builder.rng
    builder.user(f"Question {index}: how does {rng.choice(WORDS)} interact with "
                 f"{rng.choice(WORDS)}?")
    style = rng.random()
    if planted or style < 0.4:
        operations = random_operations(rng, builder.flavour, rng.randint(1, 3))
        operations[rng.randrange(len(operations) + 1):0] = planted
        call = builder.fabric_call(operations)
        thinking = "Batch independent reads in one program." if rng.random() < 0.3 else None
        builder.assistant(calls=[call], thinking=thinking)
        builder.fabric_result(call)
    elif style < 0.6:
        first = builder.fabric_call(random_operations(rng, builder.flavour, rng.randint(1, 2)))
        second = builder.fabric_call(random_operations(rng, builder.flavour, rng.randint(1, 2)))
        builder.assistant("Running both in parallel.", calls=[first, second])
        # Parallel calls: results may come back in reverse order and late.
        order = (second, first) if rng.random() < 0.6 else (first, second)
        for call in order:
            builder.fabric_result(call, delay=(2_000, 120_000))
    elif style < 0.8:
        _plain_tool(builder)
    return builder.assistant(
        f"Answer {index}: it composes via the {rng.choice(WORDS)} adapter. "
        + "Details. " * rng.randint(0, 3)
    )


def _plain_tool(builder: SessionBuilder) -> None:
    rng = builder.rng
    name = rng.choice(("read", "bash", "edit"))
    path = rng.choice(FILES)
    if name == "read":
        call = builder.tool_call("read", {"path": path})
        builder.assistant("Using read.", calls=[call])
        builder.tool_result(call, f"export const x = {rng.randint(0, 99)};\n")
    elif name == "bash":
        command = rng.choice(COMMANDS)
        call = builder.tool_call("bash", {"command": command, "timeout": 120})
        builder.assistant("Using bash.", calls=[call])
        if rng.random() < 0.3:
            builder.tool_result(call, f"Error: {command} exited with code 1\n  at {path}:"
                                      f"{rng.randint(1, 300)}", is_error=True)
        else:
            builder.tool_result(call, f"✓ {rng.randint(1, 90)} tests passed")
    else:
        edits = [{"oldText": "a,", "newText": "a"}]
        call = builder.tool_call("edit", {"path": path, "edits": edits})
        builder.assistant("Using edit.", calls=[call])
        builder.tool_result(call, f"Successfully replaced text in {path}.",
                            details={"diff": "-a,\n+a", "firstChangedLine": rng.randint(1, 99)})


def build_session(
    rng: random.Random,
    *,
    start_ms: int = EPOCH_MS,
    cwd: str = PROJECTS[0],
    flavour: TraceFlavour | None = None,
    turns: int | None = None,
    fact: str | None = None,
    planted: Sequence[OperationSpec] = (),
    branches: bool = True,
) -> tuple[SessionBuilder, str | None]:
    """A small session in memory; returns the builder and the fact's entry id.

    A ``fact`` is stated in a user message after the last turn, so it is on the
    active branch; ``planted`` operations go into one Fabric run of one turn.
    With ``branches`` some sessions continue from an earlier turn's end, leaving
    the later turns on an abandoned branch.
    """
    chosen: TraceFlavour = flavour or ("pi" if rng.random() < 0.6 else "omp")
    builder = SessionBuilder(rng, cwd=cwd, start_ms=start_ms, flavour=chosen)
    builder.model_change()
    builder.thinking_level_change(rng.choice(THINKING_LEVELS))
    goal = f"GOAL_{_hex(rng, 6)}: make the {rng.choice(WORDS)} parser accept trailing commas"
    constraint = f"CONSTRAINT_{_hex(rng, 6)}: never modify src/legacy/compat.ts"
    builder.goals.append(goal)
    builder.constraints.append(constraint)
    builder.user(f"{goal}. {constraint}. Keep the public API stable.")
    turn_ends = [builder.assistant("Understood. I will keep the public API stable.")]
    count = turns if turns is not None else rng.randint(2, 3)
    planted_turn = rng.randrange(count) if planted else -1
    for index in range(count):
        if branches and index == count - 1 and len(turn_ends) > 1 and rng.random() < 0.25:
            builder.branch_from(rng.choice(turn_ends[:-1]))
        turn_ends.append(_turn(builder, index, planted if index == planted_turn else ()))
    fact_entry = None
    if fact is not None:
        builder.facts.append(fact)
        fact_entry = builder.user(f"Please remember this exactly: {fact}")
        builder.assistant("Noted; I will keep that exactly.")
    return builder, fact_entry


def write_session(
    path: str | os.PathLike[str],
    rng: random.Random,
    *,
    start_ms: int = EPOCH_MS,
    cwd: str = PROJECTS[0],
    flavour: TraceFlavour | None = None,
    turns: int | None = None,
) -> WrittenSession:
    """Write one small seeded session (a few KiB) to ``path``."""
    builder, _ = build_session(rng, start_ms=start_ms, cwd=cwd, flavour=flavour, turns=turns)
    return builder.write(path)


def rare_facts(rng: random.Random, number: int) -> tuple[str, str]:
    """An ASCII ``CERT_FACT_<n>_<WORD>_<hex>`` fact and a unique Unicode one."""
    ascii_fact = f"CERT_FACT_{number:03d}_{rng.choice(WORDS).upper()}_{_hex(rng, 4)}"
    unicode_fact = f"Zürich→東京 ✓ {rng.choice(UNICODE_WORDS)}-{_hex(rng, 6)}"
    return ascii_fact, unicode_fact


def planted_grep() -> OperationSpec:
    """The cold failed ``omp.grep`` call the memory check must select structurally."""
    return OperationSpec(
        RESERVED_GREP[0],
        {"path": "src", "pattern": "CERT_GREP_NEEDLE", "context": 2, "limit": 20},
        RESERVED_GREP[1],
        "invoke",
        secrets=("CERT_GREP_NEEDLE",),
    )


def generate_corpus(
    root: str | os.PathLike[str], *, sessions: int = 1000, seed: int | str = DEFAULT_SEED
) -> CorpusManifest:
    """Write ``sessions`` small sessions under ``root`` in Pi's folder layout.

    One holds the rare facts and one the planted ``omp.grep`` failure; both get
    an mtime hundreds of days older than every other session, so any hot tier
    smaller than the corpus leaves them cold.
    """
    if sessions < 2:
        raise UsageError(f"generate_corpus: sessions must be at least 2 (got {sessions})")
    base = Path(root)
    master = random.Random(seed)
    rare_index, grep_index = master.sample(range(sessions), 2)
    written: list[WrittenSession] = []
    rare: RareFact | None = None
    start_ms = EPOCH_MS
    for index in range(sessions):
        rng = random.Random(master.getrandbits(64))
        start_ms += rng.randint(10 * 60_000, 50 * 60_000)
        cwd = PROJECTS[index % len(PROJECTS)]
        facts: tuple[str, str] | None = None
        if index == rare_index:
            facts = rare_facts(rng, index)
            builder, fact_entry = build_session(
                rng, start_ms=start_ms, cwd=cwd, fact=" — ".join(facts), branches=False
            )
            builder.facts[:] = facts
        elif index == grep_index:
            builder, fact_entry = build_session(rng, start_ms=start_ms, cwd=cwd, flavour="omp",
                                                planted=[planted_grep()], branches=False)
        else:
            builder, fact_entry = build_session(rng, start_ms=start_ms, cwd=cwd)
        path = base / encoded_cwd(cwd) / session_file_name(start_ms, builder.session_id)
        session = builder.write(path)
        if index in (rare_index, grep_index):
            # Hundreds of days older than any other session: cold under any hot tier.
            age = 400 if index == rare_index else 300
            session = _age(session, EPOCH_MS - age * DAY_MS)
        if facts is not None and fact_entry is not None:
            rare = RareFact(facts[0], facts[1], fact_entry, session.session_id, session.path)
        written.append(session)
    if rare is None:
        raise UsageError("generate_corpus: the rare-fact session was not written")
    grep_session = written[grep_index]
    grep_operation = next(op for op in grep_session.operations
                          if (op.ref, op.outcome) == RESERVED_GREP)
    return CorpusManifest(
        root=str(base), seed=seed, sessions=tuple(written), rare_fact=rare,
        grep_operation=grep_operation, grep_session_path=grep_session.path,
        absent_ref=f"omp.absent_{_hex(master, 8)}",
    )


def _age(session: WrittenSession, mtime_ms: int) -> WrittenSession:
    stamp_ns = mtime_ms * 1_000_000
    os.utime(session.path, ns=(stamp_ns, stamp_ns))
    return replace(session, mtime_ns=stamp_ns)


# --- the rich source -----------------------------------------------------------------


_RICH_PHASES = ("Planung", "Umsetzung", "検証", "Überprüfung", "Révision")


def rich_session(
    path: str | os.PathLike[str], target_bytes: int = RICH_TARGET_BYTES, seed: int | str = 0
) -> WrittenSession:
    """One uncompacted session of at least ``target_bytes`` (less one turn over it).

    It mixes multibyte goals and instructions, many distinct paths, tool errors,
    turns and typed Fabric activity (phases repeating A→B→A, failures with
    stages, parallel results), so a compactor has more than its budget to keep.
    """
    rng = random.Random(seed)
    builder = SessionBuilder(rng, cwd=PROJECTS[3], start_ms=EPOCH_MS, flavour="pi")
    builder.model_change()
    builder.thinking_level_change("high")
    goal = (f"GOAL_{_hex(rng, 6)}: den Parser für Zürich→東京 ✓ so umbauen, dass "
            "verschachtelte Arrays nachgestellte Kommas akzeptieren")
    constraints = [
        f"CONSTRAINT_{_hex(rng, 6)}: never modify src/legacy/compat.ts",
        f"CONSTRAINT_{_hex(rng, 6)}: keine Änderungen an der öffentlichen API"
        " — 公開APIは変更しない",
    ]
    builder.goals.append(goal)
    builder.constraints.extend(constraints)
    builder.user(f"{goal}. {constraints[0]}. {constraints[1]}.")
    builder.assistant("Verstanden — ich halte die öffentliche API stabil. 了解しました。")
    turn = 0
    while builder.size < target_bytes:
        turn += 1
        _rich_turn(builder, turn)
    return builder.write(path)


def _rich_paths(rng: random.Random, turn: int, count: int) -> list[str]:
    shapes = ("src/módulo_{t:03d}/componente_{i}.ts", "docs/説明_{t:03d}_{i}.md",
              "tests/тест_{t:03d}_{i}.py", "src/Überarbeitung/{w}_{t:03d}_{i}.rs")
    return [rng.choice(shapes).format(t=turn, i=i, w=rng.choice(WORDS)) for i in range(count)]


def _rich_turn(builder: SessionBuilder, turn: int) -> None:
    rng = builder.rng
    paths = _rich_paths(rng, turn, 8)
    word = rng.choice(UNICODE_WORDS)
    builder.user(
        f"Schritt {turn}: Überprüfe {paths[0]} und {paths[1]} für «{word}» — "
        f"東京チームの要求 #{turn} ✓ ({_hex(rng, 6)}). Achte auf {paths[2]}; "
        f"Fehlerbericht {turn}: »{rng.choice(WORDS)} bricht bei {paths[3]}:{rng.randint(1, 900)}«."
    )
    calls = []
    for part in range(rng.randint(1, 2)):
        operations = _rich_operations(rng, paths[part * 4:(part + 1) * 4], turn)
        calls.append(builder.fabric_call(operations))
    builder.assistant(f"Plan für Schritt {turn}: {', '.join(paths[:4])}.", calls=calls,
                      thinking=f"Schritt {turn}: zuerst lesen, dann ändern — {word}.")
    for call in reversed(calls) if len(calls) > 1 and rng.random() < 0.5 else calls:
        builder.fabric_result(call, delay=(500, 60_000))
    if rng.random() < 0.5:
        command = f"pytest -q {paths[4]}"
        call = builder.tool_call("bash", {"command": command, "timeout": 120})
        builder.assistant(f"Prüfe {paths[4]}.", calls=[call])
        builder.tool_result(
            call,
            f"Error: ENOENT: no such file or directory, open '{paths[5]}' (código {turn}, "
            f"Größe {rng.randint(1, 9999)} B, ファイル {paths[6]})",
            is_error=True,
        )
    builder.assistant(
        f"Schritt {turn} erledigt: {paths[0]} geändert, {paths[7]} gelesen; offen: "
        f"{paths[5]} fehlt. Nächster Schritt prüft «{word}» erneut — 次の確認 ✓."
    )


def _rich_operations(rng: random.Random, paths: Sequence[str], turn: int) -> list[OperationSpec]:
    first, second = rng.sample(_RICH_PHASES, 2)
    phases = phase_operations((first, second, first))
    operations: list[OperationSpec] = [phases[0]]
    for i, path in enumerate(paths):
        action = ("read", "edit", "write", "grep", "bash")[(turn + i) % 5]
        args: dict[str, Any] = {"path": path}
        if action == "bash":
            args = {"command": f"node scripts/check.mjs {path}"}
        elif action == "grep":
            args["context"] = 2
        outcome: Outcome = "failed" if rng.random() < 0.25 else "succeeded"
        stage = rng.choice(FAILURE_STAGES) if outcome == "failed" else None
        operations.append(OperationSpec(f"pi.{action}", args, outcome, stage,
                                        action == "write" and outcome == "succeeded"))
        if i == 1:
            operations.append(phases[1])
    operations.append(phases[2])
    operations.extend(random_operations(rng, "pi", 2))
    return operations

