"""``fabric-memory ui``: the memory as pages a person reads in a local browser.

A Starlette application over :mod:`fabric_memory.ui.pages`: one route per thing a person
looks at, each also answering as JSON (``?format=json`` or a ``.json`` path), templates
beside this module, a little vendored JavaScript (nothing loads from the internet: the
Content-Security-Policy allows this server alone). Every request needs the token made at
start (``?token=`` once, then a cookie); the server binds loopback unless told otherwise
with a token of the user's own; it only reads. While it runs, a thread keeps the index live
(:func:`fabric_memory.memory.live.keep_live`) and open pages follow it by server-sent events.

Needs the ``ui`` extra (``pip install -e '.[ui]'`` in a clone).
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import os
import re
import secrets
import socket
import sys
import threading
import webbrowser
from collections.abc import AsyncIterator, Callable, Generator, Mapping, MutableMapping
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

import anyio
import orjson
import uvicorn
from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup, escape
from sse_starlette.sse import EventSourceResponse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from ..errors import ExpandError, FabricMemoryError, QueryError, UsageError, clipped
from ..memory.live import keep_live
from . import pages
from .charts import bar_chart
from .pages import Places, SearchFilters, SessionsFilters

HERE = Path(__file__).parent
LIVE_SECONDS = 1.0
"""How often an open page's event stream looks for a new commit or an appended line: one
``stat`` a second per open page, so an idle server does next to nothing."""
MIN_TOKEN_CHARS = 16
MAX_REQUEST_HEAD = 4 * 1024 * 1024
"""Longest request line and headers read: a long query reaches the page, which says what
its limit is, instead of a dropped connection."""
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'self'; img-src 'self' data:; "
                               "style-src 'self'; script-src 'self'; connect-src 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}
SEARCH_KEYS = ("agent", "project", "role", "tool", "outcome", "since", "until")


def new_token() -> str:
    return secrets.token_urlsafe(24)


class TokenGate:
    """Every request shows the token: ``?token=`` (answered by a cookie and a redirect to
    the same URL without it) or that cookie. Without it 401, with a wrong one 403, and no
    content either way."""

    def __init__(self, app: ASGIApp, token: str, cookie: str) -> None:
        self.app = app
        self.token = token.encode()
        self.cookie = cookie

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"),
                          keep_blank_values=True)
        given = [value for key, value in query if key == "token"]
        cookie = _cookie(scope, self.cookie)
        if given:
            if not self._matches(given[0]):
                await _refused(403, "wrong token")(scope, receive, send)
                return
            rest = urlencode([(key, value) for key, value in query if key != "token"])
            target = scope.get("root_path", "") + scope["path"] + (f"?{rest}" if rest else "")
            response = RedirectResponse(target, status_code=303)
            response.set_cookie(self.cookie, given[0], httponly=True, samesite="strict")
            await response(scope, receive, send)
            return
        if cookie is None:
            await _refused(401, "no token")(scope, receive, send)
            return
        if not self._matches(cookie):
            await _refused(403, "wrong token")(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _matches(self, given: str) -> bool:
        return hmac.compare_digest(given.encode("utf-8", "replace"), self.token)


def _cookie(scope: Scope, name: str) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == b"cookie":
            jar: SimpleCookie = SimpleCookie()
            try:
                jar.load(value.decode("latin-1"))
            except Exception:  # a malformed header is no token
                return None
            if name in jar:
                return jar[name].value
    return None


def _refused(status: int, why: str) -> Response:
    return PlainTextResponse(
        f"fabric-memory ui: {why}. Open the URL the server printed when it started "
        "(it carries the token).\n", status_code=status, headers=SECURITY_HEADERS)


class Headers:
    """The security headers on every answer (pages, JSON, events, static files)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def with_headers(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {key.lower() for key, _ in headers}
                headers.extend((key.encode(), value.encode())
                               for key, value in SECURITY_HEADERS.items()
                               if key.encode() not in present)
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, with_headers)


# --- rendering -------------------------------------------------------------------------


def _environment() -> Environment:
    env = Environment(loader=FileSystemLoader(HERE / "templates"),
                      autoescape=select_autoescape(default=True, default_for_string=True),
                      trim_blocks=True, lstrip_blocks=True)
    env.filters["linked"] = _linked
    env.filters["short"] = _short
    env.globals["query"] = _query
    env.globals["session_url"] = session_url
    env.globals["summary_url"] = lambda handle, **values: _query(f"/summary/{quote(handle)}",
                                                                 **values)
    env.globals["raw_url"] = lambda handle, address: _query(f"/raw/{quote(handle)}",
                                                              address=address)
    return env


def _linked(text: str, page: Mapping[str, Any]) -> Markup:
    """``text`` escaped, each address of the session in it a link to its entry."""
    known: Mapping[str, int] = page["addressPages"]
    out = []
    for part, address in pages.address_spans(text, known):
        if address is None:
            out.append(str(escape(part)))
            continue
        target = ("#" + address if known[address.split("/", 1)[0]] == page["page"]
                  else session_url(page["handle"], at=address) + "#" + address)
        out.append(f'<a class="address" href="{escape(target)}">{escape(address)}</a>')
    return Markup("".join(out))


def _short(text: str | None, limit: int = 19) -> str:
    return (text or "")[:limit].replace("T", " ")


def session_url(handle: str, **values: Any) -> str:
    """The page of a session (named by id, or by path when its id is not unique)."""
    return _query(f"/session/{quote(handle)}", **values)


def _query(path: str, **values: Any) -> str:
    kept = {key: ("yes" if value else "no") if isinstance(value, bool) else value
            for key, value in values.items() if value is not None and value != ""}
    return path + ("?" + urlencode(kept) if kept else "")


class Pages:
    """The routes: each one computes its page off the event loop, then renders it as HTML
    or JSON."""

    def __init__(self, places: Places) -> None:
        self.places = places
        self.env = _environment()

    def answer(self, request: Request, template: str, value: Mapping[str, Any],
               as_json: bool) -> Response:
        if as_json or request.query_params.get("format") == "json":
            return Response(orjson.dumps(value), media_type="application/json")
        html = self.env.get_template(template).render(page=value, request=request)
        return HTMLResponse(html)

    async def sessions(self, request: Request) -> Response:
        params = request.query_params
        filters: SessionsFilters = {}
        for key in ("agent", "project", "since", "until"):
            value = _through_day(key, params.get(key, "").strip())
            if value:
                filters[key] = value
        for key in ("compacted", "failed"):
            value = params.get(key, "")
            if value in ("yes", "no"):
                filters[key] = value == "yes"  # type: ignore[literal-required]
            elif value:
                raise UsageError(f"{key} {clipped(value)}: use yes or no")
        page = _number(params.get("page"), "page", 1)
        value = await _off_loop(lambda: pages.sessions_page(self.places, filters, page))
        return self.answer(request, "sessions.html", value,
                           request.url.path.endswith(".json"))

    async def session(self, request: Request) -> Response:
        name, as_json = _json_suffix(request.path_params["session"])
        params = request.query_params
        at = params.get("at") or None
        page = _number(params.get("page"), "page", None)
        value = await _off_loop(lambda: pages.session_page(self.places, name, page, at))
        return self.answer(request, "session.html", value, as_json)

    async def summary(self, request: Request) -> Response:
        name, as_json = _json_suffix(request.path_params["session"])
        until = request.query_params.get("until") or None
        value = await _off_loop(lambda: pages.summary_page(self.places, name, until))
        return self.answer(request, "summary.html", value, as_json)

    async def raw(self, request: Request) -> Response:
        name = request.path_params["session"]
        address = request.query_params.get("address", "")
        if not address:
            raise UsageError("raw needs ?address=ADDRESS")
        text = await _off_loop(lambda: pages.raw_line(self.places, name, address))
        return PlainTextResponse(text)

    async def search(self, request: Request) -> Response:
        params = request.query_params
        query = params.get("q", "")
        filters: SearchFilters = {}
        for key in SEARCH_KEYS:
            value = _through_day(key, params.get(key, "").strip())
            if value:
                filters[key] = value  # type: ignore[literal-required]
        offset = _number(params.get("offset"), "offset", 0)
        value = await _off_loop(lambda: pages.search_page(self.places, query, filters, offset))
        return self.answer(request, "search.html", value, request.url.path.endswith(".json"))

    async def stats(self, request: Request) -> Response:
        value = await _off_loop(lambda: pages.stats_page(self.places))
        if request.url.path.endswith(".json") or request.query_params.get("format") == "json":
            return Response(orjson.dumps(value), media_type="application/json")
        charts = {
            "days": bar_chart([(row["day"], row["entries"]) for row in value["days"]],
                              "entries per day"),
            "tools": bar_chart([(row["tool"], row["failureRate"] * 100)
                                for row in value["tools"][:20]], "failure rate per tool (%)"),
            "compactions": bar_chart([(c["address"], c["tokensBefore"] or 0)
                                      for c in reversed(value["compactions"][:40])],
                                     "tokensBefore of each compaction"),
        }
        html = self.env.get_template("stats.html").render(page=value, charts=charts,
                                                            request=request)
        return HTMLResponse(html)

    async def events(self, request: Request) -> Response:
        """The list's stream: ``changed`` whenever the index commits (the live index found
        a new or grown session)."""
        places = self.places

        async def changes() -> AsyncIterator[dict[str, str]]:
            last = await _off_loop(lambda: pages.generation(places))
            while True:
                await anyio.sleep(LIVE_SECONDS)
                now = await _off_loop(lambda: pages.generation(places))
                if now != last:
                    last = now
                    yield {"event": "changed", "data": str(now)}

        return EventSourceResponse(changes())

    async def live(self, request: Request) -> Response:
        """A session's stream: the entries appended since the page was drawn, as HTML
        (``entries``), each time the file grows."""
        name = request.path_params["session"]
        after = _number(request.query_params.get("after"), "after", 0)
        places, template = self.places, self.env.get_template("entry.html")
        drawn = await _off_loop(lambda: pages.session_page(places, name, 1))
        # Page 0: every address link in an appended entry goes through ``?at=``.
        value = {"handle": drawn["handle"], "addressPages": drawn["addressPages"], "page": 0}

        async def appended() -> AsyncIterator[dict[str, str]]:
            nonlocal after
            last = await _off_loop(lambda: pages.stat_of(places, name))
            while True:
                await anyio.sleep(LIVE_SECONDS)
                try:
                    now = await _off_loop(lambda: pages.stat_of(places, name))
                    if now == last:
                        continue
                    last = now
                    new = await anyio.to_thread.run_sync(pages.entries_after, places, name,
                                                         after)
                except FabricMemoryError:
                    return  # forgotten or gone: the stream ends
                if new:
                    after += len(new)
                    html = "".join(template.render(entry=entry, page=value) for entry in new)
                    yield {"event": "entries", "data": html.replace("\r", "")}

        return EventSourceResponse(appended())


def _through_day(key: str, value: str) -> str:
    """``until`` given as a day means through its end (the filters take an instant)."""
    return f"{value}T23:59:59.999Z" if key == "until" and DAY.fullmatch(value) else value


DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


def _json_suffix(name: str) -> tuple[str, bool]:
    return (name[: -len(".json")], True) if name.endswith(".json") else (name, False)


def _number(text: str | None, name: str, default: Any) -> Any:
    if text is None or text == "":
        return default
    if not text.isdigit() or len(text) > 9:
        raise UsageError(f"{name} {clipped(text)}: not a whole number")
    return int(text)


async def _off_loop(call: Callable[[], Any]) -> Any:
    return await anyio.to_thread.run_sync(call)


NOT_FOUND = frozenset({"session_not_found", "session_forgotten", "address_not_found",
                       "ambiguous_session"})


def _status(exc: FabricMemoryError) -> int:
    """The HTTP status of a library error: the request's fault (4xx) or the store's (503)."""
    if isinstance(exc, UsageError | QueryError):
        return 400
    if isinstance(exc, ExpandError):
        return 404 if exc.code in NOT_FOUND else 503 if exc.code == "source_unavailable" else 400
    return 503


def build_app(places: Places, token: str, cookie: str,
              log: Callable[[str], None] | None = None) -> ASGIApp:
    """The whole application: routes behind the token gate and the security headers."""
    routes = Pages(places)
    env = routes.env

    async def failed(request: Request, exc: Exception) -> Response:
        if isinstance(exc, FabricMemoryError):
            status = _status(exc)
            message = f"{exc.code}: {exc.message}"
        else:
            status, message = 500, f"internal error ({type(exc).__name__}); see the server's log"
            if log is not None:
                log(f"{request.url.path}: {type(exc).__name__}: {exc}")
        wants_json = (request.url.path.endswith(".json")
                      or request.query_params.get("format") == "json")
        if wants_json:
            return Response(orjson.dumps({"error": {"status": status, "message": message}}),
                            status_code=status, media_type="application/json")
        html = env.get_template("error.html").render(status=status, message=message,
                                                     request=request)
        return HTMLResponse(html, status_code=status)

    async def not_found(request: Request, exc: Exception) -> Response:
        html = env.get_template("error.html").render(
            status=404, message=f"no page at {request.url.path}", request=request)
        return HTMLResponse(html, status_code=404)

    app = Starlette(routes=[
        Route("/", routes.sessions),
        Route("/sessions.json", routes.sessions),
        Route("/session/{session:path}", routes.session),
        Route("/summary/{session:path}", routes.summary),
        Route("/raw/{session:path}", routes.raw),
        Route("/live/{session:path}", routes.live),
        Route("/search", routes.search),
        Route("/search.json", routes.search),
        Route("/stats", routes.stats),
        Route("/stats.json", routes.stats),
        Route("/events", routes.events),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ], exception_handlers={Exception: failed, FabricMemoryError: failed, 404: not_found})
    return Headers(TokenGate(app, token, cookie))


# --- running ---------------------------------------------------------------------------


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def can_open_browser() -> bool:
    """Whether a graphical browser can be opened here (a terminal browser would take the
    terminal the server prints to)."""
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


class _Server(uvicorn.Server):
    """uvicorn's server, except that after a graceful stop on SIGTERM or SIGINT it returns
    (uvicorn raises the signal again, which would end the process before the live index
    thread finishes its step)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        with super().capture_signals():
            yield
            self._captured_signals.clear()  # what uvicorn would raise again on leaving


def run_ui(places: Places, *, host: str = "127.0.0.1", port: int = 0, token: str | None = None,
           open_browser: bool = True, agents: str | None = None,
           log: Callable[[str], None] | None = None,
           print_url: Callable[[str], None] = print) -> None:
    """Serve the pages until interrupted: bind, print the URL with its token (the first line
    of stdout), open a browser, keep the index live in a thread."""
    if not is_loopback(host) and token is None:
        raise UsageError(f"--host {clipped(host)} is not a loopback address: anyone who reaches "
                         "it could read your sessions; pass --token with a secret of your own "
                         f"(at least {MIN_TOKEN_CHARS} characters) to serve it anyway")
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise UsageError(f"--token: use at least {MIN_TOKEN_CHARS} characters")
    if not 0 <= port <= 65535:
        raise UsageError(f"--port {clipped(port)}: use 0 (any free port) to 65535")
    places.open()  # bad --sessions / --index names fail here, before anything is bound
    chosen = token or new_token()
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named: asyncio sets TCP_NODELAY only on sockets that say so, and without
    # it a kept-alive connection waits 40 ms for each answer (Nagle and delayed ACKs).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UsageError(f"--host {clipped(host)} --port {port}: cannot listen there "
                         f"({exc.strerror or exc}); pick another --port") from None
    sock.listen(128)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{bound}/?token={chosen}"
    app = build_app(places, chosen, f"fabric_memory_ui_{bound}", log)
    stop = threading.Event()
    watcher = threading.Thread(target=keep_live, kwargs={
        "sessions": places.sessions, "index": places.index, "stop": stop, "log": log,
        "agents": agents}, name="fabric-memory-live", daemon=True)
    watcher.start()
    threading.Thread(target=pages.warm_counts, args=(places, stop), name="fabric-memory-warm",
                     daemon=True).start()
    print_url(url)
    if open_browser and can_open_browser():
        threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                            timeout_graceful_shutdown=2, http="h11",
                            h11_max_incomplete_event_size=MAX_REQUEST_HEAD)
    try:
        _Server(config).run(sockets=[sock])
    finally:
        stop.set()
        watcher.join(timeout=5)
        sock.close()
