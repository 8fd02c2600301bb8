"""Claude Code transcripts and Codex rollouts written line by line in the hosts' formats,
for the work trail's and the handoff's tests (one builder per host, shared)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

SESSION = "5d3c1b2a-0000-4000-8000-00000000c0de"
CWD = "/home/dev/projects/ledger"


@dataclass(slots=True)
class ClaudeTranscript:
    """A Claude Code transcript: each call returns the uuid of the line it wrote."""

    session_id: str = SESSION
    cwd: str = CWD
    lines: list[dict[str, Any]] = field(default_factory=list)
    last: str | None = None
    calls: int = 0

    def _add(self, kind: str, body: dict[str, Any], parent: str | None = None,
             **extra: Any) -> str:
        uuid = f"c0000000-0000-4000-8000-{len(self.lines) + 1:012d}"
        self.lines.append({
            "type": kind, "uuid": uuid,
            "parentUuid": self.last if parent is None else parent,
            "sessionId": self.session_id, "cwd": self.cwd, "isSidechain": False,
            "timestamp": f"2026-07-01T10:{len(self.lines) // 60:02d}:{len(self.lines) % 60:02d}Z",
            **body, **extra,
        })
        self.last = uuid
        return uuid

    def user(self, text: str) -> str:
        return self._add("user", {"message": {"role": "user", "content": text}})

    def assistant(self, text: str) -> str:
        return self._add("assistant", {"message": {
            "role": "assistant", "content": [{"type": "text", "text": text}]}})

    def tool(self, name: str, arguments: dict[str, Any], result: str, *,
             is_error: bool = False, structured: Any = None) -> str:
        """A ``tool_use`` and the user line answering it; returns the result line's uuid."""
        self.calls += 1
        call_id = f"toolu_{self.calls:04d}"
        self._add("assistant", {"message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": call_id, "name": name, "input": arguments}]}})
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id,
                                 "content": result}
        if is_error:
            block["is_error"] = True
        extra = {"toolUseResult": structured} if structured is not None else {}
        return self._add("user", {"message": {"role": "user", "content": [block]}}, **extra)

    def parallel(self, *calls: tuple[str, dict[str, Any], str]) -> list[str]:
        """Parallel ``tool_use`` lines ``(name, arguments, result)``, then the user lines
        answering them, the last call's first; returns the result lines' uuids in call
        order."""
        ids = []
        for name, arguments, _ in calls:
            self.calls += 1
            ids.append(f"toolu_{self.calls:04d}")
            self._add("assistant", {"message": {"role": "assistant", "content": [
                {"type": "tool_use", "id": ids[-1], "name": name, "input": arguments}]}})
        results = {call_id: self._add("user", {"message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": call_id, "content": result}]}})
            for call_id, (_, _, result) in reversed(list(zip(ids, calls, strict=True)))}
        return [results[call_id] for call_id in ids]

    def compact(self, summary: str) -> str:
        """Claude's compaction: the boundary line (a new chain) and its summary line."""
        before = self.last
        boundary = self._add("system", {"subtype": "compact_boundary",
                                        "content": "Conversation compacted",
                                        "compactMetadata": {"trigger": "manual",
                                                            "preTokens": 9000}},
                             logicalParentUuid=before)
        self.lines[-1]["parentUuid"] = None
        self._add("user", {"message": {"role": "user", "content": summary}},
                  isCompactSummary=True)
        return boundary

    def write(self, path: Path) -> Path:
        path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in self.lines))
        return path


@dataclass(slots=True)
class CodexRollout:
    """A Codex rollout (the current ``{timestamp, type, payload}`` shape); each call
    returns the line number it wrote (Codex addresses are ``L<line>``)."""

    session_id: str = "0199a7c4-0000-7000-8000-00000000c0de"
    cwd: str = CWD
    lines: list[dict[str, Any]] = field(default_factory=list)
    calls: int = 0

    def __post_init__(self) -> None:
        self._add("session_meta", {"id": self.session_id, "cwd": self.cwd,
                                   "originator": "codex_cli_rs", "cli_version": "0.169.0"})

    def _add(self, kind: str, payload: dict[str, Any]) -> int:
        n = len(self.lines)
        self.lines.append({"timestamp": f"2026-07-01T10:{n // 60:02d}:{n % 60:02d}.000Z",
                           "type": kind, "payload": payload})
        return len(self.lines)

    def user(self, text: str) -> int:
        return self._add("response_item", {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": text}]})

    def assistant(self, text: str) -> int:
        return self._add("response_item", {"type": "message", "role": "assistant", "content": [
            {"type": "output_text", "text": text}]})

    def call(self, name: str, arguments: dict[str, Any], output: str) -> int:
        """A ``function_call`` and its output; returns the output's line."""
        self.calls += 1
        call_id = f"call_{self.calls:04d}"
        self._add("response_item", {"type": "function_call", "name": name,
                                    "arguments": orjson.dumps(arguments).decode(),
                                    "call_id": call_id})
        return self._add("response_item", {"type": "function_call_output", "call_id": call_id,
                                           "output": output})

    def patch(self, patch: str, output: str = "Success. Updated the following files.") -> int:
        """An ``apply_patch`` custom tool call and its output."""
        self.calls += 1
        call_id = f"call_{self.calls:04d}"
        self._add("response_item", {"type": "custom_tool_call", "name": "apply_patch",
                                    "input": patch, "call_id": call_id})
        return self._add("response_item", {"type": "custom_tool_call_output",
                                           "call_id": call_id, "output": output})

    def compacted(self, message: str) -> int:
        """Codex's compaction (``message`` empty and an encrypted item: a remote one)."""
        history: list[dict[str, Any]] = [] if message else [
            {"type": "compaction", "encrypted_content": "gAAAAB-remote"}]
        return self._add("compacted", {"message": message, "replacement_history": history})

    def write(self, path: Path) -> Path:
        path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in self.lines))
        return path


def exec_output(code: int, output: str) -> str:
    """An ``exec_command`` output as Codex writes it (its header reports the exit code)."""
    return (f"Chunk ID: 1a2b\nWall time: 0.4 seconds\nProcess exited with code {code}\n"
            f"Original token count: 12\nOutput:\n{output}")
