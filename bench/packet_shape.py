"""``python -m bench.packet_shape FILE... [--json]``: what the handoff packet spends its bytes
on, at each compaction of real Claude Code transcripts (docs/performance.md, "The packet's
shape").

For each ``compact_boundary`` line of each file, the transcript is cut where Claude Code
runs the hook (everything before that line) and ``fabric_memory.handoff.handoff`` makes
the packet. Measured per packet: its bytes; the bytes of 36-character UUIDs in it (the
addresses of the packet before line addresses); its open lines (failed commands and
checks) and how many of those the transcript shows fixed later — every command of the
failed chain (but ``cd``) run by a later successful Bash call, alone or in a chain (its
program by base name, redirections left out), decided from the raw lines, not by
fabric-memory — or
are failed lookups (a Read, Grep or Glob that found nothing); and the bytes of its file sections
(``File changes``, ``Where to look``, ``Content written``) with the share of their lines
whose path the host's own summary (the ``isCompactSummary`` line after the boundary)
names. Whatever ``fabric_memory`` is importable is measured, so the same command measures
an older checkout (``PYTHONPATH=<its tree>``).
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
OPEN_SECTIONS = ("Unfinished", "Still open")
FILE_SECTIONS = ("File changes", "Where to look", "Content written")
_CD = re.compile(r"^\s*cd\s+\S+\s*&&\s*")
_QUOTED = re.compile(r"`([^`]+)`")


_PARTS = re.compile(r"\s*(?:&&|\|\|?|;)\s*")
_REDIRECT = re.compile(r"\s*\d?\s*>&?\s*\S+")


def alike(command: str) -> str:
    """A command as the fixed-later test compares it: ``cd DIR &&`` and redirections left
    out, whitespace collapsed, its program by base name."""
    words = _REDIRECT.sub("", _CD.sub("", command)).split()
    return " ".join([words[0].rsplit("/", 1)[-1], *words[1:]]) if words else ""


def parts(command: str) -> set[str]:
    """The simple commands of a chain (``a && b | c``; quotes respected), each
    :func:`alike`."""
    import shlex

    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:  # an unbalanced quote: split it as text
        return {alike(part) for part in _PARTS.split(command) if part.strip()} - {""}
    found, current = set(), []
    for token in [*tokens, ";"]:
        if token in ("&&", "||", "|", ";", "&"):
            found.add(alike(" ".join(current)))
            current = []
        else:
            current.append(token)
    return found - {""}


def fixed_later(lines: list[dict[str, Any]]) -> set[str]:
    """The Bash commands of the span (each :func:`alike`) whose latest failure was fixed
    later: every command of the failed chain (but ``cd``) succeeded in a later call, alone
    or in a chain of its own."""
    commands: dict[str, str] = {}
    waiting: list[tuple[str, set[str]]] = []
    fixed: set[str] = set()
    for line in lines:
        content = (line.get("message") or {}).get("content")
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use" and block.get("name") == "Bash":
                commands[block["id"]] = str((block.get("input") or {}).get("command"))
            elif block.get("type") == "tool_result" and block.get("tool_use_id") in commands:
                command = commands[block["tool_use_id"]]
                ran = {part for part in parts(command) if not part.startswith("cd ")}
                if block.get("is_error") is True:  # (a failure again reopens it)
                    fixed.discard(alike(command))
                    waiting.append((alike(command), set(ran)))
                    continue
                for failed, left in waiting:
                    left -= ran
                    if not left:
                        fixed.add(failed)
    return fixed


def sections(packet: str) -> dict[str, list[str]]:
    """The packet's sections by title (the count in the heading left out): their lines."""
    found: dict[str, list[str]] = {}
    title = ""
    for line in packet.splitlines():
        if line.startswith("## "):
            title = line[3:].rsplit(" (", 1)[0]
            found[title] = []
        elif title and line.startswith("- "):
            found[title].append(line)
    return found


def _value(line: bytes) -> dict[str, Any]:
    """A line's JSON object (``{}`` for a blank or damaged line: it holds nothing to count)."""
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def measure(path: Path) -> list[dict[str, Any]]:
    """One row per compaction of ``path``."""
    from fabric_memory.handoff import handoff

    raw = path.read_bytes().splitlines(keepends=True)
    lines = [_value(line) for line in raw]
    marks = [at for at, line in enumerate(lines) if line.get("subtype") == "compact_boundary"]
    rows = []
    for number, mark in enumerate(marks):
        start = marks[number - 1] + 1 if number else 0
        summary = next((str(line["message"]["content"]) for line in lines[mark:mark + 4]
                        if line.get("isCompactSummary")), "")
        session = next(line["sessionId"] for line in lines if line.get("sessionId"))
        with tempfile.TemporaryDirectory() as scratch:
            cut = Path(scratch) / f"{session}.jsonl"
            cut.write_bytes(b"".join(raw[:mark]))
            event = orjson.dumps({"session_id": session, "transcript_path": str(cut),
                                  "cwd": "/", "hook_event_name": "SessionStart",
                                  "source": "compact"})
            try:
                output = handoff(event)
            except Exception as exc:
                rows.append({"file": path.name, "boundary": mark + 1, "error": str(exc)})
                continue
        if output is None:
            continue
        packet = orjson.loads(output)["hookSpecificOutput"]["additionalContext"]
        shown = sections(packet)
        fixed = fixed_later(lines[start:mark])
        opened = [line for title in OPEN_SECTIONS for line in shown.get(title, [])
                  if re.match(r"- \[[^\]]+\] (?:error|check): ", line)]
        fixed_open = [line for line in opened
                      if any(command.startswith(alike(quoted).removesuffix("..."))
                             for quoted in _QUOTED.findall(line)[:1] for command in fixed)]
        lookups = [line for line in opened if re.match(r"- \[[^\]]+\] error: (?:Read|Grep|Glob) ",
                                                       line)]
        file_lines = [line for title in FILE_SECTIONS for line in shown.get(title, [])]
        in_summary = [line for line in file_lines
                      if (name := line.split("] ", 1)[-1].split(":", 1)[0].split(" (")[0])
                      and name.rsplit("/", 1)[-1] in summary]
        size = len(packet.encode())
        rows.append({
            "file": path.name, "boundary": mark + 1, "bytes": size,
            "uuidBytes": sum(len(found) for found in UUID.findall(packet)),
            "open": len(opened), "openFixedLater": len(fixed_open),
            "openLookups": len(lookups),
            "fileBytes": sum(len(line.encode()) + 1 for line in file_lines),
            "fileLines": len(file_lines), "fileLinesInHostSummary": len(in_summary),
        })
    return rows


def totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    good = [row for row in rows if "bytes" in row]
    size = sum(row["bytes"] for row in good) or 1
    files = sum(row["fileLines"] for row in good) or 1
    return {
        "packets": len(good), "failed": len(rows) - len(good),
        "meanBytes": statistics.mean(row["bytes"] for row in good) if good else 0,
        "uuidShare": sum(row["uuidBytes"] for row in good) / size,
        "open": sum(row["open"] for row in good),
        "openFixedLater": sum(row["openFixedLater"] for row in good),
        "openLookups": sum(row["openLookups"] for row in good),
        "fileShare": sum(row["fileBytes"] for row in good) / size,
        "fileLinesInHostSummary": sum(row["fileLinesInHostSummary"] for row in good) / files,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.packet_shape", description=__doc__)
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--json", action="store_true", help="every packet's row too")
    args = parser.parse_args(argv)
    rows = [row for path in args.files for row in measure(path)]
    result = totals(rows)
    if args.json:
        sys.stdout.write(orjson.dumps({**result, "rows": rows},
                                      option=orjson.OPT_INDENT_2).decode() + "\n")
        return 0
    print(f"{result['packets']} packets ({result['failed']} not made), mean "
          f"{result['meanBytes']:.0f} B: UUID bytes {result['uuidShare']:.1%}; open lines "
          f"{result['open']}, of them fixed later {result['openFixedLater']} and failed "
          f"lookups {result['openLookups']}; file sections "
          f"{result['fileShare']:.1%} of bytes, {result['fileLinesInHostSummary']:.0%} of "
          "their lines name a file the host's summary names")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
