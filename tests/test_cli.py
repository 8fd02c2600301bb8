"""The command line: docs/cli.md's command table matches the parser, and renamed options keep
their old spellings for one release with a note."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import orjson
import pytest

from fabric_memory.cli import build_parser, main

from .conftest import REPO

OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
ROW = re.compile(r"^\| `fabric-memory ([a-z][a-z-]*)(.*?)` \|", flags=re.M)
HELP = ("-h", "--help")


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The parser's subcommands, by name."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def documented_options(parser: argparse.ArgumentParser) -> set[str]:
    """Every option a command shows in --help, with those of its own subcommands
    (hidden, deprecated spellings are left out)."""
    options = {
        name
        for action in parser._actions
        if action.help is not argparse.SUPPRESS
        for name in action.option_strings
        if name.startswith("--") and name not in HELP
    }
    for child in subcommands(parser).values():
        options |= documented_options(child)
    return options


def positionals(parser: argparse.ArgumentParser) -> list[str]:
    return [str(action.metavar or action.dest) for action in parser._actions
            if not action.option_strings and not isinstance(action, argparse._SubParsersAction)]


def documented_commands(text: str) -> dict[str, str]:
    """Command name → the usage cell of its row in docs/cli.md's command table."""
    table = text[text.index("## Commands"):]
    table = table[: table.index("\n## ", 1)]
    rows: dict[str, str] = {}
    for name, usage in ROW.findall(table):
        assert name not in rows, f"docs/cli.md's command table has two rows for {name}"
        rows[name] = usage
    return rows


@pytest.fixture(scope="module")
def cli_page() -> str:
    return (REPO / "docs" / "cli.md").read_text(encoding="utf-8")


def test_documented_rows_are_the_commands(cli_page: str) -> None:
    """docs/cli.md's command table has one row per command the CLI has, and no others."""
    assert set(documented_commands(cli_page)) == set(subcommands(build_parser()))


def test_documented_rows_list_each_commands_options(cli_page: str) -> None:
    """Each row names exactly the options (and arguments) its command accepts; --json is
    documented once for every command, and every command has it."""
    rows = documented_commands(cli_page)
    assert "Every command takes `--json`" in cli_page
    drift = []
    for name, parser in subcommands(build_parser()).items():
        usage = rows.get(name, "")
        has = documented_options(parser)
        if "--json" not in has:
            drift.append(f"{name}: docs/cli.md says every command takes --json; it does not")
        shown = set(OPTION.findall(usage))
        drift.extend(f"{name}: docs/cli.md lists {o}, which the command does not have"
                     for o in sorted(shown - has))
        drift.extend(f"{name}: docs/cli.md's row does not list {o}"
                     for o in sorted(has - shown - {"--json"}))
        drift.extend(f"{name}: docs/cli.md's row does not name the argument {p}"
                     for p in positionals(parser) if p not in usage)
        drift.extend(f"{name}: docs/cli.md's row does not name the subcommand {c}"
                     for c in subcommands(parser) if c not in usage)
    assert not drift, drift


def test_table_check_sees_drift() -> None:
    """The table reader finds rows, their options and a missing command."""
    text = ("## Commands\n\n| command | what |\n|---|---|\n"
            "| `fabric-memory recall [QUERY] [--mode M]` | x |\n"
            "| `fabric-memory verify [--index DIR]` | y |\n\nEvery command\n## Next\n")
    rows = documented_commands(text)
    assert set(rows) == {"recall", "verify"}
    assert OPTION.findall(rows["recall"]) == ["--mode"]
    assert set(rows) != set(subcommands(build_parser()))


def test_one_name_for_one_thing() -> None:
    """--index is a directory, --sessions a directory and --json a flag in every command."""
    for name, parser in subcommands(build_parser()).items():
        for action in parser._actions:
            if action.help is argparse.SUPPRESS:
                continue
            if "--index" in action.option_strings or "--sessions" in action.option_strings:
                assert (action.dest, action.metavar) in {("index_dir", "DIR"),
                                                         ("sessions", "DIR")}, name
            if "--json" in action.option_strings:
                assert action.nargs in (0, "?"), name


# --- deprecated spellings --------------------------------------------------------------


def test_certify_old_spellings_parse_with_a_note(capsys: pytest.CaptureFixture[str]) -> None:
    """certify --sessions N and --json PATH still mean --count N and --report PATH, each
    with one note on stderr; the new spellings print nothing."""
    parser = build_parser()
    old = parser.parse_args(["certify", "--sessions", "24", "--json", "r.json"])
    err = capsys.readouterr().err.splitlines()
    new = parser.parse_args(["certify", "--count", "24", "--report", "r.json"])
    assert capsys.readouterr().err == ""
    assert (old.count, old.report_path, old.json) == (new.count, new.report_path, new.json) == (
        24, "r.json", False)
    assert len(err) == 2
    assert "certify --sessions is deprecated" in err[0] and "--count N" in err[0]
    assert "certify --json r.json is deprecated" in err[1] and "--report r.json" in err[1]


def test_certify_json_is_a_flag(capsys: pytest.CaptureFixture[str]) -> None:
    """certify --json alone (before another option too) asks for JSON output, no note."""
    args = build_parser().parse_args(["certify", "--json", "--cycles", "3"])
    assert (args.json, args.report_path, args.cycles) == (True, None, 3)
    assert capsys.readouterr().err == ""


def test_expand_old_spellings_parse_with_a_note(capsys: pytest.CaptureFixture[str]) -> None:
    """expand --index N (a number) is the old --position N and --index-dir DIR the old
    --index DIR; --index with a path is the index directory, without a note."""
    parser = build_parser()
    old = parser.parse_args(["expand", "s", "--index", "3", "--index-dir", "/tmp/ix"])
    err = capsys.readouterr().err.splitlines()
    new = parser.parse_args(["expand", "s", "--position", "3", "--index", "/tmp/ix"])
    assert capsys.readouterr().err == ""
    assert (old.positions, old.index_dir) == (new.positions, new.index_dir) == ([3], "/tmp/ix")
    assert len(err) == 2
    assert "expand --index 3 (an entry position) is deprecated" in err[0]
    assert "--position 3" in err[0]
    assert "expand --index-dir is deprecated" in err[1] and "--index DIR" in err[1]
    numbered = parser.parse_args(["expand", "s", "--index", "./3"])
    assert (numbered.positions, numbered.index_dir) == ([], "./3")


def test_hidden_spellings_stay_out_of_help() -> None:
    """--help shows only the new names."""
    commands = subcommands(build_parser())
    assert "--index-dir" not in commands["expand"].format_help()
    assert "--position" in commands["expand"].format_help()
    certify = commands["certify"].format_help()
    assert "--sessions" not in certify and "--count" in certify and "--report" in certify


@pytest.mark.slow
def test_certify_json_prints_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """certify --json prints the report as JSON on stdout, the same as --report writes."""
    report_path = tmp_path / "report.json"
    status = main(["certify", "--count", "2", "--cycles", "1", "--json", "--report",
                   str(report_path)])
    printed = orjson.loads(capsys.readouterr().out)
    written = orjson.loads(report_path.read_bytes())
    assert status == (0 if printed["passed"] else 1)
    assert printed["config"]["sessions"] == 2 and printed["checks"]
    assert {k: v for k, v in printed.items() if k != "timings"} == {
        k: v for k, v in written.items() if k != "timings"}
