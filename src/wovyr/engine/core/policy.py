"""Shared pieces of the pure decider: commands, outcomes, retry policy, the recovery budget,
child timeouts, event helpers."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from wovyr.definition.model import Activity, CompensateSpec, RetryPolicy
from wovyr.events import ActivityFailed, Event, EventType, ItemFailed, TimerArmed, TimerCancelled

__all__ = [
    "MAX_RECOVERIES",
    "Outcome",
    "RunActivity",
    "arm_child_timeout",
    "cancel_child_timeout",
    "child_timeout_error",
    "children_to_cancel",
    "error",
    "failure_events",
    "recovery_exhausted",
    "retry_policy",
    "spec_of",
]

# Re-runs of attempts lost with their worker, per activity (per item, per compensation),
# before it fails with RecoveryBudgetExhausted (Engine(max_recoveries=...) changes it).
MAX_RECOVERIES = 20


@dataclass(frozen=True)
class RunActivity:
    """Run one attempt of an activity, of one of its items, or of its compensation, once the
    events that record it are durable."""

    activity_id: str
    attempt: int
    kind: str
    input: Any
    compensation: bool = False
    index: int | None = None
    iteration: int = 1  # of a `repeat` activity (its attempts count from 1 in each)

    @property
    def key(self) -> str:
        base = self.activity_id if self.index is None else f"{self.activity_id}[{self.index}]"
        return f"{base}/compensate" if self.compensation else base


@dataclass(frozen=True)
class Outcome:
    """What one attempt produced: an output, an error {type, message, details}, or the id of
    the child workflow it started."""

    output: Any = None
    error: dict[str, Any] | None = None
    retryable: bool = True
    child: str | None = None
    retry_after: float | None = None  # the delay the server asked for (429 `Retry-After`)
    suspend: dict[str, Any] | None = None  # the attempt waits for an approval (`wait` info)
    logs: list[dict[str, Any]] | None = None  # the attempt's log lines (`ctx.log`, logging)
    model_calls: list[dict[str, Any]] | None = None  # its model calls (an `llm` step's)


def retry_policy(activity: Activity | CompensateSpec) -> RetryPolicy:
    """The activity's `retry`, or its kind's default."""
    return activity.effective_retry


def spec_of(act: Activity | CompensateSpec) -> Any:
    """The part of an activity that is rendered with expressions before it runs (the
    kind's spec builder)."""
    return act.kind_entry.spec(act.step)


def error(kind: str, message: str, **details: Any) -> dict[str, Any]:
    err: dict[str, Any] = {"type": kind, "message": message}
    if details:
        err["details"] = details
    return err


def failure_events(
    act: Activity, attempt: int, outcome: Outcome, now: datetime, index: int | None = None
) -> list[Event]:
    """For the failed `outcome` of an attempt of `act` (of its item `index`): ActivityFailed
    (or ItemFailed), and a retry timer when another attempt follows under the activity's
    retry policy: after its back-off, or after the outcome's `retry_after` seconds when the
    failure asked for them (a provider's 429 `Retry-After` is honoured as it is)."""
    activity_id, err, policy = act.id, outcome.error, retry_policy(act)
    assert err is not None, "failure_events is for a failed outcome"
    retryable, retry_after = outcome.retryable, outcome.retry_after
    will_retry = (
        retryable and attempt < policy.max_attempts and err.get("type") not in policy.non_retryable
    )
    if not will_retry:
        if index is None:
            return [ActivityFailed.final(activity_id, attempt, err).at(now)]
        return [ItemFailed.final(activity_id, index, attempt, err).at(now)]
    delay = policy.delay(attempt) if retry_after is None else max(0.0, retry_after)
    fire_at = now + timedelta(seconds=delay)
    next_at = fire_at.isoformat()
    failed = (
        ActivityFailed.retrying(activity_id, attempt, err, next_at)
        if index is None
        else ItemFailed.retrying(activity_id, index, attempt, err, next_at)
    )
    events = [failed.at(now)]
    if fire_at > now:
        name = activity_id if index is None else f"{activity_id}[{index}]"
        # a retry timer always writes `item`, null when it retries the whole activity
        armed = TimerArmed(
            timer=f"{name}:retry:{attempt}",
            activity=activity_id,
            item=index,
            purpose="retry",
            fire_at=next_at,
        )
        events.append(armed.at(now))
    return events


def retry_due(next_attempt_at: str | None, timer_fired: bool, now: datetime) -> bool:
    if timer_fired or next_attempt_at is None:
        return True
    return datetime.fromisoformat(next_attempt_at) <= now


def recovery_exhausted(what: str, attempt: int, budget: int) -> dict[str, Any]:
    """The error of an activity (item, compensation) whose attempt was lost once more with
    its worker after `budget` re-runs: most likely it kills the process that runs it."""
    lost = budget + 1
    return error(
        "RecoveryBudgetExhausted",
        f"{what} lost its worker {lost} times (attempt {attempt}); the recovery budget "
        f"(max_recoveries) is {budget} re-runs: does it crash or exhaust the worker process?",
        lost=lost,
        max_recoveries=budget,
    )


# --- child workflow timeouts -----------------------------------------------------------


def _child_timer(activity_id: str, index: int | None, attempt: int) -> str:
    name = activity_id if index is None else f"{activity_id}[{index}]"
    return f"{name}:child-timeout:{attempt}"


def arm_child_timeout(act: Activity, index: int | None, attempt: int, now: datetime) -> list[Event]:
    """The durable timer bounding the child an attempt just started (none without a
    `timeout`). Its fire stands for the child's end, `timed_out` (see the state's fold)."""
    if not act.timeout:
        return []
    fire_at = (now + timedelta(seconds=act.timeout)).isoformat()
    armed = TimerArmed(
        timer=_child_timer(act.id, index, attempt),
        activity=act.id,
        item=index,
        attempt=attempt,
        purpose="child_timeout",
        fire_at=fire_at,
    )
    return [armed.at(now)]


def cancel_child_timeout(
    activity_id: str,
    index: int | None,
    attempt: int,
    timers: Mapping[str, Any],
    now: datetime,
) -> list[Event]:
    """The child ended first: its timeout timer, if one is armed, is cancelled."""
    timer = _child_timer(activity_id, index, attempt)
    return [TimerCancelled(timer=timer).at(now)] if timer in timers else []


def child_timeout_error(child: str | None, timeout: float | None) -> dict[str, Any]:
    return error(
        "Timeout",
        f"child workflow {child} did not finish within {timeout}s; it is cancelled",
        child=child,
        timeout=timeout,
    )


def children_to_cancel(events: Iterable[Event]) -> list[str]:
    """The child workflows whose attempts these events fail for a timeout: the commit that
    records those failures also cancels these children (in the same transaction)."""
    found = []
    for event in events:
        if event.type not in (EventType.ACTIVITY_FAILED, EventType.ITEM_FAILED):
            continue
        err = event.data.get("error") or {}
        child = (err.get("details") or {}).get("child")
        if err.get("type") == "Timeout" and child:
            found.append(child)
    return found
