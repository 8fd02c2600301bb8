"""The web view's pages as a browser asks for them (``fabric-memory ui``, a real server
process, over HTTP with its cookie), beside the library call each page is built on, run in
this process: the list beside ``list_sessions``, a session's first page beside its agent's
reader alone, search beside ``recall``. Also the first paint of a 3,000-entry session's
page in Chromium (Debian's, through chromium-driver), the figure the page is built for.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlsplit

import orjson

from fabric_memory.memory.catalog import list_sessions
from fabric_memory.memory.recall import recall
from fabric_memory.sources import read_source

LONG_ENTRIES = 3000
START_SECONDS = 60.0
CHROMIUM = "/usr/bin/chromium"
DRIVER = "/usr/bin/chromedriver"
WORDS = ("parser", "commas", "vitest", "build", "cache", "webpack", "schema", "import",
         "deploy", "release", "timeout", "retry", "config", "module", "route", "index")


def long_session(folder: Path, entries: int = LONG_ENTRIES, seed: int = 3000) -> Path:
    """A Pi session of ``entries`` entries (user turns, assistant replies, tool calls and
    results, one in ten multi-line), seeded."""
    rng = random.Random(seed)
    path = folder / "--long--" / "2026-03-01T08-00-00-000Z_long-3000.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [{"type": "session", "version": 3, "id": "10e60000-0000-4000-8000-000000003000",
              "timestamp": "2026-03-01T08:00:00.000Z", "cwd": "/work/long"}]
    parent = None
    for n in range(entries):
        entry_id = f"{n:08x}"
        stamp = f"2026-03-01T{8 + n // 3600:02d}:{n // 60 % 60:02d}:{n % 60:02d}.000Z"
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 40)))
        if n % 10 == 9:
            text = "\n".join(text for _ in range(12))
        kind = n % 4
        if kind == 0:
            message = {"role": "user", "content": text}
        elif kind == 1:
            message = {"role": "assistant", "content": [
                {"type": "text", "text": text},
                {"type": "toolCall", "id": f"call-{n}", "name": "bash",
                 "arguments": {"command": f"npm test -- {rng.choice(WORDS)}"}}]}
        elif kind == 2:
            message = {"role": "toolResult", "toolCallId": f"call-{n - 1}", "toolName": "bash",
                       "content": [{"type": "text", "text": text}], "isError": n % 20 == 2}
        else:
            message = {"role": "assistant", "content": [{"type": "text", "text": text}]}
        lines.append({"type": "message", "id": entry_id, "parentId": parent, "timestamp": stamp,
                      "message": {**message, "timestamp": 0}})
        parent = entry_id
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return path


@dataclass(slots=True)
class Served:
    base: str
    token: str
    process: subprocess.Popen[bytes]
    connection: http.client.HTTPConnection

    def get(self, path: str) -> bytes:
        """One page over the kept-alive connection; a status other than 200 is an error."""
        port = urlsplit(self.base).port
        self.connection.request("GET", path, headers={
            "Cookie": f"fabric_memory_ui_{port}={self.token}"})
        response = self.connection.getresponse()
        body = response.read()
        if response.status != 200:
            raise RuntimeError(f"{path[:80]}: {response.status} {body[:200]!r}")
        return body


@contextlib.contextmanager
def served(sessions: Path, index: Path) -> Iterator[Served]:
    """``fabric-memory ui --no-open`` over ``sessions`` and ``index`` until the block ends."""
    process = subprocess.Popen(
        [sys.executable, "-m", "fabric_memory.cli", "ui", "--no-open", "--sessions",
         str(sessions), "--index", str(index)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        assert process.stdout is not None
        url = process.stdout.readline().decode().strip()
        if not url:
            raise RuntimeError("fabric-memory ui printed no URL")
        base, _, token = url.partition("/?token=")
        parts = urlsplit(base)
        connection = http.client.HTTPConnection(parts.hostname, parts.port,
                                                timeout=START_SECONDS)
        yield Served(base, token, process, connection)
        connection.close()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _timed(call: Callable[..., object], *args: object, **kwargs: object) -> float:
    started = time.perf_counter()
    call(*args, **kwargs)
    return time.perf_counter() - started


@dataclass(slots=True)
class PageTimes:
    """Seconds per request: each page over HTTP, and the library call it is built on."""

    list_page: list[float]
    list_floor: list[float]
    session_page: list[float]
    session_floor: list[float]
    search_page: list[float]
    search_floor: list[float]
    documents: int
    session_entries: int


def page_times(sessions: Path, index: Path, session_file: Path, queries: list[str],
               repeats: int) -> PageTimes:
    """``repeats`` rounds of: the list's first page, the session's first page, a search of
    the next query; and the same library calls in this process."""
    from fabric_memory.memory.catalog import stats

    where = {"sessions": sessions, "index": index}
    listing = list_sessions(**where)["sessions"]
    handle = next(item["sessionId"] for item in listing
                  if item["path"] == str(session_file.resolve()))
    times = PageTimes([], [], [], [], [], [], stats(index=index)["documents"],
                      len(read_source(session_file).entries))
    with served(sessions, index) as ui:
        ui.get("/")  # the facts of the first page's rows, counted once
        for n in range(repeats):
            query = queries[n % len(queries)]
            times.list_page.append(_timed(ui.get, "/"))
            times.session_page.append(_timed(ui.get, f"/session/{quote(handle)}"))
            times.search_page.append(_timed(ui.get, f"/search?q={quote(query)}"))
            times.list_floor.append(_timed(list_sessions, **where, limit=50))
            times.session_floor.append(_timed(read_source, session_file))
            times.search_floor.append(_timed(recall, query, limit=50, **where))
    return times


def first_paint(sessions: Path, index: Path, session_id: str, repeats: int) -> list[float]:
    """Milliseconds to the first contentful paint of the session's page in headless
    Chromium, each load with a cold page (the server warm); loads whose paint Chromium
    never records within ``PAINT_WAIT_SECONDS`` are left out, and none at all is an error."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1280,900", "--disable-background-networking"):
        options.add_argument(flag)
    paints = []
    with served(sessions, index) as ui:
        driver = webdriver.Chrome(options=options, service=Service(executable_path=DRIVER))
        try:
            driver.get(f"{ui.base}/?token={ui.token}")
            driver.set_script_timeout(PAINT_WAIT_SECONDS + 5)
            for _ in range(repeats):
                driver.get(f"{ui.base}/session/{session_id}")
                # The load event can come before Chromium records the paint: wait for it.
                paint = driver.execute_async_script(_AWAIT_PAINT, PAINT_WAIT_SECONDS * 1000)
                if paint is not None:
                    paints.append(float(paint))
        finally:
            driver.quit()
    if not paints:
        raise RuntimeError(f"Chromium recorded no first-contentful-paint in {repeats} loads "
                           f"of /session/{session_id}")
    return paints


PAINT_WAIT_SECONDS = 10.0
_AWAIT_PAINT = """
const [waitMs, done] = arguments;
const timer = setTimeout(() => done(null), waitMs);
new PerformanceObserver((list, observer) => {
  for (const entry of list.getEntries()) {
    if (entry.name === 'first-contentful-paint') {
      clearTimeout(timer); observer.disconnect(); done(entry.startTime); return;
    }
  }
}).observe({type: 'paint', buffered: true});
"""
