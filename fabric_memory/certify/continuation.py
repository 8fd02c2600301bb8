"""Continuation QA: task repositories, the ``CERT_TASK_V1`` payload, and the oracle.

Two small git repositories each hold a task whose exact result is known in advance.
The harness plants the task into a session as one user message line::

    CERT_TASK_V1 <base64url(orjson({"repo", "operations"})) without padding>.<xxh3_128 hex>

where the hex digest covers the decoded JSON bytes, so a truncated or altered
payload is rejected instead of half-applied. A handoff simulator recovers that
line through memory expansion, decodes it with :func:`decode_task` and applies it
with :func:`apply_task`; both raise :class:`TaskPayloadError` rather than guess.
An oracle script inside each repository, run as a separate process, scores the
result: the repository's own check command, exact expected files, byte-identical
forbidden files and no other change in the work tree.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypedDict

import orjson
import xxhash

from ..errors import CertificationError, TaskPayloadError

TASK_MARKER = "CERT_TASK_V1"
ORACLE_PATH = ".cert/oracle.py"
CHECK_PATH = "tests/check.py"

_TOKEN_CHARS = re.compile(r"[A-Za-z0-9_.\-]*")
_TOKEN = re.compile(r"(?P<body>[A-Za-z0-9_\-]+)\.(?P<digest>[0-9a-f]{32})")
_REPO_NAME = re.compile(r"[a-z0-9][a-z0-9\-]{0,63}")
# Fixed so that the fixture commits (and their ids) are the same on every run.
_GIT_DATE = "2026-01-01T00:00:00+00:00"


class WriteOperation(TypedDict):
    op: Literal["write"]
    path: str
    content: str


class ReplaceOperation(TypedDict):
    op: Literal["replace"]
    path: str
    old: str
    new: str


class DeleteOperation(TypedDict):
    op: Literal["delete"]
    path: str


TaskOperation = WriteOperation | ReplaceOperation | DeleteOperation


class CertTask(TypedDict):
    """The decoded ``CERT_TASK_V1`` payload."""

    repo: str
    operations: list[TaskOperation]


_OPERATION_KEYS: dict[str, frozenset[str]] = {
    "write": frozenset({"op", "path", "content"}),
    "replace": frozenset({"op", "path", "old", "new"}),
    "delete": frozenset({"op", "path"}),
}


# --- payload -------------------------------------------------------------------------


def encode_task(task: CertTask) -> str:
    """The ``CERT_TASK_V1 <payload>`` line for ``task`` (validated first)."""
    _validate_task(task, "encode_task")
    data = orjson.dumps(task)
    body = base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")
    return f"{TASK_MARKER} {body}.{xxhash.xxh3_128_hexdigest(data)}"


def task_message(task: CertTask) -> str:
    """The user-message text the harness appends to a session to plant ``task``."""
    return (
        f"Continuation task for repository {task['repo']}: apply these operations exactly.\n"
        f"{encode_task(task)}"
    )


def decode_task(text: str, *, where: str = "text") -> CertTask:
    """Find the one ``CERT_TASK_V1`` payload in ``text`` and decode it.

    ``text`` may be message text or a verbatim JSON session line (the payload
    alphabet is never escaped by JSON). ``where`` names the source in errors.
    Raises :class:`TaskPayloadError` when the payload is missing, ambiguous,
    truncated, fails its digest, or does not match the schema.
    """
    tokens: set[str] = set()
    start = text.find(TASK_MARKER)
    if start < 0:
        raise TaskPayloadError(
            f"{where}: no {TASK_MARKER} payload found; expand the task's source entry"
        )
    while start >= 0:
        rest = start + len(TASK_MARKER)
        if not text.startswith(" ", rest):
            raise TaskPayloadError(f"{where}: {TASK_MARKER} marker at char {start} has no payload")
        match = _TOKEN_CHARS.match(text, rest + 1)
        tokens.add(match.group(0) if match else "")
        start = text.find(TASK_MARKER, rest)
    if len(tokens) > 1:
        raise TaskPayloadError(
            f"{where}: {len(tokens)} different {TASK_MARKER} payloads; plant exactly one"
        )
    token = tokens.pop()
    parts = _TOKEN.fullmatch(token)
    if parts is None:
        raise TaskPayloadError(
            f"{where}: {TASK_MARKER} payload is malformed or truncated "
            f"(expected <base64url>.<32 hex digits>, got {len(token)} chars)"
        )
    body = parts["body"]
    try:
        data = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    except ValueError as exc:
        raise TaskPayloadError(f"{where}: {TASK_MARKER} payload is not base64url ({exc})") from None
    if xxhash.xxh3_128_hexdigest(data) != parts["digest"]:
        raise TaskPayloadError(
            f"{where}: {TASK_MARKER} payload digest mismatch; the payload was altered or truncated"
        )
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise TaskPayloadError(f"{where}: {TASK_MARKER} payload is not JSON ({exc})") from None
    return _validate_task(value, where)


def _validate_task(value: Any, where: str) -> CertTask:
    def fail(path: str, reason: str) -> TaskPayloadError:
        return TaskPayloadError(f"{where}: {TASK_MARKER} {path}: {reason}")

    if not isinstance(value, dict):
        raise fail("$", "must be an object {repo, operations}")
    if set(value) != {"repo", "operations"}:
        raise fail("$", f"keys must be exactly repo, operations (got {sorted(value)})")
    repo = value["repo"]
    if not isinstance(repo, str) or not _REPO_NAME.fullmatch(repo):
        raise fail("$.repo", f"must be a lowercase repository name (got {repo!r})")
    operations = value["operations"]
    if not isinstance(operations, list) or not operations:
        raise fail("$.operations", "must be a non-empty array")
    for index, operation in enumerate(operations):
        at = f"$.operations[{index}]"
        if not isinstance(operation, dict):
            raise fail(at, "must be an object")
        kind = operation.get("op")
        if not isinstance(kind, str) or kind not in _OPERATION_KEYS:
            raise fail(f"{at}.op", f"must be write, replace or delete (got {kind!r})")
        if set(operation) != _OPERATION_KEYS[kind]:
            wanted = ", ".join(sorted(_OPERATION_KEYS[kind]))
            raise fail(at, f"{kind} takes exactly {wanted} (got {sorted(operation)})")
        for key in sorted(_OPERATION_KEYS[kind] - {"op"}):
            if not isinstance(operation[key], str):
                raise fail(f"{at}.{key}", "must be a string")
        if not _is_repo_path(operation["path"]):
            raise fail(f"{at}.path", f"must be a relative path inside the repository "
                       f"(got {operation['path']!r})")
        if kind == "replace" and not operation["old"]:
            raise fail(f"{at}.old", "must not be empty")
    task: CertTask = value  # type: ignore[assignment]  # shape checked above
    return task


def _is_repo_path(path: str) -> bool:
    if not path or "\\" in path or "\0" in path or path.startswith("/"):
        return False
    parts = path.split("/")
    return all(part not in ("", ".", "..") for part in parts) and parts[0] != ".git"


def apply_task(task: CertTask, workspace: str | os.PathLike[str]) -> tuple[str, ...]:
    """Apply ``task`` to ``workspace/<repo>`` all-or-nothing; return the touched paths.

    Every operation is first applied in memory: a replace whose ``old`` text does
    not occur exactly once, a delete of a missing file, or a path leaving the
    repository raises :class:`TaskPayloadError` and leaves the files untouched.
    """
    _validate_task(task, "apply_task")
    repo = Path(workspace) / task["repo"]
    if not (repo / ".git").is_dir():
        raise TaskPayloadError(
            f"{repo}: repository {task['repo']!r} not found (no .git); create the fixtures first"
        )
    root = repo.resolve()
    staged: dict[str, str | None] = {}
    for index, operation in enumerate(task["operations"]):
        at = f"{repo}: operations[{index}] ({operation['op']} {operation['path']})"
        target = (root / operation["path"]).resolve()
        if not target.is_relative_to(root):
            raise TaskPayloadError(f"{at}: path resolves outside the repository")
        current = staged[operation["path"]] if operation["path"] in staged else _read(target, at)
        if operation["op"] == "write":
            staged[operation["path"]] = operation["content"]
        elif operation["op"] == "replace":
            if current is None:
                raise TaskPayloadError(f"{at}: file does not exist; nothing to replace")
            found = current.count(operation["old"])
            if found != 1:
                raise TaskPayloadError(
                    f"{at}: old text occurs {found} times, expected exactly once"
                )
            staged[operation["path"]] = current.replace(operation["old"], operation["new"])
        else:
            if current is None:
                raise TaskPayloadError(f"{at}: file does not exist; nothing to delete")
            staged[operation["path"]] = None
    for path, content in staged.items():
        target = root / path
        if content is None:
            target.unlink()
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content.encode("utf-8"))
    return tuple(staged)


def _read(target: Path, at: str) -> str | None:
    if not target.exists():
        return None
    if not target.is_file():
        raise TaskPayloadError(f"{at}: not a regular file")
    try:
        return target.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise TaskPayloadError(f"{at}: file is not UTF-8 text") from None


# --- fixtures ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FixtureSpec:
    """A task repository as data: its files, the task, and the exact final state."""

    name: str
    files: Mapping[str, str]
    task: CertTask
    expected: Mapping[str, str | None]
    """Exact final content per path; ``None`` means the file must be gone."""
    forbidden: tuple[str, ...]
    """Paths that must stay byte-identical to ``files``."""


@dataclass(frozen=True, slots=True)
class ContinuationFixture:
    """A created task repository."""

    spec: FixtureSpec
    repo: Path
    oracle: Path

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def task(self) -> CertTask:
        return self.spec.task


@dataclass(frozen=True, slots=True)
class OracleScore:
    """What the oracle process reported, and whether it passed."""

    fixture: str
    passed: bool
    process_status: int
    check_status: int | None
    exact_files: Mapping[str, bool]
    forbidden_intact: Mapping[str, bool]
    unexpected_changes: tuple[str, ...]
    report: Mapping[str, Any]
    """The oracle's JSON output as parsed (empty when it printed no JSON)."""


_LEDGER_CHECK = '''\
"""Exit 0 only when the ledger task is done."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from ledger.core import describe  # noqa: E402

assert describe([1, 2, 3]) == "total=6 (3 entries)", describe([1, 2, 3])
from ledger.currency import CURRENCY  # noqa: E402

assert CURRENCY == "CHF", CURRENCY
assert not os.path.exists(os.path.join(ROOT, "ledger", "obsolete.py")), "obsolete.py still there"
print("ledger ok")
'''

_ATLAS_CHECK = '''\
"""Exit 0 only when the atlas task is done."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "src"))

from atlas import routes  # noqa: E402

assert ("Genève", "Αθήνα") in routes(), routes()
assert ("Zürich", "東京") in routes(), routes()
with open(os.path.join(ROOT, "docs", "cities.md"), encoding="utf-8") as f:
    assert "- Αθήνα\\n" in f.read()
print("atlas ok")
'''

_ATLAS_SOURCE = '''\
"""Routes between cities, read from data/routes.csv."""
import csv
import os

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")


def routes():
    with open(os.path.join(DATA, "routes.csv"), encoding="utf-8", newline="") as f:
        return [(row["from"], row["to"]) for row in csv.DictReader(f)]
'''

_LEDGER_CORE = '''\
def total(entries):
    return sum(entries)


def describe(entries):
    return "total: " + str(total(entries))
'''

LEDGER = FixtureSpec(
    name="ledger",
    files={
        "README.md": "# ledger\n\nA tiny ledger used by continuation QA.\n",
        "LICENSE": "MIT License\n\nCopyright (c) 2026 fabric-memory certification\n",
        "ledger/__init__.py": "",
        "ledger/core.py": _LEDGER_CORE,
        "ledger/legacy_compat.py": "# Frozen: callers pin this module. Never modify.\n"
        "LEGACY_TOTAL = 'total: '\n",
        "ledger/obsolete.py": "raise ImportError('obsolete')\n",
        CHECK_PATH: _LEDGER_CHECK,
    },
    task={
        "repo": "ledger",
        "operations": [
            {
                "op": "replace",
                "path": "ledger/core.py",
                "old": '    return "total: " + str(total(entries))\n',
                "new": '    return f"total={total(entries)} ({len(entries)} entries)"\n',
            },
            {"op": "write", "path": "ledger/currency.py", "content": 'CURRENCY = "CHF"\n'},
            {"op": "delete", "path": "ledger/obsolete.py"},
        ],
    },
    expected={
        "ledger/core.py": "def total(entries):\n    return sum(entries)\n\n\n"
        'def describe(entries):\n    return f"total={total(entries)} ({len(entries)} entries)"\n',
        "ledger/currency.py": 'CURRENCY = "CHF"\n',
        "ledger/obsolete.py": None,
    },
    forbidden=("LICENSE", "README.md", "ledger/legacy_compat.py", CHECK_PATH),
)

ATLAS = FixtureSpec(
    name="atlas",
    files={
        "docs/cities.md": "# Städte\n\n- Zürich\n- 東京\n",
        "data/routes.csv": "from,to\nZürich,東京\n",
        "src/atlas.py": _ATLAS_SOURCE,
        "src/vendor/frozen.txt": "vendored — Ωmega build 7 ✓ do not touch\n",
        CHECK_PATH: _ATLAS_CHECK,
    },
    task={
        "repo": "atlas",
        "operations": [
            {
                "op": "replace",
                "path": "docs/cities.md",
                "old": "- 東京\n",
                "new": "- 東京\n- Αθήνα\n",
            },
            {
                "op": "write",
                "path": "data/routes.csv",
                "content": "from,to\nZürich,東京\nGenève,Αθήνα\n",
            },
        ],
    },
    expected={
        "docs/cities.md": "# Städte\n\n- Zürich\n- 東京\n- Αθήνα\n",
        "data/routes.csv": "from,to\nZürich,東京\nGenève,Αθήνα\n",
    },
    forbidden=("src/atlas.py", "src/vendor/frozen.txt", CHECK_PATH),
)

FIXTURES: tuple[FixtureSpec, ...] = (LEDGER, ATLAS)


def create_fixtures(
    workspace: str | os.PathLike[str], specs: tuple[FixtureSpec, ...] = FIXTURES
) -> tuple[ContinuationFixture, ...]:
    """Create each fixture as a committed git repository ``workspace/<name>``."""
    created: list[ContinuationFixture] = []
    for spec in specs:
        repo = Path(workspace) / spec.name
        if repo.exists():
            raise CertificationError(f"{repo}: already exists; use an empty workspace")
        for path, content in spec.files.items():
            target = repo / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content.encode("utf-8"))
        oracle = repo / ORACLE_PATH
        oracle.parent.mkdir(parents=True, exist_ok=True)
        oracle.write_bytes(_oracle_source(spec).encode("utf-8"))
        oracle.chmod(0o755)
        _git(repo, "init", "-q")
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", f"{spec.name}: task fixture")
        created.append(ContinuationFixture(spec=spec, repo=repo, oracle=oracle))
    return tuple(created)


def _git(repo: Path, *args: str) -> None:
    env = {
        **os.environ,
        "GIT_AUTHOR_DATE": _GIT_DATE,
        "GIT_COMMITTER_DATE": _GIT_DATE,
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    command = [
        "git",
        "-c", "init.defaultBranch=main",
        "-c", "user.name=fabric-memory certify",
        "-c", "user.email=certify@fabric-memory.invalid",
        "-c", "commit.gpgsign=false",
        "-c", "core.hooksPath=/dev/null",
        *args,
    ]
    try:
        done = subprocess.run(command, cwd=repo, env=env, capture_output=True, check=False)
    except OSError as exc:
        raise CertificationError(f"{repo}: cannot run git ({exc}); install git") from None
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise CertificationError(
            f"{repo}: git {args[0]} failed ({message[-1] if message else done.returncode})"
        )


def run_oracle(fixture: ContinuationFixture, *, timeout: float = 60.0) -> OracleScore:
    """Run the fixture's oracle as a separate process and read its JSON score."""
    try:
        done = subprocess.run(
            [sys.executable, "-B", str(fixture.oracle)],
            cwd=fixture.repo,
            capture_output=True,
            timeout=timeout,
            check=False,
            env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CertificationError(f"{fixture.oracle}: oracle did not run ({exc})") from None
    try:
        report = orjson.loads(done.stdout)
    except orjson.JSONDecodeError:
        report = None
    if not isinstance(report, dict):
        return OracleScore(fixture.name, False, done.returncode, None, {}, {}, (), {})
    check = report.get("exitStatus")
    return OracleScore(
        fixture=fixture.name,
        passed=done.returncode == 0 and report.get("passed") is True,
        process_status=done.returncode,
        check_status=check if isinstance(check, int) else None,
        exact_files=dict(report.get("exactFiles") or {}),
        forbidden_intact=dict(report.get("forbiddenIntact") or {}),
        unexpected_changes=tuple(report.get("unexpectedChanges") or ()),
        report=report,
    )


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _oracle_source(spec: FixtureSpec) -> str:
    # The oracle holds digests, never contents, so it cannot hand the task to anyone.
    rules = {
        "fixture": spec.name,
        "check": CHECK_PATH,
        "expected": {path: None if text is None else _sha256(text)
                     for path, text in spec.expected.items()},
        "forbidden": {path: _sha256(spec.files[path]) for path in spec.forbidden},
    }
    return _ORACLE_TEMPLATE.replace("@RULES@", repr(orjson.dumps(rules).decode("utf-8")))


# The oracle runs in its own process with only the standard library, so it judges
# the repository without depending on the package under test.
_ORACLE_TEMPLATE = '''\
#!/usr/bin/env python3
"""Continuation QA oracle: exit 0 only when the repository is exactly in its final state."""
import hashlib
import json
import os
import subprocess
import sys

RULES = json.loads(@RULES@)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def digest(path):
    full = os.path.join(ROOT, path)
    if not os.path.isfile(full):
        return None
    with open(full, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def changed_paths():
    done = subprocess.run(
        ["git", "status", "--porcelain=v1", "-z", "--untracked-files=all"],
        cwd=ROOT, capture_output=True, check=False,
    )
    if done.returncode != 0:
        return None
    paths = []
    records = done.stdout.decode("utf-8", "replace").split("\\0")
    index = 0
    while index < len(records):
        record = records[index]
        index += 1
        if not record:
            continue
        paths.append(record[3:])
        if record[0] in "RC":
            index += 1
    return paths


check = subprocess.run(
    [sys.executable, "-B", RULES["check"]], cwd=ROOT, capture_output=True, check=False,
    env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"),
)
exact = {path: digest(path) == want for path, want in RULES["expected"].items()}
intact = {path: digest(path) == want for path, want in RULES["forbidden"].items()}
changed = changed_paths()
unexpected = ["<git status failed>"] if changed is None else sorted(
    path for path in changed if path not in RULES["expected"]
)
passed = check.returncode == 0 and all(exact.values()) and all(intact.values()) and not unexpected
print(json.dumps({
    "fixture": RULES["fixture"],
    "exitStatus": check.returncode,
    "exactFiles": exact,
    "forbiddenIntact": intact,
    "unexpectedChanges": unexpected,
    "passed": passed,
}, ensure_ascii=False, sort_keys=True))
sys.exit(0 if passed else 1)
'''
