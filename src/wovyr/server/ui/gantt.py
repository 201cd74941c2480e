"""The execution's activities on one time axis (a Gantt chart), drawn as SVG on the server.

Each activity that started is one bar from its (latest) start to its end, or to `now` while
it runs, coloured by status; a `for_each` bar spans its items. A row with a `parent` (an
agent's model call or tool call) is drawn under its parent's bar, indented. The axis starts at the
execution's creation, so the gap before a bar is the time it waited for its dependencies
(or a timer, an approval, a slot). Ticks fall on round durations. Like the DAG, the output
is deterministic for the same rows and `now`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from html import escape
from typing import Any

__all__ = ["GanttBar", "gantt_bars", "render_gantt", "span_text"]

LABEL_W = 170
TRACK_W = 600
ROW_H = 22
BAR_H = 12
TOP = 22  # the axis labels
RIGHT = 86  # the duration text after the longest bar
TICKS = 6  # at most this many ticks (plus zero)
_STEPS = (
    0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5,
    1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800,
    3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800,
)  # fmt: skip
_ACTIVE = frozenset({"running", "waiting", "retrying"})


@dataclass(frozen=True)
class GanttBar:
    id: str
    status: str
    start: float  # seconds after the execution was created
    end: float
    running: bool  # no end yet: the bar reaches `now`
    parent: str | None = None  # the activity a sub-step's bar belongs to
    label: str = ""  # shown instead of the id (a sub-step's)
    note: str = ""  # more for its title (a sub-step's tokens and cost)


def span_text(seconds: float) -> str:
    """`850 ms`, `4.2 s`, `3 min 05 s`, `2 h 01 min`, `1 d 04 h`."""
    seconds = max(0.0, seconds)
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"
    whole = int(seconds)
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    if whole < 86400:
        return f"{whole // 3600} h {whole % 3600 // 60:02d} min"
    return f"{whole // 86400} d {whole % 86400 // 3600:02d} h"


def gantt_bars(
    rows: Sequence[Mapping[str, Any]], origin: datetime, now: datetime
) -> list[GanttBar]:
    """The bars of the activities that started, in start order (ties in `rows` order), each
    followed by its sub-steps' bars. `rows` carry `id`, `status` and the datetimes `started`
    / `finished` (either may be None); a sub-step's also `parent`, `label` and `note`."""
    bars = []
    for row in rows:
        started = row.get("started")
        if not isinstance(started, datetime):
            continue
        finished = row.get("finished")
        status = str(row.get("status") or "pending")
        running = not isinstance(finished, datetime) and status in _ACTIVE
        if isinstance(finished, datetime):
            end_at = finished
        elif running:
            end_at = max(now, started)
        else:
            end_at = started
        start = max(0.0, (started - origin).total_seconds())
        end = max(start, (end_at - origin).total_seconds())
        parent = row.get("parent")
        bars.append(
            GanttBar(
                str(row["id"]),
                status,
                start,
                end,
                running,
                parent=str(parent) if parent else None,
                label=str(row.get("label") or ""),
                note=str(row.get("note") or ""),
            )
        )
    bars.sort(key=lambda b: b.start)  # stable: ties keep the definition's order
    under: dict[str, list[GanttBar]] = {}
    for bar in bars:
        if bar.parent is not None:
            under.setdefault(bar.parent, []).append(bar)
    ordered = []
    for bar in bars:
        if bar.parent is None:
            ordered.append(bar)
            ordered.extend(under.pop(bar.id, []))
    return ordered + [b for rest in under.values() for b in rest]  # a parent not drawn


def _step(span: float) -> float:
    for step in _STEPS:
        if span / step <= TICKS:
            return step
    return _STEPS[-1] * max(1, int(span / (_STEPS[-1] * TICKS)) + 1)


def _tick_label(seconds: float) -> str:
    if seconds == 0:
        return "0"
    return "+" + span_text(seconds).replace(" ", "\u2009")


def render_gantt(
    rows: Sequence[Mapping[str, Any]],
    origin: datetime,
    now: datetime,
    *,
    link_prefix: str | None = "#act-",
) -> str:
    """One `<svg>` with a bar per started activity; empty text when none started."""
    bars = gantt_bars(rows, origin, now)
    if not bars:
        return ""
    span = max(0.001, *(b.end for b in bars))
    step = _step(span)
    span = max(span, step)  # the last tick fits
    scale = TRACK_W / span
    width = LABEL_W + TRACK_W + RIGHT
    height = TOP + ROW_H * len(bars) + 6
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="gantt" viewBox="0 0 {width} {height}"'
        f' width="{width}" height="{height}" role="img"'
        f' aria-label="Activities on a time axis: {len(bars)} started">',
        '<g class="axis">',
    ]
    tick = 0.0
    while tick <= span + 1e-9:
        x = LABEL_W + tick * scale
        out.append(
            f'<line x1="{x:.1f}" y1="{TOP - 4}" x2="{x:.1f}" y2="{height - 4}"/>'
            f'<text x="{x:.1f}" y="{TOP - 8}">{escape(_tick_label(tick))}</text>'
        )
        tick = round(tick + step, 6)
    out.append("</g>")
    for i, bar in enumerate(bars):
        y = TOP + i * ROW_H
        x = LABEL_W + bar.start * scale
        w = max(2.0, (bar.end - bar.start) * scale)
        status = bar.status.replace("_", "-")
        took = span_text(bar.end - bar.start) + (" so far" if bar.running else "")
        shown = bar.status.replace("_", " ")
        name = bar.label or bar.id
        title = f"{name}: {shown}, started +{span_text(bar.start)}, {took}"
        title += f" ({bar.note})" if bar.note else ""
        bid = escape(bar.parent or bar.id, quote=True)
        live = ' class="running"' if bar.running else ""
        sub = f' data-step="{escape(bar.label, quote=True)}"' if bar.parent is not None else ""
        out.append(
            f'<g class="bar{" sub" if sub else ""} status-{escape(status, quote=True)}"'
            f' data-activity="{bid}"{sub}'
            f' data-start="{bar.start:.3f}" data-end="{bar.end:.3f}">'
            f"<title>{escape(title)}</title>"
        )
        if link_prefix is not None:
            out.append(f'<a href="{escape(link_prefix + (bar.parent or bar.id), quote=True)}">')
        label = name if len(name) <= 22 else name[:21] + "\u2026"
        label = f"\u203a {label}" if bar.parent is not None else label
        out.append(
            f'<text class="name" x="{LABEL_W - 8}" y="{y + BAR_H + 1}">{escape(label)}</text>'
            f'<rect x="{x:.1f}" y="{y + 4}" width="{w:.1f}" height="{BAR_H}" rx="3"{live}/>'
            f'<text class="took" x="{x + w + 5:.1f}" y="{y + BAR_H + 1}">{escape(took)}</text>'
        )
        if link_prefix is not None:
            out.append("</a>")
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"
