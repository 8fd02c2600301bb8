"""Ranking for natural questions: an entry scores by its best passage (a long paste does not
win on word count), and near-identical tool outputs fold into one hit with a count."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from fabric_memory.cli import main
from fabric_memory.memory.expand import expand_request
from fabric_memory.memory.recall import recall, recall_request
from fabric_memory.memory.reindex import reindex
from fabric_memory.memory.render import render_recall

from .memory_builder import SessionBuilder

QUESTION = ("What database connection string did we use, and what error did the first "
            "prisma migrate deploy give?")
REBUILD = "why did we drop webpack for vite in the production bundle"


def _nginx_paste() -> str:
    """A pasted nginx config of about 40 KB: comments scatter most of the question's words
    far apart, none of them near another."""
    words = ["database", "connection", "string", "error", "first", "prisma", "migrate",
             "deploy", "give", "use"]
    lines = []
    for n in range(900):
        lines.append(f"    location /static/{n}/ {{ root /srv/www; expires 30d; }}")
        if n % 90 == 45:
            lines.append(f"    # {words[n // 90]} settings follow")
    return "server {\n    listen 443 ssl;\n" + "\n".join(lines) + "\n}"


def _build_log(run: int) -> str:
    """One `npm run build` output of about 3 KB: the same lines each run, but timings, sizes
    and chunk hashes."""
    chunks = "\n".join(f"dist/assets/chunk-{(run * 7919 + n) % 65521:04x}.js  {n + run}.{run}2 kB"
                       f" │ gzip: {n}.{run}1 kB" for n in range(60))
    return (f"> shop@1.{run}.0 build\n> vite build --mode production\n\nvite v5.0.{run} "
            f"building for production...\ntransforming...\n✓ {400 + run} modules transformed.\n"
            f"rendering chunks...\n{chunks}\n(!) Some chunks are larger than 500 kB after "
            f"minification: drop unused locales to shrink the bundle.\n✓ built in {run}.{run}4s")


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A session where the answers are short entries beside a 40 KB paste holding most of
    the question's words and eight near-identical build logs."""
    base = tmp_path_factory.mktemp("rerank")
    builder = SessionBuilder(base / "sessions" / "--shop--" / "shop.jsonl")
    ids: dict[str, Any] = {}
    for n in range(30):
        builder.user(f"tidy the checkout page, step {n}: spacing and colours of the cart")
    ids["paste"] = builder.user("here is our nginx config, please review it:\n" + _nginx_paste())
    ids["connection"] = builder.assistant([{"type": "text", "text": (
        "The database connection string is postgresql://shop@db:5432/shop")}])
    ids["migrate"] = builder.bash("npx prisma migrate deploy", (
        "Error: P1001: Can't reach database server at `db:5432`"))
    ids["decision"] = builder.assistant([{"type": "text", "text": (
        "We moved to vite: webpack took 90 s for each build.")}])
    ids["logs"] = [builder.bash("npm run build", _build_log(run)) for run in range(8)]
    builder.write()
    roots = {"sessions": base / "sessions", "index": base / "index"}
    reindex(**roots, workers=1)
    return {"roots": roots, "ids": ids}


def test_a_short_answer_outranks_a_long_paste_holding_more_of_the_words(
    session: dict[str, Any],
) -> None:
    """A 40 KB paste holding 10 of the question's words, all far apart, ranks below the
    short entries that answer the question (each holding a few of its words together)."""
    ids = session["ids"]
    hits = recall(QUESTION, **session["roots"])["hits"]
    order = [hit["address"] for hit in hits]
    assert order[:2] == [ids["migrate"], ids["connection"]] or \
        order[:2] == [ids["connection"], ids["migrate"]], order
    assert ids["paste"] in order and order.index(ids["paste"]) > 1
    held = {hit["address"]: hit["wordsHeld"] for hit in hits}
    assert held[ids["paste"]] > held[ids["migrate"]]  # it does hold more of the words


def test_near_identical_outputs_fold_into_one_hit_with_a_count(
    session: dict[str, Any],
) -> None:
    """Eight build logs that differ only in numbers and hashes (each holding more of the
    question's words than the turn that explains the decision, far apart) answer as one hit
    that names the seven others; that turn ranks first."""
    ids = session["ids"]
    response = recall(REBUILD, **session["roots"])
    hits = response["hits"]
    order = [hit["address"] for hit in hits]
    assert order[0] == ids["decision"], order
    logs = [hit for hit in hits if hit["address"] in ids["logs"]]
    assert len(logs) == 1 and logs[0]["similar"] == 7
    others = sorted(set(ids["logs"]) - {logs[0]["address"]})
    assert sorted(logs[0]["similarAddresses"]) == others
    assert all("similar" not in hit for hit in hits if hit is not logs[0])
    assert response["total"] == len(hits)  # the folded seven are not counted as hits
    line = f"(+7 near-identical: {' '.join(logs[0]['similarAddresses'])})"
    assert line in render_recall(response) and line in render_recall(response, "mcp")


def test_folded_hits_are_counted_once_across_pages(session: dict[str, Any]) -> None:
    """Paging one hit at a time gives the same hits as one page, each once, with the
    same total on every page."""
    whole = recall(REBUILD, limit=50, **session["roots"])
    seen, totals = [], set()
    page = recall(REBUILD, limit=1, **session["roots"])
    while True:
        totals.add(page["total"])
        seen += [(hit["address"], hit.get("similar")) for hit in page["hits"]]
        if page["next"] is None:
            break
        page = recall_request(page["next"])
    assert seen == [(hit["address"], hit.get("similar")) for hit in whole["hits"]]
    assert totals == {whole["total"]}


def test_the_cli_json_carries_the_count(
    session: dict[str, Any], capsys: pytest.CaptureFixture[str],
) -> None:
    """`recall --json` prints the folded hit's count as `similar`."""
    roots = session["roots"]
    assert main(["recall", REBUILD, "--json", "--sessions", str(roots["sessions"]),
                 "--index", str(roots["index"])]) == 0
    hits = orjson.loads(capsys.readouterr().out)["hits"]
    assert [hit["similar"] for hit in hits if "similar" in hit] == [7]


def test_the_folded_outputs_expand_by_the_addresses_the_hit_names(
    session: dict[str, Any],
) -> None:
    """The kept hit's follow reads its own log; its follow with the folded addresses reads
    the seven others."""
    hit = next(h for h in recall(REBUILD, **session["roots"])["hits"] if "similar" in h)
    page = expand_request(hit["follow"])
    assert Path(page["path"]).name == "shop.jsonl"
    assert "vite build --mode production" in page["entries"][0]["text"]
    folded = expand_request({**hit["follow"], "addresses": hit["similarAddresses"]})
    assert [entry["address"] for entry in folded["entries"]] == sorted(
        hit["similarAddresses"], key=session["ids"]["logs"].index)
    assert all("vite build --mode production" in entry["text"] for entry in folded["entries"])


def test_the_mcp_door_shows_the_count_in_text_and_structured_content(
    session: dict[str, Any],
) -> None:
    """Through the MCP server (official client, real process) the folded hit's count is in
    the structured content, which passes the declared output schema, and in the text."""
    from .test_serve import run, text, value

    async def body(client: Any) -> None:
        result = await client.call_tool("recall", {"query": REBUILD})
        hits = value(result)["hits"]
        assert [hit["similar"] for hit in hits if "similar" in hit] == [7]
        assert "(+7 near-identical: " in text(result)

    run(body, session["roots"])


def test_only_outputs_of_one_tool_in_one_session_fold() -> None:
    """Alike user messages, alike outputs of two sessions or two tools, and outputs of one
    tool with other words stay apart; outputs that differ in numbers fold into the best."""
    from fabric_memory.memory.rerank import Candidate, fold

    log = "vite v5.0.{n} building for production\n✓ {n} modules transformed in {n}.2s"
    alike = [Candidate(1, 10.0 - n, log.format(n=n), "a.jsonl", "toolResult", "bash")
             for n in range(3)]
    apart = [Candidate(1, 5.0, log.format(n=7), "a.jsonl", "user"),
             Candidate(1, 4.0, log.format(n=8), "a.jsonl", "user"),
             Candidate(1, 3.0, log.format(n=9), "b.jsonl", "toolResult", "bash"),
             Candidate(1, 2.0, log.format(n=9), "a.jsonl", "toolResult", "read"),
             Candidate(1, 1.0, "npm test: 12 passed, 0 failed", "a.jsonl", "toolResult",
                       "bash")]
    assert fold([*apart, *alike]) == [(5, [6, 7]), (0, []), (1, []), (2, []), (3, []),
                                      (4, [])]


@pytest.mark.parametrize("gap", [0, 1, 2, 3])
def test_a_pair_stands_together_where_the_index_phrase_finds_it(gap: int) -> None:
    """The head finds a pair of the question's words in a passage exactly where Tantivy's
    sloppy phrase with the same slop does (in order, swapped, words between)."""
    import tantivy

    from fabric_memory.memory.rerank import Pair, weigh

    texts = ["harbor kestrel", "kestrel harbor", "harbor x kestrel", "kestrel x harbor",
             "harbor x y kestrel", "harbor x y z kestrel", "harbor harbor", "kestrel"]
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("text", stored=True)
    schema = builder.build()
    index = tantivy.Index(schema)
    writer = index.writer(15_000_000, 1)
    for text in texts:
        writer.add_document(tantivy.Document(text=text))
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    searcher = index.searcher()
    phrase = tantivy.Query.phrase_query(schema, "text", ["harbor", "kestrel"], slop=gap)
    found = {searcher.doc(address)["text"][0] for _, address in searcher.search(phrase, 10).hits}
    pair = [Pair("harbor", "kestrel", gap, 1.0)]
    assert {text for text in texts if weigh(text, frozenset(), pair)[1]} == found
