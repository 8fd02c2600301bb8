"""Secrets → ``[REDACTED:<kind>]``: the one rule set behind the index, answers and audit.

Every text the memory index stores, every answer ``expand`` gives by default, the
compaction summary and ``audit --secrets`` go through :data:`RULES` (docs/secrets.md
says why and how the rules were chosen). The format rules are those of Yelp's
``detect-secrets`` 1.5 (Apache-2.0), widened where a format has grown since (GitHub
fine-grained tokens, OpenAI project keys, Stripe test keys), plus the kinds it lacks
(Anthropic keys, GCP service-account keys, Azure connection strings, whole private
key blocks, secret-named assignments in env dumps, commands and config text).

Clean text costs one lowercase copy and a few literal-prefixed searches: a rule's
regex runs only when one of its signatures (short patterns of lowercase text) is
there. Changing a rule changes :data:`RULES_FINGERPRINT`, which is part of the index
schema, so an index built under other rules is rebuilt instead of serving text they
did not mask. Patterns compile on first use: most texts need none of them, and
compiling them all was an eighth of starting ``fabric-memory hook`` (52M of 434M
instructions).
"""

from __future__ import annotations

import base64
import re
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from itertools import accumulate
from typing import Any, Final

import orjson
import xxhash

MASK = "[REDACTED:{kind}]"


@cache
def _compiled(source: str, flags: int = 0) -> re.Pattern[str]:
    """``re.compile`` once per process, kept whatever else fills ``re``'s own cache."""
    return re.compile(source, flags)


@dataclass(frozen=True, slots=True)
class Rule:
    """One secret format: where its value is (``group``) and what must be in a text for
    it to be there at all (``signatures``: substrings of the lowercased text, one of which
    every match holds)."""

    kind: str
    source: str
    """The regular expression (:attr:`pattern`, compiled on first use)."""
    signatures: tuple[str, ...]
    group: int | str = 0
    flags: int = 0
    accept: Callable[[str, str], bool] | None = None
    """A further check of the matched value and the name it is assigned to (the rule's
    ``name`` group, else ""): drops placeholders, identifiers, hashes."""
    anchor: Anchor | None = None
    """Where a match can be, when the pattern itself starts with no literal."""

    @property
    def pattern(self) -> re.Pattern[str]:
        return _compiled(self.source, self.flags)


@dataclass(frozen=True, slots=True)
class Anchor:
    """A rule's keyword and how far its matches reach around each keyword hit.

    Every match holds a keyword occurrence starting at most ``before`` characters after
    the match's start, and ends at most ``after`` characters after that occurrence's
    start. ``keyword`` is compiled with the rule's flags, so it finds every occurrence
    the pattern can use (``ı`` is ``i`` under IGNORECASE), and every occurrence starts
    inside a ``finditer`` hit of it (a start outside every hit would itself be a hit).
    The pattern then runs only on the windows around the hits: the same matches as over
    the whole text, without trying its leading name at every position of it.
    """

    source: str
    flags: int
    before: int
    after: int

    @property
    def keyword(self) -> re.Pattern[str]:
        return _compiled(self.source, self.flags)

    @property
    def lowered(self) -> re.Pattern[str]:
        """``keyword`` without IGNORECASE, for the lowercased text: ~5x faster, and the same
        hits at the same offsets unless the text holds one of :data:`_FOLDS_APART`."""
        return _compiled(self.source)


_FOLDS_APART = ("\u0130", "\u0131", "\u017f")
"""İ, ı, ſ: the only characters whose ``lower()`` changes length (İ) or that IGNORECASE
matches to an ASCII letter their ``lower()`` is not (ı and İ ~ i, ſ ~ s); checked for
every code point by tests/test_redact.py."""


@dataclass(frozen=True, slots=True)
class Finding:
    kind: str
    start: int
    end: int


MIN_ASSIGNED = 6
"""Shortest value of a secret-named assignment taken for a credential."""
_PLACEHOLDER_START = ("$", "{", "<", "%", "*", "[", "(", "#", "&")
_NOT_SECRETS = frozenset({
    "true", "false", "null", "none", "nil", "undefined", "string", "number", "boolean",
    "bool", "bytes", "required", "optional", "object", "function", "secret", "secrets",
    "password", "passwd", "token", "changeme", "example", "redacted", "hidden", "unset",
    "string[]", "str", "int", "any", "unknown", "never", "void",
})
_WORD = r"(?:[a-z_$]+(?:[A-Z][a-z]+)*|[A-Z][a-z]+(?:[A-Z][a-z]+)*|[A-Z_]+)\d{0,2}"
_REFERENCE = rf"{_WORD}(?:(?:\.|\?\.|::|->){_WORD})+(?:\(\)?)?"
"""``process.env.TOKEN``, ``config.apiKey``, ``self.secret()``: code naming a value."""
_IDENTIFIER = r"[a-z_]+|[A-Z_]+|[a-z]{2,}(?:[A-Z][a-z]+)+\d{0,2}|[A-Za-z_$][\w$.]*\(\)?"
"""A lone word, a CONSTANT_NAME, a camelCase name (``createdAt``) or a call: not a
credential."""
_PASSPHRASE = r"[a-z]+(?:-[a-z]+)+"
"""Lower-case words joined by dashes: a passphrase under a password's name, a name
(``created-at``, ``my-bucket``) under any other."""
_NUMBER = r"[+\-]?\d+(?:[.,_]\d+)*(?:[eE][+\-]?\d+)?[kKmMgG]?"
"""A count, a limit, a size (``128000``, ``1.5e3``, ``64k``): a credential only under a
password's name (a PIN-like password)."""
_NOT_CREDENTIAL = (
    r"(?:SHA256|SHA384|SHA512|SHA1|MD5):[A-Za-z0-9+/=:]+"
    r"|[0-9a-fA-F]{2}(?::[0-9a-fA-F]{2}){7,}"
    r"|(?:ssh-(?:rsa|dss|ed25519)|ecdsa-sha2-nistp\d+|sk-ssh-ed25519@openssh\.com)"
    r"|AAAA[BCE][0-9A-Za-z+/]{12,}={0,2}"
    r"|(?:~|\.{1,2})?(?:/[\w.\-@]+){2,}/?"
)
"""Under any name: a key fingerprint (``SHA256:…``, ``aa:bb:…``), an SSH public key (its
type, or its base64 blob ``AAAAC3NzaC1…``): what identifies a key, not the key; or a
file path (``PWD=/home/dev/app``, ``GPG_KEY=~/.gnupg/key.asc``): where one is kept."""
_PLAIN = (
    r"[0-9a-fA-F]{7,128}"
    r"|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    r"|\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?Z?)?"
    r"|(?:[a-z]+\d{0,3}|\d+)(?:[_\-.:/#@](?:[a-z]+\d{0,3}|\d+))*"
)
"""Under a weak name (``cache_key``, ``sort_key``, ``partition_key``: ``*_key`` names that
say nothing of a secret): a git sha or other hex hash, a uuid, a date, or lower-case words
and numbers joined by separators (``tenant_42``, ``customer-42``, ``v2:user:7``)."""


def _assigned_value(value: str, name: str = "token") -> bool:
    """Whether ``value``, assigned to the secret-like ``name``, looks like a credential."""
    if len(value) < MIN_ASSIGNED or value.startswith(_PLACEHOLDER_START):
        return False
    if value.lower() in _NOT_SECRETS or len(set(value)) < 3:
        return False
    strength = _name_strength(name)
    if strength == "public" or _compiled(_NOT_CREDENTIAL).fullmatch(value):
        return False
    if strength == "password":
        if _compiled(_PASSPHRASE).fullmatch(value) or _compiled(_NUMBER).fullmatch(value):
            return True
    elif _compiled(_NUMBER).fullmatch(value) or (
            strength == "weak" and _compiled(_PLAIN).fullmatch(value)):
        return False
    return not (_compiled(_REFERENCE).fullmatch(value) or _compiled(_IDENTIFIER).fullmatch(value)
                or _compiled(_PASSPHRASE).fullmatch(value))


_PUBLIC_NAME_ENDS = ("public_key", "publickey", "public-key", "pubkey", "pub_key", "pub-key")
_PASSWORD_NAME_ENDS = ("password", "passwd", "pwd")
_STRONG_KEY = r"(?:api|access|secret|private|signing|master|encryption|auth|client)[_\-]?key$"


def _name_strength(name: str) -> str:
    """``public`` (a public key's name: never a secret), ``password``, ``weak`` (a
    ``*_key`` name that is not an API, access, secret, private... key) or ``strong``."""
    lowered = name.lower()
    if lowered.endswith(_PUBLIC_NAME_ENDS):
        return "public"
    if lowered.endswith(_PASSWORD_NAME_ENDS):
        return "password"
    if lowered.endswith("key") and _compiled(_STRONG_KEY).search(lowered) is None:
        return "weak"
    return "strong"


_SECRET_WORD = (r"(?:token|secret|passw(?:or)?d|pwd|api[_\-]?key"
                r"|(?:access|secret|private|signing|master|encryption|auth|client)[_\-]?key"
                r"|_key|credentials?)")
_SECRET_NAME = rf"[A-Za-z0-9_.\-]{{0,60}}?{_SECRET_WORD}"
"""A name whose value is a credential: ``*_TOKEN``, ``*_SECRET``, ``*_KEY``, ``password``..."""


@lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """Whether a value stored under ``name`` (a JSON key, an argument's name) may be a
    credential: ``password``, ``DB_PASSWORD``, ``X-Api-Key``, ``*_token``... (remembered:
    a session names the same few keys thousands of times)."""
    return _compiled(_SECRET_NAME, re.IGNORECASE).fullmatch(name) is not None


def _url_password(value: str, name: str = "") -> bool:
    return not value.startswith(_PLACEHOLDER_START) and value.lower() not in _NOT_SECRETS


def _flag_password(value: str, name: str = "") -> bool:
    """A password given on a command line: anything but a placeholder or another flag."""
    return not value.startswith("-") and _url_password(value)


def _basic_credentials(value: str, name: str = "") -> bool:
    """Whether ``value`` is base64 of ``user:password`` (not a word after "Basic")."""
    try:
        decoded = base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
    except ValueError:  # (binascii.Error is one)
        return False
    return b":" in decoded and decoded.isascii() and decoded.decode().isprintable()


def _rule(
    kind: str, pattern: str, signatures: tuple[str, ...], *, group: int | str = 0,
    flags: int = 0, accept: Callable[[str, str], bool] | None = None,
    anchor: tuple[str, int, int] | None = None,
) -> Rule:
    window = None if anchor is None else Anchor(anchor[0], flags, anchor[1], anchor[2])
    return Rule(kind, pattern, signatures, group, flags, accept, window)


_PERCENT: Final = r"%[0-7][0-9A-Fa-f]"
"""A percent escape of an ASCII character (every credential format is ASCII)."""
_JSON_ESCAPE: Final = r"\\(?:u[0-9A-Fa-f]{4}|[\"\\/bfnrt])"
_JSON_CHARS: Final = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}

BLOCK_KEYS: Final = ("text", "thinking")
"""The keys of a content list's text blocks, read as one text for secrets cut between two."""


_FLAG_VALUE = (r"(?:\"(?P<dq>[^\"\n]{1,256})\"|'(?P<sq>[^'\n]{1,256})'"
               r"|(?P<bare>[^\s'\"`;|&]{1,256}))")
"""A command-line value: double- or single-quoted, or bare to the next blank or operator."""

_B = r"(?<![A-Za-z0-9_])"
"""Not in the middle of a word (tokens are matched whole)."""
_E = r"(?![A-Za-z0-9_])"

RULES: tuple[Rule, ...] = (
    # What a person marked private (docs/privacy.md): the whole span, tags included; an
    # unclosed tag keeps the rest of its text private (a forgotten close leaks nothing).
    _rule("private", r"<private>.*?(?:</private>|\Z)", ("<private>",),
          flags=re.IGNORECASE | re.DOTALL),
    _rule("private-key",
          r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
          r"(?:[A-Za-z0-9+/=\s]|\\+[nrt]|(?:Proc-Type|DEK-Info|Comment|Version|Hash):"
          r"[^\n\\]{0,200})*+(?:-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----)?",
          ("-----begin",)),
    _rule("aws-access-key-id", _B + r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}" + _E,
          ("akia", "asia", "abia", "acca", "a3t")),
    _rule("aws-secret-access-key",
          r"aws.{0,20}?(?:secret|key|pwd|pw|password|pass|token).{0,20}?[\s'\"=:]"
          r"\\?['\"]?([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])",
          ("aws",), group=1, flags=re.IGNORECASE),
    _rule("gcp-service-account-key",
          r"private_key_id\\?[\"']?\s*[:=]\s*\\?[\"']?([0-9a-f]{40})" + _E,
          ("private_key_id",), group=1),
    _rule("gcp-api-key", _B + r"AIza[0-9A-Za-z_\-]{35}(?![A-Za-z0-9_\-])", ("aiza",)),
    _rule("azure-connection-string",
          r"(?:AccountKey|SharedAccessKey)\s*=\s*([A-Za-z0-9+/]{20,}={0,2})",
          # No "s" in the second: IGNORECASE takes "ſ" for "s", lower() keeps it "ſ".
          ("accountkey", "haredacce"), group=1, flags=re.IGNORECASE),
    _rule("github-token",
          _B + r"(?:gh[pousr]_[A-Za-z0-9]{36,251}|github_pat_[A-Za-z0-9_]{22,244})" + _E,
          ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")),
    _rule("gitlab-token",
          _B + r"(?:(?:glpat|gldt|glft|glsoat|glrt)-[A-Za-z0-9_\-]{20,50}"
          r"|GR1348941[A-Za-z0-9_\-]{20,50}|glcbt-(?:[0-9a-fA-F]{2}_)?[A-Za-z0-9_\-]{20,50}"
          r"|glimt-[A-Za-z0-9_\-]{25}|glptt-[A-Za-z0-9_\-]{40}|glagent-[A-Za-z0-9_\-]{50,1024}"
          r"|gloas-[A-Za-z0-9_\-]{64})(?![A-Za-z0-9_\-])",
          ("glpat-", "gldt-", "glft-", "glsoat-", "glrt-", "glcbt-", "glimt-", "glptt-",
           "glagent-", "gloas-", "gr1348941")),
    _rule("anthropic-key", _B + r"sk-ant-[a-z]{2,10}\d{2}-[A-Za-z0-9_\-]{32,200}", ("sk-ant-",)),
    _rule("openai-key",
          _B + r"sk-[A-Za-z0-9_\-]*[A-Za-z0-9]{16}T3BlbkFJ[A-Za-z0-9_\-]{16,}", ("t3blbkfj",)),
    _rule("slack-token",
          _B + r"(?:xox[abposre]-(?:\d+-)+[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*"
          r"|xapp-\d+-[A-Za-z0-9]+-\d+-[A-Za-z0-9]+"
          r"|https://hooks\.slack\.com/services/T[A-Za-z0-9_]+/B[A-Za-z0-9_]+/[A-Za-z0-9_]+)",
          ("xox", "xapp-", "://"), flags=re.IGNORECASE),
    _rule("stripe-key", _B + r"(?:(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{24,247}"
          r"|whsec_[0-9A-Za-z]{32,})" + _E,
          ("k_live_", "k_test_", "whsec_")),
    _rule("jwt", _B + r"eyJ[A-Za-z0-9_\-]{5,}={0,2}\.eyJ[A-Za-z0-9_\-]{5,}={0,2}"
          r"\.[A-Za-z0-9_\-]*={0,2}", ("eyj",)),
    _rule("huggingface-token", _B + r"hf_[A-Za-z0-9]{30,64}" + _E, ("hf_",)),
    _rule("url-password",
          r"\b[A-Za-z][A-Za-z0-9+.\-]{1,20}://[^\s:/?#@'\"<>]{0,128}:([^\s/?#@'\"<>]{1,256})@",
          ("://",), group=1, accept=_url_password),
    _rule("bearer-token", r"\b[Bb]earer\s+([A-Za-z0-9._~+/\-]{20,}=*)", ("bearer",), group=1),
    _rule("basic-auth", r"\b[Bb]asic[ \t]+([A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])",
          ("basic",), group=1, accept=_basic_credentials),
    _rule("cli-password",
          r"(?<![\w\-])--pass(?:word|wd)?(?:=|[ \t]+)" + _FLAG_VALUE,
          ("--pass",), group="value", accept=_flag_password),
    _rule("cli-password",
          r"\b(?:mysql|mysqldump|mysqladmin|mariadb|mariadb-dump)\b[^\n;|&]{0,200}?[ \t]-p"
          r"(?P<bare>[^\s'\"`;|&]{1,256})",
          ("mysql", "mariadb"), group="value", accept=_flag_password),
    _rule("cli-password",
          r"\bcurl\b[^\n;|&]{0,300}?[ \t](?:-u|--user(?=[ \t=])=?)[ \t]*"
          r"(?:\"[^\"\s:]{0,128}:(?P<dq>[^\"\n]{1,256})\"|'[^'\s:]{0,128}:(?P<sq>[^'\n]{1,256})'"
          r"|[^\s:'\"]{0,128}:(?P<bare>[^\s'\"`;|&]{1,256}))",
          ("curl",), group="value", accept=_flag_password),
    _rule("assigned-secret",
          rf"(?<![A-Za-z0-9])(?P<name>{_SECRET_NAME})(?![A-Za-z0-9])\\?[\"']?"
          r"[ \t]{0,100}+(?:=|:=|:|=>)[ \t]{0,100}+"
          r"(?:\\?\"(?P<dq>[^\"\\\n]{1,256})\\?\"|'(?P<sq>[^'\n]{1,256})'"
          r"|(?P<bare>[^\s'\"`,;)}\]&]{1,256}))",
          ("token", "secret", "passw", "pwd", "key", "credential"),
          group="value", flags=re.IGNORECASE, accept=_assigned_value,
          # 60 name characters before the word; after its start: the word (14 at most),
          # \\?["']? (2), blanks, the operator, blanks (100 + 2 + 100), a quoted value (260).
          anchor=(_SECRET_WORD, 60, 14 + 2 + 202 + 260)),
    _rule("assigned-secret",
          rf"<(?P<name>{_SECRET_NAME})>(?P<bare>[^<\n]{{1,256}})</(?P=name)>",
          ("token", "secret", "passw", "pwd", "key", "credential"),
          group="value", flags=re.IGNORECASE, accept=_assigned_value,
          # "<" and 60 name characters before the word; after its start: the word (14), ">",
          # the value (256), "</", the name again (74), ">".
          anchor=(_SECRET_WORD, 61, 14 + 1 + 256 + 2 + 74 + 1)),
)
"""Most specific first: where two rules match overlapping text, the earlier one names it."""


def rules_fingerprint(rules: Sequence[Rule]) -> str:
    """Eight hex digits that change whenever any rule, or the data its checks use, does."""
    checks = (MIN_ASSIGNED, _PLACEHOLDER_START, sorted(_NOT_SECRETS), _REFERENCE, _IDENTIFIER,
              MASK, _PASSPHRASE, _NUMBER, _NOT_CREDENTIAL, _PLAIN, _PUBLIC_NAME_ENDS,
              _PASSWORD_NAME_ENDS, _STRONG_KEY, _PERCENT, _JSON_ESCAPE, BLOCK_KEYS)
    described = "\n".join([repr(checks), *(
        # (the flags ``re.compile`` reports, read without compiling: tests/test_redact.py
        # holds them equal, so indexes built when rules compiled at import keep theirs)
        f"{r.kind}\t{r.source}\t{int(r.flags | re.UNICODE)}\t{r.group}\t"
        f"{','.join(r.signatures)}\t{r.accept.__name__ if r.accept else ''}"
        for r in rules
    )])
    return str(xxhash.xxh64_hexdigest(described.encode()))[:8]


RULES_FINGERPRINT = rules_fingerprint(RULES)
"""Part of the memory index schema (an index built under other rules is rebuilt)."""

KINDS: tuple[str, ...] = tuple(dict.fromkeys(rule.kind for rule in RULES))
_SIGNATURES: tuple[str, ...] = tuple(dict.fromkeys(s for rule in RULES for s in rule.signatures))


def _alternation(words: Sequence[str]) -> str:
    """A regex matching any of ``words``, their shared prefixes factored out: the engine
    tries an alternation's branches one by one at every position, and one branch per
    first letter makes the search ~30% faster than one branch per word."""
    trie: dict[str, Any] = {}
    for word in words:
        node = trie
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}

    def branch(node: dict[str, Any]) -> str:
        ways = [re.escape(char) + branch(rest) for char, rest in sorted(node.items()) if char]
        if not ways:
            return ""
        body = ways[0] if len(ways) == 1 else f"(?:{'|'.join(ways)})"
        return f"(?:{body})?" if "" in node else body

    return branch(trie)


_ANY_SIGNATURE = re.compile(_alternation(_SIGNATURES))


@cache
def _needles() -> tuple[re.Pattern[bytes], ...]:
    """For many texts at once: one search per rule and first letter of its signatures (a
    pattern starting with a literal, which the engine skips to fast), a hit telling that
    its text holds one of the rule's signatures (the one found: all that selecting it
    needs)."""
    return tuple(re.compile(pattern.encode()) for pattern in dict.fromkeys(
        _alternation([s for s in rule.signatures if s[0] == first])
        for rule in RULES for first in dict.fromkeys(s[0] for s in rule.signatures)
    ))

_STARTING = {s: frozenset(p for p in _SIGNATURES if s.startswith(p)) for s in _SIGNATURES}
"""A hit is the longest signature at its position; those it starts with are there too."""
_NONE: frozenset[str] = frozenset()


@cache
def _percent_bytes() -> re.Pattern[bytes]:
    """:data:`_PERCENT` for :func:`redact_texts`' lowercased UTF-8."""
    return re.compile(_PERCENT.lower().encode())


def _present(lowered: str) -> frozenset[str]:
    """Every signature in ``lowered``, in one scan (resumed one past each hit, as two
    signatures may overlap) instead of one search per signature."""
    hit = _ANY_SIGNATURE.search(lowered)
    if hit is None:
        return _NONE
    found: set[str] = set()
    while hit is not None:
        found |= _STARTING[hit.group()]
        hit = _ANY_SIGNATURE.search(lowered, hit.start() + 1)
    return frozenset(found)


def find_secrets(text: str, present: frozenset[str] | None = None) -> list[Finding]:
    """Every secret in ``text``, in order, overlapping ones merged (the earliest-starting,
    then the earlier rule, names them). A text with percent escapes (``token%3Dghp_…``) is
    also read URL-decoded, and what is found there is masked where it stands.

    ``present``: the signatures known to be in ``text`` (see :func:`redact_texts`).
    """
    if present is None:
        present = _present(text.lower())
    found = _found(text, present) if present else []
    if "%" in text and _compiled(_PERCENT).search(text) is not None:
        found.extend(_found_decoded(text, _PERCENT, _percent_char))
    return _merged(found)


_Found = list[tuple[int, int, int, str]]
"""(start, -end, rule order, kind): sorted, the earliest and then the longest first."""


def _found(text: str, present: frozenset[str]) -> _Found:
    found: _Found = []
    for order, rule in enumerate(RULES):
        if not present.isdisjoint(rule.signatures):
            found.extend((start, -end, order, rule.kind) for start, end in _spans(rule, text))
    return found


def _percent_char(escape: str) -> str:
    return chr(int(escape[1:], 16))


def _json_char(escape: str) -> str:
    if escape[1] == "u":
        return chr(int(escape[2:], 16))
    return _JSON_CHARS.get(escape[1], escape[1])


def _found_decoded(text: str, escape: str, decode: Callable[[str], str]) -> _Found:
    """What the rules find in ``text`` with each ``escape`` decoded to its character, at
    the places in ``text`` it came from."""
    parts: list[str] = []
    starts: list[int] = []
    """For each decoded character, where it starts in ``text``."""
    at = 0
    for match in _compiled(escape).finditer(text):
        parts.append(text[at : match.start()])
        starts.extend(range(at, match.start()))
        parts.append(decode(match.group()))
        starts.append(match.start())
        at = match.end()
    parts.append(text[at:])
    starts.extend(range(at, len(text) + 1))
    decoded = "".join(parts)
    found = _found(decoded, _present(decoded.lower()))
    return [(starts[start], -starts[-negative_end], order, kind)
            for start, negative_end, order, kind in found]


def _merged(found: _Found) -> list[Finding]:
    found.sort()
    kept: list[Finding] = []
    for start, negative_end, _, kind in found:
        end = -negative_end
        if kept and start < kept[-1].end:
            if end > kept[-1].end:  # (the later match's tail is a secret's too)
                kept[-1] = Finding(kept[-1].kind, kept[-1].start, end)
            continue
        kept.append(Finding(kind, start, end))
    return kept


def _matches(rule: Rule, text: str) -> Iterator[re.Match[str]]:
    """``rule.pattern.finditer(text)``, run only around the keyword hits if it has one."""
    pattern, anchor = rule.pattern, rule.anchor  # (a property: looked up once, not per window)
    if anchor is None:
        yield from pattern.finditer(text)
        return
    if any(c in text for c in _FOLDS_APART):
        hits = anchor.keyword.finditer(text)
    else:
        hits = anchor.lowered.finditer(text.lower())
    windows: list[list[int]] = []
    for hit in hits:
        # +1: the pattern's last look-ahead reads one character past a match.
        start, end = max(0, hit.start() - anchor.before), hit.end() + anchor.after + 1
        if windows and start <= windows[-1][1]:
            windows[-1][1] = end
        else:
            windows.append([start, end])
    for start, end in windows:
        # pos keeps the text before it visible to look-behinds (unlike a slice).
        yield from pattern.finditer(text, start, end)


def _spans(rule: Rule, text: str) -> Iterator[tuple[int, int]]:
    for match in _matches(rule, text):
        groups = match.groupdict()
        if rule.group == "value":
            value = next(n for n in ("dq", "sq", "bare") if groups.get(n) is not None)
            start, end = match.span(value)
        else:
            start, end = match.span(rule.group)
        if start < end and (rule.accept is None
                            or rule.accept(text[start:end], groups.get("name") or "")):
            yield start, end


def redact(text: str, counts: Counter[str] | None = None) -> str:
    """``text`` with every secret replaced by ``[REDACTED:<kind>]`` (counted in ``counts``)."""
    present = _present(text.lower())
    if not present and "%" not in text:  # (most texts: ``text`` itself, no call more)
        return text
    return _masked(text, find_secrets(text, present), counts)


def redact_texts(texts: Sequence[str], counts: Counter[str] | None = None) -> list[str]:
    """:func:`redact` of each text, the prefilter run once over all of them.

    A session's items are many short texts: about twenty searches over all of them (as
    UTF-8, where the search is several times faster than in a wide string) replace as
    many per text.
    """
    encoded = [text.lower().encode("utf-8", "surrogatepass") for text in texts]
    joined = b"\0".join(encoded)  # no signature holds a NUL: none spans two texts
    ends = list(accumulate(len(data) + 1 for data in encoded))
    present: dict[int, set[str]] = {}
    for needle in _needles():
        found = needle.search(joined)
        while found is not None:
            which = bisect_right(ends, found.start())
            present.setdefault(which, set()).add(found.group().decode())
            found = needle.search(joined, ends[which])
    for found in _percent_bytes().finditer(joined):  # read URL-decoded too (find_secrets)
        present.setdefault(bisect_right(ends, found.start()), set())
    out = list(texts)
    for which, signatures in present.items():
        text = texts[which]
        out[which] = _masked(text, find_secrets(text, frozenset(signatures)), counts)
    return out


def _masked(text: str, findings: list[Finding], counts: Counter[str] | None) -> str:
    if not findings:
        return text
    parts: list[str] = []
    at = 0
    for finding in findings:
        parts.append(text[at : finding.start])
        parts.append(MASK.format(kind=finding.kind))
        at = finding.end
        if counts is not None:
            counts[finding.kind] += 1
    parts.append(text[at:])
    return "".join(parts)


def might_hold_secrets(text: str) -> bool:
    """False when no rule can match ``text`` (the prefilter alone: one lowercase copy)."""
    return _ANY_SIGNATURE.search(text.lower()) is not None or (
        "%" in text and _compiled(_PERCENT).search(text) is not None)


SIGNATURE_REACH: Final = 80
"""How far after a match's start its first signature ends, at most, in every rule but
``openai-key``: a secret-named assignment's name runs 60 characters before its word (14 at
most), a URL's scheme 21 before ``://``; every other rule starts with its signature."""
_UNREACHED_START: Final = "sk-"
"""``openai-key`` starts with it, its signature any distance after."""


def clean_head(text: str, head: int) -> bool:
    """Whether no secret of ``text`` starts before ``head`` (False: one may), from a look at
    its first ``head + SIGNATURE_REACH`` characters only: a long text cut short needs no
    masking of the rest. Not where lower() and IGNORECASE part (:data:`_FOLDS_APART`): a
    rule the rest selects could match there without a signature the head shows."""
    window = text[: head + SIGNATURE_REACH]
    # A percent escape may hide a signature (``%3A%2F%2F`` for ``://``): then one of a
    # match's characters up to its signature is escaped, the first of them starting in
    # the window (+2: the whole escape), or the signature is there as it is.
    if "%" in window and _compiled(_PERCENT).search(text, 0, head + SIGNATURE_REACH + 2):
        return False
    if any(char in window for char in _FOLDS_APART):
        return False
    lowered = window.lower()
    return _UNREACHED_START not in lowered and _ANY_SIGNATURE.search(lowered) is None


def redact_json(value: Any, counts: Counter[str] | None = None) -> Any:
    """A copy of ``value`` (parsed JSON) with every string, keys included, redacted; the
    string value of a secret-named key (``{"password": "..."}``) masked whole when it looks
    like a credential (:func:`mask_named`); and a secret cut between the text blocks of
    a list (a message's ``content``) masked on both sides (:func:`mask_blocks`).

    Iterative: a session line may nest as deep as the JSON parser allows."""
    root = [value]
    stack: list[tuple[Any, Any]] = [(root, 0)]
    while stack:
        container, key = stack.pop()
        item = container[key]
        if isinstance(item, str):
            container[key] = redact(item, counts)
        elif isinstance(item, list):
            items = container[key] = list(mask_blocks(item, counts))
            stack.extend((items, index) for index in range(len(items)))
        elif isinstance(item, dict):
            pairs = container[key] = {redact(k, counts): mask_named(k, v, counts)
                                      for k, v in item.items()}
            stack.extend((pairs, k) for k in pairs)
    return root[0]


def mask_named(key: str, value: Any, counts: Counter[str] | None = None) -> Any:
    """``value`` masked whole as an ``assigned-secret`` when ``key`` names a secret
    (``password``, ``DB_PASSWORD``, ``X-Api-Key``) and the value, a string, looks like a
    credential and has no known format of its own (the format's rule names it then); else
    ``value`` itself. What ``expand`` and ``audit`` do for JSON keys, the index does for
    tool-call and operation arguments: one rule for both."""
    if (isinstance(value, str) and is_secret_name(key) and _assigned_value(value, key)
            and not find_secrets(value)):
        if counts is not None:
            counts["assigned-secret"] += 1
        return MASK.format(kind="assigned-secret")
    return value


def mask_blocks(items: list[Any], counts: Counter[str] | None = None) -> list[Any]:
    """``items`` with a secret cut between two text blocks (objects with a string ``text``
    or ``thinking``, :data:`BLOCK_KEYS`) masked in each block it touches (:func:`mask_across`),
    the blocks changed copied; ``items`` itself when there is nothing to mask. Each block's
    own secrets are left to its own masking."""
    if len(items) < 2:
        return items
    blocks = [(at, name) for at, item in enumerate(items) if type(item) is dict
              for name in BLOCK_KEYS if type(item.get(name)) is str]
    if len(blocks) < 2:
        return items
    masked = mask_across([items[at][name] for at, name in blocks], counts)
    copied = items
    for (at, name), text in zip(blocks, masked, strict=True):
        if text is not items[at][name]:
            if copied is items:
                copied = list(items)
            copied[at] = {**copied[at], name: text}
    return copied


def mask_across(parts: Sequence[str], counts: Counter[str] | None = None) -> list[str]:
    """``parts`` with every secret that spans two or more of them, read as one text, masked
    in each part it touches: a token the writer split between two blocks leaks neither
    half. A secret inside one part is left to that part's own masking (and not counted)."""
    out = list(parts)
    if len(parts) < 2:
        return out
    ends = list(accumulate(len(part) for part in parts))
    pieces: dict[int, list[Finding]] = {}
    for finding in find_secrets("".join(parts)):
        first, last = bisect_right(ends, finding.start), bisect_left(ends, finding.end)
        if first == last:
            continue
        if counts is not None:
            counts[finding.kind] += 1
        for at in range(first, last + 1):
            begin = ends[at] - len(parts[at])
            start, end = max(finding.start, begin) - begin, min(finding.end, ends[at]) - begin
            if start < end:
                pieces.setdefault(at, []).append(Finding(finding.kind, start, end))
    for at, found in pieces.items():
        out[at] = _masked(parts[at], found, None)
    return out


def secret_kinds(value: Any) -> Counter[str]:
    """How many secrets of each kind :func:`redact_json` masks in ``value``."""
    counts: Counter[str] = Counter()
    redact_json(value, counts)
    return counts


def redact_json_text(text: str) -> str:
    """The text of one JSON value with its strings redacted, still valid JSON; ``text``
    itself when it holds no secret.

    Strings are redacted after decoding, so an escape (``\\n`` inside a key block, ``\\u``
    in a token) cannot hide a secret, and a mask never splits an escape. When the parsed
    value shows no secret, the text is checked as it stands too: a duplicate key's value
    is in the text but not in the value (orjson keeps the last). A text orjson refuses (a
    lone surrogate escape, nesting too deep) is masked as text, read with its JSON escapes
    decoded as well as it stands.
    """
    if not might_hold_secrets(text) and "\\u" not in text:
        return text
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return _redact_escaped(text)
    counts: Counter[str] = Counter()
    masked = redact_json(value, counts)
    if not counts:
        return _redact_escaped(text) if _has_duplicate_keys(text) else text
    try:
        return orjson.dumps(masked).decode()
    except TypeError:  # nested deeper than orjson writes: mask the text as it stands
        return _redact_escaped(text)


def _has_duplicate_keys(text: str) -> bool:
    """Whether an object of the JSON ``text`` names a key twice (True when the standard
    library cannot read it: the text is then masked as text, which costs only masks)."""
    import json  # (only here: most processes never need it)

    repeated = False

    def pairs(items: list[tuple[str, Any]]) -> None:
        nonlocal repeated
        repeated = repeated or len({key for key, _ in items}) < len(items)

    try:
        json.loads(text, object_pairs_hook=pairs)
    except (ValueError, RecursionError):
        return True
    return repeated


def _redact_escaped(text: str) -> str:
    """``text`` (JSON text) masked where the rules find a secret in it read with its escapes
    (``\\u0067hp_…``, ``\\n``, ``\\"``) decoded, as its strings say; ``text`` itself when
    they find none."""
    if "\\" not in text:
        return _masked(text, find_secrets(text), None)
    return _masked(text, _merged(_found_decoded(text, _JSON_ESCAPE, _json_char)), None)
