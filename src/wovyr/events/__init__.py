"""Event records: the durable truth of an execution.

An execution's state is `fold(apply, events)` (see `engine/core/state.py`). A stored
`Event` has a `type`, the time `at` at which the engine recorded it (from the injected
clock) and a JSON `data` mapping.

The typed records are the schema of `data`: one frozen class per event type, whose
fields are the keys of `data` in the order they are written. Build one with keywords and
turn it into the stored event with `.at(now)`; read one back with `Cls.parse(event)` or
`typed(event)`. The stored JSON is the compatibility contract (old logs must keep folding,
see `tests/unit/engine/test_old_logs.py`), so a key that is written only sometimes has the
default `ABSENT` and is then left out of `data`, which is not the same as an explicit null.

The events that end an attempt (`ActivityCompleted`, `ActivityFailed`, `ItemCompleted`,
`ItemFailed`, `IterationCompleted`, and the compensation's) carry `logs` only when the
attempt logged something: its lines, `{at, level, logger, message}`, scrubbed and capped;
and `model_calls` only when the attempt called models outside an agent's journal (an `llm`
step): each call's `{provider, model, input_tokens, output_tokens, cached_tokens?, cost,
latency, error?}` (latency in seconds, cost in the provider's prices or null), what the
metrics count and `wovyr workflows show` lists.

Compensation events and `ChildStarted` carry an ``index`` only when they concern one item of
a `for_each` activity; `ChildFinished` always carries it (null for a single child).

The typed records live in `wovyr.events.records` and are imported from here: they load
when one of them is first asked for (`from wovyr.events import ActivityStarted`). A command
that only reads stored events (`wovyr workflows show|list|history`) needs `Event` and
`EventType` alone, and building the records' 34 classes was about 14% of such a read.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, TypeVar

if TYPE_CHECKING:
    from wovyr.events.records import (
        ActivityCompensated,
        ActivityCompleted,
        ActivityFailed,
        ActivityResumed,
        ActivityReused,
        ActivityScheduled,
        ActivitySkipped,
        ActivityStarted,
        ActivitySuspended,
        ApprovalDecided,
        ChildFinished,
        ChildStarted,
        CompensationAttemptFailed,
        CompensationFailed,
        CompensationStarted,
        CompensationStepStarted,
        EventData,
        ExecutionCancelled,
        ExecutionCompleted,
        ExecutionContinued,
        ExecutionFailed,
        ExecutionStarted,
        ItemCompleted,
        ItemFailed,
        ItemStarted,
        IterationCompleted,
        IterationStarted,
        ModelCallCompleted,
        SignalReceived,
        TimerArmed,
        TimerCancelled,
        TimerFired,
        ToolCallCompleted,
        typed,
    )

__all__ = [
    "ABSENT",
    "Absent",
    "ActivityCompensated",
    "ActivityCompleted",
    "ActivityFailed",
    "ActivityResumed",
    "ActivityReused",
    "ActivityScheduled",
    "ActivitySkipped",
    "ActivityStarted",
    "ActivitySuspended",
    "ApprovalDecided",
    "ChildFinished",
    "ChildStarted",
    "CompensationAttemptFailed",
    "CompensationFailed",
    "CompensationStarted",
    "CompensationStepStarted",
    "Event",
    "EventData",
    "EventType",
    "ExecutionCancelled",
    "ExecutionCompleted",
    "ExecutionContinued",
    "ExecutionFailed",
    "ExecutionStarted",
    "ItemCompleted",
    "ItemFailed",
    "ItemStarted",
    "IterationCompleted",
    "IterationStarted",
    "ModelCallCompleted",
    "SignalReceived",
    "TimerArmed",
    "TimerCancelled",
    "TimerFired",
    "ToolCallCompleted",
    "model_calls",
    "model_totals",
    "or_absent",
    "typed",
]


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
    ITERATION_STARTED = "IterationStarted"
    ITERATION_COMPLETED = "IterationCompleted"
    EXECUTION_CONTINUED = "ExecutionContinued"
    MODEL_CALL_COMPLETED = "ModelCallCompleted"
    TOOL_CALL_COMPLETED = "ToolCallCompleted"
    ACTIVITY_SUSPENDED = "ActivitySuspended"
    ACTIVITY_RESUMED = "ActivityResumed"
    ACTIVITY_REUSED = "ActivityReused"


@dataclass(frozen=True)
class Event:
    type: str
    at: datetime
    data: dict[str, Any] = field(default_factory=dict)

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)


class Absent(enum.Enum):
    """The value of a key that is not written (an explicit None is written as null)."""

    ABSENT = "ABSENT"

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Final = Absent.ABSENT


_T = TypeVar("_T")


def or_absent(value: _T | None) -> _T | Absent:
    """`value`, or ABSENT for None: for keys written only when they have a value."""
    return ABSENT if value is None else value


def model_calls(events: Iterable[tuple[str, Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """The model calls `events` (each `(type, data)`, in order) record, one dict each:
    `{activity, provider, model, input_tokens, output_tokens, cached_tokens, cost, latency}`
    with `turn` (an agent's call), `index` (a `for_each` item's), `iteration` (a `repeat`'s)
    and `error` (a call that failed) when they apply; `provider` and `latency` are None for
    a call recorded before they were kept, `cost` when its provider has no price."""
    out: list[dict[str, Any]] = []
    for kind, data in events:
        activity = data.get("activity")
        if kind == EventType.MODEL_CALL_COMPLETED:
            usage = data.get("usage") or {}
            out.append(
                {
                    "activity": activity,
                    "turn": data.get("turn"),
                    "provider": data.get("provider"),
                    "model": data.get("model"),
                    "input_tokens": int(usage.get("input_tokens") or 0),
                    "output_tokens": int(usage.get("output_tokens") or 0),
                    "cached_tokens": int(usage.get("cached_tokens") or 0),
                    "cost": data.get("cost"),
                    "latency": data.get("latency"),
                }
            )
            continue
        where = {k: data[k] for k in ("index", "iteration") if data.get(k) is not None}
        for call in data.get("model_calls") or ():
            entry = {"activity": activity, **where, "cached_tokens": 0, **call}
            out.append(entry)
    return out


def model_totals(calls: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """What `calls` (of `model_calls`) add up to: `{calls, input_tokens, output_tokens,
    cached_tokens, cost, latency}`; `cost` None when no call had a price."""
    calls = list(calls)
    costs = [c["cost"] for c in calls if isinstance(c.get("cost"), int | float)]
    return {
        "calls": len(calls),
        "input_tokens": sum(int(c.get("input_tokens") or 0) for c in calls),
        "output_tokens": sum(int(c.get("output_tokens") or 0) for c in calls),
        "cached_tokens": sum(int(c.get("cached_tokens") or 0) for c in calls),
        "cost": sum(costs) if costs else None,
        "latency": round(sum(float(c.get("latency") or 0.0) for c in calls), 6),
    }


def __getattr__(name: str) -> Any:
    if name in __all__:  # one of the typed records: load them all (they register themselves)
        from wovyr.events import records

        globals().update((n, getattr(records, n)) for n in records.__all__)
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
