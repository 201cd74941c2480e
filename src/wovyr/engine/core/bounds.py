"""What a step may store: each value's size and depth, and the bytes of the whole execution.

Every value a step records - an activity's or an item's rendered input, an output (a `set`
step's, a tool's, a `for_each`'s aggregated outputs), an iteration's, the workflow's output,
the next run's input - is refused when it is nested deeper than `depth` levels
(`PayloadTooDeep`), larger than `value_bytes` as JSON (`PayloadTooLarge`), or would take
the execution's checkpoint past `execution_bytes` (`ExecutionTooLarge`): the value is not
recorded and its owner fails for good instead, with the error naming the limit and its
setting. So a chain of `set` steps cannot nest a value until no reader can show it, and a
`for_each` cannot write a hundred copies of its input.

`StepBytes.admit` checks the events one decider pass (or one batch of attempts' results)
produced, in order: what comes before a refused value is kept, the refused event and its
owner's later events (and attempts) are dropped, and the owner's failure takes their place:
an item fails (no further item of its `for_each` starts in that batch, and the `for_each`
fails as it does for any failed item), an activity fails, a compensation fails, or the
execution fails. The execution's bytes are its checkpoint's when
the step began (`ExecutionBytes.of`: each activity's form measured once per record) plus
every value admitted since, counted once each (a value replacing another in the same step
counts in full: the bound errs on the side of refusing).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from wovyr.engine.core.policy import RunActivity, error
from wovyr.engine.core.state import ActivityStatus, ExecutionState, activity_bytes
from wovyr.events import (
    ABSENT,
    ActivityFailed,
    ActivityScheduled,
    CompensationFailed,
    Event,
    EventType,
    ExecutionFailed,
    ItemFailed,
    ItemStarted,
)

__all__ = [
    "EXECUTION_SETTING",
    "MAX_EXECUTION_BYTES",
    "MAX_VALUE_DEPTH",
    "PAYLOAD_SETTING",
    "ExecutionBytes",
    "StepBytes",
    "ValueLimits",
]

MAX_VALUE_DEPTH = 64  # as every stored value (wovyr.store.codec.MAX_DEPTH)
MAX_EXECUTION_BYTES = 32 * 1_048_576  # of one execution's checkpoint
PAYLOAD_SETTING = "WOVYR_MAX_PAYLOAD_BYTES"
EXECUTION_SETTING = "WOVYR_MAX_EXECUTION_BYTES"

#: The keys of event data that hold values a workflow made (the rest are ids, numbers,
#: times and statuses of the engine's own).
_VALUES = ("input", "output", "error", "wait", "decision", "message", "arguments", "result")
_EXECUTION_EVENTS = frozenset(
    {EventType.EXECUTION_COMPLETED, EventType.EXECUTION_CONTINUED, EventType.EXECUTION_FAILED}
)
_COMPENSATION_EVENTS = frozenset(
    {
        EventType.COMPENSATION_STEP_STARTED,
        EventType.ACTIVITY_COMPENSATED,
        EventType.COMPENSATION_ATTEMPT_FAILED,
        EventType.COMPENSATION_FAILED,
    }
)


@dataclass(frozen=True)
class ValueLimits:
    """The bounds (`execution_bytes` None: no bound on an execution's bytes), and how a value
    is sized and its nesting counted: the stores' own functions (`wovyr.store.codec`'s
    `json_bytes` and `json_depth`), which the pure core does not import."""

    measure: Callable[[Any], int]  # the bytes of a value as stored
    nesting: Callable[[Any, int], int]  # how deeply a value nests, counted to limit + 1
    value_bytes: int = 2 * 1_048_576
    depth: int = MAX_VALUE_DEPTH
    execution_bytes: int | None = MAX_EXECUTION_BYTES


class ExecutionBytes:
    """The size of an execution's checkpoint under one `ValueLimits`, kept from step to step
    (a worker's runner keeps one): an activity is measured again only when its record
    changed (a step changes one or two), the input once per object."""

    def __init__(self, limits: ValueLimits) -> None:
        self.limits = limits
        self._input: tuple[Any, int] | None = None
        self._sizes: dict[str, tuple[Any, int]] = {}  # activity -> (its record, its size)
        self._total = 0  # of the activities in _sizes

    def of(self, state: ExecutionState) -> int:
        measure, sizes = self.limits.measure, self._sizes
        for key, record in state.activities.items():
            known = sizes.get(key)
            if known is None or known[0] is not record:
                size = activity_bytes(record, measure)
                self._total += size - (known[1] if known is not None else 0)
                sizes[key] = (record, size)
        if len(sizes) != len(state.activities):  # (another execution's, or fewer)
            for key in [k for k in sizes if k not in state.activities]:
                self._total -= sizes.pop(key)[1]
        if self._input is None or self._input[0] is not state.input:
            self._input = (state.input, measure(state.input))
        total = self._total + self._input[1]
        if state.signals:
            total += measure({k: list(v) for k, v in state.signals.items()})
        if state.approvals:
            total += measure(dict(state.approvals))
        if state.output is not None:
            total += measure(state.output)
        if state.error is not None:
            total += measure(state.error)
        return total

    def step(self, state: ExecutionState) -> StepBytes:
        """The bounds of one step from `state`."""
        return StepBytes(self.limits, self.of(state) if self.limits.execution_bytes else 0)


class StepBytes:
    """The bounds of one step: `used` (the execution's bytes) and `added` grow by every
    value admitted."""

    def __init__(self, limits: ValueLimits, used: int = 0) -> None:
        self.limits = limits
        self.used = used
        self.added = 0  # the bytes of the values admitted (what the step records)
        self.refusals = 0

    def copy(self) -> StepBytes:
        """These bounds as they stand, to admit another decision of the same step from."""
        other = StepBytes(self.limits, self.used)
        other.added, other.refusals = self.added, self.refusals
        return other

    def admit(
        self,
        state: ExecutionState,
        events: list[Event],
        runs: list[RunActivity],
        now: datetime,
    ) -> tuple[list[Event], list[RunActivity]]:
        """`events` (and `runs`) of a step from `state`, with each refused value's event and
        its owner's later events and attempts replaced by the owner's failure."""
        kept: list[Event] = []
        refused: set[tuple[str | None, int | None]] = set()  # owners that failed
        dropped: set[tuple[str | None, int | None]] = set()  # owners with events dropped
        closed: set[str] = set()  # activities an item of which failed: no item starts
        scheduled: set[str] = set()  # activities whose ActivityScheduled was kept
        for event in events:
            owner = _owner(event)
            if owner is not None and (
                owner in dropped
                or (owner[0], None) in refused
                or (event.type == EventType.ITEM_STARTED and owner[0] in closed)
            ):
                dropped.add(owner)
                continue
            problem = self._refusal(state, event)
            if problem is None:
                kept.append(event)
                if event.type == EventType.ACTIVITY_SCHEDULED:
                    scheduled.add(str(event.data.get("activity")))
                continue
            self.refusals += 1
            field, err = problem
            if owner is None:
                continue  # (a value no activity owns and no event of the execution holds)
            refused.add(owner)
            dropped.add(owner)
            if owner[0] is not None and owner[1] is not None:
                closed.add(owner[0])  # a failed item stops new items: none starts here
            was_scheduled = owner[0] in scheduled
            kept.extend(_failure(state, event, owner, field, err, now, was_scheduled))
        if not refused:
            return kept, runs
        return kept, [r for r in runs if not _dropped(r, refused, dropped)]

    def _refusal(self, state: ExecutionState, event: Event) -> tuple[str, dict[str, Any]] | None:
        """(the field, the error) of the first value of `event` over a bound, else None;
        admitted values count in `used`."""
        limits = self.limits
        for field in _VALUES:
            value = event.data.get(field)
            if value is None or value is ABSENT or isinstance(value, bool | int | float):
                continue
            if limits.nesting(value, limits.depth) > limits.depth:
                message = (
                    f"{_what(state, event, field)} is nested more than {limits.depth} levels deep"
                )
                return field, error("PayloadTooDeep", message, limit=limits.depth)
            size = limits.measure(value)
            if size > limits.value_bytes:
                message = (
                    f"{_what(state, event, field)} is {size} bytes of JSON, over the cap of "
                    f"{limits.value_bytes} bytes ({PAYLOAD_SETTING})"
                )
                return field, error("PayloadTooLarge", message, limit=limits.value_bytes)
            budget = limits.execution_bytes
            if budget is not None and self.used + size > budget:
                message = (
                    f"{_what(state, event, field)} ({size} bytes) would take execution "
                    f"{state.id} past its byte budget of {budget} ({EXECUTION_SETTING}): it "
                    f"holds {self.used} bytes"
                )
                return field, error("ExecutionTooLarge", message, limit=budget)
            self.used += size
            self.added += size
        return None


def _owner(event: Event) -> tuple[str | None, int | None] | None:
    """Whose event this is: (activity, item index or None), (None, None) for the
    execution's own end, None for the engine's bookkeeping (timers, ...)."""
    if event.type in _EXECUTION_EVENTS:
        return (None, None)
    activity = event.data.get("activity")
    if not isinstance(activity, str):
        return None
    index = event.data.get("index")
    return (activity, index if isinstance(index, int) else None)


def _dropped(
    run: RunActivity,
    refused: set[tuple[str | None, int | None]],
    dropped: set[tuple[str | None, int | None]],
) -> bool:
    """The attempt's activity failed, or the event that started it was dropped."""
    return (run.activity_id, None) in refused or (run.activity_id, run.index) in dropped


def _what(state: ExecutionState, event: Event, field: str) -> str:
    if event.type in _EXECUTION_EVENTS:
        return "the next run's input" if field == "input" else f"the workflow's {field}"
    activity, index = event.data.get("activity"), event.data.get("index")
    if isinstance(index, int):
        return f"the {field} of item {index} of activity {activity!r}"
    if event.type in _COMPENSATION_EVENTS:
        return f"the {field} of the compensation of activity {activity!r}"
    if event.type in (EventType.ITERATION_STARTED, EventType.ITERATION_COMPLETED):
        return f"the {field} of iteration {event.data.get('iteration')} of activity {activity!r}"
    act = state.activities.get(str(activity))
    if field == "output" and act is not None and act.items is not None:
        return f"the output of activity {activity!r} (its items' outputs together)"
    return f"the {field} of activity {activity!r}"


def _failure(
    state: ExecutionState,
    event: Event,
    owner: tuple[str | None, int | None],
    field: str,
    err: dict[str, Any],
    now: datetime,
    scheduled: bool,
) -> list[Event]:
    """What replaces a refused event: its owner's failure for good (`scheduled`: the
    activity's ActivityScheduled is among the events kept before it)."""
    activity, index = owner
    attempt = event.data.get("attempt")
    if activity is None:  # (an ExecutionFailed whose own error was refused gets this one)
        return [ExecutionFailed(error=err).at(now)]
    if event.type == EventType.ACTIVITY_FAILED and field == "output":
        # a failed `for_each` keeps its items' outputs: too many, it fails without them
        kept = {k: v for k, v in event.data.items() if k not in ("output", "logs")}
        return [ActivityFailed(**kept).at(now)]
    if event.type in _COMPENSATION_EVENTS or state.compensation is not None:
        written = index if index is not None else ABSENT
        return [CompensationFailed(activity=activity, index=written, error=err).at(now)]
    a = state.activities.get(activity)
    if index is not None:
        item = (a.items or ())[index] if a is not None and a.items else None
        number = int(attempt) if isinstance(attempt, int) else int((item or {}).get("attempt", 1))
        failed = ItemFailed.final(activity, index, number, err).at(now)
        if event.type == EventType.ITEM_STARTED and "input" in event.data:
            # its input refused: started (without it) and failed at once
            return [ItemStarted(activity=activity, index=index, attempt=number).at(now), failed]
        return [failed]
    fresh = a is None or (a.status == ActivityStatus.PENDING and a.started_at is None)
    if event.type == EventType.ACTIVITY_SCHEDULED or (fresh and not scheduled):
        again = ActivityScheduled(activity=activity, input=None).at(now)
        return [again, ActivityFailed.final(activity, 0, err).at(now)]
    number = int(attempt) if isinstance(attempt, int) else (a.attempt if a is not None else 0)
    return [ActivityFailed.final(activity, number, err).at(now)]
