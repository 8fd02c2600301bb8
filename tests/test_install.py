"""``fabric-memory install claude|codex|pi``: each host's own files gain the MCP server and
the handoff hooks, SessionStart(compact) and UserPromptSubmit (Codex: trusted as Codex
computes it), a second
install changes nothing, ``--uninstall`` gives the files back byte for byte, and files
the installer cannot read are refused with ``path:line`` and left alone."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

import pytest
import tomlkit

from fabric_memory.cli import main
from fabric_memory.errors import UsageError
from fabric_memory.install.claude import install_claude
from fabric_memory.install.codex import install_codex, trust_hash
from fabric_memory.install.command import executable, is_hook_command
from fabric_memory.install.hooks import PROMPT

from .agent_homes import fake_home
from .host_clis import codex_hooks, host_env

PROGRAM = Path("/opt/fm env/bin/fabric-memory")
"""A program path with a space: the hook command must quote it."""
HOOK = "'/opt/fm env/bin/fabric-memory' handoff"


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """HOME is a temporary folder; no host location variable is set."""
    return fake_home(tmp_path, monkeypatch)


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.parametrize(("host", "where", "content", "line", "reason"), [
    ("claude", ".claude/settings.json", '{\n  "model": "opus",\n  "hooks": {\n}\n', 5,
     "not valid JSON"),
    ("claude", ".claude.json", '{\n  "limit": NaN\n}', 2, "NaN"),
    ("codex", ".codex/config.toml", 'model = "o3"\n\n[mcp_servers.x]\ncommand = \n', 4,
     "not valid TOML"),
], ids=["claude-settings", "claude-json-nan", "codex-toml"])
def test_a_file_it_cannot_read_back_is_refused_with_its_line(
    home: Path, capsys: pytest.CaptureFixture[str], host: str, where: str, content: str,
    line: int, reason: str,
) -> None:
    """A host file that is not valid JSON or TOML (or holds a number JSON cannot carry) is
    refused with path:line in one line, and left byte for byte as it was."""
    path = home / where
    path.parent.mkdir(exist_ok=True)
    path.write_text(content)
    status, _, err = run_cli(capsys, "install", host)
    assert status == 2
    assert err.startswith(f"fabric-memory install: {path}:{line}: ") and reason in err, err
    assert err.count("\n") == 1 and path.read_text() == content


def actions(report: dict[str, object]) -> list[str]:
    return [change["action"] for change in report["changes"]]  # type: ignore[attr-defined]


# --- the command -----------------------------------------------------------------------


def test_the_executable_is_the_installed_script_by_absolute_path() -> None:
    """The program a host runs is this environment's fabric-memory script, absolute."""
    program = executable()
    assert program.is_absolute() and program.name == "fabric-memory"
    assert os.access(program, os.X_OK)


@pytest.mark.parametrize(("command", "ours"), [
    ("/a/b/fabric-memory handoff", True), ("'/a b/fabric-memory' handoff", True),
    ("fabric-memory handoff", True), ("/a/fabric-memory serve", False),
    ("/a/fabric-memory handoff --x", False), ("echo fabric-memory handoff", False),
    ("'unclosed handoff", False), (None, False),
])
def test_our_hook_is_recognised_by_its_command(command: str | None, ours: bool) -> None:
    """Any install's hook (any path) is ours; other commands are not."""
    assert is_hook_command(command) is ours


# --- Claude Code -----------------------------------------------------------------------


def test_claude_fresh_install_writes_both_files(home: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """A fresh install adds the user-scope MCP server to ~/.claude.json and the hook to
    ~/.claude/settings.json, and prints each change."""
    status, out, _ = run_cli(capsys, "install", "claude")
    assert status == 0
    program = executable()
    servers = json.loads((home / ".claude.json").read_text())
    assert servers == {"mcpServers": {"fabric-memory": {
        "type": "stdio", "command": str(program), "args": ["serve"], "env": {}}}}
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    handler = {"type": "command", "command": f"{program} handoff", "timeout": 10}
    assert settings == {"hooks": {"SessionStart": [{"matcher": "compact", "hooks": [handler]}],
                                  "UserPromptSubmit": [{"hooks": [handler]}]}}
    assert out.splitlines() == [
        f"added MCP server fabric-memory to {home / '.claude.json'}: {program} serve",
        f"added SessionStart(compact) hook to {home / '.claude' / 'settings.json'}: "
        f"{program} handoff",
        f"added UserPromptSubmit hook to {home / '.claude' / 'settings.json'}: "
        f"{program} handoff",
        "Claude Code reads these when a session starts: start a new session (or restart "
        "it) for the change to take effect"]
    status, out, _ = run_cli(capsys, "install", "claude")
    assert status == 0 and out.startswith("already in ") and "restart" not in out


CLAUDE_JSON = """{
  "numStartups": 3,
  "mcpServers": {
    "github": {
      "type": "stdio",
      "command": "npx",
      "args": [
        "-y",
        "@modelcontextprotocol/server-github"
      ],
      "env": {}
    }
  },
  "projects": {
    "/home/me/app": {
      "allowedTools": []
    }
  }
}"""
SETTINGS_JSON = """{
    "model": "opus",
    "hooks": {
        "SessionStart": [
            {
                "matcher": "startup",
                "hooks": [
                    {
                        "type": "command",
                        "command": "echo hello"
                    }
                ]
            }
        ],
        "PreToolUse": [
            {
                "matcher": "Bash",
                "hooks": [
                    {
                        "type": "command",
                        "command": "/usr/local/bin/guard"
                    }
                ]
            }
        ]
    },
    "permissions": {
        "allow": [
            "Bash(npm test:*)"
        ]
    }
}
"""


def test_claude_keeps_other_tools_and_uninstall_gives_the_files_back(home: Path) -> None:
    """Beside other tools' MCP servers and hooks (and another indent), install adds ours,
    a second install writes nothing, and --uninstall leaves both files byte-identical."""
    servers, settings = home / ".claude.json", home / ".claude" / "settings.json"
    settings.parent.mkdir()
    servers.write_text(CLAUDE_JSON)
    settings.write_text(SETTINGS_JSON)
    assert actions(install_claude(program=PROGRAM)) == ["added"] * 3
    data = json.loads(settings.read_text())
    assert data["hooks"]["SessionStart"][0]["matcher"] == "startup"
    assert data["hooks"]["SessionStart"][1]["hooks"][0]["command"] == HOOK
    assert data["hooks"]["PreToolUse"] == json.loads(SETTINGS_JSON)["hooks"]["PreToolUse"]
    assert set(json.loads(servers.read_text())["mcpServers"]) == {"github", "fabric-memory"}
    written = servers.read_bytes(), settings.read_bytes()
    assert actions(install_claude(program=PROGRAM)) == ["unchanged"] * 3
    assert (servers.read_bytes(), settings.read_bytes()) == written
    assert actions(install_claude(program=PROGRAM, uninstall=True)) == ["removed"] * 3
    assert servers.read_text() == CLAUDE_JSON and settings.read_text() == SETTINGS_JSON
    assert actions(install_claude(program=PROGRAM, uninstall=True)) == ["absent"] * 3


def test_claude_reinstall_from_another_environment_replaces_the_path(home: Path) -> None:
    """An install from another virtual environment updates the hook and the server in place
    instead of adding a second hook, keeping the user's env and extra arguments."""
    install_claude(program=Path("/old/venv/bin/fabric-memory"))
    servers = home / ".claude.json"
    data = json.loads(servers.read_text())
    data["mcpServers"]["fabric-memory"].update(env={"FABRIC_MEMORY_HOME": "/x"},
                                               args=["serve", "--agents", "claude-code"])
    servers.write_text(json.dumps(data))
    assert actions(install_claude(program=PROGRAM)) == ["updated"] * 3
    assert json.loads(servers.read_text())["mcpServers"]["fabric-memory"] == {
        "type": "stdio", "command": str(PROGRAM), "args": ["serve", "--agents", "claude-code"],
        "env": {"FABRIC_MEMORY_HOME": "/x"}}
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    assert [h["command"] for g in settings["hooks"]["SessionStart"] for h in g["hooks"]] == [HOOK]
    assert [h["command"] for g in settings["hooks"]["UserPromptSubmit"]
            for h in g["hooks"]] == [HOOK]
    assert json.loads((home / ".claude.json").read_text())["mcpServers"]["fabric-memory"][
        "command"] == str(PROGRAM)


def test_claude_follows_claude_config_dir_and_project(home: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """CLAUDE_CONFIG_DIR holds both files; --project writes .mcp.json and
    .claude/settings.json of that folder and says the server needs approval."""
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "cfg"))
    report = install_claude(program=PROGRAM)
    assert [c["file"] for c in report["changes"]] == [
        str(tmp_path / "cfg" / ".claude.json"), *[str(tmp_path / "cfg" / "settings.json")] * 2]
    project = tmp_path / "app"
    report = install_claude(project, program=PROGRAM)
    assert [c["file"] for c in report["changes"]] == [
        str(project / ".mcp.json"), *[str(project / ".claude" / "settings.json")] * 2]
    assert "fabric-memory" in json.loads((project / ".mcp.json").read_text())["mcpServers"]
    assert "approve" in report["notes"][0]
    assert not (home / ".claude.json").exists()


def test_claude_writes_through_a_symlinked_settings_file(home: Path, tmp_path: Path) -> None:
    """A settings.json that is a symlink (dotfiles) stays a link to the rewritten file;
    uninstall gives the linked file back byte for byte."""
    dotfiles = tmp_path / "dotfiles" / "claude-settings.json"
    dotfiles.parent.mkdir()
    dotfiles.write_text(SETTINGS_JSON)
    (home / ".claude").mkdir()
    (home / ".claude" / "settings.json").symlink_to(dotfiles)
    install_claude(program=PROGRAM)
    assert (home / ".claude" / "settings.json").is_symlink()
    assert HOOK in dotfiles.read_text()
    install_claude(program=PROGRAM, uninstall=True)
    assert (home / ".claude" / "settings.json").is_symlink()
    assert dotfiles.read_text() == SETTINGS_JSON


@pytest.mark.parametrize(("host", "where"), [
    ("claude", ".claude/settings.json"), ("codex", ".codex/config.toml")])
def test_a_read_only_file_is_refused_and_left_alone(
    home: Path, capsys: pytest.CaptureFixture[str], host: str, where: str
) -> None:
    """A host file without write permission is refused in one line naming it (what to do
    included) and left as it was."""
    path = home / where
    path.parent.mkdir(exist_ok=True)
    path.write_text("{}" if path.suffix == ".json" else "# mine\n")
    before = path.read_bytes()
    path.chmod(0o444)
    status, _, err = run_cli(capsys, "install", host)
    assert status == 2
    assert f"{path}: read-only (mode 0444), so it was left as it is; make it writable" in err
    assert err.count("\n") == 1 and path.read_bytes() == before


def test_claude_refuses_settings_of_another_shape(home: Path) -> None:
    """A hooks value that is not an object is refused with its JSON path, file untouched."""
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"hooks": []}')
    with pytest.raises(UsageError, match=r"settings\.json: \$\.hooks is not an object"):
        install_claude(program=PROGRAM)
    assert settings.read_text() == '{"hooks": []}'


# --- Codex -----------------------------------------------------------------------------


CONFIG_TOML = """# my Codex settings
model = "gpt-5.5"  # the default model
approval_policy = "on-request"

[mcp_servers.github]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-github"]  # keep this

[[hooks.SessionStart]]
matcher = "startup"

[[hooks.SessionStart.hooks]]
type = "command"
command = "echo hello"

[profiles.fast]
model = "gpt-5.5-mini"
# a comment at the end
"""


def test_codex_fresh_install_trusts_its_hook(home: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A fresh install writes the MCP server, the hook and its trust to
    ~/.codex/config.toml, and prints the three changes."""
    status, out, _ = run_cli(capsys, "install", "codex")
    assert status == 0
    program = executable()
    config = home / ".codex" / "config.toml"
    data = tomlkit.parse(config.read_text()).unwrap()
    handler = {"type": "command", "command": f"{program} handoff", "timeout": 10}
    key = f"{config}:session_start:0:0"
    prompt_key = f"{config}:user_prompt_submit:0:0"
    assert data == {
        "mcp_servers": {"fabric-memory": {"command": str(program), "args": ["serve"]}},
        "hooks": {"SessionStart": [{"matcher": "compact", "hooks": [handler]}],
                  "UserPromptSubmit": [{"hooks": [handler]}],
                  "state": {key: {"trusted_hash": trust_hash("compact", handler)},
                            prompt_key: {"trusted_hash": trust_hash(None, handler, PROMPT)}}}}
    assert len(out.splitlines()) == 6 and out.startswith("added MCP server fabric-memory")
    assert out.splitlines()[-1].startswith("Codex reads these when a session starts")


def test_codex_keeps_comments_and_others_and_uninstall_gives_the_file_back(home: Path) -> None:
    """Comments, other MCP servers, other hooks and profiles stay as written; the hook
    goes after the user's SessionStart group (trust key :1:0); a second install writes
    nothing; --uninstall leaves the file byte-identical."""
    config = home / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text(CONFIG_TOML)
    assert actions(install_codex(program=PROGRAM)) == ["added"] * 5
    text = config.read_text()
    assert text.startswith(CONFIG_TOML)
    assert f'[hooks.state."{config}:session_start:1:0"]' in text
    assert f'[hooks.state."{config}:user_prompt_submit:0:0"]' in text
    assert actions(install_codex(program=PROGRAM)) == ["unchanged"] * 5
    assert config.read_text() == text
    assert actions(install_codex(program=PROGRAM, uninstall=True)) == ["removed"] * 5
    assert config.read_text() == CONFIG_TOML
    assert actions(install_codex(program=PROGRAM, uninstall=True)) == ["absent"] * 5


def test_codex_uninstall_keeps_the_trust_of_hooks_that_move_up(home: Path) -> None:
    """A user's SessionStart group written after ours moves up one place when ours goes;
    its trust entry moves with it (Codex keys trust by position)."""
    config = home / ".codex" / "config.toml"
    install_codex(program=PROGRAM)
    later = {"type": "command", "command": "echo later"}
    with config.open("a") as out:
        out.write('\n[[hooks.SessionStart]]\nmatcher = "resume"\n\n'
                  '[[hooks.SessionStart.hooks]]\ntype = "command"\ncommand = "echo later"\n\n'
                  f'[hooks.state."{config}:session_start:1:0"]\n'
                  f'trusted_hash = "{trust_hash("resume", later)}"\n')
    install_codex(program=PROGRAM, uninstall=True)
    data = tomlkit.parse(config.read_text()).unwrap()
    assert data["hooks"]["SessionStart"] == [{"matcher": "resume", "hooks": [later]}]
    assert data["hooks"]["state"] == {
        f"{config}:session_start:0:0": {"trusted_hash": trust_hash("resume", later)}}


def test_codex_follows_codex_home_through_symlinks(home: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """CODEX_HOME names the folder; a symlinked config.toml stays a link; the trust key
    names the real CODEX_HOME folder (as Codex resolves it) and the link's file name."""
    real = tmp_path / "real-codex"
    real.mkdir()
    (tmp_path / "linked-codex").symlink_to(real)
    dotfiles = tmp_path / "dotfiles.toml"
    dotfiles.write_text(CONFIG_TOML)
    (real / "config.toml").symlink_to(dotfiles)
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "linked-codex"))
    install_codex(program=PROGRAM)
    assert (real / "config.toml").is_symlink()
    assert f'[hooks.state."{real / "config.toml"}:session_start:1:0"]' in dotfiles.read_text()
    install_codex(program=PROGRAM, uninstall=True)
    assert dotfiles.read_text() == CONFIG_TOML and (real / "config.toml").is_symlink()


def _trusted_by_codex(home: Path, cwd: Path, file: Path) -> dict[tuple[str, str], Any]:
    """The hooks the real Codex lists, by (command, event); ours, both of them, are
    trusted under ``file``'s keys (the SessionStart one after the user's startup group)."""
    listed = {(str(hook["command"]), str(hook["key"]).split(":")[-3]): hook
              for hook in codex_hooks(host_env(home), cwd)}
    for event, key in (("session_start", "session_start:1:0"),
                       ("user_prompt_submit", "user_prompt_submit:0:0")):
        ours = listed[(HOOK, event)]
        assert ours["key"] == f"{file}:{key}"
        assert ours["trustStatus"] == "trusted", ours
    return listed


def test_codex_reports_our_hook_as_trusted(home: Path, tmp_path: Path) -> None:
    """The real Codex (app-server hooks/list) finds both installed hooks under the keys we
    wrote, with the hashes we computed, and trusts them — beside a user's hook it does not."""
    config = home / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text(CONFIG_TOML)
    install_codex(program=PROGRAM)
    listed = _trusted_by_codex(home, tmp_path, config)
    assert listed[("echo hello", "session_start")]["trustStatus"] == "untrusted"


HOOKS_JSON = json.dumps({"hooks": {"SessionStart": json.loads(SETTINGS_JSON)["hooks"][
    "SessionStart"]}}, indent=2) + "\n"
"""The user's startup hook, in Codex's hooks.json (two-space, as written by hand)."""


def test_codex_uses_hooks_json_when_the_user_keeps_hooks_there(home: Path,
                                                               tmp_path: Path) -> None:
    """With the user's hooks in $CODEX_HOME/hooks.json, ours joins them there (Codex warns
    when both files hold hooks), trusted under hooks.json's key in config.toml — which the
    real Codex confirms; --uninstall gives both files back byte for byte."""
    codex = home / ".codex"
    codex.mkdir()
    (codex / "config.toml").write_text(CONFIG_TOML.split("[[hooks.SessionStart]]")[0])
    before = (codex / "config.toml").read_text()
    (codex / "hooks.json").write_text(HOOKS_JSON)
    report = install_codex(program=PROGRAM)
    assert [(Path(c["file"]).name, c["action"]) for c in report["changes"]] == [
        ("config.toml", "added"), ("hooks.json", "added"), ("config.toml", "added"),
        ("hooks.json", "added"), ("config.toml", "added")]
    assert "SessionStart" not in tomlkit.parse((codex / "config.toml").read_text()).get(
        "hooks", {})
    _trusted_by_codex(home, tmp_path, codex / "hooks.json")
    assert actions(install_codex(program=PROGRAM)) == ["unchanged"] * 5
    assert actions(install_codex(program=PROGRAM, uninstall=True)) == ["removed"] * 5
    assert (codex / "hooks.json").read_text() == HOOKS_JSON
    assert (codex / "config.toml").read_text() == before


# --- Pi (the alias) --------------------------------------------------------------------


def test_install_pi_is_pi_install(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """install pi and pi install are one command: the same change, the same report."""
    status, out, _ = run_cli(capsys, "install", "pi", "--json")
    assert status == 0 and json.loads(out)["action"] == "added"
    status, out, _ = run_cli(capsys, "pi", "install", "--json")
    assert status == 0 and json.loads(out)["action"] == "unchanged"
    status, out, _ = run_cli(capsys, "install", "pi", "--uninstall")
    assert status == 0 and out.startswith("removed ")


COPILOT_CONFIG = """{
    "mcpServers": {
        "playwright": {
            "type": "local",
            "command": "npx",
            "args": [
                "@playwright/mcp@latest"
            ],
            "tools": [
                "*"
            ]
        }
    },
    "futureKey": {
        "kept": true
    }
}
"""
"""Another server and a key of a later version, in the layout the hosts write (arrays one
item a line), with another indent."""


_STDIO = {"command": str(PROGRAM), "args": ["serve"]}
_EXTENSION = {**_STDIO, "env": {}, "disabled": False, "autoApprove": []}
_STORAGE = ".config/Code/User/globalStorage"


@pytest.mark.parametrize(("host", "where", "entry"), [
    ("copilot", ".copilot/mcp-config.json",
     {"type": "local", "command": str(PROGRAM), "args": ["serve"], "tools": ["*"]}),
    ("cursor", ".cursor/mcp.json", {"command": str(PROGRAM), "args": ["serve"], "env": {}}),
    ("gemini", ".gemini/settings.json", _STDIO),
    ("qwen", ".qwen/settings.json", _STDIO),
    ("cline", f"{_STORAGE}/saoudrizwan.claude-dev/settings/cline_mcp_settings.json",
     _EXTENSION),
    ("roo-code", f"{_STORAGE}/rooveterinaryinc.roo-cline/settings/mcp_settings.json",
     _EXTENSION),
    ("kilo-code", f"{_STORAGE}/kilocode.kilo-code/settings/mcp_settings.json", _EXTENSION),
    ("continue", ".continue/mcpServers/fabric-memory.json", _STDIO),
    ("opencode", ".config/opencode/opencode.json",
     {"type": "local", "command": [str(PROGRAM), "serve"], "enabled": True}),
])
def test_json_hosts_get_the_server_and_uninstall_gives_the_file_back(
    home: Path, host: str, where: str, entry: dict[str, object]
) -> None:
    """Beside another server and an unknown key (four-space indent), install adds ours in
    the host's own shape, a second install writes nothing, and --uninstall leaves the file
    byte-identical; a file install created is deleted again."""
    from fabric_memory.install.mcp_json import HOSTS, install_json_host

    key = HOSTS[host].key
    path = home / where
    assert actions(install_json_host(host, program=PROGRAM)) == ["added"]
    assert json.loads(path.read_text()) == {key: {"fabric-memory": entry}}
    assert actions(install_json_host(host, program=PROGRAM, uninstall=True)) == ["removed"]
    assert not path.exists()
    config = COPILOT_CONFIG.replace('"mcpServers"', f'"{key}"')
    path.write_text(config)
    assert actions(install_json_host(host, program=PROGRAM)) == ["added"]
    data = json.loads(path.read_text())
    assert list(data[key]) == ["playwright", "fabric-memory"]
    assert data["futureKey"] == {"kept": True} and f'\n    "{key}"' in path.read_text()
    written = path.read_bytes()
    assert actions(install_json_host(host, program=PROGRAM)) == ["unchanged"]
    assert path.read_bytes() == written
    assert actions(install_json_host(host, program=PROGRAM, uninstall=True)) == ["removed"]
    assert path.read_text() == config


def test_a_vs_code_extension_is_installed_in_the_editor_that_has_it(home: Path) -> None:
    """Cline's settings go to the editor whose storage holds the extension (Cursor here),
    not VS Code's."""
    from fabric_memory.install.mcp_json import install_json_host

    storage = home / ".config" / "Cursor" / "User" / "globalStorage" / "saoudrizwan.claude-dev"
    storage.mkdir(parents=True)
    report = install_json_host("cline", program=PROGRAM)
    assert report["changes"][0]["file"] == str(storage / "settings" / "cline_mcp_settings.json")


def test_opencode_keeps_the_users_arguments_and_moves_to_a_new_program(home: Path) -> None:
    """An OpenCode entry that runs our serve with extra arguments is left as it is; one of
    an older program gets the new one, its extra arguments and environment kept."""
    from fabric_memory.install.mcp_json import install_json_host

    path = home / ".config" / "opencode" / "opencode.json"
    path.parent.mkdir(parents=True)
    mine = {"type": "local", "command": [str(PROGRAM), "serve", "--sessions", "/s"],
            "environment": {"A": "1"}}
    path.write_text(json.dumps({"mcp": {"fabric-memory": mine}}))
    assert actions(install_json_host("opencode", program=PROGRAM)) == ["unchanged"]
    moved = Path("/opt/new/fabric-memory")
    assert actions(install_json_host("opencode", program=moved)) == ["updated"]
    assert json.loads(path.read_text())["mcp"]["fabric-memory"] == {
        **mine, "command": [str(moved), "serve", "--sessions", "/s"]}


def test_copilot_follows_copilot_home_through_a_symlink(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """$COPILOT_HOME moves the file; a symlinked mcp-config.json stays a link; the CLI's
    --json answer names the file, and a file that is not JSON is refused with its line."""
    monkeypatch.setenv("COPILOT_HOME", str(tmp_path / "copilot-home"))
    real = tmp_path / "dotfiles" / "mcp.json"
    real.parent.mkdir()
    real.write_text("{}\n")
    link = tmp_path / "copilot-home" / "mcp-config.json"
    link.parent.mkdir()
    link.symlink_to(real)
    status, out, _ = run_cli(capsys, "install", "copilot", "--json")
    assert status == 0 and json.loads(out)["changes"][0]["file"] == str(link)
    assert link.is_symlink() and "fabric-memory" in json.loads(real.read_text())["mcpServers"]
    real.write_text('{\n  // a comment\n}\n')
    status, _, err = run_cli(capsys, "install", "copilot")
    assert status == 2 and f"{link}:2: not valid JSON" in err


GOOSE_CONFIG = """# Goose's config (comments are the user's own)
GOOSE_PROVIDER: anthropic
GOOSE_MODEL: claude-sonnet-4-5
extensions:
  developer:
    bundled: true
    display_name: Developer
    enabled: true
    name: developer
    timeout: 300
    type: builtin
  github:
    args:
    - -y
    - '@modelcontextprotocol/server-github'
    cmd: npx
    enabled: false  # switched off for now
    envs: {}
    name: github
    timeout: 300
    type: stdio
"""
"""A config.yaml in the layout Goose writes (serde_yaml: sequences not indented), with a
comment and a disabled extension of the user's."""


def test_goose_gets_an_extension_and_uninstall_gives_the_config_back(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """install goose adds our stdio extension beside the user's (comments, keys and layout
    kept), a second install writes nothing, --uninstall gives the file back byte for byte;
    a config it created is deleted again; a file that is not YAML is refused with its line."""
    from ruamel.yaml import YAML

    from fabric_memory.install.goose import install_goose

    path = home / ".config" / "goose" / "config.yaml"
    assert actions(install_goose(program=PROGRAM)) == ["added"]
    assert YAML().load(path.read_text())["extensions"]["fabric-memory"]["cmd"] == str(PROGRAM)
    assert actions(install_goose(program=PROGRAM, uninstall=True)) == ["removed"]
    assert not path.exists()
    path.write_text(GOOSE_CONFIG)
    assert actions(install_goose(program=PROGRAM)) == ["added"]
    written = path.read_text()
    assert written.startswith(GOOSE_CONFIG.rstrip("\n")) and "# switched off for now" in written
    ours = YAML().load(written)["extensions"]["fabric-memory"]
    assert (ours["type"], ours["cmd"], list(ours["args"]), ours["enabled"]) == (
        "stdio", str(PROGRAM), ["serve"], True)
    assert actions(install_goose(program=PROGRAM)) == ["unchanged"]
    assert path.read_text() == written
    assert actions(install_goose(program=PROGRAM, uninstall=True)) == ["removed"]
    assert path.read_text() == GOOSE_CONFIG
    path.write_text("extensions:\n  a: [1,\n")
    status, _, err = run_cli(capsys, "install", "goose")
    assert status == 2 and f"{path}:3: not valid YAML" in err


@pytest.mark.parametrize("uninstall", [False, True], ids=["install", "uninstall"])
def test_a_gemini_settings_file_with_comments_is_left_with_the_hosts_own_command(
    home: Path, uninstall: bool
) -> None:
    """Gemini CLI accepts comments in its settings.json; install leaves such a file
    byte-identical and names Gemini CLI's own command that registers (removes) the server."""
    from fabric_memory.install.mcp_json import install_json_host

    path = home / ".gemini" / "settings.json"
    path.parent.mkdir()
    text = '{\n  // the theme I like\n  "theme": "GitHub", "url": "http://a//b"\n}\n'
    path.write_text(text)
    with pytest.raises(UsageError) as caught:
        install_json_host("gemini", program=PROGRAM, uninstall=uninstall)
    own = ("gemini mcp remove --scope user fabric-memory" if uninstall
           else f"gemini mcp add --scope user fabric-memory {shlex.quote(str(PROGRAM))} serve")
    assert f"{path}: holds comments" in caught.value.message and f"`{own}`" in caught.value.message
    assert path.read_text() == text
