"""The DAG layout and its SVG: no overlaps, edges downward, deterministic, fast past 200
nodes, and a committed snapshot of a small graph."""

from __future__ import annotations

import itertools
import os
import random
import re
from collections.abc import Sequence
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.counting import counting_calls

from wovyr.server.ui.dag import MAX_PER_ROW, DagLayout, NodeBox, layout_dag, render_svg

SNAPSHOTS = Path(__file__).parent / "snapshots"
Graph = list[tuple[str, list[str]]]


def _overlap(a: NodeBox, b: NodeBox) -> bool:
    return not (
        a.x + a.width <= b.x
        or b.x + b.width <= a.x
        or a.y + a.height <= b.y
        or b.y + b.height <= a.y
    )


def assert_sane(layout: DagLayout, graph: Sequence[tuple[str, Sequence[str]]]) -> None:
    boxes = list(layout.nodes.values())
    assert sorted(layout.nodes) == sorted(n for n, _ in graph)
    # Sweep by rows: boxes only meet boxes that share their vertical band.
    by_y: dict[int, list[NodeBox]] = {}
    for box in boxes:
        by_y.setdefault(box.y, []).append(box)
        assert box.x >= 0 and box.y >= 0
        assert box.x + box.width <= layout.width and box.bottom <= layout.height
    for row in by_y.values():
        row.sort(key=lambda b: b.x)
        for left, right in itertools.pairwise(row):
            assert not _overlap(left, right), (left, right)
    ys = sorted(by_y)
    assert all(b - a >= boxes[0].height for a, b in itertools.pairwise(ys))
    for src, dst in layout.edges:
        assert layout.nodes[dst].y > layout.nodes[src].bottom, (src, dst)  # edges go down
    for (src, dst), passes in layout.routes.items():
        crossed = range(layout.nodes[src].layer + 1, layout.nodes[dst].layer)
        assert len(passes) == len(crossed)
        for x, top, bottom in passes:  # a long edge never runs behind a box it passes
            assert 0 < x < layout.width
            for box in boxes:
                if top <= box.y and box.bottom <= bottom:
                    assert not box.x <= x <= box.x + box.width, (src, dst, box)


def random_dag(n: int, seed: int, window: int = 40) -> Graph:
    rng = random.Random(seed)
    graph: Graph = []
    for i in range(n):
        earlier = [name for name, _ in graph[-window:]]
        k = min(len(earlier), rng.choice([0, 1, 1, 2, 3]))
        graph.append((f"step_{i:03d}", rng.sample(earlier, k)))
    return graph


def test_chain_is_one_column() -> None:
    layout = layout_dag([("a", []), ("b", ["a"]), ("c", ["b"])])
    xs = {box.x for box in layout.nodes.values()}
    assert len(xs) == 1
    assert [layout.nodes[n].layer for n in "abc"] == [0, 1, 2]
    assert layout.edges == [("a", "b"), ("b", "c")]


def test_longest_path_layering() -> None:
    # d needs a (layer 0) and c (layer 2): it goes below c, not below a.
    layout = layout_dag([("a", []), ("b", ["a"]), ("c", ["b"]), ("d", ["a", "c"])])
    assert layout.nodes["d"].layer == 3
    assert_sane(layout, [("a", []), ("b", ["a"]), ("c", ["b"]), ("d", ["a", "c"])])


def test_barycenter_removes_an_avoidable_crossing() -> None:
    # Declared order crosses: x->q, y->p. Sweeps put p under y and q under x.
    graph: Graph = [("x", []), ("y", []), ("p", ["y"]), ("q", ["x"])]
    layout = layout_dag(graph)
    assert (layout.nodes["p"].x < layout.nodes["q"].x) == (
        layout.nodes["y"].x < layout.nodes["x"].x
    )


def test_unknown_needs_self_loops_and_cycles_do_not_break_it() -> None:
    graph: Graph = [("a", ["ghost", "a"]), ("b", ["c"]), ("c", ["b"]), ("d", ["a"])]
    layout = layout_dag(graph)
    assert sorted(layout.nodes) == ["a", "b", "c", "d"]
    assert ("a", "a") not in layout.edges


def test_empty_graph() -> None:
    layout = layout_dag([])
    assert layout.nodes == {} and layout.width > 0 and layout.height > 0
    assert render_svg(layout, {}).startswith("<svg")


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 60), st.integers(0, 10_000), st.integers(1, 12))
def test_random_dags_are_sane(n: int, seed: int, window: int) -> None:
    graph = random_dag(n, seed, window)
    assert_sane(layout_dag(graph), graph)


def test_deterministic() -> None:
    graph = random_dag(120, 3)
    info = {n: {"status": "completed"} for n, _ in graph}
    first = render_svg(layout_dag(graph), info)
    assert first == render_svg(layout_dag(list(graph)), info)


def test_250_nodes_render_fast_without_overlaps() -> None:
    graph = random_dag(250, 7)
    info = {n: {"status": "running", "kind": "tool", "attempt": 2} for n, _ in graph}
    with counting_calls() as work:
        layout = layout_dag(graph)
        svg = render_svg(layout, info)
    assert work.total < 400_000, work.total  # about 125,000 calls today
    assert_sane(layout, graph)
    assert svg.count('class="node ') == 250
    # Readable: node boxes keep their size; wide layers wrap instead of stretching.
    per_row: dict[int, int] = {}
    for box in layout.nodes.values():
        per_row[box.y] = per_row.get(box.y, 0) + 1
    assert max(per_row.values()) <= MAX_PER_ROW


def test_wide_fan_out_wraps_into_staggered_rows() -> None:
    graph: Graph = [("start", [])]
    graph += [(f"item_{i:03d}", ["start"]) for i in range(200)]
    graph.append(("join", [f"item_{i:03d}" for i in range(200)]))
    with counting_calls() as work:
        layout = layout_dag(graph)
        render_svg(layout, {})
    assert work.total < 150_000, work.total  # about 37,500 calls today
    assert_sane(layout, graph)
    assert layout.width < 2000  # 200 siblings do not make a 40,000 px wide drawing
    rows = {box.row for n, box in layout.nodes.items() if n.startswith("item_")}
    assert len(rows) == 25


def test_svg_attributes_and_escaping() -> None:
    layout = layout_dag(
        [
            ("a_really_long_activity_name_that_goes_on", []),
            ("b", ["a_really_long_activity_name_that_goes_on"]),
        ]
    )
    svg = render_svg(
        layout,
        {
            "a_really_long_activity_name_that_goes_on": {
                "status": "failed",
                "kind": "http",
                "attempt": 3,
                "max_attempts": 5,
                "detail": '<boom> & "quotes"',
            },
            "b": {"status": "compensation_failed"},
        },
        link_prefix="#act-",
    )
    assert 'data-activity="b" data-status="compensation_failed"' in svg
    assert "status-compensation-failed" in svg
    assert "&lt;boom&gt; &amp; &quot;quotes&quot;" in svg
    assert "attempt 3/5" in svg
    assert "a_really_long_activit\u2026" in svg  # label cut, full name in the title
    assert "<title>a_really_long_activity_name_that_goes_on" in svg
    assert 'href="#act-b"' in svg
    assert re.search(r'<path class="edge from-failed" d="M\d+ \d+ C', svg)


def small_dag_svg() -> str:
    graph: Graph = [
        ("fetch", []),
        ("validate", ["fetch"]),
        ("enrich", ["fetch"]),
        ("approve", ["validate"]),
        ("charge", ["approve", "enrich"]),
        ("notify", ["charge"]),
        ("audit", ["fetch", "charge"]),
    ]
    info = {
        "fetch": {"status": "completed", "kind": "http", "attempt": 1, "max_attempts": 3},
        "validate": {"status": "completed", "kind": "tool", "attempt": 2, "max_attempts": 3},
        "enrich": {"status": "skipped", "kind": "tool", "detail": "skipped: when was false"},
        "approve": {"status": "waiting", "kind": "approval", "detail": "waits for approval"},
        "charge": {"status": "pending", "kind": "tool"},
        "notify": {"status": "pending", "kind": "shell"},
        "audit": {"status": "pending", "kind": "set"},
    }
    return render_svg(layout_dag(graph), info, link_prefix="#act-")


def test_small_dag_matches_snapshot() -> None:
    """Set WOVYR_UPDATE_SNAPSHOTS=1 to rewrite the snapshot after an intended change."""
    path = SNAPSHOTS / "dag-small.svg"
    svg = small_dag_svg()
    if os.environ.get("WOVYR_UPDATE_SNAPSHOTS") == "1":
        path.write_text(svg, encoding="utf-8")
    assert svg == path.read_text(encoding="utf-8")
