"""``fabric-memory ui`` over raw HTTP: the token on every route, hostile paths and queries,
the JSON twins, secrets masked, and the start-up refusals (a real server process)."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from urllib.parse import quote

import orjson
import pytest

from .ui_host import (
    BIN,
    CLAUDE_SESSION,
    CLAUDE_WORD,
    RARE,
    SECRET,
    RunningUI,
    Store,
    build_store,
    running_ui,
)

ROUTES = ["/", "/sessions.json", "/session/{id}", "/session/{id}.json", "/raw/{id}?address=e001",
          "/live/{id}", "/search?q=parser", "/search.json?q=parser", "/stats", "/stats.json",
          "/events", "/static/ui.js", "/static/ui.css", "/no-such-page"]
FIXTURES = Path(__file__).parent.parent / "fixtures"
TRACEBACK_MARKS = (b"Traceback", b'File "', b"Error:\n")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    return build_store(tmp_path_factory.mktemp("ui"))


@pytest.fixture(scope="module")
def ui(store: Store) -> Iterator[RunningUI]:
    with running_ui(store) as running:
        yield running


def _routes(store: Store) -> list[str]:
    return [route.replace("{id}", store.long.session_id) for route in ROUTES]


def test_first_line_is_the_url_with_its_token(ui: RunningUI) -> None:
    """stdout's first line is http://127.0.0.1:PORT/?token=… and that URL opens the list."""
    assert ui.url.startswith("http://127.0.0.1:")
    assert len(ui.token) >= 32
    status, headers, _ = ui.get("/?token=" + ui.token, cookie=None)
    assert status == 303
    assert headers["location"] == "/"
    assert f"fabric_memory_ui_{ui.base.rsplit(':', 1)[1]}={ui.token}" in headers["set-cookie"]
    assert "httponly" in headers["set-cookie"].lower()


@pytest.mark.parametrize("cookie,status", [(None, 401), ("wrong", 403)], ids=["missing", "wrong"])
def test_every_route_needs_the_token(ui: RunningUI, store: Store, cookie: str | None,
                                     status: int) -> None:
    """Without the token, or with a wrong one, every route answers 401/403 and no content."""
    for route in _routes(store):
        name = None if cookie is None else f"fabric_memory_ui_{ui.base.rsplit(':', 1)[1]}=wrong"
        got, _, body = ui.get(route, cookie=name)
        assert got == status, route
        assert store.long.session_id.encode() not in body, route
        assert b"parser" not in body and b"<html" not in body, route
        assert b"token" in body, route
    got, _, body = ui.get(f"/?token=nope{ui.token}", cookie=None)
    assert got == 403 and b"<html" not in body


def test_every_route_answers_with_the_token(ui: RunningUI, store: Store) -> None:
    """With the cookie, each page answers (the unknown page with a clean 404) and carries
    the security headers: nothing may load from elsewhere."""
    for route in _routes(store):
        if route.startswith(("/live/", "/events")):
            continue  # streams: tested in the browser
        status, headers, body = ui.get(route)
        assert status == (404 if route == "/no-such-page" else 200), (route, body[:300])
        assert headers["content-security-policy"].startswith("default-src 'self'")
        assert not any(mark in body for mark in TRACEBACK_MARKS), route


@pytest.mark.parametrize("path", [
    "/session/..%2F..%2F..%2Fetc%2Fpasswd", "/session/../../../etc/passwd",
    "/session/%2Fetc%2Fpasswd", "/session//etc/passwd", "/session/%00",
    "/raw/..%2F..%2Fetc%2Fpasswd?address=L1",
    "/session/~root%2F.bashrc", "/static/..%2F..%2Fapp.py", "/static/../app.py",
])
def test_path_traversal_reads_nothing_outside(ui: RunningUI, path: str) -> None:
    """A session named by a path outside the sessions roots (or none) is not found: a clean
    404 page, never the file, never a traceback."""
    status, _, body = ui.get(path)
    assert status in (400, 404), (path, status, body[:300])
    assert b"root:" not in body and b"import " not in body
    assert not any(mark in body for mark in TRACEBACK_MARKS)


def test_an_unknown_session_is_a_clear_404(ui: RunningUI) -> None:
    """An id no session has: 404 saying so, as a page and as JSON."""
    status, _, body = ui.get("/session/00000000-dead-beef-0000-000000000000")
    assert status == 404
    assert b"session_not_found" in body and b"not in the memory index" in body
    status, _, body = ui.get("/session/00000000-dead-beef-0000-000000000000.json")
    assert status == 404
    assert orjson.loads(body)["error"]["status"] == 404


def test_huge_and_bad_queries_are_refused_cleanly(ui: RunningUI) -> None:
    """A 1 MB query, a 10 kB one, bad numbers and bad filters: a 4xx with a reason, and the
    server keeps answering."""
    status, _, body = ui.get("/search?q=" + "a" * 1_000_000)
    assert 400 <= status < 500 and not any(mark in body for mark in TRACEBACK_MARKS)
    status, _, body = ui.get("/search?q=" + "word%20" * 1500)
    assert status == 400 and b"the limit is 4096" in body
    for path in ("/?page=abc", "/?page=0", "/?agent=nobody", "/?compacted=maybe",
                 "/?since=yesterday", "/search?q=x&since=soon", "/search?q=x&offset=-1"):
        status, _, body = ui.get(path)
        assert status == 400, path
        assert not any(mark in body for mark in TRACEBACK_MARKS), path
    assert ui.get("/")[0] == 200


def test_sessions_json_twin_holds_what_the_list_shows(ui: RunningUI, store: Store) -> None:
    """``/sessions.json`` and ``/?format=json`` hold each row's fields; the page shows them."""
    status, _, body = ui.get("/sessions.json")
    assert status == 200
    page = orjson.loads(body)
    assert orjson.loads(ui.get("/?format=json")[2]) == page
    assert page["total"] == 3 and page["perAgent"] == {"claude-code": 1, "pi": 2}
    first = page["sessions"][0]
    assert first["sessionId"] == store.long.session_id  # newest first
    assert first["facts"]["compactions"] == 1
    assert first["facts"]["failures"] == 2  # the failed read, the failed Fabric operation
    assert first["facts"]["title"].startswith("Make the parser accept trailing commas")
    html = ui.get("/")[2].decode()
    for row in page["sessions"]:
        assert row["facts"]["title"] in html
        assert row["sessionId"] in html


@pytest.mark.parametrize("query,expected", [
    ("compacted=yes", 1), ("compacted=no", 2), ("failed=yes", 1), ("failed=no", 2),
    ("agent=pi", 2), ("agent=claude-code", 1), ("agent=codex", 0), ("project=/repo", 3),
    ("project=/elsewhere", 0), ("since=2000-01-01T00:00:00Z", 3),
    ("until=2000-01-01T00:00:00Z", 0), ("agent=pi&compacted=no", 1),
    (f"until={time.strftime('%Y-%m-%d', time.gmtime())}", 3),  # a day: through its end
])
def test_list_filters(ui: RunningUI, query: str, expected: int) -> None:
    """Each filter of the list narrows it as named."""
    status, _, body = ui.get(f"/sessions.json?{query}")
    assert status == 200
    assert orjson.loads(body)["total"] == expected


def test_session_page_marks_every_entry_by_its_address(ui: RunningUI, store: Store) -> None:
    """Every entry has id=<address>; the summary's addresses are links (to another page of
    the timeline through ?at=); an edit is a diff; an error is marked; results past a few
    lines are collapsed."""
    sid = store.long.session_id
    page = orjson.loads(ui.get(f"/session/{sid}.json")[2])
    assert page["pages"] == 2 and page["page"] == 1
    html = ui.get(f"/session/{sid}")[2].decode()
    for entry in page["shown"]:
        assert f'id="{entry["address"]}"' in html
    assert f'id="{store.failed_op}"' in html
    assert '<span class="del">-const a = 1;</span>' in html
    assert '<span class="add">+const a = 2;</span>' in html
    assert 'class="entry role-toolResult is-error"' in html
    assert '<details class="result">' in html
    second = ui.get(f"/session/{sid}?at={store.rare_address}")[2].decode()
    assert f'id="{store.rare_address}"' in second and "page 2 of 2" in second
    link = f'href="/session/{sid}?at={quote(store.failed_op, safe="")}#{store.failed_op}"'
    assert link in second
    assert f'<a class="address" href="#{store.rare_address}">' in second


def test_secrets_are_masked_on_the_page_and_in_the_raw_line(ui: RunningUI, store: Store) -> None:
    """A key in a user message never reaches the page, its JSON, or the raw line."""
    sid = store.long.session_id
    for path in (f"/session/{sid}", f"/session/{sid}.json", f"/raw/{sid}?address={store.secret}",
                 "/search?q=deploy", "/stats.json"):
        status, _, body = ui.get(path)
        assert status == 200, path
        assert SECRET.values[0].encode() not in body, path
    assert b"[REDACTED:" in ui.get(f"/raw/{sid}?address={store.secret}")[2]
    assert b"[REDACTED:" in ui.get(f"/session/{sid}")[2]


def test_search_groups_hits_and_marks_the_words(ui: RunningUI, store: Store) -> None:
    """Recall's hits, grouped by session, held words marked, each a link to its entry."""
    page = orjson.loads(ui.get(f"/search.json?q={RARE.lower()}")[2])
    assert page["total"] >= 1
    group = page["groups"][0]
    assert group["sessionId"] == store.long.session_id
    assert any(hit["address"] == store.rare_address for hit in group["hits"])
    html = ui.get(f"/search?q={RARE}")[2].decode()
    assert "<mark>QUOKKA</mark>_<mark>ZEPHYR</mark>_<mark>7731</mark>" in html
    assert f'#{store.rare_address}"' in html


def test_another_agents_entries_land_by_line_and_by_id(ui: RunningUI) -> None:
    """A Claude Code entry's element is its line address (what summaries print); the id a
    recall hit names lands on it too; Claude's Edit is a diff."""
    page = orjson.loads(ui.get(f"/search.json?q={CLAUDE_WORD}")[2])
    hit = page["groups"][0]["hits"][0]
    assert page["groups"][0]["sessionId"] == CLAUDE_SESSION
    html = ui.get(f"/session/{CLAUDE_SESSION}?at={quote(hit['address'])}")[2].decode()
    timeline = orjson.loads(ui.get(f"/session/{CLAUDE_SESSION}.json")[2])
    said = next(e for e in timeline["shown"] if CLAUDE_WORD in e["text"])
    assert said["address"].startswith("L") and said["entryId"] != said["address"]
    assert hit["address"] in (said["address"], said["entryId"])
    assert f'id="{said["address"]}"' in html and f'id="{said["entryId"]}"' in html
    assert '<span class="del">-sleep(9)</span>' in html
    assert '<span class="add">+sleep(0)</span>' in html


def test_each_entrys_expand_command_reads_it_back(ui: RunningUI, store: Store) -> None:
    """The command an entry's `copy expand` button copies runs as printed and reads that
    entry (a Pi id, a Claude Code line address)."""
    for session in (store.long.session_id, CLAUDE_SESSION):
        page = orjson.loads(ui.get(f"/session/{session}.json")[2])
        for entry in page["shown"][:3]:
            argv = shlex.split(entry["expandCommand"])
            assert argv[:2] == ["fabric-memory", "expand"]
            done = subprocess.run([str(BIN / argv[0]), *argv[1:]], capture_output=True,
                                  timeout=60)
            assert done.returncode == 0, done.stderr
            out = done.stdout.decode()
            assert f"\n{entry['address']} " in out or f"\n{entry['entryId']} " in out
            said = (entry["text"] or entry["result"]).split("\n")[0]
            assert said in out


def test_summary_page_links_every_address(ui: RunningUI, store: Store) -> None:
    """The summary engine's summary of a session (whole, or through an address): its
    addresses are links to the timeline, line addresses for another agent's session."""
    sid = store.long.session_id
    whole = orjson.loads(ui.get(f"/summary/{sid}.json")[2])
    assert whole["until"] == store.rare_address and "[e001]" in whole["summary"]
    assert SECRET.values[0] not in whole["summary"]
    html = ui.get(f"/summary/{sid}")[2].decode()
    assert f'<a class="address" href="/session/{sid}?at=e001#e001">e001</a>' in html
    cut = orjson.loads(ui.get(f"/summary/{sid}.json?until=e004")[2])
    assert cut["until"] == "e004" and cut["entries"] == 4
    assert ui.get(f"/summary/{sid}?until=nowhere")[0] == 400
    claude = ui.get(f"/summary/{CLAUDE_SESSION}")[2].decode()
    assert f'href="/session/{CLAUDE_SESSION}?at=L1#L1">L1</a>' in claude


def test_stats_counts_tools_and_compactions(ui: RunningUI) -> None:
    """Stats: failure rate per tool (Fabric operations by their ref), every compaction with
    its tokensBefore, charts drawn as SVG."""
    stats = orjson.loads(ui.get("/stats.json")[2])
    tools = {row["tool"]: row for row in stats["tools"]}
    assert tools["read"]["failures"] == 1 and tools["pi.bash"]["failureRate"] == 1.0
    assert [c["tokensBefore"] for c in stats["compactions"]] == [1000]
    assert stats["sessions"] == 3
    assert stats["usage"] == {"input": 1200, "output": 300, "cacheRead": 5000,
                              "cacheWrite": 100, "cost": 0.0123}
    assert {row["name"]: row["usage"]["input"] for row in stats["agents"]} == {
        "pi": 1200, "claude-code": 0}
    assert b"<svg" in ui.get("/stats")[2]


CLAUDE_USAGE = FIXTURES / "handoff" / "entire-dev-b.jsonl"
CODEX_USAGE = (FIXTURES / "agents" / "codex"
               / "rollout-2026-01-15T08-00-00-019b1c2d-3e4f-7a5b-8c6d-7e8f9a0b1c2d.jsonl")


def _claude_tokens(path: Path) -> dict[str, int]:
    """Claude Code's usage summed straight from the raw lines: each reply once (its lines
    repeat the usage with the output so far: the last line's counts)."""
    replies: dict[tuple[str, str], dict[str, int]] = {}
    for line in path.read_bytes().splitlines():
        value = orjson.loads(line)
        body = value.get("message")
        if value.get("type") == "assistant" and isinstance(body, dict) and "usage" in body:
            replies[(body["id"], value.get("requestId"))] = body["usage"]
    return {"input": sum(u["input_tokens"] for u in replies.values()),
            "output": sum(u["output_tokens"] for u in replies.values()),
            "cacheRead": sum(u["cache_read_input_tokens"] for u in replies.values()),
            "cacheWrite": sum(u["cache_creation_input_tokens"] for u in replies.values())}


def _codex_tokens(path: Path) -> dict[str, int]:
    """Codex's usage from the raw lines: the session's last ``total_token_usage``."""
    totals = [value["payload"]["info"]["total_token_usage"]
              for value in map(orjson.loads, path.read_bytes().splitlines())
              if value.get("type") == "event_msg" and value["payload"].get("type") == "token_count"
              and value["payload"].get("info")]
    last = totals[-1]
    return {"input": last["input_tokens"] - last["cached_input_tokens"],
            "output": last["output_tokens"], "cacheRead": last["cached_input_tokens"],
            "cacheWrite": 0}


def test_stats_count_claude_code_and_codex_usage(store: Store, tmp_path: Path) -> None:
    """/stats.json counts the tokens a real Claude Code transcript and a Codex rollout
    record, each turn once, per agent and per day; their cost is not recorded."""
    from fabric_memory.memory.reindex import reindex

    sessions = tmp_path / "sessions"
    for source in (CLAUDE_USAGE, CODEX_USAGE):
        (sessions / source.parent.name).mkdir(parents=True)
        shutil.copy(source, sessions / source.parent.name / source.name)
    reindex(sessions=sessions, index=tmp_path / "index", workers=1)
    with running_ui(replace(store, sessions=sessions, index=tmp_path / "index")) as ui:
        stats = orjson.loads(ui.get("/stats.json")[2])
        html = ui.get("/stats")[2].decode()
    agents = {row["name"]: row["usage"] for row in stats["agents"]}
    tokens = ("input", "output", "cacheRead", "cacheWrite")
    for agent, expected in (("claude-code", _claude_tokens(CLAUDE_USAGE)),
                            ("codex", _codex_tokens(CODEX_USAGE))):
        assert {key: agents[agent][key] for key in tokens} == expected, agent
        assert agents[agent]["cost"] is None
    days = stats["days"]
    assert {key: sum(day["usage"][key] for day in days) for key in tokens} == {
        key: stats["usage"][key] for key in tokens} and stats["usage"]["output"] > 0
    assert "not recorded" in html


def test_non_loopback_host_needs_a_token(store: Store) -> None:
    """--host 0.0.0.0 without --token is refused before anything is bound; a short token too."""
    for extra, said in ((["--host", "0.0.0.0"], "not a loopback address"),
                        (["--host", "0.0.0.0", "--token", "short"], "at least 16")):
        done = subprocess.run([str(BIN / "fabric-memory"), "ui", "--no-open", "--sessions",
                               str(store.sessions), "--index", str(store.index), *extra],
                              capture_output=True, timeout=30)
        assert done.returncode == 2  # a usage error
        assert done.stdout == b""
        assert said in done.stderr.decode()
        assert b"Traceback" not in done.stderr


def test_a_given_token_is_the_one_required(store: Store) -> None:
    """--token SECRET: the printed URL carries it and only it opens the pages."""
    mine = "my-own-token-0123456789"
    with running_ui(store, "--token", mine) as ui:
        assert ui.token == mine
        assert ui.get("/sessions.json")[0] == 200
        assert ui.get("/sessions.json", cookie=f"{ui.cookie.split('=')[0]}=other-token")[0] == 403


def test_a_forgotten_session_leaves_every_page(tmp_path: Path) -> None:
    """`forget` while the server runs: the session is gone from the list, search and stats,
    and its pages answer 404 (the server reads through the same catalog)."""
    from fabric_memory.memory.forget import Selection, forget

    store = build_store(tmp_path)
    sid = store.long.session_id
    with running_ui(store) as ui:
        assert ui.get(f"/session/{sid}")[0] == 200
        forget(Selection(named=(sid,)), index=store.index, sessions=store.sessions)
        listed = orjson.loads(ui.get("/sessions.json")[2])["sessions"]
        assert sid not in {row["sessionId"] for row in listed} and listed
        for path in (f"/session/{sid}", f"/summary/{sid}",
                     f"/raw/{sid}?address={store.rare_address}"):
            assert ui.get(path)[0] == 404, path
        assert orjson.loads(ui.get(f"/search.json?q={RARE}")[2])["total"] == 0
        assert sid not in ui.get("/stats.json")[2].decode()


def test_a_browser_opens_on_the_url_only_with_a_display(store: Store, tmp_path: Path) -> None:
    """Without --no-open the server opens the browser ($BROWSER here) on the printed URL
    when there is a display, and opens none without one."""
    opened = tmp_path / "opened"
    browser = tmp_path / "browser.sh"
    browser.write_text(f'#!/bin/sh\necho "$1" >> {opened}\n')
    browser.chmod(0o755)
    with running_ui(store, opening={"BROWSER": str(browser), "DISPLAY": ":0"}) as ui:
        deadline = time.monotonic() + 10
        while not opened.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert opened.read_text().split() == [ui.url]
    opened.unlink()
    with running_ui(store, opening={"BROWSER": str(browser), "DISPLAY": ""}):
        time.sleep(1.5)
    assert not opened.exists()


def test_a_shared_id_is_named_by_its_path(tmp_path: Path) -> None:
    """Two files with one session id: each row links to its session by path, and that page
    answers (an id alone would be ambiguous)."""
    store = build_store(tmp_path)
    twin = store.sessions / "--copy--" / "twin.jsonl"
    twin.parent.mkdir()
    twin.write_bytes(store.long.path.read_bytes())
    from fabric_memory.memory.reindex import reindex

    reindex(sessions=store.sessions, index=store.index, workers=1)
    with running_ui(store) as ui:
        rows = orjson.loads(ui.get("/sessions.json")[2])["sessions"]
        twins = [row for row in rows if row["sessionId"] == store.long.session_id]
        assert len(twins) == 2 and all(row["handle"] == row["path"] for row in twins)
        html = ui.get("/")[2].decode()
        for row in twins:
            link = f'href="/session/{quote(row["handle"])}"'
            assert link in html
            status, _, body = ui.get(f"/session/{quote(row['handle'])}")
            assert status == 200 and row["path"].encode() in body
        assert ui.get(f"/session/{store.long.session_id}")[0] == 404  # ambiguous: says so


def test_the_list_fills_in_when_the_live_index_first_commits(tmp_path: Path) -> None:
    """Started before any index exists, the list says it is reading the sessions (200, not
    an error), then shows them once the live index has committed, with no reindex."""
    import shutil

    store = build_store(tmp_path)
    shutil.rmtree(store.index)
    with running_ui(store) as ui:
        first = orjson.loads(ui.get("/sessions.json")[2])
        if first["indexing"]:  # (the live index may already have committed)
            assert b"Reading your sessions" in ui.get("/")[2]
        deadline = time.monotonic() + 20
        while orjson.loads(ui.get("/sessions.json")[2])["total"] != 3:
            assert time.monotonic() < deadline, "the live index never committed"
            time.sleep(0.2)


def test_sigterm_stops_the_server_cleanly(store: Store) -> None:
    """SIGTERM ends the server with exit 0 (its live index thread finishes its step), no
    traceback."""
    with running_ui(store) as ui:
        assert ui.get("/sessions.json")[0] == 200
        os.killpg(ui.process.pid, signal.SIGTERM)
        assert ui.process.wait(timeout=15) == 0
        assert ui.process.stderr is not None
        assert b"Traceback" not in ui.process.stderr.read()


def test_quickstart_names_the_ui() -> None:
    """quickstart's closing lines name fabric-memory ui."""
    from fabric_memory.quickstart import NEXT_STEPS

    assert "fabric-memory ui" in NEXT_STEPS


def test_package_ships_templates_and_static_files() -> None:
    """The templates and the vendored script and style are package data."""
    import tomllib

    here = Path(__file__).parent.parent
    data = tomllib.loads((here / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert data["package-data"]["fabric_memory.ui"] == ["templates/*.html", "static/*"]
    assert (here / "fabric_memory" / "ui" / "static" / "ui.js").is_file()
