"""Force-directed graph layout on the server, with numpy only (no graph library).

The dashboard draws the graph as SVG at fixed coordinates, so the browser does no physics: a
2,000-node graph arrives laid out. Each connected component is laid out on its own with
Fruchterman-Reingold (repulsion k²/d between every pair, attraction d²/k along edges, a
temperature that cools linearly), started from a deterministic spiral so the same graph always
gets the same picture. Components are then packed in rows, largest first, and isolated nodes (many
records link to nothing) go in a compact grid after them instead of being flung to the rim.

The pairwise step is O(n²) per iteration on float32 arrays; at 2,000 nodes in one component that
is about 16 MB per array and some tens of milliseconds per iteration, so the iteration count
shrinks as components grow (see :func:`_iterations`), which the spiral start makes affordable.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Sequence

    from numpy.typing import NDArray

#: The ideal edge length, in layout units (the SVG user units the page draws in).
SPACING = 50.0
#: Room left between packed components, in units of :data:`SPACING`.
GAP = 1.5
#: Width over height of the packed drawing (the dashboard's graph box is about this shape).
ASPECT = 2.2
#: The width of an isolated node's cell in the grid, in units of :data:`SPACING`.
SINGLE_CELL = 5


def layout(n: int, edges: Sequence[tuple[int, int]], *, seed: int = 0) -> NDArray[np.float64]:
    """Positions (``n`` × 2, non-negative, in SVG units) for nodes ``0..n-1`` joined by ``edges``."""
    out = np.zeros((n, 2), dtype=np.float64)
    if n == 0:
        return out
    components = _components(n, edges)
    local_edges: dict[int, list[tuple[int, int]]] = {}
    label = np.empty(n, dtype=np.int64)
    index = np.empty(n, dtype=np.int64)
    for c, members in enumerate(components):
        label[members] = c
        index[members] = np.arange(len(members))
    for a, b in edges:
        if a != b:
            local_edges.setdefault(int(label[a]), []).append((int(index[a]), int(index[b])))
    singles: list[int] = []
    boxes: list[NDArray[np.float64]] = [np.zeros((1, 2))] * len(components)
    batches: dict[int, list[int]] = {}
    for c, members in enumerate(components):
        if len(members) == 1:
            singles.append(members[0])
        elif len(members) <= BATCH_MAX:  # padded to the next power of two
            batches.setdefault(1 << (len(members) - 1).bit_length(), []).append(c)
        else:
            pos = _fruchterman_reingold(len(members), local_edges.get(c, []), seed + c)
            boxes[c] = pos - pos.min(axis=0)
    for batch in batches.values():
        laid = _fruchterman_reingold_batch(
            [len(components[c]) for c in batch], [local_edges.get(c, []) for c in batch], seed
        )
        for c, pos in zip(batch, laid, strict=True):
            boxes[c] = pos - pos.min(axis=0)
    multi = [c for c, members in enumerate(components) if len(members) > 1]
    multi.sort(key=lambda c: (-len(components[c]), components[c][0]))
    placed = _pack([boxes[c] for c in multi])
    for c, pos in zip(multi, placed, strict=True):
        out[components[c]] = pos
    drawn = out[[m for c in multi for m in components[c]]]
    top = float(drawn[:, 1].max()) if multi else -SPACING
    right = float(drawn[:, 0].max()) if multi else 0.0
    if singles:
        # Labels run to the right of a node, so isolated nodes get wide cells; the grid keeps
        # the drawing's aspect: columns · cell ≈ ASPECT · rows · SPACING.
        cell = SPACING * SINGLE_CELL
        per_row = max(
            math.ceil(math.sqrt(len(singles) * ASPECT / SINGLE_CELL)),
            min(len(singles), 4),
            int(right // cell) + 1,
        )
        for i, node in enumerate(singles):
            row, col = divmod(i, per_row)
            out[node] = (col * cell, top + SPACING * (GAP + row))
    return out + SPACING  # a margin, so no circle is cut at the edge of the drawing


def _components(n: int, edges: Sequence[tuple[int, int]]) -> list[list[int]]:
    """Connected components (union-find), each sorted, in order of their smallest node."""
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in edges:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    groups: dict[int, list[int]] = {}
    for node in range(n):
        groups.setdefault(find(node), []).append(node)
    return list(groups.values())


def _iterations(n: int) -> int:
    # Small components settle in a few dozen steps; big ones get fewer, costlier steps.
    if n <= 200:
        return 120
    if n <= 800:
        return 80
    return 50


def _spiral(n: int, turn: float) -> NDArray[np.float32]:
    """A sunflower spiral of ``n`` points: even density, deterministic, no two on one spot."""
    i = np.arange(n, dtype=np.float32)
    radius = np.float32(SPACING) * np.sqrt(i + 0.5) * np.float32(0.6)
    angle = i * np.float32(math.pi * (3 - math.sqrt(5))) + np.float32(turn)
    return np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=-1)


def _fruchterman_reingold(
    n: int, edges: Sequence[tuple[int, int]], seed: int
) -> NDArray[np.float64]:
    """One connected component's positions, ideal edge length :data:`SPACING`."""
    k = np.float32(SPACING)
    pos = _spiral(n, seed % 7)
    src = np.array([a for a, _ in edges], dtype=np.int64)
    dst = np.array([b for _, b in edges], dtype=np.int64)
    steps = _iterations(n)
    start = float(np.abs(pos).max()) / 4 + float(k)
    repulse = _Repulsion(n, float(k * k))
    for step in range(steps):
        temperature = np.float32(start * (1 - step / steps) + 0.5)
        disp = repulse(pos)
        _attract(pos, disp, src, dst)
        length = np.sqrt((disp * disp).sum(axis=-1, keepdims=True)) + np.float32(1e-6)
        pos += disp / length * np.minimum(length, temperature)
    return pos.astype(np.float64)


def _attract(
    pos: NDArray[np.float32],
    disp: NDArray[np.float32],
    src: NDArray[np.int64],
    dst: NDArray[np.int64],
) -> None:
    """Add the d²/k pull along each edge (flat node indices) to ``disp``."""
    if not len(src):
        return
    delta = pos[src] - pos[dst]
    dist = np.sqrt((delta * delta).sum(axis=-1, keepdims=True)) + np.float32(0.01)
    pull = delta * (dist / np.float32(SPACING))  # d²/k along the unit vector: delta·d/k
    np.subtract.at(disp, src, pull)
    np.add.at(disp, dst, pull)


#: Components up to this size are laid out together, in batches of equal padded size: hundreds
#: of tiny components (a record and its file) would otherwise cost one Python loop each.
BATCH_MAX = 64


def _fruchterman_reingold_batch(
    sizes: Sequence[int], edges: Sequence[Sequence[tuple[int, int]]], seed: int
) -> list[NDArray[np.float64]]:
    """Several small components at once, each in its own frame (no force between them)."""
    count, m = len(sizes), max(sizes)
    k2 = np.float32(SPACING * SPACING)
    pos = np.stack([_spiral(m, (seed + c) % 7) for c in range(count)])  # (count, m, 2)
    valid = np.arange(m)[None, :] < np.asarray(sizes)[:, None]  # (count, m)
    pairs = (valid[:, :, None] & valid[:, None, :]).astype(np.float32)
    src = np.array([c * m + a for c, es in enumerate(edges) for a, _ in es], dtype=np.int64)
    dst = np.array([c * m + b for c, es in enumerate(edges) for _, b in es], dtype=np.int64)
    radius = np.float32(SPACING * 0.6) * np.sqrt(np.asarray(sizes, dtype=np.float32) - 0.5)
    start = (radius / 4 + np.float32(SPACING))[:, None, None]
    steps = _iterations(m)
    for step in range(steps):
        temperature = start * np.float32(1 - step / steps) + np.float32(0.5)
        delta = pos[:, :, None, :] - pos[:, None, :, :]  # (count, m, m, 2)
        d2 = (delta * delta).sum(axis=-1) + np.float32(0.01)
        push = k2 / d2 * pairs
        disp = (delta * push[..., None]).sum(axis=2)
        flat = disp.reshape(-1, 2)
        _attract(pos.reshape(-1, 2), flat, src, dst)
        disp = flat.reshape(count, m, 2) * valid[..., None]
        length = np.sqrt((disp * disp).sum(axis=-1, keepdims=True)) + np.float32(1e-6)
        pos += disp / length * np.minimum(length, temperature)
    return [pos[c, : sizes[c]].astype(np.float64) for c in range(count)]


class _Repulsion:
    """The k²/d push between every pair, in blocks of rows that stay in the CPU cache.

    Whole n × n arrays at 2,000 nodes are 16 MB each and ran three times slower (memory bound)
    than :data:`BLOCK`-row slices into buffers allocated once.
    """

    BLOCK = 64

    def __init__(self, n: int, k2: float) -> None:
        rows = min(n, self.BLOCK)
        self._dx = np.empty((rows, n), dtype=np.float32)
        self._dy = np.empty((rows, n), dtype=np.float32)
        self._d2 = np.empty((rows, n), dtype=np.float32)
        self._tmp = np.empty((rows, n), dtype=np.float32)
        self._k2 = np.float32(k2)

    def __call__(self, pos: NDArray[np.float32]) -> NDArray[np.float32]:
        """Each node's summed push from all others (``n`` × 2)."""
        n = len(pos)
        x, y = pos[:, 0], pos[:, 1]
        out = np.empty((n, 2), dtype=np.float32)
        for s in range(0, n, self.BLOCK):
            e = min(n, s + self.BLOCK)
            dx, dy, d2, tmp = (a[: e - s] for a in (self._dx, self._dy, self._d2, self._tmp))
            np.subtract(x[s:e, None], x, out=dx)
            np.subtract(y[s:e, None], y, out=dy)
            np.multiply(dx, dx, out=d2)
            np.multiply(dy, dy, out=tmp)
            np.add(d2, tmp, out=d2)
            np.add(d2, np.float32(0.01), out=d2)  # a node on itself: delta 0, so no push
            np.divide(self._k2, d2, out=d2)  # k²/d along the unit vector is k²·delta/d²
            out[s:e, 0] = np.einsum("ij,ij->i", dx, d2)
            out[s:e, 1] = np.einsum("ij,ij->i", dy, d2)
        return out


def _row_width(boxes: Sequence[NDArray[np.float64]]) -> float:
    """The width rows are packed to: about :data:`ASPECT` wide for each unit of height (as the
    page's drawing area), never narrower than the widest box."""
    if not boxes:
        return 0.0
    sizes = [b.max(axis=0) + SPACING * GAP for b in boxes]
    area = sum(float(w * h) for w, h in sizes)
    return max(math.sqrt(area * ASPECT), max(float(w) for w, _ in sizes))


def _pack(boxes: Sequence[NDArray[np.float64]]) -> list[NDArray[np.float64]]:
    """Shelf packing: boxes left to right in rows of :func:`_row_width`, rows top to bottom."""
    width = _row_width(boxes)
    placed: list[NDArray[np.float64]] = []
    x = y = row_height = 0.0
    for box in boxes:
        w, h = (float(v) for v in box.max(axis=0))
        if x > 0 and x + w > width * 1.25:  # a row may run over a little rather than break
            x, y, row_height = 0.0, y + row_height + SPACING * GAP, 0.0
        placed.append(box + np.array((x, y)))
        x += w + SPACING * GAP
        row_height = max(row_height, h)
    return placed
