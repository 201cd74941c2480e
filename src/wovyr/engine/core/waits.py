"""The pure decider's part for waits: signals (buffered, consumed in order; the activity's
`timeout` fails a wait no signal came for), approvals (decided before or after they are
reached, with an optional timeout) and durable timers."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from wovyr.definition.model import Activity, WaitStep
from wovyr.engine.core.policy import error as _error
from wovyr.engine.core.shown import CONTINUE_HOLD
from wovyr.engine.core.state import ActivityState, ExecutionState
from wovyr.events import (
    ActivityCompleted,
    ActivityFailed,
    ActivityScheduled,
    Event,
    TimerArmed,
    TimerCancelled,
)

__all__ = ["begin_wait", "check_wait", "continue_held"]


def continue_held(state: ExecutionState) -> bool:
    """Whether the run's hand-over to its chain's next run is held (its timer pending)."""
    return any(info.get("purpose") == CONTINUE_HOLD for info in state.timers.values())


def begin_wait(act: Activity, state: ExecutionState, now: datetime) -> list[Event]:
    step = act.step_of(WaitStep)
    assert step is not None, f"activity {act.id} is not a wait"
    wait = step.wait
    events: list[Event] = []
    if wait.signal is not None:
        info: dict[str, Any] = {"kind": "signal", "name": wait.signal}
        if act.timeout is not None:  # the activity's `timeout`: no signal by then fails it
            events.append(_timeout(act.id, "signal", act.timeout, info, now))
    elif wait.timer is not None:
        fire_at = wait.timer.at or now + timedelta(seconds=wait.timer.after or 0)
        info = {"kind": "timer", "fire_at": fire_at.isoformat()}
        armed = TimerArmed(
            timer=f"{act.id}:timer", activity=act.id, purpose="wait", fire_at=fire_at.isoformat()
        )
        events.append(armed.at(now))
    else:
        approval = wait.approval
        assert approval is not None
        info = {"kind": "approval", "approvers": list(approval.approvers), "timeout_at": None}
        if approval.timeout is not None:
            events.append(_timeout(act.id, "approval", approval.timeout, info, now))
    return [ActivityScheduled(activity=act.id, input=None, wait=info).at(now), *events]


def _timeout(
    activity: str, kind: str, seconds: float, info: dict[str, Any], now: datetime
) -> Event:
    """The timer that ends a `kind` wait unanswered after `seconds` (its time noted in
    `info`, what the wait shows)."""
    timeout_at = info["timeout_at"] = (now + timedelta(seconds=seconds)).isoformat()
    armed = TimerArmed(
        timer=f"{activity}:{kind}-timeout",
        activity=activity,
        purpose=f"{kind}_timeout",
        fire_at=timeout_at,
    )
    return armed.at(now)


def check_wait(
    act: Activity, a: ActivityState, state: ExecutionState, now: datetime
) -> list[Event]:
    wait = a.wait or {}
    kind = wait.get("kind")
    cancel_timer = [
        TimerCancelled(timer=t).at(now)
        for t, info in state.timers.items()
        if info.get("activity") == act.id
    ]
    if kind == "signal":
        name = wait["name"]
        if state.signals.get(name):
            payload = state.signals[name][0]
            consumed = ActivityCompleted(activity=act.id, attempt=1, output=payload, signal=name)
            return [*cancel_timer, consumed.at(now)]
        if a.timer_fired:
            error = _error("SignalTimeout", f"no signal {name!r} before the wait's timeout")
            return [ActivityFailed.final(act.id, 1, error).at(now)]
        return []
    if kind == "timer":
        if a.timer_fired:
            output = {"fired": True, "fire_at": wait.get("fire_at")}
            return [ActivityCompleted(activity=act.id, attempt=1, output=output).at(now)]
        return []
    decision = state.approvals.get(act.id)
    if decision is not None:
        if decision["approved"]:
            return [
                *cancel_timer,
                ActivityCompleted(activity=act.id, attempt=1, output=decision).at(now),
            ]
        error = _error(
            "ApprovalRejected",
            f"rejected by {decision.get('by') or 'unknown'}",
            by=decision.get("by"),
            comment=decision.get("comment"),
        )
        return [*cancel_timer, ActivityFailed.final(act.id, 1, error).at(now)]
    if a.timer_fired:
        error = _error("ApprovalTimeout", "no decision before the approval timeout")
        return [ActivityFailed.final(act.id, 1, error).at(now)]
    return []
