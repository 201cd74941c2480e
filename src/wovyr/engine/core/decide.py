"""The pure decider: `decide(definition, state, now, in_flight) -> Decision`.

It reads the state, never a clock or the outside world, and returns the events to record
now plus the attempts to run once those events are durable. Steps that need no I/O (`set`,
satisfied waits, skips, a finished child, completion) are settled here, so the commit that
records one activity's result also records everything it unblocks.

`in_flight` names the attempts running in *this* worker. An attempt the state calls
running that is not in flight was lost with a crashed worker. That is not the activity's
failure: the same attempt (same idempotency key) runs again, recorded first as an
`ActivityStarted` with `recovery: n`; only the recovery budget (`max_recoveries` re-runs
per activity) bounds it, never `retry.max_attempts`, so a poison activity that kills its
worker every time ends with `RecoveryBudgetExhausted`. (Starting a child workflow is
idempotent, so a lost start is simply repeated.) `for_each` items live in `items.py`, the
failure path and compensation in `saga.py`.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from wovyr.definition.expr import Costs, evaluate_condition, render
from wovyr.definition.inputs import resolve_inputs
from wovyr.definition.model import Activity, Workflow
from wovyr.engine.core import items, saga
from wovyr.engine.core.bounds import StepBytes
from wovyr.engine.core.context import LazyContext, expression_context
from wovyr.engine.core.policy import (
    MAX_RECOVERIES,
    Outcome,
    RunActivity,
    arm_child_timeout,
    cancel_child_timeout,
    error,
    failure_events,
    recovery_exhausted,
    retry_due,
    retry_policy,
    spec_of,
)
from wovyr.engine.core.state import (
    ActivityIndex,
    ActivityState,
    ActivityStatus,
    ExecutionState,
    activity_index,
    apply,
)
from wovyr.engine.core.waits import begin_wait as _begin_wait
from wovyr.engine.core.waits import check_wait as _check_wait
from wovyr.engine.core.waits import continue_held
from wovyr.events import (
    ActivityCompensated,
    ActivityCompleted,
    ActivityFailed,
    ActivityResumed,
    ActivityScheduled,
    ActivitySkipped,
    ActivityStarted,
    ActivitySuspended,
    ChildStarted,
    CompensationAttemptFailed,
    CompensationFailed,
    Event,
    EventType,
    ExecutionCompleted,
    ExecutionContinued,
    ExecutionFailed,
    ExecutionStarted,
    IterationCompleted,
    IterationStarted,
    TimerArmed,
    TimerCancelled,
    or_absent,
)
from wovyr.ids import continued_id

__all__ = [
    "MAX_ITEMS",
    "MAX_RECOVERIES",
    "Decision",
    "Outcome",
    "RunActivity",
    "decide",
    "expression_context",
    "outcome_events",
    "retry_policy",
    "start_events",
]

MAX_ITEMS = 10_000  # items of one for_each (Engine(max_items=...) changes it)
_MAX_PASSES = 10_000
_error = error


@dataclass
class Decision:
    events: list[Event] = field(default_factory=list)
    runs: list[RunActivity] = field(default_factory=list)
    state: ExecutionState | None = None
    #: The call stopped at its work limit (`decide`'s `costs`) with more perhaps left to
    #: decide: record these, then decide again from `state`.
    more: bool = False


def start_events(
    definition: Workflow,
    definition_hash: str,
    inputs: dict[str, Any],
    now: datetime,
    *,
    parent_id: str | None = None,
    extra: dict[str, Any] | None = None,
) -> list[Event]:
    """The events that start an execution (and arm its workflow timeout, if any). `extra`
    holds the optional keys of `ExecutionStarted` (a child's `parent` and `depth`, a
    schedule's `schedule` and `scheduled_at`)."""
    started = ExecutionStarted(
        workflow=definition.name,
        version=definition.version,
        definition_hash=definition_hash,
        input=inputs,
        parent_id=parent_id,
        timeout=definition.timeout,
        activities=[a.id for a in definition.activities],
        **(extra or {}),
    )
    events = [started.at(now)]
    if definition.timeout:
        fire_at = (now + timedelta(seconds=definition.timeout)).isoformat()
        timer = TimerArmed(timer="workflow:timeout", purpose="workflow_timeout", fire_at=fire_at)
        events.append(timer.at(now))
    return events


def decide(
    definition: Workflow,
    state: ExecutionState,
    now: datetime,
    in_flight: frozenset[str] = frozenset(),
    *,
    max_items: int = MAX_ITEMS,
    max_recoveries: int = MAX_RECOVERIES,
    deferred: frozenset[str] = frozenset(),
    costs: Costs | None = None,
    bounds: StepBytes | None = None,
) -> Decision:
    """Events to record and attempts to run, settling every pure step to a fixpoint.

    `deferred` names attempts (by `RunActivity.key`) that must not start now (flow control
    holds them): the decision leaves them, and the events that would start them, out, as
    if it had not reached them; a deferred map item also keeps the items after it pending,
    so that items start in order.

    `costs`: what the call's expressions cost (one `Costs` for the whole call: each value
    they read is measured once). With a `limit`, the call stops once that much work is
    spent - between activities, between the items of a `for_each` - and says so
    (`Decision.more`): the caller records what was decided, lets other executions' steps
    run, and decides again from `Decision.state`. The events decided so far are a valid
    prefix of what one unbounded call would decide.

    `bounds`: what the step may store (`wovyr.engine.core.bounds`): each pass's values are
    admitted in order, and one over a bound fails its owner instead of being recorded."""
    decision = Decision(state=state)
    current = state
    limits = _Limits(max_items, max_recoveries, deferred, Costs() if costs is None else costs)
    for _ in range(_MAX_PASSES):
        events, runs, whole = _step(definition, current, now, in_flight, limits)
        if not events and not runs:
            break
        if bounds is not None:
            events, runs = bounds.admit(current, events, runs, now)
        for event in events:
            current = apply(current, event)
        decision.events.extend(events)
        decision.runs.extend(runs)
        in_flight = in_flight | {r.key for r in runs}
        if limits.costs.exhausted:
            decision.more = True
            break
        if whole and _only_started(events):
            break  # a fixpoint already: the pass after it would find nothing (`_only_started`)
    decision.state = current
    return decision


def outcome_events(
    definition: Workflow, state: ExecutionState, run: RunActivity, outcome: Outcome, now: datetime
) -> list[Event]:
    """The events recording `outcome` of `run`; empty when the result must be refused
    (the execution finished, or the attempt is no longer the current one). The attempt's
    log lines and model calls, if any, ride on its result event (`logs`, `model_calls`:
    the state never holds them)."""
    events = _outcome_events(definition, state, run, outcome, now)
    riders = {k: v for k, v in (("logs", outcome.logs), ("model_calls", outcome.model_calls)) if v}
    if riders:
        for i, event in enumerate(events):
            if event.type in _LOGGED and event.data.get("activity") == run.activity_id:
                events[i] = Event(event.type, event.at, {**event.data, **riders})
                break
    return events


# the events that end an attempt, one of which carries its log lines
_LOGGED = frozenset(
    {
        EventType.ACTIVITY_COMPLETED,
        EventType.ACTIVITY_FAILED,
        EventType.ITEM_COMPLETED,
        EventType.ITEM_FAILED,
        EventType.ITERATION_COMPLETED,
        EventType.ACTIVITY_COMPENSATED,
        EventType.COMPENSATION_ATTEMPT_FAILED,
        EventType.COMPENSATION_FAILED,
    }
)


def _outcome_events(
    definition: Workflow, state: ExecutionState, run: RunActivity, outcome: Outcome, now: datetime
) -> list[Event]:
    if state.finished:
        return []
    act = definition.activity(run.activity_id)
    a = state.activity(run.activity_id)
    if run.compensation:
        return _compensation_outcome(act, a, run, outcome, now)
    if run.index is not None:
        item = (a.items or ())[run.index] if a.items and run.index < len(a.items) else None
        if (
            item is None
            or item["status"] != ActivityStatus.RUNNING
            or item["attempt"] != run.attempt
        ):
            return []
        return items.item_outcome_events(act, run.index, run.attempt, outcome, now)
    if a.status != ActivityStatus.RUNNING or a.attempt != run.attempt:
        return []
    if act.repeat is not None and run.iteration != a.iterations + 1:
        return []  # an attempt of an earlier iteration
    if outcome.child is not None:
        started = ChildStarted(activity=act.id, attempt=run.attempt, child=outcome.child)
        return [started.at(now), *arm_child_timeout(act, None, run.attempt, now)]
    if outcome.suspend is not None:
        return _suspend_events(act, run.attempt, outcome.suspend, now)
    return _result_events(act, run.attempt, outcome, now, state)


def _result_events(
    act: Activity, attempt: int, outcome: Outcome, now: datetime, state: ExecutionState
) -> list[Event]:
    """ActivityCompleted (or the end of one iteration of a `repeat`), or the failure (and its
    retry timer) under the activity's policy."""
    if outcome.error is None:
        if act.repeat is not None:
            return _iteration_end(act, state, attempt, outcome.output, now)
        return [ActivityCompleted(activity=act.id, attempt=attempt, output=outcome.output).at(now)]
    return failure_events(act, attempt, outcome, now)


def _iteration_end(
    act: Activity,
    state: ExecutionState,
    attempt: int,
    output: Any,
    now: datetime,
    costs: Costs | None = None,
) -> list[Event]:
    """An iteration of a `repeat` activity succeeded: `until` decides whether the activity
    completes, another iteration follows (after `every`), or `max_iterations` ends it."""
    spec = act.repeat
    assert spec is not None
    n = state.activity(act.id).iterations + 1
    ctx = {**expression_context(state), "output": output, "iteration": n}
    where = f"activity '{act.id}' field repeat.until"
    try:
        done = evaluate_condition(spec.until, ctx, where=where, costs=costs)
    except Exception as exc:
        return [ActivityFailed.final(act.id, attempt, _error("ExpressionError", str(exc))).at(now)]
    if done:
        return [
            IterationCompleted(activity=act.id, iteration=n, output=output, follows=False).at(now),
            ActivityCompleted(activity=act.id, attempt=attempt, output=output).at(now),
        ]
    if n >= spec.max_iterations:
        last = IterationCompleted(
            activity=act.id, iteration=n, output=output, follows=False, exhausted=True
        )
        if spec.on_exhausted == "continue":
            end = ActivityCompleted(activity=act.id, attempt=attempt, output=output)
            return [last.at(now), end.at(now)]
        err = _error(
            "RepeatExhausted",
            f"activity {act.id!r} ran {n} iterations (max_iterations) and `until` never held",
            iterations=n,
        )
        return [last.at(now), ActivityFailed.final(act.id, attempt, err).at(now)]
    if not spec.every:
        return [
            IterationCompleted(activity=act.id, iteration=n, output=output, follows=True).at(now)
        ]
    fire_at = (now + timedelta(seconds=spec.every)).isoformat()
    return [
        IterationCompleted(
            activity=act.id, iteration=n, output=output, follows=True, next_at=fire_at
        ).at(now),
        TimerArmed(
            timer=f"{act.id}:repeat:{n}", activity=act.id, purpose="repeat", fire_at=fire_at
        ).at(now),
    ]


def _compensation_outcome(
    act: Activity, a: ActivityState, run: RunActivity, outcome: Outcome, now: datetime
) -> list[Event]:
    if run.index is not None:
        item = (a.items or ())[run.index]
        if item.get("compensation") != "running" or item.get("compensation_attempt") != run.attempt:
            return []
    elif a.status != ActivityStatus.COMPENSATING or a.compensation_attempt != run.attempt:
        return []
    index = or_absent(run.index)
    if outcome.error is None:
        return [ActivityCompensated(activity=act.id, index=index, output=outcome.output).at(now)]
    assert act.compensate is not None
    if outcome.retryable and run.attempt < retry_policy(act.compensate).max_attempts:
        return [
            CompensationAttemptFailed(
                activity=act.id, index=index, attempt=run.attempt, error=outcome.error
            ).at(now)
        ]
    return [CompensationFailed(activity=act.id, index=index, error=outcome.error).at(now)]


# --- one pass -------------------------------------------------------------------------


@dataclass(frozen=True)
class _Limits:
    max_items: int
    max_recoveries: int
    deferred: frozenset[str] = frozenset()
    costs: Costs = field(default_factory=Costs)


def _step(
    definition: Workflow,
    state: ExecutionState,
    now: datetime,
    in_flight: frozenset[str],
    limits: _Limits,
) -> tuple[list[Event], list[RunActivity], bool]:
    """One pass: its events, its attempts, and whether it looked at every candidate of the
    plain path (no saga, no timeout, no break), which `decide` may then take as final."""
    if state.finished:
        return [], [], False
    if state.compensation is not None:
        return (
            *saga.compensate(
                definition, state, now, in_flight, limits.max_recoveries, limits.costs
            ),
            False,
        )
    if state.timed_out:
        timeout_events, timeout_runs = saga.timeout(definition, state, now)
        if timeout_events:
            return timeout_events, timeout_runs, False
    index = activity_index(state)
    if definition.failure is not None or (
        index.failed and any(uncaught_failure(act, state) for act in definition.activities)
    ):
        return *saga.failing(definition, state, now, in_flight), False
    events: list[Event] = []
    runs: list[RunActivity] = []
    ctx = LazyContext(state)
    whole = True
    for act in _candidates(definition, state, index):
        a = state.activity(act.id)
        ev_a, run_a = _advance(definition, act, a, state, ctx, now, in_flight, limits)
        if limits.deferred and run_a and a.items is None and run_a[0].key in limits.deferred:
            continue  # its events only start it (a map's items are deferred one by one)
        if ev_a:
            events.extend(ev_a)
            if any(e.type in _SETTLING for e in ev_a):
                runs.extend(run_a)
                whole = False
                break  # the context changed: re-evaluate on the next pass
        runs.extend(run_a)
        if limits.costs.exhausted and (events or runs):
            whole = False
            break  # the rest on a later pass (or call)
    if events or runs:
        return events, runs, whole
    if not definition.completion_held and _all_done(definition, state, index):
        return _complete(definition, state, ctx(), now, limits.costs), [], False
    return [], [], False


def _only_started(events: list[Event]) -> bool:
    """The events (as admitted) only schedule and start plain attempts: no activity settled,
    began a wait, a map or a child, no timer moved. After a whole pass of such events the
    next pass finds nothing: no need closed (so no activity became ready), each activity
    started is running and in flight, and every other candidate sees the state it was
    decided on (the events touched only the activities they start)."""
    for event in events:
        if event.type == EventType.ACTIVITY_STARTED:
            continue
        if event.type != EventType.ACTIVITY_SCHEDULED or any(k in event.data for k in _NOT_PLAIN):
            return False
    return True


# what makes an `ActivityScheduled` more than the start of one plain attempt
_NOT_PLAIN = ("wait", "items", "kind")


def _all_done(definition: Workflow, state: ExecutionState, index: ActivityIndex) -> bool:
    """`_done` for every activity, asking the index first: one open activity (the common
    case while an execution runs) answers no at once."""
    acts = state.activities
    if any(aid in acts and _in(definition, aid) for aid in index.open):
        return False
    return all(_done(act, state) for act in definition.activities)


def _in(definition: Workflow, activity_id: str) -> bool:
    try:
        definition.activity(activity_id)
    except KeyError:
        return False
    return True


@dataclass(frozen=True, eq=False)
class _Plan:
    """What the decider reads of a definition's graph, made once per definition."""

    by_id: dict[str, Activity]
    position: dict[str, int]
    dependents: dict[str, tuple[str, ...]]


_PLANS: dict[int, tuple[weakref.ref[Workflow], list[Activity], _Plan]] = {}


def _plan(definition: Workflow) -> _Plan:
    entry = _PLANS.get(id(definition))
    if entry is None or entry[0]() is not definition or entry[1] is not definition.activities:
        by_id: dict[str, Activity] = {}
        dependents: dict[str, list[str]] = {}
        for act in definition.activities:
            by_id.setdefault(act.id, act)
            for need in act.needs:
                dependents.setdefault(need, []).append(act.id)
        plan = _Plan(
            by_id,
            {act.id: i for i, act in enumerate(definition.activities)},
            {k: tuple(v) for k, v in dependents.items()},
        )
        key = id(definition)
        ref = weakref.ref(definition, lambda _: _PLANS.pop(key, None))
        entry = _PLANS[key] = (ref, definition.activities, plan)
    return entry[2]


def _candidates(
    definition: Workflow, state: ExecutionState, index: ActivityIndex
) -> list[Activity]:
    """The activities a pass must look at, in definition order: the open ones, except a
    fresh one (pending, never scheduled) while one of its needs is still open, for which
    `_maybe_schedule` would do nothing. Settled and failed ones have nothing left to decide
    (the saga takes an uncaught failure). The fresh ones that are ready (the frontier) are
    kept on the index and brought up to date from the activities changed since (`touched`):
    a pass costs what is open and ready, not the size of the workflow."""
    plan = _plan(definition)
    acts, opened, fresh = state.activities, index.open, index.fresh

    def ready(aid: str) -> bool:
        return all(n in acts and n not in opened for n in plan.by_id[aid].needs)

    memo = index.frontier
    if memo is not None and memo[0] is plan:
        _, known, touched = memo
        if touched:
            look = set(known)
            for t in touched:
                look.add(t)
                look.update(plan.dependents.get(t, ()))
            known = frozenset(a for a in look if a in fresh and a in plan.by_id and ready(a))
            index.remember((plan, known, frozenset()))
        else:  # (checked again: cheap, and exact even if a closed need ever reopened)
            known = frozenset(a for a in known if a in fresh and ready(a))
    elif len(plan.by_id) == len(definition.activities) and all(a in acts for a in plan.by_id):
        known = frozenset(a for a in fresh if a in plan.by_id and ready(a))
        index.remember((plan, known, frozenset()))
    else:  # (a definition activity the state lacks, or a repeated id: look at every one)
        return [
            act
            for act in definition.activities
            if act.id not in acts
            or (act.id in opened and not (act.id in fresh and not ready(act.id)))
        ]
    ids = [a for a in opened - fresh if a in plan.by_id]  # (a set difference, in C)
    ids.extend(known)
    ids.sort(key=plan.position.__getitem__)
    return [plan.by_id[a] for a in ids]


def uncaught_failure(act: Activity, state: ExecutionState) -> bool:
    """The activity failed for good and its failure fails the workflow."""
    return state.activity(act.id).status == ActivityStatus.FAILED and not act.continues


def _done(act: Activity, state: ExecutionState) -> bool:
    """Finished in a way that lets its dependents run: completed, skipped (compensated
    later), or failed with `on_failure: continue`."""
    status = state.activity(act.id).status
    return status in ActivityStatus.DONE_OK or (status == ActivityStatus.FAILED and act.continues)


_SETTLING = frozenset(
    {EventType.ACTIVITY_COMPLETED, EventType.ACTIVITY_SKIPPED, EventType.ACTIVITY_FAILED}
)


def _advance(
    definition: Workflow,
    act: Activity,
    a: ActivityState,
    state: ExecutionState,
    ctx: LazyContext,
    now: datetime,
    in_flight: frozenset[str],
    limits: _Limits,
) -> tuple[list[Event], list[RunActivity]]:
    if a.status == ActivityStatus.PENDING and a.started_at is None:
        events, runs = _maybe_schedule(definition, act, state, ctx, now, limits)
        return _tagged(definition, act, events), runs
    if a.items is not None:
        if a.status == ActivityStatus.RUNNING:
            return items.advance_items(
                act,
                a,
                ctx,
                now,
                in_flight,
                state.timers,
                limits.max_recoveries,
                limits.deferred,
                limits.costs,
            )
        return [], []
    if _child_done(a.child_result, a.status, a.attempt):
        return outcome_events_for_child(act, a, state, now), []
    if a.status == ActivityStatus.WAITING:
        if a.wait is not None and a.wait.get("kind") == "repeat":
            return _next_iteration(act, a, state, ctx, now, limits.costs)
        if a.wait is not None and a.wait.get("suspended"):
            return _resume(act, a, state, now)
        return _check_wait(act, a, state, now), []
    if a.status == ActivityStatus.RUNNING and act.id not in in_flight:
        return _recover_lost_attempt(act, a, now, state.id, limits.max_recoveries)
    if a.status == ActivityStatus.RETRYING and retry_due(a.next_attempt_at, a.timer_fired, now):
        return _next_attempt(act, a.attempt + 1, a.input, now, state.id, it=a.iterations + 1)
    return [], []


def _next_iteration(
    act: Activity,
    a: ActivityState,
    state: ExecutionState,
    lazy: LazyContext,
    now: datetime,
    costs: Costs,
) -> tuple[list[Event], list[RunActivity]]:
    """The next iteration of a `repeat` activity, once its timer fired (or at once)."""
    if not retry_due(a.next_attempt_at, a.timer_fired, now):
        return [], []
    n = a.iterations + 1
    ctx = {**lazy(), "iteration": n}
    where = f"activity '{act.id}' field {act.kind}"
    try:
        rendered = render(spec_of(act), ctx, where=where, costs=costs)
    except Exception as exc:  # expression errors fail the activity, never the engine
        err = _error("ExpressionError", str(exc))
        return [ActivityFailed.final(act.id, a.attempt, err).at(now)], []
    started = IterationStarted(activity=act.id, iteration=n, input=rendered).at(now)
    if act.kind_entry.settle == "value":  # settled here: the rendered spec is the output
        after = apply(state, started)
        return [started, *_iteration_end(act, after, 1, rendered, now, costs)], []
    events, runs = _next_attempt(act, 1, rendered, now, state.id, it=n)
    return [started, *events], runs


APPROVAL_TIMEOUT = "approval-timeout"  # the suffix of a suspended attempt's timeout timer


def _suspend_events(
    act: Activity, attempt: int, asked: dict[str, Any], now: datetime
) -> list[Event]:
    """The attempt pauses for an approval; `asked["timeout"]` (seconds), when given, arms a
    durable timer at whose fire the approval counts as denied (`timed_out`)."""
    wait = {k: v for k, v in asked.items() if k != "timeout"}
    wait["kind"] = "children" if "children" in asked else "approval"
    timeout = asked.get("timeout")
    events: list[Event] = []
    if isinstance(timeout, int | float) and not isinstance(timeout, bool):
        timeout_at = (now + timedelta(seconds=float(timeout))).isoformat()
        wait["timeout_at"] = timeout_at
        timer = f"{act.id}:{APPROVAL_TIMEOUT}"
        armed = TimerArmed(
            timer=timer, activity=act.id, purpose="approval_timeout", fire_at=timeout_at
        )
        events.append(armed.at(now))
    suspended = ActivitySuspended(activity=act.id, attempt=attempt, wait=wait).at(now)
    return [suspended, *events]


def _resume(
    act: Activity, a: ActivityState, state: ExecutionState, now: datetime
) -> tuple[list[Event], list[RunActivity]]:
    """A suspended attempt runs again (the same attempt) once its approval is decided, or
    its timeout fired (then as denied, `timed_out: true`, by nobody)."""
    if (a.wait or {}).get("kind") == "children":
        return _children_done(act, a, now)
    decision = state.approvals.get(act.id)
    timer = f"{act.id}:{APPROVAL_TIMEOUT}"
    if decision is None and not (a.timer_fired and timer not in state.timers):
        return [], []
    asked = {
        k: v for k, v in (a.wait or {}).items() if k not in ("kind", "suspended", "timeout_at")
    }
    events: list[Event] = []
    if decision is None:
        decided: dict[str, Any] = {
            **asked,
            "approved": False,
            "by": None,
            "comment": "no decision before the approval timeout",
            "timed_out": True,
        }
    else:
        decided = {
            **asked,
            "approved": bool(decision.get("approved")),
            "by": decision.get("by"),
            "comment": decision.get("comment"),
        }
        if decision.get("grant"):
            decided["grant"] = decision["grant"]
        if timer in state.timers:
            events.append(TimerCancelled(timer=timer).at(now))
    resumed = ActivityResumed(activity=act.id, attempt=a.attempt, decision=decided)
    run = RunActivity(act.id, a.attempt, act.kind, a.input, iteration=a.iterations + 1)
    return [*events, resumed.at(now)], [run]


def _children_done(
    act: Activity, a: ActivityState, now: datetime
) -> tuple[list[Event], list[RunActivity]]:
    """A suspended attempt that waits for the child workflows of its tool calls runs again
    once each one's end is in its journal."""
    wait = a.wait or {}
    turn, children = wait.get("turn"), wait.get("children") or {}
    done = {
        s.get("call_id") for s in a.journal if s.get("step") == "tool" and s.get("turn") == turn
    }
    if not all(call_id in done for call_id in children):
        return [], []
    decision = {"turn": turn, "children": children}
    resumed = ActivityResumed(activity=act.id, attempt=a.attempt, decision=decision)
    run = RunActivity(act.id, a.attempt, act.kind, a.input, iteration=a.iterations + 1)
    return [resumed.at(now)], [run]


def _child_done(result: dict[str, Any] | None, status: str, attempt: int) -> bool:
    """A ChildFinished for the current attempt has arrived (maybe before ChildStarted)."""
    return (
        result is not None
        and status in (ActivityStatus.RUNNING, ActivityStatus.WAITING)
        and result.get("attempt", attempt) == attempt
    )


def outcome_events_for_child(
    act: Activity, a: ActivityState, state: ExecutionState, now: datetime
) -> list[Event]:
    """The attempt's result from its child's end (or its timeout's fire)."""
    assert a.child_result is not None
    cancel = cancel_child_timeout(act.id, None, a.attempt, state.timers, now)
    outcome = items.child_outcome(a.child_result, act.timeout)
    return [*cancel, *_result_events(act, a.attempt, outcome, now, state)]


def _tagged(definition: Workflow, act: Activity, events: list[Event]) -> list[Event]:
    """`events`, with the `ActivityScheduled` of a code workflow's step carrying what its
    history must say of it (no definition lists it: its kind, the call's line, ...)."""
    if definition.code is not None and events and events[0].type == EventType.ACTIVITY_SCHEDULED:
        code = {"kind": act.kind, **(definition.step_info(act.id) or {})}
        events[0] = replace(events[0], data={**events[0].data, **code})
    return events


def _maybe_schedule(
    definition: Workflow,
    act: Activity,
    state: ExecutionState,
    lazy: LazyContext,
    now: datetime,
    limits: _Limits,
) -> tuple[list[Event], list[RunActivity]]:
    needs: list[Activity] = []
    for need in act.needs:
        status = state.activity(need).status
        if status not in ActivityStatus.DONE_OK:
            if status != ActivityStatus.FAILED:
                return [], []
            needs.append(definition.activity(need))
    if needs and not all(n.continues for n in needs):  # pragma: no cover - saga took over
        return [], []
    ctx, costs = lazy(), limits.costs
    try:
        where = f"activity '{act.id}' field when"
        if not evaluate_condition(act.when, ctx, where=where, costs=costs):
            return [ActivitySkipped(activity=act.id, reason="condition is false").at(now)], []
        if act.for_each is not None:
            return items.schedule_items(act, ctx, now, limits.max_items, costs), []
        settle = act.kind_entry.settle
        if settle == "wait":
            return _begin_wait(act, state, now), []
        if act.repeat is not None:
            ctx = {**ctx, "iteration": 1}
        where = f"activity '{act.id}' field {act.kind}"
        rendered = render(spec_of(act), ctx, where=where, costs=costs)
        if settle == "value":  # settled here: the rendered spec is the output
            scheduled = ActivityScheduled(activity=act.id, input=None).at(now)
            if act.repeat is not None:
                after = apply(state, scheduled)
                return [scheduled, *_iteration_end(act, after, 1, rendered, now, costs)], []
            return [
                scheduled,
                ActivityCompleted(activity=act.id, attempt=1, output=rendered).at(now),
            ], []
    except Exception as exc:  # expression errors fail the activity, never the engine
        err = _error("ExpressionError", str(exc))
        return [
            ActivityScheduled(activity=act.id, input=None).at(now),
            ActivityFailed.final(act.id, 0, err).at(now),
        ], []
    events, runs = _next_attempt(act, 1, rendered, now, state.id)
    return [ActivityScheduled(activity=act.id, input=rendered).at(now), *events], runs


def _next_attempt(
    act: Activity,
    attempt: int,
    rendered: Any,
    now: datetime,
    execution_id: str,
    recovery: int | None = None,
    *,
    it: int = 1,
) -> tuple[list[Event], list[RunActivity]]:
    """Attempt `attempt` (of iteration `it` of a `repeat`: its idempotency key names it)."""
    name = act.id if it == 1 else f"{act.id}~{it}"
    key = f"{execution_id}/{name}/{attempt}"
    started = ActivityStarted(
        activity=act.id, attempt=attempt, key=key, recovery=or_absent(recovery)
    )
    return [started.at(now)], [RunActivity(act.id, attempt, act.kind, rendered, iteration=it)]


def _recover_lost_attempt(
    act: Activity, a: ActivityState, now: datetime, execution_id: str, budget: int
) -> tuple[list[Event], list[RunActivity]]:
    """The attempt was lost with its worker: run the same attempt again (same key), recorded
    first, unless the activity has used its recovery budget."""
    it = a.iterations + 1
    if act.kind_entry.repeat_lost:  # e.g. starting a child is idempotent: start (find) it again
        return [], [RunActivity(act.id, a.attempt, act.kind, a.input, iteration=it)]
    if a.recoveries >= budget:
        err = recovery_exhausted(f"activity {act.id}", a.attempt, budget)
        return [ActivityFailed.final(act.id, a.attempt, err).at(now)], []
    return _next_attempt(act, a.attempt, a.input, now, execution_id, a.recoveries + 1, it=it)


def _complete(
    definition: Workflow,
    state: ExecutionState,
    ctx: dict[str, Any],
    now: datetime,
    costs: Costs | None = None,
) -> list[Event]:
    cancel = [TimerCancelled(timer=t).at(now) for t in state.timers]
    try:
        output = render(definition.output, ctx, where="workflow field output", costs=costs)
    except Exception as exc:
        error = _error("ExpressionError", str(exc))
        return [*cancel, ExecutionFailed(error=error).at(now)]
    if definition.continue_as_new is not None and state.parent is None:
        try:
            continued = _continuation(definition, state, ctx, output)
        except Exception as exc:  # an expression or the next run's inputs failed
            error = _error("ContinueAsNewError", str(exc))
            return [*cancel, ExecutionFailed(error=error).at(now)]
        if continued is not None:
            if continue_held(state):  # (a quota or the chain's interval): its timer wakes it
                return []
            return [*cancel, continued.at(now)]
    return [*cancel, ExecutionCompleted(output=output).at(now)]


def _continuation(
    definition: Workflow, state: ExecutionState, ctx: dict[str, Any], output: Any
) -> ExecutionContinued | None:
    """`ExecutionContinued` when `continue_as_new.when` holds (`output` in scope): the next
    run's id (`wovyr.ids.continued_id`) and its inputs, this run's overlaid with the rendered
    `input` and checked as a start checks them (InputError when they do not fit)."""
    spec = definition.continue_as_new
    assert spec is not None
    scope = {**ctx, "output": output}
    if not evaluate_condition(spec.when, scope, where="workflow field continue_as_new.when"):
        return None
    given = render(spec.input, scope, where="workflow field continue_as_new.input")
    inputs = resolve_inputs(definition, {**state.input, **given})
    run = state.chain_run + 1
    return ExecutionContinued(
        output=output, input=inputs, continued_as=continued_id(state.chain_root, run), run=run
    )
