"""Graph: records, code entities, branches and sessions drawn as SVG at server-computed positions.

The layout arrives with the page (:mod:`agentctx.web.forcelayout`), so the browser only pans and
zooms (``graph.js`` moves the ``viewBox``). Record nodes are links to their record's page. Labels
are drawn for every node but shown only once zoomed in far enough to read them (or always on a
small graph), which keeps 2,000 nodes legible.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentctx.web.html import Safe, tag
from agentctx.web.views.page import empty, heading, page, project_select

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy as np
    from numpy.typing import NDArray

    from agentctx.web.graph import Graph, GraphNode

#: Below this many nodes the labels show without zooming.
LABELS_ALWAYS = 120
LABEL_MAX = 34
_PAD = 40.0
#: Room right of the rightmost node for its label, in SVG units.
LABEL_ROOM = 240.0
#: The smallest drawing area: fewer nodes are drawn at their size, not zoomed to fill the box.
MIN_WIDTH = 900.0
MIN_HEIGHT = 480.0


def _label(text: str) -> str:
    return text if len(text) <= LABEL_MAX else text[: LABEL_MAX - 1] + "…"


def _shape(node: GraphNode, x: float, y: float) -> Safe:
    if node.kind == "record":
        return tag("circle", cx=f"{x:.1f}", cy=f"{y:.1f}", r=7)
    if node.kind == "file":
        return tag("rect", x=f"{x - 5:.1f}", y=f"{y - 5:.1f}", width=10, height=10, rx=2)
    if node.kind == "branch":
        points = f"{x:.1f},{y - 7:.1f} {x + 7:.1f},{y:.1f} {x:.1f},{y + 7:.1f} {x - 7:.1f},{y:.1f}"
        return tag("polygon", points=points)
    if node.kind == "module":
        return tag("rect", x=f"{x - 7:.1f}", y=f"{y - 5:.1f}", width=14, height=10, rx=5)
    if node.kind == "package":
        return tag("rect", x=f"{x - 7:.1f}", y=f"{y - 7:.1f}", width=14, height=14, rx=1)
    if node.kind == "symbol":
        points = f"{x:.1f},{y - 6:.1f} {x + 6:.1f},{y + 5:.1f} {x - 6:.1f},{y + 5:.1f}"
        return tag("polygon", points=points)
    return tag("circle", cx=f"{x:.1f}", cy=f"{y:.1f}", r=4)


def _node(node: GraphNode, x: float, y: float, focus: str) -> Safe:
    kind = node.type if node.kind == "record" else node.kind
    what = f"{node.type}: " if node.kind == "record" else f"{node.kind}: "
    classes = ["node", node.kind]
    if node.kind == "record":
        classes.append(f"t-{node.type}")
        if not node.current:
            classes.append("old")
    if node.id == focus:
        classes.append("focus")
    body = (
        tag("title", what + node.label + ("" if node.current else " (superseded)")),
        _shape(node, x, y),
        tag("text", _label(node.label), x=f"{x + 10:.1f}", y=f"{y + 4:.1f}", class_="label"),
    )
    if node.kind == "record":
        return tag(
            "a",
            *body,
            href=f"/records/{node.id}",
            class_=" ".join(classes),
            data_id=node.id,
            data_kind=kind,
        )
    return tag("g", *body, class_=" ".join(classes), data_id=node.id, data_kind=kind)


def _legend() -> Safe:
    def item(label: str, shape: Safe, css: str) -> Safe:
        icon = tag("svg", shape, viewBox="-8 -8 16 16", width=14, height=14, class_=f"node {css}")
        return tag("li", icon, label)

    dot = tag("circle", cx=0, cy=0, r=6)
    return tag(
        "ul",
        item("decision", dot, "record t-decision"),
        item("convention", dot, "record t-convention"),
        item("preference", dot, "record t-preference"),
        item("discovery", dot, "record t-discovery"),
        item("bugfix", dot, "record t-bugfix"),
        item("handover", dot, "record t-handover"),
        item("superseded", dot, "record old"),
        item("file", tag("rect", x=-5, y=-5, width=10, height=10, rx=2), "file"),
        item("module", tag("rect", x=-7, y=-5, width=14, height=10, rx=5), "module"),
        item("package", tag("rect", x=-7, y=-7, width=14, height=14, rx=1), "package"),
        item("symbol", tag("polygon", points="0,-6 6,5 -6,5"), "symbol"),
        item("branch", tag("polygon", points="0,-7 7,0 0,7 -7,0"), "branch"),
        item("session", tag("circle", cx=0, cy=0, r=4), "session"),
        tag("li", tag("span", class_="swatch rel-supersedes"), "supersedes"),
        tag("li", tag("span", class_="swatch rel-applies_to"), "applies to"),
        tag("li", tag("span", class_="swatch rel-scoped_to"), "scoped to"),
        tag("li", tag("span", class_="swatch rel-observed_in"), "observed in"),
        class_="legend",
    )


def drawing(graph: Graph, pos: NDArray[np.float64], *, focus: str = "") -> Safe:
    """The ``<svg>`` of a laid-out graph."""
    index = {node.id: i for i, node in enumerate(graph.nodes)}
    # Content plus room for labels; a small graph is not blown up to fill the box.
    right = float(pos[:, 0].max()) + LABEL_ROOM if len(pos) else 0.0
    bottom = float(pos[:, 1].max()) + _PAD if len(pos) else 0.0
    width, height = max(right, MIN_WIDTH), max(bottom, MIN_HEIGHT)
    left, top = (right - width) / 2, (bottom - height) / 2
    lines = []
    for edge in graph.edges:
        a, b = pos[index[edge.source]], pos[index[edge.target]]
        lines.append(
            tag(
                "line",
                x1=f"{a[0]:.1f}",
                y1=f"{a[1]:.1f}",
                x2=f"{b[0]:.1f}",
                y2=f"{b[1]:.1f}",
                class_=f"edge rel-{edge.rel}",
            )
        )
    nodes = [_node(n, float(pos[i, 0]), float(pos[i, 1]), focus) for i, n in enumerate(graph.nodes)]
    return tag(
        "svg",
        tag("g", *lines, class_="edges"),
        tag("g", *nodes, class_="nodes"),
        viewBox=f"{left:.0f} {top:.0f} {width:.0f} {height:.0f}",
        preserveAspectRatio="xMidYMid meet",
        class_="graph" + (" labels" if len(graph.nodes) <= LABELS_ALWAYS else ""),
        id="graph",
        data_focus=focus or None,
        role="img",
        aria_label=f"graph of {len(graph.nodes)} nodes and {len(graph.edges)} links",
    )


def render(
    graph: Graph,
    pos: NDArray[np.float64],
    project: str,
    projects: Sequence[tuple[str, str]],
    *,
    focus: str,
    seconds: float,
    token: str,
) -> Safe:
    """The Graph page."""
    kinds: dict[str, int] = {}
    for node in graph.nodes:
        kinds[node.kind] = kinds.get(node.kind, 0) + 1
    parts = ", ".join(f"{n:,} {k}{'es' if k == 'branch' else 's'}" for k, n in kinds.items())
    summary = f"{len(graph.nodes):,} nodes ({parts}) · {len(graph.edges):,} links"
    if graph.truncated:
        summary += f" · the newest {len(graph.nodes):,} of {graph.total:,} nodes"
    controls = tag(
        "div",
        tag("button", "+", type="button", data_zoom="in", title="Zoom in"),
        tag("button", "−", type="button", data_zoom="out", title="Zoom out"),
        tag("button", "Fit", type="button", data_zoom="fit", title="Show everything"),
        tag(
            "label",
            tag("input", type="checkbox", id="labels", checked=len(graph.nodes) <= LABELS_ALWAYS),
            " labels",
            class_="check",
        ),
        class_="zoom",
    )
    body = (
        tag(
            "div",
            controls,
            drawing(graph, pos, focus=focus),
            class_="graph-box",
        )
        if graph.nodes
        else empty("Nothing to draw: this project has no records, files or branches yet.")
    )
    return page(
        "Graph",
        "graph",
        heading("Graph", tag("p", summary, class_="muted", id="summary")),
        tag(
            "form",
            project_select(projects, project),
            tag("input", type="hidden", name="focus", value=focus) if focus else None,
            tag(
                "p",
                "Drag to pan, scroll to zoom, click a record to open it. "
                f"Laid out in {seconds * 1000:,.0f} ms.",
                class_="muted small",
            ),
            method="get",
            action="/graph",
            class_="filters compact",
        ),
        body,
        _legend(),
        token=token,
        scripts=("graph.js",),
    )
