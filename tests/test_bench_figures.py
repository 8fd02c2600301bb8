"""bench.compare --update-readme: the table goes exactly between README's markers, and the
plots are drawn as small, reproducible SVG files (no timing is asserted here)."""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from bench import compare, figures
from bench.compare import Row, publish, table
from bench.figures import BEGIN, END, MarkerError, replace_marked

from .conftest import REPO

README = REPO / "README.md"


def outside(text: str) -> tuple[str, str]:
    """What comes before the begin marker line and after the end marker line."""
    lines = text.splitlines(keepends=True)
    first = lines.index(BEGIN + "\n")
    last = lines.index(END + "\n")
    return "".join(lines[: first + 1]), "".join(lines[last:])


def inside(text: str) -> str:
    lines = text.splitlines(keepends=True)
    return "".join(lines[lines.index(BEGIN + "\n") + 1 : lines.index(END + "\n")])


def synthetic_result() -> dict[str, Any]:
    rows = [Row("a", "fast thing", 2.0, 1.0, "ms", 2.0, "ours/floor", "<= 3", True),
            Row("b", "slow thing", 9.0, 1.0, "ms", 9.0, "ours/floor", "<= 3", False)]
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
    """README's text outside the marker lines is kept byte for byte; inside is the new table."""
    text = README.read_text(encoding="utf-8")
    updated = replace_marked(text, "| new | table |\n")
    assert outside(updated) == outside(text)
    assert inside(updated) == "| new | table |\n"
    assert replace_marked(updated, "| new | table |\n") == updated


def test_markers_mentioned_in_prose_are_not_markers() -> None:
    """Only a line holding exactly the marker counts, so README may name the markers."""
    text = f"say `{BEGIN}` and `{END}`\n{BEGIN}\nold\n{END}\ntail\n"
    assert replace_marked(text, "new") == f"say `{BEGIN}` and `{END}`\n{BEGIN}\nnew\n{END}\ntail\n"


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


def test_publish_writes_the_table_and_three_svg_plots(tmp_path: Path) -> None:
    """publish() puts table(result) between the markers of a README copy and draws each plot
    as an SVG that names what it shows; drawing again gives the same bytes."""
    readme = tmp_path / "README.md"
    shutil.copy(README, readme)
    result = synthetic_result()
    written = publish(result, readme, tmp_path / "figures")
    text = readme.read_text(encoding="utf-8")
    assert inside(text) == table(result) + "\n"
    assert outside(text) == outside(README.read_text(encoding="utf-8"))
    assert [path.name for path in written] == [f"{name}.svg" for name in figures.PLOTS]
    titles = {"plateau": "per cycle", "recall": "against index size",
              "compaction": "against session size"}
    first = {path.name: path.read_bytes() for path in written}
    for path in written:
        root = ET.parse(path).getroot()
        assert root.tag.endswith("svg")
        assert titles[path.stem] in path.read_text(encoding="utf-8")
        assert "quick run, 2 cores" in path.read_text(encoding="utf-8")
    publish(result, readme, tmp_path / "figures")
    assert {path.name: path.read_bytes() for path in written} == first


def test_update_readme_refuses_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--update-readme on a README without markers exits 2 at once with one line, untouched."""
    readme = tmp_path / "README.md"
    readme.write_text("# no markers\n", encoding="utf-8")
    assert compare.main(["--quick", "--update-readme", "--readme", str(readme)]) == 2
    assert "expected one <!-- bench:begin --> line" in capsys.readouterr().err
    assert readme.read_text(encoding="utf-8") == "# no markers\n"


def test_readme_holds_a_generated_table() -> None:
    """README has one marker pair around a table in the shape table() writes, and shows
    each plot the command draws."""
    text = README.read_text(encoding="utf-8")
    region = inside(text).splitlines()
    assert region[:2] == table(synthetic_result()).splitlines()[:2]
    for name in figures.PLOTS:
        assert f"](docs/figures/{name}.svg)" in text
        assert (REPO / "docs" / "figures" / f"{name}.svg").is_file()
