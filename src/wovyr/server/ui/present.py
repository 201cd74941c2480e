"""Turning engine records into what a person reads: times, "waiting on", timeline lines.

Everything returns escaped `Markup` or plain strings; templates add no logic of their own.
Times are rendered as `<time>` elements: relative text (computed against the engine's clock)
with the absolute UTC time in the `title`, which the page's script keeps fresh.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from markupsafe import Markup

from wovyr.activities.failures import tracebacks_in, without_tracebacks
from wovyr.definition.model import Workflow
from wovyr.events import EventType
from wovyr.server.ui.gantt import span_text
from wovyr.store.base import EventRecord

__all__ = [
    "WAIT_KINDS",
    "TimelineEntry",
    "as_datetime",
    "describe_waiting",
    "pretty_json",
    "relative",
    "time_tag",
    "timeline",
    "wait_kinds",
]

WAIT_KINDS = ("approval", "child", "retry", "signal", "timer")
_TIMER = re.compile(r"^timer (?P<aid>\S+) fires (?P<at>\S+)$")
_RETRY = re.compile(r"^retry (?P<aid>\S+) attempt (?P<n>\d+) at (?P<at>\S+)$")
JSON_LIMIT = 20_000
_KIND_OF = {"children": "child"}


def as_datetime(value: datetime | str | None) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        dt = value
    else:
        try:
            dt = datetime.fromisoformat(value)
        except ValueError:
            return None
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


def relative(at: datetime, now: datetime) -> str:
    """`in 3h`, `5m ago`, `just now`: compact, rounded to the unit that matters."""
    delta = (at - now).total_seconds()
    seconds = abs(delta)
    if seconds < 5:
        return "just now"
    for size, unit in ((86400 * 365, "y"), (86400, "d"), (3600, "h"), (60, "m"), (1, "s")):
        if seconds >= size * (1 if unit == "s" else 0.95):
            amount = max(1, round(seconds / size))
            return f"in {amount}{unit}" if delta > 0 else f"{amount}{unit} ago"
    return "just now"  # pragma: no cover - the loop always returns


def _absolute(at: datetime) -> str:
    return at.strftime("%Y-%m-%d %H:%M:%S UTC")


def time_tag(value: datetime | str | None, now: datetime, *, clock: bool = False) -> Markup:
    """`<time>` with relative text (or the wall-clock `HH:MM` when `clock`), the absolute
    time on hover; `data-rel` tells the script to keep relative text fresh."""
    at = as_datetime(value)
    if at is None:
        return Markup("<span class='muted'>\u2014</span>")
    iso = at.isoformat()
    if clock:
        same_day = at.date() == now.date()
        text = at.strftime("%H:%M" if same_day else "%b %d %H:%M")
        return Markup('<time datetime="{}" title="{}">{}</time>').format(iso, _absolute(at), text)
    return Markup('<time datetime="{}" title="{}" data-rel>{}</time>').format(
        iso, _absolute(at), relative(at, now)
    )


def _max_attempts(workflow: Workflow | None, activity_id: str) -> int | None:
    if workflow is None:
        return None
    try:
        return workflow.activity(activity_id).effective_retry.max_attempts
    except KeyError:
        return None


def describe_part(part: str, now: datetime, workflow: Workflow | None) -> Markup:
    """One clause of a stored `waiting_on` text, in words with live times."""
    part = part.strip()
    if m := _TIMER.match(part):
        at = as_datetime(m["at"])
        if at is not None:
            return Markup("timer fires {} ({})").format(
                time_tag(at, now, clock=True), time_tag(at, now)
            )
    if m := _RETRY.match(part):
        at = as_datetime(m["at"])
        limit = _max_attempts(workflow, m["aid"])
        count = f"{m['n']}/{limit}" if limit else m["n"]
        if at is not None:
            return Markup("retry {} {} at {}").format(
                m["aid"], count, time_tag(at, now, clock=True)
            )
    if part.startswith("approval "):
        return Markup("approval <span class='muted'>({})</span>").format(part[9:])
    return Markup("{}").format(part)


def describe_waiting(
    text: str | None, now: datetime, workflow: Workflow | None = None
) -> Markup | None:
    """`timer fires 14:00 (in 3h)`, `approval (approve)`, `signal go`, `retry charge 3/5
    at 12:04`; several waits are joined with `; `."""
    if not text:
        return None
    parts = [describe_part(p, now, workflow) for p in text.split(";") if p.strip()]
    return Markup("; ").join(parts)


def wait_kinds(text: str | None) -> set[str]:
    """The kinds (`approval`, `child`, `retry`, `signal`, `timer`) a `waiting_on` text
    mentions; `children 2/6 done` (a map over child workflows) is `child`."""
    if not text:
        return set()
    words = {p.strip().split(" ", 1)[0] for p in text.split(";") if p.strip()}
    return {_KIND_OF.get(w, w) for w in words} & set(WAIT_KINDS)


def pretty_json(value: Any, limit: int = JSON_LIMIT) -> str:
    """Indented JSON, cut at `limit` characters with the full size said."""
    try:
        text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    if len(text) > limit:
        return f"{text[:limit]}\n\u2026 (truncated: {len(text):,} characters in all)"
    return text


@dataclass(frozen=True)
class TimelineEntry:
    seq: int
    at: datetime
    type: str
    category: str  # lifecycle, attempt, retry, failure, timer, signal, approval, compensation
    text: Markup
    detail: str | None = None  # pretty JSON shown on demand
    traceback: str | None = None  # a failed handler's, as Python prints it
    name: str = ""  # the event type for people: `ActivityCompleted` -> `Activity completed`
    clock: str = ""  # the absolute time, UTC to the millisecond
    delta: str = ""  # the time since the previous event shown (`+1.25s`)


def _error_text(error: Any, depth: int = 0) -> str:
    """`ActivityFailed in ship: CarrierRefused: carrier refused the parcel`."""
    if not isinstance(error, dict):
        return str(error)
    text = str(error.get("type") or error.get("kind") or "error")
    if error.get("activity"):
        text += f" in {error['activity']}"
    message = error.get("message") or ""
    inner = error.get("error")
    if not message and isinstance(inner, dict) and depth < 3:
        message = _error_text(inner, depth + 1)
    return f"{text}: {message}" if message else text


def _failed(d: dict[str, Any]) -> tuple[str, str]:
    text = f"{d.get('activity')} attempt {d.get('attempt')} failed: {_error_text(d.get('error'))}"
    if d.get("will_retry"):
        return "retry", f"{text}; retry at {d.get('next_attempt_at')}"
    return "failure", text


def _scheduled(d: dict[str, Any]) -> tuple[str, str]:
    wait = d.get("wait") or {}
    kind = wait.get("kind")
    if kind == "signal":
        return "signal", f"{d.get('activity')} waits for signal {wait.get('name')}"
    if kind == "timer":
        return "timer", f"{d.get('activity')} waits until {wait.get('fire_at')}"
    if kind == "approval":
        return "approval", f"{d.get('activity')} waits for approval"
    return "attempt", f"{d.get('activity')} scheduled"


def _iteration(d: dict[str, Any]) -> tuple[str, str]:
    text = f"{d.get('activity')} iteration {d.get('iteration')} done"
    if d.get("follows"):
        at = d.get("next_at")
        return "timer", text + (f"; the next at {at}" if at else "; the next at once")
    if d.get("exhausted"):
        return "failure", text + ": max_iterations reached, `until` never held"
    return "completion", text + ": `until` holds"


def _item(d: dict[str, Any]) -> str:
    """`lines[2]` for an item of a `for_each` (its `index`), else the activity's id."""
    index = d.get("index")
    return f"{d.get('activity')}[{index}]" if index is not None else str(d.get("activity"))


def _started(d: dict[str, Any]) -> str:
    """`started`, or for a re-run after a lost worker (the same attempt, same key), which."""
    if not d.get("recovery"):
        return "started"
    return f"started again: its worker was lost (recovery {d['recovery']})"


def _model_call(d: dict[str, Any]) -> str:
    """`think turn 2: model m1 asked for 3 tool calls (120 in, 30 out tokens)`."""
    message = d.get("message") or {}
    calls = len(message.get("tool_calls") or ())
    usage = d.get("usage") or {}
    said = f"asked for {calls} tool call{'s' if calls != 1 else ''}" if calls else "answered"
    tokens = f"{usage.get('input_tokens', 0)} in, {usage.get('output_tokens', 0)} out tokens"
    cost = d.get("cost")
    if isinstance(cost, int | float):
        tokens += f", ${cost:.4f}"
    return f"{d.get('activity')} turn {d.get('turn')}: model {d.get('model')} {said} ({tokens})"


def _approval(d: dict[str, Any]) -> tuple[str, str]:
    verdict = "approved" if d.get("approved") else "rejected"
    text = f"{d.get('activity')} {verdict} by {d.get('by') or 'unknown'}"
    return "approval", f"{text}: \u201c{d['comment']}\u201d" if d.get("comment") else text


_LINES: dict[str, Callable[[dict[str, Any]], tuple[str, str]]] = {
    EventType.EXECUTION_STARTED: lambda d: (
        "lifecycle",
        f"started {d.get('workflow')} v{d.get('version')}"
        + (f", continuing {d['continued_from']}" if d.get("continued_from") else "")
        + (f", rerunning {d['rerun_of'].get('id')}" if d.get("rerun_of") else ""),
    ),
    EventType.EXECUTION_COMPLETED: lambda d: ("lifecycle", "execution completed"),
    EventType.EXECUTION_CONTINUED: lambda d: (
        "lifecycle",
        f"continued as new: run {d.get('run')} is {d.get('continued_as')}",
    ),
    EventType.EXECUTION_FAILED: lambda d: (
        "failure",
        f"execution failed: {_error_text(d.get('error'))}",
    ),
    EventType.EXECUTION_CANCELLED: lambda d: (
        "lifecycle",
        f"cancelled by {d.get('by') or 'unknown'}"
        + (f": {d['reason']}" if d.get("reason") else ""),
    ),
    EventType.ACTIVITY_SCHEDULED: _scheduled,
    EventType.ACTIVITY_STARTED: lambda d: (
        "attempt",
        f"{d.get('activity')} attempt {d.get('attempt')} {_started(d)}",
    ),
    EventType.ACTIVITY_COMPLETED: lambda d: (
        "attempt",
        f"{d.get('activity')} completed"
        + (f" (signal {d['signal']} consumed)" if d.get("signal") else ""),
    ),
    EventType.ACTIVITY_REUSED: lambda d: (
        "attempt",
        f"{d.get('activity')} reused the result of {d.get('execution')} (not run again)",
    ),
    EventType.ACTIVITY_FAILED: _failed,
    EventType.ACTIVITY_SKIPPED: lambda d: (
        "lifecycle",
        f"{d.get('activity')} skipped" + (f" ({d['reason']})" if d.get("reason") else ""),
    ),
    EventType.TIMER_ARMED: lambda d: (
        "timer",
        f"timer {d.get('timer')} set for {d.get('fire_at')}",
    ),
    EventType.TIMER_FIRED: lambda d: ("timer", f"timer {d.get('timer')} fired"),
    EventType.TIMER_CANCELLED: lambda d: ("timer", f"timer {d.get('timer')} cancelled"),
    EventType.SIGNAL_RECEIVED: lambda d: ("signal", f"signal {d.get('name')} received"),
    EventType.APPROVAL_DECIDED: _approval,
    EventType.COMPENSATION_STARTED: lambda d: (
        "compensation",
        "compensation started for " + ", ".join(map(str, d.get("activities") or [])),
    ),
    EventType.COMPENSATION_STEP_STARTED: lambda d: (
        "compensation",
        f"compensating {_item(d)} (attempt {d.get('attempt')})"
        + (f" {_started(d)}" if d.get("recovery") else ""),
    ),
    EventType.ACTIVITY_COMPENSATED: lambda d: ("compensation", f"{_item(d)} compensated"),
    EventType.COMPENSATION_ATTEMPT_FAILED: lambda d: (
        "compensation",
        f"compensating {d.get('activity')} failed, will retry: {_error_text(d.get('error'))}",
    ),
    EventType.COMPENSATION_FAILED: lambda d: (
        "failure",
        f"compensation of {d.get('activity')} failed: {_error_text(d.get('error'))}",
    ),
    EventType.ITEM_STARTED: lambda d: (
        "attempt",
        f"{_item(d)} attempt {d.get('attempt')} {_started(d)}",
    ),
    EventType.ITEM_COMPLETED: lambda d: ("attempt", f"{_item(d)} completed"),
    EventType.ITEM_FAILED: lambda d: (
        "retry" if d.get("will_retry") else "failure",
        f"{_item(d)} attempt {d.get('attempt')} failed: {_error_text(d.get('error'))}"
        + (f"; retry at {d.get('next_attempt_at')}" if d.get("will_retry") else ""),
    ),
    EventType.ITERATION_STARTED: lambda d: (
        "attempt",
        f"{d.get('activity')} iteration {d.get('iteration')} started",
    ),
    EventType.ITERATION_COMPLETED: _iteration,
    EventType.MODEL_CALL_COMPLETED: lambda d: ("attempt", _model_call(d)),
    EventType.ACTIVITY_SUSPENDED: lambda d: (
        "approval",
        f"{d.get('activity')} waits for an approval of "
        f"{(d.get('wait') or {}).get('tool') or 'a step'}",
    ),
    EventType.ACTIVITY_RESUMED: lambda d: (
        "approval",
        f"{d.get('activity')} resumed: {(d.get('decision') or {}).get('tool') or 'the step'} "
        + ("approved" if (d.get("decision") or {}).get("approved") else "denied"),
    ),
    EventType.TOOL_CALL_COMPLETED: lambda d: (
        "failure" if d.get("error") else "attempt",
        f"{d.get('activity')} turn {d.get('turn')}: tool {d.get('tool')} "
        + (f"failed: {_error_text(d['error'])}" if d.get("error") else "returned"),
    ),
}
_DETAIL_KEYS = ("input", "output", "error", "payload", "reason", "comment")


_ISO = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[+-]\d{2}:\d{2}|Z)?")


def with_times(text: str, now: datetime) -> Markup:
    """`text` escaped, each ISO timestamp in it shown as `14:00 (in 3h)` with hover."""
    out, last = Markup(""), 0
    for m in _ISO.finditer(text):
        out += Markup("{}{} ({})").format(
            text[last : m.start()], time_tag(m[0], now, clock=True), time_tag(m[0], now)
        )
        last = m.end()
    return out + Markup("{}").format(text[last:])


_WORD = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def event_name(event_type: str) -> str:
    """`ActivityCompleted` -> `Activity completed`, `WorkflowContinuedAsNew` -> `Workflow
    continued as new`: the type's words, the first capitalized."""
    words = _WORD.sub(" ", event_type).split(" ")
    return " ".join([words[0], *(w.lower() for w in words[1:])]) if words else event_type


def duration_text(seconds: float) -> str:
    """`+0.35s`, `+12s`, `+3m 05s`, `+2h 01m`, `+1d 04h`: the size that matters."""
    seconds = max(0.0, seconds)
    if seconds < 10:
        return f"+{seconds:.2f}s"
    whole = int(seconds)
    if whole < 60:
        return f"+{whole}s"
    if whole < 3600:
        return f"+{whole // 60}m {whole % 60:02d}s"
    if whole < 86400:
        return f"+{whole // 3600}h {whole % 3600 // 60:02d}m"
    return f"+{whole // 86400}d {whole % 86400 // 3600:02d}h"


def timeline(
    events: Iterable[EventRecord],
    now: datetime,
    latencies: Mapping[int, float] | None = None,
) -> list[TimelineEntry]:
    """The events as lines for people; `latencies` (by seq: an agent's model and tool calls,
    `agent_steps`) adds how long each call took."""
    entries: list[TimelineEntry] = []
    for ev in events:
        data = ev.data if isinstance(ev.data, dict) else {}
        line = _LINES.get(ev.type)
        category, text = line(data) if line else ("lifecycle", ev.type)
        took = (latencies or {}).get(ev.seq)
        if took is not None:
            text += f" in {span_text(took)}"
        detail = {k: data[k] for k in _DETAIL_KEYS if data.get(k) is not None}
        traces = tracebacks_in(detail)
        detail = without_tracebacks(detail)
        at = as_datetime(ev.at) or ev.at
        previous = entries[-1].at if entries else None
        entries.append(
            TimelineEntry(
                seq=ev.seq,
                at=at,
                type=ev.type,
                category=category,
                text=with_times(text, now),
                detail=pretty_json(detail, 4000) if detail else None,
                traceback=traces[0][1] if traces else None,
                name=event_name(ev.type),
                clock=at.strftime("%H:%M:%S.") + f"{at.microsecond // 1000:03d}",
                delta=duration_text((at - previous).total_seconds()) if previous else "",
            )
        )
    return entries
