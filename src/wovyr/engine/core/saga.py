"""The pure decider's failure path: workflow timeout, draining, and saga compensation.

When an activity fails for good nothing new starts; in-flight attempts finish; then the
compensations of completed activities run one at a time in reverse completion order (a
`for_each` activity's completed items are undone in reverse index order), each recorded, and
the execution ends `failed` with the first failure and every compensation's outcome.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from wovyr.definition.expr import render
from wovyr.definition.model import CompensateSpec, Workflow
from wovyr.engine.core.context import expression_context
from wovyr.engine.core.policy import RunActivity, error, ev, retry_policy, spec_of
from wovyr.engine.core.state import ActivityStatus, ExecutionState
from wovyr.events import Event, EventType

__all__ = ["compensate", "failing", "timeout"]

Step = tuple[list[Event], list[RunActivity]]


def timeout(definition: Workflow, state: ExecutionState, now: datetime) -> Step:
    """Fail what is active (or, if nothing is, a pending activity) to start the saga."""
    err = error("WorkflowTimeout", f"the workflow did not finish within {definition.timeout}s")
    fail = {"error": err, "will_retry": False, "next_attempt_at": None}
    events = [
        ev(EventType.ACTIVITY_FAILED, now, activity=aid, attempt=a.attempt, **fail)
        for aid, a in state.activities.items()
        if a.status in ActivityStatus.ACTIVE
    ]
    failed = any(a.status == ActivityStatus.FAILED for a in state.activities.values())
    if not events and not failed:
        pending = [
            a.id
            for a in definition.activities
            if state.activity(a.id).status == ActivityStatus.PENDING
        ]
        if pending:
            events = [ev(EventType.ACTIVITY_FAILED, now, activity=pending[0], attempt=0, **fail)]
    return events, []


def failing(
    definition: Workflow, state: ExecutionState, now: datetime, in_flight: frozenset[str]
) -> Step:
    """An activity failed: start nothing new, let in-flight attempts finish, then compensate."""
    events: list[Event] = []
    still_running = False
    for act in definition.activities:
        a = state.activity(act.id)
        if a.status == ActivityStatus.RUNNING:
            if act.id in in_flight or any(k.startswith(f"{act.id}[") for k in in_flight):
                still_running = True
            else:
                lost = error("WorkerLost", "lost while the workflow failed")
                events.append(
                    ev(
                        EventType.ACTIVITY_FAILED,
                        now,
                        activity=act.id,
                        attempt=a.attempt,
                        will_retry=False,
                        next_attempt_at=None,
                        error=lost,
                        output=_item_outputs(a.items),
                    )
                )
        elif a.status in (ActivityStatus.PENDING, ActivityStatus.WAITING, ActivityStatus.RETRYING):
            events.append(
                ev(EventType.ACTIVITY_SKIPPED, now, activity=act.id, reason="workflow failed")
            )
    events.extend(ev(EventType.TIMER_CANCELLED, now, timer=t) for t in state.timers)
    if events or still_running:
        return events, []
    first = min(
        (a for a in definition.activities if state.activity(a.id).status == ActivityStatus.FAILED),
        key=lambda a: state.activity(a.id).finished_at or "",
    )
    reason = {
        "type": "ActivityFailed",
        "activity": first.id,
        "error": state.activity(first.id).error,
    }
    undo = [
        a.id for a in definition.activities if a.compensate is not None and _undoable(state, a.id)
    ]
    order = sorted(undo, key=lambda aid: -(state.activity(aid).completion_order or -1))
    return [ev(EventType.COMPENSATION_STARTED, now, activities=order, reason=reason)], []


def _item_outputs(items: Any) -> Any:
    return None if items is None else [i.get("output") for i in items]


def _undoable(state: ExecutionState, activity_id: str) -> bool:
    a = state.activity(activity_id)
    if a.items is not None:  # a for_each: whatever items completed
        return any(i["status"] == ActivityStatus.COMPLETED for i in a.items)
    return a.status == ActivityStatus.COMPLETED


def compensate(
    definition: Workflow, state: ExecutionState, now: datetime, in_flight: frozenset[str]
) -> Step:
    """Undo completed activities one at a time, in the recorded order."""
    comp = state.compensation or {}
    for aid in comp.get("order", []):
        spec = definition.activity(aid).compensate
        assert spec is not None
        a = state.activity(aid)
        if a.items is not None:
            step = _compensate_items(aid, spec, state, now, in_flight)
        else:
            step = _compensate_one(aid, spec, state, now, in_flight)
        if step is not None:
            return step
    steps = []
    for aid in comp.get("order", []):
        a = state.activity(aid)
        failed = a.status == ActivityStatus.COMPENSATION_FAILED
        steps.append(
            {"activity": aid, "status": a.status, "error": a.compensation_error if failed else None}
        )
    err = dict(comp.get("reason") or {})
    err["compensation"] = steps
    return [ev(EventType.EXECUTION_FAILED, now, error=err)], []


def _compensate_one(
    aid: str, spec: CompensateSpec, state: ExecutionState, now: datetime, in_flight: frozenset[str]
) -> Step | None:
    a = state.activity(aid)
    if a.status == ActivityStatus.COMPLETED:
        return _attempt(aid, spec, 1, state, now, None)
    if a.status == ActivityStatus.COMPENSATING:
        if f"{aid}/compensate" in in_flight:
            return [], []
        if a.compensation_attempt >= retry_policy(spec).max_attempts:
            err = a.compensation_error or error("WorkerLost", "compensation attempt lost")
            return [ev(EventType.COMPENSATION_FAILED, now, activity=aid, error=err)], []
        return _attempt(aid, spec, a.compensation_attempt + 1, state, now, None)
    return None


def _compensate_items(
    aid: str, spec: CompensateSpec, state: ExecutionState, now: datetime, in_flight: frozenset[str]
) -> Step | None:
    a = state.activity(aid)
    items = a.items or ()
    for i in reversed(range(len(items))):
        item = items[i]
        if item["status"] != ActivityStatus.COMPLETED:
            continue
        mark = item.get("compensation")
        if mark is None:
            return _attempt(aid, spec, 1, state, now, i)
        if mark == "running":
            if f"{aid}[{i}]/compensate" in in_flight:
                return [], []
            attempt = int(item.get("compensation_attempt", 1))
            if attempt >= retry_policy(spec).max_attempts:
                err = item.get("compensation_error") or error("WorkerLost", "compensation lost")
                return [
                    ev(EventType.COMPENSATION_FAILED, now, activity=aid, index=i, error=err)
                ], []
            return _attempt(aid, spec, attempt + 1, state, now, i)
    if a.status in (ActivityStatus.COMPENSATED, ActivityStatus.COMPENSATION_FAILED):
        return None
    failed = [i for i, item in enumerate(items) if item.get("compensation") == "failed"]
    if failed:
        err = error("CompensationFailed", f"items {failed} of {aid} could not be undone")
        return [ev(EventType.COMPENSATION_FAILED, now, activity=aid, error=err)], []
    return [ev(EventType.ACTIVITY_COMPENSATED, now, activity=aid, output=None)], []


def _attempt(
    aid: str,
    spec: CompensateSpec,
    attempt: int,
    state: ExecutionState,
    now: datetime,
    index: int | None,
) -> Step:
    where: dict[str, Any] = {"activity": aid}
    extra: dict[str, Any] = {}
    if index is not None:
        where["index"] = index
        values = state.activity(aid).input
        extra = {"item": values[index] if isinstance(values, list) else None, "index": index}
    started = ev(EventType.COMPENSATION_STEP_STARTED, now, **where, attempt=attempt)
    try:
        rendered = render(
            spec_of(spec),
            expression_context(state, extra),
            where=f"activity '{aid}' field compensate",
        )
    except Exception as exc:
        return [
            started,
            ev(
                EventType.COMPENSATION_FAILED,
                now,
                **where,
                error=error("ExpressionError", str(exc)),
            ),
        ], []
    if spec.kind_entry.settle == "value":  # settled here: the rendered spec is the output
        return [started, ev(EventType.ACTIVITY_COMPENSATED, now, **where, output=rendered)], []
    return [started], [
        RunActivity(aid, attempt, spec.kind, rendered, compensation=True, index=index)
    ]
