"""``fabric-memory install goose``: Goose starts ``fabric-memory serve`` as one of its
extensions, an entry under ``extensions`` of its ``config.yaml``
(``$XDG_CONFIG_HOME/goose/config.yaml``, ``~/.config/goose/config.yaml``;
``$GOOSE_PATH_ROOT/config/config.yaml`` when that is set), in the shape ``goose configure``
writes for a command-line extension: ``{enabled, type: stdio, name, cmd, args, envs,
env_keys, timeout, description, bundled}``. Goose has no hook that runs after its
compaction, so only the server is installed.

The file is edited as YAML round trip (ruamel.yaml, the ``goose`` extra): every other
key, comment and the file's layout stay; ``--uninstall`` removes exactly the entry.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

from ..errors import MissingExtraError, UsageError
from .command import executable
from .files import edit_text
from .report import Change, HostReport, note_new_sessions

NAME = "fabric-memory"
ITEM = f"extension {NAME}"
TIMEOUT_SECONDS = 300
WHAT = "Goose's config"


def goose_config() -> Path:
    root = os.environ.get("GOOSE_PATH_ROOT")
    if root and os.path.isabs(root):
        return Path(root) / "config" / "config.yaml"
    configured = os.environ.get("XDG_CONFIG_HOME")
    base = Path(configured) if configured and os.path.isabs(configured) else (
        Path.home() / ".config")
    return base / "goose" / "config.yaml"


def extension(program: Path) -> dict[str, Any]:
    """Our extension's entry, as ``goose configure`` writes a command-line extension."""
    return {"enabled": True, "type": "stdio", "name": NAME, "cmd": str(program),
            "args": ["serve"], "envs": {}, "env_keys": [], "timeout": TIMEOUT_SECONDS,
            "description": "fabric-memory: recall and expand past coding-agent sessions",
            "bundled": None}


def install_goose(*, uninstall: bool = False, program: Path | None = None) -> HostReport:
    """Add (``uninstall``: remove) our extension in Goose's ``config.yaml``."""
    try:
        from ruamel.yaml import YAML
        from ruamel.yaml.error import YAMLError
    except ImportError:
        raise MissingExtraError("install goose edits Goose's YAML config keeping its comments; "
                                "install ruamel.yaml with pip install -e '.[goose]' in the "
                                "fabric-memory clone") from None
    program = program or executable()
    path = goose_config()
    report: HostReport = {"host": "goose", "executable": str(program), "changes": [],
                          "removedFiles": [], "notes": []}
    detail = f"{program} serve"
    if uninstall and not path.exists():
        report["changes"].append(Change(file=str(path), item=ITEM, action="absent", detail=""))
        return report
    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.width = 4096

    def edit(text: str) -> str | None:
        try:
            data = yaml.load(text) if text.strip() else None
        except YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = f":{mark.line + 1}" if mark is not None else ""
            raise UsageError(f"{path}{line}: not valid YAML, so it was left as it is; fix it, "
                             "then rerun") from None
        if data is None:
            data = {}
        if not hasattr(data, "get"):
            raise UsageError(f"{path}: the config is not a mapping; fix it, then rerun")
        extensions = data.get("extensions")
        if extensions is not None and not hasattr(extensions, "get"):
            raise UsageError(f"{path}: extensions is not a mapping; fix it, then rerun")
        action = _change(data, extensions, program, uninstall)
        report["changes"].append(Change(file=str(path), item=ITEM, action=action, detail=detail))
        if action in ("unchanged", "absent"):
            return None
        if not data:
            return ""
        out = io.StringIO()
        yaml.dump(data, out)
        return out.getvalue()

    if edit_text(path, WHAT, "another writer (Goose?)", edit):
        report["removedFiles"].append(str(path))
    note_new_sessions(report, "Goose")
    return report


def _change(data: Any, extensions: Any, program: Path, uninstall: bool) -> Any:
    if uninstall:
        if extensions is None or NAME not in extensions:
            return "absent"
        del extensions[NAME]
        if not extensions:
            del data["extensions"]
        return "removed"
    if extensions is None:
        data["extensions"] = extensions = {}
    current = extensions.get(NAME)
    if hasattr(current, "get"):
        args = current.get("args")
        if current.get("cmd") == str(program) and list(args or [])[:1] == ["serve"]:
            return "unchanged"
        current["cmd"] = str(program)
        if list(args or [])[:1] != ["serve"]:
            current["args"] = ["serve"]
        return "updated"
    extensions[NAME] = extension(program)
    return "added" if current is None else "updated"
