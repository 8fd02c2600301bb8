"""Digests: what a shell command printed and what a write put in its file, in a few lines.

A command's digest is the part of its output a continuing agent would otherwise run it
again for: its first error line when it failed; for well-known commands the result
itself (``git status``: the branch and the files it lists; ``git log``: hashes and
messages; ``git diff --stat``: the files and the totals; a test run's summary line;
``ls``: the names it lists); else its first three output lines and its last. A written file's
digest is its headings, the names it defines or exports, or its first non-empty lines.

Pure functions over text; the compactor bounds and masks what it keeps.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from .facts import first_error_line

ITEMS: Final = 8
"""At most this many files, commits, names or headings in one digest."""
LINE_CHARS: Final = 120
FIRST_LINES: Final = 3
"""Any other command's first lines kept (and its last)."""

_STATUS_FILE = re.compile(
    r"^\s*(modified|deleted|new file|renamed|both modified|typechange):\s+(.+)$"
    r"|^([ MADRCU?!]{2}) (\S.*)$",
    re.MULTILINE,
)
_BRANCH = re.compile(r"^On branch (\S+)|^## (\S+?)(?:\.\.\.|$)", re.MULTILINE)
_UNTRACKED = re.compile(r"^Untracked files:\n(?:\s*\(.*\)\n)*((?:\t.+\n?)+)", re.MULTILINE)
_LOG_FULL = re.compile(r"^commit ([0-9a-f]{7,40})\b.*\n(?:(?!commit ).*\n)*?\n\s{4}(.+)$",
                       re.MULTILINE)
_LOG_ONELINE = re.compile(r"^(?:[*|\\/ ]+)?([0-9a-f]{7,40})\b(?: \([^)]*\))? (.+)$", re.MULTILINE)
_STAT_FILE = re.compile(r"^ (\S.*?)\s+\|\s+(\d+ ?[+-]*|Bin .*)$", re.MULTILINE)
_STAT_TOTAL = re.compile(r"^ \d+ files? changed.*$", re.MULTILINE)
_TEST_SUMMARY = re.compile(
    r"^.*(?:\b\d+ (?:passed|failed|errors?|skipped|tests?|pass|fail)\b|^Tests?:|test result:"
    r"|^(?:OK|FAILED)(?: \(.*\))?$|^Ran \d+ tests?).*$",
    re.MULTILINE | re.IGNORECASE,
)
_HEADING = re.compile(r"^#{1,6}\s+\S.*$", re.MULTILINE)
_DEFINITION = re.compile(
    r"^\s*(?:export\s+(?:default\s+)?(?:async\s+)?(?:function\*?|class|const|let|var|type"
    r"|interface|enum)\s+([\w$]+)|(?:async\s+)?def\s+(\w+)|class\s+(\w+)"
    r"|(?:pub(?:\(crate\))?\s+)?(?:fn|struct|enum|trait)\s+(\w+)|func\s+(?:\([^)]*\)\s*)?(\w+)"
    r"|function\s+([\w$]+)|(?:const|let|var)\s+([A-Za-z_$][\w$]*)\s*=)",
    re.MULTILINE,
)
_JSON_KEY = re.compile(r'^\s{0,4}"([^"]{1,60})"\s*:', re.MULTILINE)
_FRONT_MATTER = re.compile(r"\A---\n(.*?)\n---\n", re.DOTALL)
_FENCED = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)


def _clip_line(line: str) -> str:
    line = line.strip()
    return line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 3] + "..."


def _listed(names: Sequence[str]) -> str:
    shown = ", ".join(_clip_line(name) for name in names[:ITEMS])
    more = len(names) - ITEMS
    return shown + (f" (+{more} more)" if more > 0 else "")


def _lines(output: str) -> list[str]:
    return [line.strip() for line in output.splitlines() if line.strip()]


def git_status(output: str) -> str:
    """``branch main; modified: a, b; deleted: c; untracked: d`` (``""``: nothing listed)."""
    parts: list[str] = []
    branch = _BRANCH.search(output)
    if branch:
        parts.append(f"branch {branch.group(1) or branch.group(2)}")
    changed: dict[str, list[str]] = {}
    for match in _STATUS_FILE.finditer(output):
        what, path = (match.group(1), match.group(2)) if match.group(1) else (
            match.group(3).strip() or "?", match.group(4))
        changed.setdefault(what, []).append(path.strip())
    untracked = _UNTRACKED.search(output)
    if untracked:
        changed.setdefault("untracked", []).extend(_lines(untracked.group(1)))
    parts.extend(f"{what}: {_listed(paths)}" for what, paths in changed.items())
    if len(parts) == (1 if branch else 0) and "nothing to commit" in output:
        parts.append("nothing to commit")
    return "; ".join(parts)


def git_log(output: str) -> str:
    """``<hash> <message>`` per commit listed, latest first as printed."""
    found = [f"{hash_[:12]} {message.strip()}" for hash_, message in _LOG_FULL.findall(output)]
    if not found:
        found = [f"{hash_[:12]} {message.strip()}"
                 for hash_, message in _LOG_ONELINE.findall(output)]
    return "; ".join(_clip_line(line) for line in found[:ITEMS]) + (
        f" (+{len(found) - ITEMS} more)" if len(found) > ITEMS else "")


def diff_stat(output: str) -> str:
    """``N files changed, ...: a | 3 ++-, b | 1 +``."""
    total = _STAT_TOTAL.search(output)
    files = [f"{path.strip()} | {count.strip()}" for path, count in _STAT_FILE.findall(output)]
    if not total and not files:
        return ""
    head = total.group().strip() if total else f"{len(files)} files"
    return f"{head}: {_listed(files)}" if files else head


def test_summary(output: str) -> str:
    """The last summary line a test runner printed (``12 passed in 3.1s``)."""
    found = _TEST_SUMMARY.findall(output[-8192:])
    return _clip_line(found[-1]) if found else ""


def listing(output: str) -> str:
    """The names an ``ls`` printed."""
    names = [name for line in _lines(output) for name in line.split()
             if not line.startswith("total ")] if "\n" not in output.strip() else [
        line.split()[-1] for line in _lines(output) if not line.startswith("total ")]
    return _listed(names) if names else ""


def printed(program: Sequence[str], output: str, failed: bool) -> str:
    """What ``output`` of a command (``program``: its words from the program on) says, in
    one line: the first error line when it ``failed``, else the result of a well-known
    command, else its first three output lines and its last."""
    if failed:
        line = first_error_line(output)
        if line:
            return _clip_line(line)
    words = tuple(program[:2])
    if words == ("git", "status"):
        found = git_status(output)
    elif words == ("git", "log") or words == ("git", "reflog"):
        found = git_log(output)
    elif words in (("git", "diff"), ("git", "show")) and "--stat" in program:
        found = diff_stat(output)
    elif program and program[0] in ("ls", "dir", "tree"):
        found = listing(output)
    else:
        found = test_summary(output) if _looks_like_tests(program) else ""
    if found:
        return found
    lines = _lines(output)
    if len(lines) <= FIRST_LINES + 1:
        return " / ".join(_clip_line(line) for line in lines)
    first = " / ".join(_clip_line(line) for line in lines[:FIRST_LINES])
    return f"{first} ... {_clip_line(lines[-1])}"


def _looks_like_tests(program: Sequence[str]) -> bool:
    text = " ".join(program[:3])
    return any(word in text for word in ("test", "pytest", "vitest", "jest", "mocha", "check"))


def content_digest(content: str) -> str:
    """A written file in one line: its headings, else the names it defines or exports (or a
    JSON object's keys), else its first non-empty lines."""
    front = _FRONT_MATTER.match(content)
    names: list[str] = []
    if front:
        names = [line for line in _lines(front.group(1)) if line.startswith(("name:", "title:"))]
    headings = [line.strip() for line in _HEADING.findall(_FENCED.sub("", content))]
    if headings:
        return _listed(names + headings)
    defined = [next(name for name in match if name) for match in _DEFINITION.findall(content)]
    if defined:
        return "defines " + _listed(list(dict.fromkeys(names + defined)))
    if content.lstrip().startswith("{"):
        keys = list(dict.fromkeys(_JSON_KEY.findall(content)))
        if keys:
            return "keys " + _listed(keys)
    lines = _lines(content)
    return " / ".join(_clip_line(line) for line in lines[:2])
