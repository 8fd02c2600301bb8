"""How the candidate secret scanners do on this project's corpus (docs/secrets.md).

Two steps, because the candidates cannot share one environment (``detect-secrets``
and ``bc-detect-secrets`` install the same module)::

    python -m bench.secret_scanners dump /tmp/texts.json          # in the project venv
    VENV/bin/python bench/secret_scanners.py score /tmp/texts.json TOOL [EVERY]

``dump`` writes every text a scanner would see: each string of each line of every
fixture session (what ``expand`` and ``audit`` read), each indexed text (what
normalization builds), the words that must survive (rare facts, entry ids and
operation addresses, sourceHashes, uuids, hex runs such as git shas) and planted
secrets of every kind. ``score`` runs TOOL (``ours``, ``detect-secrets``,
``bc-detect-secrets`` (as ``scan_line`` scans a string; ``-files`` suffix: as it scans a
file), ``ms-precise`` or ``ms-all``) and prints precision (texts
flagged in the clean corpus, protected words touched), recall (planted secrets fully
covered, by kind) and speed (clean corpus seconds). Not part of the test run.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

Span = tuple[int, int, str]
Scanner = Callable[[str], list[Span]]


def dump(out: Path) -> None:
    """Write the evaluation texts (see the module docstring) as JSON to ``out``."""
    import orjson

    import fabric_memory.memory.normalize as normalize
    from fabric_memory.redact import redact
    from tests.secret_samples import clean_corpus, samples

    repo = Path(__file__).resolve().parents[1]
    # Normalize without redaction: the scanner must see what the index would hold.
    saved = normalize.redact_texts
    normalize.redact_texts = lambda texts, counts=None: list(texts)
    try:
        texts, protected = clean_corpus([repo / "fixtures"], _strings)
    finally:
        normalize.redact_texts = saved
    planted = [{"kind": s.kind, "text": s.text, "values": list(s.values)}
               for s in samples(seed=2026, per_kind=20)]
    assert redact  # the module imports cleanly in the project venv
    out.write_bytes(orjson.dumps({"texts": texts, "protected": sorted(protected),
                                  "planted": planted}))
    print(f"{len(texts)} texts, {len(protected)} protected words, {len(planted)} planted")


def _strings(value: Any) -> Iterator[str]:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())


# --- the candidates ---------------------------------------------------------------------


def _ours() -> Scanner:
    from fabric_memory.redact import find_secrets

    return lambda text: [(f.start, f.end, f.kind) for f in find_secrets(text)]


def _detect_secrets(eager: bool) -> Scanner:
    """Yelp's (or Bridgecrew's fork's) default plugins and filters, line by line: the body
    of ``scan_line`` without its per-call settings reset. ``eager``: as ``scan_line`` scans
    a string (high-entropy words need no quotes), else as it scans a file. A finding is a
    value, located here by searching the line for it."""
    from detect_secrets.core.scan import _is_filtered_out, _scan_line
    from detect_secrets.settings import default_settings, get_plugins
    from detect_secrets.util.code_snippet import get_code_snippet

    context = default_settings()
    context.__enter__()
    _KEEP.append(context)  # the settings last while the context object lives
    plugins = get_plugins()

    def scan(text: str) -> list[Span]:
        spans: list[Span] = []
        at = 0
        for line in text.split("\n"):
            snippet = get_code_snippet(lines=[line], line_number=1)
            for plugin in plugins:
                for secret in _scan_line(plugin=plugin, filename="adhoc", line=line,
                                         line_number=0, context=snippet,
                                         enable_eager_search=eager):
                    if _is_filtered_out(required_filter_parameters=["context"],
                                        filename="adhoc", secret=secret.secret_value,
                                        plugin=plugin, line=line, context=snippet):
                        continue
                    value = secret.secret_value or ""
                    start = line.find(value) if value else -1
                    while start != -1:
                        spans.append((at + start, at + start + len(value), secret.type))
                        start = line.find(value, start + 1)
            at += len(line) + 1
        return spans

    return scan


_KEEP: list[Any] = []


def _ms_masker(files: tuple[str, ...]) -> Scanner:
    from microsoft_security_utilities_secret_masker import (
        SecretMasker,
        load_regex_patterns_from_json_file,
    )

    patterns: set[Any] = set()
    for name in files:
        patterns |= load_regex_patterns_from_json_file(name)
    masker = SecretMasker(patterns)
    return lambda text: [(d.start, d.end, d.name) for d in masker.detect_secrets(text)]


def scanner(tool: str) -> Scanner:
    if tool == "ours":
        return _ours()
    if tool in ("detect-secrets", "bc-detect-secrets"):
        return _detect_secrets(eager=True)
    if tool in ("detect-secrets-files", "bc-detect-secrets-files"):
        return _detect_secrets(eager=False)
    precise = ("PreciselyClassifiedSecurityKeys.json",)
    if tool == "ms-precise":
        return _ms_masker(precise)
    if tool == "ms-all":
        return _ms_masker((*precise, "UnclassifiedPotentialSecurityKeys.json",
                           "HighConfidenceSecurityModels.json"))
    raise SystemExit(f"unknown tool {tool!r}")


# --- scoring ----------------------------------------------------------------------------


def score(data_path: Path, tool: str, every: int = 1) -> dict[str, Any]:
    """``every``: score every n-th corpus text only (for the slow candidates)."""
    data = json.loads(data_path.read_text())
    scan = scanner(tool)
    texts: list[str] = data["texts"][::every]
    protected: list[str] = data["protected"]
    started = time.perf_counter()
    results = [scan(text) for text in texts]
    seconds = time.perf_counter() - started
    flagged = [(text, spans) for text, spans in zip(texts, results, strict=True) if spans]
    touched: set[str] = set()
    by_kind: Counter[str] = Counter()
    for text, spans in flagged:
        for start, end, kind in spans:
            by_kind[kind] += 1
            for word in protected:
                at = text.find(word)
                while at != -1:
                    if at < end and start < at + len(word):
                        touched.add(word)
                    at = text.find(word, at + 1)
    batch = _batch_seconds(texts) if tool == "ours" else None
    found: Counter[str] = Counter()
    planted: Counter[str] = Counter()
    for sample in data["planted"]:
        planted[sample["kind"]] += 1
        spans = scan(sample["text"])
        if all(_covered(sample["text"], value, spans) for value in sample["values"]):
            found[sample["kind"]] += 1
    chars = sum(map(len, texts))
    return {
        "tool": tool, "every": every, "texts": len(texts), "chars": chars,
        "seconds": round(seconds, 3), "batchSeconds": batch,
        "MBps": round(chars / seconds / 1e6, 2), "flaggedTexts": len(flagged),
        "flaggedByKind": dict(by_kind.most_common()), "protectedTouched": sorted(touched)[:20],
        "protectedTouchedCount": len(touched),
        "recall": f"{sum(found.values())}/{sum(planted.values())}",
        "recallByKind": {kind: f"{found[kind]}/{n}" for kind, n in planted.items()},
        "examples": [text[max(0, s - 30): e + 30] for text, spans in flagged[:8]
                     for s, e, _ in spans[:1]],
    }


def _batch_seconds(texts: list[str]) -> float:
    """Ours as the index runs it: one :func:`redact_texts` call per 200 texts (a session)."""
    from fabric_memory.redact import redact_texts

    started = time.perf_counter()
    for at in range(0, len(texts), 200):
        redact_texts(texts[at : at + 200])
    return round(time.perf_counter() - started, 3)


def _covered(text: str, value: str, spans: list[Span]) -> bool:
    """Every occurrence of ``value`` in ``text`` lies inside the union of the spans."""
    mask = bytearray(len(text))
    for start, end, _ in spans:
        mask[start:end] = b"\x01" * (end - start)
    at = text.find(value)
    while at != -1:
        if not all(mask[at : at + len(value)]):
            return False
        at = text.find(value, at + 1)
    return True


def main(argv: list[str]) -> None:
    if len(argv) == 2 and argv[0] == "dump":
        dump(Path(argv[1]))
    elif len(argv) in (3, 4) and argv[0] == "score":
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        every = int(argv[3]) if len(argv) == 4 else 1
        print(json.dumps(score(Path(argv[1]), argv[2], every), indent=1, ensure_ascii=False))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
