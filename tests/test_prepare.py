"""Pi-compatible compaction preparation and context building, against Pi 1.6.0's own truth."""

from __future__ import annotations

import hashlib
from functools import cache
from typing import Any

import orjson
import pytest
from hypothesis import given, settings

from fabric_memory._js import js_length, js_stringify, js_stringify_length
from fabric_memory.compaction import prepare
from fabric_memory.compaction.prepare import (
    ALREADY_COMPACTED,
    NOTHING_TO_COMPACT,
    CompactionSettings,
    ContextTokens,
    NoPreparation,
    Preparation,
    build_session_context,
    estimate_context_tokens,
    estimate_projected_context_tokens,
    estimate_tokens,
    explain_preparation,
    prepare_compaction,
    project_branch,
    should_compact,
)
from fabric_memory.errors import CompactionError
from fabric_memory.session import Entry, Session, read_session

from .conftest import CORPUS
from .corpus import corpus_index, corpus_json
from .fuzz import json_values, nested


def _truth_files() -> list[dict[str, Any]]:
    index = corpus_index()
    truths = [corpus_json(f["truth"]) for f in index["files"]]
    return [truth for truth in truths if "entries" in truth]


TRUTH = _truth_files()
IDS = [truth["name"] for truth in TRUTH]


@cache
def _session(file: str) -> Session:
    return read_session(CORPUS / file)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _content(message: dict[str, Any]) -> Any:
    role = message.get("role")
    if role in ("compactionSummary", "branchSummary"):
        return message.get("summary")
    if role == "bashExecution":
        return f"{message.get('command')}\n{message.get('output')}"
    return message.get("content")


def _tokens_json(estimate: ContextTokens) -> dict[str, Any]:
    return {
        "tokens": estimate.tokens,
        "usageTokens": estimate.usage_tokens,
        "trailingTokens": estimate.trailing_tokens,
        "lastUsageIndex": estimate.last_usage_index,
    }


def _settings(row: dict[str, Any]) -> CompactionSettings:
    return CompactionSettings(row["enabled"], row["reserveTokens"], row["keepRecentTokens"])


def _preparation_json(prepared: Preparation) -> dict[str, Any]:
    previous = prepared.previous_compaction
    summary = previous.raw["summary"] if previous is not None else None
    return {
        "firstKeptEntryId": prepared.first_kept_entry_id,
        "isSplitTurn": prepared.is_split_turn,
        "tokensBefore": prepared.tokens_before,
        "previousSummarySha256": _sha(summary.encode()) if summary is not None else None,
        "messagesToSummarize": [
            {"entryId": m.entry_id, "role": m.role} for m in prepared.messages_to_summarize
        ],
        "turnPrefixMessages": [
            {"entryId": m.entry_id, "role": m.role} for m in prepared.turn_prefix_messages
        ],
        "fileOps": prepared.file_ops.to_json(),
        "settings": prepared.settings.to_json(),
    }


def _token_mismatches(truth: dict[str, Any]) -> list[str]:
    session = _session(truth["file"])
    return [
        row["id"]
        for row in truth["entries"]
        if sum(map(estimate_tokens, prepare.entry_messages(session.by_id[row["id"]])))
        != row["tokens"]
    ]


def _preparation_mismatches(truth: dict[str, Any], size: str) -> list[str]:
    case = truth["compaction"]["prepare"][size]
    prepared = explain_preparation(
        _session(truth["file"]).active_branch(), _settings(case["settings"])
    )
    if case["result"] is None:
        return [] if prepared == NoPreparation(case["why"]) else [f"expected null: {case['why']}"]
    if isinstance(prepared, NoPreparation):
        return [f"no preparation: {prepared.reason}"]
    expected = {key: case["result"].get(key) for key in _preparation_json(prepared)}
    got = _preparation_json(prepared)
    return [key for key in got if got[key] != expected[key]]


# --- agreement with Pi 1.6.0 ---------------------------------------------------------


def test_corpus_has_every_session(corpus_dir: object) -> None:
    """The ground truth lists 41 session files, so the parametrized checks below run."""
    assert len(TRUTH) == 41


@pytest.mark.parametrize("truth", TRUTH, ids=IDS)
def test_entry_tokens_match_pi(truth: dict[str, Any]) -> None:
    """Every entry's estimated tokens (sum over its context messages) equal Pi's."""
    assert _token_mismatches(truth) == []


@pytest.mark.parametrize("truth", TRUTH, ids=IDS)
def test_should_compact_matches_pi(truth: dict[str, Any]) -> None:
    """Every shouldCompact row gives Pi's answer."""
    for row in truth["compaction"]["shouldCompact"]:
        got = should_compact(row["contextTokens"], row["contextWindow"], _settings(row["settings"]))
        assert got is row["result"], row


@pytest.mark.parametrize("size", ["small", "default"])
@pytest.mark.parametrize("truth", TRUTH, ids=IDS)
def test_prepare_matches_pi(truth: dict[str, Any], size: str) -> None:
    """Cut, split turn, tokensBefore, message ids and file ops (or null + reason) equal Pi's."""
    assert _preparation_mismatches(truth, size) == []


@pytest.mark.parametrize("truth", TRUTH, ids=IDS)
def test_context_matches_pi(truth: dict[str, Any]) -> None:
    """Context entry ids, message hashes and tokens, settings and size estimates equal Pi's."""
    session = _session(truth["file"])
    expected = truth["context"]
    context = build_session_context(session.entries, session.leaf_id)
    assert context.context_entry_ids == expected["contextEntryIds"]
    got = [
        {
            "entryId": item.entry_id,
            "role": item.role,
            "tokens": estimate_tokens(item.message),
            "contentHash": _sha(orjson.dumps(_content(dict(item.message)))),
            "messageHash": _sha(orjson.dumps(item.message)),
        }
        for item in context.messages
    ]
    assert got == expected["messages"]
    assert (context.thinking_level, context.model) == (expected["thinkingLevel"], expected["model"])
    messages = context.message_dicts()
    assert _tokens_json(estimate_context_tokens(messages)) == expected["estimateContextTokens"]
    projected = estimate_projected_context_tokens(context, session.active_branch())
    assert _tokens_json(projected) == expected["estimateProjectedContextTokens"]


@pytest.mark.parametrize("keep", [1, 7, 60, 400, 3000])
def test_cut_never_at_a_tool_result_in_the_corpus(keep: int) -> None:
    """Whatever keepRecentTokens asks for, no corpus cut starts at a tool result."""
    for truth in TRUTH:
        prepared = prepare_compaction(
            _session(truth["file"]).active_branch(), CompactionSettings(keep_recent_tokens=keep)
        )
        if prepared is not None:
            first = _session(truth["file"]).by_id[prepared.first_kept_entry_id]
            assert first.role != "toolResult", (truth["name"], keep)


def test_image_sabotage_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Counting an image as 4,000 chars instead of 4,800 breaks agreement on the corpus."""
    monkeypatch.setattr(prepare, "ESTIMATED_IMAGE_CHARS", 4000)
    assert any(_token_mismatches(truth) for truth in TRUTH)


def test_split_turn_sabotage_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Treating an assistant message as a turn start breaks agreement on the preparations."""
    monkeypatch.setattr(prepare, "_TURN_START_ROLES", prepare._CUT_POINT_ROLES)
    assert any(_preparation_mismatches(truth, "small") for truth in TRUTH)


# --- focused behaviour ---------------------------------------------------------------

TS = "2026-01-02T10:00:00.000Z"


def _entries(*raws: dict[str, Any]) -> list[Entry]:
    """A linear branch: entry ``i`` gets id ``e<i>`` (unless given) and the previous parent."""
    entries: list[Entry] = []
    for line, raw in enumerate(raws, start=2):
        raw = {"id": f"e{line - 2}", "timestamp": TS, **raw}
        raw["parentId"] = entries[-1].id if entries else None
        entries.append(Entry(raw["id"], raw["parentId"], raw["type"], TS, line, 0, 0, raw))
    return entries


def _message(role: str, content: Any = None, **fields: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"role": role, **fields}
    if content is not None:
        message["content"] = content
    return {"type": "message", "message": message}


def _user(text: str) -> dict[str, Any]:
    return _message("user", text)


def _assistant(text: str, **fields: Any) -> dict[str, Any]:
    return _message("assistant", [{"type": "text", "text": text}], **fields)


def _compaction(summary: str, first_kept: str, **fields: Any) -> dict[str, Any]:
    return {
        "type": "compaction",
        "summary": summary,
        "firstKeptEntryId": first_kept,
        "tokensBefore": 100,
        **fields,
    }


IMAGE = {"type": "image", "data": "AAAA", "mimeType": "image/png"}


@pytest.mark.parametrize("role", ["user", "custom", "toolResult"])
def test_images_count_4800_chars(role: str) -> None:
    """An image block counts 4,800 characters next to the text parts."""
    message = {"role": role, "content": [{"type": "text", "text": "abcd"}, IMAGE, IMAGE]}
    assert estimate_tokens(message) == (4 + 2 * 4800) // 4


def test_lengths_are_utf16_and_details_never_count() -> None:
    """Text counts UTF-16 code units (an emoji is 2) and a tool result's details count nothing."""
    result = {
        "role": "toolResult",
        "content": "😀abc" * 2,
        "details": {"trace": "x" * 10_000},
    }
    assert estimate_tokens(result) == 3  # 10 code units


def test_tool_call_arguments_count_as_javascript_serializes_them() -> None:
    """Tool-call arguments count JSON.stringify's length: 1.0 is "1", non-ASCII is unescaped."""
    arguments = {"n": 1.0, "s": "Zürich", "2": 0.0000001, "1": [True, None]}
    assert js_stringify(arguments) == '{"1":[true,null],"2":1e-7,"n":1,"s":"Zürich"}'
    message = {
        "role": "assistant",
        "content": [{"type": "toolCall", "name": "read", "arguments": arguments}],
    }
    assert estimate_tokens(message) == -(-(4 + len(js_stringify(arguments))) // 4)


def _lengths(value: Any) -> tuple[int | str, int | str]:
    """The fast length and the length of JSON.stringify's text (or the error each raised)."""
    results: list[int | str] = []
    for measure in (js_stringify_length, lambda v: js_length(js_stringify(v))):
        try:
            results.append(measure(value))
        except TypeError as exc:  # lone surrogates: never in a session read (see decode_line)
            results.append(type(exc).__name__)
    return results[0], results[1]


@settings(max_examples=400, deadline=None)
@given(json_values(30))
def test_stringify_length_agrees_with_the_stringified_text(value: Any) -> None:
    """The fast length (orjson plus number corrections) is the length of JSON.stringify's text:
    floats, integers past 2^53 and 64 bits, NaN and infinities, astral characters."""
    fast, slow = _lengths(value)
    assert fast == slow


@pytest.mark.parametrize(
    "value",
    [
        {"n": 1.0, "z": -0.0, "e": 1e-7, "big": 1e21, "s": "Zürich 😀", "1": [True, None]},
        [2**53 + 1, -(2**53) - 1, 2**64, -(2**63) - 1, 1.5e300, float("inf"), 5e-324],
        {"line": "\u2028\x00\x1f\x7f\"\\/", "lone": "a\ud800b"},
        nested(300),
        {"deep": nested(1000)},
    ],
)
def test_stringify_length_of_what_orjson_writes_differently(value: Any) -> None:
    """Numbers JavaScript writes otherwise, escapes, nesting past orjson's limit."""
    fast, slow = _lengths(value)
    assert fast == slow


def test_system_message_counts_content_sections_and_tools() -> None:
    """A system message counts its content, each section's text and JSON.stringify(toolsAdded)."""
    tools = [{"name": "read", "description": "Read a file"}]
    message = {
        "role": "system",
        "content": "ab",
        "sections": {"a": "xyz", "b": None},
        "toolsAdded": tools,
    }
    chars = 2 + 3 + len(js_stringify(tools))
    assert estimate_tokens(message) == -(-chars // 4)


def test_usage_anchors_only_successful_nonzero_assistants() -> None:
    """Usage comes from the last assistant that neither failed nor reported zero tokens."""
    usage = {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0}
    messages = [
        {"role": "assistant", "content": [], "usage": {**usage, "totalTokens": 500}},
        {"role": "assistant", "content": [], "usage": usage},
        {"role": "assistant", "content": [], "usage": {"totalTokens": 900}, "stopReason": "error"},
        {"role": "assistant", "content": [], "usage": {"totalTokens": 0}},
        {"role": "user", "content": "abcdefgh"},
    ]
    assert estimate_context_tokens(messages) == ContextTokens(17, 15, 2, 1)


def test_should_compact_respects_enabled() -> None:
    """A disabled setting never compacts; otherwise the threshold is strict."""
    settings = CompactionSettings(reserve_tokens=10)
    assert should_compact(91, 100, settings)
    assert not should_compact(90, 100, settings)
    assert not should_compact(10**6, 100, CompactionSettings(enabled=False))


def test_cut_moves_off_a_trailing_tool_result() -> None:
    """When a trailing tool result alone exceeds the budget, the cut keeps its tool call."""
    call = {"type": "toolCall", "id": "c1", "name": "bash", "arguments": {"command": "ls"}}
    branch = _entries(
        _user("start"),
        _assistant("ok"),
        _user("run it"),
        _message("assistant", [call]),
        _message("toolResult", [{"type": "text", "text": "x" * 400}], toolCallId="c1"),
    )
    prepared = prepare_compaction(branch, CompactionSettings(keep_recent_tokens=10))
    assert prepared is not None
    assert prepared.first_kept_entry_id == "e3"
    assert prepared.is_split_turn
    assert [m.entry_id for m in prepared.turn_prefix_messages] == ["e2"]
    assert [m.entry_id for m in prepared.messages_to_summarize] == ["e0", "e1"]


def test_no_preparation_after_a_trailing_compaction() -> None:
    """A branch that ends on a compaction has nothing to prepare, with Pi's reason."""
    branch = _entries(_user("a" * 400), _assistant("b" * 400), _compaction("S", "e1"))
    assert prepare_compaction(branch, CompactionSettings(keep_recent_tokens=1)) is None
    assert explain_preparation(branch, CompactionSettings()) == NoPreparation(ALREADY_COMPACTED)


def test_no_preparation_when_everything_fits() -> None:
    """When the budget keeps the whole branch there is nothing to summarize."""
    branch = _entries(_user("hello"), _assistant("hi"))
    assert explain_preparation(branch, CompactionSettings()) == NoPreparation(NOTHING_TO_COMPACT)


@pytest.mark.parametrize("first_kept", ["", "SELF", "missing"])
def test_keep_nothing_forms_of_first_kept_entry_id(first_kept: str) -> None:
    """firstKeptEntryId "", the compaction's own id or an unknown id keep nothing before it."""
    target = "c" if first_kept == "SELF" else first_kept
    branch = _entries(
        _user("one"), _assistant("two"), {**_compaction("SUM", target), "id": "c"}, _user("three")
    )
    context = project_branch(branch)
    assert context.context_entry_ids == ["c", "e3"]
    assert [(m.entry_id, m.role) for m in context.messages] == [
        ("c", "compactionSummary"),
        ("e3", "user"),
    ]
    assert context.messages[0].message == {
        "role": "compactionSummary",
        "summary": "SUM",
        "tokensBefore": 100,
        "timestamp": 1767348000000,
    }


def test_first_kept_may_name_a_label() -> None:
    """A firstKeptEntryId naming a label keeps from the label; the model sees what follows."""
    branch = _entries(
        _user("one"),
        {"type": "label", "targetId": "e0", "label": "x"},
        _assistant("two"),
        _compaction("SUM", "e1"),
    )
    context = project_branch(branch)
    assert context.context_entry_ids == ["e3", "e1", "e2"]
    assert [m.entry_id for m in context.messages] == ["e3", "e2"]


def test_kept_range_drops_system_messages_and_older_summaries() -> None:
    """Kept system messages and an older compaction's summary give way to the newest replay."""
    system = _message("system", "", sections={"a": "prompt"})
    branch = _entries(
        _user("one"),
        system,
        _compaction("OLD", "e0"),
        _assistant("two"),
        _compaction("NEW", "e0", systemMessage=system["message"]),
        _user("three"),
    )
    context = project_branch(branch)
    assert context.context_entry_ids == ["e4", "e0", "e2", "e3", "e5"]
    assert context.entries[2].messages == ()
    assert [(m.entry_id, m.role) for m in context.messages] == [
        ("e4", "system"),
        ("e4", "compactionSummary"),
        ("e0", "user"),
        ("e3", "assistant"),
        ("e5", "user"),
    ]


def test_context_edits_replace_and_drop() -> None:
    """A context edit replaces content (text becomes a text part for assistants) or drops it."""
    branch = _entries(
        _user("typo teh"),
        _assistant("old"),
        _user("gone"),
        {"type": "context_edit", "targetId": "e0", "replacement": {"content": "typo the"}},
        {"type": "context_edit", "targetId": "e1", "replacement": {"content": "new"}},
        {"type": "context_edit", "targetId": "e2", "replacement": None},
    )
    context = project_branch(branch)
    assert [m.message["content"] for m in context.messages] == [
        "typo the",
        [{"type": "text", "text": "new"}],
    ]


def test_usage_before_a_context_edit_is_not_trusted() -> None:
    """After a context edit newer than the last usage, the size is a pure estimate."""
    branch = _entries(
        _user("a" * 40),
        _assistant("b" * 8, usage={"totalTokens": 5000}),
        {"type": "context_edit", "targetId": "e0", "replacement": {"content": "a" * 4}},
    )
    context = project_branch(branch)
    assert estimate_context_tokens(context.message_dicts()).tokens == 5000
    assert estimate_projected_context_tokens(context) == ContextTokens(3, 0, 3, None)


def test_cut_skips_a_closed_suffix_of_omitted_recovery_attempts() -> None:
    """An omitted failed assistant and its omission edit after the cut move the cut past them."""
    branch = _entries(
        _user("a" * 400),
        _assistant("b" * 40),
        _user("c" * 400),
        _assistant("", stopReason="error"),
        {"type": "context_edit", "targetId": "e3", "replacement": None},
    )
    prepared = prepare_compaction(branch, CompactionSettings(keep_recent_tokens=10))
    assert prepared is not None
    assert prepared.first_kept_entry_id == "e3"
    assert [m.entry_id for m in prepared.turn_prefix_messages] == ["e2"]


def test_cut_takes_in_metadata_before_it() -> None:
    """Settings entries right before the cut are kept with it."""
    branch = _entries(
        _user("a" * 400),
        _assistant("b" * 400),
        {"type": "model_change", "provider": "p", "modelId": "m"},
        {"type": "thinking_level_change", "thinkingLevel": "high"},
        _user("c" * 40),
        _assistant("d" * 40),
    )
    prepared = prepare_compaction(branch, CompactionSettings(keep_recent_tokens=15))
    assert prepared is not None
    assert prepared.first_kept_entry_id == "e2"
    # As in Pi, a settings entry starts no turn, so the cut counts as splitting the turn before.
    assert prepared.is_split_turn
    assert [m.entry_id for m in prepared.turn_prefix_messages] == ["e0", "e1"]
    assert prepared.messages_to_summarize == ()


def test_event_has_the_host_shape_and_file_ops() -> None:
    """to_event has the host's shape; file ops merge tool calls and the last Pi compaction's."""
    read = {"type": "toolCall", "id": "r", "name": "read", "arguments": {"path": "b.ts"}}
    edit = {"type": "toolCall", "id": "w", "name": "edit", "arguments": {"path": "a.ts"}}
    details = {"readFiles": ["z.ts"], "modifiedFiles": ["y.ts"]}
    branch = _entries(
        _user("go"),
        _compaction("PREVIOUS", "", details=details, fromHook=False),
        _message("assistant", [read, edit]),
        _user("x" * 400),
        _assistant("y" * 400),
    )
    prepared = prepare_compaction(branch, CompactionSettings(keep_recent_tokens=50))
    assert prepared is not None
    event = prepared.to_event()
    assert list(event) == [
        "firstKeptEntryId",
        "messagesToSummarize",
        "turnPrefixMessages",
        "isSplitTurn",
        "tokensBefore",
        "previousSummary",
        "fileOps",
        "settings",
    ]
    assert event["firstKeptEntryId"] == "e4"
    assert event["isSplitTurn"] is True
    assert event["messagesToSummarize"] == [branch[2].raw["message"]]
    assert event["turnPrefixMessages"] == [branch[3].raw["message"]]
    assert [m.entry for m in prepared.messages_to_summarize] == [branch[2]]
    assert event["previousSummary"] == "PREVIOUS"
    assert event["fileOps"] == {"read": ["b.ts", "z.ts"], "written": [], "edited": ["a.ts", "y.ts"]}
    assert event["settings"] == {"enabled": True, "reserveTokens": 16384, "keepRecentTokens": 50}


def test_hook_compaction_details_do_not_feed_file_ops() -> None:
    """A previous compaction written by a hook contributes no file lists."""
    details = {"readFiles": ["z.ts"], "modifiedFiles": ["y.ts"]}
    branch = _entries(
        _user("go"),
        _compaction("PREVIOUS", "", details=details, fromHook=True),
        _user("x" * 400),
        _assistant("y" * 400),
    )
    prepared = prepare_compaction(branch, CompactionSettings(keep_recent_tokens=50))
    assert prepared is not None
    assert "previousSummary" in prepared.to_event()
    assert prepared.file_ops.to_json() == {"read": [], "written": [], "edited": []}


def test_build_session_context_follows_the_leaf() -> None:
    """The context follows the leaf's branch; an unknown leaf or none (a file whose last
    entry has no id: Pi's ``undefined`` leaf) walks from the last entry; no entries, nothing."""
    entries = _entries(_user("root"), _assistant("a"))
    side = Entry(
        "s", "e0", "message", TS, 9, 0, 0, {**_assistant("side"), "id": "s", "parentId": "e0"}
    )
    all_entries = [*entries, side]
    assert build_session_context(all_entries, "e1").context_entry_ids == ["e0", "e1"]
    assert build_session_context(all_entries, "nope").context_entry_ids == ["e0", "s"]
    assert build_session_context(all_entries, None).context_entry_ids == ["e0", "s"]
    assert build_session_context([], None).messages == ()


def test_settings_read_from_the_host_event() -> None:
    """Host settings round-trip, missing fields take Pi's defaults, bad ones name their path."""
    settings = CompactionSettings(True, 63, 1)
    assert CompactionSettings.from_json(settings.to_json()) == settings
    assert CompactionSettings.from_json({"keepRecentTokens": 5}) == CompactionSettings(
        keep_recent_tokens=5
    )
    with pytest.raises(CompactionError, match=r"preparation\.settings\.reserveTokens"):
        CompactionSettings.from_json({"reserveTokens": "many"})
    with pytest.raises(CompactionError, match=r"preparation\.settings\.enabled"):
        CompactionSettings.from_json({"enabled": 1})
