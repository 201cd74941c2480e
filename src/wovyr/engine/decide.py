"""The pure decider: `decide(definition, state, now, in_flight) -> Decision`.

It reads the state, never a clock or the outside world, and returns the events to record
now plus the activity attempts to run once those events are durable. Activities that need
no I/O (`set`, waits that are already satisfied, skips, completion) are settled here, so
the commit that records one activity's result also records everything it unblocks.

`in_flight` names the activities whose attempt is running in *this* worker. An activity
the state calls running that is not in flight was lost with a crashed worker: a new
attempt is recorded before it runs again, and after `max_attempts` it fails.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from wovyr.definition.expr import evaluate_condition, render
from wovyr.definition.model import Activity, CompensateSpec, RetryPolicy, Workflow
from wovyr.engine.state import ActivityState, ActivityStatus, ExecutionState, apply
from wovyr.events import Event, EventType

__all__ = [
    "Decision",
    "Outcome",
    "RunActivity",
    "decide",
    "expression_context",
    "outcome_events",
    "retry_policy",
    "start_events",
]

RUNNABLE_KINDS = frozenset({"tool", "http", "shell", "workflow"})
_MAX_PASSES = 10_000


@dataclass(frozen=True)
class RunActivity:
    """Run one attempt of an activity (or of its compensation) once the events are durable."""

    activity_id: str
    attempt: int
    kind: str
    input: Any
    compensation: bool = False

    @property
    def key(self) -> str:
        return f"{self.activity_id}/compensate" if self.compensation else self.activity_id


@dataclass(frozen=True)
class Outcome:
    """What one attempt produced: an output, or an error mapping {type, message, details}."""

    output: Any = None
    error: dict[str, Any] | None = None
    retryable: bool = True


@dataclass
class Decision:
    events: list[Event] = field(default_factory=list)
    runs: list[RunActivity] = field(default_factory=list)
    state: ExecutionState | None = None


def retry_policy(activity: Activity | CompensateSpec) -> RetryPolicy:
    if activity.retry is not None:
        return activity.retry
    if isinstance(activity, Activity) and (activity.workflow is not None or activity.wait):
        return RetryPolicy(max_attempts=1)  # children and waits retry only when asked to
    return RetryPolicy()


def start_events(
    definition: Workflow,
    definition_hash: str,
    inputs: dict[str, Any],
    now: datetime,
    *,
    parent_id: str | None = None,
    extra: dict[str, Any] | None = None,
) -> list[Event]:
    """The events that start an execution (and arm its workflow timeout, if any)."""
    data = {
        "workflow": definition.name,
        "version": definition.version,
        "definition_hash": definition_hash,
        "input": inputs,
        "parent_id": parent_id,
        "timeout": definition.timeout,
        "activities": [a.id for a in definition.activities],
        **(extra or {}),
    }
    events = [Event(EventType.EXECUTION_STARTED, now, data)]
    if definition.timeout:
        fire_at = (now + timedelta(seconds=definition.timeout)).isoformat()
        events.append(
            Event(
                EventType.TIMER_ARMED,
                now,
                {"timer": "workflow:timeout", "purpose": "workflow_timeout", "fire_at": fire_at},
            )
        )
    return events


def expression_context(
    state: ExecutionState, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "inputs": state.input,
        "activities": {
            aid: {"output": a.output, "status": a.status, "error": a.error}
            for aid, a in state.activities.items()
        },
        "execution": {
            "id": state.id,
            "workflow": state.workflow,
            "version": state.version,
            "started_at": state.created_at,
        },
        **(extra or {}),
    }


def decide(
    definition: Workflow,
    state: ExecutionState,
    now: datetime,
    in_flight: frozenset[str] = frozenset(),
) -> Decision:
    """Events to record and attempts to run, settling every pure step to a fixpoint."""
    decision = Decision(state=state)
    current = state
    for _ in range(_MAX_PASSES):
        events, runs = _step(definition, current, now, in_flight)
        if not events:
            break
        for event in events:
            current = apply(current, event)
        decision.events.extend(events)
        decision.runs.extend(runs)
        in_flight = in_flight | {r.key for r in runs}
    decision.state = current
    return decision


def outcome_events(
    definition: Workflow, state: ExecutionState, run: RunActivity, outcome: Outcome, now: datetime
) -> list[Event]:
    """The events recording `outcome` of `run`; empty when the result must be refused
    (the execution finished, or the attempt is no longer the current one)."""
    act = state.activity(run.activity_id)
    if state.finished:
        return []
    if run.compensation:
        if act.status != ActivityStatus.COMPENSATING or act.compensation_attempt != run.attempt:
            return []
        return _compensation_outcome(definition, run, outcome, now)
    if act.status != ActivityStatus.RUNNING or act.attempt != run.attempt:
        return []
    if outcome.error is None:
        return [
            _ev(
                EventType.ACTIVITY_COMPLETED,
                now,
                activity=run.activity_id,
                attempt=run.attempt,
                output=outcome.output,
            )
        ]
    policy = retry_policy(definition.activity(run.activity_id))
    return _failure(run.activity_id, run.attempt, outcome.error, outcome.retryable, policy, now)


def _failure(
    activity_id: str,
    attempt: int,
    error: dict[str, Any],
    retryable: bool,
    policy: RetryPolicy,
    now: datetime,
) -> list[Event]:
    will_retry = (
        retryable
        and attempt < policy.max_attempts
        and error.get("type") not in policy.non_retryable
    )
    if not will_retry:
        return [
            _ev(
                EventType.ACTIVITY_FAILED,
                now,
                activity=activity_id,
                attempt=attempt,
                error=error,
                will_retry=False,
                next_attempt_at=None,
            )
        ]
    fire_at = now + timedelta(seconds=policy.delay(attempt))
    events = [
        _ev(
            EventType.ACTIVITY_FAILED,
            now,
            activity=activity_id,
            attempt=attempt,
            error=error,
            will_retry=True,
            next_attempt_at=fire_at.isoformat(),
        )
    ]
    if fire_at > now:
        events.append(
            _ev(
                EventType.TIMER_ARMED,
                now,
                timer=f"{activity_id}:retry:{attempt}",
                activity=activity_id,
                purpose="retry",
                fire_at=fire_at.isoformat(),
            )
        )
    return events


def _compensation_outcome(
    definition: Workflow, run: RunActivity, outcome: Outcome, now: datetime
) -> list[Event]:
    aid = run.activity_id
    if outcome.error is None:
        return [_ev(EventType.ACTIVITY_COMPENSATED, now, activity=aid, output=outcome.output)]
    spec = definition.activity(aid).compensate
    assert spec is not None
    if outcome.retryable and run.attempt < retry_policy(spec).max_attempts:
        return [
            _ev(
                EventType.COMPENSATION_ATTEMPT_FAILED,
                now,
                activity=aid,
                attempt=run.attempt,
                error=outcome.error,
            )
        ]
    return [_ev(EventType.COMPENSATION_FAILED, now, activity=aid, error=outcome.error)]


def _ev(kind: str, now: datetime, **data: Any) -> Event:
    return Event(kind, now, data)


def _error(kind: str, message: str, **details: Any) -> dict[str, Any]:
    err: dict[str, Any] = {"type": kind, "message": message}
    if details:
        err["details"] = details
    return err


# --- one pass -------------------------------------------------------------------------


def _step(
    definition: Workflow, state: ExecutionState, now: datetime, in_flight: frozenset[str]
) -> tuple[list[Event], list[RunActivity]]:
    if state.finished:
        return [], []
    if state.compensation is not None:
        return _compensate(definition, state, now, in_flight)
    if state.timed_out:
        timeout_events, timeout_runs = _timeout(definition, state, now)
        if timeout_events:
            return timeout_events, timeout_runs
    if any(state.activity(a.id).status == ActivityStatus.FAILED for a in definition.activities):
        return _failing(definition, state, now, in_flight)
    events: list[Event] = []
    runs: list[RunActivity] = []
    ctx = expression_context(state)
    for act in definition.activities:
        ev, run = _advance(act, state.activity(act.id), state, ctx, now, in_flight)
        events.extend(ev)
        if run is not None:
            runs.append(run)
        if ev and any(e.type in _SETTLING for e in ev):
            break  # the context changed: re-evaluate on the next pass
    if events:
        return events, runs
    if all(state.activity(a.id).status in ActivityStatus.DONE_OK for a in definition.activities):
        return _complete(definition, state, ctx, now), []
    return [], []


_SETTLING = frozenset(
    {EventType.ACTIVITY_COMPLETED, EventType.ACTIVITY_SKIPPED, EventType.ACTIVITY_FAILED}
)


def _advance(
    act: Activity,
    a: ActivityState,
    state: ExecutionState,
    ctx: dict[str, Any],
    now: datetime,
    in_flight: frozenset[str],
) -> tuple[list[Event], RunActivity | None]:
    if a.status == ActivityStatus.PENDING and a.started_at is None:
        return _maybe_schedule(act, state, ctx, now)
    if a.status == ActivityStatus.WAITING:
        return _check_wait(act, a, state, now), None
    if a.status == ActivityStatus.RUNNING and act.id not in in_flight:
        return _recover_lost_attempt(act, a, now, state.id)
    if a.status == ActivityStatus.RETRYING and _retry_due(a, now):
        return _next_attempt(act, a.attempt + 1, a.input, now, state.id)
    return [], None


def _maybe_schedule(
    act: Activity, state: ExecutionState, ctx: dict[str, Any], now: datetime
) -> tuple[list[Event], RunActivity | None]:
    for need in act.needs:
        if state.activity(need).status not in ActivityStatus.DONE_OK:
            return [], None
    try:
        if not evaluate_condition(act.when, ctx, where=f"activity '{act.id}' field when"):
            return [
                _ev(EventType.ACTIVITY_SKIPPED, now, activity=act.id, reason="condition is false")
            ], None
        if act.wait is not None:
            return _begin_wait(act, state, now), None
        if act.set is not None:
            output = render(act.set, ctx, where=f"activity '{act.id}' field set")
            return [
                _ev(EventType.ACTIVITY_SCHEDULED, now, activity=act.id, input=None),
                _ev(EventType.ACTIVITY_COMPLETED, now, activity=act.id, attempt=1, output=output),
            ], None
        rendered = render(_spec_of(act), ctx, where=f"activity '{act.id}' field {act.kind}")
    except Exception as exc:  # expression errors fail the activity, never the engine
        return [
            _ev(EventType.ACTIVITY_SCHEDULED, now, activity=act.id, input=None),
            _ev(
                EventType.ACTIVITY_FAILED,
                now,
                activity=act.id,
                attempt=0,
                error=_error("ExpressionError", str(exc)),
                will_retry=False,
                next_attempt_at=None,
            ),
        ], None
    events, run = _next_attempt(act, 1, rendered, now, state.id)
    return [_ev(EventType.ACTIVITY_SCHEDULED, now, activity=act.id, input=rendered), *events], run


def _spec_of(act: Activity | CompensateSpec) -> Any:
    if act.tool is not None:
        return act.with_
    if act.http is not None:
        return act.http.model_dump(by_alias=True, mode="json", exclude_none=True)
    if act.shell is not None:
        return act.shell.model_dump(mode="json", exclude_none=True)
    if isinstance(act, Activity) and act.workflow is not None:
        return act.workflow.model_dump(mode="json", exclude_none=True)
    return act.set


def _next_attempt(
    act: Activity, attempt: int, rendered: Any, now: datetime, execution_id: str
) -> tuple[list[Event], RunActivity]:
    key = f"{execution_id}/{act.id}/{attempt}"
    event = _ev(EventType.ACTIVITY_STARTED, now, activity=act.id, attempt=attempt, key=key)
    return [event], RunActivity(act.id, attempt, act.kind, rendered)


def _retry_due(a: ActivityState, now: datetime) -> bool:
    if a.timer_fired or a.next_attempt_at is None:
        return True
    return datetime.fromisoformat(a.next_attempt_at) <= now


def _recover_lost_attempt(
    act: Activity, a: ActivityState, now: datetime, execution_id: str
) -> tuple[list[Event], RunActivity | None]:
    policy = retry_policy(act)
    error = _error("WorkerLost", f"attempt {a.attempt} was lost with its worker")
    if a.attempt >= policy.max_attempts:
        return [
            _ev(
                EventType.ACTIVITY_FAILED,
                now,
                activity=act.id,
                attempt=a.attempt,
                error=error,
                will_retry=False,
                next_attempt_at=None,
            )
        ], None
    failed = _ev(
        EventType.ACTIVITY_FAILED,
        now,
        activity=act.id,
        attempt=a.attempt,
        error=error,
        will_retry=True,
        next_attempt_at=now.isoformat(),
    )
    events, run = _next_attempt(act, a.attempt + 1, a.input, now, execution_id)
    return [failed, *events], run


def _begin_wait(act: Activity, state: ExecutionState, now: datetime) -> list[Event]:
    wait = act.wait
    assert wait is not None
    events: list[Event] = []
    if wait.signal is not None:
        info: dict[str, Any] = {"kind": "signal", "name": wait.signal}
    elif wait.timer is not None:
        fire_at = wait.timer.at or now + timedelta(seconds=wait.timer.after or 0)
        info = {"kind": "timer", "fire_at": fire_at.isoformat()}
        events.append(
            _ev(
                EventType.TIMER_ARMED,
                now,
                timer=f"{act.id}:timer",
                activity=act.id,
                purpose="wait",
                fire_at=fire_at.isoformat(),
            )
        )
    else:
        approval = wait.approval
        assert approval is not None
        info = {"kind": "approval", "approvers": list(approval.approvers), "timeout_at": None}
        if approval.timeout is not None:
            timeout_at = (now + timedelta(seconds=approval.timeout)).isoformat()
            info["timeout_at"] = timeout_at
            events.append(
                _ev(
                    EventType.TIMER_ARMED,
                    now,
                    timer=f"{act.id}:approval-timeout",
                    activity=act.id,
                    purpose="approval_timeout",
                    fire_at=timeout_at,
                )
            )
    return [_ev(EventType.ACTIVITY_SCHEDULED, now, activity=act.id, input=None, wait=info), *events]


def _check_wait(
    act: Activity, a: ActivityState, state: ExecutionState, now: datetime
) -> list[Event]:
    wait = a.wait or {}
    kind = wait.get("kind")
    if kind == "signal":
        name = wait["name"]
        if state.signals.get(name):
            return [
                _ev(
                    EventType.ACTIVITY_COMPLETED,
                    now,
                    activity=act.id,
                    attempt=1,
                    output=state.signals[name][0],
                    signal=name,
                )
            ]
        return []
    if kind == "timer":
        if a.timer_fired:
            return [
                _ev(
                    EventType.ACTIVITY_COMPLETED,
                    now,
                    activity=act.id,
                    attempt=1,
                    output={"fired": True, "fire_at": wait.get("fire_at")},
                )
            ]
        return []
    decision = state.approvals.get(act.id)
    cancel_timer = [
        _ev(EventType.TIMER_CANCELLED, now, timer=t)
        for t, info in state.timers.items()
        if info.get("activity") == act.id
    ]
    if decision is not None:
        if decision["approved"]:
            return [
                *cancel_timer,
                _ev(EventType.ACTIVITY_COMPLETED, now, activity=act.id, attempt=1, output=decision),
            ]
        error = _error(
            "ApprovalRejected",
            f"rejected by {decision.get('by') or 'unknown'}",
            by=decision.get("by"),
            comment=decision.get("comment"),
        )
        return [
            *cancel_timer,
            _ev(
                EventType.ACTIVITY_FAILED,
                now,
                activity=act.id,
                attempt=1,
                error=error,
                will_retry=False,
                next_attempt_at=None,
            ),
        ]
    if a.timer_fired:
        error = _error("ApprovalTimeout", "no decision before the approval timeout")
        return [
            _ev(
                EventType.ACTIVITY_FAILED,
                now,
                activity=act.id,
                attempt=1,
                error=error,
                will_retry=False,
                next_attempt_at=None,
            )
        ]
    return []


def _complete(
    definition: Workflow, state: ExecutionState, ctx: dict[str, Any], now: datetime
) -> list[Event]:
    cancel = [_ev(EventType.TIMER_CANCELLED, now, timer=t) for t in state.timers]
    try:
        output = render(definition.output, ctx, where="workflow field output")
    except Exception as exc:
        error = _error("ExpressionError", str(exc))
        return [*cancel, _ev(EventType.EXECUTION_FAILED, now, error=error)]
    return [*cancel, _ev(EventType.EXECUTION_COMPLETED, now, output=output)]


# --- failure and compensation ---------------------------------------------------------


def _timeout(
    definition: Workflow, state: ExecutionState, now: datetime
) -> tuple[list[Event], list[RunActivity]]:
    error = _error("WorkflowTimeout", f"the workflow did not finish within {definition.timeout}s")
    events = [
        _ev(
            EventType.ACTIVITY_FAILED,
            now,
            activity=aid,
            attempt=a.attempt,
            error=error,
            will_retry=False,
            next_attempt_at=None,
        )
        for aid, a in state.activities.items()
        if a.status in ActivityStatus.ACTIVE
    ]
    failed = any(a.status == ActivityStatus.FAILED for a in state.activities.values())
    if not events and not failed:  # nothing active: fail a pending one to start the saga
        pending = [
            a.id
            for a in definition.activities
            if state.activity(a.id).status == ActivityStatus.PENDING
        ]
        events = (
            [
                _ev(
                    EventType.ACTIVITY_FAILED,
                    now,
                    activity=pending[0],
                    attempt=0,
                    error=error,
                    will_retry=False,
                    next_attempt_at=None,
                )
            ]
            if pending
            else []
        )
    return events, []


def _failing(
    definition: Workflow, state: ExecutionState, now: datetime, in_flight: frozenset[str]
) -> tuple[list[Event], list[RunActivity]]:
    """An activity failed: start nothing new, let in-flight attempts finish, then compensate."""
    events: list[Event] = []
    still_running = False
    for act in definition.activities:
        a = state.activity(act.id)
        if a.status == ActivityStatus.RUNNING:
            if act.id in in_flight:
                still_running = True
            else:
                events.append(
                    _ev(
                        EventType.ACTIVITY_FAILED,
                        now,
                        activity=act.id,
                        attempt=a.attempt,
                        will_retry=False,
                        next_attempt_at=None,
                        error=_error("WorkerLost", "lost while the workflow failed"),
                    )
                )
        elif a.status in (ActivityStatus.PENDING, ActivityStatus.WAITING, ActivityStatus.RETRYING):
            events.append(
                _ev(EventType.ACTIVITY_SKIPPED, now, activity=act.id, reason="workflow failed")
            )
    events.extend(_ev(EventType.TIMER_CANCELLED, now, timer=t) for t in state.timers)
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
    completed = [
        a.id
        for a in definition.activities
        if a.compensate is not None and state.activity(a.id).status == ActivityStatus.COMPLETED
    ]
    order = sorted(completed, key=lambda aid: -(state.activity(aid).completion_order or 0))
    return [_ev(EventType.COMPENSATION_STARTED, now, activities=order, reason=reason)], []


def _compensate(
    definition: Workflow, state: ExecutionState, now: datetime, in_flight: frozenset[str]
) -> tuple[list[Event], list[RunActivity]]:
    """Undo completed activities one at a time, in reverse completion order."""
    comp = state.compensation or {}
    for aid in comp.get("order", []):
        a = state.activity(aid)
        spec = definition.activity(aid).compensate
        assert spec is not None
        if a.status == ActivityStatus.COMPLETED:
            return _compensation_attempt(aid, spec, 1, state, now)
        if a.status == ActivityStatus.COMPENSATING:
            if f"{aid}/compensate" in in_flight:
                return [], []
            if a.compensation_attempt >= retry_policy(spec).max_attempts:
                error = a.compensation_error or _error("WorkerLost", "compensation attempt lost")
                return [_ev(EventType.COMPENSATION_FAILED, now, activity=aid, error=error)], []
            return _compensation_attempt(aid, spec, a.compensation_attempt + 1, state, now)
    steps = [
        {
            "activity": aid,
            "status": state.activity(aid).status,
            "error": state.activity(aid).compensation_error
            if state.activity(aid).status == ActivityStatus.COMPENSATION_FAILED
            else None,
        }
        for aid in comp.get("order", [])
    ]
    error = dict(comp.get("reason") or {})
    error["compensation"] = steps
    return [_ev(EventType.EXECUTION_FAILED, now, error=error)], []


def _compensation_attempt(
    aid: str, spec: CompensateSpec, attempt: int, state: ExecutionState, now: datetime
) -> tuple[list[Event], list[RunActivity]]:
    started = _ev(EventType.COMPENSATION_STEP_STARTED, now, activity=aid, attempt=attempt)
    ctx = expression_context(state)
    try:
        rendered = render(_spec_of(spec), ctx, where=f"activity '{aid}' field compensate")
    except Exception as exc:
        return [
            started,
            _ev(
                EventType.COMPENSATION_FAILED,
                now,
                activity=aid,
                error=_error("ExpressionError", str(exc)),
            ),
        ], []
    if spec.set is not None:
        return [
            started,
            _ev(EventType.ACTIVITY_COMPENSATED, now, activity=aid, output=rendered),
        ], []
    return [started], [RunActivity(aid, attempt, spec.kind, rendered, compensation=True)]
