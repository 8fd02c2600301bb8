"""The ``fabric-memory`` command line: parse options, call one library function, render.

Each command is a ``(name, help, add_arguments, run)`` row in ``COMMANDS``; ``run``
returns the JSON-able result and a human renderer. Errors from the library arrive as
:class:`FabricMemoryError` and become one line on stderr (or a JSON error object
with ``--json``) and a non-zero exit status.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from .errors import FabricMemoryError, printable


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a command produced: its JSON value, its human text and its exit status."""

    value: Any
    human: str
    status: int = 0


Runner = Callable[[argparse.Namespace], Outcome]


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Runner
    json_flag: bool = True
    """False when the command defines its own ``--json`` (``certify``: see _JsonOrReport)."""


def write_json(value: Any) -> None:
    try:
        data = orjson.dumps(value, option=orjson.OPT_INDENT_2)
    except TypeError:  # a file name that is not UTF-8: shown with \xNN escapes
        data = orjson.dumps(_printable(value), option=orjson.OPT_INDENT_2)
    sys.stdout.buffer.write(data + b"\n")
    sys.stdout.flush()


def _printable(value: Any) -> Any:
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {printable(str(k)): _printable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_printable(item) for item in value]
    return value


# --- inspect ---------------------------------------------------------------------------


def _inspect_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session_file", metavar="SESSION_FILE", help="a session .jsonl file")
    parser.add_argument("--max-line-bytes", type=int, default=None, help="longest line to read")


def _run_inspect(args: argparse.Namespace) -> Outcome:
    from .inspect import inspect_session, render_inspection

    kwargs = {} if args.max_line_bytes is None else {"max_line_bytes": args.max_line_bytes}
    report = inspect_session(args.session_file, **kwargs)
    return Outcome(report, render_inspection(report))


# --- memory index ----------------------------------------------------------------------


def deprecated(old: str, new: str) -> None:
    """The one-line note an old spelling prints; it keeps working for one release."""
    print(f"fabric-memory: {old} is deprecated and will be removed in the next release; "
          f"use {new}", file=sys.stderr)


class _IndexOrPosition(argparse.Action):
    """``expand --index``: the index directory, as everywhere; a bare integer is the old
    spelling of ``--position N`` (kept for one release, with a note)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        text = str(values)
        if re.fullmatch(r"-?\d+", text):
            deprecated(f"expand --index {text} (an entry position)",
                       f"--position {text}; --index names the index directory "
                       f"(write ./{text} for a directory of that name)")
            namespace.positions = [*namespace.positions, int(text)]
        else:
            namespace.index_dir = text


class _Folders(argparse.Action):
    """``--sessions DIR``, repeatable: the folders joined by ``:`` (as the variable lists
    them), so one value names them all."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        before = getattr(namespace, self.dest, None)
        setattr(namespace, self.dest, f"{before}{os.pathsep}{values}" if before else values)


class _Renamed(argparse.Action):
    """An old option name that stores into its new name's destination, with a note."""

    def __init__(self, option_strings: Sequence[str], dest: str, *, new: str,
                 **kwargs: Any) -> None:
        super().__init__(option_strings, dest, help=argparse.SUPPRESS, **kwargs)
        self.new = new

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        command = parser.prog.rpartition(" ")[2]
        deprecated(f"{command} {option_string}", self.new)
        setattr(namespace, self.dest, values)


def _locations(parser: argparse.ArgumentParser, *, sessions: bool = True,
               index_action: type[argparse.Action] | None = None) -> None:
    if sessions:
        parser.add_argument("--sessions", metavar="DIR", default=None, action=_Folders,
                            help="a sessions folder, repeatable (default "
                            "$FABRIC_MEMORY_SESSIONS, ':'-separated; else every agent's "
                            "folder that exists, see docs/agents.md)")
    parser.add_argument("--index", dest="index_dir", metavar="DIR", default=None,
                        action=index_action or "store",
                        help="index directory (default $FABRIC_MEMORY_HOME/index or "
                        "~/.cache/fabric-memory/index)")


def _hot(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--hot-sessions", type=int, default=50, metavar="N",
                        help="newest N sessions are hot: checked against their files per query")


def _agents(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--agents", default=None, metavar="A,B",
                        help="read only these agents' sessions: pi, omp, claude-code, codex, "
                        "catui, fabro, copilot, kimi, gemini, … (docs/agents.md; default "
                        "$FABRIC_MEMORY_AGENTS, else all)")


def _reindex_arguments(parser: argparse.ArgumentParser) -> None:
    _locations(parser)
    _agents(parser)
    parser.add_argument("--full", action="store_true", help="re-read every session")
    parser.add_argument("--workers", type=int, default=None, metavar="N",
                        help="parser processes (default min(2, CPUs); capped at the CPU count)")
    parser.add_argument("--session", default=None, metavar="FILE",
                        help="only this session file (under a sessions root)")
    parser.add_argument("--cluster", default=None, metavar="ADDRESS",
                        help="build a sharded index on a Dask cluster: its scheduler "
                        "(tcp://HOST:8786) or local:N (N local worker processes); needs the "
                        "cluster extra, see docs/scale.md")
    parser.add_argument("--sharded", action="store_true",
                        help="build a sharded index on this machine (--workers processes; "
                        "what --cluster does on a cluster)")
    parser.add_argument("--shard-mb", type=int, default=256, metavar="MB",
                        help="session megabytes per shard of a sharded index (default 256)")
    parser.add_argument("--watch", action="store_true",
                        help="then keep watching: re-index each session file as it changes "
                        "(until Ctrl-C or SIGTERM; needs the watch extra)")


def _run_reindex(args: argparse.Namespace) -> Outcome:
    from .memory.reindex import reindex
    from .memory.render import render_progress, render_reindex
    from .memory.report import Progress

    if args.watch:
        return _watch(args)

    shown = [0.0]

    def progress(step: Progress) -> None:
        now = time.monotonic()
        if now - shown[0] >= 0.1 or step.done == step.total:
            shown[0] = now
            sys.stderr.write("\r" + render_progress(step))
            sys.stderr.flush()

    report = reindex(sessions=args.sessions, index=args.index_dir, full=args.full,
                     workers=args.workers, progress=progress if sys.stderr.isatty() else None,
                     session=args.session, agents=args.agents, cluster=args.cluster,
                     sharded=args.sharded,
                     shard_bytes=args.shard_mb * 1024 * 1024)
    if shown[0]:
        sys.stderr.write("\n")
    for notice in report["notices"]:
        print(f"fabric-memory reindex: {notice}", file=sys.stderr)
    return Outcome(report, render_reindex(report))


def _watch(args: argparse.Namespace) -> Outcome:
    """``reindex --watch``: the live index of ``serve`` without the server."""
    import signal
    import threading

    from .memory.live import LiveReport, watch_sessions
    from .memory.render import render_reindex

    if args.session is not None:
        from .errors import UsageError

        raise UsageError("--watch watches the whole sessions root; drop --session")
    if args.cluster is not None:
        from .errors import UsageError

        raise UsageError("--watch keeps an index live on this machine; run the --cluster "
                         "build first, then --watch without --cluster")
    stop = threading.Event()
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, lambda *_: stop.set())
    steps = {"catch-up": 0, "changes": 0}

    def step(done: LiveReport) -> None:
        steps[done.kind] += 1
        report = done.report
        if done.kind == "catch-up" or report["indexed"] or report["removed"] \
                or report["invalid"]:
            if args.json:
                sys.stdout.buffer.write(orjson.dumps({"step": done.kind, **report}) + b"\n")
                sys.stdout.flush()
            else:
                print(f"[{done.kind}] {render_reindex(report)}", flush=True)

    def failed(exc: FabricMemoryError) -> None:
        print(f"fabric-memory reindex: {exc.message} (retrying)", file=sys.stderr, flush=True)

    if args.full:
        from .memory.reindex import reindex

        step(LiveReport("catch-up", reindex(sessions=args.sessions, index=args.index_dir,
                                            full=True, workers=args.workers,
                                            agents=args.agents)))
    watch_sessions(sessions=args.sessions, index=args.index_dir, stop=stop, on_step=step,
                   agents=args.agents,
                   on_error=failed)
    summary = {"watched": True, "steps": steps}
    # Each step was printed as it happened; --json printed one line per step.
    args.json = False
    return Outcome(summary, f"stopped after {steps['changes']} live steps")


def _recall_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("query", metavar="QUERY", nargs="?", default="",
                        help="text to find (may be empty when a filter is given)")
    parser.add_argument("--mode", choices=("literal", "phrase", "regex"), default="literal")
    parser.add_argument("--match", choices=("any", "all"), default="any",
                        help="literal mode: rank documents holding any word, those holding "
                        "all first (any, default), or only those holding every word (all)")
    for name in ("ref", "tool", "role", "provider", "action", "outcome"):
        parser.add_argument(f"--{name}", default=None, help=f"exact {name}")
    parser.add_argument("--since", default=None, metavar="T", help="ISO time, inclusive")
    parser.add_argument("--until", default=None, metavar="T", help="ISO time, inclusive")
    parser.add_argument("--session", default=None, metavar="S", help="one session (id or path)")
    parser.add_argument("--agent", default=None, metavar="NAME",
                        help="only sessions of this agent: pi, omp, claude-code, codex, catui, "
                        "fabro, copilot, kimi, gemini, … (docs/agents.md)")
    parser.add_argument("--project", default=None, metavar="DIR",
                        help="only sessions that worked in DIR or a folder inside it")
    parser.add_argument("--branches", choices=("active", "all"), default="all")
    parser.add_argument("--limit", type=int, default=10, metavar="N",
                        help="hits per page (at most 50; more is clamped)")
    parser.add_argument("--offset", type=int, default=0, metavar="K")
    _locations(parser)
    _hot(parser)


def _run_recall(args: argparse.Namespace) -> Outcome:
    from .memory.recall import recall
    from .memory.render import render_recall

    response = recall(
        args.query, mode=args.mode, match=args.match, ref=args.ref, tool=args.tool,
        role=args.role, provider=args.provider, action=args.action, outcome=args.outcome,
        since=args.since, until=args.until, session=args.session, agent=args.agent,
        branches=args.branches,
        limit=args.limit, offset=args.offset, hot_sessions=args.hot_sessions,
        index=args.index_dir, sessions=args.sessions, project=args.project,
    )
    return Outcome(response, render_recall(response))


def _expand_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session", metavar="SESSION", help="session id, or a path under the root")
    parser.add_argument("--address", action="append", default=[], metavar="A",
                        help="an address a summary, a recall hit or sessions printed: an entry "
                        "(L12, a1b2c3d4), an operation (L40/3) or a phase (L40/phase:0)")
    parser.add_argument("--range", default=None, metavar="FIRST:LAST",
                        help="entry addresses, inclusive: a summary's [L12 ... L31] is "
                        "--range L12:L31")
    parser.add_argument("--entry", action="append", default=[], metavar="ID")
    parser.add_argument("--position", dest="positions", action="append", type=int, default=[],
                        metavar="N", help="entry position in file order (0-based)")
    parser.add_argument("--position-range", dest="position_range", default=None,
                        metavar="FIRST:LAST", help="entry positions (0-based), inclusive")
    parser.add_argument("--anchor", default=None, metavar="ID",
                        help="an entry id to read around (with --before/--after)")
    parser.add_argument("--before", type=int, default=0, metavar="N",
                        help="also the N entries before each selected address or entry")
    parser.add_argument("--after", type=int, default=0, metavar="N",
                        help="also the N entries after each selected address or entry")
    parser.add_argument("--expected-source-hash", default=None, metavar="H")
    parser.add_argument("--expected-lineage", default=None, metavar="L")
    parser.add_argument("--kinds", action="append", default=[], metavar="K,K",
                        help="only entries of these kinds: user, assistant, tool, edit, error, "
                        "other")
    parser.add_argument("--max-entries", type=int, default=None, metavar="N",
                        help="entries per page (default and most 200; more is clamped)")
    parser.add_argument("--max-chars", type=int, default=None, metavar="N",
                        help="characters per page (default 20,000, at most 24,000; more is "
                        "clamped)")
    parser.add_argument("--entry-chars", type=int, default=None, metavar="N",
                        help="characters of one entry of a range or neighbourhood (default "
                        "1,200): a longer one shows its head and tail")
    parser.add_argument("--entry-offset", type=int, default=0, metavar="K",
                        help="start at this entry of the selection (from a `more:` line)")
    parser.add_argument("--text-offset", type=int, default=0, metavar="K",
                        help="start at this character of the first entry (from a `more:` "
                        "line or a cut entry)")
    parser.add_argument("--show-secrets", action="store_true",
                        help="return the raw bytes: do not mask secrets (docs/secrets.md)")
    parser.add_argument("--raw", action="store_true",
                        help="each entry's verbatim source line instead of readable text")
    _locations(parser, index_action=_IndexOrPosition)
    parser.add_argument("--index-dir", dest="index_dir", metavar="DIR", action=_Renamed,
                        new="--index DIR")


def _run_expand(args: argparse.Namespace) -> Outcome:
    from .memory.expand import expand
    from .memory.render import render_expand

    limits = {name: value for name, value in (
        ("max_entries", args.max_entries), ("max_chars", args.max_chars),
        ("entry_chars", args.entry_chars)) if value is not None}
    page = expand(
        args.session, entries=args.entry, addresses=args.address, indices=args.positions,
        range=args.range, positions=args.position_range, anchor=args.anchor,
        before=args.before, after=args.after,
        expected_source_hash=args.expected_source_hash,
        expected_lineage_fingerprint=args.expected_lineage, entry_offset=args.entry_offset,
        text_offset=args.text_offset, kinds=args.kinds, show_secrets=args.show_secrets,
        raw=args.raw, index=args.index_dir, sessions=args.sessions, **limits,
    )
    return Outcome(page, render_expand(page))


def _catalog_arguments(parser: argparse.ArgumentParser) -> None:
    _locations(parser, sessions=False)
    _hot(parser)


def _sessions_arguments(parser: argparse.ArgumentParser) -> None:
    _locations(parser)
    _hot(parser)
    parser.add_argument("--project", default=None, metavar="DIR",
                        help="sessions whose cwd is DIR or a folder inside it")
    parser.add_argument("--agent", default=None, metavar="NAME",
                        help="only sessions of this agent: pi, omp, claude-code, codex, catui, "
                        "fabro, copilot, kimi, gemini, … (docs/agents.md)")
    parser.add_argument("--since", default=None, metavar="T",
                        help="modified at or after this ISO time")
    parser.add_argument("--until", default=None, metavar="T",
                        help="modified at or before this ISO time")
    parser.add_argument("--limit", type=int, default=None, metavar="N",
                        help="sessions per page (default: all)")
    parser.add_argument("--offset", type=int, default=0, metavar="K")


def _run_sessions(args: argparse.Namespace) -> Outcome:
    from .memory.catalog import list_sessions
    from .memory.render import render_sessions

    report = list_sessions(index=args.index_dir, hot_sessions=args.hot_sessions,
                           project=args.project, since=args.since, until=args.until,
                           limit=args.limit, offset=args.offset, agent=args.agent,
                           sessions=args.sessions)
    return Outcome(report, render_sessions(report))


def _serve_arguments(parser: argparse.ArgumentParser) -> None:
    _locations(parser)
    _agents(parser)
    _hot(parser)
    parser.add_argument("--no-watch", dest="live", action="store_false",
                        help="serve the index as it is; do not keep it live")


def stderr_log(command: str) -> Callable[[str], None]:
    """A door's log: one line on stderr per message (stdout is the door's own)."""
    def log(message: str) -> None:
        print(f"fabric-memory {command}: {message}", file=sys.stderr, flush=True)

    return log


def _ui_arguments(parser: argparse.ArgumentParser) -> None:
    _locations(parser)
    _agents(parser)
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1; another than loopback "
                        "needs --token)")
    parser.add_argument("--port", type=int, default=0, metavar="N",
                        help="port to listen on (default: any free port)")
    parser.add_argument("--token", default=None,
                        help="the token every request must show (default: a new random one "
                        "per start)")
    parser.add_argument("--no-open", dest="open_browser", action="store_false",
                        help="do not open a browser")
    parser.add_argument("--json", action="store_true",
                        help="the first line is JSON: url, host, port, token")


def _run_ui(args: argparse.Namespace) -> Outcome:
    try:
        from .ui.app import run_ui
    except ImportError as exc:
        from .errors import MissingExtraError

        raise MissingExtraError(
            f"ui needs the web view's packages ({exc.name or exc} is missing); install them "
            "with pip install -e '.[ui]' in the fabric-memory clone"
        ) from None
    from urllib.parse import urlsplit

    from .ui.pages import Places

    def first_line(url: str) -> None:
        if args.json:
            parts = urlsplit(url)
            url = orjson.dumps({"url": url, "host": args.host, "port": parts.port,
                                "token": url.rsplit("token=", 1)[1]}).decode()
        print(url, flush=True)

    run_ui(Places(args.sessions, args.index_dir), host=args.host, port=args.port,
           token=args.token, open_browser=args.open_browser, agents=args.agents,
           log=stderr_log("ui"), print_url=first_line)
    args.json = False  # the first line was the JSON; nothing follows it
    return Outcome(None, "")


def _run_serve(args: argparse.Namespace) -> Outcome:
    try:
        from .serve import serve
    except ImportError as exc:
        from .errors import MissingExtraError

        raise MissingExtraError(
            f"serve needs the MCP SDK ({exc.name or exc} is missing); install it with "
            "pip install -e '.[mcp]' in the fabric-memory clone"
        ) from None
    serve(sessions=args.sessions, index=args.index_dir, hot_sessions=args.hot_sessions,
          live=args.live, agents=args.agents, log=stderr_log("serve"))
    # stdout was the protocol's: nothing more goes there (--json only shapes a start-up
    # error, as in every command).
    args.json = False
    return Outcome(None, "")


def _run_stats(args: argparse.Namespace) -> Outcome:
    from .memory.catalog import stats
    from .memory.render import render_stats

    report = stats(index=args.index_dir, hot_sessions=args.hot_sessions)
    return Outcome(report, render_stats(report))


def _verify_arguments(parser: argparse.ArgumentParser) -> None:
    _locations(parser, sessions=False)


def _run_verify(args: argparse.Namespace) -> Outcome:
    from .memory.catalog import verify
    from .memory.render import render_verify

    report = verify(index=args.index_dir)
    healthy = report["changed"] == 0 and report["missing"] == 0 and not report["indexProblems"]
    return Outcome(report, render_verify(report), 0 if healthy else 1)


def _forget_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("named", nargs="*", metavar="SESSION",
                        help="a session id, or the path of its file")
    parser.add_argument("--project", default=None, metavar="DIR",
                        help="the sessions that worked in DIR or a folder inside it")
    parser.add_argument("--agent", default=None, metavar="NAME", help="one agent's sessions")
    parser.add_argument("--until", default=None, metavar="T",
                        help="sessions last modified at or before this ISO time")
    parser.add_argument("--dry-run", action="store_true", help="only list what would change")
    parser.add_argument("--undo", action="store_true",
                        help="bring forgotten sessions back (and index them again)")
    parser.add_argument("--list", action="store_true", help="list the forgotten sessions")
    _locations(parser)


def _run_forget(args: argparse.Namespace) -> Outcome:
    from .memory.forget import Selection, forget, forgotten_sessions, undo
    from .memory.render import render_forget

    if args.list:
        report = forgotten_sessions(index=args.index_dir)
    else:
        act = undo if args.undo else forget
        report = act(Selection(tuple(args.named), args.project, args.agent, args.until),
                     dry_run=args.dry_run, index=args.index_dir, sessions=args.sessions)
    return Outcome(report, render_forget(report))


def _doctor_arguments(parser: argparse.ArgumentParser) -> None:
    _locations(parser)


def _run_doctor(args: argparse.Namespace) -> Outcome:
    from .doctor import doctor, render_doctor

    report = doctor(index=args.index_dir, sessions=args.sessions)
    return Outcome(report, render_doctor(report), 0 if report["healthy"] else 1)


def _export_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session", metavar="SESSION", nargs="?", default=None,
                        help="a session id, or a path under a sessions root")
    parser.add_argument("--range", default=None, metavar="FIRST:LAST",
                        help="only these entry addresses, inclusive (a summary's [L12 ... L31])")
    parser.add_argument("--query", default=None, metavar="Q",
                        help="instead of a session: the entries a recall of Q finds")
    parser.add_argument("--limit", type=int, default=20, metavar="N",
                        help="--query: the first N hits (default 20, at most 50)")
    parser.add_argument("--format", choices=("markdown", "html", "json"), default="markdown")
    parser.add_argument("--output", default=None, metavar="FILE",
                        help="write the export to FILE (mode 0600) instead of stdout")
    parser.add_argument("--show-secrets", action="store_true",
                        help="secrets and private text as written (docs/secrets.md)")
    _locations(parser)


def _run_export(args: argparse.Namespace) -> Outcome:
    from .memory.export import export, render_export, write_export

    exported = export(args.session, range=args.range, query=args.query, limit=args.limit,
                      show_secrets=args.show_secrets, index=args.index_dir,
                      sessions=args.sessions)
    if args.output is not None:
        return Outcome(exported, write_export(exported, args.format, args.output))
    return Outcome(exported, render_export(exported, args.format))


# --- hook / compact ---------------------------------------------------------------------


def _hook_arguments(parser: argparse.ArgumentParser) -> None:
    del parser  # one JSON event on stdin, nothing else


def _run_hook(args: argparse.Namespace) -> Outcome:
    from .compaction.hook import run_hook

    result, status = run_hook(sys.stdin.buffer.read())
    return Outcome(result, orjson.dumps(result).decode(), status)


def _handoff_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--max-bytes", type=int, default=None, metavar="N",
                        help="the packet's bound in bytes (default 8192, or "
                        "$FABRIC_MEMORY_HANDOFF_BYTES)")
    parser.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                        help="give up (print nothing) past this time (default 2, or "
                        "$FABRIC_MEMORY_HANDOFF_BUDGET)")


def _run_handoff(args: argparse.Namespace) -> Outcome:
    from .handoff import run_handoff

    try:
        data = sys.stdin.buffer.read()
    except OSError:
        data = b""
    run = run_handoff(data, max_bytes=args.max_bytes, budget_s=args.budget)
    if run.running:  # the reader is past its budget: leave now, it must not hold the host
        os._exit(0)
    if run.output is None:
        args.json = False  # nothing at all on stdout, even with --json
        return Outcome(None, "")
    if not args.json:  # UTF-8 bytes whatever the locale's encoding of stdout
        sys.stdout.buffer.write(run.output.encode() + b"\n")
        sys.stdout.flush()
        return Outcome(None, "")
    return Outcome(orjson.loads(run.output), run.output)


def _compact_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session_file", metavar="SESSION_FILE",
                        help="a session .jsonl file of any agent")
    parser.add_argument("--until", default=None, metavar="ADDRESS",
                        help="summarize the active branch through this entry (e.g. L1820); "
                        "any agent's session, nothing appended")
    parser.add_argument("--append", action="store_true",
                        help="append the compaction entry (a Pi session, no --until)")
    parser.add_argument("--keep-recent-tokens", type=int, default=None, metavar="N",
                        help="tokens of recent context to keep verbatim (Pi's default)")
    parser.add_argument("--reserve-tokens", type=int, default=None, metavar="N",
                        help="tokens reserved for the reply (Pi's default)")
    parser.add_argument("--context-window", type=int, default=None, metavar="N",
                        help="report whether Pi would compact at this window")


def _run_compact(args: argparse.Namespace) -> Outcome:
    from .compaction.compactor import Cancel
    from .compaction.files import SessionCompaction
    from .compaction.prepare import CompactionSettings
    from .compaction.span import compact_file

    given = {"reserve_tokens": args.reserve_tokens, "keep_recent_tokens": args.keep_recent_tokens}
    settings = CompactionSettings(**{k: v for k, v in given.items() if v is not None})
    result = compact_file(args.session_file, settings, until=args.until,
                          context_window=args.context_window, append=args.append)
    cancelled = isinstance(result, SessionCompaction) and isinstance(result.outcome, Cancel)
    return Outcome(result.to_json(), result.describe(), int(cancelled))


# --- pi --------------------------------------------------------------------------------


def _pi_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="pi_command", metavar="SUBCOMMAND", required=True)
    sub.add_parser("path", help="print the extension's entry file (what pi -e PATH loads)")
    install = sub.add_parser("install", help="make Pi load the extension (a package in Pi's "
                             "settings, as pi install does); the same as install pi")
    install.add_argument("--agent-dir", default=None, metavar="DIR",
                         help="Pi's agent directory (default $PI_CODING_AGENT_DIR or ~/.pi/agent)")
    install.add_argument("--local", action="store_true",
                         help="the project's .pi/settings.json instead")
    install.add_argument("--uninstall", action="store_true", help="remove what install added")
    tool = sub.add_parser("tool", help="run a memory tool: its JSON arguments on stdin, its "
                          "JSON answer on stdout (what the extension calls)")
    tool.add_argument("name", metavar="NAME", help="memory_recall or memory_expand")
    for child in (sub.choices["path"], install):
        child.add_argument("--json", action="store_true", help="machine-readable output")
    tool.set_defaults(json=True)  # the answer is JSON, and so is an error


def _run_pi(args: argparse.Namespace) -> Outcome:
    if args.pi_command == "path":
        from .pi import EXTENSION_ENTRY

        return Outcome({"path": str(EXTENSION_ENTRY)}, str(EXTENSION_ENTRY))
    if args.pi_command == "install":
        args.host = "pi"
        return _run_install(args)
    from .arguments import MAX_JSON_BYTES
    from .pi.tools import call_tool, read_arguments

    arguments = read_arguments(args.name, sys.stdin.buffer.read(MAX_JSON_BYTES + 1))
    return Outcome(call_tool(args.name, arguments), "")


# --- quickstart / install --------------------------------------------------------------


def _quickstart_arguments(parser: argparse.ArgumentParser) -> None:
    del parser  # it decides for itself: the user's sessions, else the bundled samples


def _run_quickstart(args: argparse.Namespace) -> Outcome:
    from .quickstart import quickstart, render_quickstart

    report = quickstart()
    return Outcome(report, render_quickstart(report))



def _install_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="host", metavar="HOST", required=True)
    claude = sub.add_parser("claude", help="Claude Code: the MCP server in ~/.claude.json, the "
                            "SessionStart(compact) and UserPromptSubmit hooks in "
                            "~/.claude/settings.json ($CLAUDE_CONFIG_DIR when set)")
    claude.add_argument("--project", default=None, metavar="DIR",
                        help="the project's .mcp.json and .claude/settings.json instead")
    sub.add_parser("codex", help="Codex: the MCP server, the SessionStart(compact) and "
                   "UserPromptSubmit hooks and their trust in $CODEX_HOME/config.toml "
                   "(~/.codex/config.toml)")
    sub.add_parser("copilot", help="GitHub Copilot CLI: the MCP server in "
                   "$COPILOT_HOME/mcp-config.json (~/.copilot/mcp-config.json)")
    sub.add_parser("cursor", help="Cursor (editor and cursor-agent): the MCP server in "
                   "~/.cursor/mcp.json")
    sub.add_parser("goose", help="Goose: the MCP server as an extension in "
                   "~/.config/goose/config.yaml (needs the goose extra)")
    for host, where in (("gemini", "$GEMINI_CLI_HOME/.gemini/settings.json (~)"),
                        ("qwen", "~/.qwen/settings.json"),
                        ("cline", "the extension's settings/cline_mcp_settings.json"),
                        ("roo-code", "the extension's settings/mcp_settings.json"),
                        ("kilo-code", "the extension's settings/mcp_settings.json"),
                        ("opencode", "mcp of $XDG_CONFIG_HOME/opencode/opencode.json"),
                        ("continue", "~/.continue/mcpServers/fabric-memory.json")):
        sub.add_parser(host, help=f"the MCP server in {where} (docs/agents.md)")
    pi = sub.add_parser("pi", help="Pi: the extension in packages of Pi's settings (what "
                        "pi install does)")
    pi.add_argument("--agent-dir", default=None, metavar="DIR",
                    help="Pi's agent directory (default $PI_CODING_AGENT_DIR or ~/.pi/agent)")
    pi.add_argument("--local", action="store_true", help="the project's .pi/settings.json")
    for child in sub.choices.values():
        child.add_argument("--uninstall", action="store_true", help="remove what install added")
        child.add_argument("--json", action="store_true", help="machine-readable output")


def _run_install(args: argparse.Namespace) -> Outcome:
    if args.host == "pi":
        from .pi.install import install, render_install

        pi = install(args.agent_dir, local=args.local, uninstall=args.uninstall)
        return Outcome(pi, render_install(pi))
    from .install.report import render_host_report

    if args.host == "claude":
        from .install.claude import install_claude

        report = install_claude(args.project, uninstall=args.uninstall)
    elif args.host == "codex":
        from .install.codex import install_codex

        report = install_codex(uninstall=args.uninstall)
    elif args.host == "goose":
        from .install.goose import install_goose

        report = install_goose(uninstall=args.uninstall)
    else:  # a host whose MCP servers are in one JSON file (install/mcp_json.py)
        from .install.mcp_json import install_json_host

        report = install_json_host(args.host, uninstall=args.uninstall)
    return Outcome(report, render_host_report(report))


# --- certify ----------------------------------------------------------------------------


class _JsonOrReport(argparse.Action):
    """``certify --json``: print the report as JSON, as ``--json`` does everywhere; with a
    value it is the old spelling of ``--report PATH`` (kept for one release, with a note)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        if values is None:
            namespace.json = True
        else:
            deprecated(f"certify --json {values}", f"--report {values} (--json alone prints "
                       "the report as JSON)")
            namespace.report_path = values


def _certify_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--count", type=int, default=1000, metavar="N",
                        help="synthetic sessions to generate and index (full scale: 1,000)")
    parser.add_argument("--sessions", dest="count", type=int, metavar="N", action=_Renamed,
                        new="--count N")
    parser.add_argument("--cycles", type=int, default=100, metavar="N",
                        help="compaction cycles of the endurance session (full scale: 100)")
    parser.add_argument("--seed", default=None, metavar="S", help="generator seed (default 991)")
    parser.add_argument("--report", dest="report_path", default=None, metavar="PATH",
                        help="also write the JSON report to PATH")
    parser.add_argument("--json", nargs="?", default=False, metavar="PATH",
                        action=_JsonOrReport, help="machine-readable output")
    parser.add_argument("--workdir", default=None, metavar="DIR",
                        help="keep the generated data in DIR (default: a temporary directory, "
                        "removed)")


def _run_certify(args: argparse.Namespace) -> Outcome:
    from pathlib import Path

    from .certify.harness import Config, certify, parse_seed
    from .certify.report import render_progress, render_report

    def progress(phase: str, done: int, total: int) -> None:
        sys.stderr.write("\r" + render_progress(phase, done, total))
        sys.stderr.flush()

    config = Config(
        sessions=args.count, cycles=args.cycles, seed=parse_seed(args.seed),
        workdir=None if args.workdir is None else Path(args.workdir),
        report_path=None if args.report_path is None else Path(args.report_path),
    )
    tty = sys.stderr.isatty()
    report = certify(config, progress=progress if tty else None)
    if tty:
        sys.stderr.write("\n")
    return Outcome(report.to_json(), render_report(report), 0 if report.passed else 1)


# --- audit -----------------------------------------------------------------------------


def _audit_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sessions", metavar="DIR", default=None,
                        help="sessions root (default $FABRIC_MEMORY_SESSIONS, else "
                        "Pi's sessions folder plus ~/.omp/agent/sessions when present)")
    parser.add_argument("--secrets", action="store_true",
                        help="list where secrets sit (path:line address kind, never the value) "
                        "instead of projection violations")


def _run_audit(args: argparse.Namespace) -> Outcome:
    if args.secrets:
        from .audit import audit_secrets, render_secret_audit

        secrets = audit_secrets(args.sessions)
        return Outcome(secrets, render_secret_audit(secrets), 1 if secrets["findings"] else 0)
    from .audit import audit_sessions, render_audit

    report = audit_sessions(args.sessions)
    return Outcome(report, render_audit(report), 1 if report["findings"] else 0)


COMMANDS: list[Command] = [
    Command("inspect", "summarize one session file: branch, hashes, Fabric verdicts",
            _inspect_arguments, _run_inspect),
    Command("hook", "compaction hook over stdio: one session_before_compact event in, "
            "one JSON result out", _hook_arguments, _run_hook),
    Command("handoff", "SessionStart(compact) and UserPromptSubmit hook for Claude Code and "
            "Codex: the host's hook JSON in, an addressed recovery packet about the compacted "
            "span, or the prompt's memory, out (nothing on any failure)", _handoff_arguments,
            _run_handoff),
    Command("compact", "compact a session file (print it, or --append the compaction entry); "
            "any agent's session, or --until a cut: the summary through that entry",
            _compact_arguments, _run_compact),
    Command("reindex", "index changed sessions into the memory index",
            _reindex_arguments, _run_reindex),
    Command("recall", "search the memory index (text and exact filters)",
            _recall_arguments, _run_recall),
    Command("expand", "read exact entries or operations of a session as text (--raw: "
            "verbatim lines)",
            _expand_arguments, _run_expand),
    Command("sessions", "list indexed sessions with tier, counts and hashes",
            _sessions_arguments, _run_sessions),
    Command("stats", "counts and sizes of the memory index", _catalog_arguments, _run_stats),
    Command("verify", "check every indexed session against its file",
            _verify_arguments, _run_verify),
    Command("forget", "take sessions out of memory for good (--undo brings them back); "
            "see docs/privacy.md", _forget_arguments, _run_forget),
    Command("doctor", "check every host's MCP server and hooks, the index, its lock and the "
            "hooks' log; print the command that fixes each problem", _doctor_arguments,
            _run_doctor),
    Command("export", "a session, an address range or a search's hits as Markdown, HTML or "
            "JSON, addresses kept, secrets masked", _export_arguments, _run_export),
    Command("serve", "MCP server over stdio (tools recall, expand, sessions) on a live "
            "index; needs the mcp extra", _serve_arguments, _run_serve),
    Command("ui", "a local web view of every agent's sessions, search and stats on a live "
            "index (loopback, token); needs the ui extra", _ui_arguments, _run_ui,
            json_flag=False),
    Command("audit", "report persisted trace arguments that break the exact-ref projection "
            "(by address and rule, never the values)", _audit_arguments, _run_audit),
    Command("pi", "the Pi extension: its path, install into Pi's settings, the memory "
            "tools it calls", _pi_arguments, _run_pi, json_flag=False),
    Command("quickstart", "index your sessions (else the bundled samples, into this clone's "
            "own index) and show a recall and the sessions", _quickstart_arguments,
            _run_quickstart),
    Command("install", "make a host use fabric-memory: claude and codex get the MCP server "
            "and the handoff hooks (after a compaction, with each prompt), pi the extension, "
            "every other host the MCP server", _install_arguments,
            _run_install, json_flag=False),
    Command("certify", "run the certification (compaction endurance, memory, "
            "continuation QA) and report every check", _certify_arguments, _run_certify,
            json_flag=False),
]


class _Version(argparse.Action):
    """``--version``, reading the package metadata only when asked."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        from . import __version__

        parser.exit(message=f"fabric-memory {__version__}\n")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole parser, or (``only``) one with just that command: building every
    sub-parser costs more than a recall takes to answer."""
    parser = argparse.ArgumentParser(
        prog="fabric-memory",
        description="Compaction and memory index for coding-agent sessions.",
    )
    parser.add_argument("--version", action=_Version, nargs=0,
                        help="show the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        if only is not None and command.name != only:
            continue
        child = sub.add_parser(command.name, help=command.help, description=command.help)
        command.add_arguments(child)
        if command.json_flag:
            child.add_argument("--json", action="store_true", help="machine-readable output")
        child.set_defaults(runner=command.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    named = given[0] if given and any(c.name == given[0] for c in COMMANDS) else None
    args = build_parser(named).parse_args(given)
    try:
        outcome: Outcome = args.runner(args)
    except FabricMemoryError as exc:
        if getattr(args, "json", False):
            write_json({"error": exc.to_json()})
        print(f"fabric-memory {args.command}: {printable(exc.message)}", file=sys.stderr)
        return exc.exit_status
    except KeyboardInterrupt:
        print(f"fabric-memory {args.command}: interrupted", file=sys.stderr)
        return 130
    if args.json:
        write_json(outcome.value)
    elif outcome.human:
        human = printable(outcome.human)
        sys.stdout.write(human if human.endswith("\n") else human + "\n")
    return outcome.status


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
