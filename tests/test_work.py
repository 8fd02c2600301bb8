"""What a tool call and its result say the work did: changes, commits, checks, searches."""

from __future__ import annotations

import pytest

from fabric_memory.compaction.work import (
    checks,
    first_changed_line,
    moves,
    no_match,
    outcome,
    shell_run,
    vcs_events,
    written_lines,
)

FAILED_GREP = "(no output)\n\nCommand exited with code 1"


@pytest.mark.parametrize(
    ("command", "found"),
    [
        ("cd /repo && npm run check 2>&1 | tail -20", ["npm run check"]),
        ("npx tsgo --noEmit", ["tsgo --noEmit"]),
        ("cd pkg && npm test -- t.test.ts 2>&1", ["npm test -- t.test.ts"]),
        ("uv run pytest -q tests/x.py && ruff check .", ["pytest -q tests/x.py", "ruff check ."]),
        ("cargo test --all && go vet ./...", ["cargo test --all", "go vet ./..."]),
        ('git commit -m "run npm test; make"', []),
        ("npm install && cargo fmt", []),
    ],
)
def test_checks_are_recognised_by_their_program(command: str, found: list[str]) -> None:
    """Test, lint, type-check and build commands are found in a shell line, quotes respected."""
    assert checks(command) == found


def test_a_search_with_no_match_is_told_from_a_failure() -> None:
    """grep exiting 1 with no output found nothing; exit 2, or a non-search, is a failure."""
    assert no_match('cd /r && grep -rn "x" src | head', shell_run(FAILED_GREP, True))
    assert no_match("diff a b", shell_run("< 1\n> 2\n\nCommand exited with code 1", True))
    assert not no_match("grep x missing.ts", shell_run(
        "grep: missing.ts: No such file or directory\n\nCommand exited with code 2", True))
    assert not no_match("npm run check", shell_run(FAILED_GREP, True))


def test_a_check_outcome_names_its_first_failing_line() -> None:
    """A failed run gives its first error line; a piped run fails by what its output says."""
    failed = shell_run("ok\nsrc/a.ts(3,5): error TS2322: no\nmore\nCommand exited with code 2",
                       True)
    assert outcome(failed) == (False, "src/a.ts(3,5): error TS2322: no")
    assert outcome(shell_run("npm error command failed\nx", False)) == (
        False, "npm error command failed")
    assert outcome(shell_run("Checked 3 files. No fixes applied.", False)) == (True, "")


def test_vcs_events_read_commits_pushes_tags_versions_and_branches() -> None:
    """Commit lines with hash and message, pushes, tags, npm versions, branch switches."""
    output = ("Running checks...\n[main 0020de8] WP15: Create InteractiveMode\n 2 files changed\n"
              "To github.com:o/r.git\n   5b1ea3b..0020de8  main -> main\n")
    assert vcs_events("git commit -am x && git push", output, False) == [
        "commit 0020de8 on main: WP15: Create InteractiveMode", "pushed main -> main"]
    assert vcs_events("git tag v1.2.0 && git checkout -b rel", "Switched to a new branch 'rel'\n",
                      False) == ["tag v1.2.0", "created branch rel"]
    assert vcs_events("npm run version:patch", "> x@0.0.3 version\n@a/b\nv0.27.3\n", False) == [
        "version 0.27.3 (npm run version:patch)"]
    assert vcs_events("git tag v9", "", True) == []  # a failed command tagged nothing


def test_edits_writes_and_moves_name_their_change() -> None:
    """An edit's first changed line (common lines set aside), a write's line count, rm and mv."""
    assert first_changed_line("a\n  b: AppMessage[]\nc", "a\n  b: ToolResultMessage[]\nc") == (
        "b: AppMessage[]", "b: ToolResultMessage[]")
    assert first_changed_line("x\n}", "x\n\n  added();\n}") == ("", "added();")
    assert written_lines("1\n2\n3") == 3
    assert written_lines("1\n") == 1
    assert written_lines(None) is None
    assert moves("cd src && mv a.ts b.ts c/ && git rm -r old && rm -f x.log") == [
        ("a.ts", "moved to c/"), ("b.ts", "moved to c/"), ("old", "deleted"),
        ("x.log", "deleted")]
