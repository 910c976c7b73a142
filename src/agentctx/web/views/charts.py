"""Small SVG charts drawn on the server: bars per day, and a record-type breakdown strip.

Plain SVG elements with presentation attributes (the Content-Security-Policy forbids inline
``style``), a ``<title>`` per bar so hovering tells the exact value, and the maximum written on
the axis so a chart can be read without hovering.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentctx.core import schema
from agentctx.web.html import Safe, tag

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

WIDTH = 320
HEIGHT = 96
_TOP = 14
_BOTTOM = 16


def bars(
    title: str,
    points: Sequence[tuple[str, float]],
    *,
    fmt: Callable[[float], str] = lambda v: f"{v:,.0f}",
    css: str = "",
) -> Safe:
    """A captioned bar chart, one bar per (label, value), labels as ``YYYY-MM-DD`` days."""
    n = max(1, len(points))
    top = max((v for _, v in points), default=0.0)
    plot = HEIGHT - _TOP - _BOTTOM
    slot = WIDTH / n
    parts: list[Safe] = []
    for i, (label, value) in enumerate(points):
        h = 0.0 if top <= 0 else max(1.0 if value > 0 else 0.0, plot * value / top)
        parts.append(
            tag(
                "rect",
                tag("title", f"{label}: {fmt(value)}"),
                x=f"{i * slot + 1:.1f}",
                y=f"{_TOP + plot - h:.1f}",
                width=f"{max(1.0, slot - 2):.1f}",
                height=f"{h:.1f}",
                class_="bar",
            )
        )
    axis = tag("line", x1=0, x2=WIDTH, y1=_TOP + plot + 0.5, y2=_TOP + plot + 0.5, class_="axis")
    ends = []
    if points:
        ends = [
            tag("text", points[0][0][5:], x=0, y=HEIGHT - 3, class_="tick"),
            tag("text", points[-1][0][5:], x=WIDTH, y=HEIGHT - 3, class_="tick end"),
        ]
    peak = tag("text", f"max {fmt(top)}", x=WIDTH, y=10, class_="tick end")
    total = sum(v for _, v in points)
    svg = tag(
        "svg",
        *parts,
        axis,
        *ends,
        peak,
        viewBox=f"0 0 {WIDTH} {HEIGHT}",
        width=WIDTH,
        height=HEIGHT,
        role="img",
        aria_label=f"{title} per day",
        class_="chart",
    )
    return tag(
        "figure",
        tag("figcaption", tag("span", title), tag("strong", fmt(total))),
        svg,
        class_=f"chart-box {css}".strip(),
    )


def type_strip(counts: Mapping[str, int], *, width: int = 240, height: int = 10) -> Safe:
    """One horizontal bar split by record type (the Projects view's breakdown)."""
    total = sum(counts.values())
    parts: list[Safe] = []
    x = 0.0
    for record_type in schema.RECORD_TYPES:
        n = counts.get(record_type, 0)
        if not n or not total:
            continue
        w = width * n / total
        parts.append(
            tag(
                "rect",
                tag("title", f"{record_type}: {n}"),
                x=f"{x:.2f}",
                y=0,
                width=f"{w:.2f}",
                height=height,
                class_=f"f-{record_type}",
            )
        )
        x += w
    if not parts:
        parts.append(tag("rect", x=0, y=0, width=width, height=height, class_="f-none"))
    return tag(
        "svg",
        *parts,
        viewBox=f"0 0 {width} {height}",
        width=width,
        height=height,
        preserveAspectRatio="none",
        class_="strip",
        role="img",
        aria_label="current records by type",
    )
