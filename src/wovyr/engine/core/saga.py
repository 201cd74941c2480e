"""The pure decider's failure path: workflow timeout, draining, and saga compensation.

When an activity fails for good nothing new starts; in-flight attempts finish; then the
compensations of completed activities run one at a time in reverse completion order (a
`for_each` activity's completed items are undone in reverse index order), each recorded, and
the execution ends `failed` with the first failure and every compensation's outcome.
A compensation attempt lost with its worker runs again as the same attempt
(`CompensationStepStarted` with `recovery: n`), within its recovery budget; a failed one is
retried under the compensation's own `retry`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from wovyr.definition.expr import Costs, render
from wovyr.definition.model import CompensateSpec, Workflow
from wovyr.engine.core.context import expression_context
from wovyr.engine.core.policy import (
    RunActivity,
    error,
    recovery_exhausted,
    spec_of,
)
from wovyr.engine.core.state import ActivityStatus, ExecutionState
from wovyr.events import (
    ActivityCompensated,
    ActivityFailed,
    ActivitySkipped,
    CompensationFailed,
    CompensationStarted,
    CompensationStepStarted,
    Event,
    ExecutionFailed,
    TimerCancelled,
    or_absent,
)

__all__ = ["compensate", "failing", "timeout"]

Step = tuple[list[Event], list[RunActivity]]


def timeout(definition: Workflow, state: ExecutionState, now: datetime) -> Step:
    """Fail what is active (or, if nothing is, a pending activity) to start the saga."""
    err = error("WorkflowTimeout", f"the workflow did not finish within {definition.timeout}s")
    events = [
        ActivityFailed.final(aid, a.attempt, err).at(now)
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
            events = [ActivityFailed.final(pending[0], 0, err).at(now)]
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
                # `output` is written even when null (a for_each keeps its items' outputs)
                output = _item_outputs(a.items)
                events.append(ActivityFailed.final(act.id, a.attempt, lost, output=output).at(now))
        elif a.status in (ActivityStatus.PENDING, ActivityStatus.WAITING, ActivityStatus.RETRYING):
            events.append(ActivitySkipped(activity=act.id, reason="workflow failed").at(now))
    events.extend(TimerCancelled(timer=t).at(now) for t in state.timers)
    if events or still_running:
        return events, []
    reason = definition.failure or _first_failure(definition, state)
    undo = [
        a.id for a in definition.activities if a.compensate is not None and _undoable(state, a.id)
    ]
    order = sorted(undo, key=lambda aid: -(state.activity(aid).completion_order or -1))
    return [CompensationStarted(activities=order, reason=reason).at(now)], []


def _first_failure(definition: Workflow, state: ExecutionState) -> dict[str, Any]:
    """Why the workflow fails: the uncaught failure that ended first."""
    first = min(
        (
            a
            for a in definition.activities
            if state.activity(a.id).status == ActivityStatus.FAILED and not a.continues
        ),
        key=lambda a: state.activity(a.id).finished_at or "",
    )
    return {"type": "ActivityFailed", "activity": first.id, "error": state.activity(first.id).error}


def _item_outputs(items: Any) -> Any:
    return None if items is None else [i.get("output") for i in items]


def _undoable(state: ExecutionState, activity_id: str) -> bool:
    a = state.activity(activity_id)
    if a.items is not None:  # a for_each: whatever items completed
        return any(i["status"] == ActivityStatus.COMPLETED for i in a.items)
    return a.status == ActivityStatus.COMPLETED


def compensate(
    definition: Workflow,
    state: ExecutionState,
    now: datetime,
    in_flight: frozenset[str],
    max_recoveries: int,
    costs: Costs | None = None,
) -> Step:
    """Undo completed activities one at a time, in the recorded order."""
    comp = state.compensation or {}
    costs = Costs() if costs is None else costs
    for aid in comp.get("order", []):
        spec = definition.activity(aid).compensate
        assert spec is not None
        undo = _Undo(aid, spec, state, now, in_flight, max_recoveries, costs)
        step = undo.items() if state.activity(aid).items is not None else undo.one()
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
    return [ExecutionFailed(error=err).at(now)], []


@dataclass(frozen=True)
class _Undo:
    """The compensation of one activity: the step it needs now, or None when it is done."""

    aid: str
    spec: CompensateSpec
    state: ExecutionState
    now: datetime
    in_flight: frozenset[str]
    max_recoveries: int
    costs: Costs

    def one(self) -> Step | None:
        a = self.state.activity(self.aid)
        if a.status == ActivityStatus.COMPLETED:
            return self._attempt(1, None)
        if a.status == ActivityStatus.COMPENSATING:
            attempt, recoveries = a.compensation_attempt, a.compensation_recoveries
            return self._running(None, attempt, a.compensation_retry, recoveries)
        return None

    def items(self) -> Step | None:
        """A for_each's completed items, undone in reverse index order."""
        aid, now = self.aid, self.now
        a = self.state.activity(aid)
        items = a.items or ()
        for i in reversed(range(len(items))):
            item = items[i]
            if item["status"] != ActivityStatus.COMPLETED:
                continue
            mark = item.get("compensation")
            if mark is None:
                return self._attempt(1, i)
            if mark == "running":
                attempt = int(item.get("compensation_attempt", 1))
                recoveries = int(item.get("compensation_recoveries", 0))
                return self._running(i, attempt, bool(item.get("compensation_retry")), recoveries)
        if a.status in (ActivityStatus.COMPENSATED, ActivityStatus.COMPENSATION_FAILED):
            return None
        failed = [i for i, item in enumerate(items) if item.get("compensation") == "failed"]
        if failed:
            err = error("CompensationFailed", f"items {failed} of {aid} could not be undone")
            return [CompensationFailed(activity=aid, error=err).at(now)], []
        return [ActivityCompensated(activity=aid, output=None).at(now)], []

    def _running(self, index: int | None, attempt: int, retry: bool, recoveries: int) -> Step:
        """A compensation (of the activity, or of its item `index`) under way: wait for its
        attempt in flight; after a failed attempt, the next one; after one lost with its
        worker, the same one again (within the recovery budget)."""
        aid = self.aid
        key = aid if index is None else f"{aid}[{index}]"
        if f"{key}/compensate" in self.in_flight:
            return [], []
        if retry:  # it failed (within its retry policy): the next attempt
            return self._attempt(attempt + 1, index)
        if recoveries >= self.max_recoveries:  # lost with its worker too often
            what = aid if index is None else f"item {index} of {aid}"
            err = recovery_exhausted(f"the compensation of {what}", attempt, self.max_recoveries)
            failed = CompensationFailed(activity=aid, index=or_absent(index), error=err)
            return [failed.at(self.now)], []
        return self._attempt(attempt, index, recoveries + 1)

    def _attempt(self, attempt: int, index: int | None, recovery: int | None = None) -> Step:
        return _attempt(
            self.aid, self.spec, attempt, self.state, self.now, index, recovery, self.costs
        )


def _attempt(
    aid: str,
    spec: CompensateSpec,
    attempt: int,
    state: ExecutionState,
    now: datetime,
    index: int | None,
    recovery: int | None = None,
    costs: Costs | None = None,
) -> Step:
    """Attempt `attempt` of a compensation (again, with `recovery`, after a lost worker)."""
    extra: dict[str, Any] = {}
    if index is not None:
        values = state.activity(aid).input
        extra = {"item": values[index] if isinstance(values, list) else None, "index": index}
    written = or_absent(index)  # the index is written only for an item
    started = CompensationStepStarted(
        activity=aid, index=written, attempt=attempt, recovery=or_absent(recovery)
    ).at(now)
    try:
        rendered = render(
            spec_of(spec),
            expression_context(state, extra),
            where=f"activity '{aid}' field compensate",
            costs=costs,
        )
    except Exception as exc:
        err = error("ExpressionError", str(exc))
        return [started, CompensationFailed(activity=aid, index=written, error=err).at(now)], []
    if spec.kind_entry.settle == "value":  # settled here: the rendered spec is the output
        compensated = ActivityCompensated(activity=aid, index=written, output=rendered)
        return [started, compensated.at(now)], []
    return [started], [
        RunActivity(aid, attempt, spec.kind, rendered, compensation=True, index=index)
    ]
