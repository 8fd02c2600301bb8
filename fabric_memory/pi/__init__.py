"""fabric-memory inside Pi: the TypeScript extension shipped as package data, how to make
Pi load it (:mod:`.install`) and the memory tools it calls (:mod:`.tools`).

The extension directory is a Pi package (a ``package.json`` whose ``pi.extensions`` names
``index.ts``); Pi loads TypeScript without compiling it (Pi 1.6.0's
pi-coding-agent/docs/extensions.md).
"""

from __future__ import annotations

from pathlib import Path

EXTENSION_DIR = Path(__file__).resolve().parent / "extension"
"""The Pi package: ``package.json`` and the entry file."""

EXTENSION_ENTRY = EXTENSION_DIR / "index.ts"
"""What ``pi -e PATH`` loads."""
