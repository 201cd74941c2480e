"""The pure decider's part for `for_each` activities: items run as sub-steps, at most
`max_concurrency` at a time, each with the activity's retry policy; results are collected in
order. An item that fails for good stops new items; once none is in flight the activity
fails (and compensation later covers the completed items). An item's attempt lost with its
worker runs again as the same attempt (`ItemStarted` with `recovery: n`), within the
item's recovery budget."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from wovyr.definition.expr import MAX_ITEMS_WORK, Costs, items_work, render
from wovyr.definition.model import Activity
from wovyr.engine.core.policy import (
    Outcome,
    RunActivity,
    arm_child_timeout,
    cancel_child_timeout,
    child_timeout_error,
    error,
    failure_events,
    recovery_exhausted,
    retry_due,
    spec_of,
)
from wovyr.engine.core.state import ActivityState, ActivityStatus
from wovyr.events import (
    ActivityCompleted,
    ActivityFailed,
    ActivityScheduled,
    ChildStarted,
    Event,
    ItemCompleted,
    ItemFailed,
    ItemStarted,
)
from wovyr.statuses import ChildStatus

__all__ = ["advance_items", "child_outcome", "item_outcome_events", "schedule_items"]

_BUSY = frozenset({ActivityStatus.RUNNING, ActivityStatus.WAITING, ActivityStatus.RETRYING})
_LIVE = _BUSY  # the item statuses `_advance_item` acts on (running, waiting, retrying)


def schedule_items(
    act: Activity,
    ctx: dict[str, Any],
    now: datetime,
    max_items: int,
    costs: Costs | None = None,
) -> list[Event]:
    """ActivityScheduled with the item count, or the activity's failure when `for_each` does
    not yield a list (or yields more than `max_items`)."""
    where = f"activity '{act.id}' field for_each"
    scheduled = ActivityScheduled(activity=act.id, input=None).at(now)
    try:
        values = render(act.for_each, ctx, where=where, costs=costs)
    except Exception as exc:
        return [scheduled, _fail(act.id, error("ExpressionError", str(exc)), now)]
    if not isinstance(values, list):
        found = type(values).__name__ if values is not None else "null"
        return [
            scheduled,
            _fail(act.id, error("ForEachNotAList", f"{where} must yield a list, got {found}"), now),
        ]
    if len(values) > max_items:
        return [
            scheduled,
            _fail(
                act.id,
                error(
                    "ForEachTooLarge",
                    f"{where} yields {len(values)} items; the limit is {max_items}",
                    limit=max_items,
                ),
                now,
            ),
        ]
    if not values:
        return [
            scheduled,
            ActivityCompleted(activity=act.id, attempt=1, output=[]).at(now),
        ]
    costs = Costs() if costs is None else costs
    try:  # (an expression that does not compile fails its item, as it did)
        work = items_work(spec_of(act), ctx, len(values), costs)
    except Exception:
        work = 0
    if work > MAX_ITEMS_WORK:
        mib = 1_048_576
        message = (
            f"the expressions of the {len(values)} items of activity {act.id!r} would convert "
            f"about {work // mib} MiB of data (each item reads about "
            f"{work // len(values) // 1024} KiB besides its own); the limit is "
            f"{MAX_ITEMS_WORK // mib} MiB"
        )
        err = error(
            "ForEachTooExpensive",
            message,
            limit=MAX_ITEMS_WORK,
            hint="have `for_each` yield what each item needs (read `item`, not "
            "`inputs.list[index]`), or read the large value once in another activity",
        )
        return [scheduled, _fail(act.id, err, now)]
    return [ActivityScheduled(activity=act.id, input=values, items=len(values)).at(now)]


def _fail(activity_id: str, err: dict[str, Any], now: datetime) -> Event:
    return ActivityFailed.final(activity_id, 0, err).at(now)


def advance_items(
    act: Activity,
    a: ActivityState,
    ctx: Callable[[], dict[str, Any]],
    now: datetime,
    in_flight: frozenset[str],
    timers: Mapping[str, Any],
    max_recoveries: int,
    deferred: frozenset[str] = frozenset(),
    costs: Costs | None = None,
) -> tuple[list[Event], list[RunActivity]]:
    """The events and attempts that move the map on: its items' retries and recoveries,
    then (none of them pending work) its end, or the start of pending items; none for an
    item whose attempt is `deferred` (flow control holds it: see `decide`). `costs`: the
    decision's; once exhausted, no further item is started in this call."""
    items = a.items or ()
    events: list[Event] = []
    runs: list[RunActivity] = []
    held = False
    for i, item in enumerate(items):
        if item["status"] not in _LIVE:
            continue  # nothing to do for it here (a map's items are mostly done or pending)
        ev_i, run = _advance_item(act, i, item, now, in_flight, timers, max_recoveries)
        if deferred and run and run[0].key in deferred:
            held = True  # its events only start it
            continue
        events.extend(ev_i)
        runs.extend(run)
    if events or runs or held:
        return events, runs
    busy = sum(1 for item in items if item["status"] in _BUSY)
    failed = [i for i, item in enumerate(items) if item["status"] == ActivityStatus.FAILED]
    if failed:
        if busy:
            return [], []
        first = failed[0]
        err = error(
            "ItemFailed",
            f"item {first} of {act.id} failed",
            index=first,
            error=items[first].get("error"),
        )
        outputs = [item.get("output") for item in items]
        # the failed activity keeps its completed items' outputs
        return [ActivityFailed.final(act.id, 0, err, output=outputs).at(now)], []
    if all(item["status"] == ActivityStatus.COMPLETED for item in items):
        outputs = [item.get("output") for item in items]
        return [ActivityCompleted(activity=act.id, attempt=1, output=outputs).at(now)], []
    return _start_pending(act, a, ctx, now, busy, deferred, Costs() if costs is None else costs)


def _advance_item(
    act: Activity,
    i: int,
    item: dict[str, Any],
    now: datetime,
    in_flight: frozenset[str],
    timers: Mapping[str, Any],
    max_recoveries: int,
) -> tuple[list[Event], list[RunActivity]]:
    status, attempt = item["status"], item.get("attempt", 0)
    key = f"{act.id}[{i}]"
    result = item.get("child_result")
    if (
        status in (ActivityStatus.RUNNING, ActivityStatus.WAITING)
        and result is not None
        and result.get("attempt", attempt) == attempt
    ):
        cancel = cancel_child_timeout(act.id, i, attempt, timers, now)
        outcome = child_outcome(result, act.timeout)
        return [*cancel, *item_outcome_events(act, i, attempt, outcome, now)], []
    if status == ActivityStatus.RUNNING and key not in in_flight:
        run = RunActivity(act.id, attempt, act.kind, item.get("input"), index=i)
        if act.kind_entry.repeat_lost:  # e.g. starting a child is idempotent: start it again
            return [], [run]
        recoveries = int(item.get("recoveries", 0))
        if recoveries >= max_recoveries:  # lost with its worker once too often
            err = recovery_exhausted(f"item {i} of {act.id}", attempt, max_recoveries)
            return [ItemFailed.final(act.id, i, attempt, err).at(now)], []
        again = ItemStarted(activity=act.id, index=i, attempt=attempt, recovery=recoveries + 1)
        return [again.at(now)], [run]  # the same attempt again
    if status == ActivityStatus.RETRYING and retry_due(
        item.get("next_attempt_at"), bool(item.get("timer_fired")), now
    ):
        return [ItemStarted(activity=act.id, index=i, attempt=attempt + 1).at(now)], [
            RunActivity(act.id, attempt + 1, act.kind, item.get("input"), index=i)
        ]
    return [], []


def _start_pending(
    act: Activity,
    a: ActivityState,
    lazy: Callable[[], dict[str, Any]],
    now: datetime,
    busy: int,
    deferred: frozenset[str],
    costs: Costs,
) -> tuple[list[Event], list[RunActivity]]:
    """Start pending items, up to `max_concurrency` busy, rendering each one's spec: the
    items' contexts share every value but `item` and `index`, which `costs` measures once;
    once `costs` is exhausted the rest wait for the next call (at least one item starts)."""
    limit = act.max_concurrency or len(a.items or ())
    values = a.input if isinstance(a.input, list) else []
    events: list[Event] = []
    runs: list[RunActivity] = []
    for i, item in enumerate(a.items or ()):
        if busy >= limit or (events and costs.exhausted):
            break
        if item["status"] != ActivityStatus.PENDING:
            continue
        if deferred and f"{act.id}[{i}]" in deferred:
            break  # held, and the items after it wait their turn
        item_ctx = {**lazy(), "item": values[i] if i < len(values) else None, "index": i}
        where = f"activity '{act.id}' item {i}"
        try:
            rendered = render(spec_of(act), item_ctx, where=where, costs=costs)
        except Exception as exc:
            err = error("ExpressionError", str(exc))
            events.append(ItemStarted(activity=act.id, index=i, attempt=1).at(now))
            events.append(ItemFailed.final(act.id, i, 1, err).at(now))
            continue
        events.append(ItemStarted(activity=act.id, index=i, attempt=1, input=rendered).at(now))
        if act.kind_entry.settle == "value":  # settled here: the rendered spec is the output
            completed = ItemCompleted(activity=act.id, index=i, attempt=1, output=rendered)
            events.append(completed.at(now))
            continue
        runs.append(RunActivity(act.id, 1, act.kind, rendered, index=i))
        busy += 1
    return events, runs


def child_outcome(result: dict[str, Any], timeout: float | None = None) -> Outcome:
    """The outcome of a child workflow attempt from its ChildFinished data (or from the
    fire of its timeout, status `timed_out`: the child is cancelled with that commit)."""
    if result.get("status") == ChildStatus.COMPLETED:
        return Outcome(output=result.get("output"))
    if result.get("status") == ChildStatus.TIMED_OUT:
        return Outcome(error=child_timeout_error(result.get("child"), timeout))
    err = result.get("error") or {}
    return Outcome(
        error=error(
            "ChildFailed",
            f"child workflow {result.get('child')} {result.get('status')}",
            child=result.get("child"),
            error=err,
        ),
        retryable=result.get("status") == ChildStatus.FAILED,
    )


def item_outcome_events(
    act: Activity, index: int, attempt: int, outcome: Outcome, now: datetime
) -> list[Event]:
    if outcome.child is not None:
        started = ChildStarted(activity=act.id, index=index, attempt=attempt, child=outcome.child)
        return [started.at(now), *arm_child_timeout(act, index, attempt, now)]
    if outcome.error is None:
        completed = ItemCompleted(
            activity=act.id, index=index, attempt=attempt, output=outcome.output
        )
        return [completed.at(now)]
    return failure_events(act, attempt, outcome, now, index)
