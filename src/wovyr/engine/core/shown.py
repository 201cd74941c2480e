"""What a reader is shown of an execution's state, in words: the status every reader shows
(`shown_status`) and what a running execution waits for (`waiting_on`). Read from the state
alone (no definition), so that views and lists need no workflow language."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from wovyr.engine.core.state import ActivityStatus, ExecutionState, ExecutionStatus, activity_index

__all__ = ["CONTINUE_HOLD", "FLOW_HOLD", "QUOTA_HOLD", "shown_status", "waiting_on"]

QUOTA_HOLD = "quota"  # the purpose of a timer that holds an execution's next attempts
FLOW_HOLD = "flow"  # ... until a rate limit has units or a concurrency key a free slot
# ... that holds a continue-as-new hand-over: until the tenant's executions-per-day quota
# has room again, or the chain's minimum interval between runs has passed
CONTINUE_HOLD = "continue"
_HOLDS = (QUOTA_HOLD, FLOW_HOLD, CONTINUE_HOLD)


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
