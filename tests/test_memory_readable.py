"""readable: an entry's per-entry view rendered as text for a model, whoever wrote it."""

from __future__ import annotations

from fabric_memory.memory.readable import DEEP, INLINE_CHARS, render_entry, render_record
from fabric_memory.view import EntryView, ToolCall, view_entry


def _view(message: dict[str, object] | None, kind: str = "message",
          raw: dict[str, object] | None = None) -> EntryView:
    return view_entry("e7", kind, "e6", "2026-03-01T10:00:00.000Z",
                      raw if raw is not None else {"type": kind, "message": message})


def test_a_view_built_by_any_reader_renders_the_same() -> None:
    """A view made directly (as another agent's reader makes it, no Pi JSON) renders its role,
    time, text and calls: the renderer reads the view only."""
    view = EntryView("c-12", None, "message", "2026-03-01T10:00:00Z", {}, {}, "assistant", None,
                     None, "I will read it.", (ToolCall("c-12", "t1", "read", {"path": "a.py"}),))
    assert render_entry(view, "c-12") == (
        'c-12 assistant 2026-03-01T10:00:00Z\nI will read it.\ncall read(path="a.py")')


def test_assistant_thinking_text_and_calls() -> None:
    """Thinking comes first (never its signature), then the text, then each call; long or
    multi-line arguments follow their call whole, indented."""
    long = "x" * (INLINE_CHARS + 1)
    view = _view({"role": "assistant", "content": [
        {"type": "thinking", "thinking": "plan it\nthen do it", "thinkingSignature": "SIG=="},
        {"type": "text", "text": "Editing."},
        {"type": "toolCall", "id": "t1", "name": "edit",
         "arguments": {"path": "p.ts", "oldText": "a\nb", "newText": long, "line": 3}},
    ], "usage": {"input": 5, "cost": {"total": 0.1}}, "stopReason": "toolUse"})
    assert render_entry(view, "e7").split("\n") == [
        "e7 assistant 2026-03-01T10:00:00.000Z", "thinking:", "    plan it", "    then do it",
        "Editing.", 'call edit(path="p.ts", oldText=↓, newText=↓, line=3)', "  oldText:",
        "    a", "    b", "  newText:", "    " + long]


def test_tool_result_with_its_error_flag_and_left_out_data() -> None:
    """A tool result shows its tool, the error flag and its text; an image is a size note."""
    view = _view({"role": "toolResult", "toolName": "bash", "toolCallId": "t1", "isError": True,
                  "content": [{"type": "text", "text": "exit 1"},
                              {"type": "image", "mimeType": "image/png", "data": "QUJD"}]})
    assert render_entry(view, "e7") == (
        "e7 toolResult bash error 2026-03-01T10:00:00.000Z\nexit 1\n"
        "[image/png 4 characters of data left out]")


def test_compaction_and_other_entries() -> None:
    """A compaction shows its summary, a custom message its text, and each what else it says;
    bookkeeping keys are left out."""
    view = _view(None, "compaction", {"type": "compaction", "id": "e7", "parentId": "e6",
                                      "summary": "## Goal\nship it", "firstKeptEntryId": "e3",
                                      "tokensBefore": 1200, "details": {"x": 1}})
    assert render_entry(view, "e7") == (
        "e7 compaction 2026-03-01T10:00:00.000Z\n## Goal\nship it\n"
        'firstKeptEntryId: "e3"\ntokensBefore: 1200')
    custom = _view(None, "custom_message", {"type": "custom_message", "customType": "note",
                                            "content": [{"type": "text", "text": "hello"}],
                                            "display": True})
    assert render_entry(custom, "e7") == (
        'e7 custom_message 2026-03-01T10:00:00.000Z\nhello\ncustomType: "note"\ndisplay: true')
    change = _view(None, "model_change", {"type": "model_change", "provider": "anthropic",
                                          "modelId": "claude"})
    assert render_entry(change, "e7") == (
        'e7 model_change 2026-03-01T10:00:00.000Z\nprovider: "anthropic"\nmodelId: "claude"')


def test_an_operation_record_reads_as_lines() -> None:
    """An operation's record: address, kind, ref and outcome first, then its other fields."""
    record = {"kind": "operation", "address": "e7/2", "entryId": "e7", "sequence": 2,
              "ref": "pi.read", "outcome": "failed", "args": {"path": "a.py"},
              "error": "no such file"}
    assert render_record(record) == (
        'e7/2 operation pi.read failed\nsequence: 2\nargs: {"path":"a.py"}\nerror: "no such file"')


def test_a_value_nested_deeper_than_json_writes_is_named_not_crashed_on() -> None:
    """An argument nested 600 levels deep (the fuzz found one) renders as a note that says
    how to read it, never a crash."""
    deep: object = "bottom"
    for _ in range(600):
        deep = [deep]
    view = _view({"role": "assistant", "content": [
        {"type": "toolCall", "id": "t1", "name": "run", "arguments": {"spec": deep}}]})
    assert render_entry(view, "e7").split("\n")[1] == f"call run(spec={DEEP})"
