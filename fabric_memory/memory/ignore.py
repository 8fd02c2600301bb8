"""Do-not-index: folders whose sessions never enter memory (docs/privacy.md).

A ``.fabric-memory-ignore`` file in a folder keeps out every session whose working folder
is that folder or inside it. Its lines narrow it: blank lines and ``#`` comments aside,
each line is a folder pattern relative to the file's folder (``*`` and ``?`` within one
name, ``/`` between names), and then only sessions inside a matching folder are kept out.
``$FABRIC_MEMORY_IGNORE`` lists more folders (separated by ``:``), kept out whole.

A writer learns a session's working folder from the head of its file (the first lines,
at most :data:`HEAD_BYTES`), so a session inside an ignored folder is never read past it;
when the head does not say, the reader's own answer is checked before anything is kept.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from fnmatch import fnmatchcase
from functools import lru_cache
from pathlib import PurePosixPath

import orjson

MARKER = ".fabric-memory-ignore"
IGNORE_ENV = "FABRIC_MEMORY_IGNORE"
HEAD_BYTES = 32 * 1024
HEAD_LINES = 20


def ignored(cwd: str | None) -> str | None:
    """Why a session that worked in ``cwd`` is kept out of memory (the marker file or the
    setting that says so), or None."""
    if not cwd or not cwd.startswith("/"):
        return None
    folder = os.path.normpath(cwd)
    for listed in _listed(os.environ.get(IGNORE_ENV, "")):
        if folder == listed or folder.startswith(listed.rstrip("/") + "/"):
            return f"{IGNORE_ENV} lists {listed}"
    here = folder
    while True:
        patterns = _marker(here)
        if patterns is not None and _matches(patterns, folder, here):
            return f"{os.path.join(here, MARKER)} keeps it out"
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def head_folder(path: str) -> str | None:
    """The working folder a session file names in its first lines (a ``cwd`` at the top of
    a line, or one level down as Codex's ``payload`` holds it), without reading further."""
    from ..session import open_regular  # (what reads a session's head reads sessions)

    try:
        fd = open_regular(path)  # never waits on a FIFO that has no writer
    except OSError:
        return None
    try:
        head = os.read(fd, HEAD_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)
    for line in _lines(head, HEAD_LINES):
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(value, dict):
            continue
        for holder in (value, *(v for v in value.values() if isinstance(v, dict))):
            cwd = holder.get("cwd")
            if isinstance(cwd, str) and cwd:
                return cwd
    return None


def _lines(data: bytes, most: int) -> Iterator[bytes]:
    """The first ``most`` lines of ``data``, cut as they are asked for (the first one
    nearly always names the folder)."""
    start = 0
    for _ in range(most):
        end = data.find(b"\n", start)
        if end < 0:
            yield data[start:]
            return
        yield data[start:end]
        start = end + 1


@lru_cache(maxsize=1)
def _listed(setting: str) -> tuple[str, ...]:
    return tuple(os.path.normpath(os.path.expanduser(part))
                 for part in setting.split(os.pathsep) if part.strip())


def _marker(folder: str) -> tuple[str, ...] | None:
    """The patterns of ``folder``'s marker (empty: the whole folder), None when it has none.
    Read on every call: a marker written while a server runs counts from then on."""
    try:
        with open(os.path.join(folder, MARKER), "rb") as stream:
            text = stream.read(HEAD_BYTES).decode("utf-8", "replace")
    except OSError:
        return None
    return tuple(line.strip().strip("/") for line in text.splitlines()
                 if line.strip() and not line.lstrip().startswith("#"))


def _matches(patterns: tuple[str, ...], folder: str, marker_folder: str) -> bool:
    if not patterns:
        return True
    inside = PurePosixPath(os.path.relpath(folder, marker_folder)).parts
    for pattern in patterns:
        names = PurePosixPath(pattern).parts
        if len(inside) >= len(names) and all(
                fnmatchcase(part, name) for part, name in zip(inside, names, strict=False)):
            return True
    return False
