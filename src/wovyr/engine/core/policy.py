"""Shared pieces of the pure decider: commands, outcomes, retry policy, event helpers."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from wovyr.definition.model import Activity, CompensateSpec, RetryPolicy
from wovyr.events import ActivityFailed, Event, ItemFailed, TimerArmed

__all__ = ["Outcome", "RunActivity", "error", "failure_events", "retry_policy", "spec_of"]


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
    activity_id: str,
    attempt: int,
    err: dict[str, Any],
    retryable: bool,
    policy: RetryPolicy,
    now: datetime,
    index: int | None = None,
) -> list[Event]:
    """ActivityFailed (or ItemFailed), and a retry timer when another attempt follows."""
    will_retry = (
        retryable and attempt < policy.max_attempts and err.get("type") not in policy.non_retryable
    )
    if not will_retry:
        if index is None:
            return [ActivityFailed.final(activity_id, attempt, err).at(now)]
        return [ItemFailed.final(activity_id, index, attempt, err).at(now)]
    fire_at = now + timedelta(seconds=policy.delay(attempt))
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
