"""``fabric-memory handoff`` on ``UserPromptSubmit``: memory that arrives with the prompt.

A host's ``UserPromptSubmit`` hook JSON carries the user's ``prompt`` beside
``session_id``, ``transcript_path`` and ``cwd``. The prompt's content words
(:func:`query_words`: no stop words, no chat words such as "continue" or "thanks") are
recalled over what the model no longer sees: this session before its last compaction first
(:func:`out_of_view`: what the host's compaction replaced by its summary), then the
project's other sessions. A hit is given to the model only when it clears the relevance bar
(:func:`clears_bar`: the passage shown holds enough of the prompt's words, weighed by their
rarity in the index, and no turn the model still sees holds them all). A passage comes with
the turns beside it that say what it does not (:func:`with_neighbours`): the user message a
reply answers and the output it read, the output of a call, the call that made an output,
the user's answer to a question. At most :data:`MAX_CONTEXT_BYTES` of passages go, each
with its address, and a passage already given in this session is not given again
(:class:`Given`, a small state file per session in the fabric-memory home). Anything else
gives nothing: a greeting, a question the sessions never touched, one whose answer the
kept turns show.

The index is read as committed (no hot-tier refresh: a query never writes and never waits on
the writer; a session the index does not hold yet adds nothing of its own). The hook's
failing-open wrapper, time budget and log are :func:`fabric_memory.handoff.run_handoff`'s.
"""

from __future__ import annotations

import itertools
import math
import os
import re
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Final

import orjson

from .errors import HandoffError, QueryError, clipped
from .hook_json import read_hook_object
from .words import STOP_WORDS, is_cjk, words

if TYPE_CHECKING:
    from .memory.recall import RecallHit
    from .view import EntryView

EVENT: Final = "UserPromptSubmit"
MAX_CONTEXT_BYTES: Final = 2048
"""The injected context's bound (its text, in UTF-8 bytes)."""
MAX_QUERY_WORDS: Final = 24
"""A longer prompt (a paste) is recalled by its first content words."""
MIN_QUERY_WORDS: Final = 2
"""A prompt with fewer content words recalls nothing: one word says too little."""
MIN_HELD: Final = 2
WEIGHT_SHARE: Final = 0.35
"""A hit clears the bar when its passage holds at least :data:`MIN_HELD` of the prompt's
content words carrying at least this share of their weight (:func:`weights`)."""
ABSENT_WEIGHT: Final = 2
"""A word no indexed entry holds weighs this many times its inverse document frequency: it
names something memory never saw ("photosynthesis"), so the other words of such a prompt
must carry more (measured on the dev probes and prompts, bench/prompt_context.py)."""
HITS_PER_SEARCH: Final = 10
PASSAGE_CHARS: Final = 400
"""A passage: the best fragment of its entry, at most this long (recall's snippet)."""
PASSAGE_BYTES: Final = 480
NEIGHBOUR_BYTES: Final = 200
"""A turn beside a passage (:func:`with_neighbours`): at most this much of its start."""
REACH: Final = 3
"""How far before a passage its turn may be (a host writes a reply's thinking, text and
each tool call as entries of their own)."""
ID_CHARS: Final = 6
"""A call's id is at least this long (shorter, an output's last word could be a word the call
says: "done")."""
NEIGHBOUR_FIELDS: Final = ("kind", "address", "entry_id", "position", "role", "tool", "type",
                           "text")
MAX_TRANSCRIPT_BYTES: Final = 32 * 1024 * 1024
STATE_FOLDER: Final = "prompt-context"
MAX_GIVEN: Final = 1000
"""Passages remembered per session (the oldest forgotten first)."""
AGENTS: Final = frozenset({"claude-code", "codex", "pi"})
BOUNDARY: Final = "system:compact_boundary"
CHAT_WORDS: Final = frozenset({
    "ok", "okay", "yes", "yeah", "yep", "no", "nope", "sure", "thanks", "thank", "thx", "ty",
    "please", "pls", "hi", "hello", "hey", "continue", "go", "ahead", "proceed", "carry",
    "keep", "going", "next", "great", "good", "nice", "cool", "perfect", "awesome", "done",
    "lgtm", "looks", "fine", "right", "agreed", "alright", "k", "morning", "afternoon",
    "evening", "bye", "cheers", "well", "again", "also", "try", "retry", "resume", "start",
    "stop", "wait", "hmm", "oh", "ah", "lol", "much", "lot", "tell", "know", "think", "want",
    "need", "like", "make", "sense", "one", "thing", "things", "work", "working", "works",
})
"""Words a conversational turn is made of ("ok, go ahead", "thanks, continue"): a prompt of
only these and stop words recalls nothing, and they do not count toward the bar."""
_HOST_TEXT = re.compile(r"\s*(?:<[a-z][\w-]*>|/[a-z][\w:-]*(?:\s|$))")
"""A prompt that is host markup or a slash command (``/compact``), not a question."""


@dataclass(frozen=True, slots=True)
class PromptInput:
    """What a UserPromptSubmit hook receives (the fields the context uses)."""

    session_id: str
    transcript_path: str | None
    prompt: str
    cwd: str | None


def read_prompt_input(data: bytes) -> PromptInput:
    """The host's UserPromptSubmit JSON, checked; :class:`~fabric_memory.errors.HandoffError`
    naming the JSON path of what is wrong (``transcript_path`` may be null: Codex's is when
    the session is not written to a file)."""
    value = read_hook_object(data)
    for key in ("session_id", "hook_event_name"):
        if not isinstance(value.get(key), str) or not value[key]:
            raise HandoffError(f"stdin: $.{key} must be a non-empty string, got "
                               f"{clipped(value.get(key))}")
    if value["hook_event_name"] != EVENT:
        raise HandoffError(f"stdin: $.hook_event_name is {clipped(value['hook_event_name'])}, "
                           f"not {EVENT}")
    prompt, path, cwd = value.get("prompt"), value.get("transcript_path"), value.get("cwd")
    if not isinstance(prompt, str):
        raise HandoffError(f"stdin: $.prompt must be a string, got {clipped(prompt)}")
    if path is not None and (not isinstance(path, str) or not path):
        raise HandoffError(f"stdin: $.transcript_path must be a path or null, got "
                           f"{clipped(path)}")
    return PromptInput(value["session_id"], path, prompt,
                       cwd if isinstance(cwd, str) and cwd else None)


def query_words(prompt: str) -> list[str]:
    """The prompt's content words, each once, in order (at most :data:`MAX_QUERY_WORDS`):
    no stop words, no chat words, no single characters; [] for host markup, a slash command
    or a prompt of fewer than :data:`MIN_QUERY_WORDS` of them."""
    if _HOST_TEXT.match(prompt):
        return []
    found: dict[str, None] = {}
    for word in words(prompt):
        if len(word) > 1 and word not in STOP_WORDS and word not in CHAT_WORDS:
            found.setdefault(word)
            if len(found) == MAX_QUERY_WORDS:
                break
    return list(found) if len(found) >= MIN_QUERY_WORDS else []


# --- what the model still sees ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class InView:
    """A session as its model sees it now: the entries it sees verbatim, what it no longer
    sees (the entries its latest compaction replaced), and the words of each turn it sees."""

    session_id: str
    agent: str
    project: str | None
    visible: frozenset[str]
    hidden: frozenset[str]
    kept_words: tuple[frozenset[str], ...]
    short: Mapping[str, str] = field(default_factory=dict)
    """Entry id → its line address (``L877``), where that is shorter than the id."""


def _is_marker(view: EntryView) -> bool:
    return view.type == "compaction" or (
        view.type == "custom_message" and view.raw.get("customType") == BOUNDARY)


def out_of_view(agent: str, session_id: str, project: str | None,
                views: Sequence[EntryView], prompt: str = "") -> InView:
    """What the model of the session whose active branch is ``views`` still sees.

    Before the latest compaction marker the host shows its summary instead of the entries,
    except what each host keeps: Pi from the compaction's ``firstKeptEntryId`` on, Codex the
    user's own messages. A session never compacted is seen whole. The ``prompt`` itself,
    when the host wrote it as the branch's last entry before running the hook, is not a
    turn that answers it (an earlier turn asking the same is)."""
    markers = [at for at, view in enumerate(views) if _is_marker(view)]
    if not markers:
        seen = list(views)
        hidden: list[EntryView] = []
    else:
        last = markers[-1]
        kept_from = views[last].raw.get("firstKeptEntryId") if agent == "pi" else None
        start = next((at for at, view in enumerate(views[:last]) if view.id == kept_from), last)
        before = [view for view in views[:start] if not _is_marker(view)]
        kept_users = agent == "codex"
        hidden = [view for view in before if not (kept_users and view.role == "user")]
        seen = [view for view in before if kept_users and view.role == "user"]
        seen += [view for view in views[start:] if not _is_marker(view)]
    users = [at for at, view in enumerate(seen) if view.role == "user"]
    if users and prompt.strip() and seen[users[-1]].text.strip() == prompt.strip() and not any(
            view.role == "assistant" for view in seen[users[-1] + 1:]):
        del seen[users[-1]]  # the prompt, written before the hook ran: no turn answering it
    return InView(session_id, agent, project, frozenset(view.id for view in seen),
                  frozenset(view.id for view in hidden),
                  tuple(frozenset(words(view.text)) for view in seen if view.text))


def read_in_view(path: str, session_id: str, prompt: str = "") -> InView:
    """:func:`out_of_view` of the transcript at ``path`` (its active branch); a
    :class:`~fabric_memory.errors.HandoffError` when it is not that session's."""
    from .sources import read_source
    from .sources.reader import line_addresses

    if os.path.isfile(path) and os.path.getsize(path) > MAX_TRANSCRIPT_BYTES:
        raise HandoffError(f"{path}: the transcript is above the "
                           f"{MAX_TRANSCRIPT_BYTES // 2**20} MiB a prompt hook reads")
    session = read_source(path)  # (a missing or unreadable file: a located SessionError)
    if session.agent not in AGENTS:
        raise HandoffError(f"{path}: a {session.agent} session, not a Claude Code, Codex or "
                           "Pi one")
    if session.session_id != session_id:
        raise HandoffError(f"{path}: holds session {clipped(session.session_id)}, the hook "
                           f"names {clipped(session_id)}")
    view = out_of_view(session.agent, session.session_id, session.project,
                       [entry.view for entry in session.active_branch()], prompt)
    return replace(view, short=line_addresses(session.entries))


# --- the relevance bar ------------------------------------------------------------------


def weights(query: Sequence[str], index: str | None) -> dict[str, float]:
    """Each content word's weight: its inverse document frequency in the memory index
    (BM25's), so a word most entries hold ("write", "simple") says little and a rare one
    ("DATABASE_URL", "haiku") much; a word no entry holds, :data:`ABSENT_WEIGHT` times
    that. A CJK pair counts as its rarer character."""
    from .memory.locations import index_root
    from .memory.sharded import open_memory

    terms = sorted({term for word in query for term in (word if is_cjk(word[0]) else [word])})
    total, counts = open_memory(index_root(index)).frequencies(terms)
    held = dict(zip(terms, counts, strict=True))
    found = {word: min(held[t] for t in (word if is_cjk(word[0]) else [word])) for word in query}
    return {word: math.log(1 + (total - n + 0.5) / (n + 0.5)) * (ABSENT_WEIGHT if n == 0 else 1)
            for word, n in found.items()}


def clears_bar(hit: RecallHit, query: Mapping[str, float], view: InView) -> bool:
    """Whether ``hit`` earns its place: its passage (the snippet the context shows) holds
    at least :data:`MIN_HELD` of the prompt's content words carrying at least
    :data:`WEIGHT_SHARE` of their weight (:func:`weights`), and no turn the model still
    sees holds every one of them (the answer is then in view: a kept turn that only shares
    the topic's words does not count)."""
    shown = set(query) & set(words(hit["snippet"]))
    if len(shown) < MIN_HELD or hit.get("wordsHeld", 0) < MIN_HELD:
        return False
    if sum(query[word] for word in shown) < WEIGHT_SHARE * sum(query.values()):
        return False
    return not any(shown <= kept for kept in view.kept_words)


# --- the passages -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Neighbour:
    """A turn beside a passage: ``before`` or ``after`` it, its address, label and start."""

    side: str
    address: str
    label: str
    text: str


@dataclass(frozen=True, slots=True)
class Passage:
    session_id: str
    session: str
    """The session as ``expand`` takes it (the hit's ``follow.session``)."""
    address: str
    label: str
    text: str
    path: str = ""
    """The session file (where the index keeps its documents)."""
    entry_id: str = ""
    """The entry it is from; "" for an operation of a trace (it has no neighbours)."""
    role: str | None = None
    neighbours: tuple[Neighbour, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.session} {self.address}"

    def beside(self, address: str) -> str:
        """The key of the turn at ``address`` given beside this passage (the turn may still
        come as a passage of its own: its words matched, not only its start)."""
        return f"{self.session} {address} beside"

    def shown(self, address: str, keys: Container[str]) -> bool:
        """Whether the turn at ``address`` is in ``keys`` already, as a passage of its own
        or beside one."""
        return f"{self.session} {address}" in keys or self.beside(address) in keys

    def given(self) -> list[str]:
        """Its key and its neighbours' (what giving it gives)."""
        return [self.key, *(self.beside(near.address) for near in self.neighbours)]


def _passage(hit: RecallHit, short: Mapping[str, str]) -> Passage:
    from .compaction.text import clip_collapsed, collapse

    label = hit.get("tool") or hit.get("role") or hit["type"]
    stamp = hit.get("timestamp", "")[:16].replace("T", " ")
    address = hit["address"]
    entry = address == hit["entryId"]  # (an operation's address names its entry and more)
    if entry:
        address = short.get(address, address)
    return Passage(hit["sessionId"], hit["follow"]["session"], address,
                   f"{label}, {stamp}" if stamp else label,
                   clip_collapsed(collapse(hit["snippet"]), PASSAGE_BYTES), hit["path"],
                   hit["entryId"] if entry else "", hit.get("role"))


def recalled(query: Sequence[str], view: InView, *, index: str | None = None,
             sessions: str | None = None) -> list[Passage]:
    """The passages that clear the bar, best first: this session's out of view, then the
    project's other sessions'."""
    from .memory.recall import recall

    text = " ".join(query)
    weighed = weights(query, index)
    chosen: list[RecallHit] = []
    if view.hidden:
        try:
            own = recall(text, session=view.session_id, hot_sessions=0, limit=HITS_PER_SEARCH,
                         index=index, sessions=sessions, snippet_chars=PASSAGE_CHARS)["hits"]
        except QueryError:  # the index does not hold this session yet
            own = []
        chosen += [hit for hit in own if hit["entryId"] in view.hidden]
    if view.project:
        others = recall(text, project=view.project, hot_sessions=0, limit=HITS_PER_SEARCH,
                        index=index, sessions=sessions, snippet_chars=PASSAGE_CHARS)["hits"]
        chosen += [hit for hit in others if hit["sessionId"] != view.session_id]
    passages: dict[str, Passage] = {}
    texts: set[str] = set()
    for hit in chosen:
        if clears_bar(hit, weighed, view):
            passage = _passage(hit, view.short if hit["sessionId"] == view.session_id else {})
            if passage.key not in passages and passage.text not in texts:
                passages[passage.key] = passage
                texts.add(passage.text)
    return list(passages.values())


def with_neighbours(passages: Sequence[Passage], view: InView, index: str | None,
                    given: Given) -> list[Passage]:
    """``passages``, each with the turns beside it that say what it does not: a reply or a
    tool's output with the user message it answers (the nearest within :data:`REACH`
    entries before it); a reply with the tool output it read (the nearest since that
    message) and its call's output (the one within :data:`REACH` entries after it that
    :func:`_answers` it or the call it goes on to make, else the entry right after it when
    that is an output or the user's answer); a tool's output with the call that ran it
    (the one it answers, else the nearest reply before it). A passage alone says "All
    tests pass" or "let's go 100"; beside it, what passed and what the 100 is. A turn of
    this session the model still sees and one given already in it are left out (each at
    most :data:`NEIGHBOUR_BYTES`)."""
    from .compaction.text import clip_collapsed, collapse
    from .memory.locations import index_root
    from .memory.sharded import open_memory

    handle = open_memory(index_root(index))
    result: list[Passage] = []
    for path in dict.fromkeys(passage.path for passage in passages if passage.entry_id):
        group = [passage for passage in passages if passage.path == path and passage.entry_id]
        at = {str(doc["entry_id"]): int(doc["position"]) for doc in handle.lookup(
            path, addresses=[passage.entry_id for passage in group], fields=NEIGHBOUR_FIELDS)
            if doc.get("kind") == "entry"}
        wanted = sorted({near for position in at.values()
                         for near in range(max(position - REACH, 0), position + REACH + 1)})
        docs = {int(doc["position"]): doc for doc in handle.lookup(
            path, positions=wanted, fields=NEIGHBOUR_FIELDS) if doc.get("kind") == "entry"}
        for passage in group:
            if passage.entry_id not in at:
                continue
            own = passage.session_id == view.session_id
            neighbours = []
            for side, doc in _beside(passage.role, at[passage.entry_id], docs):
                address = str(doc["address"])
                if own:
                    if str(doc["entry_id"]) not in view.hidden:
                        continue
                    address = view.short.get(address, address)
                text = str(doc.get("text", ""))
                if not text.strip() or passage.shown(address, given):
                    continue
                label = doc.get("tool") or doc.get("role") or doc["type"]
                neighbours.append(Neighbour(side, address, str(label),
                                            clip_collapsed(collapse(text), NEIGHBOUR_BYTES)))
            result.append(replace(passage, neighbours=tuple(neighbours)))
    with_near = {passage.key: passage for passage in result}
    return [with_near.get(passage.key, passage) for passage in passages]


def _beside(role: str | None, position: int,
            docs: Mapping[int, Mapping[str, object]]) -> list[tuple[str, Mapping[str, object]]]:
    """The turns :func:`with_neighbours` gives beside an entry of ``role`` at ``position``
    of a session whose entries around it are ``docs`` (by position), in their order."""
    entry = docs[position]
    earlier = [docs[at] for at in range(position - 1, position - REACH - 1, -1) if at in docs]
    roles = [doc.get("role") for doc in earlier]
    found: list[tuple[str, Mapping[str, object]]] = []
    asked = roles.index("user") if "user" in roles else len(roles)
    if role in ("assistant", "toolResult") and asked < len(roles):
        found.append(("before", earlier[asked]))
    if role == "assistant":
        if "toolResult" in roles[:asked]:  # (an output it read since the user's message)
            found.append(("before", earlier[roles.index("toolResult")]))
        later = [docs[at] for at in range(position + 1, position + REACH + 1) if at in docs]
        # Its own call's output, else the output of the call it goes on to make (a host
        # writes a reply's text and each of its calls as entries of their own).
        calls = [entry, *itertools.takewhile(lambda doc: doc.get("role") == "assistant", later)]
        after = next((doc for call in calls for doc in later if _answers(doc, call)), None)
        if after is None and later and later[0].get("role") in ("toolResult", "user"):
            after = later[0]
        if after is not None:
            found.append(("after", after))
    elif role == "toolResult" and "assistant" in roles:
        found.append(("before", next((doc for doc in earlier if _answers(entry, doc)),
                                     earlier[roles.index("assistant")])))
    return found


def _answers(output: Mapping[str, object], call: Mapping[str, object]) -> bool:
    """Whether the tool output ``output`` answers the reply ``call``: an output's text ends
    with the id of the call it answers (``toolu_…``, ``call_…``: the index keeps it so),
    which the call's text names too (a host may write parallel calls first, then their
    outputs, in any order)."""
    if output.get("role") != "toolResult" or call.get("role") != "assistant":
        return False
    said = str(output.get("text", "")).split()
    return bool(said) and len(said[-1]) >= ID_CHARS and said[-1] in str(call.get("text", ""))


def render_context(passages: Iterable[Passage], own: str,
                   max_bytes: int = MAX_CONTEXT_BYTES) -> tuple[str, list[Passage]]:
    """The context text within ``max_bytes`` and the passages it holds ("" when none fits):
    one expand call in the header, then the passages grouped by session, ``own`` (this
    session) first."""
    head = ("# fabric-memory: earlier context for this prompt (recalled from what is no "
            "longer in your context; verify before relying on it)\n"
            "Each [address] reads whole with `fabric-memory expand <session> --address "
            "<address>` (MCP tool `expand`: {\"session\": ..., \"addresses\": [...]}).\n")
    groups: dict[str, list[Passage]] = {}
    used = len(head.encode())
    shown: list[Passage] = []
    seen: set[str] = set()
    for passage in passages:
        # (a turn shown once; a passage shown beside an earlier one still shows its words)
        passage = replace(passage, neighbours=tuple(
            near for near in passage.neighbours if not passage.shown(near.address, seen)))
        heading = 0 if passage.session in groups else len(_heading(passage, own).encode())
        line = _line(passage)
        if used + heading + len(line.encode()) > max_bytes:
            continue
        groups.setdefault(passage.session, []).append(passage)
        shown.append(passage)
        seen.update(passage.given())
        seen.update(f"{passage.session} {near.address}" for near in passage.neighbours)
        used += heading + len(line.encode())
    if not shown:
        return "", []
    body = "".join(_heading(group[0], own) + "".join(_line(p) for p in group)
                   for group in groups.values())
    return head + body, shown


def _heading(passage: Passage, own: str) -> str:
    if passage.session_id == own:
        return f"\n## This session ({passage.session}), before its compaction\n"
    return f"\n## Session {passage.session} (same project)\n"


def _line(passage: Passage) -> str:
    return f"- [{passage.address}] {passage.label}: {passage.text}\n" + "".join(
        f"  {near.side} it, [{near.address}] {near.label}: {near.text}\n"
        for near in passage.neighbours)


# --- what was given ---------------------------------------------------------------------


class Given:
    """The passages already given in one session (a JSON list in the fabric-memory home,
    ``prompt-context/<hash of the session id>.json``); unreadable state is an empty one."""

    def __init__(self, session_id: str, home: Path) -> None:
        folder = home / STATE_FOLDER
        import hashlib  # (a prompt with nothing to recall never gets here)

        name = hashlib.sha256(session_id.encode()).hexdigest()[:32]
        self.path = folder / f"{name}.json"
        try:
            value = orjson.loads(self.path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            value = []
        self.keys: list[str] = [k for k in value if isinstance(k, str)] \
            if isinstance(value, list) else []

    def __contains__(self, key: object) -> bool:
        return key in self.keys

    def add(self, passages: Iterable[Passage]) -> None:
        """Remember ``passages`` and their neighbours (written whole by a rename: a reader
        never sees half)."""
        from .memory.locations import make_private_dirs

        self.keys = (self.keys + [key for passage in passages
                                  for key in passage.given()])[-MAX_GIVEN:]
        make_private_dirs(self.path.parent)
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, orjson.dumps(self.keys))
        finally:
            os.close(fd)
        os.replace(temporary, self.path)


# --- the hook ---------------------------------------------------------------------------


def prompt_context(data: bytes, home: Path, *, index: str | None = None,
                   sessions: str | None = None) -> str | None:
    """The line a UserPromptSubmit hook prints for the hook input ``data``, or None when
    nothing earns its place (``home``: the fabric-memory home, where what was given is
    kept); :class:`~fabric_memory.errors.FabricMemoryError` when the input or the memory
    cannot be read."""
    given = read_prompt_input(data)
    query = query_words(given.prompt)
    if not query:
        return None
    if given.transcript_path is None:
        view = InView(given.session_id, "", given.cwd, frozenset(), frozenset(), ())
    else:
        view = read_in_view(given.transcript_path, given.session_id, given.prompt)
    if view.project is None and given.cwd:
        view = replace(view, project=given.cwd)
    state = Given(given.session_id, home)
    fresh = [p for p in recalled(query, view, index=index, sessions=sessions)
             if p.key not in state]
    if fresh:
        fresh = with_neighbours(fresh, view, index, state)
    text, shown = render_context(fresh, given.session_id)
    if not shown:
        return None
    try:
        state.add(shown)
    except OSError as exc:  # without its state the hook would repeat itself: give nothing
        raise HandoffError(f"{state.path}: cannot record what was given "
                           f"({exc.strerror or exc})") from None
    return orjson.dumps({"hookSpecificOutput": {"hookEventName": EVENT,
                                                "additionalContext": text}}).decode()


def is_prompt_event(data: bytes) -> bool:
    """Whether the hook input names the UserPromptSubmit event (cheaply: a failed parse is
    the SessionStart reader's to report)."""
    try:
        return read_hook_object(data).get("hook_event_name") == EVENT
    except HandoffError:
        return False

