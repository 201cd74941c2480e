"""The Gantt chart of an execution's activities, and the DAG's item and saga drawing."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from wovyr.server.ui.dag import item_counts, layout_dag, render_svg
from wovyr.server.ui.gantt import gantt_bars, render_gantt, span_text

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


ROWS = [
    {"id": "b", "status": "completed", "started": _at(2), "finished": _at(5)},
    {"id": "a", "status": "completed", "started": _at(0.5), "finished": _at(2)},
    {"id": "c", "status": "running", "started": _at(5), "finished": None},
    {"id": "d", "status": "pending", "started": None, "finished": None},
    {"id": "e", "status": "failed", "started": _at(6), "finished": None},
]


def test_bars_start_at_the_execution_and_run_to_now_while_active() -> None:
    bars = gantt_bars(ROWS, T0, now=_at(9))
    assert [b.id for b in bars] == ["a", "b", "c", "e"]  # by start; d never started
    a, b, c, e = bars
    assert (a.start, a.end, a.running) == (0.5, 2.0, False)
    assert (b.start, b.end) == (2.0, 5.0)
    assert (c.start, c.end, c.running) == (5.0, 9.0, True)  # running: to now
    assert (e.start, e.end, e.running) == (6.0, 6.0, False)  # no end and not active: a point


def test_svg_places_bars_proportionally_with_round_ticks() -> None:
    svg = render_gantt(ROWS, T0, now=_at(9))
    starts = {
        m[0]: float(m[1]) for m in re.findall(r'data-activity="(\w)" data-start="([\d.]+)"', svg)
    }
    assert starts == {"a": 0.5, "b": 2.0, "c": 5.0, "e": 6.0}
    xs = {
        m[0]: (float(m[1]), float(m[2]))
        for m in re.findall(
            r'data-activity="(\w)".*?<rect x="([\d.]+)" y="\d+" width="([\d.]+)"', svg, re.S
        )
    }
    # b lasts twice as long as a, c (running, 4 s so far) 8/3 times a's 1.5 s
    assert abs(xs["b"][1] / xs["a"][1] - 2.0) < 0.01
    assert abs(xs["c"][1] / xs["a"][1] - 4 / 1.5) < 0.01
    assert xs["a"][0] < xs["b"][0] < xs["c"][0] < xs["e"][0]
    ticks = re.findall(r'<text x="[\d.]+" y="\d+">([^<]+)</text>', svg)
    assert ticks[0] == "0" and len(ticks) <= 7  # 9 s in steps of 2 s: 0, +2, +4, +6, +8
    assert ticks[1] == "+2.0\u2009s"
    assert 'class="running"' in svg and "4.0 s so far" in svg
    assert render_gantt(ROWS, T0, now=_at(9)) == svg  # deterministic


def test_nothing_started_draws_nothing() -> None:
    assert render_gantt([{"id": "x", "status": "pending"}], T0, T0) == ""


def test_span_text_picks_the_unit_that_matters() -> None:
    assert [span_text(s) for s in (0.25, 4.25, 42, 185, 7260, 90000)] == [
        "250 ms",
        "4.2 s",
        "42 s",
        "3 min 05 s",
        "2 h 01 min",
        "1 d 01 h",
    ]


def test_dag_draws_for_each_progress_and_the_saga_order() -> None:
    graph = [("a", []), ("m", ["a"]), ("z", ["m"])]
    items = [{"status": s} for s in ("completed", "completed", "failed", "running", "pending")]
    assert item_counts(items) == {"done": 2, "failed": 1, "active": 1, "pending": 1}
    info = {
        "a": {"status": "compensated", "compensable": True, "compensation_step": 1},
        "m": {"status": "compensated", "compensable": True, "compensation_step": 0,
              "items": items},
        "z": {"status": "failed"},
    }  # fmt: skip
    svg = render_svg(layout_dag(graph), info)
    assert 'data-total="5" data-done="2" data-failed="1" data-active="1"' in svg
    assert "items 2/5 \u00b7 1 failed" in svg
    assert svg.count('class="undo"') == 2 and "\u21ba1" in svg and "\u21ba2" in svg
    # one dashed arrow: m is undone first, then a
    assert re.findall(r'class="edge undo"[^>]*data-from="(\w)" data-to="(\w)"', svg) == [("m", "a")]
    # before the saga runs, a compensable node shows the bare mark and no arrows
    quiet = render_svg(layout_dag(graph), {"a": {"status": "completed", "compensable": True}})
    assert "\u21ba<" in quiet.replace("</title>", "") and 'class="edge undo"' not in quiet
