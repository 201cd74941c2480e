"""Event records: the durable truth of an execution.

An execution's state is `fold(apply, events)` (see `state.py`). Each event has a `type`, the
time `at` which the engine recorded it (from the injected clock) and a JSON `data` mapping.

Types and their data:

- ``ExecutionStarted``  workflow, version, definition_hash, input, parent_id, timeout
- ``ExecutionCompleted`` output          ``ExecutionFailed`` error
- ``ExecutionCancelled`` reason, by
- ``ActivityScheduled`` activity, input (the rendered inputs, recorded once)
- ``ActivityStarted``   activity, attempt, key (the idempotency key of the attempt)
- ``ActivityCompleted`` activity, attempt, output, signal (the signal consumed, if any)
- ``ActivityFailed``    activity, attempt, error, will_retry, next_attempt_at
- ``ActivitySkipped``   activity, reason
- ``TimerArmed``        timer, activity, purpose, fire_at     ``TimerFired`` timer, fired_at
- ``TimerCancelled``    timer
- ``SignalReceived``    name, payload
- ``ApprovalDecided``   activity, approved, by, comment
- ``CompensationStarted`` activities (reverse completion order), reason
- ``CompensationStepStarted`` activity, attempt
- ``ActivityCompensated`` activity, output    ``CompensationFailed`` activity, error
- ``CompensationAttemptFailed`` activity, attempt, error (another attempt follows)
- ``ChildStarted``      activity, index, attempt, child (a child workflow now runs)
- ``ChildFinished``     activity, index, attempt, child, status, output, error (appended to
  the parent in the same transaction that finishes the child)
- ``ItemStarted`` / ``ItemCompleted`` / ``ItemFailed``: one item of a `for_each` activity
  (activity, index, attempt, and input / output / error, will_retry, next_attempt_at)

Compensation events carry an ``index`` when they undo one item of a `for_each` activity.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

__all__ = ["Event", "EventType"]


class EventType:
    EXECUTION_STARTED = "ExecutionStarted"
    EXECUTION_COMPLETED = "ExecutionCompleted"
    EXECUTION_FAILED = "ExecutionFailed"
    EXECUTION_CANCELLED = "ExecutionCancelled"
    ACTIVITY_SCHEDULED = "ActivityScheduled"
    ACTIVITY_STARTED = "ActivityStarted"
    ACTIVITY_COMPLETED = "ActivityCompleted"
    ACTIVITY_FAILED = "ActivityFailed"
    ACTIVITY_SKIPPED = "ActivitySkipped"
    TIMER_ARMED = "TimerArmed"
    TIMER_FIRED = "TimerFired"
    TIMER_CANCELLED = "TimerCancelled"
    SIGNAL_RECEIVED = "SignalReceived"
    APPROVAL_DECIDED = "ApprovalDecided"
    COMPENSATION_STARTED = "CompensationStarted"
    COMPENSATION_STEP_STARTED = "CompensationStepStarted"
    ACTIVITY_COMPENSATED = "ActivityCompensated"
    COMPENSATION_ATTEMPT_FAILED = "CompensationAttemptFailed"
    CHILD_STARTED = "ChildStarted"
    CHILD_FINISHED = "ChildFinished"
    ITEM_STARTED = "ItemStarted"
    ITEM_COMPLETED = "ItemCompleted"
    ITEM_FAILED = "ItemFailed"
    COMPENSATION_FAILED = "CompensationFailed"


@dataclass(frozen=True)
class Event:
    type: str
    at: datetime
    data: dict[str, Any] = field(default_factory=dict)

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)
