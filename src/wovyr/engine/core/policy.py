"""Shared pieces of the pure decider: commands, outcomes, retry policy, event helpers."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from wovyr.definition.model import Activity, CompensateSpec, RetryPolicy
from wovyr.events import Event, EventType

__all__ = ["Outcome", "RunActivity", "error", "ev", "failure_events", "retry_policy", "spec_of"]


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


def ev(kind: str, now: datetime, **data: Any) -> Event:
    return Event(kind, now, data)


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
    kind = EventType.ACTIVITY_FAILED if index is None else EventType.ITEM_FAILED
    where: dict[str, Any] = {"activity": activity_id}
    if index is not None:
        where["index"] = index
    if not will_retry:
        return [
            ev(
                kind,
                now,
                **where,
                attempt=attempt,
                error=err,
                will_retry=False,
                next_attempt_at=None,
            )
        ]
    fire_at = now + timedelta(seconds=policy.delay(attempt))
    events = [
        ev(
            kind,
            now,
            **where,
            attempt=attempt,
            error=err,
            will_retry=True,
            next_attempt_at=fire_at.isoformat(),
        )
    ]
    if fire_at > now:
        name = activity_id if index is None else f"{activity_id}[{index}]"
        events.append(
            ev(
                EventType.TIMER_ARMED,
                now,
                timer=f"{name}:retry:{attempt}",
                activity=activity_id,
                item=index,
                purpose="retry",
                fire_at=fire_at.isoformat(),
            )
        )
    return events


def retry_due(next_attempt_at: str | None, timer_fired: bool, now: datetime) -> bool:
    if timer_fired or next_attempt_at is None:
        return True
    return datetime.fromisoformat(next_attempt_at) <= now
