"""The ``fabric-memory`` command line: parse options, call one library function, render.

Each command is a ``(name, help, add_arguments, run)`` row in ``COMMANDS``; ``run``
returns the JSON-able result and a human renderer. Errors from the library arrive as
:class:`FabricMemoryError` and become one line on stderr (or a JSON error object
with ``--json``) and a non-zero exit status.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from . import __version__
from .errors import FabricMemoryError


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a command produced: its JSON value, its human text and its exit status."""

    value: Any
    human: str
    status: int = 0


Runner = Callable[[argparse.Namespace], Outcome]


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Runner


def write_json(value: Any) -> None:
    sys.stdout.buffer.write(orjson.dumps(value, option=orjson.OPT_INDENT_2) + b"\n")
    sys.stdout.flush()


# --- inspect ---------------------------------------------------------------------------


def _inspect_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session_file", metavar="SESSION_FILE", help="a session .jsonl file")
    parser.add_argument("--max-line-bytes", type=int, default=None, help="longest line to read")


def _run_inspect(args: argparse.Namespace) -> Outcome:
    from .inspect import inspect_session, render_inspection

    kwargs = {} if args.max_line_bytes is None else {"max_line_bytes": args.max_line_bytes}
    report = inspect_session(args.session_file, **kwargs)
    return Outcome(report, render_inspection(report))


COMMANDS: list[Command] = [
    Command("inspect", "summarize one session file: branch, hashes, Fabric verdicts",
            _inspect_arguments, _run_inspect),
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fabric-memory",
        description="Compaction and memory index for Pi coding-agent sessions.",
    )
    parser.add_argument("--version", action="version", version=f"fabric-memory {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        child = sub.add_parser(command.name, help=command.help, description=command.help)
        command.add_arguments(child)
        child.add_argument("--json", action="store_true", help="machine-readable output")
        child.set_defaults(runner=command.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        outcome: Outcome = args.runner(args)
    except FabricMemoryError as exc:
        if getattr(args, "json", False):
            write_json({"error": exc.to_json()})
        print(f"fabric-memory {args.command}: {exc.message}", file=sys.stderr)
        return exc.exit_status
    except KeyboardInterrupt:
        print(f"fabric-memory {args.command}: interrupted", file=sys.stderr)
        return 130
    if args.json:
        write_json(outcome.value)
    elif outcome.human:
        sys.stdout.write(outcome.human if outcome.human.endswith("\n") else outcome.human + "\n")
    return outcome.status


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
