"""Aider: ``.aider.chat.history.md`` in each project folder it ran in (no fixed home).

The history is Markdown Aider appends to as it talks: ``# aider chat started at
YYYY-MM-DD HH:MM:SS`` opens each run; the user's input is written ``#### <line>``; what
Aider itself reports (its start-up lines, ``Applied edit to <file>``, ``Commit <hash>
<message>``, ``Running <command>`` and the output added to the chat, errors) is quoted
``> <line>``; everything else is the model's reply (Markdown, with its SEARCH/REPLACE
blocks in fences, whose lines are the reply's whatever they start with).

Each block of lines of one kind is one entry addressed by its first line, ``L<line>``
(a block's lines never move: Aider only appends), its raw source the block's lines; a
quoted block that applied edits or ran commands is the calls (an assistant entry) and
their results after it (``L<line>.1``, …). ``.aider.input.history`` (the same inputs
again, for Aider's prompt history) is not read.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import xxhash

from ..errors import NotASessionError
from .pi import TOOLS as PI_TOOLS
from .reader import (
    NOT_JSON,
    Entries,
    JsonLines,
    SourceLine,
    SourceReader,
    build_session,
    event,
    message,
    name_ids,
    text_block,
    tool_call_block,
    tool_result,
)
from .tools import Tool, Use, argument, shell_tool

if TYPE_CHECKING:  # loaded when a file is read (see fabric_memory.sources.reader)
    from ..session import Session

AGENT: Final = "aider"
HISTORY: Final = ".aider.chat.history.md"
STARTED: Final = "# aider chat started at "
_START: Final = re.compile(r"# aider chat started at (\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d)")
_APPLIED: Final = re.compile(r"Applied edit to (.+)")
_RUNNING: Final = re.compile(r"Running (.+)")
_RUN_INPUT: Final = re.compile(r"(?:/run |/test |!)(.+)")
_PROMPT: Final = re.compile(
    r".*\? \([YN]\)es/\([YN]\)o.*|Added \d+ lines? of output to the chat\.?")
"""Aider's questions to the user and its notes on them: not part of a command's output."""
_ERROR: Final = re.compile(
    r"(?:Error\b|error:|Unable to |Failed to |Traceback |.*did not conform to the edit format"
    r"|.*: file not found error|.*Exception\b|litellm\.\w+Error)")
"""A quoted line that reports a failure (an edit not applied, a file not found, a model
error)."""


def lists(path: str) -> bool:
    """Aider's history: ``.aider.chat.history.md``, wherever it lies."""
    return os.path.basename(path) == HISTORY


def recognises(first: Any, path: str) -> bool:
    """Aider's history: a Markdown file whose first non-blank line opens a run
    (``# aider chat started at …``)."""
    if first is not NOT_JSON:  # (a JSON first line is no such heading: most files end here)
        return False
    from ..session import open_regular

    try:
        fd = open_regular(path)  # never waits on a FIFO that has no writer
    except OSError:
        return False
    try:
        head = os.pread(fd, 256, 0)
    except OSError:
        return False
    finally:
        os.close(fd)
    return head.lstrip().startswith(STARTED.encode())


def _homes(projects: Collection[str]) -> tuple[Path, ...]:
    return ()


@dataclass(slots=True)
class _Block:
    kind: str
    """``start``, ``user``, ``quoted`` or ``reply``."""
    lines: list[SourceLine] = field(default_factory=list)

    @property
    def source(self) -> SourceLine:
        """The block's bytes: from its first line's first byte to its last line's last."""
        first, last = self.lines[0], self.lines[-1]
        return SourceLine(first.number, first.offset, last.offset + last.length - first.offset,
                          None)

    def texts(self) -> list[str]:
        prefix = {"user": "####", "quoted": ">"}.get(self.kind)
        found = []
        for line in self.lines:
            text = str(line.value).rstrip()
            if prefix is not None and text.startswith(prefix):
                text = text[len(prefix):].removeprefix(" ")
            found.append(text)
        return found


def _blocks(lines: JsonLines) -> list[_Block]:
    """The file's non-blank lines grouped into blocks: a run's first line, each input (its
    ``####`` lines one after another), and runs of quoted or reply lines (a fence in a
    reply keeps its lines the reply's)."""
    blocks: list[_Block] = []
    fenced = False
    for line in lines:
        text = str(line.value)
        current = blocks[-1] if blocks else None
        if current is not None and current.kind == "reply" and fenced:
            kind = "reply"
        elif text.startswith(STARTED):
            kind = "start"
        elif text.startswith("####"):
            kind = "user"
        elif text.startswith(">"):
            kind = "quoted"
        else:
            kind = "reply"
        if kind == "reply" and text.lstrip().startswith("```"):
            fenced = not fenced
        if current is None or current.kind != kind or kind == "start" or (
                kind == "user" and line.number != current.lines[-1].number + 1):
            blocks.append(_Block(kind))
        blocks[-1].lines.append(line)
    return blocks


@dataclass(slots=True)
class _Reading:
    entries: Entries = field(default_factory=Entries)
    time: str | None = None
    """The time of the current run (local time as Aider writes it, read as UTC)."""
    pending: tuple[str, str] | None = None
    # (the command is kept for the report of a result that never came)
    """(call id, command) of a ``/run`` input whose output the next quoted block is."""

    def add(self, line: SourceLine, raw: dict[str, Any]) -> None:
        self.entries.add(line, raw, parent=self.entries.last_id, timestamp=self.time)


def read(path: str, max_line_bytes: int) -> Session:
    lines = JsonLines(path, max_line_bytes, text=True)
    reading = _Reading()
    blocks = _blocks(lines)
    if not blocks:
        raise NotASessionError(path, None, "empty file: no Aider chat history")
    if blocks[0].kind != "start":
        raise NotASessionError(path, blocks[0].lines[0].number, "not an Aider chat history "
                               f"(its first line does not start with {STARTED.strip()!r})")
    for block in blocks:
        _read_block(block, reading)
    folder = os.path.dirname(os.path.realpath(path))
    session_id = _session_id(folder)
    if reading.entries.entries:
        name_ids(reading.entries.entries[0].raw, [session_id])
    return build_session(lines, reading.entries, agent=AGENT, session_id=session_id,
                         project=folder, header={"cwd": folder})


def _read_block(block: _Block, reading: _Reading) -> None:
    line, texts = block.source, block.texts()
    if block.kind == "start":
        found = _START.match(texts[0])
        reading.time = f"{found.group(1)}T{found.group(2)}" if found else None
        reading.pending = None
        reading.add(line, event("aider:start", texts[0].lstrip("# ")))
    elif block.kind == "user":
        said = "\n".join(texts)
        reading.add(line, message("user", [text_block(said)]))
        command = _RUN_INPUT.fullmatch(said.strip())
        if command is not None:
            call_id = f"L{line.number}:run"
            reading.entries.follow(message("assistant", [
                tool_call_block(call_id, "run", {"command": command.group(1)})]))
            reading.pending = (call_id, command.group(1))
    elif block.kind == "reply":
        reading.add(line, message("assistant", [text_block("\n".join(texts).strip())]))
        reading.pending = None
    else:
        _quoted(line, texts, reading)


def _quoted(line: SourceLine, texts: list[str], reading: _Reading) -> None:
    """What Aider reported: the edits it applied and the commands it ran are calls, each
    followed by its result; a ``/run`` input's output is that call's result; anything
    else is a note (an error among it: an error result)."""
    calls: list[tuple[str, str, dict[str, str], list[str]]] = []
    """(call id, tool, arguments, the lines of its result)."""
    loose: list[str] = []
    for text in texts:
        applied, running = _APPLIED.fullmatch(text), _RUNNING.fullmatch(text)
        if applied is not None:
            calls.append((f"L{line.number}:{len(calls)}", "edit",
                          {"path": applied.group(1).strip()}, [text]))
        elif running is not None:
            calls.append((f"L{line.number}:{len(calls)}", "run",
                          {"command": running.group(1).strip()}, []))
        elif calls and calls[-1][1] == "run" and not _PROMPT.fullmatch(text):
            calls[-1][3].append(text)
        else:
            loose.append(text)
    said = "\n".join(loose).strip()
    if reading.pending is not None:
        call_id = reading.pending[0]
        reading.pending = None
        reading.add(line, tool_result(call_id, "run", said, is_error=_failed(loose)))
    elif not calls:
        failure = next((text for text in loose if _ERROR.match(text)), None)
        if failure is None:
            reading.add(line, event("aider", said))
            return
        call_id = f"L{line.number}:0"  # Aider's own step that failed, named by its error
        reading.add(line, message("assistant", [
            tool_call_block(call_id, AGENT, {"error": failure})]))
        reading.entries.follow(tool_result(call_id, AGENT, said, is_error=True))
        return
    else:
        reading.add(line, message("assistant", [
            tool_call_block(call_id, tool, arguments) for call_id, tool, arguments, _ in calls]))
    for call_id, tool, _, output in calls:
        reading.entries.follow(tool_result(call_id, tool, "\n".join(output),
                                           is_error=_failed(output)))
    if said and calls and reading.entries.entries[-1].type == "message":
        reading.entries.follow(event("aider", said))


def _failed(texts: list[str]) -> bool:
    return any(_ERROR.match(text) for text in texts)


def _session_id(folder: str) -> str:
    """``<folder name>-<8 hex of its real path>``: one history per project folder."""
    return f"{os.path.basename(folder) or 'root'}-{xxhash.xxh3_64_hexdigest(folder.encode())[:8]}"


TOOLS: Final[dict[str, Tool]] = {
    "run": shell_tool("command"),
    "aider": Tool("shell", lambda arguments: Use(target=argument(arguments, "error"))),
}
"""Aider's actions as the work trail reads them: ``run`` (a command it ran, ``/run``,
``/test`` or ``!``, or one the model suggested); an applied edit is Pi's ``edit`` (its
``path``)."""

AIDER = SourceReader(AGENT, recognises, read, _homes, tools={**TOOLS, "edit": PI_TOOLS["edit"]},
                     lists=lists)
