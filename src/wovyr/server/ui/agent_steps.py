"""An `agent` activity's sub-steps: each model call and each tool call of its loop, as the
execution page shows them (a graph of their own, rows under the activity's Gantt bar, a
table, and a latency on their timeline lines); and an `llm` activity's model calls (each
item's, each iteration's, each answer that did not match its schema), in the same table.

They are read from the execution's events (`ModelCallCompleted`, `ToolCallCompleted`, and
`ChildFinished` of a workflow tool; an `llm` step's result events with their `model_calls`),
which record tokens, cost and a model call's latency. Where no latency is recorded (a tool
call, a model call recorded before it was kept), a step's latency is the time from what let
it start to its own event: a model call starts when its attempt started (or resumed) or
when the previous step of the activity was recorded; a tool call starts when the model call
that asked for it was. Only the first `EVENTS_READ` events are read (a longer run shows the
steps among them). No HTTP here (see `pages.py`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from wovyr.engine.engine import Engine
from wovyr.events import EventType, model_calls
from wovyr.server.ui.dag import layout_dag, render_svg
from wovyr.server.ui.gantt import span_text
from wovyr.server.ui.present import as_datetime
from wovyr.store.base import EventRecord

__all__ = ["EVENTS_READ", "SubStep", "agent_steps", "render_steps", "steps_summary"]

EVENTS_READ = 2000
_PAGE = 500
_STARTS = frozenset({EventType.ACTIVITY_STARTED, EventType.ACTIVITY_RESUMED})


@dataclass(frozen=True)
class SubStep:
    """One model call or tool call of an agent activity."""

    activity: str
    seq: int  # its event's
    kind: str  # model, tool
    turn: int
    name: str  # the model, or the tool
    status: str  # completed, failed
    finished: datetime
    started: datetime | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost: float | None = None
    error: str | None = None
    label: str = ""  # unique within the activity: `turn 2 · model`, `turn 2 · search`
    recorded: float | None = None  # the latency its event recorded (a model call's)
    where: str = ""  # `turn 2`, `item 0`, `iteration 3`

    @property
    def latency(self) -> float | None:
        if self.recorded is not None:
            return self.recorded
        if self.started is None:
            return None
        return max(0.0, (self.finished - self.started).total_seconds())

    @property
    def tokens(self) -> int | None:
        if self.input_tokens is None and self.output_tokens is None:
            return None
        return (self.input_tokens or 0) + (self.output_tokens or 0)

    def measures(self) -> str:
        """`150 tok · $0.0004 · 850 ms`: what was recorded of it."""
        parts = []
        if self.tokens is not None:
            parts.append(f"{self.tokens} tok")
        if self.cost is not None:
            parts.append(f"${self.cost:.4f}")
        if self.latency is not None:
            parts.append(span_text(self.latency))
        return " · ".join(parts)


def agent_steps(
    engine: Engine, execution_id: str, activities: Iterable[str]
) -> dict[str, list[SubStep]]:
    """The sub-steps of each of `activities` (the execution's agent and llm activities), in
    the order they were recorded."""
    wanted = set(activities)
    if not wanted:
        return {}
    events: list[EventRecord] = []
    while len(events) < EVENTS_READ:
        after = events[-1].seq if events else 0
        page = engine.history(execution_id, after_seq=after, limit=_PAGE, follow=False)
        events.extend(page)
        if len(page) < _PAGE:
            break
    return steps_of(events[:EVENTS_READ], wanted)


def steps_of(events: Iterable[EventRecord], wanted: set[str]) -> dict[str, list[SubStep]]:
    """The sub-steps `events` record for the activities in `wanted`."""
    found: dict[str, list[SubStep]] = {a: [] for a in wanted}
    last: dict[str, datetime] = {}  # the activity's last start or step
    asked: dict[tuple[str, int], datetime] = {}  # when each turn's model call answered
    for ev in events:
        data = ev.data if isinstance(ev.data, dict) else {}
        aid = str(data.get("activity"))
        if aid not in wanted:
            continue
        at = as_datetime(ev.at) or ev.at
        step = None
        if ev.type in _STARTS:
            last[aid] = at
        elif ev.type == EventType.MODEL_CALL_COMPLETED:
            step = _model_step(ev.seq, aid, data, at, last.get(aid))
            asked[(aid, step.turn)] = at
        elif ev.type == EventType.TOOL_CALL_COMPLETED:
            step = _tool_step(ev.seq, aid, data, at, asked)
        elif data.get("model_calls"):  # an llm step's result: its calls, then nothing
            found[aid].extend(_llm_steps(ev.seq, aid, data, at))
        elif ev.type == EventType.CHILD_FINISHED and isinstance(data.get("call"), dict):
            call = data["call"]
            error = (
                None if data.get("status") == "completed" else f"the workflow {data.get('status')}"
            )
            step = _tool_step(ev.seq, aid, {**call, "error": error}, at, asked)
        if step is not None:
            found[aid].append(step)
            last[aid] = at
    return {aid: _labelled(steps) for aid, steps in found.items()}


def _model_step(
    seq: int, aid: str, data: Mapping[str, Any], at: datetime, started: datetime | None
) -> SubStep:
    (call,) = model_calls([(EventType.MODEL_CALL_COMPLETED, data)])
    turn = int(data.get("turn") or 0)
    return replace(_call_step(seq, aid, call, at), turn=turn, started=started, where=f"turn {turn}")


def _llm_steps(seq: int, aid: str, data: Mapping[str, Any], at: datetime) -> list[SubStep]:
    """The model calls an llm step's result event records (`model_calls`)."""
    out = []
    for call in model_calls([("", data)]):
        where = " ".join(f"{k} {call[k]}" for k in ("index", "iteration") if k in call)
        out.append(replace(_call_step(seq, aid, call, at), where=where))
    return out


def _call_step(seq: int, aid: str, call: Mapping[str, Any], at: datetime) -> SubStep:
    cost, latency, error = call.get("cost"), call.get("latency"), call.get("error")
    return SubStep(
        activity=aid,
        seq=seq,
        kind="model",
        turn=0,
        name=str(call.get("model") or "model"),
        status="failed" if error else "completed",
        finished=at,
        input_tokens=call.get("input_tokens"),
        output_tokens=call.get("output_tokens"),
        cost=float(cost) if isinstance(cost, int | float) else None,
        error=str(error) if error else None,
        recorded=float(latency) if isinstance(latency, int | float) else None,
    )


def _tool_step(
    seq: int,
    aid: str,
    data: Mapping[str, Any],
    at: datetime,
    asked: Mapping[tuple[str, int], datetime],
) -> SubStep:
    turn = int(data.get("turn") or 0)
    error = data.get("error")
    if isinstance(error, dict):
        error = f"{error.get('type') or 'error'}: {error.get('message') or ''}".rstrip(": ")
    return SubStep(
        activity=aid,
        seq=seq,
        kind="tool",
        turn=turn,
        name=str(data.get("tool") or "tool"),
        status="failed" if error else "completed",
        finished=at,
        started=asked.get((aid, turn)),
        error=str(error) if error else None,
        where=f"turn {turn}",
    )


def _labelled(steps: list[SubStep]) -> list[SubStep]:
    """Each step named for people, uniquely: a tool called twice in a turn gets `#2`."""
    seen: dict[str, int] = {}
    out = []
    for step in steps:
        base = f"{step.where or 'call'} · {'model' if step.kind == 'model' else step.name}"
        seen[base] = seen.get(base, 0) + 1
        label = base if seen[base] == 1 else f"{base} #{seen[base]}"
        out.append(replace(step, label=label))
    return out


def steps_summary(steps: Sequence[SubStep]) -> str:
    """`3 model calls, 4 tool calls · 1,250 tokens · $0.0030` (no tool calls: not said)."""
    models = sum(1 for s in steps if s.kind == "model")
    tools = len(steps) - models
    said = f"{models} model call{'s' if models != 1 else ''}"
    parts = [f"{said}, {tools} tool call" + "s" * (tools != 1) if tools else said]
    tokens = sum(s.tokens or 0 for s in steps)
    if tokens:
        parts.append(f"{tokens:,} tokens")
    costs = [s.cost for s in steps if s.cost is not None]
    if costs:
        parts.append(f"${sum(costs):.4f}")
    return " · ".join(parts)


def render_steps(steps: Sequence[SubStep]) -> str:
    """The steps as a graph of their own (the DAG's layout and drawing): each turn's model
    call, then the tool calls it asked for side by side, then the next turn's model call."""
    needs: list[tuple[str, list[str]]] = []
    before: list[str] = []  # what the next model call follows: the last turn's tools
    model_of: dict[int, str] = {}  # each turn's model call
    for step in steps:
        if step.kind == "model":
            needs.append((step.label, list(before)))
            model_of[step.turn] = step.label
            before = [step.label]
        else:
            asked = model_of.get(step.turn)
            needs.append((step.label, [asked] if asked else []))
            before = [b for b in before if b != asked] + [step.label]
    layout = layout_dag(needs)
    info = {
        s.label: {
            "status": s.status,
            "kind": s.measures() or s.kind,
            "detail": (f"{s.name}: {s.error}" if s.error else s.name),
        }
        for s in steps
    }
    return render_svg(layout, info)
