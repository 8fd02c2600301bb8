"""The soak at a small size (``python -m bench.soak``; ten minutes by hand, docs/reliability.md)."""

from __future__ import annotations

from bench import soak


def test_a_short_soak_under_churn_loses_nothing() -> None:
    """45 s of two servers with live indexes and their MCP clients, a web view and its
    client (pages and an open event stream), three CLI readers, a
    session appender that rotates files, `reindex --full` in a loop, a kill -9 of the
    writer and of the appender and the sessions root moved away and back: no session lost,
    no crash or hang, every server alive with bounded memory and descriptors."""
    report = soak.run(45)
    assert report["problems"] == [], soak.render(report)
    events = report["events"]
    assert events.get("writer kill -9") == 1 and events.get("appender kill -9") == 1, events
    assert events.get("root moved away and back") == 1, events
    assert report["byKind"].get("mcp.recall", 0) > 0 and report["byKind"].get("cli", 0) > 0
    assert report["sessionsOnDisk"] > 3 and report["sessionsLost"] == []
    assert all(report["byKind"].get(f"ui.{page}", 0) > 0
               for page in ("list", "search", "session", "stats")), report["byKind"]
    ui = report["ui"]
    assert ui["rssMaxKiB"] and ui["idleCpuShare"] is not None and ui["changedEvents"] > 0
