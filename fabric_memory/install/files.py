"""Editing a host's own settings files safely: read strictly (a file this module cannot
write back as it is, is refused with ``path:line``), hold a lock from reading to writing,
and replace the file in one rename through any symlink, keeping its mode and layout.

Every installer (Pi's, Claude Code's, Codex's, Copilot CLI's, Cursor's, Goose's) edits its
files only through these.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UsageError

LOCK_WAIT_SECONDS = 10.0
"""Longest an install waits for another writer of the same file."""
LOCK_STALE_SECONDS = 10.0
"""A lock untouched this long was left by a writer that died (proper-lockfile's default)."""


@contextlib.contextmanager
def locked(path: Path, holder: str = "another writer") -> Iterator[None]:
    """proper-lockfile's lock on ``path`` (what Pi and other Node tools take): a
    ``<file>.lock`` folder made by ``mkdir`` (atomic) beside the file as named, taken over
    once stale. Writers wait for each other; no update is lost."""
    lock = path.with_name(path.name + ".lock")
    deadline = time.monotonic() + LOCK_WAIT_SECONDS
    while True:
        try:
            os.mkdir(lock)
            break
        except FileExistsError:
            try:
                stale = time.time() - lock.stat().st_mtime > LOCK_STALE_SECONDS
            except FileNotFoundError:  # released meanwhile
                continue
            if stale:
                with contextlib.suppress(OSError):
                    os.rmdir(lock)
                continue
            if time.monotonic() >= deadline:
                raise UsageError(f"{lock}: {holder} holds the lock on {path.name} after "
                                 f"{LOCK_WAIT_SECONDS:g}s; rerun when it is done") from None
            time.sleep(0.02)
        except OSError as exc:
            raise UsageError(f"{lock}: cannot take the lock on {path.name} "
                             f"({exc.strerror or exc})") from None
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(lock)


def make_folder(folder: Path, what: str) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{folder}: cannot create {what} ({exc.strerror or exc})") from None


def read_text(path: Path, what: str) -> str | None:
    """The file as text, ``None`` when it does not exist."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read {what} ({exc.strerror or exc})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise left_alone(path, data.count(b"\n", 0, exc.start) + 1, "not valid UTF-8") from None


def left_alone(path: Path, line: int | None, reason: str) -> UsageError:
    where = f"{path}:{line}" if line is not None else str(path)
    return UsageError(f"{where}: {reason}, so it was left as it is; fix it, then rerun")


# --- JSON ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JsonLayout:
    """How a JSON file is laid out, so a rewrite changes only what was edited."""

    indent: str | int = 2
    final_newline: bool = False


def layout_of(text: str | None, default: JsonLayout = JsonLayout()) -> JsonLayout:
    """The indent of the first indented line and whether the file ends with a newline."""
    if not text or not text.strip():
        return default
    found = re.search(r"\n([ \t]+)\S", text)
    indent: str | int = default.indent
    if found:
        unit = found.group(1)
        indent = len(unit) if set(unit) == {" "} else unit
    return JsonLayout(indent, text.endswith("\n"))


def read_json_object(path: Path, what: str) -> tuple[dict[str, Any], JsonLayout | None]:
    """A JSON object the host can read and this module can write back unchanged, with its
    layout (``({}, None)`` for a missing file); anything else is refused with
    ``path:line`` and left as it is."""
    text = read_text(path, what)
    if text is None:
        return {}, None
    try:
        value = json.loads(text, parse_constant=_not_json, parse_float=_finite)
    except _NotFinite as exc:
        raise left_alone(path, _line_of_number(text, exc.text),
                         f"the number {exc.text} does not fit a 64-bit float (written back it "
                         "would be Infinity or NaN, which is not JSON)") from None
    except ValueError as exc:
        where = exc.lineno if isinstance(exc, json.JSONDecodeError) else None
        raise left_alone(path, where, "not valid JSON") from None
    lone = _lone_surrogate_line(text)
    if lone is not None:
        raise left_alone(path, lone, "a \\u escape names a lone surrogate, which is not text")
    if not isinstance(value, dict):
        raise left_alone(path, None, "$ is not a JSON object")
    return value, layout_of(text)


def dump_json(value: dict[str, Any], layout: JsonLayout) -> str:
    text = json.dumps(value, indent=layout.indent, ensure_ascii=False, allow_nan=False)
    return text + "\n" if layout.final_newline else text


class _NotFinite(ValueError):
    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


def _not_json(text: str) -> float:
    """``NaN``, ``Infinity``, ``-Infinity``: Python's json reads them, JSON has none."""
    raise _NotFinite(text)


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise _NotFinite(text)
    return number


def _line_of_number(text: str, number: str) -> int | None:
    found = re.search(rf"(?<![\w.\"]){re.escape(number)}(?![\w.])", text)
    return text.count("\n", 0, found.start()) + 1 if found else None


_SURROGATE_ESCAPE = re.compile(r"(\\+)u([dD][89abAB][0-9a-fA-F]{2}|[dD][c-fC-F][0-9a-fA-F]{2})")


def _lone_surrogate_line(text: str) -> int | None:
    """The line of the first ``\\uD800``-``\\uDFFF`` escape that is not half of a pair."""
    pending: re.Match[str] | None = None  # a high half waiting for its low half
    for found in _SURROGATE_ESCAPE.finditer(text):
        if len(found.group(1)) % 2 == 0:  # an escaped backslash, then plain "u..."
            continue
        high = found.group(2)[1] in "89abAB"
        if pending is not None and not high and found.start() == pending.end():
            pending = None
        elif pending is not None or not high:
            return text.count("\n", 0, (pending or found).start()) + 1
        else:
            pending = found
    return None if pending is None else text.count("\n", 0, pending.start()) + 1


# --- writing ---------------------------------------------------------------------------


def write_through(path: Path, text: str, what: str) -> None:
    """Replace the file in one rename, with the mode it had. A symlinked file (dotfiles)
    stays a link: the file it leads to is replaced. A read-only file is refused."""
    target = Path(os.path.realpath(path))
    try:
        mode = target.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o644
    else:
        if not mode & 0o222 or not os.access(target, os.W_OK):
            raise UsageError(f"{path}: read-only (mode {mode:04o}), so it was left as it is; "
                             "make it writable, then rerun")
    try:
        fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.",
                                         suffix=".tmp")
    except OSError as exc:
        raise UsageError(f"{path}: cannot write {what} in {target.parent} "
                         f"({exc.strerror or exc})") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
            out.write(text)
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        os.unlink(temporary)
        raise


def edit_json(path: Path, what: str, holder: str,
              change: Callable[[dict[str, Any]], bool], *, remove_empty: bool) -> bool:
    """Under the file's lock: read the JSON object (a missing file is ``{}``), let
    ``change`` edit it in place (``True`` when it changed something), and write it back in
    its own layout — or, when ``remove_empty`` and nothing is left, delete the file (a
    symlink stays, leading to ``{}``). Whether the file was deleted."""
    make_folder(path.parent, f"the folder of {path.name}")
    with locked(path, holder):
        data, layout = read_json_object(path, what)
        if not change(data):
            return False
        if data or not remove_empty:
            write_through(path, dump_json(data, layout or JsonLayout()), what)
            return False
        return remove_or_empty(path, "{}", what)


def remove_or_empty(path: Path, empty: str, what: str) -> bool:
    """After an uninstall left nothing in the file: delete it (``True``), or, when it is a
    symlink (dotfiles), keep the link and write ``empty`` through it (``False``)."""
    if path.is_symlink():
        write_through(path, empty, what)
        return False
    try:
        path.unlink()
    except OSError as exc:
        raise UsageError(f"{path}: cannot remove {what} ({exc.strerror or exc})") from None
    return True


def edit_text(path: Path, what: str, holder: str,
              change: Callable[[str], str | None]) -> bool:
    """Under the file's lock: let ``change`` rewrite the file's text (a missing file is
    ``""``; ``None``: nothing to write) and write it back in one rename — or, when nothing
    is left (``""``), delete the file (a symlink stays, leading to an empty file). Whether
    the file was deleted."""
    make_folder(path.parent, f"the folder of {path.name}")
    with locked(path, holder):
        text = read_text(path, what)
        changed = change(text or "")
        if changed is None:
            return False
        if changed or text is None:
            write_through(path, changed, what)
            return False
        return remove_or_empty(path, "", what)
