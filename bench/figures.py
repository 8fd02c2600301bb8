"""What ``python -m bench.compare --update-docs`` publishes: the full table in
docs/performance.md, the headline rows in README, and the plots.

Each table goes between a pair of marker lines (``<!-- bench:begin -->`` and
``<!-- bench:end -->`` in docs/performance.md, ``<!-- bench:headline:begin -->`` and
``<!-- bench:headline:end -->`` in README) and nothing outside them changes. The plots
are small SVG files drawn with matplotlib (the ``bench`` extra; the engine never imports
it), written without a date or random ids so the same figures give the same bytes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

BEGIN = "<!-- bench:begin -->"
END = "<!-- bench:end -->"
HEADLINE_BEGIN = "<!-- bench:headline:begin -->"
HEADLINE_END = "<!-- bench:headline:end -->"
PLOTS = ("plateau", "recall", "compaction")
"""The SVG files (``<name>.svg``) a run draws, in the order docs/performance.md shows them."""


class MarkerError(ValueError):
    """A page does not hold exactly one well-ordered pair of the markers asked for."""


def _marker_lines(text: str, marker: str) -> list[int]:
    """Offsets of the lines that hold exactly ``marker`` (a mention inside prose is not one)."""
    return [m.start() for m in re.finditer(f"^{re.escape(marker)}$", text, flags=re.M)]


def replace_marked(text: str, content: str, where: str, begin: str = BEGIN,
                   end: str = END) -> str:
    """``text`` with everything between the ``begin`` and ``end`` marker lines replaced by
    ``content``."""
    found = {marker: _marker_lines(text, marker) for marker in (begin, end)}
    for marker, offsets in found.items():
        if len(offsets) != 1:
            raise MarkerError(f"{where}: expected one {marker} line, found {len(offsets)}; put "
                              f"the table between a {begin} and a {end} line")
    start = found[begin][0] + len(begin)
    stop = found[end][0]
    if stop < start:
        raise MarkerError(f"{where}: the {end} line comes before the {begin} line")
    return text[:start] + "\n" + content.strip("\n") + "\n" + text[stop:]


Region = tuple[Path, str, str]
"""A page and the marker pair whose lines a table goes between."""


def update_marked(region: Region, content: str) -> None:
    page, begin, end = region
    text = page.read_text(encoding="utf-8")
    page.write_text(replace_marked(text, content, str(page), begin, end), encoding="utf-8")


def publish_problem(regions: Sequence[Region]) -> str | None:
    """Why ``--update-docs`` could not publish (checked before the run), or None."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return "drawing the plots needs matplotlib: pip install -e '.[bench]'"
    for page, begin, end in regions:
        try:
            replace_marked(page.read_text(encoding="utf-8"), "", str(page), begin, end)
        except (OSError, MarkerError) as error:
            return str(error)
    return None


# --- plots -----------------------------------------------------------------------------


def caption(result: Mapping[str, Any]) -> str:
    """Which run drew a plot: scale, machine and date."""
    m = result["machine"]
    return f"{result['scale']} run, {m['cores']} cores, Python {m['python']}, {m['date']}"


def draw_figures(result: Mapping[str, Any], directory: Path) -> list[Path]:
    """The plots of ``result["series"]`` as ``<directory>/<name>.svg``; returns their paths."""
    import matplotlib  # the bench extra: imported only when figures are drawn

    matplotlib.rcParams["svg.hashsalt"] = "fabric-memory"  # stable ids, stable bytes
    matplotlib.rcParams["svg.fonttype"] = "none"  # text as text: small files
    matplotlib.rcParams["font.size"] = 9
    directory.mkdir(parents=True, exist_ok=True)
    series = result["series"]
    note = caption(result)
    written = []
    for name, draw in (("plateau", _plateau), ("recall", _recall),
                       ("compaction", _compaction)):
        from matplotlib.figure import Figure

        figure = Figure(figsize=(6.4, 3.4))
        axes = figure.subplots()
        draw(axes, series[name])
        figure.text(0.99, 0.01, note, ha="right", va="bottom", fontsize=7, color="0.4")
        figure.tight_layout(rect=(0, 0.04, 1, 1))
        path = directory / f"{name}.svg"
        figure.savefig(path, format="svg", metadata={"Date": None})
        written.append(path)
    return written


def _plateau(axes: Any, plateau: Mapping[str, Any]) -> None:
    sizes: Sequence[int] = plateau["bytes"]
    cycles = range(1, len(sizes) + 1)
    window = plateau["window"]
    axes.plot(cycles, [s / 1024 for s in sizes], marker=".", color="C0",
              label="summary size")
    axes.axhline(plateau["boundBytes"] / 1024, color="C3", linestyle="--",
                 label=f"bound ({plateau['boundBytes'] // 1024} KiB)")
    if len(sizes) >= window:
        axes.axvspan(len(sizes) - window + 0.5, len(sizes) + 0.5, color="0.9",
                     label=f"last {window} cycles: span {plateau['spanBytes']} B")
    axes.set(title="Compaction summary size per cycle (the plateau)", xlabel="compaction cycle",
             ylabel="summary (KiB)", ylim=(0, plateau["boundBytes"] / 1024 * 1.1))
    axes.legend(loc="lower right")


def _recall(axes: Any, points: Sequence[Mapping[str, Any]]) -> None:
    modes = list(dict.fromkeys(point["mode"] for point in points))
    for number, mode in enumerate(modes):
        mine = sorted((p for p in points if p["mode"] == mode), key=lambda p: p["documents"])
        documents = [p["documents"] for p in mine]
        axes.plot(documents, [p["p50Ms"] for p in mine], marker="o", color=f"C{number}",
                  label=f"{mode} p50")
        axes.plot(documents, [p["p99Ms"] for p in mine], marker="^", linestyle=":",
                  color=f"C{number}", label=f"{mode} p99")
    axes.set(title="Recall latency against index size", xlabel="documents in the index",
             ylabel="latency (ms)", xscale="log", yscale="log")
    axes.legend(ncol=2, fontsize=7)


def _compaction(axes: Any, points: Mapping[str, Any]) -> None:
    kib = points["kib"]
    axes.plot(kib, points["oursMs"], marker="o", label="compaction cycle")
    axes.plot(kib, points["floorMs"], marker="s", linestyle="--", label="read + parse (floor)")
    axes.set(title="Compaction time against session size", xlabel="session source (KiB)",
             ylabel="time (ms)", xscale="log", yscale="log")
    axes.legend()
