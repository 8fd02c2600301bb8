"""Digests: what a command printed and what a write wrote, in one line."""

from __future__ import annotations

from fabric_memory.compaction.digest import content_digest, printed

STATUS = """On branch main
Your branch is up to date with 'origin/main'.

Changes not staged for commit:
\tmodified:   src/app.ts
\tdeleted:    old.txt

Untracked files:
  (use "git add <file>..." to include in what will be committed)
\tnotes/todo.md
"""
LOG = """commit 7890fb8aabbccdd1122334455667788990011223
Author: A <a@example.com>
Date:   Mon Dec 1 10:00:00 2025

    WP13: fix the reader

commit e7c71e7aabbccdd1122334455667788990011223
Author: A <a@example.com>
Date:   Mon Dec 1 09:00:00 2025

    WP12: add the writer
"""


def test_git_status_lists_the_branch_and_its_files() -> None:
    """`git status` gives its branch and the files by what happened to them."""
    assert printed(("git", "status"), STATUS, False) == (
        "branch main; modified: src/app.ts; deleted: old.txt; untracked: notes/todo.md")


def test_git_log_gives_hashes_and_messages() -> None:
    """`git log` (full or one line per commit) gives each commit's hash and message."""
    assert printed(("git", "log"), LOG, False) == (
        "7890fb8aabbc WP13: fix the reader; e7c71e7aabbc WP12: add the writer")
    assert printed(("git", "log", "--oneline"), "7890fb8 (HEAD -> main) WP13: fix\n", False) == (
        "7890fb8 WP13: fix")


def test_diff_stat_tests_and_listings_give_their_result() -> None:
    """`git diff --stat` gives its totals and files, a test run its summary, `ls` its names."""
    stat = " src/a.ts | 12 +++++----\n 1 file changed, 7 insertions(+), 5 deletions(-)\n"
    assert printed(("git", "diff", "--stat"), stat, False) == (
        "1 file changed, 7 insertions(+), 5 deletions(-): src/a.ts | 12 +++++----")
    assert printed(("pytest", "-q"), "....\n===== 12 passed in 3.10s =====\n", False) == (
        "===== 12 passed in 3.10s =====")
    assert printed(("ls", "docs"), "a.md\nb.md\n", False) == "a.md, b.md"


def test_a_failed_command_gives_its_first_error_line() -> None:
    """A failed command's first error line, whatever else it printed."""
    output = "building...\nerror TS2345: Argument of type 'x'\nmore\n"
    assert printed(("npm", "run", "build"), output, True) == "error TS2345: Argument of type 'x'"


def test_a_written_file_is_digested_by_headings_names_or_first_lines() -> None:
    """Headings (not inside a code fence), else defined names, else JSON keys, else the
    first lines."""
    assert content_digest("# Title\n\n```\n# not a heading\n```\n## Usage\n") == (
        "# Title, ## Usage")
    assert content_digest("export function foo() {}\ndef bar():\n    pass\n") == (
        "defines foo, bar")
    assert content_digest('{\n  "version": "0.1",\n  "theory": {}\n}') == "keys version, theory"
    assert content_digest("first line\n\nsecond line\nthird\n") == "first line / second line"
