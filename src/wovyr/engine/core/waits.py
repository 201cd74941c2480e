"""The pure decider's part for waits: signals (buffered, consumed in order), approvals
(decided before or after they are reached, with an optional timeout) and durable timers."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from wovyr.definition.model import Activity, WaitStep
from wovyr.engine.core.policy import error as _error
from wovyr.engine.core.state import (
    ActivityState,
    ActivityStatus,
    ExecutionState,
    ExecutionStatus,
    activity_index,
)
from wovyr.events import (
    ActivityCompleted,
    ActivityFailed,
    ActivityScheduled,
    Event,
    TimerArmed,
    TimerCancelled,
)

__all__ = [
    "CONTINUE_HOLD",
    "FLOW_HOLD",
    "QUOTA_HOLD",
    "begin_wait",
    "check_wait",
    "continue_held",
    "shown_status",
    "waiting_on",
]

QUOTA_HOLD = "quota"  # the purpose of a timer that holds an execution's next attempts
FLOW_HOLD = "flow"  # ... until a rate limit has units or a concurrency key a free slot
# ... that holds a continue-as-new hand-over: until the tenant's executions-per-day quota
# has room again, or the chain's minimum interval between runs has passed
CONTINUE_HOLD = "continue"
_HOLDS = (QUOTA_HOLD, FLOW_HOLD, CONTINUE_HOLD)


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
            timeout_at = (now + timedelta(seconds=approval.timeout)).isoformat()
            info["timeout_at"] = timeout_at
            armed = TimerArmed(
                timer=f"{act.id}:approval-timeout",
                activity=act.id,
                purpose="approval_timeout",
                fire_at=timeout_at,
            )
            events.append(armed.at(now))
    return [ActivityScheduled(activity=act.id, input=None, wait=info).at(now), *events]


def check_wait(
    act: Activity, a: ActivityState, state: ExecutionState, now: datetime
) -> list[Event]:
    wait = a.wait or {}
    kind = wait.get("kind")
    if kind == "signal":
        name = wait["name"]
        if state.signals.get(name):
            payload = state.signals[name][0]
            consumed = ActivityCompleted(activity=act.id, attempt=1, output=payload, signal=name)
            return [consumed.at(now)]
        return []
    if kind == "timer":
        if a.timer_fired:
            output = {"fired": True, "fire_at": wait.get("fire_at")}
            return [ActivityCompleted(activity=act.id, attempt=1, output=output).at(now)]
        return []
    decision = state.approvals.get(act.id)
    cancel_timer = [
        TimerCancelled(timer=t).at(now)
        for t, info in state.timers.items()
        if info.get("activity") == act.id
    ]
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


def waiting_on(state: ExecutionState) -> str | None:
    """What a running execution waits for, in words, while it runs nothing of its own:
    `signal go`, `approval approve`, `timer wait fires 2030-01-01T09:00:00+00:00`,
    `retry charge attempt 2 at ...`, `child <id>`, `children 2/6 done` (a map over child
    workflows), `items 3/10 done` (a for_each whose items wait for their back-offs), `quota:
    activity seconds for tenant T exhausted until 2030-01-02 00:00 UTC` (a quota hold),
    `rate limit openai: next slot in 3.2 s` or `concurrency k: 2 running (...)` (a flow hold),
    `continue-as-new: ...` (the hand-over to the chain's next run, held).

    None when it is finished, compensating, or runs an activity (or a map item) itself: it
    is then `running`, not `waiting` (see `shown_status`), whatever else it also waits for.
    """
    if state.finished or state.compensation is not None:
        return None
    parts: list[str] = []
    active = activity_index(state).active  # (only these can add a part)
    if len(active) > 1:  # in the activities' order
        ordered: Iterable[str] = [aid for aid in state.activities if aid in active]
    else:
        ordered = active
    for aid in ordered:
        act = state.activities[aid]
        if act.status == ActivityStatus.RUNNING:
            if act.items is None or any(i["status"] == ActivityStatus.RUNNING for i in act.items):
                return None
            parts.extend(_items_text(aid, act.items))
        elif act.status == ActivityStatus.WAITING and act.wait:
            parts.append(_wait_text(aid, act.wait))
        elif act.status == ActivityStatus.RETRYING:
            parts.append(f"retry {aid} attempt {act.attempt + 1} at {act.next_attempt_at}")
    parts.extend(
        str(info.get("reason") or f"quota until {info['fire_at']}")
        for info in state.timers.values()
        if info.get("purpose") in _HOLDS
    )
    return "; ".join(parts) or None


def shown_status(state: ExecutionState) -> str:
    """The status every reader shows: `waiting` for a running execution that waits (it has a
    `waiting_on` text), `compensating` while it undoes completed work, else its own status.
    The stores keep `running` for the first two (with `waiting_on` set for a waiting one,
    which is how a list tells `waiting` from `running`)."""
    if state.status != ExecutionStatus.RUNNING:
        return state.status
    if state.compensation is not None:
        return "compensating"
    return "waiting" if waiting_on(state) else state.status


def _items_text(activity_id: str, items: tuple[dict[str, Any], ...]) -> list[str]:
    """A for_each that runs none of its items: how far it is, and its next item retry."""
    done = sum(1 for i in items if i["status"] == ActivityStatus.COMPLETED)
    what = "children" if any(i.get("child") for i in items) else "items"
    parts = [f"{what} {done}/{len(items)} done"]
    retrying = [
        (str(item.get("next_attempt_at")), index, item)
        for index, item in enumerate(items)
        if item["status"] == ActivityStatus.RETRYING
    ]
    if retrying:
        at, index, item = min(retrying, key=lambda r: r[0])
        parts.append(f"retry {activity_id}[{index}] attempt {item.get('attempt', 0) + 1} at {at}")
    return parts


def _wait_text(activity_id: str, wait: dict[str, Any]) -> str:
    kind = wait.get("kind")
    if kind == "signal":
        return f"signal {wait.get('name')}"
    if kind == "timer":
        return f"timer {activity_id} fires {wait.get('fire_at')}"
    if kind == "child":
        return f"child {wait.get('id')}"
    if kind == "approval":
        return f"approval {activity_id}"
    if kind == "children":
        return f"tool workflows {', '.join(sorted((wait.get('children') or {}).values()))}"
    if kind == "repeat":
        at = wait.get("at")
        return f"repeat {activity_id} iteration {wait.get('iteration')}" + (
            f" at {at}" if at else ""
        )
    return f"{kind} {activity_id}"
