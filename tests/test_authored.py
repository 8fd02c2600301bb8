"""What a user wrote apart from what they pasted."""

from __future__ import annotations

import pytest

from fabric_memory.compaction.authored import authored, is_request, sentences_within


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("fix the parser, never touch the lexer", "fix the parser, never touch the lexer"),
        ("see this:\n\n```ts\n// must never throw\nx()\n```\n\nmake it surgical",
         "see this:\n\nmake it surgical"),
        ("```json\n{\"a\": 1}\n\nshould list all the keys", "should list all the keys"),
        ("## Skill Structure\n\nA skill is a directory.\n\n| a | b |\n|---|---|\n\nkeep it short",
         "keep it short"),
        ("this crashed, that must never happen.\n\nError: boom\n    at f (a.ts:3:9)\n"
         "    at g (b.ts:1:1)", "this crashed, that must never happen."),
    ],
)
def test_pasted_paragraphs_are_left_out(text: str, kept: str) -> None:
    """Fences (closed or not), heading-led documents, tables and stack traces are pasted."""
    assert authored(text) == kept


def test_a_message_without_a_pasted_line_is_returned_as_it_is() -> None:
    """The common case costs no copy: the same string comes back."""
    text = "first line\nsecond line, don't rewrite it"
    assert authored(text) is text


def test_requests_and_sentence_cuts() -> None:
    """A bare slash command, link or path asks nothing; a long text is cut at a sentence end."""
    assert not is_request("/mode") and not is_request("https://x.y/issues/1")
    assert is_request("https://x.y/issues/1 fix this")
    assert sentences_within("One two. Three four. Five six.", 22) == "One two. Three four."
    assert sentences_within("short", 100) == "short"
