"""Charts for the stats page, drawn on the server as SVG: nothing to load, nothing to run."""

from __future__ import annotations

from collections.abc import Sequence

from markupsafe import Markup, escape

WIDTH = 720
BAR = 16
GAP = 4
LABEL = 220


def bar_chart(rows: Sequence[tuple[str, float]], title: str) -> Markup:
    """Horizontal bars, one per ``(label, value)``, scaled to the largest value, each with
    its value written beside it."""
    if not rows:
        return Markup(f'<p class="empty">{escape(title)}: nothing recorded yet</p>')
    top = max(value for _, value in rows) or 1
    height = len(rows) * (BAR + GAP) + GAP
    room = WIDTH - LABEL - 90
    bars = []
    for at, (label, value) in enumerate(rows):
        y = GAP + at * (BAR + GAP)
        width = max(round(room * value / top), 1 if value else 0)
        shown = f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"
        bars.append(
            f'<text x="{LABEL - 6}" y="{y + BAR - 4}" text-anchor="end">'
            f'{escape(label[:32])}</text>'
            f'<rect x="{LABEL}" y="{y}" width="{width}" height="{BAR}"><title>'
            f'{escape(label)}: {shown}</title></rect>'
            f'<text x="{LABEL + width + 6}" y="{y + BAR - 4}">{shown}</text>')
    return Markup(
        f'<figure class="chart"><figcaption>{escape(title)}</figcaption>'
        f'<svg role="img" aria-label="{escape(title)}" viewBox="0 0 {WIDTH} {height}" '
        f'width="{WIDTH}" height="{height}">{"".join(bars)}</svg></figure>')
