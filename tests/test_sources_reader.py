"""The shared reader machinery: JSON documents read by their nodes, and entries whose raw
source is no span of their file (a database row), expanded back exactly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_memory.memory.expand import expand
from fabric_memory.memory.reindex import reindex
from fabric_memory.session import Session
from fabric_memory.sources import registry
from fabric_memory.sources.reader import (
    Entries,
    JsonLines,
    SourceLine,
    SourceReader,
    build_session,
    message,
    node_spans,
    text_block,
)

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.sampled_from('ab"\\[]{},: \n\t\u00e9'), max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["messages", "history", "id", '"]', "a"]), inner, max_size=3),
    max_leaves=12)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["messages", "x", "history"]), _JSON, max_size=3),
       st.lists(_JSON, max_size=4), st.sampled_from([None, 1, 2, "\t"]))
def test_node_spans_are_each_element_exactly(document: dict[str, Any], messages: list[Any],
                                             indent: int | str | None) -> None:
    """Whatever the document holds around it and however it is indented, the spans of
    ``messages[]`` parse back to its elements, one each, in order."""
    document = {**document, "messages": messages}
    data = json.dumps(document, indent=indent, ensure_ascii=False).encode()
    spans = node_spans(data, ("messages",))
    assert [orjson.loads(data[start:end]) for start, end in spans] == messages


def _rows_read(path: str, max_line_bytes: int) -> Session:
    """A source whose entries are rows: each line ``{"rowid": n, "said": …}`` is a row whose
    raw source is its JSON with sorted keys (other bytes than the line's)."""
    lines = JsonLines(path, max_line_bytes)
    entries = Entries()
    for line in lines:
        row = SourceLine(line.value["rowid"], 0, 0, line.value)
        entry = entries.add(row, message("user", [text_block(line.value["said"])]),
                            address=f"row{line.value['rowid']}", parent=entries.last_id)
        entry.source = orjson.dumps(line.value, option=orjson.OPT_SORT_KEYS)
    return build_session(lines, entries, agent="codex", session_id="rows-1", project=None,
                         header={})


ROWS = SourceReader("codex", lambda first, path: type(first) is dict and "rowid" in first,
                    _rows_read, lambda projects: ())


@pytest.mark.parametrize("indexed", [True, False], ids=["indexed", "changed-since"])
def test_an_entry_that_is_no_span_expands_raw_to_its_readers_source(
        indexed: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry with no span of its file (a row) expands raw to the source its reader gave
    it, whether the index holds the file as it is or it changed since."""
    monkeypatch.setattr(registry, "readers", lambda: iter((ROWS, *registry.READERS)))
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    path = sessions / "rows.jsonl"
    path.write_text('{"said": "first kiwi", "rowid": 7}\n{"said": "then emu", "rowid": 9}\n')
    where = {"sessions": sessions, "index": tmp_path / "index"}
    reindex(**where, workers=1)
    if not indexed:
        with path.open("a") as stream:
            stream.write('{"said": "last", "rowid": 11}\n')
    page = expand("rows-1", addresses=["row9"], raw=True, **where)
    assert page["entries"][0]["text"] == '{"rowid":9,"said":"then emu"}'
    assert "then emu" in expand("rows-1", addresses=["row9"], **where)["entries"][0]["text"]


@pytest.mark.parametrize("head", [b'{"\x01bad": 1', b'{"a\\x": 1', b'{"\\ud800": 1'],
                         ids=["control-character", "bad-escape", "lone-surrogate"])
def test_a_head_whose_first_key_is_not_json_has_no_first_key(head: bytes) -> None:
    """A pretty-printed head whose first key is not a JSON string names no key (no decode
    error reaches the reindex that sniffs it)."""
    from fabric_memory.sources.reader import JsonHead

    assert JsonHead(head).first_key is None
