"""Continuation QA: task repositories, the CERT_TASK_V1 payload, and the external oracle."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

import orjson
import pytest
import xxhash

from fabric_memory.certify.continuation import (
    FIXTURES,
    TASK_MARKER,
    CertTask,
    ContinuationFixture,
    apply_task,
    create_fixtures,
    decode_task,
    encode_task,
    run_oracle,
    task_message,
)
from fabric_memory.errors import TaskPayloadError


@pytest.fixture
def fixtures(tmp_path: Path) -> dict[str, ContinuationFixture]:
    return {fixture.name: fixture for fixture in create_fixtures(tmp_path)}


def raw_payload(value: object) -> str:
    """A well-formed CERT_TASK_V1 line around any JSON value (bypassing the encoder)."""
    data = orjson.dumps(value)
    body = base64.urlsafe_b64encode(data).rstrip(b"=").decode()
    return f"{TASK_MARKER} {body}.{xxhash.xxh3_128_hexdigest(data)}"


def test_fixtures_are_committed_git_repositories(
    fixtures: dict[str, ContinuationFixture],
) -> None:
    """Each fixture is a clean git work tree with its oracle committed."""
    assert set(fixtures) == {spec.name for spec in FIXTURES} and len(fixtures) == 2
    for fixture in fixtures.values():
        status = subprocess.run(
            ["git", "status", "--porcelain"], cwd=fixture.repo, capture_output=True, check=True
        )
        assert status.stdout == b""
        assert fixture.oracle.is_file()
        tracked = subprocess.run(
            ["git", "ls-files"], cwd=fixture.repo, capture_output=True, check=True, text=True
        ).stdout.split()
        assert ".cert/oracle.py" in tracked


@pytest.mark.parametrize("name", [spec.name for spec in FIXTURES])
def test_oracle_passes_on_the_decoded_and_applied_task(
    fixtures: dict[str, ContinuationFixture], name: str
) -> None:
    """Decoding the planted message and applying it makes the oracle pass (and only then)."""
    fixture = fixtures[name]
    before = run_oracle(fixture)
    assert not before.passed and before.check_status != 0
    task = decode_task(task_message(fixture.task))
    assert task == fixture.task
    touched = apply_task(task, fixture.repo.parent)
    assert set(touched) == set(fixture.spec.expected)
    after = run_oracle(fixture)
    assert after.passed, after.report
    assert after.process_status == 0 and after.check_status == 0
    assert all(after.exact_files.values()) and all(after.forbidden_intact.values())
    assert after.unexpected_changes == ()


def test_oracle_fails_on_a_wrong_file(fixtures: dict[str, ContinuationFixture]) -> None:
    """One expected file differing by a byte fails the oracle and names the file."""
    fixture = fixtures["ledger"]
    apply_task(fixture.task, fixture.repo.parent)
    target = fixture.repo / "ledger" / "currency.py"
    target.write_bytes(target.read_bytes() + b" ")
    score = run_oracle(fixture)
    assert not score.passed and score.process_status == 1
    assert score.exact_files["ledger/currency.py"] is False


def test_oracle_fails_when_a_forbidden_file_changes(
    fixtures: dict[str, ContinuationFixture],
) -> None:
    """Touching a must-stay-identical file fails the oracle even though the task is done."""
    fixture = fixtures["atlas"]
    apply_task(fixture.task, fixture.repo.parent)
    frozen = fixture.repo / "src" / "vendor" / "frozen.txt"
    frozen.write_text(frozen.read_text(encoding="utf-8").upper(), encoding="utf-8")
    score = run_oracle(fixture)
    assert not score.passed and score.check_status == 0
    assert score.forbidden_intact["src/vendor/frozen.txt"] is False
    assert all(score.exact_files.values())


def test_oracle_fails_on_an_unexpected_new_file(fixtures: dict[str, ContinuationFixture]) -> None:
    """A file the task never named shows up as an unexpected change."""
    fixture = fixtures["ledger"]
    apply_task(fixture.task, fixture.repo.parent)
    (fixture.repo / "notes.txt").write_text("fabricated\n", encoding="utf-8")
    score = run_oracle(fixture)
    assert not score.passed and score.unexpected_changes == ("notes.txt",)


def test_payload_round_trips_inside_a_json_session_line() -> None:
    """The payload is found inside message text and inside the verbatim JSON line."""
    task = FIXTURES[1].task
    line = orjson.dumps({"type": "message", "message": {"role": "user",
                                                        "content": task_message(task)}})
    assert decode_task(line.decode("utf-8"), where="entry abc") == task


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda line: line[:-7] + ("0" if line[-7] != "0" else "1") + line[-6:], "digest"),
        (lambda line: line[:20] + ("A" if line[20] != "A" else "B") + line[21:], "digest"),
        (lambda line: line[: len(line) // 2], "malformed or truncated"),
        (lambda line: "no payload at all", "no CERT_TASK_V1"),
        (lambda line: TASK_MARKER, "has no payload"),
        (lambda line: line + "\n" + encode_task(FIXTURES[1].task), "different"),
    ],
    ids=["digest-flip", "body-flip", "truncated", "missing", "empty", "two-payloads"],
)
def test_decoder_rejects_corrupted_payloads(mutate: object, message: str) -> None:
    """Altered, truncated, missing or ambiguous payloads raise TaskPayloadError, naming where."""
    line = encode_task(FIXTURES[0].task)
    assert callable(mutate)
    with pytest.raises(TaskPayloadError, match=message) as caught:
        decode_task(mutate(line), where="entry 1234abcd")
    assert "entry 1234abcd" in str(caught.value)


@pytest.mark.parametrize(
    ("value", "where"),
    [
        ([1, 2], r"\$"),
        ({"repo": "ledger", "operations": [], "extra": 1}, r"\$"),
        ({"repo": "../up", "operations": [{"op": "delete", "path": "x"}]}, r"\$\.repo"),
        ({"repo": "ledger", "operations": []}, r"\$\.operations"),
        ({"repo": "ledger", "operations": [{"op": "chmod", "path": "x"}]}, r"operations\[0\]\.op"),
        ({"repo": "ledger", "operations": [{"op": "delete", "path": "../x"}]},
         r"operations\[0\]\.path"),
        ({"repo": "ledger", "operations": [{"op": "delete", "path": ".git/config"}]},
         r"operations\[0\]\.path"),
        ({"repo": "ledger", "operations": [{"op": "write", "path": "a", "content": 3}]},
         r"operations\[0\]\.content"),
        ({"repo": "ledger", "operations": [{"op": "replace", "path": "a", "old": "", "new": ""}]},
         r"operations\[0\]\.old"),
        ({"repo": "ledger", "operations": [{"op": "delete", "path": "a", "content": ""}]},
         r"operations\[0\]"),
    ],
    ids=["not-object", "extra-key", "repo-name", "no-operations", "unknown-op", "traversal",
         "git-dir", "content-type", "empty-old", "extra-op-key"],
)
def test_decoder_rejects_payloads_outside_the_schema(value: object, where: str) -> None:
    """A digest-correct payload with the wrong shape is rejected with its JSON path."""
    with pytest.raises(TaskPayloadError, match=where):
        decode_task(raw_payload(value))


def test_apply_is_all_or_nothing(fixtures: dict[str, ContinuationFixture]) -> None:
    """When a later operation cannot apply exactly, no earlier one is written either."""
    fixture = fixtures["ledger"]
    core = fixture.repo / "ledger" / "core.py"
    before = core.read_bytes()
    task: CertTask = {
        "repo": "ledger",
        "operations": [
            {"op": "replace", "path": "ledger/core.py", "old": "sum(entries)", "new": "0"},
            {"op": "replace", "path": "README.md", "old": "not in the file", "new": "x"},
        ],
    }
    with pytest.raises(TaskPayloadError, match="occurs 0 times"):
        apply_task(task, fixture.repo.parent)
    assert core.read_bytes() == before
    task["operations"] = [{"op": "delete", "path": "ledger/missing.py"}]
    with pytest.raises(TaskPayloadError, match="does not exist"):
        apply_task(task, fixture.repo.parent)


def test_apply_refuses_a_missing_repository(tmp_path: Path) -> None:
    """A task for a repository that is not in the workspace fails instead of creating one."""
    with pytest.raises(TaskPayloadError, match="not found"):
        apply_task(FIXTURES[0].task, tmp_path)
    assert list(tmp_path.iterdir()) == []
