"""What every door checks before it does any work: a request value's JSON type, and the
length of path-like and id-like values (checked before any of them is used as a path), and
numeric limits clamped above their maximum with a note."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fabric_memory.arguments import MAX_NAME_CHARS, Clamped, bounded
from fabric_memory.errors import UsageError
from fabric_memory.memory.catalog import list_sessions
from fabric_memory.memory.expand import expand, expand_request
from fabric_memory.memory.recall import recall, recall_request
from fabric_memory.memory.reindex import reindex
from fabric_memory.pi.tools import call_tool

from .memory_builder import SessionBuilder

HUGE = "a/" * 1_000_000
"""2 MB of path components: resolving it as a path took minutes (quadratic in length)."""
LARGE = "b/" * 300_000
"""0.6 MB: resolving it froze ``serve`` for about 19 s."""


@pytest.fixture
def roots(tmp_path: Path) -> dict[str, Path]:
    sessions = tmp_path / "sessions"
    session = SessionBuilder(sessions / "--repo--" / "one.jsonl", "one")
    session.user("the walrus migration")
    session.write()
    index = tmp_path / "index"
    reindex(sessions=sessions, index=index, workers=1)
    return {"sessions": sessions, "index": index}


Call = Callable[[dict[str, Path], str], Any]
CALLS: dict[str, Call] = {
    "recall session": lambda r, v: recall("walrus", session=v, **r),
    "recall index": lambda r, v: recall("walrus", index=v, sessions=r["sessions"]),
    "recall sessions": lambda r, v: recall("walrus", index=r["index"], sessions=v),
    "expand session": lambda r, v: expand(v, indices=[0], **r),
    "expand entry": lambda r, v: expand("one", entries=[v], **r),
    "expand address": lambda r, v: expand("one", addresses=[v], **r),
    "expand anchor": lambda r, v: expand("one", anchor=v, **r),
    "expand sourceHash": lambda r, v: expand("one", indices=[0], expected_source_hash=v, **r),
    "expand index": lambda r, v: expand("one", indices=[0], index=v, sessions=r["sessions"]),
    "expand sessions": lambda r, v: expand("one", indices=[0], index=r["index"], sessions=v),
    "sessions index": lambda r, v: list_sessions(index=v),
    "sessions project": lambda r, v: list_sessions(index=r["index"], project=v),
    "sessions roots": lambda r, v: list_sessions(index=r["index"], sessions=v),
    "reindex session": lambda r, v: reindex(session=v, **r),
    "reindex sessions": lambda r, v: reindex(sessions=v, index=r["index"]),
    "pi tool session": lambda r, v: call_tool("memory_expand", {"session": v,
                                                                "indices": [0]}),
}


@pytest.mark.parametrize("value", [HUGE, LARGE], ids=["2MB", "0.6MB"])
@pytest.mark.parametrize("name", list(CALLS))
def test_long_path_and_id_values_are_refused_at_once(
    roots: dict[str, Path], monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    """A path-like or id-like value past the bound is a usage error raised before any path
    work (at once, whatever its length), quoting at most 60 characters of it."""
    monkeypatch.setenv("FABRIC_MEMORY_SESSIONS", str(roots["sessions"]))
    monkeypatch.setenv("FABRIC_MEMORY_HOME", str(roots["index"].parent / "home"))
    started = time.monotonic()
    with pytest.raises(UsageError) as caught:
        CALLS[name](roots, value)
    assert time.monotonic() - started < 0.5
    message = caught.value.message
    assert message.endswith(f"too long; the limit is {MAX_NAME_CHARS} characters"), message
    assert len(message) < 200, message


@pytest.mark.parametrize(("request_", "wrong"), [
    ({"query": 123}, "query"),
    ({"query": "walrus", "limit": "5"}, "limit"),
    ({"query": "walrus", "limit": 5.0}, "limit"),
    ({"query": "walrus", "limit": True}, "limit"),
    ({"query": "walrus", "mode": ["regex"]}, "mode"),
    ({"query": "walrus", "session": {"id": "one"}}, "session"),
], ids=["query", "limit-string", "limit-float", "limit-bool", "mode-array", "session-object"])
def test_recall_request_types_are_checked(
    roots: dict[str, Path], request_: dict[str, Any], wrong: str
) -> None:
    """A recall request value of the wrong JSON type is a usage error naming its key."""
    with pytest.raises(UsageError, match=rf"^recall request: \$\.{wrong}: expected "):
        recall_request({**request_, "index": str(roots["index"]),
                        "sessions": str(roots["sessions"])})


@pytest.mark.parametrize(("request_", "wrong"), [
    ({"session": "one", "indices": [0], "showSecrets": "false"}, "showSecrets"),
    ({"session": "one", "indices": [0], "showSecrets": 1}, "showSecrets"),
    ({"session": "one", "indices": ["0"]}, "indices[0]"),
    ({"session": "one", "entries": "e001"}, "entries"),
    ({"session": "one", "entries": ["e001", 2]}, "entries[1]"),
    ({"session": "one", "indices": [0], "maxChars": "100"}, "maxChars"),
    ({"session": 7, "indices": [0]}, "session"),
], ids=["showSecrets-string", "showSecrets-int", "indices-string", "entries-string",
        "entries-int", "maxChars-string", "session-int"])
def test_expand_request_types_are_checked(
    roots: dict[str, Path], request_: dict[str, Any], wrong: str
) -> None:
    """An expand request value of the wrong JSON type is a usage error naming its JSON path;
    a boolean must be a real boolean (the string "false" never shows secrets)."""
    with pytest.raises(UsageError, match=rf"^expand request: \$\.{re.escape(wrong)}: expected "):
        expand_request({**request_, "index": str(roots["index"]),
                        "sessions": str(roots["sessions"])})


def test_huge_integers_are_refused_before_the_index(roots: dict[str, Path]) -> None:
    """An integer past what the index takes (1e20 hot sessions) is a usage error, not an
    overflow inside Tantivy."""
    with pytest.raises(UsageError, match=r"hotSessions: 100000000000000000000 is past the 64-bit"):
        recall_request({"query": "walrus", "hotSessions": 10**20, "index": str(roots["index"]),
                        "sessions": str(roots["sessions"])})
    with pytest.raises(UsageError, match="hot-sessions"):
        list_sessions(index=roots["index"], hot_sessions=10**20)


def test_unknown_keys_are_quoted_short(roots: dict[str, Path]) -> None:
    """An unknown key of any length is named in at most 60 characters."""
    with pytest.raises(UsageError) as caught:
        recall_request({"query": "walrus", "k" * 100_000: 1})
    message = caught.value.message
    assert "k" * 60 not in message and "(100002 characters)" in message, message


def test_request_kinds_cover_the_request_shapes() -> None:
    """Every key of the recall and expand request shapes has a kind to be checked against."""
    from fabric_memory.memory import expand as expand_module
    from fabric_memory.memory import recall as recall_module

    assert set(recall_module.REQUEST_KINDS) == set(recall_module.RecallRequest.__annotations__)
    assert set(expand_module.REQUEST_KINDS) == set(expand_module.ExpandRequest.__annotations__)


def test_above_the_maximum_is_clamped_and_noted() -> None:
    """A value above its maximum becomes the maximum, noted as [asked, used] under its key."""
    clamped: Clamped = {}
    assert bounded(100_000, "maxChars", "--max-chars", 1, 24_000, clamped) == 24_000
    assert bounded(24_000, "maxEntries", "--max-entries", 1, 24_000, clamped) == 24_000
    assert clamped == {"maxChars": [100_000, 24_000]}


@pytest.mark.parametrize("value", [0, -5, 2**63, "12", 2.5, True, None], ids=repr)
def test_below_the_minimum_or_not_an_integer_is_a_usage_error(value: object) -> None:
    """Below the minimum, beyond any 64-bit count, or not a whole number (a bool included) is
    one usage line that names the option and its range."""
    with pytest.raises(UsageError, match=r"^--limit .*: must be .*between 1 and 50$"):
        bounded(value, "limit", "--limit", 1, 50, {})
