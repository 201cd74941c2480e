"""What `query` returns: a read-only picture of one execution, and events as they are shown.

An activity's rendered input is shown through its kind's `redact` (credentials in known
fields masked: `Authorization` headers, shell `env` entries marked secret), in the view and
in the history alike. The store keeps what was recorded; secret *values* are never in it
(only `${{ secrets.NAME }}` references). A value nested deeper than stored values may be
(written before that cap) is shown cut at that depth (`wovyr.store.codec.shallow`): the
rest of the execution stays readable.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from wovyr.engine.core.shown import shown_status, waiting_on
from wovyr.engine.core.state import ActivityStatus, ExecutionState, ExecutionStatus
from wovyr.engine.outline import ActivityOutline, Outline
from wovyr.events import EventType
from wovyr.statuses import ShownStatus
from wovyr.store.base import EventRecord, ExecutionRecord
from wovyr.store.codec import MAX_DEPTH, shallow

__all__ = ["ExecutionView", "build_view", "shown_events", "status_filter"]

_INPUT_EVENTS = frozenset(
    {EventType.ACTIVITY_SCHEDULED, EventType.ITERATION_STARTED, EventType.ITEM_STARTED}
)


@dataclass(frozen=True)
class ExecutionView:
    """A read-only picture of one execution, as `query` returns it."""

    id: str
    workflow: str
    version: str
    status: str
    input: dict[str, Any]
    output: Any
    error: Any
    created_at: str
    updated_at: str
    definition_hash: str
    parent_id: str | None
    event_count: int
    waiting_on: str | None
    activities: dict[str, dict[str, Any]] = field(default_factory=dict)
    pending_waits: list[dict[str, Any]] = field(default_factory=list)
    buffered_signals: dict[str, int] = field(default_factory=dict)
    # continue-as-new: the run this one continues, the run that continues it, and the
    # chain ({root: its logical id, run: this run's number}); None outside a chain
    continued_from: str | None = None
    continued_as: str | None = None
    chain: dict[str, Any] | None = None
    # reruns: the execution this one reruns ({id, from}) and the executions that rerun it
    rerun_of: dict[str, Any] | None = None
    reruns: list[str] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)  # set at start, for search
    priority: int = 0  # 0-9, fixed at the start
    # the workflow's concurrency slot {key, limit, on_limit}, and who holds or waits for it
    concurrency: dict[str, Any] | None = None

    @property
    def finished(self) -> bool:
        return self.status in ExecutionStatus.TERMINAL

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def build_view(outline: Outline, record: ExecutionRecord, state: ExecutionState) -> ExecutionView:
    """The read-only picture of one execution that `query` returns (`outline`: its
    definition's, `wovyr.engine.outline`)."""
    activities: dict[str, dict[str, Any]] = {}
    pending: list[dict[str, Any]] = []
    # the saga's order once compensation started (reverse completion order)
    undo = list((state.compensation or {}).get("order") or ())
    for act in (*outline.activities, *revealed(outline, state)):
        a = state.activity(act.id)
        activities[act.id] = {
            "status": a.status,
            "kind": act.kind,
            "attempt": a.attempt,
            "max_attempts": act.max_attempts,
            "recoveries": a.recoveries,  # re-runs after a lost worker (not attempts)
            "needs": act.needs,
            "input": shallow(act.shown_input(a.input)),
            "output": shallow(a.output),
            "error": shallow(a.error),
            "started_at": a.started_at,
            "finished_at": a.finished_at,
            "next_attempt_at": a.next_attempt_at,
            "wait": shallow(a.wait),
            "iterations": a.iterations,  # of a `repeat`: completed so far
            "max_iterations": act.max_iterations,
            "exhausted": a.exhausted,
            "skip_reason": a.skip_reason,
            "child": a.child,
            "reused_from": a.reused_from,  # a rerun's activity: the run whose result it took
            "source": a.source,  # a code workflow's step: the `file:line` that asked for it
            "after": a.after,  # ... and the steps whose results its function took before
            "compensable": act.compensable,
            "compensation_step": undo.index(act.id) if act.id in undo else None,
            "items": [
                {k: shallow(item.get(k)) for k in ("status", "attempt", "output", "error", "child")}
                for item in a.items
            ]
            if a.items is not None
            else None,
        }
        if a.status == ActivityStatus.WAITING and a.wait:
            pending.append({"activity": act.id, **shallow(a.wait)})
    # waiting for a slot of its concurrency key: the store knows (the log does not)
    held = record.waiting_on or ""
    queued = record.status == ExecutionStatus.RUNNING and held.startswith("concurrency ")
    return ExecutionView(
        id=record.id,
        workflow=state.workflow,
        version=state.version,
        status="waiting" if queued else shown_status(state),
        input=shallow(state.input),
        output=shallow(state.output),
        error=shallow(state.error),
        created_at=state.created_at,
        updated_at=state.updated_at,
        definition_hash=state.definition_hash,
        parent_id=state.parent_id,
        event_count=state.seq,
        waiting_on=record.waiting_on if queued else waiting_on(state),
        activities=activities,
        pending_waits=pending,
        buffered_signals={k: len(v) for k, v in state.signals.items()},
        continued_from=state.continued_from,
        continued_as=state.continued_as,
        chain={"root": state.chain_root, "run": state.chain_run} if state.chain else None,
        rerun_of=state.rerun_of,
        labels=dict(state.labels or {}),
        priority=state.priority or 0,
        concurrency=dict(state.concurrency) if state.concurrency else None,
    )


def revealed(outline: Outline, state: ExecutionState) -> list[ActivityOutline]:
    """The steps the history holds that the definition does not list, in the order they
    were scheduled: a code workflow's (`wovyr.code`), whose function reveals its steps as
    it runs. Their kind is what the history recorded of them."""
    known = {act.id for act in outline.activities}
    return [
        ActivityOutline(
            id=aid,
            kind=a.kind or "tool",
            needs=[],
            max_attempts=max(a.attempt, 1),
            max_iterations=None,
            compensable=a.status in _UNDONE or aid in (state.compensation or {}).get("order", ()),
            redact=None,
        )
        for aid, a in state.activities.items()
        if aid not in known
    ]


_UNDONE = frozenset(
    {ActivityStatus.COMPENSATING, ActivityStatus.COMPENSATED, ActivityStatus.COMPENSATION_FAILED}
)


def status_filter(status: str | None) -> tuple[str | None, bool | None]:
    """The stored status and `waiting` filter (`ExecutionFilter`) of the executions shown as
    `status`: `waiting` ones are stored `running` with a `waiting_on` text, `running` ones
    without; the others are stored as they are shown."""
    if status == ShownStatus.WAITING:
        return ExecutionStatus.RUNNING, True
    if status == ShownStatus.RUNNING:
        return ExecutionStatus.RUNNING, False
    return status, None


def shown_events(outline: Outline, events: Sequence[EventRecord]) -> list[EventRecord]:
    """`events` with the rendered inputs they carry as they may be shown (and values nested
    too deeply cut, as in the view)."""
    out = []
    for stored in events:
        data = shallow(stored.data, MAX_DEPTH + 1)  # (the data holds the values)
        event = stored if data is stored.data else replace(stored, data=data)
        if event.type in _INPUT_EVENTS and "input" in data and "items" not in data:
            try:
                act = outline.activity(str(data.get("activity")))
            except KeyError:  # an activity the definition lacks: shown as recorded
                out.append(event)
                continue
            if act.redact is not None:
                shown = {**data, "input": act.shown_input(data["input"])}
                out.append(replace(event, data=shown))
                continue
        out.append(event)
    return out
