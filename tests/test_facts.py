"""Exact facts: the values a text holds, in any script, and how they rank."""

from __future__ import annotations

import pytest

from fabric_memory.compaction.facts import facts, first_error_line, rank, reports_error


@pytest.mark.parametrize(("text", "found"), [
    ("grant it at https://open.feishu.cn/app/cli_a93f/auth?q=im:message, then retry",
     ("url", "https://open.feishu.cn/app/cli_a93f/auth?q=im:message")),
    ("权限不足：需要 scope contact:user.id:readonly。", ("scope", "contact:user.id:readonly")),
    ("configure tools.exec.host=sandbox to allow", ("config", "tools.exec.host=sandbox")),
    ("ENOENT: no such file", ("error", "ENOENT")),
    ("commit 7890fb8a1 fixes it", ("id", "7890fb8a1")),
    ("当前模型：openrouter/xiaomi/mimo-v2-pro。", ("path", "openrouter/xiaomi/mimo-v2-pro")),
    ("OpenClaw 2026.3.13 (61d171a)", ("version", "2026.3.13")),
    ("the staging port is 56041.", ("port", "port is 56041")),
    ("服务在端口 8080 上", ("port", "端口 8080")),
    ("Request failed with status code 400", ("error", "status code 400")),
    ("missing_brave_api_key", ("error", "missing_brave_api_key")),
    ("see src/compaction/facts.py。", ("path", "src/compaction/facts.py")),
], ids=["url", "scope-cjk", "config", "code", "hash", "model-cjk", "version", "port",
        "port-cjk", "http", "snake-code", "path-cjk"])
def test_each_kind_of_value_is_found_whatever_surrounds_it(text: str,
                                                           found: tuple[str, str]) -> None:
    """A value ends at whitespace, a quote, a bracket or CJK punctuation, in any script."""
    assert found in facts(text)


def test_a_word_pair_is_a_scope_only_where_the_text_speaks_of_permissions() -> None:
    """``word:word`` is a permission scope in a text about scopes or grants, not elsewhere."""
    assert ("scope", "im:message") in facts("the app lacks scope im:message")
    assert all(kind != "scope" for kind, _ in facts("see node:fs and re:match"))


def test_plain_prose_holds_no_values() -> None:
    """Words, capitalized words and sentence marks are passed over."""
    assert facts("Hello there. This is plain prose, nothing more! 你好，世界。") == []


def test_the_first_error_line_skips_a_status_line() -> None:
    """A structured error's ``"status": "error"`` line is not the error; the next one is."""
    text = '{\n  "status": "error",\n  "error": "ENOENT: no such file"\n}'
    assert first_error_line(text) == '"error": "ENOENT: no such file"'
    assert reports_error('{"error": "Request failed with status code 400"}')
    assert not reports_error('{"ok": true}')


def test_rank_prefers_the_user_errors_repeats_and_the_end() -> None:
    """Said by the user beats an error beats the assistant; more sightings and later rank
    higher."""
    assert rank("user", 1, 0, 10) > rank("error", 1, 0, 10) > rank("assistant", 1, 0, 10)
    assert rank("assistant", 3, 0, 10) > rank("assistant", 1, 0, 10)
    assert rank("assistant", 1, 9, 10) > rank("assistant", 1, 0, 10)
