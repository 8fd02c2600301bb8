"""A stand-in for the model API on 127.0.0.1, for driving the real Claude Code, Codex and
Gemini CLI: Anthropic's ``POST /v1/messages``, OpenAI's ``POST /v1/responses`` and
``POST /v1/chat/completions`` (Qwen Code's), and Gemini's
``POST …/models/M:streamGenerateContent`` (and ``:generateContent``), streamed as
server-sent events as the real services stream them. It makes each tool call of ``steps``
once, in order, then answers in text (also where a ``None`` step ends a turn; a request
asking for a summary gets one), and keeps every request body, so a test can ask what the
host sent."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True, slots=True)
class Step:
    """One tool call the stub makes: Claude Code's tool name and input, and the shell
    command Codex runs for the same step."""

    claude_tool: str
    claude_input: dict[str, Any]
    shell: str


SUMMARY = ("<analysis>The stub's work.</analysis>\n<summary>Summary of the work so far: the "
           "stub wrote files and ran a failing check.</summary>")
DONE = "All steps done."


@dataclass
class StubModel:
    steps: list[Step | None]
    """The tool calls, in order; ``None`` ends a turn there (the reply is text), so the
    next prompt goes on with the step after it."""
    last_step_tokens: int = 100
    """``total_tokens`` reported with the last step's tool call (each other answer reports
    100): above Codex's ``model_auto_compact_token_limit``, Codex compacts once, right
    after the work, within the same turn."""
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _made: int = 0
    """Tool calls made so far (a compaction drops them from the host's history)."""
    url: str = ""

    def next_step(self) -> tuple[int, Step] | None:
        """The next tool call and its position; ``None`` when the turn ends here."""
        with self._lock:
            if self._made >= len(self.steps):
                return None
            self._made += 1
            step = self.steps[self._made - 1]
            return None if step is None else (self._made - 1, step)

    def record(self, api: str, body: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append((api, body))

    def bodies(self, api: str) -> list[dict[str, Any]]:
        with self._lock:
            return [body for kind, body in self.requests if kind == api]

    # --- Anthropic Messages --------------------------------------------------------------

    def messages_reply(self, body: dict[str, Any]) -> tuple[str, Any]:
        """("text", words) or ("tool", (name, input)) for a Messages request."""
        messages = body.get("messages") or []
        if not body.get("tools") or _asks_for_summary(_anthropic_text(messages[-1:])):
            return "text", SUMMARY if messages else "ok"
        made = self.next_step()
        if made is None:
            return "text", DONE
        return "tool", (made[1].claude_tool, made[1].claude_input)

    # --- OpenAI Responses ----------------------------------------------------------------

    def responses_reply(self, body: dict[str, Any]) -> tuple[str, Any, int]:
        """The reply and the ``total_tokens`` to report with it."""
        items = body.get("input") or []
        if not body.get("tools") or _asks_for_summary(_responses_text(items[-1:])):
            return "text", SUMMARY, 100
        made = self.next_step()
        if made is None:
            return "text", DONE, 100
        number, step = made
        tokens = self.last_step_tokens if number == len(self.steps) - 1 else 100
        return "tool", _shell_call(body.get("tools") or [], step.shell), tokens


    # --- Gemini generateContent -------------------------------------------------------

    def gemini_reply(self, body: dict[str, Any]) -> dict[str, Any]:
        """A model ``Content``: a ``functionCall`` of the next step (``claude_tool`` names
        the function as the host declared it), else text."""
        contents = body.get("contents") or []
        if not body.get("tools") or not contents:
            return {"role": "model", "parts": [{"text": "ok"}]}
        made = self.next_step()
        if made is None:
            return {"role": "model", "parts": [{"text": DONE}]}
        step = made[1]
        return {"role": "model", "parts": [{"functionCall": {
            "name": step.claude_tool, "args": step.claude_input}}]}


    # --- OpenAI Chat Completions ------------------------------------------------------

    def chat_reply(self, body: dict[str, Any]) -> dict[str, Any]:
        """An assistant message: a ``tool_calls`` entry of the next step (``claude_tool``
        names the function as the host declared it), else text."""
        if not body.get("tools"):
            return {"role": "assistant", "content": "ok"}
        made = self.next_step()
        if made is None:
            return {"role": "assistant", "content": DONE}
        number, step = made
        return {"role": "assistant", "content": None, "tool_calls": [{
            "index": 0, "id": f"call_{number + 1:04d}", "type": "function",
            "function": {"name": step.claude_tool, "arguments": json.dumps(step.claude_input)}}]}


def _asks_for_summary(text: str) -> bool:
    """The host's own compaction request: Claude Code's ("Do NOT call any tools", an
    <analysis> and a <summary> block) or Codex's ("CONTEXT CHECKPOINT COMPACTION")."""
    lowered = text.lower()
    return "do not call any tools" in lowered or "context checkpoint compaction" in lowered


def _anthropic_text(messages: list[dict[str, Any]]) -> str:
    parts = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(block.get("text", "") for block in content if isinstance(block, dict))
    return "\n".join(parts)


def _responses_text(items: list[dict[str, Any]]) -> str:
    parts = []
    for item in items:
        content = item.get("content")
        if isinstance(content, list):
            parts.extend(c.get("text", "") for c in content if isinstance(c, dict))
        elif isinstance(content, str):
            parts.append(content)
    return "\n".join(parts)


def _shell_call(tools: list[dict[str, Any]], command: str) -> dict[str, Any]:
    names = {tool.get("name") for tool in tools}
    if "exec_command" in names:
        return {"type": "function_call", "name": "exec_command",
                "arguments": json.dumps({"cmd": command})}
    return {"type": "function_call", "name": "shell",
            "arguments": json.dumps({"command": ["bash", "-lc", command]})}


# --- HTTP ------------------------------------------------------------------------------


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, *_: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self._send(404, b'{"error": {"message": "not here"}}', "application/json")

    def do_HEAD(self) -> None:
        self._send(404, b"", "application/json")

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length)
        path = self.path.split("?", 1)[0]
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        stub = self.server.stub
        number = len(stub.requests) + 1
        if path.endswith("/v1/messages"):
            stub.record("messages", body)
            self._messages(stub.messages_reply(body), bool(body.get("stream")), number)
        elif path.endswith("/v1/responses"):
            stub.record("responses", body)
            kind, value, tokens = stub.responses_reply(body)
            self._responses((kind, value), number, tokens)
        elif path.endswith(":streamGenerateContent") or path.endswith(":generateContent"):
            stub.record("gemini", body)
            self._gemini(stub.gemini_reply(body), path.endswith(":streamGenerateContent"))
        elif path.endswith("/chat/completions"):
            stub.record("chat", body)
            self._chat(stub.chat_reply(body), bool(body.get("stream")), number)
        elif path.endswith(":countTokens"):
            self._send(200, b'{"totalTokens": 100}', "application/json")
        elif path.endswith("/count_tokens"):
            self._send(200, b'{"input_tokens": 100}', "application/json")
        else:
            stub.record("other:" + path, body)
            self._send(404, b'{"error": {"message": "not here"}}', "application/json")

    def _send(self, status: int, data: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _messages(self, reply: tuple[str, Any], stream: bool, number: int) -> None:
        kind, value = reply
        if kind == "tool":
            name, arguments = value
            block: dict[str, Any] = {"type": "tool_use", "id": f"toolu_{number:04d}",
                                     "name": name, "input": {}}
            full = {**block, "input": arguments}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(arguments)}
            stop = "tool_use"
        else:
            block = {"type": "text", "text": ""}
            full = {"type": "text", "text": value}
            delta = {"type": "text_delta", "text": value}
            stop = "end_turn"
        usage = {"input_tokens": 100, "output_tokens": 20, "cache_read_input_tokens": 0,
                 "cache_creation_input_tokens": 0}
        message = {"id": f"msg_{number:04d}", "type": "message", "role": "assistant",
                   "model": "claude-stub", "content": [], "stop_reason": None,
                   "stop_sequence": None, "usage": usage}
        if not stream:
            data = json.dumps({**message, "content": [full], "stop_reason": stop}).encode()
            self._send(200, data, "application/json")
            return
        events = b"".join([
            _sse("message_start", {"type": "message_start", "message": message}),
            _sse("content_block_start", {"type": "content_block_start", "index": 0,
                                         "content_block": block}),
            _sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                         "delta": delta}),
            _sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
            _sse("message_delta", {"type": "message_delta",
                                   "delta": {"stop_reason": stop, "stop_sequence": None},
                                   "usage": {"output_tokens": 20}}),
            _sse("message_stop", {"type": "message_stop"}),
        ])
        self._send(200, events, "text/event-stream")

    def _chat(self, said: dict[str, Any], stream: bool, number: int) -> None:
        finish = "tool_calls" if said.get("tool_calls") else "stop"
        usage = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
        base = {"id": f"chatcmpl-{number:04d}", "created": 1767348000, "model": "stub"}
        if not stream:
            answer = {**base, "object": "chat.completion", "usage": usage,
                      "choices": [{"index": 0, "message": said, "finish_reason": finish}]}
            self._send(200, json.dumps(answer).encode(), "application/json")
            return
        chunks = [{**base, "object": "chat.completion.chunk",
                   "choices": [{"index": 0, "delta": said, "finish_reason": None}]},
                  {**base, "object": "chat.completion.chunk",
                   "choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
                   "usage": usage}]
        data = b"".join(f"data: {json.dumps(chunk)}\n\n".encode() for chunk in chunks)
        self._send(200, data + b"data: [DONE]\n\n", "text/event-stream")

    def _gemini(self, content: dict[str, Any], stream: bool) -> None:
        answer = {"candidates": [{"content": content, "finishReason": "STOP", "index": 0}],
                  "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 20,
                                    "totalTokenCount": 120},
                  "modelVersion": "gemini-stub"}
        if not stream:
            self._send(200, json.dumps(answer).encode(), "application/json")
            return
        self._send(200, f"data: {json.dumps(answer)}\r\n\r\n".encode(), "text/event-stream")

    def _responses(self, reply: tuple[str, Any], number: int, tokens: int) -> None:
        kind, value = reply
        if kind == "tool":
            item = {**value, "id": f"fc_{number:04d}", "call_id": f"call_{number:04d}",
                    "status": "completed"}
        else:
            item = {"type": "message", "id": f"msg_{number:04d}", "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": value, "annotations": []}]}
        response = {"id": f"resp_{number:04d}", "object": "response", "status": "in_progress",
                    "output": []}
        usage = {"input_tokens": tokens - 10, "output_tokens": 10, "total_tokens": tokens,
                 "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens_details": {"reasoning_tokens": 0}}
        events = [_sse("response.created", {"type": "response.created", "response": response}),
                  _sse("response.output_item.added", {"type": "response.output_item.added",
                                                      "output_index": 0, "item": item})]
        if kind == "text":
            events.append(_sse("response.output_text.delta", {
                "type": "response.output_text.delta", "item_id": item["id"],
                "output_index": 0, "content_index": 0, "delta": value}))
        events += [
            _sse("response.output_item.done", {"type": "response.output_item.done",
                                               "output_index": 0, "item": item}),
            _sse("response.completed", {"type": "response.completed", "response": {
                **response, "status": "completed", "output": [item], "usage": usage}}),
        ]
        self._send(200, b"".join(events), "text/event-stream")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    stub: StubModel


@contextmanager
def serving(stub: StubModel) -> Iterator[StubModel]:
    """``stub`` answering on a free port of 127.0.0.1 for the block (``stub.url``)."""
    server = _Server(("127.0.0.1", 0), _Handler)
    server.stub = stub
    stub.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield stub
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
