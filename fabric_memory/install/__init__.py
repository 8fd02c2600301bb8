"""Installing fabric-memory into a host: Claude Code (:mod:`.claude`), Codex (:mod:`.codex`),
GitHub Copilot CLI and Cursor (:mod:`.mcp_json`) and Pi (:mod:`fabric_memory.pi.install`),
each editing the host's own settings files through :mod:`.files` and reporting what it
changed (:mod:`.report`)."""
