"""The work trail reads every agent's tools: Claude Code's and Codex's calls fill the same
ledgers as Pi's (file changes, commits, checks, errors, open items)."""

from __future__ import annotations

from pathlib import Path

import orjson

from fabric_memory.compaction import summarize_span
from fabric_memory.compaction.details import CumulativeState, read_state
from fabric_memory.sources import read_source
from fabric_memory.sources.codex import patch_files

from .transcripts import ClaudeTranscript, CodexRollout, exec_output


def _state(path: Path) -> CumulativeState:
    session = read_source(path)
    return summarize_span([entry.view for entry in session.active_branch()]).state


def _texts(state: CumulativeState, ledger: str) -> list[str]:
    return [item.text for item in state.ledgers[ledger].items]  # type: ignore[index]


def test_claude_code_tools_fill_the_trail(tmp_path: Path) -> None:
    """Edit, MultiEdit, Write, NotebookEdit, Read, Bash (exit status, interruption) and
    TodoWrite become file changes, files, checks, commits, errors and open items."""
    t = ClaudeTranscript()
    t.user("Fix the cent rounding in ledger/report.py and commit it.")
    read = t.tool("Read", {"file_path": "ledger/report.py"}, "def total(): ...")
    edit = t.tool("Edit", {"file_path": "ledger/report.py", "old_string": "a\nsum(float(x))",
                           "new_string": "a\nsum(Decimal(x))"}, "updated")
    multi = t.tool("MultiEdit", {"file_path": "ledger/util.py", "edits": [
        {"old_string": "x = 1", "new_string": "x = 2"}, {"old_string": "y", "new_string": "z"}]},
        "updated")
    wrote = t.tool("Write", {"file_path": "tests/test_cent.py", "content": "a\nb\nc\n"}, "ok")
    cell = t.tool("NotebookEdit", {"notebook_path": "nb.ipynb", "cell_id": "c1",
                                   "new_source": "print(1)", "edit_mode": "replace"}, "ok")
    failed = t.tool("Bash", {"command": "pytest -q tests/test_cent.py"},
                    "Exit code 1\nFAILED tests/test_cent.py::test_cent - assert 1 == 2",
                    is_error=True)
    commit = t.tool("Bash", {"command": "git commit -am 'Round with Decimal'"},
                    "[main 1a2b3c4] Round with Decimal\n 2 files changed",
                    structured={"stdout": "[main 1a2b3c4] Round with Decimal", "stderr": "",
                                "interrupted": False})
    stopped = t.tool("Bash", {"command": "npm test"}, "[Request interrupted by user for tool use]",
                     is_error=True, structured={"stdout": "", "stderr": "", "interrupted": True})
    todo = t.tool("TodoWrite", {"todos": [
        {"content": "Fix rounding", "status": "completed", "activeForm": "Fixing"},
        {"content": "Run the whole suite", "status": "in_progress", "activeForm": "Running"},
        {"content": "Update CHANGELOG", "status": "pending", "activeForm": "Updating"}]}, "ok")
    t.tool("Grep", {"pattern": "float\\(", "path": "ledger"}, "No matches found")
    state = _state(t.write(tmp_path / "s.jsonl"))

    changes = {item.first: item.text for item in state.ledgers["changes"].items}
    assert changes[edit] == "ledger/report.py: edit `- sum(float(x))` -> `+ sum(Decimal(x))`"
    assert changes[multi] == "ledger/util.py: edit `- x = 1` -> `+ x = 2`"
    assert changes[wrote] == "tests/test_cent.py: created (3 lines): a / b"
    assert changes[cell] == "nb.ipynb: edit `+ print(1)`"
    files = {item.text: (item.first, item.tags) for item in state.ledgers["files"].items}
    assert files["ledger/report.py"] == (read, ("modified", "read"))
    checks = {item.first: item.text for item in state.ledgers["checks"].items}
    assert checks[failed].startswith("`pytest -q tests/test_cent.py` last run failed (exit 1): "
                                      "FAILED tests/test_cent.py::test_cent")
    assert checks[stopped] == "`npm test` last run failed: interrupted"
    assert _texts(state, "commits") == ["commit 1a2b3c4 on main: Round with Decimal"]
    assert state.ledgers["commits"].items[0].first == commit
    errors = {item.first: item.text for item in state.ledgers["errors"].items}
    assert errors[failed] == "Bash `pytest -q tests/test_cent.py` -> failed"
    assert errors[stopped] == "Bash `npm test` -> interrupted"
    assert [(item.first, item.text) for item in state.ledgers["plan"].items] == [
        (todo, "in_progress: Run the whole suite"), (todo, "pending: Update CHANGELOG")]


def test_a_later_plan_replaces_the_open_items_and_a_passing_check_resolves(
        tmp_path: Path) -> None:
    """Each TodoWrite replaces the plan (done steps leave it); a later passing run of a
    check resolves the failed command's error."""
    t = ClaudeTranscript()
    t.user("Make the tests pass.")
    t.tool("TodoWrite", {"todos": [{"content": "Fix", "status": "pending"}]}, "ok")
    t.tool("Bash", {"command": "pytest -q"}, "Exit code 2\nerror: collection failed",
           is_error=True)
    t.tool("Bash", {"command": "pytest -q"}, "3 passed")
    last = t.tool("TodoWrite", {"todos": [{"content": "Fix", "status": "completed"},
                                          {"content": "Ship", "status": "pending"}]}, "ok")
    state = _state(t.write(tmp_path / "s.jsonl"))
    assert [(i.first, i.text) for i in state.ledgers["plan"].items] == [(last, "pending: Ship")]
    assert state.ledgers["errors"].total == 0
    assert _texts(state, "checks") == ["`pytest -q` last run passed"]


def test_codex_tools_fill_the_trail(tmp_path: Path) -> None:
    """exec_command and shell (exit codes from the output's header or metadata),
    apply_patch (added, deleted, updated and moved files) and update_plan."""
    r = CodexRollout()
    r.user("Fix the export's last row and commit.")
    failed = r.call("exec_command", {"cmd": "pytest -q tests/test_export.py"},
                    exec_output(1, "FAILED tests/test_export.py::test_last_row"))
    patch = r.patch("*** Begin Patch\n*** Add File: notes/export.md\n+# Export\n+rows\n"
                    "*** Delete File: old/export_v1.py\n"
                    "*** Update File: ledger/export.py\n*** Move to: ledger/exporter.py\n"
                    "@@ def export(rows):\n     n = len(rows)\n-    for i in range(n - 1):\n"
                    "+    for i in range(n):\n*** End Patch")
    commit = r.call("shell", {"command": ["bash", "-lc", "git commit -am 'Export every row'"]},
                    orjson.dumps({"output": "[fix 9f8e7d6] Export every row\n",
                                  "metadata": {"exit_code": 0}}).decode())
    plan = r.call("update_plan", {"explanation": "next", "plan": [
        {"step": "Fix the loop", "status": "completed"},
        {"step": "Add a regression test", "status": "in_progress"}]}, "Plan updated")
    state = _state(r.write(tmp_path / "rollout.jsonl"))
    address = f"L{patch}"
    changes = [(item.first, item.text) for item in state.ledgers["changes"].items]
    assert changes == [
        (address, "notes/export.md: created (2 lines): # Export"),
        (address, "old/export_v1.py: deleted"),
        (address, "ledger/export.py: edit `- for i in range(n - 1):` -> `+ for i in range(n):`"),
        (address, "ledger/export.py: moved to ledger/exporter.py"),
    ]
    checks = {item.first: item.text for item in state.ledgers["checks"].items}
    assert checks[f"L{failed}"].startswith(
        "`pytest -q tests/test_export.py` last run failed (exit 1): FAILED")
    commits = [(item.first, item.text) for item in state.ledgers["commits"].items]
    assert commits == [(f"L{commit}", "commit 9f8e7d6 on fix: Export every row")]
    assert [(i.first, i.text) for i in state.ledgers["plan"].items] == [
        (f"L{plan}", "in_progress: Add a regression test")]
    assert {item.first for item in state.ledgers["errors"].items} == {f"L{failed}"}


def test_patch_files_read_codex_patch_format() -> None:
    """An apply_patch patch names each file with what happened and its first changed line."""
    files = patch_files("*** Begin Patch\n*** Update File: a.py\n@@\n x\n-y\n+z\n"
                        "*** Add File: b.py\n+1\n*** End Patch\n")
    assert [(f.path, f.action, f.old, f.new) for f in files] == [
        ("a.py", "modified", "x\ny", "x\nz"), ("b.py", "created", None, "1\n")]
    (moved,) = patch_files("*** Begin Patch\n*** Update File: c.py\n*** Move to: d.py\n"
                           "*** End Patch")
    assert (moved.path, moved.old, moved.new, moved.moved_to) == ("c.py", None, None, "d.py")


def test_a_state_without_open_items_reads_as_before() -> None:
    """The plan ledger is written only when it holds items; a state without it reads back
    with an empty plan (states written before it stay valid)."""
    empty = CumulativeState()
    value = orjson.loads(orjson.dumps(empty.to_json()))
    assert "plan" not in value["ledgers"]
    state = read_state(value)
    assert state is not None and state.ledgers["plan"].total == 0
