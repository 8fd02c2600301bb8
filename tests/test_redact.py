"""redact: every known credential format is masked by kind; nothing else in the corpus is."""

from __future__ import annotations

import random
import re
from collections import Counter
from dataclasses import replace
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric_memory.memory import normalize
from fabric_memory.redact import (
    _FOLDS_APART,
    _SIGNATURES,
    KINDS,
    RULES,
    Rule,
    _matches,
    _present,
    clean_head,
    find_secrets,
    mask_across,
    might_hold_secrets,
    redact,
    redact_json,
    redact_json_text,
    redact_texts,
    rules_fingerprint,
    secret_kinds,
)

from .corpus import CORPUS
from .secret_samples import FORMS, MAKERS, Sample, clean_corpus, samples, survivors

REPO = Path(__file__).resolve().parents[1]
CLEAN_FIXTURES = [REPO / "fixtures" / name for name in ("pi-1.6.0", "sessions", "closure")]
"""Every fixture but ``fixtures/audit``, whose planted leaks are credentials on purpose."""


def _leaked(sample: Sample, text: str) -> list[str]:
    return [value for value in sample.values if value in text]


@pytest.mark.parametrize("kind", list(MAKERS))
def test_every_kind_is_masked_and_named(kind: str) -> None:
    """Twenty fakes of each kind, in their usual context, come out as [REDACTED:<kind>]."""
    rng = random.Random(kind)
    for _ in range(20):
        sample = MAKERS[kind](rng)
        masked = redact(sample.text)
        assert _leaked(sample, masked) == [], sample.text
        assert f"[REDACTED:{kind}]" in masked
        assert kind in {finding.kind for finding in find_secrets(sample.text)}


@pytest.mark.parametrize("form", list(FORMS))
def test_every_form_is_masked_and_named(form: str) -> None:
    """Twenty fakes of each form issue 22 found unmasked (userless URL passwords, aligned
    assignments, dashed passphrases, URL-encoded tokens and webhooks, XML elements) come
    out as [REDACTED:<kind>]."""
    rng = random.Random(form)
    for _ in range(20):
        sample = FORMS[form](rng)
        masked = redact(sample.text)
        assert _leaked(sample, masked) == [], sample.text
        assert f"[REDACTED:{sample.kind}]" in masked, masked


@pytest.mark.parametrize("seed", range(5))
def test_values_that_are_not_credentials_survive(seed: int) -> None:
    """Git shas, uuids, public keys, fingerprints, field names, partition values and numbers
    under secret-like names (cache_key, idempotency_key, public_key, sort_key, max_token...)
    are left as they are."""
    for text, word in survivors(random.Random(seed)):
        assert redact(text) == text, text
        assert redact_json({"x": text, text: word}) == {"x": text, text: word}


@pytest.mark.parametrize("kind", list(MAKERS))
def test_a_secret_split_across_blocks_is_masked_in_both(kind: str) -> None:
    """A secret cut between two text blocks of one message is masked on both sides of the
    cut, as plain texts (mask_across) and inside a JSON content list (redact_json)."""
    rng = random.Random(f"split-{kind}")
    for _ in range(10):
        sample = MAKERS[kind](rng)
        value = max(sample.values, key=len)
        at = sample.text.index(value) + len(value) // 2
        parts = ["see: " + sample.text[:at], sample.text[at:] + " (end)"]
        counts: Counter[str] = Counter()
        masked = mask_across(parts, counts)
        assert value[: len(value) // 2] not in masked[0] and value[len(value) // 2 :] not in (
            masked[1]), (parts, masked)
        assert masked[0].startswith("see: ") and masked[1].endswith(" (end)")
        assert sum(counts.values()) >= 1
        content = [{"type": "text", "text": parts[0]}, {"type": "toolCall", "id": "c"},
                   {"type": "text", "text": parts[1]}]
        blocks = redact_json({"content": content})["content"]
        assert value[len(value) // 2 :] not in blocks[2]["text"], blocks
        assert value[: len(value) // 2] not in blocks[0]["text"], blocks
    assert mask_across(["one ghp_", "two"]) == ["one ghp_", "two"]


def test_rules_cover_the_issue_kinds() -> None:
    """Each kind the rules know has a sample maker, and each maker's kind is a rule's kind."""
    assert set(KINDS) == set(MAKERS)


@settings(max_examples=300, deadline=None)
@given(
    kind=st.sampled_from(sorted(MAKERS)),
    rng=st.randoms(use_true_random=False),
    before=st.text(max_size=60),
    after=st.text(max_size=60),
    glue=st.sampled_from([" ", "\n", "\t", ". ", ", ", "\n\n> ", " | "]),
)
def test_generated_secrets_never_survive_in_any_surroundings(
    kind: str, rng: random.Random, before: str, after: str, glue: str
) -> None:
    """A generated secret of any kind, between arbitrary texts, is masked; masking again
    changes nothing."""
    sample = MAKERS[kind](rng)
    text = f"{before}{glue}{sample.text}{glue}{after}"
    masked = redact(text)
    assert _leaked(sample, masked) == []
    assert redact(masked) == masked


@settings(max_examples=300, deadline=None)
@given(
    kinds=st.lists(st.sampled_from(sorted(MAKERS)), max_size=3),
    rng=st.randoms(use_true_random=False),
    noise=st.lists(st.text(max_size=40), max_size=4),
)
def test_prefilter_never_hides_a_match(
    kinds: list[str], rng: random.Random, noise: list[str]
) -> None:
    """Whatever the rules find with every signature assumed present, they find with the
    signatures the prefilter sees, one text at a time or in a batch."""
    text = " ".join([*noise, *(MAKERS[kind](rng).text for kind in kinds)])
    everything = frozenset(s for rule in RULES for s in rule.signatures)
    assert find_secrets(text) == find_secrets(text, everything)
    assert redact_texts([*noise, text]) == [redact(t) for t in [*noise, text]]


_SIGNATURE_PIECES = (*_SIGNATURES, *(s[:k] for s in _SIGNATURES for k in (1, 2, 3)),
                     *(s[k:] for s in _SIGNATURES for k in (1, 2, 3)), "aiz", "acc", "ke")
"""Signatures and their ends, so that generated texts hold overlapping and adjacent ones."""


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(_SIGNATURE_PIECES) | st.text(max_size=6), max_size=30))
def test_one_scan_finds_every_signature(parts: list[str]) -> None:
    """The single scan of the prefilter finds exactly the signatures a substring test of
    each one finds, overlapping ones included."""
    text = "".join(parts).lower()
    assert _present(text) == {s for s in _SIGNATURES if s in text}


@pytest.mark.parametrize("text", [
    "AccountKey=" + "A1b2" * 10, "Account\u212aey=" + "A1b2" * 10,
    "SharedAccessKey=" + "A1b2" * 10, "\u017fharedAcce\u017f\u017fKey=" + "A1b2" * 10,
], ids=["account", "kelvin", "shared", "long-s"])
def test_azure_signatures_cover_ignorecase_lookalikes(text: str) -> None:
    """The Azure rule's signatures (narrower than ``key``) still admit every spelling its
    IGNORECASE pattern matches."""
    assert [f.kind for f in find_secrets(text)] == ["azure-connection-string"]


_ANCHORED = [rule for rule in RULES if rule.anchor is not None]
_PIECES = (
    "token", "TOKEN", "secret", "passwd", "password", "pwd", "api_key", "apikey", "api-key",
    "access_key", "_key", "KEY", "credentials", "credentıals", "ſecret", "to\u212aen",
    "paſſword", "ıd", "İ", "İ" * 70, "\u212a", "ſ", "ß", "=", ":=", ":",
    "=>", "\\\"", "\"", "'", " ", "\t", "\n", "\\", ",", "}", "`", ".", "-", "_", "a",
    "Z", "9", "é", "x" * 59, "x" * 60, "x" * 61, "A1b2C3d4" * 33, "q" * 255,
    "<", ">", "</", "<password>", "</PASSWORD>", "</api_key>", " " * 99, "\t" * 100, " " * 101,
)
"""Keywords (with IGNORECASE look-alikes), the assignment syntax (XML elements and runs of
blanks included), and runs at the lengths where the pattern's name (60), blanks (100) and
value (256) bounds sit."""


_FAR_SIGNATURES = (
    "x " + "a" * 60 + "encryption_key = Zx9abcdefgh",
    "x sk-" + "a1" * 60 + "B" * 16 + "T3BlbkFJ" + "c" * 20,
    "x " + "a" * 20 + "://user:pass1234@host",
)
"""Matches whose signature sits as far from their start as the rules allow."""


@pytest.mark.parametrize("kind", [*MAKERS, *range(len(_FAR_SIGNATURES))])
def test_a_match_is_seen_from_a_head_reaching_its_start(kind: str | int) -> None:
    """Every rule's match holds one of its signatures within SIGNATURE_REACH of its start
    (openai-key: starts with sk-), so a head that holds a match's start is never clean."""
    rng = random.Random(f"head-{kind}")
    texts = ([f"x {MAKERS[kind](rng).text} y" for _ in range(20)] if isinstance(kind, str)
             else [_FAR_SIGNATURES[kind]])
    for text in texts:
        starts = [m.start() for rule in RULES for m in rule.pattern.finditer(text)]
        assert starts
        for start in starts:
            assert not clean_head(text, start + 1), (text, start)


@settings(max_examples=300, deadline=None)
@given(
    kinds=st.lists(st.sampled_from(sorted({**MAKERS, **FORMS})), min_size=1, max_size=3),
    rng=st.randoms(use_true_random=False),
    noise=st.lists(st.sampled_from((*_PIECES, "%3D", "%3A%2F%2F", "%2", "%", "50% "))
                   | st.text(max_size=30), max_size=6),
    head=st.integers(0, 400),
)
def test_clean_head_means_no_secret_starts_there(
    kinds: list[str], rng: random.Random, noise: list[str], head: int
) -> None:
    """When the head is called clean, no finding starts in it (URL-encoded forms too)."""
    makers = {**MAKERS, **FORMS}
    parts = [*noise, *(makers[kind](rng).text for kind in kinds)]
    rng.shuffle(parts)
    text = " ".join(parts)
    if clean_head(text, head):
        assert all(finding.start >= head for finding in find_secrets(text))


def test_a_percent_escape_makes_a_head_unclean() -> None:
    """A URL-encoded secret whose signature the escapes hide (``%3A%2F%2F`` for ``://``)
    keeps the head that holds its start from being called clean; a plain ``%`` does not."""
    rng = random.Random(31)
    hook = "https%3A%2F%2Fhooks.slack.com%2Fservices%2FT0A1B2C3D4%2FB0A1B2C3D4%2F" + (
        MAKERS["github-token"](rng).values[0][4:28])
    text = f"see {hook} " + "and more words " * 40
    assert [f.start for f in find_secrets(text)] == [4]
    assert not clean_head(text, 5)
    assert clean_head("at 50% of the run " + "and more words " * 40, 5)


def _all_matches(rule: Rule, text: str) -> list[tuple[int, int, dict[str, str | None]]]:
    return [(m.start(), m.end(), m.groupdict()) for m in _matches(rule, text)]


def _whole_text(rule: Rule, text: str) -> list[tuple[int, int, dict[str, str | None]]]:
    return [(m.start(), m.end(), m.groupdict()) for m in rule.pattern.finditer(text)]


def test_anchored_rules_match_as_over_the_whole_text() -> None:
    """Running a rule only around its keyword hits finds exactly what running its pattern
    over the whole text finds (starts, ends, groups), on many generated strings."""
    assert _ANCHORED, "no rule runs on keyword windows"
    rng = random.Random(1212)
    checked = 0
    for _ in range(3000):
        text = "".join(rng.choice(_PIECES) for _ in range(rng.randint(1, 40)))
        for rule in _ANCHORED:
            expected = _whole_text(rule, text)
            assert _all_matches(rule, text) == expected, text
            checked += len(expected)
    assert checked > 1000  # the strings do hold matches, at many distances


def test_lowercase_keeps_ignorecase_hits_but_for_the_listed_characters() -> None:
    """Why anchors may search the lowercased text: for every code point, ``lower()`` keeps
    its length and IGNORECASE matches a keyword character exactly when ``lower()`` gives
    it, except for the characters in ``_FOLDS_APART``."""
    apart = set()
    for point in range(0x110000):
        char = chr(point)
        lowered = char.lower()
        if len(lowered) != 1:
            apart.add(char)
        for letter in "abcdefghijklmnopqrstuvwxyz_-":
            if bool(re.fullmatch(re.escape(letter), char, re.IGNORECASE)) != (lowered == letter):
                apart.add(char)
    assert apart == set(_FOLDS_APART)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES) | st.text(max_size=8), max_size=40))
def test_anchored_rules_match_as_over_the_whole_text_generated(parts: list[str]) -> None:
    text = "".join(parts)
    for rule in _ANCHORED:
        assert _all_matches(rule, text) == _whole_text(rule, text)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_text_without_a_signature_is_returned_as_is(text: str) -> None:
    """The prefilter is exact: text no rule could match comes back as the same object."""
    if not might_hold_secrets(text):
        assert redact(text) is text
        assert find_secrets(text) == []
    assert redact(redact(text)) == redact(text)


def _clean_texts() -> tuple[list[str], set[str]]:
    """Every clean fixture line (as JSON text) and every item text, and the words that must
    survive (see ``clean_corpus``)."""
    return clean_corpus(CLEAN_FIXTURES, lambda value: [orjson.dumps(value).decode()])


def test_no_false_positive_in_the_corpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """No line or item text of the clean fixtures is flagged, so every rare fact, git sha,
    uuid, address, sourceHash and identifier in them stays as it is."""
    monkeypatch.setattr(normalize, "redact_texts", lambda texts, counts=None: list(texts))
    texts, protected = _clean_texts()
    assert len(texts) > 15_000 and len(protected) > 5_000
    flagged = [(text[:120], find_secrets(text)) for text in texts if find_secrets(text)]
    assert flagged == []
    raw = "\n".join(texts)
    masked = "\n".join(redact(text) for text in texts)
    assert [word for word in protected if word in raw and word not in masked] == []
    assert [word for word in protected if find_secrets(word)] == []


@pytest.mark.parametrize("text", [
    "password: string", "token: this.token", "apiKey: process.env.API_KEY",
    "const password = getPassword()", "SORT_KEY=created_at", "max_tokens: 1024",
    'key = os.getenv("X")', "AUTH_TOKEN=${AUTH_TOKEN}", "postgres://app:$DB_PASS@db/app",
    "sha 3f786850e387550fdab836ed7e6dc881de23001b", "uuid 019b7dfa-6880-7209-a921-9cfd38bff320",
    "sourceHash xxh128:5f0c1c0f7b6f4a0e8f2a9c3d1e7b6a55", "the tokens: 42 of 100",
    "secret_key: <your key here>", "https://example.com/path?x=1",
], ids=lambda text: text[:30])
def test_ordinary_text_is_left_alone(text: str) -> None:
    """Type annotations, references, placeholders, hashes and ids are not credentials."""
    assert redact(text) == text


def test_json_text_is_masked_after_decoding_and_stays_json() -> None:
    """Escapes cannot hide a secret (a \\n-joined key block, a \\u-spelled token) and the
    masked line still parses; a clean line comes back as the same object."""
    sample = MAKERS["private-key"](random.Random(1))
    token = MAKERS["github-token"](random.Random(2)).values[0]
    line = orjson.dumps({"output": sample.text,
                         "note": "x"}).decode().replace('"x"', '"\\u0067' + token[1:] + '"')
    masked = redact_json_text(line)
    value = orjson.loads(masked)
    assert _leaked(sample, masked) == [] and token not in masked
    assert value["note"] == "[REDACTED:github-token]"
    clean = orjson.dumps({"text": "nothing to see"}).decode()
    assert redact_json_text(clean) is clean


def test_unparsable_json_is_masked_after_unescaping() -> None:
    """A line orjson refuses (a lone surrogate escape) is masked as text after its \\u
    escapes are decoded, so an escaped token is not printed; an escape-free clean line and
    one with no secret come back as they are."""
    token = MAKERS["github-token"](random.Random(4)).values[0]
    value = _password_like(5)
    line = ('{"a": "\\ud800", "note": "\\u0067' + token[1:] + '", "cfg": "\\u0070assword='
            + value + '"}')
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(line)
    masked = redact_json_text(line)
    assert token[1:] not in masked and value not in masked, masked
    assert masked.startswith('{"a": "\\ud800", "note": "[REDACTED:github-token]"')
    clean = '{"a": "\\ud800", "b": "\\u0041 token count"}'
    assert redact_json_text(clean) is clean


def _password_like(seed: int) -> str:
    return "Zx9" + "".join(random.Random(seed).choice("abcdefgh12345") for _ in range(12))


def test_duplicate_keys_cannot_hide_a_secret() -> None:
    """A line whose duplicate key holds a secret (the parsed value keeps the other one) is
    still masked where expand prints it; the secret's kind is named."""
    token = MAKERS["github-token"](random.Random(5)).values[0]
    value = _password_like(6)
    line = ('{"type": "message", "message": {"content": "' + token + '"}, '
            '"message": {"content": "clean"}, "cfg": {"password": "' + value + '", '
            '"password": "x"}}')
    assert orjson.loads(line)["message"] == {"content": "clean"}
    masked = redact_json_text(line)
    assert token not in masked and value not in masked, masked
    assert "[REDACTED:github-token]" in masked


def test_json_keys_and_deep_nesting_are_walked() -> None:
    """Keys are strings too, and a value nested 900 deep is reached without recursion (and
    masked as text where it is too deep to write back as JSON)."""
    token = MAKERS["stripe-key"](random.Random(3)).values[0]
    deep: object = {token: [token]}
    for _ in range(900):
        deep = [deep]
    counts: Counter[str] = Counter()
    masked = redact_json(deep, counts)
    while isinstance(masked, list):
        masked = masked[0]
    assert masked == {"[REDACTED:stripe-key]": ["[REDACTED:stripe-key]"]}
    assert counts == Counter({"stripe-key": 2}) == secret_kinds(deep)
    line = "[" * 900 + orjson.dumps({"k": token}).decode() + "]" * 900
    assert token not in redact_json_text(line)


def test_secret_named_keys_mask_their_values() -> None:
    """In JSON, a credential-looking value under a secret-named key is masked whole; other
    keys, and placeholders or types under secret names, are left alone."""
    value = {"password": "hunter22x", "sortKey": "abcdef12", "api_key": "string",
             "env": {"DB_PASSWORD": "Zx9!abcd"}}
    counts: Counter[str] = Counter()
    assert redact_json(value, counts) == {
        "password": "[REDACTED:assigned-secret]", "sortKey": "abcdef12", "api_key": "string",
        "env": {"DB_PASSWORD": "[REDACTED:assigned-secret]"}}
    assert counts == secret_kinds(value) == Counter({"assigned-secret": 2})


def test_fingerprint_follows_the_rules() -> None:
    """Changing any rule changes the fingerprint the index schema carries."""
    base = rules_fingerprint(RULES)
    assert base == rules_fingerprint(tuple(RULES))
    changed = (replace(RULES[0], source=RULES[0].source + "x"), *RULES[1:])
    assert rules_fingerprint(changed) != base
    flagged = (replace(RULES[0], flags=re.IGNORECASE), *RULES[1:])
    assert rules_fingerprint(flagged) != base
    assert rules_fingerprint(RULES[1:]) != base


def test_fingerprint_flags_are_the_compiled_ones() -> None:
    """The fingerprint hashes each rule's text and declared flags (UNICODE added) without
    compiling it: what its compiled pattern reports, which is what the fingerprint hashed
    when every rule was compiled at import, so indexes built then keep their schema."""
    for rule in (*RULES, *(replace(rule, source=rule.anchor.source, flags=rule.anchor.flags)
                           for rule in RULES if rule.anchor is not None)):
        assert rule.pattern.flags == rule.flags | re.UNICODE, rule.kind
        assert rule.pattern.pattern == rule.source


def test_samples_are_reproducible() -> None:
    """The shared sample maker gives the same secrets for the same seed."""
    assert samples(5) == samples(5) != samples(6)
    assert CORPUS.is_dir()
