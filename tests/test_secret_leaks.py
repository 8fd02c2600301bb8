"""Secrets never leave through memory: planted credentials of every kind, in every place a
session holds text, are absent from recall (literal, phrase, regex), snippets, default
expand, the compaction summary and audit output; ``--show-secrets`` returns them."""

from __future__ import annotations

import random
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
from .secret_samples import MAKERS, Sample

PLACES = ("compaction", "user", "bash", "tool-call", "thinking", "custom", "fabric")
"""Compaction entries first: a new compaction summarizes what follows the last one."""


@dataclass(frozen=True, slots=True)
class Planted:
    place: str
    sample: Sample
    address: str
    """Where audit must report it (an entry id, or the operation's address)."""


@dataclass(frozen=True, slots=True)
class Leaky:
    sessions: Path
    index: Path
    path: Path
    planted: tuple[Planted, ...]

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


@pytest.fixture(scope="module")
def leaky(tmp_path_factory: pytest.TempPathFactory) -> Leaky:
    """One session with a sample of every kind in every place, indexed."""
    base = tmp_path_factory.mktemp("leaky")
    path = base / "sessions" / "--home-dev-leaky--" / "2026-01-02T10-00-00-000Z_leaky.jsonl"
    builder = SessionBuilder(path)
    rng = random.Random(1313)
    planted = []
    for n, (place, kind) in enumerate((p, k) for p in PLACES for k in MAKERS):
        sample = MAKERS[kind](rng)
        planted.append(Planted(place, sample, _plant(builder, place, sample, n)))
        builder.assistant([{"type": "text", "text": f"ok {n}"}])
    builder.user("What is left to do?")
    builder.assistant([{"type": "text", "text": "Nothing; the work is done."}])
    builder.write()
    leaky = Leaky(base / "sessions", base / "index", path, tuple(planted))
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
    texts = []
    page: Any = expand(str(leaky.path), positions=f"0:{count - 1}", max_entries=20,
                       show_secrets=show_secrets, raw=raw, **leaky.roots)
    while True:
        texts.extend(entry["text"] for entry in page["entries"])
        if page["next"] is None:
            break
        page = expand_request(page["next"])
    operations = [p.address for p in leaky.planted if p.place == "fabric"]
    page = expand(str(leaky.path), addresses=operations, max_entries=20,
                  show_secrets=show_secrets, raw=raw, **leaky.roots)
    texts.extend(entry["text"] for entry in page["entries"])
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


CHECKS: dict[str, Callable[[Leaky], list[str]]] = {
    "recall": recall_leaks, "snippets": snippet_leaks, "expand": expand_leaks,
    "expand-raw": raw_expand_leaks,
    "summary": summary_leaks, "audit": audit_leaks,
}


@pytest.mark.parametrize("check", list(CHECKS))
def test_no_planted_secret_leaves(leaky: Leaky, check: str) -> None:
    """Not one planted value (of 16 kinds in 7 places) comes back through this answer."""
    assert CHECKS[check](leaky) == []


def test_summary_still_says_where_the_secret_was(leaky: Leaky) -> None:
    """The summary keeps the user's fact, its secret masked by kind."""
    summary = _compaction(leaky).summary
    assert "Remember this, you must keep it:" in summary
    assert "[REDACTED:" in summary


def test_show_secrets_returns_the_raw_bytes(leaky: Leaky) -> None:
    """On explicit request expand returns every planted value, as the file holds it."""
    text = _expanded_text(leaky, show_secrets=True)
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
               if (p.address, p.sample.kind) not in found]
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
