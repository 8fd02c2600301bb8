"""bench.compare --update-docs: the full table goes exactly between docs/performance.md's
markers, the headline rows between README's, and the plots are drawn as small,
reproducible SVG files (no timing is asserted here)."""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from bench import compare, figures
from bench.compare import HEADLINE, Row, headline, parse_args, publish, table
from bench.figures import BEGIN, END, HEADLINE_BEGIN, HEADLINE_END, MarkerError, replace_marked

from .conftest import REPO

README = REPO / "README.md"
PERFORMANCE = REPO / "docs" / "performance.md"


def outside(text: str, begin: str = BEGIN, end: str = END) -> tuple[str, str]:
    """What comes before the begin marker line and after the end marker line."""
    lines = text.splitlines(keepends=True)
    first = lines.index(begin + "\n")
    last = lines.index(end + "\n")
    return "".join(lines[: first + 1]), "".join(lines[last:])


def inside(text: str, begin: str = BEGIN, end: str = END) -> str:
    lines = text.splitlines(keepends=True)
    return "".join(lines[lines.index(begin + "\n") + 1 : lines.index(end + "\n")])


def synthetic_result() -> dict[str, Any]:
    rows = [Row("a", "fast thing", 2.0, 1.0, "ms", 2.0, "ours/floor", "<= 3", True),
            Row("hook.big", "slow thing", 9.0, 1.0, "ms", 9.0, "ours/floor", "<= 3", False),
            Row("mcp.recall", "round trip", 4.0, 1.0, "ms", 4.0, "ours/floor", "p50 <= 5", True)]
    return {
        "rows": [row.to_json() for row in rows], "scale": "quick", "seconds": 1.0, "notes": [],
        "machine": {"cores": 2, "ramGiB": 8.0, "python": "3.11", "tantivy": "0.27",
                    "orjson": "3", "date": "2026-01-01"},
        "series": {
            "plateau": {"bytes": [4000 + 900 * min(i, 28) for i in range(40)], "window": 20,
                        "spanBytes": 0, "boundBytes": 32768},
            "recall": [{"mode": mode, "documents": docs, "p50Ms": p50, "p99Ms": 3 * p50}
                       for mode in ("literal", "regex")
                       for docs, p50 in ((1000, 0.5), (100_000, 1.5))],
            "compaction": {"kib": [10, 100, 1000], "oursMs": [1, 10, 100],
                           "floorMs": [0.1, 1, 10]},
        },
    }


def test_replace_marked_changes_only_the_region() -> None:
    """The page's text outside the marker lines is kept byte for byte; inside is the new
    table."""
    text = PERFORMANCE.read_text(encoding="utf-8")
    updated = replace_marked(text, "| new | table |\n", "docs/performance.md")
    assert outside(updated) == outside(text)
    assert inside(updated) == "| new | table |\n"
    assert replace_marked(updated, "| new | table |\n", "docs/performance.md") == updated


def test_markers_mentioned_in_prose_are_not_markers() -> None:
    """Only a line holding exactly the marker counts, so README may name the markers."""
    text = f"say `{BEGIN}` and `{END}`\n{BEGIN}\nold\n{END}\ntail\n"
    assert replace_marked(text, "new", "x.md") == (
        f"say `{BEGIN}` and `{END}`\n{BEGIN}\nnew\n{END}\ntail\n")


@pytest.mark.parametrize("text,complaint", [
    ("no markers\n", "found 0"),
    (f"{BEGIN}\n{END}\n{BEGIN}\n{END}\n", "found 2"),
    (f"{END}\n{BEGIN}\n", "comes before"),
], ids=["missing", "twice", "reversed"])
def test_bad_markers_are_one_clear_error(text: str, complaint: str) -> None:
    """A README without exactly one ordered marker pair is refused, naming the file."""
    with pytest.raises(MarkerError, match=complaint) as caught:
        replace_marked(text, "x", "docs/README.md")
    assert str(caught.value).startswith("docs/README.md: ")


def test_headline_keeps_the_readme_rows_in_order() -> None:
    """README's headline table holds only the HEADLINE rows, in HEADLINE's order."""
    text = headline(synthetic_result())
    assert "round trip" in text and "slow thing" in text and "fast thing" not in text
    assert text.index("slow thing") > text.index("round trip")
    assert HEADLINE.index("mcp.recall") < HEADLINE.index("hook.big")


def test_publish_writes_both_tables_and_three_svg_plots(tmp_path: Path) -> None:
    """publish() puts table(result) between the markers of a docs/performance.md copy and
    headline(result) between those of a README copy, and draws each plot as an SVG that
    names what it shows; drawing again gives the same bytes."""
    readme, page = tmp_path / "README.md", tmp_path / "performance.md"
    shutil.copy(README, readme)
    shutil.copy(PERFORMANCE, page)
    result = synthetic_result()
    args = parse_args(["--docs", str(page), "--readme", str(readme),
                       "--figures", str(tmp_path / "figures")])
    written = publish(result, args)
    text = page.read_text(encoding="utf-8")
    assert inside(text) == table(result) + "\n"
    assert outside(text) == outside(PERFORMANCE.read_text(encoding="utf-8"))
    short = readme.read_text(encoding="utf-8")
    assert inside(short, HEADLINE_BEGIN, HEADLINE_END) == headline(result) + "\n"
    assert outside(short, HEADLINE_BEGIN, HEADLINE_END) == outside(
        README.read_text(encoding="utf-8"), HEADLINE_BEGIN, HEADLINE_END)
    assert [path.name for path in written] == [f"{name}.svg" for name in figures.PLOTS]
    titles = {"plateau": "per cycle", "recall": "against index size",
              "compaction": "against session size"}
    first = {path.name: path.read_bytes() for path in written}
    for path in written:
        root = ET.parse(path).getroot()
        assert root.tag.endswith("svg")
        assert titles[path.stem] in path.read_text(encoding="utf-8")
        assert "quick run, 2 cores" in path.read_text(encoding="utf-8")
    publish(result, args)
    assert {path.name: path.read_bytes() for path in written} == first


def test_update_docs_refuses_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--update-docs on a README without headline markers exits 2 at once with one line,
    both pages untouched."""
    readme, page = tmp_path / "README.md", tmp_path / "performance.md"
    readme.write_text("# no markers\n", encoding="utf-8")
    shutil.copy(PERFORMANCE, page)
    assert compare.main(["--quick", "--update-docs", "--readme", str(readme),
                         "--docs", str(page)]) == 2
    assert f"expected one {HEADLINE_BEGIN} line" in capsys.readouterr().err
    assert readme.read_text(encoding="utf-8") == "# no markers\n"
    assert page.read_bytes() == PERFORMANCE.read_bytes()


def test_docs_hold_the_generated_tables() -> None:
    """docs/performance.md has one marker pair around a table in the shape table() writes
    and shows each plot the command draws; README has the headline pair around the same
    shape."""
    text = PERFORMANCE.read_text(encoding="utf-8")
    region = inside(text).splitlines()
    assert region[:2] == table(synthetic_result()).splitlines()[:2]
    short = inside(README.read_text(encoding="utf-8"), HEADLINE_BEGIN, HEADLINE_END)
    assert short.splitlines()[:2] == region[:2]
    for name in figures.PLOTS:
        assert f"](figures/{name}.svg)" in text
        assert (REPO / "docs" / "figures" / f"{name}.svg").is_file()
