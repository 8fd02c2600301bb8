"""Secrets never leave through memory: planted credentials of every kind and form, in every
place a session holds text (and in argument values named as secrets, in tokens cut
between two text blocks, behind JSON escapes a lone surrogate keeps orjson from reading,
under a duplicate key), are absent from recall (literal, phrase, regex, with filters),
snippets, default expand, the compaction summary, the hook, audit output, the MCP server
and the Pi tools; ``--show-secrets`` returns them. Values that only look like secrets
(shas, uuids, public keys, field names, numbers) stay recallable."""

from __future__ import annotations

import io
import random
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from fabric_memory.audit import audit_secrets, render_secret_audit
from fabric_memory.cli import main
from fabric_memory.compaction import Compaction, CompactionSettings, compact_session
from fabric_memory.memory import expand as expand_module
from fabric_memory.memory import normalize
from fabric_memory.memory.expand import expand, expand_request
from fabric_memory.memory.index import analyze
from fabric_memory.memory.recall import recall, recall_request
from fabric_memory.memory.reindex import reindex
from fabric_memory.redact import KINDS

from .memory_builder import SessionBuilder, operation
from .secret_samples import FORMS, MAKERS, SECRET_ARGUMENTS, Sample, survivors

PLACES = ("compaction", "user", "bash", "tool-call", "thinking", "custom", "fabric")
"""Compaction entries first: a new compaction summarizes what follows the last one."""
SAMPLES = {**MAKERS, **FORMS}
"""Every kind, and every form of a kind the rules once missed."""


@dataclass(frozen=True, slots=True)
class Planted:
    place: str
    sample: Sample
    address: str
    """Where audit must report it (an entry id, or the operation's address)."""
    audited: bool = True
    """False under a duplicate key: the entry as read (the last value) does not hold it."""


@dataclass(frozen=True, slots=True)
class Leaky:
    sessions: Path
    index: Path
    path: Path
    planted: tuple[Planted, ...]
    kept: tuple[tuple[str, str], ...] = ()
    """(text, word) planted that must stay recallable (see ``survivors``)."""

    @property
    def values(self) -> list[str]:
        return [value for p in self.planted for value in p.sample.values]

    @property
    def roots(self) -> dict[str, Any]:
        return {"sessions": self.sessions, "index": self.index}


def _plant(builder: SessionBuilder, place: str, sample: Sample, n: int) -> str:
    """One entry holding ``sample`` in ``place``; returns the address audit should name."""
    text = sample.text
    if place == "user":
        # Phrased so the compactor keeps it as a fact and a constraint too.
        return builder.user(f"Remember this, you must keep it: {text}")
    if place == "bash":
        return builder.bash("cat .env", f"loaded\n{text}\ndone")
    if place == "tool-call":
        return builder.assistant_call(f"call-t{n}", "bash", {"command": f"echo {text}"})
    if place == "thinking":
        return builder.assistant([{"type": "thinking", "thinking": f"the user gave {text}"},
                                  {"type": "text", "text": "noted"}])
    if place == "custom":
        return builder.custom_message("notes", f"pasted: {text}")
    if place == "fabric":
        builder.assistant_call(f"call-f{n}", "fabric_exec", {"code": "await pi.bash(x)"})
        builder.fabric_result(f"call-f{n}", [operation(1, "pi.bash", {"command": text})])
        return f"{builder.leaf}/1"
    assert place == "compaction"
    first = builder.user(f"before compaction {n}")
    return builder.compaction(f"## Facts\n- {text}\n", first)


def _nested(path: tuple[str, ...], value: str) -> dict[str, Any]:
    nested: Any = value
    for key in reversed(path):
        nested = {key: nested}
    return {"target": "prod", **nested}


def _plant_structure(builder: SessionBuilder, rng: random.Random) -> list[Planted]:
    """Secrets only the entry's structure shows: argument values under secret names (in a
    tool call and in an operation), tokens cut between two text blocks (user, assistant,
    thinking), an escaped token on a line orjson refuses, a token under a duplicate key."""
    planted = []
    for n, path in enumerate(SECRET_ARGUMENTS):
        value = "Zq" + MAKERS["assigned-secret"](rng).values[0].replace("-", "x") + "9"
        sample = Sample("assigned-secret", value, (value,))
        arguments = _nested(path, value)
        planted.append(Planted("named-argument", sample,
                               builder.assistant_call(f"call-a{n}", "deploy", arguments)))
        builder.tool_result(f"call-a{n}", "deploy")
        builder.assistant_call(f"call-o{n}", "fabric_exec", {"code": "await pi.http(x)"})
        builder.fabric_result(f"call-o{n}", [operation(1, "pi.http", arguments)])
        planted.append(Planted("named-operation-argument", sample, f"{builder.leaf}/1"))
    for n, kind in enumerate(("github-token", "huggingface-token", "basic-auth", "jwt")):
        sample = MAKERS[kind](rng)
        value = max(sample.values, key=len)
        at = sample.text.index(value) + len(value) // 2
        halves = Sample(kind, sample.text, (value[: len(value) // 2], value[len(value) // 2 :]))
        first, second = sample.text[:at], sample.text[at:]
        role = ("user", "assistant", "assistant", "user")[n]
        blocks: list[dict[str, Any]] = [{"type": "text", "text": f"Remember: {first}"},
                                        {"type": "text", "text": f"{second} (split)"}]
        if n == 2:
            blocks[1] = {"type": "thinking", "thinking": f"{second} (split)"}
        planted.append(Planted(f"split-{role}", halves, builder._entry(
            "message", message={"role": role, "timestamp": 0, "content": blocks})))
        builder.assistant([{"type": "text", "text": f"ok split {n}"}])
    token = MAKERS["github-token"](rng).values[0]
    escaped = builder.user("LONE_SURROGATE_PLACEHOLDER")
    builder.lines[-1] = builder.lines[-1].replace(
        b'"LONE_SURROGATE_PLACEHOLDER"', b'"odd \\ud800 then \\u0067' + token[1:].encode() + b'"')
    planted.append(Planted("lone-surrogate", Sample("github-token", token, (token[1:],)), escaped))
    hidden = MAKERS["gitlab-token"](rng).values[0]
    duplicate = builder.user("nothing here")
    builder.lines[-1] = builder.lines[-1].replace(
        b'"message":', b'"message":{"role":"user","content":"' + hidden.encode()
        + b'","timestamp":0},"message":', 1)
    planted.append(Planted("duplicate-key", Sample("gitlab-token", hidden, (hidden,)), duplicate,
                           audited=False))
    return planted


@pytest.fixture(scope="module")
def leaky(tmp_path_factory: pytest.TempPathFactory) -> Leaky:
    """One session with a sample of every kind and form in every place, the structural
    plants and the values that must survive, indexed."""
    base = tmp_path_factory.mktemp("leaky")
    path = base / "sessions" / "--home-dev-leaky--" / "2026-01-02T10-00-00-000Z_leaky.jsonl"
    builder = SessionBuilder(path)
    rng = random.Random(1313)
    planted = []
    for n, (place, kind) in enumerate((p, k) for p in PLACES for k in SAMPLES):
        sample = SAMPLES[kind](rng)
        planted.append(Planted(place, sample, _plant(builder, place, sample, n)))
        builder.assistant([{"type": "text", "text": f"ok {n}"}])
    planted.extend(_plant_structure(builder, rng))
    kept = survivors(random.Random(77))
    for n, (text, _) in enumerate(kept):
        builder.user(f"config line: {text}")
        builder.bash("cat settings.ini", f"[app]\n{text}\n")
        builder.assistant_call(f"call-k{n}", "bash", {"command": f"echo '{text}'"})
        builder.tool_result(f"call-k{n}", "bash")
    builder.user("What is left to do?")
    builder.assistant([{"type": "text", "text": "Nothing; the work is done."}])
    builder.write()
    leaky = Leaky(base / "sessions", base / "index", path, tuple(planted), tuple(kept))
    reindex(**leaky.roots, workers=1)
    return leaky


# --- the checks (each returns what leaked; the sabotage test expects them non-empty) -------


def _queries(value: str) -> Iterator[tuple[str, str]]:
    """(mode, query) that would find ``value`` if its text were in the index (a word
    longer than the index keeps is searchable only by the regex)."""
    if analyze(value):
        yield "literal", value
        yield "phrase", value
    chunk = max("".join(c if c.isalnum() else " " for c in value).split(), key=len)
    yield "regex", f"{chunk[:24].lower()}.*"


def recall_leaks(leaky: Leaky) -> list[str]:
    found = []
    for value in leaky.values:
        for mode, query in _queries(value):
            # every word of the value: a relaxed search would match its common words too
            if recall(query, mode=mode, match="all",  # type: ignore[arg-type]
                      **leaky.roots)["total"]:
                found.append(f"{mode} {query}")
    return found


FILTERS: dict[str, dict[str, str]] = {
    "user": {"role": "user"}, "bash": {"role": "bashExecution"},
    "tool-call": {"tool": "bash"}, "thinking": {"role": "assistant"},
    "fabric": {"ref": "pi.bash", "outcome": "succeeded"},
    "named-argument": {"tool": "deploy"}, "named-operation-argument": {"provider": "pi"},
}
"""The filters a search for each place's secret would use."""


def recall_filter_leaks(leaky: Leaky) -> list[str]:
    found = []
    for planted in leaky.planted:
        filters = FILTERS.get(planted.place, {"branches": "all"})
        for value in planted.sample.values:
            for mode, query in _queries(value):
                if recall(query, mode=mode, match="all", **filters,  # type: ignore[arg-type]
                          **leaky.roots)["total"]:
                    found.append(f"{mode} {query} {filters}")
    return found


def _all_hits(leaky: Leaky, query: str) -> Iterator[dict[str, Any]]:
    response: Any = recall(query, match="any", limit=50, **leaky.roots)
    while True:
        yield from response["hits"]
        if response["next"] is None:
            return
        response = recall_request(response["next"])


def snippet_leaks(leaky: Leaky) -> list[str]:
    words = "loaded pasted remember echo gave facts redacted"
    snippets = [hit["snippet"] for hit in _all_hits(leaky, words)]
    assert len(snippets) >= len(leaky.planted) - len(MAKERS)
    return [value for value in leaky.values if any(value in s for s in snippets)]


def _expanded_text(leaky: Leaky, show_secrets: bool, raw: bool = False) -> str:
    count = len(leaky.path.read_bytes().splitlines()) - 1
    operations = [p.address for p in leaky.planted
                  if p.place in ("fabric", "named-operation-argument")]
    texts = []
    for selection in ({"positions": f"0:{count - 1}"}, {"addresses": operations}):
        page: Any = expand(str(leaky.path), **selection, max_entries=20,  # type: ignore[arg-type]
                           show_secrets=show_secrets, raw=raw, **leaky.roots)
        while True:
            texts.extend(entry["text"] for entry in page["entries"])
            if page["next"] is None:
                break
            page = expand_request(page["next"])
    return "\n".join(texts)


def expand_leaks(leaky: Leaky) -> list[str]:
    text = _expanded_text(leaky, show_secrets=False)
    return [value for value in leaky.values if value in text]


def raw_expand_leaks(leaky: Leaky) -> list[str]:
    text = _expanded_text(leaky, show_secrets=False, raw=True)
    return [value for value in leaky.values if value in text]


def _compaction(leaky: Leaky) -> Compaction:
    outcome = compact_session(leaky.path, CompactionSettings(keep_recent_tokens=50)).outcome
    assert isinstance(outcome, Compaction)
    return outcome


def summary_leaks(leaky: Leaky) -> list[str]:
    compaction = _compaction(leaky)
    written = compaction.summary + orjson.dumps(compaction.details).decode()
    return [value for value in leaky.values if value in written]


def audit_leaks(leaky: Leaky) -> list[str]:
    report = audit_secrets(leaky.sessions)
    shown = render_secret_audit(report) + orjson.dumps(report).decode()
    return [value for value in leaky.values if value in shown]


def _hook_event(leaky: Leaky) -> dict[str, Any]:
    from fabric_memory.compaction import prepare_compaction
    from fabric_memory.session import read_session

    branch = read_session(leaky.path).active_branch()
    prepared = prepare_compaction(branch, CompactionSettings(keep_recent_tokens=50))
    assert prepared is not None
    return {"type": "session_before_compact", "preparation": dict(prepared.to_event()),
            "branchEntries": [entry.raw for entry in branch], "signal": {"aborted": False}}


def _run_cli(argv: list[str], stdin: bytes) -> tuple[int, str]:
    """``fabric-memory ARGV`` in process, ``stdin`` as its standard input."""
    saved_in, saved_out = sys.stdin, sys.stdout
    written = io.BytesIO()
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin))
    sys.stdout = io.TextIOWrapper(written, encoding="utf-8", write_through=True)
    try:
        status = main(argv)
        sys.stdout.flush()
        return status, written.getvalue().decode()
    finally:
        sys.stdin, sys.stdout = saved_in, saved_out


def hook_leaks(leaky: Leaky) -> list[str]:
    """`fabric-memory hook` fed the session's branch as Pi's event."""
    status, out = _run_cli(["hook"], orjson.dumps(_hook_event(leaky)))
    assert status == 0 and "compaction" in orjson.loads(out), out[:300]
    return [value for value in leaky.values if value in out]


def pi_tool_leaks(leaky: Leaky) -> list[str]:
    """`fabric-memory pi tool memory_recall|memory_expand`, the model's door."""
    env = {"FABRIC_MEMORY_SESSIONS": str(leaky.sessions),
           "FABRIC_MEMORY_HOME": str(leaky.index.parent)}
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        answers = []
        for value in leaky.values:
            for mode, query in _queries(value):
                answers.append(_run_cli(["pi", "tool", "memory_recall"], orjson.dumps(
                    {"query": query, "mode": mode, "match": "all"}))[1])
        answers.append(_run_cli(["pi", "tool", "memory_recall"], orjson.dumps(
            {"query": "loaded pasted remember echo gave facts redacted", "match": "any",
             "limit": 50}))[1])
        count = len(leaky.path.read_bytes().splitlines()) - 1
        request: Any = {"session": str(leaky.path), "positions": f"0:{count - 1}",
                        "maxEntries": 20, "maxChars": 24_000}
        while request is not None:
            answer = _run_cli(["pi", "tool", "memory_expand"], orjson.dumps(request))[1]
            answers.append(answer)
            request = orjson.loads(answer)["details"]["next"]
    shown = "\n".join(answers)
    assert '"entries"' in shown and '"hits"' in shown
    return [value for value in leaky.values if value in shown]


CHECKS: dict[str, Callable[[Leaky], list[str]]] = {
    "recall": recall_leaks, "recall-filters": recall_filter_leaks, "snippets": snippet_leaks,
    "expand": expand_leaks, "expand-raw": raw_expand_leaks, "summary": summary_leaks,
    "hook": hook_leaks, "pi-tools": pi_tool_leaks, "audit": audit_leaks,
}


@pytest.mark.parametrize("check", list(CHECKS))
def test_no_planted_secret_leaves(leaky: Leaky, check: str) -> None:
    """Not one planted value (19 kinds and 7 forms in 7 places, plus argument values named as
    secrets, tokens cut between blocks, an escaped and a duplicate-key token) comes back
    through this answer."""
    assert CHECKS[check](leaky) == []


def test_values_that_only_look_like_secrets_stay_recallable(leaky: Leaky) -> None:
    """Shas, uuids, public keys, fingerprints, field names, partition values and numbers
    under secret-like names (cache_key, idempotency_key, public_key, sort_key, max_token...)
    are found by recall in every mode that can find them and shown by default expand."""
    assert len(leaky.kept) >= 15
    missing = [f"{mode} {query}" for _, word in leaky.kept for mode, query in _queries(word)
               if not recall(query, mode=mode, match="all",  # type: ignore[arg-type]
                             **leaky.roots)["total"]]
    assert missing == []
    expanded = _expanded_text(leaky, show_secrets=False)
    assert [word for _, word in leaky.kept if expanded.count(word) < 3] == []


def test_mcp_answers_leak_nothing(leaky: Leaky) -> None:
    """Through the real MCP server (the official client, `fabric-memory serve`), no planted
    value comes back from recall (every mode) or default expand; `showSecrets` returns them,
    so the check sees a value when one is there."""
    import anyio

    from .test_serve import connected, value

    places = {"sessions": leaky.sessions, "index": leaky.index}

    async def expanded(client: Any, show: bool) -> str:
        count = len(leaky.path.read_bytes().splitlines()) - 1
        request: Any = {"session": str(leaky.path), "positions": f"0:{count - 1}",
                        "maxEntries": 20, "showSecrets": show, "raw": show}
        texts = []
        while request is not None:
            page = value(await client.call_tool("expand", request))
            texts.extend(entry["text"] for entry in page["entries"])
            request = page["next"]
        return "\n".join(texts)

    async def body() -> None:
        async with connected(places) as client:
            found = []
            for planted in leaky.planted:
                for leaked in planted.sample.values:
                    for mode, query in _queries(leaked):
                        answer = value(await client.call_tool(
                            "recall", {"query": query, "mode": mode, "match": "all"}))
                        if answer["total"]:
                            found.append(f"{planted.place} {mode} {query}")
            assert found == []
            masked = await expanded(client, show=False)
            assert [v for v in leaky.values if v in masked] == []
            raw = await expanded(client, show=True)
            assert [p.place for p in leaky.planted if p.place == "user"
                    and not all(v in raw for v in p.sample.values)] == []

    anyio.run(body)


def test_summary_still_says_where_the_secret_was(leaky: Leaky) -> None:
    """The summary keeps the user's fact, its secret masked by kind."""
    summary = _compaction(leaky).summary
    assert "Remember this, you must keep it:" in summary
    assert "[REDACTED:" in summary


def test_show_secrets_returns_the_raw_bytes(leaky: Leaky) -> None:
    """On explicit request expand returns every planted value, as the file holds it."""
    text = _expanded_text(leaky, show_secrets=True, raw=True)
    assert [value for value in leaky.values if value not in text
            and orjson.dumps(value).decode()[1:-1] not in text] == []
    page = expand(str(leaky.path), entries=["e001"], show_secrets=True, raw=True, **leaky.roots)
    assert page["entries"][0]["text"].encode() == leaky.path.read_bytes().splitlines()[1]


def test_show_secrets_is_carried_by_next(leaky: Leaky) -> None:
    """A page asked with show_secrets continues with show_secrets; a masked one stays masked."""
    raw: Any = expand(str(leaky.path), range="0:30", max_entries=2, show_secrets=True,
                      **leaky.roots)
    masked: Any = expand(str(leaky.path), range="0:30", max_entries=2, **leaky.roots)
    assert raw["next"]["showSecrets"] is True and "showSecrets" not in masked["next"]


def test_reindex_reports_redactions_by_kind(leaky: Leaky, tmp_path: Path) -> None:
    """A full reindex counts what it masked, by kind: every kind, at least once per place
    that is indexed."""
    report = reindex(sessions=leaky.sessions, index=tmp_path / "index", workers=1)
    assert set(report["redacted"]) == set(KINDS)
    assert all(n >= len(PLACES) for n in report["redacted"].values())


def test_reindex_json_and_human_output_name_the_counts(
    leaky: Leaky, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`reindex --json` carries `redacted`; the human line lists the kinds."""
    args = ["reindex", "--sessions", str(leaky.sessions), "--index", str(tmp_path / "i")]
    assert main([*args, "--json"]) == 0
    assert set(orjson.loads(capsys.readouterr().out)["redacted"]) == set(KINDS)
    assert main([*args, "--full"]) == 0
    assert "secrets masked in the index: anthropic-key" in capsys.readouterr().out


def test_audit_names_every_place_by_address_and_kind(leaky: Leaky) -> None:
    """audit --secrets lists each planted secret at its entry (or operation) by kind."""
    report = audit_secrets(leaky.sessions)
    found = {(f["address"], f["kind"]) for f in report["findings"]}
    missing = [(p.place, p.address, p.sample.kind) for p in leaky.planted
               if p.audited and (p.address, p.sample.kind) not in found]
    assert missing == []
    assert report["kinds"].keys() == set(KINDS)


def test_audit_cli_prints_path_line_address_kind(
    leaky: Leaky, capsys: pytest.CaptureFixture[str]
) -> None:
    """`fabric-memory audit --secrets` prints `path:line address kind` and exits 1."""
    assert main(["audit", "--secrets", "--sessions", str(leaky.sessions)]) == 1
    out = capsys.readouterr().out
    operation = next(p for p in leaky.planted if p.place == "fabric")
    assert f":{_line_of(leaky, operation.address)} {operation.address} " in out
    total = sum(audit_secrets(leaky.sessions)["kinds"].values())
    assert total >= len(leaky.planted)
    assert out.rstrip().splitlines()[-1].startswith(f"{total} secrets (anthropic-key ")
    assert not [value for value in leaky.values if value in out]


def _line_of(leaky: Leaky, address: str) -> int:
    entry_id = address.split("/", 1)[0]
    for number, line in enumerate(leaky.path.read_bytes().splitlines(), start=1):
        if orjson.loads(line).get("id") == entry_id:
            return number
    raise AssertionError(address)


def test_sabotage_without_redaction_every_check_finds_leaks(
    leaky: Leaky, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the redaction stage switched off the same checks report leaks: they can fail.
    (Audit never prints values either way; its test above fails when it finds nothing.)"""
    from fabric_memory.compaction import text as project

    monkeypatch.setattr(normalize, "redact_texts", lambda texts, counts=None: list(texts))
    monkeypatch.setattr(expand_module, "redact_json_text", lambda text: text)
    monkeypatch.setattr(expand_module, "redact_json", lambda value, counts=None: value)
    monkeypatch.setattr(project, "redact", lambda text, counts=None: text)
    unmasked = Leaky(leaky.sessions, tmp_path / "index", leaky.path, leaky.planted)
    reindex(**unmasked.roots, workers=1)
    leaked = {name: len(check(unmasked)) for name, check in CHECKS.items() if name != "audit"}
    assert all(leaked.values()), leaked


KEPT_WHOLE = ("tool-name", "operation-ref", "custom-type", "exit-code", "file-path",
              "operation-path", "failed-target")
"""Places whose text the compactor keeps whole (never clipped) or as a key."""


def _plant_kept_whole(builder: SessionBuilder, place: str, text: str) -> None:
    if place in ("tool-name", "file-path", "failed-target"):
        tool, args = {"tool-name": (text, {}), "file-path": ("read", {"path": text}),
                      "failed-target": ("bash", {"command": text})}[place]
        builder.assistant_call("call-w", tool, args)
        builder.tool_result("call-w", tool, is_error=place == "failed-target")
    elif place in ("operation-ref", "operation-path"):
        ref, args = (text, {}) if place == "operation-ref" else ("pi.write", {"path": text})
        builder.assistant_call("call-w", "fabric_exec", {"code": "await x()"})
        builder.fabric_result("call-w", [operation(1, ref, args)])
    elif place == "custom-type":
        builder.custom_message(text, "hello")
    else:
        builder.bash("make", "built", exit_code=text)  # type: ignore[arg-type]


@pytest.mark.parametrize("place", KEPT_WHOLE)
def test_texts_kept_whole_are_masked(place: str, tmp_path: Path) -> None:
    """A secret of any kind in a tool name, an operation ref, a custom message type, an exit
    code, a file path or a failed call's target reaches neither the summary nor the details
    (masked where it enters the state: the summary has no mask pass of its own)."""
    rng = random.Random(2024)
    for kind, make in MAKERS.items():
        sample = make(rng)
        builder = SessionBuilder(tmp_path / kind / "s.jsonl")
        builder.user("Please build it")
        _plant_kept_whole(builder, place, sample.text)
        for n in range(4):
            builder.user(f"next {n}")
            builder.assistant([{"type": "text", "text": f"ok {n}"}])
        outcome = compact_session(builder.write(), CompactionSettings(keep_recent_tokens=5)).outcome
        assert isinstance(outcome, Compaction)
        written = outcome.summary + orjson.dumps(outcome.details).decode()
        assert "[REDACTED:" in outcome.summary, kind
        assert [value for value in sample.values if value in written] == [], kind
