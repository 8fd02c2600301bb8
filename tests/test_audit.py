"""audit: every planted projection leak is found by address and rule; no leaked value is shown.

``fixtures/audit/`` holds a session built for this: ``planted.json`` lists each planted
leak (address, key, rule and the leaked secret) and decoy secrets that live where the
trace contract allows verbatim content (audits, outer output, source code) or in results
that are not valid traces — none of which may be reported or printed.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson
import pytest

from fabric_memory import audit as audit_module
from fabric_memory.audit import AuditReport, audit_secrets, audit_sessions
from fabric_memory.certify.generate import generate_corpus
from fabric_memory.cli import main
from fabric_memory.errors import UsageError

from .conftest import FIXTURES
from .secret_samples import github_token

AUDIT = FIXTURES / "audit"
PLANTED: dict[str, Any] = orjson.loads((AUDIT / "planted.json").read_bytes())


def _planted() -> set[tuple[str, str, str]]:
    return {(leak["address"], leak["key"], leak["rule"]) for leak in PLANTED["leaks"]}


def _found(report: AuditReport) -> set[tuple[str, str, str]]:
    return {(f["address"], f["key"], f["rule"]) for f in report["findings"]}


def _secrets() -> list[str]:
    return [str(s) for s in [*(leak["secret"] for leak in PLANTED["leaks"]),
                             *PLANTED["decoySecrets"]]]


def test_fixture_plants_leaks_of_many_rules() -> None:
    """The fixture covers every kind of rule over many refs, each leak with its own secret."""
    rules = {leak["rule"].split(" for ")[0] for leak in PLANTED["leaks"]}
    assert len(rules) >= 7, rules
    assert len({leak["rule"] for leak in PLANTED["leaks"]}) >= 12
    assert len(set(_secrets())) == len(_secrets())
    text = (AUDIT / PLANTED["file"]).read_text()
    assert all(secret in text for secret in _secrets())


def test_audit_finds_exactly_the_planted_leaks() -> None:
    """Every planted leak is reported with its address and rule; clean operations, audits,
    outer output, source code, an invalid trace and legacy audits are not."""
    report = audit_sessions(AUDIT)
    assert _found(report) == _planted()
    assert (report["sessions"], report["traces"], report["unreadable"]) == (1, 2, [])
    assert report["operations"] == 21
    assert sum(report["rules"].values()) == len(PLANTED["leaks"])
    path = str((AUDIT / PLANTED["file"]).absolute())
    assert {f["path"] for f in report["findings"]} == {path}


def test_missing_a_leak_is_detected(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sabotage: an audit blind to argument violations fails the planted-leaks check."""
    monkeypatch.setattr(audit_module, "projection_violations", lambda ref, args: [])
    missing = _planted() - _found(audit_sessions(AUDIT))
    assert {key for _, key, _ in missing} >= {"pattern", "path", "content", "query"}


@pytest.mark.parametrize("json_output", [False, True], ids=["human", "json"])
def test_output_never_contains_a_leaked_value(
    capsys: pytest.CaptureFixture[str], json_output: bool
) -> None:
    """Human and JSON output name each leak's address and rule, never a secret (not even the
    one planted as an argument key), and exit 1 when leaks are found."""
    status = main(["audit", "--sessions", str(AUDIT), *(["--json"] if json_output else [])])
    captured = capsys.readouterr()
    assert status == 1
    shown = captured.out + captured.err
    for secret in _secrets():
        assert secret not in shown, secret
    for address, _, rule in _planted():
        assert address in shown and rule in shown
    if json_output:
        assert _found(orjson.loads(captured.out)) == _planted()
    else:
        assert captured.out.rstrip().splitlines()[-1].startswith("16 projection violations")


def test_secret_check_has_teeth(capsys: pytest.CaptureFixture[str],
                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Sabotage: an audit that printed the kept values would fail the secrecy check."""
    real = audit_module.operation_violations

    def leaky(op: Any) -> list[tuple[str, str]]:
        return [(key, f"{rule} {op.args!r}") for key, rule in real(op)]

    monkeypatch.setattr(audit_module, "operation_violations", leaky)
    main(["audit", "--sessions", str(AUDIT)])
    shown = capsys.readouterr().out
    assert any(secret in shown for secret in _secrets())


def test_generated_corpus_is_clean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The seeded generator projects every argument (its secrets live only in audits): the
    audit reports nothing and exits 0."""
    manifest = generate_corpus(tmp_path, sessions=30, seed=5)
    assert main(["audit", "--sessions", str(tmp_path), "--json"]) == 0
    report = orjson.loads(capsys.readouterr().out)
    assert report["findings"] == [] and report["sessions"] == 30
    assert report["operations"] == manifest.operation_count > 0
    assert not any(secret in orjson.dumps(report).decode() for secret in manifest.secrets)


def test_missing_root_is_a_usage_error(tmp_path: Path) -> None:
    """A sessions root that does not exist is one clear usage error."""
    with pytest.raises(UsageError, match="does not exist"):
        audit_sessions(tmp_path / "nowhere")


def test_other_agents_files_are_audited_as_written(tmp_path: Path) -> None:
    """Claude Code and Codex files are read by their own readers (none is unreadable), and
    --secrets searches each line as the agent wrote it: a token in a Codex session_meta's
    instructions and one in a Claude Code toolUseResult are found at their lines."""
    sample = github_token(random.Random(7))
    token = sample.values[0]
    codex = (FIXTURES / "agents" / "codex" /
             "rollout-2025-05-07T11-00-00-5a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d.jsonl")
    (tmp_path / "codex.jsonl").write_bytes(
        codex.read_bytes().replace(b'"Be terse."', orjson.dumps(f"use {token}")))
    claude = [{"type": "user", "sessionId": "s", "uuid": "u1", "cwd": "/w",
               "message": {"role": "user", "content": [
                   {"type": "tool_result", "tool_use_id": "t1", "content": "done"}]},
               "toolUseResult": {"stdout": "done", "env": f"TOKEN={token}"}}]
    (tmp_path / "claude.jsonl").write_bytes(b"".join(orjson.dumps(v) + b"\n" for v in claude))
    assert audit_sessions(tmp_path)["unreadable"] == []
    report = audit_secrets(tmp_path)
    assert report["unreadable"] == []
    assert sorted((Path(f["path"]).name, f["line"], f["address"], f["kind"])
                  for f in report["findings"]) == [
        ("claude.jsonl", 1, "u1", "github-token"), ("codex.jsonl", 1, "L1", "github-token")]
    assert token not in orjson.dumps(report).decode()
