"""What the work did, read from a tool call and its result: the change an edit or a write
made to its file, files a shell command deleted or moved, commits, tags, pushes, releases
and branch switches a command reports, check runs (tests, linters, type checks, builds)
and their outcome, and searches that found nothing (which are not failures).

Pure functions over a call's arguments and its result text; the compactor decides what
enters the state (and masks it there).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final

from .facts import first_error_line

PIPED_TAIL: Final = 8192
"""How much of a passing check's output is searched for the failure a pipe hid."""

_TOKEN = re.compile(
    r"""(?P<redirect>\d*(?:>>?|<)&?\d*|&>)|(?P<op>&&|\|\||[|;&\n])"""
    r"""|(?P<word>(?:[^\s'"&|;<>]+|'[^']*'|"(?:\\.|[^"\\])*")+)"""
)
_QUOTES = re.compile(r"""'([^']*)'|"((?:\\.|[^"\\])*)\"""")
_INTERESTING = re.compile(
    r"\b(?:git|rm|mv|npm|pnpm|yarn|bun|npx|cargo|go|make|pytest|vitest|jest|mocha|tsc|tsgo"
    r"|ruff|mypy|pyright|eslint|biome|grep|egrep|rg|ag|find|diff|python3?|uv)\b"
)
"""A command without any of these words runs nothing this module reads (most don't)."""
_EXIT = re.compile(r"Command exited with code (\d+)\s*$")
_SCRIPT_CHECK = re.compile(r"(?:check|test|build|lint|typecheck|type-check|tsc|ci)(?::[\w:-]*)?$")
_CHECK_PROGRAMS: Final = frozenset({
    "pytest", "vitest", "jest", "mocha", "tsc", "tsgo", "ruff", "mypy", "pyright", "eslint",
    "biome", "make",
})
_SUBCOMMAND_CHECKS: Final = {
    "cargo": frozenset({"test", "build", "check", "clippy"}),
    "go": frozenset({"test", "build", "vet"}),
}
_PACKAGE_MANAGERS: Final = frozenset({"npm", "pnpm", "yarn", "bun"})
_SEARCHES: Final = frozenset({"grep", "egrep", "fgrep", "rg", "ag", "find", "diff", "cmp"})
_PIPED_FAILURE = re.compile(
    r"^(?:npm ERR!|npm error|error TS\d+|.*: error TS\d+|FAIL\b|.*\b[1-9]\d* (?:failed|errors?)\b"
    r"|Found [1-9]\d* errors?)",
    re.MULTILINE,
)
_COMMIT = re.compile(r"^\[([^\]\s]+)(?: \(root-commit\))? ([0-9a-f]{7,40})\] (.+)$", re.MULTILINE)
_SWITCHED = re.compile(r"^Switched to (a new )?branch '([^']+)'", re.MULTILINE)
_PUSHED = re.compile(
    r"^\s*[+*]?\s*(?:[0-9a-f]{7,40}\.\.\.?[0-9a-f]{7,40}|\[new (?:branch|tag)\])\s+(\S+) -> (\S+)",
    re.MULTILINE,
)
_VERSION = re.compile(r"^v(\d+\.\d+\.\d+(?:-[\w.]+)?)\s*$", re.MULTILINE)
"""``npm version`` prints the new version alone on a line (once per workspace)."""
_PUBLISHED = re.compile(r"^\+ (@?[\w./-]+@\d+\.\d+\.\d+[\w.-]*)\s*$", re.MULTILINE)
_UPLOADING = re.compile(r"Uploading (\S+) v(\d[\w.-]*)")


@dataclass(frozen=True, slots=True)
class Run:
    """A shell command's result as the work ledgers read it."""

    exit_code: int | None
    """``None``: it succeeded as far as the result says."""
    output: str

    @property
    def failed(self) -> bool:
        return self.exit_code not in (None, 0)


def shell_run(output: str, is_error: bool, exit_code: Any = None) -> Run:
    """A Pi bash result (its text ends ``Command exited with code N`` when it failed) or a
    ``bashExecution`` message (``exit_code`` given)."""
    if type(exit_code) is int:
        return Run(exit_code or None, output)
    found = _EXIT.search(output[-64:])
    if found:
        return Run(int(found.group(1)), output)
    return Run(1 if is_error else None, output)


def segments(command: str) -> list[list[str]]:
    """The simple commands of ``command`` (split at ``&&``, ``||``, ``;``, ``|``, ``&`` and
    newlines, quotes kept together and removed, redirections and their targets left out)."""
    found: list[list[str]] = []
    words: list[str] = []
    redirected = False
    for match in _TOKEN.finditer(command):
        kind = match.lastgroup
        if kind == "op":
            if words:
                found.append(words)
            words, redirected = [], False
        elif kind == "redirect":
            redirected = not match.group()[-1].isdigit()  # ``2>&1`` names no file
        elif redirected:
            redirected = False
        else:
            words.append(_QUOTES.sub(lambda m: m.group(1) or m.group(2) or "", match.group()))
    if words:
        found.append(words)
    return found


@lru_cache(maxsize=1024)
def programs(command: str) -> tuple[tuple[str, ...], ...]:
    """Each simple command of ``command`` from its program on (:func:`segments`, wrappers
    skipped); cached: a session runs the same few commands again and again."""
    return tuple(tuple(_program(words)) for words in segments(command))


def _program(words: list[str]) -> list[str]:
    """``words`` from the program on: leading ``VAR=value`` assignments, ``sudo``/``env``/
    ``time`` and ``npx``/``pnpm exec``/``uv run``/``python -m`` wrappers skipped."""
    at = 0
    while at < len(words) and (("=" in words[at] and not words[at].startswith("-"))
                               or words[at] in ("sudo", "env", "time", "command")):
        at += 1
    rest = words[at:]
    wrapped = len(rest) > 2 and (
        rest[:2] in (["pnpm", "exec"], ["uv", "run"], ["poetry", "run"])
        or (rest[0].startswith("python") and rest[1] == "-m")
    )
    if rest and rest[0] in ("npx", "bunx"):
        rest = rest[1:]
        while rest and rest[0].startswith("-"):
            rest = rest[1:]
    elif wrapped:
        rest = rest[2:]
    if rest:
        rest = [rest[0].rsplit("/", 1)[-1], *rest[1:]]
    return rest


def is_check(words: Sequence[str]) -> bool:
    """A test, lint, type-check or build command (``words``: from its program on)."""
    if not words:
        return False
    program = words[0]
    if program in _CHECK_PROGRAMS:
        return True
    if program in _SUBCOMMAND_CHECKS:
        return len(words) > 1 and words[1] in _SUBCOMMAND_CHECKS[program]
    if program in _PACKAGE_MANAGERS and len(words) > 1:
        if words[1] == "run" and len(words) > 2:
            return _SCRIPT_CHECK.match(words[2]) is not None
        return _SCRIPT_CHECK.match(words[1]) is not None
    return False


def interesting(command: str) -> bool:
    """Whether ``command`` may run anything this module reads (a cheap first test)."""
    return _INTERESTING.search(command) is not None


def checks(command: str) -> list[str]:
    """The check commands ``command`` runs, each as its words joined (the key it is
    grouped by)."""
    return [" ".join(words) for words in programs(command) if is_check(words)]


def no_match(command: str, run: Run) -> bool:
    """A search that found nothing (``grep``/``rg``/``find`` exiting 1 with no output) or a
    ``diff`` that found differences: exit code 1 of a command holding such a program."""
    if run.exit_code != 1:
        return False
    names = {words[0] for words in programs(command) if words}
    if names.isdisjoint(_SEARCHES) and not {"git grep", "git diff"} & {
        " ".join(words[:2]) for words in programs(command)
    }:
        return False
    body = _EXIT.sub("", run.output).strip()
    return body in ("", "(no output)") or "diff" in names or "cmp" in names


def outcome(run: Run) -> tuple[bool, str]:
    """(passed, its first failing line or ``""``) of a check's run; a piped check (``| tail``)
    whose exit code is the pipe's fails by its output."""
    output = run.output
    if not run.failed:
        output = output[-PIPED_TAIL:]  # (a piped check prints its verdict last: `| tail`)
        piped = _PIPED_FAILURE.search(output)
        if piped is None:
            return True, ""
        end = output.find("\n", piped.end())
        return False, output[piped.start() : end if end >= 0 else len(output)].strip()
    body = _EXIT.sub("", output)
    lines = [line.strip() for line in body.splitlines() if line.strip()]
    return False, first_error_line(body) or (lines[-1] if lines else "")


def first_changed_line(old: str, new: str) -> tuple[str, str]:
    """The first line where ``old`` and ``new`` differ, on each side, stripped: the lines both
    start and end with set aside, the first non-blank line of what is left (``""`` when a
    side has none: a pure addition or removal)."""
    old_lines, new_lines = old.splitlines(), new.splitlines()
    start = 0
    while start < min(len(old_lines), len(new_lines)) and old_lines[start] == new_lines[start]:
        start += 1
    end = 0
    while (end < min(len(old_lines), len(new_lines)) - start
           and old_lines[-1 - end] == new_lines[-1 - end]):
        end += 1
    return (_first_text(old_lines[start : len(old_lines) - end]),
            _first_text(new_lines[start : len(new_lines) - end]))


def _first_text(lines: list[str]) -> str:
    return next((line.strip() for line in lines if line.strip()), "")


def written_lines(content: str | None) -> int | None:
    """How many lines a write's ``content`` has (None without one)."""
    if content is None:
        return None
    return content.count("\n") + (1 if content and not content.endswith("\n") else 0)


def moves(command: str) -> list[tuple[str, str]]:
    """``(path, what happened)`` for each file a command deletes or moves: ``rm``, ``git rm``
    (``deleted``), ``mv``, ``git mv`` (``moved to <target>``)."""
    found: list[tuple[str, str]] = []
    for words in programs(command):
        if words[:2] in (("git", "rm"), ("git", "mv")):
            words = words[1:]
        if not words or words[0] not in ("rm", "mv"):
            continue
        paths = [word for word in words[1:] if not word.startswith("-")]
        if words[0] == "rm":
            found.extend((path, "deleted") for path in paths)
        elif len(paths) >= 2:
            found.extend((path, f"moved to {paths[-1]}") for path in paths[:-1])
    return found


def vcs_events(command: str, output: str, failed: bool) -> list[str]:
    """What a command reports of commits, tags, pushes, releases and branches (what its
    output says happened, even when a later step failed; tags and versions it names only
    when it succeeded):
    ``commit <hash> on <branch>: <message>``, ``tag <name>``, ``pushed <src> -> <dst>``,
    ``version <v>`` (``npm version``, a ``version:*`` script), ``published <pkg@v>``,
    ``created branch <b>``, ``switched to branch <b>``."""
    # Each report is looked for only after a command that can make it: most outputs are
    # long and report nothing.
    events = [f"commit {hash_} on {branch}: {message.strip()}"
              for branch, hash_, message in (_COMMIT.findall(output) if "git" in command else ())]
    for words in () if failed else programs(command):
        if words[:2] == ("git", "tag") and len(words) > 2 and not words[2].startswith("-"):
            events.append(f"tag {words[2]}")
        elif words[:1] and words[0] in _PACKAGE_MANAGERS and (
            words[1:2] == ("version",)
            or (words[1:2] == ("run",) and words[2:3] and words[2].startswith("version"))
        ):
            versions = _VERSION.findall(output)
            if versions:
                events.append(f"version {versions[0]} ({' '.join(words)})")
    if "publish" in command:
        published = _PUBLISHED.findall(output)
        if published:
            events.append(f"published {', '.join(published)}")
        events.extend(f"published {name} {version}"
                      for name, version in _UPLOADING.findall(output))
    if "push" in command:
        events.extend(f"pushed {source} -> {target}" for source, target in _PUSHED.findall(output))
    if "checkout" in command or "switch" in command:
        for new, branch in _SWITCHED.findall(output):
            events.append(f"{'created branch' if new else 'switched to branch'} {branch}")
    return events
