"""Secrecy and containment: a private index, no way out of the sessions root, bounded regex
queries, and nothing the trace contract withholds ever becomes searchable."""

from __future__ import annotations

import os
import re
import stat
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from fabric_memory.certify.generate import CorpusManifest, generate_corpus
from fabric_memory.errors import ExpandError, QueryError
from fabric_memory.memory import index as index_module
from fabric_memory.memory.catalog import load_catalog
from fabric_memory.memory.expand import expand
from fabric_memory.memory.index import open_index
from fabric_memory.memory.recall import recall
from fabric_memory.memory.reindex import reindex

from .memory_builder import SessionBuilder


def _roots(tmp_path: Path) -> dict[str, Path]:
    return {"sessions": tmp_path / "sessions", "index": tmp_path / "index"}


def _session(root: Path, name: str, words: str) -> Path:
    builder = SessionBuilder(root / f"{name}.jsonl")
    builder.user(f"{name}: {words}")
    builder.user(f"{name} again")
    return builder.write()


def _modes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): stat.S_IMODE(p.stat().st_mode)
            for p in [root, *root.rglob("*")]}


# --- a private index ----------------------------------------------------------------------


def test_index_directories_are_0700_and_files_0600(tmp_path: Path) -> None:
    """Every directory of the index is 0700 and every file 0600, after the first run and after
    later runs whose merges wrote new segment files (whatever the umask)."""
    roots = _roots(tmp_path)
    old = os.umask(0o022)
    try:
        for n in range(3):
            _session(roots["sessions"] / "--repo--", f"s{n}", f"words {n}")
            reindex(**roots, workers=1)
            modes = _modes(roots["index"])
            files = {name for name in modes if (roots["index"] / name).is_file()}
            assert files and any(name.endswith(".store") for name in files)
            wrong = {name: oct(mode) for name, mode in modes.items()
                     if mode != (0o600 if name in files else 0o700)}
            assert wrong == {}, wrong
    finally:
        os.umask(old)


# --- containment ----------------------------------------------------------------------------


@pytest.fixture
def two_roots(tmp_path: Path) -> dict[str, Any]:
    """An indexed sessions root, and an indexed session outside it (same index)."""
    roots = _roots(tmp_path)
    inside = _session(roots["sessions"] / "--repo--", "inside", "visible words")
    outside = _session(tmp_path / "elsewhere" / "--repo--", "outside", "private words")
    reindex(sessions=tmp_path / "elsewhere", index=roots["index"], workers=1)
    reindex(**roots, workers=1)
    return {"roots": roots, "inside": inside, "outside": outside, "tmp": tmp_path}


def _not_found(session: str, roots: dict[str, Path]) -> ExpandError:
    with pytest.raises(ExpandError) as caught:
        expand(session, indices=[0], **roots)
    assert caught.value.code == "session_not_found", caught.value
    return caught.value


def test_expand_cannot_leave_the_sessions_root(two_roots: dict[str, Any]) -> None:
    """An indexed session outside the root is session_not_found by absolute path, by ../ path
    and by id; the session inside expands."""
    roots, inside, outside = two_roots["roots"], two_roots["inside"], two_roots["outside"]
    assert expand(str(inside), indices=[0], **roots)["entries"]
    relative = os.path.relpath(outside, roots["sessions"])
    assert relative.startswith("..")
    session_id = load_catalog(open_index(roots["index"])).by_path[str(outside)].session_id
    for name in (str(outside), relative, f"--repo--/../{relative}", session_id):
        error = _not_found(name, roots)
        assert "private words" not in error.message
    # Sabotage: the same request with the other root as the sessions root does reach it.
    elsewhere = {"sessions": two_roots["tmp"] / "elsewhere", "index": roots["index"]}
    assert expand(str(outside), indices=[0], **elsewhere)["entries"]


def test_symlink_pointing_out_is_neither_indexed_nor_expanded(tmp_path: Path) -> None:
    """A *.jsonl symlink (or a symlinked folder) inside the root that points outside it is not
    indexed, not recalled, and not expandable; one pointing inside still works."""
    roots = _roots(tmp_path)
    secret = _session(tmp_path / "private", "secret", "confidential words")
    inside = _session(roots["sessions"] / "--repo--", "inside", "visible words")
    (roots["sessions"] / "--repo--" / "link-out.jsonl").symlink_to(secret)
    (roots["sessions"] / "--linked-dir--").symlink_to(tmp_path / "private")
    (roots["sessions"] / "--repo--" / "link-in.jsonl").symlink_to(inside)
    report = reindex(**roots, workers=1)
    outside_reasons = [item for item in report["invalid"] if "outside" in item["reason"]]
    assert [Path(item["path"]).name for item in outside_reasons] == ["link-out.jsonl"]
    indexed = {Path(r.path).name for r in load_catalog(open_index(roots["index"])).records}
    assert indexed == {"inside.jsonl"}  # the link inside is the same file: one record
    assert recall("confidential", **roots)["total"] == 0
    _not_found(str(roots["sessions"] / "--repo--" / "link-out.jsonl"), roots)
    _not_found(str(secret), roots)
    assert expand(str(roots["sessions"] / "--repo--" / "link-in.jsonl"), indices=[0],
                  **roots)["entries"]


def test_session_replaced_by_a_symlink_out_is_not_refreshed(tmp_path: Path) -> None:
    """An indexed (hot) session replaced by a symlink pointing outside the root is neither
    re-read by a query's hot-tier refresh nor by reindex, nor expandable."""
    roots = _roots(tmp_path)
    secret = _session(tmp_path / "private", "secret", "confidential words")
    inside = _session(roots["sessions"] / "--repo--", "inside", "visible words")
    reindex(**roots, workers=1)
    inside.unlink()
    inside.symlink_to(secret)
    assert recall("confidential", hot_sessions=50, **roots)["total"] == 0
    assert recall("confidential", **roots)["total"] == 0
    reindex(**roots, workers=1)
    assert recall("confidential", **roots)["total"] == 0
    _not_found(str(inside), roots)


def test_recall_session_filter_cannot_leave_the_root(two_roots: dict[str, Any]) -> None:
    """recall --session naming a session outside the root is refused like an unknown one."""
    roots, outside = two_roots["roots"], two_roots["outside"]
    with pytest.raises(QueryError, match="no indexed session"):
        recall("words", session=str(outside), **roots)
    assert recall("words", session=str(two_roots["inside"]), **roots)["total"] >= 1


# --- regex bounds -------------------------------------------------------------------------------


def test_regex_length_is_capped(tmp_path: Path) -> None:
    """A regex longer than the cap is a QueryError naming the limit (nothing is compiled)."""
    roots = _roots(tmp_path)
    _session(roots["sessions"], "one", "alpha")
    reindex(**roots, workers=1)
    limit = index_module.MAX_REGEX_CHARS
    with pytest.raises(QueryError, match=f"limit is {limit}"):
        recall("a" * (limit + 1), mode="regex", **roots)
    assert recall("alph.", mode="regex", **roots)["total"] >= 1


EXPENSIVE_REGEX = r"(\w+\s?)*x"
"""Short, but Tantivy needs seconds to build its automaton (Unicode classes, nested stars)."""


def test_regex_time_is_capped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A short regex that is expensive to compile fails within the time cap with a QueryError
    saying how to simplify it; cheap regexes and the cap itself are unaffected."""
    roots = _roots(tmp_path)
    _session(roots["sessions"], "one", "alpha")
    reindex(**roots, workers=1)
    monkeypatch.setattr(index_module, "MAX_REGEX_SECONDS", 0.5)
    started = time.monotonic()
    with pytest.raises(QueryError) as caught:
        recall(EXPENSIVE_REGEX, mode="regex", **roots)
    assert time.monotonic() - started < 2.0
    shown = orjson.dumps(EXPENSIVE_REGEX).decode()
    assert "0.5s" in caught.value.message and shown in caught.value.message
    assert recall("alph[a-z]", mode="regex", **roots)["total"] >= 1
    with pytest.raises(QueryError, match="regex"):
        recall("(unclosed", mode="regex", **roots)


# --- nothing withheld by the trace contract becomes searchable ---------------------------------


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A seeded generated corpus (secrets planted in audits and outer output), indexed."""
    base = tmp_path_factory.mktemp("generated")
    manifest = generate_corpus(base / "sessions", sessions=40, seed=11)
    roots = {"sessions": base / "sessions", "index": base / "index"}
    reindex(**roots, workers=1)
    return {"manifest": manifest, "roots": roots}


_TOKEN = re.compile(r"[0-9a-f]{12}\Z")


def _unique_tokens(secret: str) -> list[str]:
    """The random part of a planted secret (``CERT_SECRET_<LABEL>_<12 hex>``)."""
    return [part for part in secret.split("_") if _TOKEN.match(part)]


def test_planted_secrets_are_never_recalled(generated: dict[str, Any]) -> None:
    """No planted secret (argument values projection drops: patterns, URLs, query strings,
    file contents, env, tasks, free-form queries) can be recalled, as a phrase or by its random
    part; a visible fact from the same corpus can (the check has teeth)."""
    manifest: CorpusManifest = generated["manifest"]
    roots = generated["roots"]
    secrets = manifest.secrets
    labels = {secret.split("_")[2] for secret in secrets if secret.startswith("CERT_SECRET_")}
    assert len(secrets) >= 40 and len(labels) >= 8, labels
    for secret in secrets:
        assert recall(secret, mode="phrase", **roots)["total"] == 0, secret
        for token in _unique_tokens(secret):
            assert recall(token, **roots)["total"] == 0, secret
    fact = manifest.rare_fact.ascii
    assert recall(fact, mode="phrase", **roots)["total"] >= 1


@pytest.mark.parametrize("where", ["FABRIC_MEMORY_HOME", "~/.cache"])
def test_the_engine_home_is_created_0700(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         where: str) -> None:
    """The home the engine creates for its index ($FABRIC_MEMORY_HOME, or ~/.cache/fabric-memory)
    is owner-only like the index inside it, whatever the umask."""
    sessions = tmp_path / "sessions"
    _session(sessions / "--repo--", "one", "words")
    if where == "FABRIC_MEMORY_HOME":
        home = tmp_path / "fm-home"
        monkeypatch.setenv("FABRIC_MEMORY_HOME", str(home))
        created = [home, home / "index"]
    else:
        monkeypatch.delenv("FABRIC_MEMORY_HOME", raising=False)
        monkeypatch.setenv("HOME", str(tmp_path / "user"))
        (tmp_path / "user").mkdir()
        cache = tmp_path / "user" / ".cache"
        created = [cache, cache / "fabric-memory", cache / "fabric-memory" / "index"]
    old = os.umask(0o022)
    try:
        reindex(sessions=sessions, workers=1)
    finally:
        os.umask(old)
    assert {str(p): oct(stat.S_IMODE(p.stat().st_mode)) for p in created} == {
        str(p): "0o700" for p in created}
