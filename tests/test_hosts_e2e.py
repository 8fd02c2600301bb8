"""End to end through the real hosts: ``fabric-memory install claude|codex`` into a
temporary home, a short real Claude Code / Codex session with tool calls against a stub
model server on 127.0.0.1, the host's own compaction, then the next request: the stub
receives our recovery packet in it, and every address the packet names expands (CLI and
the MCP ``expand`` tool of a real ``fabric-memory serve``) to the transcript line it names.
A question about the compacted part, asked next, reaches the model with our prompt context
(the UserPromptSubmit hook); an idle prompt with none.

The hosts never leave this machine: their model API is the stub, telemetry, updates and
non-essential traffic are off (``host_env``), and any proxy-honouring request is sent to
a closed local port."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from .agent_homes import fake_home, mcp_answers
from .host_clis import CLAUDE, CODEX, host_cli, host_env, run_host_cli
from .stub_model import Step, StubModel, serving

RUN_SECONDS = 60
"""The bound on each host run (each takes a few seconds here)."""
PACKET_HEADER = "# fabric-memory handoff"
CONTEXT_HEADER = "# fabric-memory: earlier context for this prompt"
ADDRESSED = re.compile(r"^- \[([^\]\s]+)\]", flags=re.M)


def reindex(env: dict[str, str]) -> None:
    """``fabric-memory reindex`` of the host's sessions (what the MCP server keeps live)."""
    done = subprocess.run([sys.executable, "-m", "fabric_memory.cli", "reindex"], env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr


def install(host: str, env: dict[str, str]) -> None:
    """``fabric-memory install HOST`` as a user runs it, in the host's environment: the MCP
    server added, and Claude Code's and Codex's hooks besides."""
    done = subprocess.run([sys.executable, "-m", "fabric_memory.cli", "install", host],
                          env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "added MCP server fabric-memory" in done.stdout, done.stdout
    assert done.stdout.count("added ") >= (2 if host in ("claude", "codex") else 1), done.stdout



def indexed_home(home: Path, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A work folder for a host and its environment over ``home``, whose sessions (the
    earlier ones a test laid there) are indexed first."""
    from fabric_memory.memory.reindex import reindex

    work = tmp_path / "work"
    work.mkdir()
    env = host_env(home, FABRIC_MEMORY_HOME=str(tmp_path / "fm"))
    reindex()
    return work, env

def run_host(argv: list[str], cwd: Path, env: dict[str, str]) -> str:
    done = run_host_cli(argv, cwd, env, timeout=RUN_SECONDS)
    assert done.returncode == 0, f"{argv[1:3]} exited {done.returncode}:\n{done.stderr[-2000:]}"
    return done.stdout


def addresses_expand_to_their_lines(packet: str, transcript: Path, line_of: Any,
                                    session_id: str | None = None) -> None:
    """Every ``[address]`` of the packet (or of the prompt's context, of ``session_id``),
    given to ``fabric-memory expand --raw`` (the call the packet names) and to the MCP
    ``expand`` tool, comes back as the transcript line ``line_of(address, lines)`` names,
    byte for byte."""
    if session_id is None:
        session = re.search(r"^Session (\S+),", packet, flags=re.M)
        assert session, packet
        session_id = session.group(1)
        assert f"fabric-memory expand {session_id} --address <address>" in packet
    else:
        assert "fabric-memory expand <session> --address <address>" in packet
    addresses = list(dict.fromkeys(ADDRESSED.findall(packet)))
    assert 0 < len(addresses) <= 20, packet  # one page of expand
    lines = transcript.read_bytes().decode().split("\n")
    done = subprocess.run([sys.executable, "-m", "fabric_memory.cli", "expand", session_id,
                           *[word for a in addresses for word in ("--address", a)],
                           "--raw", "--max-entries", "20", "--json"],
                          capture_output=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    mcp = mcp_answers([("expand", {"session": session_id, "addresses": addresses,
                                   "raw": True, "maxEntries": 20})])[0]
    for page in (orjson.loads(done.stdout), mcp):
        assert page["next"] is None
        assert len(page["entries"]) == len(addresses)
        for address, entry in zip(addresses, page["entries"], strict=True):
            assert entry["text"] == lines[entry["line"] - 1] == line_of(address, lines), address


def _blocks(content: Any) -> list[str]:
    """The texts of a message's content (a string, or a list of blocks)."""
    if isinstance(content, str):
        return [content]
    return [block.get("text", "") for block in content or [] if isinstance(block, dict)]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(block.get("text", "") for block in content or [] if isinstance(block, dict))


# --- Claude Code -----------------------------------------------------------------------


def claude_line(address: str, lines: list[str]) -> str:
    """The transcript line a packet's address names: a line address (``L<line>``;
    ``L<line>.N``: its N-th entry), never a line's 36-character ``uuid``."""
    match = re.fullmatch(r"L(\d+)(?:\.\d+)?", address)
    assert match, address
    line = lines[int(match.group(1)) - 1]
    assert orjson.loads(line).get("uuid"), address
    return line


def claude_context(body: dict[str, Any]) -> list[str]:
    """Our prompt context in a Messages request: the system reminders Claude Code makes of
    a UserPromptSubmit hook's additional context."""
    reminder = "<system-reminder>\nUserPromptSubmit hook additional context: "
    carried = [block for message in body["messages"]
               for block in _blocks(message["content"]) if CONTEXT_HEADER in block]
    assert all(block.startswith(reminder + CONTEXT_HEADER) for block in carried), carried
    return carried


def claude_packet(body: dict[str, Any]) -> str:
    """Our packet in a Messages request: exactly one block, the system reminder Claude Code
    makes of a SessionStart hook's additional context."""
    carried = [block for message in body["messages"]
               for block in _blocks(message["content"]) if PACKET_HEADER in block]
    assert len(carried) == 1, carried
    reminder = "<system-reminder>\nSessionStart hook additional context: "
    assert carried[0].startswith(reminder + PACKET_HEADER), carried[0][:200]
    return carried[0][len(reminder):].removesuffix("</system-reminder>").rstrip()


@pytest.mark.slow
def test_claude_code_sends_our_packet_after_each_compaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Installed with `fabric-memory install claude`, the real Claude Code runs a session
    (a Write, a failing Bash check) and compacts it (`/compact`); its next request holds
    our packet once, as the system reminder "SessionStart hook additional context: …",
    naming the file and the failed check. After more work (a second file) and a second
    compaction, the next packet speaks of that work only. Every address expands to its
    line. The question asked after the first compaction reaches the model with the
    compacted check as "UserPromptSubmit hook additional context"; the idle prompt after
    the second with none (and the first prompt, before any compaction, with none)."""
    home = fake_home(tmp_path, monkeypatch)
    work = tmp_path / "work"
    work.mkdir()
    env = host_env(home, ANTHROPIC_API_KEY="sk-stub", FABRIC_MEMORY_HOME=str(tmp_path / "fm"))
    install("claude", env)
    steps = [Step("Write", {"file_path": str(work / "notes.txt"), "content": "hello\n"}, ""),
             Step("Bash", {"command": "cat notes.txt && exit 3",
                           "description": "check the notes"}, ""),
             None,
             Step("Write", {"file_path": str(work / "second.txt"), "content": "more\n"}, "")]
    claude = host_cli(CLAUDE)
    packets, contexts = [], []
    with serving(StubModel(steps)) as stub:
        env["ANTHROPIC_BASE_URL"] = stub.url
        first = orjson.loads(run_host(
            [claude, "-p", "write the notes and check them", "--output-format", "json",
             "--allowedTools", "Write,Bash", "--model", "claude-sonnet-4-5"], work, env))
        session_id = first["session_id"]
        assert not claude_context(stub.bodies("messages")[0])
        for prompt in ("what did the cat check exit with?", "what is left to do?"):
            run_host([claude, "-p", "--resume", session_id, "/compact"], work, env)
            reindex(env)
            before = len(stub.bodies("messages"))
            run_host([claude, "-p", "--resume", session_id, prompt, "--allowedTools", "Write"],
                     work, env)
            after = [body for body in stub.bodies("messages")[before:] if body.get("tools")]
            assert after, "Claude Code sent no request after its compaction"
            packets.append(claude_packet(after[0]))
            contexts.append(claude_context(after[0]))
    assert (work / "notes.txt").read_text() == "hello\n"
    assert (work / "second.txt").read_text() == "more\n"
    transcript = next((home / ".claude" / "projects").rglob(f"{session_id}.jsonl"))
    first_packet, second_packet = packets
    assert "notes.txt" in first_packet and "cat notes.txt && exit 3" in first_packet
    assert "second.txt" in second_packet and "notes.txt" not in second_packet
    for packet in packets:
        addresses_expand_to_their_lines(packet, transcript, claude_line)
    asked, idle = contexts
    assert len(asked) == 1 and "exit 3" in asked[0] and "before its compaction" in asked[0]
    addresses_expand_to_their_lines(asked[0], transcript, claude_line, session_id)
    assert idle == []


# --- Codex -----------------------------------------------------------------------------


CODEX_CONFIG = """model = "gpt-5.5"
model_provider = "stub"
model_auto_compact_token_limit = 5000
check_for_update_on_startup = false

[model_providers.stub]
name = "stub"
base_url = "{url}/v1"
env_key = "STUB_API_KEY"
wire_api = "responses"

[analytics]
enabled = false

[feedback]
enabled = false

[features]
plugins = false
remote_plugin = false
plugin_sharing = false
apps = false
"""


def codex_line(address: str, lines: list[str]) -> str:
    """Codex addresses are ``L<line>`` (``L<line>.N``: its N-th entry)."""
    match = re.fullmatch(r"L(\d+)(?:\.\d+)?", address)
    assert match, address
    return lines[int(match.group(1)) - 1]


@pytest.mark.slow
def test_codex_sends_our_packet_after_its_compaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Installed with `fabric-memory install codex` (the hook trusted, no bypass flag), the
    real Codex runs a turn (a file written and a failing check through exec_command),
    auto-compacts past its token limit, and the turn's next request holds our packet as a
    developer message naming the failed check; every address expands to its line. In the
    session resumed, a question about the compacted check reaches the model with our
    prompt context naming it; an idle prompt adds none."""
    home = fake_home(tmp_path, monkeypatch)
    work = tmp_path / "work"
    work.mkdir()
    codex_home = home / ".codex"
    codex_home.mkdir()
    env = host_env(home, STUB_API_KEY="sk-stub", FABRIC_MEMORY_HOME=str(tmp_path / "fm"))
    steps = [Step("", {}, "printf 'hello\\n' > notes.txt"),
             Step("", {}, "cat notes.txt && exit 3")]
    codex = [host_cli(CODEX), "exec", "--skip-git-repo-check",
             "--dangerously-bypass-approvals-and-sandbox"]
    with serving(StubModel(steps, last_step_tokens=50_000)) as stub:
        (codex_home / "config.toml").write_text(CODEX_CONFIG.format(url=stub.url))
        install("codex", env)
        run_host([*codex, "write the notes and check them"], work, env)
        bodies = stub.bodies("responses")
        reindex(env)
        contexts = []
        for prompt in ("what did the cat check exit with?", "thanks, that is all"):
            before = len(stub.bodies("responses"))
            run_host([*codex, "resume", "--last", prompt], work, env)
            contexts.append([_text(item.get("content"))
                             for item in stub.bodies("responses")[before]["input"]
                             if CONTEXT_HEADER in _text(item.get("content"))])
    assert (work / "notes.txt").read_text() == "hello\n"
    compacted = [n for n, body in enumerate(bodies)
                 if "CONTEXT CHECKPOINT COMPACTION" in _text(body["input"][-1].get("content"))]
    assert len(compacted) == 1, "Codex did not compact once"
    following = bodies[compacted[0] + 1:]
    assert following, "Codex sent no request after its compaction"
    carried = [(item.get("role"), _text(item.get("content"))) for item in following[0]["input"]
               if PACKET_HEADER in _text(item.get("content"))]
    assert len(carried) == 1, [item.get("role") for item in following[0]["input"]]
    role, packet = carried[0]
    assert role == "developer" and packet.startswith(PACKET_HEADER)
    assert "cat notes.txt && exit 3" in packet
    transcript = next((codex_home / "sessions").rglob("rollout-*.jsonl"))
    addresses_expand_to_their_lines(packet, transcript, codex_line)
    asked, idle = contexts
    assert len(asked) == 1 and "exit 3" in asked[0] and "before its compaction" in asked[0]
    session_id = transcript.stem.split("-", 6)[-1]
    addresses_expand_to_their_lines(asked[0], transcript, codex_line, session_id)
    assert idle == asked  # the earlier turn's context is history now; nothing new is added


# --- the hosts' cap on SessionStart context ----------------------------------------------


CAP_EMITTER = '''import json, sys
size = int(sys.argv[1])
sys.stdin.read()
head, tail, n, lines = "CAP-START\\n", "\\nCAP-END", 0, []
def line_of(body):
    return json.dumps({"hookSpecificOutput": {"hookEventName": "SessionStart",
                                              "additionalContext": head + body + tail}},
                      ensure_ascii=False)
while len(line_of("".join(lines)).encode()) < size - 70:
    lines.append(f"line {n:06d}: a probe of the context cap, \\u00e9t\\u00e9 \\u6570\\u636e\\n")
    n += 1
body = "".join(lines)
body += "x" * (size - len(line_of(body).encode()))
sys.stdout.write(line_of(body) + "\\n")
'''
"""A SessionStart hook printing one line of exactly ``argv[1]`` bytes (the bound the handoff
keeps: its whole stdout line), its context marked at both ends, ASCII and not."""


def _cap_outcome(texts: list[str]) -> str:
    """What reached the request of a context marked ``CAP-START``/``CAP-END``: ``whole``,
    ``cut`` (its middle left out: Codex's "Warning: truncated output"), ``file`` (moved to
    a file with a preview: Claude Code's ``<persisted-output>``) or ``absent``."""
    found = [text for text in texts if "CAP-START" in text or "line 000000" in text]
    if not found:
        return "absent"
    text = max(found, key=len)
    if "<persisted-output>" in text and "Full output saved to:" in text:
        return "file"
    if "Warning: truncated output" in text or "CAP-END" not in text:
        return "cut"
    return "whole"


def _leaves(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _leaves(item)]
    if isinstance(value, list):
        return [text for item in value for text in _leaves(item)]
    return []


def _cap_run(host: str, size: int, base: Path) -> str:
    """One host session whose SessionStart(startup) hook prints ``size`` bytes: what reached
    the first model request."""
    from fabric_memory.install.codex import trust_hash, trust_key
    from fabric_memory.install.hooks import HookEvent

    home, work = base / "home", base / "work"
    home.mkdir(parents=True)
    work.mkdir()
    emitter = base / "emit.py"
    emitter.write_text(CAP_EMITTER)
    command = f"{sys.executable} {emitter} {size}"
    with serving(StubModel([])) as stub:
        if host == "claude":
            (home / ".claude").mkdir()
            (home / ".claude" / "settings.json").write_text(orjson.dumps({"hooks": {
                "SessionStart": [{"matcher": "startup", "hooks": [
                    {"type": "command", "command": command}]}]}}).decode())
            env = host_env(home, ANTHROPIC_API_KEY="sk-stub", ANTHROPIC_BASE_URL=stub.url)
            run_host([host_cli(CLAUDE), "-p", "hello", "--model", "claude-sonnet-4-5"], work,
                     env)
            bodies = [body for body in stub.bodies("messages") if body.get("tools")]
        else:
            config = home / ".codex" / "config.toml"
            config.parent.mkdir()
            event = HookEvent("SessionStart", "startup", "session_start")
            handler = {"type": "command", "command": command, "timeout": 10}
            config.write_text(
                CODEX_CONFIG.format(url=stub.url)
                + f'\n[[hooks.SessionStart]]\nmatcher = "startup"\n\n'
                f'[[hooks.SessionStart.hooks]]\ntype = "command"\n'
                f"command = {orjson.dumps(command).decode()}\ntimeout = 10\n\n"
                f'[hooks.state."{trust_key(config, 0, 0, event)}"]\n'
                f'trusted_hash = "{trust_hash("startup", handler, event)}"\n')
            env = host_env(home, STUB_API_KEY="sk-stub")
            run_host([host_cli(CODEX), "exec", "--skip-git-repo-check",
                      "--dangerously-bypass-approvals-and-sandbox", "hello"], work, env)
            bodies = stub.bodies("responses")
    assert bodies, f"{host} sent no request"
    return _cap_outcome(_leaves(bodies[0]))


@pytest.mark.slow
@pytest.mark.parametrize("host", ["claude", "codex"])
def test_the_hosts_cap_on_session_start_context(host: str, tmp_path: Path) -> None:
    """Through the real host: SessionStart context of the handoff's default bound arrives
    whole in the next request; at 16 KiB Claude Code moves it to a file (a 2 KB preview
    reaches the model) and Codex cuts its middle — so the default is the largest measured
    size that arrives whole (docs/handoff.md, "The hosts' cap")."""
    from fabric_memory.handoff import DEFAULT_MAX_BYTES

    assert DEFAULT_MAX_BYTES == 8 * 1024
    assert _cap_run(host, DEFAULT_MAX_BYTES, tmp_path / "8k") == "whole"
    assert _cap_run(host, 16 * 1024, tmp_path / "16k") == {"claude": "file",
                                                           "codex": "cut"}[host]


# --- GitHub Copilot CLI ------------------------------------------------------------------


@pytest.mark.slow
def test_copilot_lists_our_server_calls_recall_and_its_session_is_remembered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Installed with `fabric-memory install copilot`, the real Copilot CLI lists our server
    (`copilot mcp list --json`); in a session against the stub (its custom-provider mode),
    the model's `fabric-memory-recall` call reaches our server and comes back with the hit
    of an earlier Copilot session; then a failing command. The session Copilot writes is
    read by our reader: the call by its name, the command's exit code, and its entries
    recalled with `--agent copilot` and expanded to their lines byte for byte."""
    from fabric_memory.memory.expand import expand_request
    from fabric_memory.memory.recall import recall
    from fabric_memory.memory.reindex import reindex
    from fabric_memory.sources import read_source

    from .agent_homes import agent_home, line_at
    from .host_clis import COPILOT

    home = fake_home(tmp_path, monkeypatch)
    agent_home(home, "copilot", "session-state")
    work, env = indexed_home(home, tmp_path)
    install("copilot", env)
    copilot = host_cli(COPILOT)
    listed = orjson.loads(run_host([copilot, "mcp", "list", "--json"], work, env))
    ours = listed["mcpServers"]["fabric-memory"]
    assert (ours["command"], ours["args"], ours["enabled"]) == (
        str(Path(sys.executable).parent / "fabric-memory"), ["serve"], True)
    steps = [Step("fabric-memory-recall", {"query": "zephyrine", "agent": "copilot"}, ""),
             Step("bash", {"command": "ls /no-such-dir-for-copilot", "description": "list"},
                  "")]
    state = home / ".copilot" / "session-state"
    earlier = set(state.glob("*/events.jsonl"))
    with serving(StubModel(steps)) as stub:
        env.update(COPILOT_PROVIDER_BASE_URL=stub.url, COPILOT_PROVIDER_TYPE="anthropic",
                   COPILOT_MODEL="claude-sonnet-4.5", COPILOT_PROVIDER_API_KEY="sk-stub")
        run_host([copilot, "-p", "what did we do about the footnote backref?",
                  "--allow-all-tools", "--disable-client-telemetry", "-s"], work, env)
        results = [block for body in stub.bodies("messages")
                   for block in body["messages"][-1]["content"]
                   if isinstance(block, dict) and block.get("type") == "tool_result"]
    recalled = str(results[0]["content"])
    assert "8c1d2e3f-0a1b-4c2d-8e3f-4a5b6c7d8e" in recalled and "zephyrine" in recalled
    (written,) = set(state.glob("*/events.jsonl")) - earlier  # the session this run wrote
    session = read_source(written)
    assert session.agent == "copilot" and session.project == str(work)
    calls = [call.name for entry in session.entries for call in entry.view.tool_calls]
    assert calls == ["fabric-memory-recall", "bash"]
    failed = [e.raw["message"] for e in session.entries if e.view.role == "toolResult"][-1]
    assert (failed["isError"], failed["exitCode"]) == (True, 2)
    reindex()
    hit = recall("no-such-dir-for-copilot", agent="copilot")["hits"][0]
    assert hit["sessionId"] == session.session_id
    entry = expand_request({**hit["follow"], "raw": True})["entries"][0]
    assert entry["text"] == line_at(written, entry["line"])


def test_gemini_lists_our_server_calls_recall_and_its_session_is_remembered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Installed with `fabric-memory install gemini`, the real Gemini CLI lists our server as
    connected (`gemini mcp list`, in a folder it trusts); in a session against the stub (its
    `GOOGLE_GEMINI_BASE_URL`), the model's `mcp_fabric-memory_recall` call reaches our server
    and comes back with the hit of an earlier Gemini chat; then a failing command. The chat
    Gemini CLI writes is read by our reader (the checkpoint's context message, the calls,
    the command's exit code 2), recalled with `--agent gemini` and its node expanded
    exactly."""
    from fabric_memory.memory.expand import expand_request
    from fabric_memory.memory.recall import recall
    from fabric_memory.memory.reindex import reindex
    from fabric_memory.sources import read_source

    from .host_clis import GEMINI
    from .test_sources_gemini import LEGACY

    home = fake_home(tmp_path, monkeypatch)
    earlier = home / ".gemini" / "tmp" / "earlier" / "chats"
    earlier.mkdir(parents=True)
    (earlier / LEGACY.name).write_bytes(LEGACY.read_bytes())
    (home / ".gemini" / "settings.json").write_text(orjson.dumps(
        {"security": {"auth": {"selectedType": "gemini-api-key"}}}).decode())
    work, env = indexed_home(home, tmp_path)
    (home / ".gemini" / "trustedFolders.json").write_text(
        orjson.dumps({str(work): "TRUST_FOLDER"}).decode())
    install("gemini", env)
    gemini = host_cli(GEMINI)
    program = Path(sys.executable).parent / "fabric-memory"
    listed = run_host_cli([gemini, "mcp", "list"], work, env, timeout=RUN_SECONDS)
    assert listed.returncode == 0  # the list goes to stderr
    assert f"fabric-memory: {program} serve (stdio) - Connected" in listed.stderr, listed
    steps = [Step("mcp_fabric-memory_recall", {"query": "wombat", "agent": "gemini"}, ""),
             Step("run_shell_command", {"command": "ls /no-such-dir-for-gemini"}, "")]
    with serving(StubModel(steps)) as stub:
        env.update(GEMINI_API_KEY="stub-key", GOOGLE_GEMINI_BASE_URL=stub.url)
        run_host([gemini, "-p", "what failed in the quokka ledger?", "--yolo",
                  "-m", "gemini-2.5-flash"], work, env)
        answers = [part["functionResponse"] for body in stub.bodies("gemini")
                   for part in body["contents"][-1]["parts"] if "functionResponse" in part]
    assert "a1f0c3d2-0002-4e5f-8a9b-000000000002.2" in orjson.dumps(answers[0]).decode()
    written = next((home / ".gemini" / "tmp").glob("work/chats/session-*.jsonl"))
    session = read_source(written)
    assert session.agent == "gemini" and session.project == str(work)
    calls = [call.name for entry in session.entries for call in entry.view.tool_calls]
    assert calls == ["mcp_fabric-memory_recall", "run_shell_command"]
    failed = [e.raw["message"] for e in session.entries if e.view.role == "toolResult"][-1]
    assert (failed["isError"], failed["exitCode"]) == (True, 2)
    reindex()
    hit = recall("no-such-dir-for-gemini", agent="gemini")["hits"][0]
    assert hit["sessionId"] == session.session_id
    node = expand_request({**hit["follow"], "raw": True})["entries"][0]["text"]
    assert orjson.loads(node)["id"] == hit["entryId"].split(".")[0]
    assert node.encode() in written.read_bytes()


# --- Qwen Code -----------------------------------------------------------------------------


def test_qwen_lists_our_server_calls_recall_and_its_session_is_remembered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Installed with `fabric-memory install qwen`, the real Qwen Code lists our server as
    connected (`qwen mcp list`); in a session against the stub (OpenAI-compatible, its
    `OPENAI_BASE_URL`), the model's `mcp__fabric-memory__recall` call reaches our server and
    comes back with the hit of an earlier Qwen Code chat; then a failing command. The chat
    Qwen Code writes is read by our reader (the calls, the command's exit code 2), recalled
    with `--agent qwen` and its entry expanded to its line byte for byte."""
    from fabric_memory.memory.expand import expand_request
    from fabric_memory.memory.recall import recall
    from fabric_memory.memory.reindex import reindex
    from fabric_memory.sources import read_source

    from .agent_homes import line_at
    from .host_clis import QWEN
    from .test_sources_qwen import CHAT

    home = fake_home(tmp_path, monkeypatch)
    earlier = home / ".qwen" / "projects" / "-home-dev-projects-tern" / "chats"
    earlier.mkdir(parents=True)
    (earlier / CHAT.name).write_bytes(CHAT.read_bytes())
    (home / ".qwen" / "settings.json").write_text(orjson.dumps(
        {"privacy": {"usageStatisticsEnabled": False}}).decode())
    work, env = indexed_home(home, tmp_path)
    install("qwen", env)
    qwen = host_cli(QWEN)
    program = Path(sys.executable).parent / "fabric-memory"
    listed = run_host([qwen, "mcp", "list"], work, env)
    assert f"fabric-memory: {program} serve (stdio) - Connected" in listed, listed
    steps = [Step("mcp__fabric-memory__recall", {"query": "gannet_id", "agent": "qwen"}, ""),
             Step("run_shell_command", {"command": "ls /no-such-dir-for-qwen"}, "")]
    chats = home / ".qwen" / "projects"
    before = set(chats.rglob("*.jsonl"))
    with serving(StubModel(steps)) as stub:
        env.update(OPENAI_API_KEY="sk-stub", OPENAI_BASE_URL=f"{stub.url}/v1",
                   OPENAI_MODEL="qwen3-coder-plus")
        run_host([qwen, "what broke in the tern migration?", "--yolo", "--auth-type",
                  "openai"], work, env)
        results = [message for body in stub.bodies("chat") for message in body["messages"]
                   if message.get("role") == "tool"]
    recalled = _text(results[0]["content"])
    assert CHAT.stem in recalled and "gannet_id" in recalled, recalled
    (written,) = set(chats.rglob("*.jsonl")) - before  # the chat this run wrote
    session = read_source(written)
    assert session.agent == "qwen" and session.project == str(work)
    calls = [call.name for entry in session.entries for call in entry.view.tool_calls]
    assert calls == ["mcp__fabric-memory__recall", "run_shell_command"]
    failed = [e.view.message for e in session.entries
              if e.view.role == "toolResult" and e.view.message][-1]
    assert (failed["isError"], failed["exitCode"]) == (True, 2)
    reindex()
    hit = recall("no-such-dir-for-qwen", agent="qwen")["hits"][0]
    assert hit["sessionId"] == session.session_id
    entry = expand_request({**hit["follow"], "raw": True})["entries"][0]
    assert entry["text"] == line_at(written, entry["line"])


# --- OpenCode ------------------------------------------------------------------------------


ANSI = re.compile(r"\x1b\[[0-9;]*m")


def test_opencode_lists_our_server_calls_recall_and_its_session_is_remembered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Installed with `fabric-memory install opencode`, the real OpenCode lists our server as
    connected (`opencode mcp list`); in a session against the stub (its Anthropic provider's
    `baseURL` in `opencode.json`), the model's `fabric-memory_recall` call reaches our server
    and comes back with the hit of an earlier OpenCode session in the same database; then a
    failing command. The session OpenCode adds to its database is read by our reader (its
    chain: the prompt, the calls, the command's exit code 2), recalled with `--agent
    opencode` and the command's result expanded to its part's row."""
    from fabric_memory.memory.expand import expand_request
    from fabric_memory.memory.recall import recall
    from fabric_memory.memory.reindex import reindex
    from fabric_memory.sources import read_source

    from .host_clis import OPENCODE
    from .test_sources_opencode import DATABASE, SESSION

    home = fake_home(tmp_path, monkeypatch)
    database = home / ".local" / "share" / "opencode" / DATABASE.name
    database.parent.mkdir(parents=True)
    database.write_bytes(DATABASE.read_bytes())
    work, env = indexed_home(home, tmp_path)
    opencode = host_cli(OPENCODE)
    program = Path(sys.executable).parent / "fabric-memory"
    steps = [Step("fabric-memory_recall", {"query": "zephyrine", "agent": "opencode"}, ""),
             Step("bash", {"command": "ls /no-such-quokka-dir", "description": "list"}, "")]
    with serving(StubModel(steps)) as stub:
        config = home / ".config" / "opencode" / "opencode.json"
        config.parent.mkdir(parents=True)
        config.write_text(orjson.dumps({
            "autoupdate": False, "share": "disabled", "model": "anthropic/claude-sonnet-4-5",
            "provider": {"anthropic": {"options": {"baseURL": f"{stub.url}/v1",
                                                   "apiKey": "sk-stub"}}}}).decode())
        install("opencode", env)
        listed = ANSI.sub("", run_host([opencode, "mcp", "list"], work, env))
        assert re.search(rf"✓ fabric-memory\s+connected\s+│\s+{re.escape(str(program))} serve",
                         listed), listed
        run_host([opencode, "run", "what did we find out before?", "--auto"], work, env)
        results = [block for body in stub.bodies("messages")
                   for block in body["messages"][-1]["content"]
                   if isinstance(block, dict) and block.get("type") == "tool_result"]
    recalled = _text(results[0]["content"])
    assert SESSION in recalled and "zephyrine" in recalled, recalled
    session = read_source(database)
    assert session.agent == "opencode" and not session.malformed
    (start,) = [n for n, entry in enumerate(session.entries)
                if entry.parent_id is None and entry.raw["ids"][-1] == str(work)]
    chain = [session.entries[start]]
    for entry in session.entries[start + 1:]:
        if entry.parent_id != chain[-1].id:
            break
        chain.append(entry)
    assert [(e.view.role, e.view.tool_name) for e in chain] == [
        ("user", None), ("assistant", None), ("toolResult", "fabric-memory_recall"),
        ("assistant", None), ("toolResult", "bash"), ("assistant", None)]
    assert [call.name for e in chain for call in e.view.tool_calls] == [
        "fabric-memory_recall", "bash"]
    failed = chain[4].view.message
    assert failed is not None and (failed["isError"], failed["exitCode"]) == (True, 2)
    # OpenCode 1.18.33 exits with its session still in the write-ahead log (the main file
    # as it was): reindex takes the log as part of the store (docs/agents.md).
    assert database.with_name(f"{database.name}-wal").stat().st_size > 0
    reindex()
    hits = recall("no-such-quokka-dir", mode="phrase", agent="opencode")["hits"]
    result = next(hit for hit in hits if hit.get("role") == "toolResult")
    assert (result["sessionId"], result["entryId"]) == (session.session_id, chain[4].id)
    raw = expand_request({**result["follow"], "raw": True})["entries"][0]["text"]
    assert raw.encode() == chain[4].source
