"""Normalization: one document per entry, one child per valid-trace operation, nothing else."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fabric_memory import view
from fabric_memory.memory.normalize import normalize_session, record_text, source_records
from fabric_memory.session import read_session

from .conftest import CORPUS
from .corpus import corpus_index, corpus_json
from .memory_builder import SECRETS, VISIBLE, SessionBuilder, operation, secret_session


def _truth_files() -> list[dict[str, Any]]:
    index = corpus_index()
    return [f for f in index["files"] if f.get("entryCount")]


TRUTH = _truth_files()


@pytest.mark.parametrize("item", TRUTH, ids=[str(f["name"]) for f in TRUTH])
def test_documents_agree_with_pi_truth(item: dict[str, Any]) -> None:
    """Entry documents follow file order and each valid trace adds exactly Pi's child addresses."""
    truth = corpus_json(item["truth"])
    session = read_session(CORPUS / item["file"])
    items = normalize_session(session).items
    assert [i.address for i in items if i.kind == "entry"] == [e["id"] for e in truth["entries"]]
    children = {f["entryId"]: f["memoryChildAddresses"] for f in truth["fabric"]}
    for at, parent in enumerate(items):
        if parent.kind != "entry":
            continue
        following = []
        for child in items[at + 1 :]:
            if child.kind != "operation":
                break
            assert child.parent_id == parent.entry_id
            following.append(child.address)
        assert following == children.get(parent.entry_id, [])


@pytest.mark.parametrize("item", TRUTH, ids=[str(f["name"]) for f in TRUTH])
def test_decoys_never_become_searchable(item: dict[str, Any]) -> None:
    """Paths planted in audits, outer output and fabric_exec code appear in no document text."""
    truth = corpus_json(item["truth"])
    decoys = [d["value"] for d in truth.get("decoys", {}).get("values", [])]
    texts = "\n".join(i.text for i in normalize_session(read_session(CORPUS / item["file"])).items)
    assert [d for d in decoys if d in texts] == []


def test_secret_only_in_audits_and_outer_output_is_not_indexed(tmp_path: Path) -> None:
    """Outer output, audits, code and operation results stay out; the user's words stay in."""
    session = read_session(secret_session(tmp_path / "s.jsonl").write())
    texts = "\n".join(i.text for i in normalize_session(session).items)
    assert VISIBLE in texts
    assert [s for s in SECRETS.values() if s in texts] == []


def test_secret_check_has_teeth(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Sabotage: indexing fabric_exec output like any tool result exposes the outer secret."""
    session = read_session(secret_session(tmp_path / "s.jsonl").write())
    monkeypatch.setattr(view, "read_fabric_result", lambda entry_id, message: None)
    texts = "\n".join(i.text for i in normalize_session(session).items)
    assert SECRETS["outer"] in texts


def test_operation_record_is_the_persisted_call_without_its_result(tmp_path: Path) -> None:
    """The child record keeps ref/provider/action/args/outcome/failureStage/error, drops result."""
    builder = SessionBuilder(tmp_path / "s.jsonl")
    builder.assistant_call("c1", "fabric_exec", {"code": "x"})
    op = operation(3, "pi.grep", {"path": "src", "limit": 5}, "failed", failureStage="invoke",
                   error="boom", result={"hits": 4})
    parent = builder.fabric_result("c1", [op], phases=["Plan"])
    items = normalize_session(read_session(builder.write())).items
    child = next(i for i in items if i.kind == "operation")
    assert child.address == f"{parent}/3"
    assert child.record == {
        "kind": "operation", "address": f"{parent}/3", "entryId": parent, "sequence": 3,
        "ref": "pi.grep", "provider": "pi", "action": "grep",
        "args": {"path": "src", "limit": 5}, "outcome": "failed", "failureStage": "invoke",
        "error": "boom",
    }
    assert (child.is_error, child.role, child.tool) == (True, "toolResult", "fabric_exec")
    raw = read_session(builder.path).by_id[parent].raw
    records = source_records(parent, raw)
    assert record_text(records[f"{parent}/3"]) == record_text(child.record)
    assert json.loads(record_text(records[f"{parent}/phase:0"]))["name"] == "Plan"


def test_operation_inherits_every_other_field_from_its_entry(tmp_path: Path) -> None:
    """Besides the call's own fields, a child document is exactly its parent entry's."""
    builder = SessionBuilder(tmp_path / "s.jsonl")
    builder.assistant_call("c1", "fabric_exec", {"code": "x"})
    ops = [operation(1, "pi.read", {"path": "a.ts"}, "succeeded"),
           operation(4, "pi.edit", {"path": "b.ts"}, "failed", failureStage="invoke")]
    builder.fabric_result("c1", ops, phases=["Plan"])
    items = normalize_session(read_session(builder.write())).items
    parent = next(i for i in items if i.kind == "entry" and i.tool == "fabric_exec")
    own = {"kind", "address", "parent_id", "sequence", "type", "ref", "provider", "action",
           "outcome", "failure_stage", "is_error", "text", "record"}
    children = [i for i in items if i.kind == "operation"]
    assert len(children) == 2
    for child in children:
        inherited = {f: getattr(child, f) for f in child.__dataclass_fields__ if f not in own}
        assert inherited == {f: getattr(parent, f) for f in inherited}
        assert (child.parent_id, child.type) == (parent.entry_id, "operation")
    assert [c.is_error for c in children] == [False, True]


def test_invalid_trace_yields_no_children(tmp_path: Path) -> None:
    """A present but invalid trace blocks children (and its audits are not read either)."""
    builder = SessionBuilder(tmp_path / "s.jsonl")
    bad = {"success": True, "trace": {"kind": "pi-fabric.execution", "version": 2},
           "audits": [{"ref": "pi.read", "args": {"path": "a"}, "success": True}]}
    builder.fabric_result("c1", [], details=bad)
    normalized = normalize_session(read_session(builder.write()))
    assert [i.kind for i in normalized.items] == ["entry"]
    assert normalized.operations == 0


def test_duplicate_ids_are_reported_not_fatal(tmp_path: Path) -> None:
    """Two entries with one id give two documents and an incomplete-coverage report."""
    builder = SessionBuilder(tmp_path / "s.jsonl")
    first = builder.user("one")
    builder.user("two")
    builder.lines[-1] = builder.lines[-1].replace(b'"e002"', f'"{first}"'.encode(), 1)
    normalized = normalize_session(read_session(builder.write()))
    assert [i.address for i in normalized.items] == [first, first]
    assert normalized.duplicate_addresses == (first,)


def test_argument_values_are_masked_by_their_key_name(tmp_path: Path) -> None:
    """A tool call's or a Fabric operation's argument whose key names a secret (password,
    env.DB_PASSWORD, headers.X-Api-Key, at any depth) is masked in the index text, as
    expand masks it, and counted; an argument under another name stays searchable."""
    values = ["Zx9hunter22q", "Qw7!db-pass-91", "Ak3ApiValue88z", "Tk5tokenvalue77"]
    arguments = {"password": values[0], "env": {"DB_PASSWORD": values[1], "HOME": "/home/u"},
                 "headers": {"X-Api-Key": values[2]}, "auth": [{"token": values[3]}],
                 "sort_key": "createdAt"}
    builder = SessionBuilder(tmp_path / "named.jsonl")
    builder.assistant_call("c1", "deploy", arguments)
    builder.assistant_call("c2", "fabric_exec", {"code": "x"})
    builder.fabric_result("c2", [operation(1, "pi.bash", arguments)])
    normalized = normalize_session(read_session(builder.write()))
    texts = [item.text for item in normalized.items if "createdAt" in item.text]
    assert len(texts) == 2 and all("/home/u" in text for text in texts)
    assert [value for value in values if any(value in text for text in texts)] == []
    assert all(text.count("[REDACTED:assigned-secret]") == 4 for text in texts)
    assert (normalized.redacted or {}).get("assigned-secret") == 8


def test_a_secret_cut_between_text_blocks_is_masked_in_both(tmp_path: Path) -> None:
    """A token split over two text blocks of one message (or a text and a thinking block)
    leaves neither half in the index text."""
    token = "ghp_" + "Ab3dE6gH9jK2mN5pQ8sT" + "1vW4yZ7bC0eF3hJ6kL9n"
    builder = SessionBuilder(tmp_path / "split.jsonl")
    builder.assistant([{"type": "text", "text": f"the key is {token[:20]}"},
                       {"type": "thinking", "thinking": f"{token[20:]} and more"}])
    normalized = normalize_session(read_session(builder.write()))
    text = normalized.items[-1].text
    assert token[:20] not in text and token[20:] not in text, text
    assert text.count("[REDACTED:github-token]") == 2 and "and more" in text
