"""``fabric-memory handoff`` on UserPromptSubmit: the prompt's context — recalled from what
the model no longer sees, addressed, bounded, given once, nothing for an idle prompt, and
failing open."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from bench.prompt_context import IDLE, UNRELATED, Memory, find_cut
from fabric_memory.errors import HandoffError
from fabric_memory.handoff import run_handoff
from fabric_memory.memory.reindex import reindex
from fabric_memory.prompt_context import (
    MAX_CONTEXT_BYTES,
    prompt_context,
    query_words,
    read_prompt_input,
)

from .transcripts import CWD, ClaudeTranscript, CodexRollout, exec_output

FACT = "postgres://ledger:[email protected]:5433/ledger_dev"
"""The value only the compacted part of the session holds."""


def _line(uuid: str) -> str:
    """The line address of a transcript builder's entry (its uuid ends with its line)."""
    return f"L{int(uuid[-12:])}"


def _event(session_id: str, path: Path | None, prompt: str, **extra: Any) -> bytes:
    return orjson.dumps({"session_id": session_id,
                         "transcript_path": None if path is None else str(path), "cwd": CWD,
                         "hook_event_name": "UserPromptSubmit", "prompt": prompt, **extra})


def _claude(compacted: bool = True) -> tuple[ClaudeTranscript, dict[str, str]]:
    t = ClaudeTranscript()
    marks = {"task": t.user("Set up the ledger database for local development; the "
                            "invoice export to CSV comes later.")}
    marks["fact"] = t.tool("Bash", {"command": "cat .env.local"},
                           f"DATABASE_URL={FACT}\nLEDGER_CURRENCY=EUR")
    marks["error"] = t.tool("Bash", {"command": "alembic upgrade head"},
                            "sqlalchemy.exc.OperationalError: connection refused on port 5432",
                            is_error=True)
    if compacted:
        t.compact("This session is being continued. The database was configured.")
    marks["kept"] = t.user("Now add the invoice export to CSV in ledger/export.py.")
    marks["kept_tool"] = t.tool("Write", {"file_path": "ledger/export.py",
                                          "content": "def export_invoices(rows): ..."}, "ok")
    return t, marks


@pytest.fixture
def memory(tmp_path: Path) -> dict[str, Path]:
    """The sessions folder, the fabric-memory home and the index in it (its default place)."""
    folders = {"sessions": tmp_path / "sessions", "home": tmp_path / "home"}
    folders["index"] = folders["home"] / "index"
    folders["sessions"].mkdir()
    return folders


def _index(memory: dict[str, Path]) -> None:
    reindex(sessions=memory["sessions"], index=memory["index"])


def _indexed(memory: dict[str, Path], transcript: Path) -> Path:
    """``transcript``, once the sessions folder holding it is indexed."""
    _index(memory)
    return transcript


def _compacted(memory: dict[str, Path], t: ClaudeTranscript, summary: str) -> Path:
    """``t`` compacted with ``summary`` now, written to the sessions folder and indexed."""
    t.compact(summary)
    return _indexed(memory, t.write(memory["sessions"] / f"{t.session_id}.jsonl"))


def _context(memory: dict[str, Path], data: bytes) -> str | None:
    output = prompt_context(data, memory["home"], index=str(memory["index"]),
                            sessions=str(memory["sessions"]))
    if output is None:
        return None
    value = orjson.loads(output)
    assert value["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
    return str(value["hookSpecificOutput"]["additionalContext"])


def test_a_question_about_the_compacted_part_gets_its_passage_once(
        memory: dict[str, Path]) -> None:
    """After a compaction, a question about what it replaced gets the passage holding the
    answer, with its address; the same question again gets nothing (given once)."""
    t, marks = _claude()
    path = t.write(memory["sessions"] / f"{t.session_id}.jsonl")
    _index(memory)
    data = _event(t.session_id, path, "What DATABASE_URL did the ledger database use?")
    context = _context(memory, data)
    assert context is not None and FACT in context
    assert f"[{_line(marks['fact'])}]" in context and "before its compaction" in context
    assert f"[{_line(marks['kept_tool'])}]" not in context
    assert f"[{_line(marks['kept'])}]" not in context
    assert len(context.encode()) <= MAX_CONTEXT_BYTES
    assert _context(memory, data) is None


def test_the_prompt_written_before_the_hook_does_not_answer_itself(
        memory: dict[str, Path]) -> None:
    """A host that writes the prompt to the transcript before running the hook: that last
    line is not a kept turn showing the answer; the same question asked earlier and
    answered is."""
    t, _ = _claude()
    question = "What DATABASE_URL did the ledger database use?"
    t.user(question)
    path = t.write(memory["sessions"] / f"{t.session_id}.jsonl")
    _index(memory)
    context = _context(memory, _event(t.session_id, path, question))
    assert context is not None and FACT in context
    t.assistant(f"It used {FACT}.")
    t.user(question)
    path = t.write(memory["sessions"] / f"{t.session_id}.jsonl")
    again = {**memory, "home": memory["home"] / "again"}  # (nothing given there yet)
    assert _context(again, _event(t.session_id, path, question)) is None


@pytest.mark.parametrize("prompt", [
    "hi", "hello!", "continue", "thanks", "ok, go ahead", "yes please", "/compact",
    "<command-name>/clear</command-name>", "Looks good, keep going", "thank you so much",
])
def test_an_idle_prompt_gets_nothing(memory: dict[str, Path], prompt: str) -> None:
    """Greetings, "continue", thanks and slash commands recall nothing at all."""
    assert query_words(prompt) == []
    t, _ = _claude()
    path = t.write(memory["sessions"] / f"{t.session_id}.jsonl")
    _index(memory)
    assert _context(memory, _event(t.session_id, path, prompt)) is None


@pytest.mark.parametrize("prompt", [
    "How should Kubernetes autoscale the database pods?",  # never touched (but "database")
    # two words the session holds, the rest (what the question is about) never seen:
    "Tune the ledger database for Kubernetes horizontal pod autoscalers",
    "Where is the invoice export to CSV written?",  # the kept turns show it
])
def test_nothing_when_the_sessions_never_touched_it_or_the_kept_turns_show_it(
        memory: dict[str, Path], prompt: str) -> None:
    """A question no session touched, or one whose answer is in the turns the model still
    sees, gets nothing."""
    t, _ = _claude()
    path = t.write(memory["sessions"] / f"{t.session_id}.jsonl")
    _index(memory)
    assert _context(memory, _event(t.session_id, path, prompt)) is None


def test_a_session_never_compacted_adds_nothing_of_its_own(memory: dict[str, Path]) -> None:
    """The model sees the whole of a session never compacted: none of it is injected."""
    t, _ = _claude(compacted=False)
    path = t.write(memory["sessions"] / f"{t.session_id}.jsonl")
    _index(memory)
    assert _context(memory, _event(t.session_id, path, "What DATABASE_URL did the ledger "
                                                       "database use?")) is None


def test_the_projects_other_sessions_come_after_this_ones(memory: dict[str, Path]) -> None:
    """Another session of the same project answers too, under its own heading, after this
    session's passages."""
    earlier = ClaudeTranscript(session_id="5d3c1b2a-0000-4000-8000-0000000e0001")
    earlier.user("Pin the ledger database image.")
    earlier.tool("Edit", {"file_path": "docker-compose.yml", "old_string": "postgres:15",
                          "new_string": "postgres:16.4"},
                 "ledger database image pinned to postgres:16.4 (DATABASE_URL unchanged)")
    earlier.write(memory["sessions"] / f"{earlier.session_id}.jsonl")
    t, _ = _claude()
    path = t.write(memory["sessions"] / f"{t.session_id}.jsonl")
    _index(memory)
    context = _context(memory, _event(t.session_id, path, "Which DATABASE_URL and postgres "
                                                          "image does the ledger database use?"))
    assert context is not None
    assert context.index("before its compaction") < context.index(
        f"Session {earlier.session_id} (same project)")
    assert "postgres:16.4" in context and FACT in context


def test_codex_keeps_the_users_messages_so_they_are_not_injected(
        memory: dict[str, Path]) -> None:
    """Codex keeps the user's own messages through a compaction: a fact only a user message
    before it holds is not injected; a tool's output before it is."""
    r = CodexRollout()
    r.user("The staging cluster is named ledger-eu-west-7, remember that.")
    output = r.call("exec_command", {"cmd": "cat .env.local"},
                    exec_output(0, f"DATABASE_URL={FACT}"))
    r.compacted("The user set up the ledger database.")
    r.user("Now write the export.")
    path = r.write(memory["sessions"] / f"rollout-2026-07-01T10-00-00-{r.session_id}.jsonl")
    _index(memory)
    assert _context(memory, _event(r.session_id, path, "Which staging cluster should I "
                                                       "remember?")) is None
    context = _context(memory, _event(r.session_id, path, "What DATABASE_URL does the "
                                                          "ledger use?"))
    assert context is not None and FACT in context and f"[L{output}]" in context


def test_the_context_stays_within_its_bound(memory: dict[str, Path]) -> None:
    """Many matching passages: the context keeps to its 2 KiB and to whole passages."""
    t = ClaudeTranscript()
    for n in range(30):
        t.tool("Bash", {"command": f"deploy ledger shard {n}"},
               f"ledger shard {n} deploy failed: quota exceeded in region eu-{n} " * 4)
    t.compact("Deploys were tried.")
    t.user("Let us look at something else.")
    path = t.write(memory["sessions"] / f"{t.session_id}.jsonl")
    _index(memory)
    context = _context(memory, _event(t.session_id, path, "which region had the ledger shard "
                                                          "deploy quota exceeded?"))
    assert context is not None and len(context.encode()) <= MAX_CONTEXT_BYTES
    assert context.count("\n- [") >= 3 and context.endswith("\n")


def test_a_passage_comes_with_the_turns_beside_it(memory: dict[str, Path]) -> None:
    """A reply comes with the user message it answers and the user's answer to its question;
    a command comes with its output: what the passage alone does not say ("let's go 100",
    "3 failed") is given beside it, with its address, once."""
    t = ClaudeTranscript()
    asked = t.user("The ledger scan walks every commit back to the first one.")
    question = t.assistant("Should the ledger scan stop at a maxDepth of commits? Which "
                           "value do you want?")
    answer = t.user("50 is too few. let's go 100")
    noted = t.assistant("Noted. The invoice export keeps its rounding as it is.")
    output = t.tool("Bash", {"command": "pytest tests/test_invoice_rounding.py"},
                    "3 failed, 9 passed in 0.41s")
    path = _compacted(memory, t, "The scan was limited.")
    context = _context(memory, _event(t.session_id, path, "Which maxDepth value should the "
                                                          "ledger scan use?"))
    assert context is not None
    assert f"- [{_line(question)}] assistant" in context
    assert f"  before it, [{_line(asked)}] user: The ledger scan walks" in context
    assert f"  after it, [{_line(answer)}] user: 50 is too few. let's go 100" in context
    assert len(context.encode()) <= MAX_CONTEXT_BYTES
    tests = _context(memory, _event(t.session_id, path, "Did the invoice rounding tests "
                                                        "pass under pytest?"))
    assert tests is not None and "pytest tests/test_invoice_rounding.py" in tests
    assert f"  after it, [{_line(output)}] Bash: Bash 3 failed, 9 passed" in tests
    # The answer given beside a passage is not given beside another one again (a home
    # where nothing was given yet shows it there).
    rounding = _event(t.session_id, path, "Does the invoice export keep its rounding?")
    fresh = {**memory, "home": memory["home"] / "fresh"}
    first = _context(fresh, rounding)
    assert first is not None and f"  before it, [{_line(answer)}] user" in first
    again = _context(memory, rounding)
    assert again is not None and f"[{_line(noted)}]" in again and "go 100" not in again


def test_a_reply_comes_with_the_output_it_read(memory: dict[str, Path]) -> None:
    """A reply that reads a tool's output comes with that output (the hash it names) and
    with the user message it answers, in their order; the output with that user message and
    the call that ran it."""
    t = ClaudeTranscript()
    asked = t.user("Check what the last commit did.")
    output = t.tool("Bash", {"command": "git show --stat HEAD"},
                    "9f2c1ab (HEAD -> main)\n 7 files changed, 88 insertions(+)")
    reading = t.assistant("That commit landed the currency pin for the ledger.")
    path = _compacted(memory, t, "The commit was checked.")
    context = _context(memory, _event(t.session_id, path, "Which commit landed the ledger "
                                                          "currency pin?"))
    assert context is not None
    passage = context.index(f"- [{_line(reading)}] assistant")
    user = context.index(f"  before it, [{_line(asked)}] user: Check what the last commit")
    read = context.index(f"  before it, [{_line(output)}] Bash: Bash 9f2c1ab (HEAD -> main)")
    assert passage < user < read
    # The output itself comes with the user message that asked for it and its call.
    fresh = {**memory, "home": memory["home"] / "fresh"}
    stat = _context(fresh, _event(t.session_id, path, "Which commit had 7 files changed and "
                                                      "88 insertions?"))
    assert stat is not None and f"- [{_line(output)}] Bash" in stat
    asked_at = stat.index(f"  before it, [{_line(asked)}] user: Check what the last commit")
    assert asked_at < stat.index("  before it, [L2] assistant: Bash git show --stat HEAD")


def test_a_reply_comes_with_the_output_of_the_call_it_makes(memory: dict[str, Path]) -> None:
    """A reply's text and its call are entries of their own: the reply comes with the output
    of the call it goes on to make (the hash the commit printed)."""
    t = ClaudeTranscript()
    reply = t.assistant("Let me commit the invoice rounding fix.")
    t.tool("Bash", {"command": "git commit -am 'Round invoices half up'"},
           "[main 4c0ffee] Round invoices half up")
    path = _compacted(memory, t, "The fix was committed.")
    context = _context(memory, _event(t.session_id, path, "Which commit landed the invoice "
                                                          "rounding fix?"))
    assert context is not None and f"- [{_line(reply)}] assistant" in context
    assert "  after it, [L3] Bash: Bash [main 4c0ffee] Round invoices half up" in context


def test_a_call_comes_with_its_own_output_among_parallel_ones(
        memory: dict[str, Path]) -> None:
    """Parallel calls are written first, their outputs after them in any order: a call comes
    with the output that names its id, an output with the call it answers."""
    t = ClaudeTranscript()
    t.user("Check the money rounding.")
    tests, notes = t.parallel(  # (the calls at L2 and L3, their outputs at L5 and L4)
        ("Bash", {"command": "pytest tests/test_money_rounding.py -q"},
         "4 failed, 12 passed in 0.52s"),
        ("Read", {"file_path": "docs/currency.md"}, "Amounts round half up to the cent."))
    path = _compacted(memory, t, "Rounding was checked.")
    context = _context(memory, _event(t.session_id, path, "Did the money rounding tests pass "
                                                          "under pytest?"))
    assert context is not None
    assert f"  after it, [{_line(tests)}] Bash: Bash 4 failed, 12 passed" in context
    assert f"[{_line(notes)}]" not in context
    fresh = {**memory, "home": memory["home"] / "fresh"}  # (where the call was not given)
    failed = _context(fresh, _event(t.session_id, path, "Which run had 4 failed and 12 "
                                                        "passed?"))
    assert failed is not None and f"- [{_line(tests)}] Bash" in failed
    assert "  before it, [L2] assistant: Bash pytest tests/test_money_rounding.py" in failed
    assert "docs/currency.md" not in failed


def test_a_turn_the_model_still_sees_is_not_given_beside_a_passage(
        memory: dict[str, Path]) -> None:
    """Codex keeps the user's own messages through a compaction: the reply before it comes
    without the user message it answers, which the model still sees."""
    r = CodexRollout()
    r.user("Set up the ledger database behind the staging firewall.")
    reply = r.assistant("The staging firewall only opens port 5433, so the ledger database "
                        "will listen on 5433.")
    r.compacted("The user set up the ledger database.")
    path = _indexed(memory, r.write(
        memory["sessions"] / f"rollout-2026-07-01T10-00-00-{r.session_id}.jsonl"))
    context = _context(memory, _event(r.session_id, path, "Which port does the ledger "
                                                          "database listen on?"))
    assert context is not None and f"[L{reply}]" in context
    assert "before it," not in context and "behind the staging firewall" not in context


def test_prompt_input_errors_name_the_json_path() -> None:
    """A prompt that is not a string, or a transcript path that is not one, is named."""
    with pytest.raises(HandoffError, match=r"\$\.prompt must be a string"):
        read_prompt_input(orjson.dumps({"session_id": "s", "hook_event_name":
                                        "UserPromptSubmit", "prompt": 3}))
    with pytest.raises(HandoffError, match=r"\$\.transcript_path must be a path or null"):
        read_prompt_input(orjson.dumps({"session_id": "s", "hook_event_name":
                                        "UserPromptSubmit", "prompt": "x",
                                        "transcript_path": 7}))


def test_the_hook_fails_open_without_an_index(memory: dict[str, Path],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """No memory index: nothing printed, the reason logged."""
    t, _ = _claude()
    path = t.write(memory["sessions"] / f"{t.session_id}.jsonl")
    monkeypatch.setenv("FABRIC_MEMORY_HOME", str(memory["home"]))
    monkeypatch.setenv("FABRIC_MEMORY_SESSIONS", str(memory["sessions"]))
    log = memory["home"] / "handoff.log"
    run = run_handoff(_event(t.session_id, path, "What DATABASE_URL did the ledger use?"),
                      log=log)
    assert run.output is None and run.reason
    assert t.session_id in log.read_text()


def test_the_hook_answers_while_the_index_writer_is_held(memory: dict[str, Path]) -> None:
    """Another process holding the index's writer lock does not hold the prompt up."""
    t, _ = _claude()
    path = t.write(memory["sessions"] / f"{t.session_id}.jsonl")
    _index(memory)
    with path.open("ab") as out:  # the session moved on since it was indexed
        out.write(orjson.dumps({"type": "user", "uuid": "c0000000-0000-4000-8000-999999999999",
                                "parentUuid": t.last, "sessionId": t.session_id,
                                "message": {"role": "user", "content": "more"}}) + b"\n")
    locks = list(memory["index"].rglob("writer.lock"))
    assert locks
    with locks[0].open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        context = _context(memory, _event(t.session_id, path, "What was the ledger "
                                                              "DATABASE_URL?"))
    assert context is not None and FACT in context


def test_the_command_prints_the_hosts_shape(memory: dict[str, Path]) -> None:
    """``fabric-memory handoff`` as a process: UserPromptSubmit's JSON on stdout, nothing
    for an idle prompt."""
    t, _ = _claude()
    path = t.write(memory["sessions"] / f"{t.session_id}.jsonl")
    _index(memory)
    env = {**os.environ, "FABRIC_MEMORY_HOME": str(memory["home"]),
           "FABRIC_MEMORY_SESSIONS": str(memory["sessions"])}

    def run(prompt: str) -> str:
        return subprocess.run([sys.executable, "-m", "fabric_memory.cli", "handoff"],
                              input=_event(t.session_id, path, prompt), capture_output=True,
                              env=env, check=True, timeout=30).stdout.decode()

    assert run("thanks, continue") == ""
    value = orjson.loads(run("What was the ledger DATABASE_URL?"))
    assert FACT in value["hookSpecificOutput"]["additionalContext"]


def test_nothing_to_recall_injects_nothing_at_a_real_compaction(tmp_path: Path) -> None:
    """At a real Pi compaction (fixtures/pi-mono-real/compact.jsonl), indexed beside the
    other real sessions of its project, 30 prompts with nothing to recall — greetings and
    "continue", questions no session touched, the kept turns' own questions — get
    nothing (bench/prompt_context.py measures the same at every dev cut)."""
    cut = find_cut("compact.jsonl", "L574")
    assert cut is not None and len(cut.kept_prompts) == 2
    memory = Memory.at(cut, tmp_path)
    prompts = [*IDLE, *UNRELATED, *cut.kept_prompts]
    assert len(prompts) >= 30
    assert {prompt: memory.context(prompt) for prompt in prompts} == dict.fromkeys(prompts)
    assert memory.context("Which branch holds the AgentSession refactor plan?") is not None
