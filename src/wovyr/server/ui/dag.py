"""A layered DAG layout of our own, drawn as SVG text on the server.

Layers come from the longest path over `needs` (a node sits one layer below its deepest
dependency), so every edge points downward. Within a layer, nodes are ordered by the
barycenter of their neighbours' positions, sweeping down and up a few times and keeping
the ordering with the fewest crossings. A layer wider than `MAX_PER_ROW` wraps onto
staggered rows (node i goes to row i % rows), which keeps the drawing narrow enough to
read past 200 nodes while preserving the left-to-right order. Output is deterministic:
the same graph gives the same SVG, byte for byte (a snapshot test holds it).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from html import escape
from typing import Any

__all__ = ["DagLayout", "NodeBox", "item_counts", "layout_dag", "render_svg"]

NODE_W = 168
NODE_H = 46
H_GAP = 28
ROW_GAP = 18
LAYER_GAP = 52
MARGIN = 24
EDGE_PAD = 6
EDGE_SPREAD = 5  # px between long edges that share a gap
MAX_PER_ROW = 8
SWEEPS = 4
LABEL_CHARS = 22
UNDO_OFFSET = 12  # px between a saga arrow and the dependency edge it would cover
SLOT = NODE_W + H_GAP


@dataclass(frozen=True)
class NodeBox:
    """Where one node sits: top-left corner, size, and its layer/row."""

    id: str
    x: int
    y: int
    width: int
    height: int
    layer: int
    row: int

    @property
    def center_x(self) -> int:
        return self.x + self.width // 2

    @property
    def bottom(self) -> int:
        return self.y + self.height


@dataclass(frozen=True)
class DagLayout:
    nodes: dict[str, NodeBox]
    edges: list[tuple[str, str]]  # (dependency, dependant): drawn from the first to the second
    width: int
    height: int
    # Edges spanning several layers pass each layer in between through a gap between its
    # boxes: (x, top, bottom) per layer crossed, top to bottom.
    routes: dict[tuple[str, str], list[tuple[int, int, int]]] = field(default_factory=dict)


def _links(
    order: Sequence[str], needs: Mapping[str, Sequence[str]]
) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Each node's predecessors (its needs that are nodes, once, not itself) and successors."""
    known = set(order)
    preds = {
        n: [d for d in dict.fromkeys(needs.get(n, ())) if d in known and d != n] for n in order
    }
    succs: dict[str, list[str]] = {n: [] for n in order}
    for n in order:
        for d in preds[n]:
            succs[d].append(n)
    return preds, succs


def _layers(order: Sequence[str], needs: Mapping[str, Sequence[str]]) -> dict[str, int]:
    """Longest-path layering (Kahn's order). Nodes caught in a cycle, which validation
    forbids, are put below everything else rather than lost."""
    preds, succs = _links(order, needs)
    indegree = {n: len(preds[n]) for n in order}
    layer: dict[str, int] = {}
    queue = [n for n in order if indegree[n] == 0]
    head = 0
    while head < len(queue):
        n = queue[head]
        head += 1
        layer[n] = max((layer[d] + 1 for d in preds[n]), default=0)
        for s in succs[n]:
            indegree[s] -= 1
            if indegree[s] == 0:
                queue.append(s)
    deepest = max(layer.values(), default=-1)
    for n in order:
        layer.setdefault(n, deepest + 1)
    return layer


def _crossings(
    upper: Sequence[str], lower: Sequence[str], preds: Mapping[str, Sequence[str]]
) -> int:
    """Crossings between two adjacent layers (edges that span more layers are ignored)."""
    pos = {n: i for i, n in enumerate(upper)}
    ends = [(pos[d], j) for j, n in enumerate(lower) for d in preds[n] if d in pos]
    ends.sort()
    count = 0
    for i, (a, b) in enumerate(ends):
        for c, d in ends[i + 1 :]:
            if c > a and d < b:
                count += 1
    return count


def _order(
    layers: list[list[str]], preds: Mapping[str, list[str]], succs: Mapping[str, list[str]]
) -> list[list[str]]:
    """Barycenter ordering: positions are normalised to [0, 1] within each layer so that
    edges spanning several layers pull too. Keeps the best of a few down/up sweeps."""

    def positions(current: list[list[str]]) -> dict[str, float]:
        pos: dict[str, float] = {}
        for row in current:
            span = max(1, len(row) - 1)
            for i, n in enumerate(row):
                pos[n] = i / span if len(row) > 1 else 0.5
        return pos

    def total(current: list[list[str]]) -> int:
        return sum(_crossings(a, b, preds) for a, b in itertools.pairwise(current))

    best = [list(row) for row in layers]
    best_score = total(best)
    current = [list(row) for row in layers]
    for sweep in range(SWEEPS * 2):
        downward = sweep % 2 == 0
        indices = range(1, len(current)) if downward else range(len(current) - 2, -1, -1)
        for li in indices:
            pos = positions(current)
            row = current[li]
            neighbours = preds if downward else succs
            keyed = []
            for i, n in enumerate(row):
                near = [pos[m] for m in neighbours[n]]
                here = i / max(1, len(row) - 1) if len(row) > 1 else 0.5
                keyed.append((sum(near) / len(near) if near else here, i, n))
            keyed.sort()
            current[li] = [n for _, _, n in keyed]
        score = total(current)
        if score < best_score:
            best, best_score = [list(row) for row in current], score
        if best_score == 0:
            break
    return best


def _band(count: int) -> tuple[int, float, int]:
    """How a layer of `count` nodes is drawn: (rows, x step between consecutive nodes,
    total width). Staggered rows keep same-row neighbours one full slot apart."""
    rows = max(1, math.ceil(count / MAX_PER_ROW))
    step = SLOT / rows
    return rows, step, (round((count - 1) * step) + NODE_W if count else 0)


def layout_dag(nodes: Sequence[tuple[str, Sequence[str]]]) -> DagLayout:
    """Lay out `nodes`, given as (id, needs) in definition order."""
    order = list(dict.fromkeys(n for n, _ in nodes))
    needs = {n: list(deps) for n, deps in nodes}
    layer_of = _layers(order, needs)
    preds, succs = _links(order, needs)
    depth = max(layer_of.values(), default=-1) + 1
    layers: list[list[str]] = [[] for _ in range(depth)]
    for n in order:
        layers[layer_of[n]].append(n)
    layers = _order(layers, preds, succs)

    shapes = [_band(len(row)) for row in layers]
    width = MARGIN * 2 + max((band_width for _, _, band_width in shapes), default=0)
    boxes: dict[str, NodeBox] = {}
    y = MARGIN
    for li, row in enumerate(layers):
        rows, step, band_width = shapes[li]
        left = MARGIN + (width - 2 * MARGIN - band_width) // 2
        for i, n in enumerate(row):
            r = i % rows
            boxes[n] = NodeBox(
                n, left + round(i * step), y + r * (NODE_H + ROW_GAP), NODE_W, NODE_H, li, r
            )
        y += rows * (NODE_H + ROW_GAP) - ROW_GAP + LAYER_GAP
    height = y - LAYER_GAP + MARGIN if layers else MARGIN * 2
    edges = [(d, n) for n in order for d in preds[n]]
    routes = _route(boxes, edges, width)
    left, right = _side_crowding(boxes, routes, width)
    if left or right:  # widen the outer channels so bundled long edges stay apart
        boxes = {n: replace(b, x=b.x + left) for n, b in boxes.items()}
        width += left + right
        routes = _route(boxes, edges, width)
    return DagLayout(boxes, edges, width, height, routes)


def _side_crowding(
    boxes: Mapping[str, NodeBox],
    routes: Mapping[tuple[str, str], list[tuple[int, int, int]]],
    width: int,
) -> tuple[int, int]:
    """How much wider the left and right outer channels must be for their edges."""
    lo: dict[int, int] = {}  # by band top: a layer's leftmost box edge over all its rows
    hi: dict[int, int] = {}
    top_of: dict[int, int] = {}
    for box in boxes.values():
        top_of[box.layer] = min(top_of.get(box.layer, box.y), box.y)
    for box in boxes.values():
        top = top_of[box.layer]
        lo[top] = min(lo.get(top, box.x), box.x)
        hi[top] = max(hi.get(top, box.x + box.width), box.x + box.width)
    left: dict[int, int] = {}
    right: dict[int, int] = {}
    for passes in routes.values():
        for x, top, _ in passes:
            if x < lo[top]:
                left[top] = left.get(top, 0) + 1
            elif x > hi[top]:
                right[top] = right.get(top, 0) + 1
    need_left = max(
        (n * EDGE_SPREAD + 8 - (lo[top] - EDGE_PAD - 4) for top, n in left.items()), default=0
    )
    need_right = max(
        (n * EDGE_SPREAD + 8 - (width - 4 - hi[top] - EDGE_PAD) for top, n in right.items()),
        default=0,
    )
    return max(0, need_left), max(0, need_right)


def _free(boxes: list[NodeBox], width: int) -> list[tuple[int, int]]:
    """The x intervals of a layer's band that no box (plus padding) covers."""
    free, cursor = [], 4
    for lo, hi in sorted((b.x - EDGE_PAD, b.x + b.width + EDGE_PAD) for b in boxes):
        if lo > cursor:
            free.append((cursor, lo))
        cursor = max(cursor, hi)
    if width - 4 > cursor:
        free.append((cursor, width - 4))
    return free


def _nearest(free: list[tuple[int, int]], x: float) -> int:
    """The index of the interval nearest `x` (the leftmost on a tie)."""
    distances = [(max(lo - x, x - hi, 0.0), i) for i, (lo, hi) in enumerate(free)]
    return min(distances)[1]


def _route(
    boxes: Mapping[str, NodeBox], edges: list[tuple[str, str]], width: int
) -> dict[tuple[str, str], list[tuple[int, int, int]]]:
    """Send each long edge through the free gap nearest its straight line in every layer
    it crosses, so it never runs behind a box; edges sharing a gap are spread across it."""
    by_layer: dict[int, list[NodeBox]] = {}
    for box in boxes.values():
        by_layer.setdefault(box.layer, []).append(box)
    bands = {
        k: (min(b.y for b in bs), max(b.bottom for b in bs), _free(bs, width))
        for k, bs in by_layer.items()
    }
    wanted: dict[tuple[int, int], list[tuple[float, int]]] = {}
    for index, (src, dst) in enumerate(edges):
        a, b = boxes[src], boxes[dst]
        for k in range(a.layer + 1, b.layer):
            top, bottom, free = bands[k]
            t = ((top + bottom) / 2 - a.bottom) / max(1, b.y - a.bottom)
            ideal = a.center_x + (b.center_x - a.center_x) * t
            wanted.setdefault((k, _nearest(free, ideal)), []).append((ideal, index))
    routes: dict[tuple[str, str], list[tuple[int, int, int]]] = {}
    for (k, gap), passing in sorted(wanted.items()):
        top, bottom, free = bands[k]
        lo, hi = free[gap]
        passing.sort()
        for i, (ideal, index) in enumerate(passing):
            if len(passing) == 1:
                x = min(max(round(ideal), lo + 2), hi - 2) if hi - lo > 4 else (lo + hi) // 2
            else:
                x = lo + round((hi - lo) * (i + 1) / (len(passing) + 1))
            routes.setdefault(edges[index], []).append((x, top, bottom))
    for passes in routes.values():
        passes.sort(key=lambda p: p[1])
    return routes


def _label(text: str, limit: int = LABEL_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _curve(x0: int, y0: int, x1: int, y1: int) -> str:
    mid = (y0 + y1) // 2
    return f" C{x0} {mid} {x1} {mid} {x1} {y1}"


def _edge_path(a: NodeBox, b: NodeBox, passes: Sequence[tuple[int, int, int]]) -> str:
    x, y = a.center_x, a.bottom
    path = f"M{x} {y}"
    for px, top, bottom in passes:
        path += _curve(x, y, px, top) + f" L{px} {bottom}"
        x, y = px, bottom
    return path + _curve(x, y, b.center_x, b.y - 3)  # stop short: the arrow head shows


def _status_class(status: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in status.lower()) or "unknown"


def _node_title(node_id: str, info: Mapping[str, Any]) -> str:
    parts = [node_id, str(info.get("status") or "pending")]
    if info.get("kind"):
        parts.append(f"kind {info['kind']}")
    attempt = int(info.get("attempt") or 0)
    if attempt:
        limit = info.get("max_attempts")
        parts.append(f"attempt {attempt}/{limit}" if limit else f"attempt {attempt}")
    if info.get("detail"):
        parts.append(str(info["detail"]))
    return " \u2014 ".join(parts)


_ITEM_DONE = frozenset({"completed", "skipped", "compensated", "compensating"})
_ITEM_FAILED = frozenset({"failed", "compensation_failed"})
_ITEM_ACTIVE = frozenset({"running", "waiting", "retrying"})


def item_counts(items: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """A `for_each` activity's items by outcome: done, failed, active (running, waiting,
    retrying) and pending, summing to the number of items."""
    counts = {"done": 0, "failed": 0, "active": 0, "pending": 0}
    for item in items:
        status = str(item.get("status") or "pending")
        if status in _ITEM_DONE:
            counts["done"] += 1
        elif status in _ITEM_FAILED:
            counts["failed"] += 1
        elif status in _ITEM_ACTIVE:
            counts["active"] += 1
        else:
            counts["pending"] += 1
    return counts


def _items_svg(box: NodeBox, items: Sequence[Mapping[str, Any]]) -> list[str]:
    """A progress bar along the node's bottom edge: done, failed and active items."""
    counts = item_counts(items)
    total = len(items)
    inner = box.width - 12
    out = [
        f'<g class="items" data-total="{total}" data-done="{counts["done"]}"'
        f' data-failed="{counts["failed"]}" data-active="{counts["active"]}">',
        f'<rect class="track" x="6" y="{box.height - 7}" width="{inner}" height="4" rx="2"/>',
    ]
    x = 6.0
    for name, css in (("done", "completed"), ("failed", "failed"), ("active", "running")):
        width = inner * counts[name] / total
        if width > 0:
            out.append(
                f'<rect class="seg status-{css}" x="{x:.1f}" y="{box.height - 7}"'
                f' width="{width:.1f}" height="4"/>'
            )
        x += width
    out.append("</g>")
    return out


def _undo_svg(box: NodeBox, info: Mapping[str, Any]) -> str:
    """The mark of an activity that declares `compensate`; once the saga runs, its place in
    the compensation order (1 = undone first)."""
    step = info.get("compensation_step")
    text = "\u21ba" if step is None else f"\u21ba{int(step) + 1}"
    what = "compensable" if step is None else f"compensation step {int(step) + 1}"
    return (
        f'<text class="undo" x="{box.width - 6}" y="13"><title>{what}</title>{escape(text)}</text>'
    )


def _node_svg(box: NodeBox, info: Mapping[str, Any], href: str | None) -> list[str]:
    status = str(info.get("status") or "pending")
    sub = status.replace("_", " ")
    attempt = int(info.get("attempt") or 0)
    items = info.get("items")
    if isinstance(items, list) and items:
        counts = item_counts(items)
        sub = f"items {counts['done']}/{len(items)}"
        if counts["failed"]:
            sub += f" \u00b7 {counts['failed']} failed"
    elif attempt > 1:
        sub += f" \u00b7 try {attempt}"
    if info.get("kind") and not (isinstance(items, list) and items):
        sub += f" \u00b7 {info['kind']}"
    nid = escape(box.id, quote=True)
    cls = _status_class(status)
    out = [
        f'<g class="node status-{cls}" data-activity="{nid}" data-status="{escape(status)}"'
        f' transform="translate({box.x},{box.y})">',
        f"<title>{escape(_node_title(box.id, info))}</title>",
    ]
    if href is not None:
        out.append(f'<a href="{escape(href, quote=True)}">')
    out += [
        f'<rect width="{box.width}" height="{box.height}" rx="7"/>',
        f'<text class="label" x="{box.width // 2}" y="19">{escape(_label(box.id))}</text>',
        f'<text class="sub" x="{box.width // 2}" y="36">{escape(_label(sub, 28))}</text>',
    ]
    if isinstance(items, list) and items:
        out += _items_svg(box, items)
    if info.get("compensable"):
        out.append(_undo_svg(box, info))
    if href is not None:
        out.append("</a>")
    out.append("</g>")
    return out


def _toward(box: NodeBox, x: float, y: float) -> tuple[float, float]:
    """Where the line from (x, y) to the box's centre meets the box's edge."""
    cx, cy = box.x + box.width / 2, box.y + box.height / 2
    dx, dy = x - cx, y - cy
    if dx == 0 and dy == 0:
        return cx, cy
    scale = min(
        (box.width / 2 + 3) / abs(dx) if dx else math.inf,
        (box.height / 2 + 3) / abs(dy) if dy else math.inf,
    )
    return cx + dx * scale, cy + dy * scale


def _compensation_svg(layout: DagLayout, info: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Dashed arrows through the saga's order (reverse completion), once it started."""
    steps = sorted(
        (int(i["compensation_step"]), n)
        for n, i in info.items()
        if i.get("compensation_step") is not None and n in layout.nodes
    )
    if len(steps) < 2:
        return []
    out = ['<g class="compensation">']
    for (_, a_id), (_, b_id) in itertools.pairwise(steps):
        a, b = layout.nodes[a_id], layout.nodes[b_id]
        bx, by = b.x + b.width / 2, b.y + b.height / 2
        x0, y0 = _toward(a, bx, by)
        x1, y1 = _toward(b, a.x + a.width / 2, a.y + a.height / 2)
        # beside, not on, a dependency edge that joins the same two nodes
        length = math.hypot(x1 - x0, y1 - y0) or 1.0
        ox, oy = -(y1 - y0) / length * UNDO_OFFSET, (x1 - x0) / length * UNDO_OFFSET
        x0, y0, x1, y1 = x0 + ox, y0 + oy, x1 + ox, y1 + oy
        out.append(
            f'<path class="edge undo" d="M{x0:.0f} {y0:.0f} L{x1:.0f} {y1:.0f}"'
            ' marker-end="url(#dag-arrow)"'
            f' data-from="{escape(a_id, quote=True)}" data-to="{escape(b_id, quote=True)}"/>'
        )
    out.append("</g>")
    return out


def render_svg(
    layout: DagLayout,
    info: Mapping[str, Mapping[str, Any]],
    *,
    link_prefix: str | None = None,
) -> str:
    """The layout as one `<svg>` element. `info[id]` may hold status, kind, attempt,
    max_attempts and detail; `link_prefix` + id becomes each node's link (e.g. `#act-`)."""
    w, h = layout.width, layout.height
    lines = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="dag" viewBox="0 0 {w} {h}"'
        f' width="{w}" height="{h}" role="img"'
        f' aria-label="Workflow graph with {len(layout.nodes)} activities">',
        '<defs><marker id="dag-arrow" viewBox="0 0 10 10" refX="9" refY="5"'
        ' markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
        '<path d="M0 0L10 5L0 10z"/></marker></defs>',
        '<g class="edges">',
    ]
    for src, dst in layout.edges:
        a, b = layout.nodes[src], layout.nodes[dst]
        state = _status_class(str(info.get(src, {}).get("status") or "pending"))
        passes = layout.routes.get((src, dst), [])
        lines.append(
            f'<path class="edge from-{state}" d="{_edge_path(a, b, passes)}"'
            ' marker-end="url(#dag-arrow)"'
            f' data-from="{escape(src, quote=True)}" data-to="{escape(dst, quote=True)}"/>'
        )
    lines.append("</g>")
    lines.extend(_compensation_svg(layout, info))
    lines.append('<g class="nodes">')
    for node_id, box in layout.nodes.items():
        href = f"{link_prefix}{node_id}" if link_prefix is not None else None
        lines.extend(_node_svg(box, info.get(node_id, {}), href))
    lines.append("</g>")
    lines.append("</svg>")
    return "\n".join(lines) + "\n"
