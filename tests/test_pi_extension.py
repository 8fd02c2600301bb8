"""The Python side of the Pi integration, without Pi: ``pi path``, ``pi install``, the
memory tools the extension calls, ``reindex --session`` and the sessions root defaults.
(tests/test_pi_host.py proves the same pieces inside the real Pi.)"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import orjson
import pytest

import fabric_memory.pi
from fabric_memory.cli import main
from fabric_memory.errors import LocationRefusedError, UsageError
from fabric_memory.memory.catalog import list_sessions
from fabric_memory.memory.locations import sessions_roots
from fabric_memory.memory.recall import recall_request
from fabric_memory.memory.reindex import reindex
from fabric_memory.memory.render import render_recall
from fabric_memory.pi import EXTENSION_DIR, EXTENSION_ENTRY
from fabric_memory.pi.install import install
from fabric_memory.pi.tools import call_tool

from .memory_builder import SessionBuilder
from .reliability import AS_NOBODY, readable_to_nobody

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No location variables from the caller's environment; HOME is a temporary folder."""
    for name in ("FABRIC_MEMORY_SESSIONS", "FABRIC_MEMORY_HOME", "PI_CODING_AGENT_DIR",
                 "PI_CODING_AGENT_SESSION_DIR", "PI_CONFIG_DIR"):
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


# --- pi path --------------------------------------------------------------------------------


def test_path_prints_the_entry_file_of_a_pi_package(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run_cli(capsys, "pi", "path")
    assert status == 0
    assert Path(out.strip()) == EXTENSION_ENTRY
    assert EXTENSION_ENTRY.is_absolute() and EXTENSION_ENTRY.is_file()
    manifest = json.loads((EXTENSION_DIR / "package.json").read_text())
    assert manifest["pi"]["extensions"] == ["./index.ts"]
    # Pi provides these to extensions; a copy in dependencies would bypass its module map.
    assert "dependencies" not in manifest
    assert set(manifest["peerDependencies"]) == {
        "@earendil-works/pi-ai", "@earendil-works/pi-coding-agent", "typebox"}


def test_a_built_wheel_carries_the_extension(tmp_path: Path) -> None:
    """What a normal (non-editable) install gets: the package data is in the wheel (built
    from a copy of the sources, so the build leaves nothing in the checkout)."""
    source = tmp_path / "source"
    shutil.copytree(REPO / "fabric_memory", source / "fabric_memory",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path),
         str(source)], capture_output=True, text=True, check=False)
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("fabric_memory-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"fabric_memory/pi/extension/index.ts",
            "fabric_memory/pi/extension/package.json"} <= names


# --- pi install -----------------------------------------------------------------------------


def test_install_is_idempotent_and_uninstall_undoes_exactly_it(
    clean_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = clean_env / ".pi" / "agent"
    settings = agent / "settings.json"
    agent.mkdir(parents=True)
    before = {"defaultModel": "x", "packages": ["npm:@example/tools@1.0.0"],
              "compaction": {"keepRecentTokens": 123}}
    settings.write_text(json.dumps(before, indent=2))

    status, out, _ = run_cli(capsys, "pi", "install")
    assert status == 0
    assert out.strip() == f"added {EXTENSION_DIR} to packages in {settings}"
    written = json.loads(settings.read_text())
    assert written == {**before, "packages": [*before["packages"], str(EXTENSION_DIR)]}

    status, out, _ = run_cli(capsys, "pi", "install")
    assert status == 0 and out.startswith("already in packages")
    assert json.loads(settings.read_text()) == written

    status, out, _ = run_cli(capsys, "pi", "install", "--uninstall")
    assert status == 0 and out.startswith(f"removed {EXTENSION_DIR}")
    assert json.loads(settings.read_text()) == before
    status, out, _ = run_cli(capsys, "pi", "install", "--uninstall", "--json")
    assert status == 0 and json.loads(out)["action"] == "absent"
    assert json.loads(settings.read_text()) == before


def test_install_creates_the_settings_file_and_uninstall_removes_it(
    tmp_path: Path, clean_env: Path
) -> None:
    agent = tmp_path / "agent"
    report = install(agent)
    assert report["action"] == "added"
    assert json.loads((agent / "settings.json").read_text()) == {"packages": [str(EXTENSION_DIR)]}
    report = install(agent, uninstall=True)
    assert report == {"settings": str(agent / "settings.json"), "package": str(EXTENSION_DIR),
                      "action": "removed", "settingsRemoved": True}
    assert not (agent / "settings.json").exists()


def test_install_follows_pi_agent_dir_and_local(
    tmp_path: Path, clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "custom-agent"))
    assert install()["settings"] == str(tmp_path / "custom-agent" / "settings.json")
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    assert install(local=True)["settings"] == str(project / ".pi" / "settings.json")
    with pytest.raises(UsageError, match="--local and --agent-dir"):
        install(tmp_path, local=True)


def test_install_recognises_the_entry_pi_install_writes(tmp_path: Path, clean_env: Path) -> None:
    """``pi install PATH`` records the path relative to the settings file."""
    agent = tmp_path / "agent"
    agent.mkdir()
    source = os.path.relpath(EXTENSION_DIR, agent)
    assert source.startswith("..")
    (agent / "settings.json").write_text(json.dumps({"packages": [{"source": source}]}))
    assert install(agent)["action"] == "unchanged"
    assert install(agent, uninstall=True)["action"] == "removed"


def test_install_leaves_a_broken_settings_file_alone(
    tmp_path: Path, clean_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text('{\n  "packages": [\n')
    status, _, err = run_cli(capsys, "pi", "install", "--agent-dir", str(tmp_path))
    assert status != 0
    assert err.strip().startswith(f"fabric-memory pi: {settings}:3: not valid JSON")
    assert settings.read_text() == '{\n  "packages": [\n'
    settings.write_text('{"packages": "npm:x"}')
    with pytest.raises(UsageError, match=r"\$\.packages is not a list"):
        install(tmp_path)


def test_install_writes_through_a_symlinked_settings_file(tmp_path: Path, clean_env: Path
                                                          ) -> None:
    """A settings.json that is a symlink (dotfiles) stays a symlink: the file it leads to is
    the one rewritten, and uninstall leaves the link in place."""
    agent = tmp_path / "agent"
    agent.mkdir()
    dotfiles = tmp_path / "dotfiles" / "pi-settings.json"
    dotfiles.parent.mkdir()
    dotfiles.write_text('{"theme": "dark"}')
    (agent / "settings.json").symlink_to(dotfiles)
    assert install(agent)["action"] == "added"
    assert (agent / "settings.json").is_symlink()
    assert json.loads(dotfiles.read_text()) == {"theme": "dark", "packages": [str(EXTENSION_DIR)]}
    assert install(agent, uninstall=True)["action"] == "removed"
    assert (agent / "settings.json").is_symlink()
    assert json.loads(dotfiles.read_text()) == {"theme": "dark"}


@pytest.mark.parametrize(("content", "line", "reason"), [
    (b'{\n  "theme": "dark",\n  "name": "caf\xe9"\n}', 3, "not valid UTF-8"),
    (b'{\n  "name": "\\ud800 alone"\n}', 2, "lone surrogate"),
    (b'{\n  "theme": "dark",\n\n  "limit": 1e400\n}', 4, "1e400"),
    (b'{\n  "limit": NaN\n}', 2, "NaN"),
    (b'{\n  "limit": -Infinity\n}', 2, "-Infinity"),
], ids=["invalid-utf8", "lone-surrogate", "1e400", "NaN", "-Infinity"])
def test_install_refuses_settings_it_cannot_write_back_as_they_are(
    tmp_path: Path, clean_env: Path, capsys: pytest.CaptureFixture[str], content: bytes,
    line: int, reason: str,
) -> None:
    """Settings that are not UTF-8, hold a lone surrogate, or a number JSON cannot carry
    (written back it would be Infinity or NaN, which Pi cannot read) are refused with
    path:line and left byte for byte as they were."""
    settings = tmp_path / "settings.json"
    settings.write_bytes(content)
    status, _, err = run_cli(capsys, "pi", "install", "--agent-dir", str(tmp_path))
    assert status == 2, err
    assert err.startswith(f"fabric-memory pi: {settings}:{line}: ") and reason in err, err
    assert "Traceback" not in err and err.count("\n") == 1
    assert settings.read_bytes() == content


def test_install_respects_a_read_only_settings_file(tmp_path: Path, clean_env: Path) -> None:
    """A read-only settings.json is refused with the reason and left as it was."""
    settings = tmp_path / "settings.json"
    settings.write_text('{"theme": "dark"}')
    settings.chmod(0o444)
    with pytest.raises(UsageError, match=rf"^{re.escape(str(settings))}: read-only"):
        install(tmp_path)
    assert settings.read_text() == '{"theme": "dark"}'


def test_install_in_a_read_only_folder_is_one_line(tmp_path: Path, clean_env: Path) -> None:
    """An agent folder install may not write is refused in one line naming it, with no
    traceback, and its settings are left as they were."""
    agent = tmp_path / "agent"
    agent.mkdir()
    settings = agent / "settings.json"
    settings.write_text('{"theme": "dark"}')
    settings.chmod(0o666)
    agent.chmod(0o555)
    command = ["pi", "install", "--agent-dir", str(agent)]
    if os.geteuid() == 0:  # root writes anywhere: install as nobody instead
        readable_to_nobody(tmp_path)
        argv = [sys.executable, "-c", AS_NOBODY, *command]
    else:
        argv = [sys.executable, "-m", "fabric_memory.cli", *command]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"fabric-memory pi: {agent}") and "Permission denied" in \
        done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert settings.read_text() == '{"theme": "dark"}'


INSTALL_ONE = """
import sys
from pathlib import Path
from fabric_memory.pi.install import install
install(sys.argv[1], package=Path(sys.argv[2]))
"""


def test_install_takes_pis_settings_lock(tmp_path: Path, clean_env: Path) -> None:
    """Writers never lose each other's updates: eight installs at once each add their entry,
    and an install waits while Pi holds its settings lock (proper-lockfile's
    settings.json.lock folder), then keeps what Pi wrote meanwhile."""
    agent = tmp_path / "agent"
    agent.mkdir()
    settings = agent / "settings.json"
    settings.write_text("{}")
    packages = [tmp_path / f"package-{n}" for n in range(8)]
    writers = [subprocess.Popen([sys.executable, "-c", INSTALL_ONE, str(agent), str(package)])
               for package in packages]
    assert [writer.wait(timeout=60) for writer in writers] == [0] * 8
    assert sorted(json.loads(settings.read_text())["packages"]) == sorted(map(str, packages))
    lock = agent / "settings.json.lock"
    lock.mkdir()  # Pi is writing
    waiting = subprocess.Popen([sys.executable, "-c", INSTALL_ONE, str(agent),
                                str(EXTENSION_DIR)])
    time.sleep(1.0)
    assert waiting.poll() is None, "install did not wait for Pi's lock"
    settings.write_text(json.dumps({"theme": "dark", "packages": []}))
    lock.rmdir()
    assert waiting.wait(timeout=60) == 0
    assert json.loads(settings.read_text()) == {"theme": "dark",
                                                "packages": [str(EXTENSION_DIR)]}


# --- the memory tools -----------------------------------------------------------------------


@pytest.fixture
def memory(tmp_path: Path, clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Two sessions under the configured root, indexed into the configured index."""
    root = tmp_path / "sessions"
    first = SessionBuilder(root / "--repo--" / "one.jsonl", "session-one")
    first.user("the flaky parser test needs a fixed seed")
    first.write()
    second = SessionBuilder(root / "--repo--" / "two.jsonl", "session-two")
    second.user("unrelated chatter")
    second.write()
    monkeypatch.setenv("FABRIC_MEMORY_SESSIONS", str(root))
    monkeypatch.setenv("FABRIC_MEMORY_HOME", str(tmp_path / "fm"))
    reindex()
    return root


def test_recall_tool_answers_as_recall_and_its_follow_expands(memory: Path) -> None:
    """memory_recall's details are recall's answer and its text what the CLI prints with
    memory_expand calls; a hit's follow, and the call its text prints, expand it."""
    called = call_tool("memory_recall", {"query": "flaky parser"})
    answer = called["details"]
    assert answer == recall_request({"query": "flaky parser"})
    assert called["text"] == render_recall(answer, "pi")
    (hit,) = answer["hits"]
    assert hit["sessionId"] == "session-one"
    page = call_tool("memory_expand", hit["follow"])["details"]
    assert "flaky parser test" in page["entries"][0]["text"]
    (printed,) = re.findall(r"^  expand: memory_expand (\{.*\})$", called["text"], re.MULTILINE)
    assert call_tool("memory_expand", orjson.loads(printed))["details"] == page


def test_tools_answer_over_a_sharded_index(
    memory: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the configured index a sharded one, the tools answer as recall does, a follow
    expands, and the extension's one-session reindex (after a compaction) reaches recall."""
    monkeypatch.setenv("FABRIC_MEMORY_HOME", str(tmp_path / "sharded-home"))
    assert reindex(sharded=True, shard_bytes=1, workers=1)["shards"]["total"] == 2
    answer = call_tool("memory_recall", {"query": "flaky parser"})["details"]
    assert answer == recall_request({"query": "flaky parser"})
    page = call_tool("memory_expand", answer["hits"][0]["follow"])["details"]
    assert "flaky parser test" in page["entries"][0]["text"]
    third = SessionBuilder(memory / "--repo--" / "three.jsonl", "session-three")
    third.user("a brand new zeppelin")
    third.write()
    assert reindex(session=third.path)["indexed"] == 1
    assert [h["sessionId"] for h in call_tool("memory_recall", {"query": "zeppelin"})[
        "details"]["hits"]] == ["session-three"]


def test_expand_tool_masks_secrets_unless_asked(memory: Path) -> None:
    """memory_expand masks a secret by default; showSecrets: true returns it raw; the
    extension's parameter schema offers showSecrets."""
    token = "glpat-" + "Ab3dE5gH7jK9mN1pQ3sT"
    leaky = SessionBuilder(memory / "--repo--" / "three.jsonl", "session-three")
    leaky.user(f"my token is {token}")
    leaky.write()
    reindex()
    request = {"session": "session-three", "entries": ["e001"]}
    masked = call_tool("memory_expand", request)["details"]["entries"][0]["text"]
    assert token not in masked and "[REDACTED:gitlab-token]" in masked
    assert token in call_tool("memory_expand", {**request, "showSecrets": True})["details"][
        "entries"][0]["text"]
    source = (Path(fabric_memory.pi.__file__).parent / "extension" / "index.ts").read_text()
    assert "showSecrets: Type.Optional(" in source


def test_expand_tool_reads_text_and_raw_lines(memory: Path) -> None:
    """memory_expand answers with readable text by default and the verbatim line with raw;
    the extension's schema offers raw, positions and address ranges, and its descriptions
    teach plain-word questions and a summary's addresses."""
    request = {"session": "session-one", "entries": ["e001"]}
    text = call_tool("memory_expand", request)["details"]["entries"][0]["text"]
    raw = call_tool("memory_expand", {**request, "raw": True})["details"]["entries"][0]["text"]
    line = (memory / "--repo--" / "one.jsonl").read_bytes().split(b"\n")[1]
    assert raw.encode() == line
    assert text.startswith("e001 user ") and '"type"' not in text
    source = (Path(fabric_memory.pi.__file__).parent / "extension" / "index.ts").read_text()
    for offered in ("raw: Type.Optional(", "positions: optionalText(", "range: optionalText(",
                    "Ask in plain words", 'range: \\"L12:L31\\" for [L12 ... L31]'):
        assert offered in source, offered


@pytest.mark.parametrize("key", ["index", "sessions", "hotSessions"])
@pytest.mark.parametrize("tool", ["memory_recall", "memory_expand"])
def test_tools_refuse_location_keys(memory: Path, tool: str, key: str) -> None:
    request = {"query": "flaky"} if tool == "memory_recall" else {
        "session": "session-one", "entries": ["e001"]}
    with pytest.raises(LocationRefusedError, match=f"{key} may not be set by a tool call"):
        call_tool(tool, {**request, key: "/"})


def test_tool_command_speaks_json_on_both_paths(
    memory: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def tool(name: str, stdin: bytes) -> tuple[int, dict[str, object]]:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        status, out, _ = run_cli(capsys, "pi", "tool", name)
        return status, json.loads(out)

    status, answer = tool("memory_recall", b'{"query": "flaky"}')
    assert status == 0 and answer["details"]["total"] == 1  # type: ignore[index]
    assert str(answer["text"]).startswith("1 hits, showing 1-1\n")
    status, answer = tool("memory_expand", b'{"session": "nope", "entries": ["e001"]}')
    assert status != 0 and answer["error"]["code"] == "session_not_found"  # type: ignore[index]
    status, answer = tool("memory_recall", b"[1]")
    assert status == 2 and "must be a JSON object" in answer["error"]["message"]  # type: ignore[index]
    status, answer = tool("memory_recall", b"not json")
    assert status == 2 and answer["error"]["code"] == "usage"  # type: ignore[index]
    status, answer = tool("memory_forget", b"{}")
    assert status == 2 and "no such tool" in answer["error"]["message"]  # type: ignore[index]


@pytest.mark.parametrize(("stdin", "wrong"), [
    (b'{"query": "flaky"', "stdin is not a JSON object of arguments: Expecting ',' delimiter "
                           "at the end of the text"),
    (b'{"query": "\\udc80"}', "$.query holds a lone surrogate"),
    (b'{"query": "ok", "filters": {"a b": ["\\ud800"]}}',
     '$.filters["a b"][0] holds a lone surrogate'),
    (b'{"query": "' + b"flaky " * 3_000_000 + b'"}', "the arguments are over 16,777,216 bytes"),
    (b'[{"query": "flaky"}]', "the arguments must be a JSON object"),
    (b"", "Expecting value at the end of the text"),
    (b"[" * 100_000, "nested too deeply"),
], ids=["truncated", "lone-surrogate", "lone-surrogate-deep", "18MB", "batch", "empty",
        "deep"])
def test_tool_answers_bad_json_with_one_located_error(
    memory: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    stdin: bytes, wrong: str,
) -> None:
    """`pi tool` answers stdin that is not one JSON object of Unicode text (truncated, a lone
    surrogate, too long, an array, empty, nested too deeply) with exactly one JSON usage
    error saying where, and one stderr line."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    status, out, err = run_cli(capsys, "pi", "tool", "memory_recall")
    error = json.loads(out)["error"]  # one JSON document: json.loads refuses anything after
    assert (status, error["code"]) == (2, "usage"), out
    assert wrong in error["message"] and len(error["message"]) < 300, error["message"]
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize(("name", "arguments", "wrong"), [
    ("memory_recall", {"query": 123}, "$.query: expected a string, got 123"),
    ("memory_recall", {"query": "flaky", "limit": "5"}, '$.limit: expected an integer, got "5"'),
    ("memory_expand", {"session": "session-one", "entries": ["e001"], "showSecrets": "false"},
     '$.showSecrets: expected true or false, got "false"'),
    ("memory_expand", {"session": "a/" * 1_000_000, "entries": ["e001"]},
     "characters): too long; the limit is 4096 characters"),
], ids=["query-number", "limit-string", "showSecrets-string", "session-2MB"])
def test_tool_arguments_are_type_checked(
    memory: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    name: str, arguments: dict[str, object], wrong: str,
) -> None:
    """`pi tool` refuses an argument of the wrong JSON type (a string "false" for a boolean
    included, which never shows a secret) or a 2 MB session at once, with the CLI's JSON usage
    error naming the argument."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(json.dumps(arguments).encode())))
    status, out, err = run_cli(capsys, "pi", "tool", name)
    error = json.loads(out)["error"]
    assert (status, error["code"]) == (2, "usage"), out
    assert wrong in error["message"] and len(error["message"]) < 300
    assert "Traceback" not in err


# --- reindex --session ----------------------------------------------------------------------


def test_reindex_one_session_indexes_only_that_file(memory: Path, tmp_path: Path) -> None:
    third = SessionBuilder(memory / "--repo--" / "three.jsonl", "session-three")
    third.user("a brand new zeppelin")
    third.write()
    fourth = SessionBuilder(memory / "--repo--" / "four.jsonl", "session-four")
    fourth.user("another zeppelin")
    fourth.write()
    # Spelled through "..": still the record a full walk makes, not a second one.
    spelled = memory / "--repo--" / ".." / "--repo--" / "three.jsonl"
    report = reindex(session=spelled)
    assert (report["sessions"], report["indexed"]) == (1, 1)
    ids = sorted(s["sessionId"] for s in list_sessions()["sessions"])
    assert ids == ["session-one", "session-three", "session-two"]
    assert reindex()["indexed"] == 1  # only four was left
    assert len(list_sessions()["sessions"]) == 4


def test_reindex_one_session_refuses_files_outside_the_root(memory: Path, tmp_path: Path) -> None:
    elsewhere = SessionBuilder(tmp_path / "elsewhere.jsonl").write()
    with pytest.raises(UsageError, match="not under the sessions root"):
        reindex(session=elsewhere)
    with pytest.raises(UsageError, match="no such session file"):
        reindex(session=memory / "missing.jsonl")


# --- where sessions are by default ----------------------------------------------------------


def test_sessions_root_follows_pi(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert sessions_roots() == (clean_env / ".pi" / "agent" / "sessions",)
    monkeypatch.setenv("PI_CODING_AGENT_DIR", "/agent")
    assert sessions_roots() == (Path("/agent/sessions"),)
    monkeypatch.setenv("PI_CODING_AGENT_SESSION_DIR", "/pi-sessions")
    assert sessions_roots() == (Path("/pi-sessions"),)
    monkeypatch.setenv("FABRIC_MEMORY_SESSIONS", "/ours")
    assert sessions_roots() == (Path("/ours"),)
    assert sessions_roots("/explicit") == (Path("/explicit"),)


# --- the tie to Pi ---------------------------------------------------------------------------


def test_missing_pi_fails_under_ci_and_skips_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tests/test_pi_host.py cannot pass in CI without running Pi: a missing install is a
    failure under ``CI=true`` and a skip (saying how to install it) otherwise."""
    from tests import pi_host

    monkeypatch.setattr(pi_host, "NODE", tmp_path / "no-node")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="npm ci"):
        pi_host.pi_host()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="npm ci"):
        pi_host.pi_host()
