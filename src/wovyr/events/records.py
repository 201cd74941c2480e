"""The typed event records: one frozen class per event type, the schema of a stored event's
`data` (see the package's docstring). Import them from `wovyr.events`, which loads this
module when a record is first asked for."""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, ClassVar, Protocol, TypeVar

from wovyr.events import ABSENT, Absent, Event, EventType

__all__ = [
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
    "EventData",
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
    "typed",
]


class _Stored(Protocol):
    """An `Event`, or a store's record of one."""

    @property
    def type(self) -> str: ...

    @property
    def data(self) -> dict[str, Any]: ...


_R = TypeVar("_R", bound="EventData")


@dataclass(frozen=True, slots=True, kw_only=True)
class EventData:
    """The typed data of one event type (subclasses are the schema)."""

    TYPE: ClassVar[str]
    _KEYS: ClassVar[tuple[str, ...]] = ()

    def to_data(self) -> dict[str, Any]:
        """The stored `data`: every field in order, except those left ABSENT."""
        data: dict[str, Any] = {}
        for key in self._KEYS:
            value = getattr(self, key)
            if value is not ABSENT:
                data[key] = value
        return data

    def at(self, now: datetime) -> Event:
        """The stored event, recorded at `now`."""
        return Event(self.TYPE, now, self.to_data())

    @classmethod
    def parse(cls: type[_R], event: _Stored) -> _R:
        """The record of a stored event of this type (ValueError when its data does not fit)."""
        if event.type != cls.TYPE:
            raise ValueError(f"a {event.type} event is not a {cls.TYPE}")
        try:
            return cls(**event.data)
        except TypeError as exc:
            raise ValueError(f"the data of a {event.type} event does not fit: {exc}") from None


_RECORDS: dict[str, type[EventData]] = {}


def _record(cls: type[_R]) -> type[_R]:
    """Register a record class under its TYPE and remember its keys in field order."""
    cls._KEYS = tuple(f.name for f in fields(cls))
    assert cls.TYPE not in _RECORDS, cls.TYPE
    _RECORDS[cls.TYPE] = cls
    return cls


def typed(event: _Stored) -> EventData:
    """The typed record of a stored event (ValueError for an unknown type or misfit data)."""
    cls = _RECORDS.get(event.type)
    if cls is None:
        raise ValueError(f"unknown event type {event.type!r}")
    return cls.parse(event)


# --- the execution ----------------------------------------------------------------------


@_record
@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionStarted(EventData):
    """`parent` ({id, activity, index, attempt}) and `depth` only for a child workflow;
    `schedule` and `scheduled_at` only for a start by a schedule; `continued_from` (the run
    it continues) and `chain` ({root, run}: the chain's logical id and this run's number)
    only for a run that continue-as-new started. `rerun_of` ({id, from}: the execution it
    reruns and the activity it reruns from, null for all) only for a rerun;
    `priority` only when above 0; `concurrency` only for a workflow that declares a
    concurrency key; `trace` (the W3C context of the start's span: `traceparent`, maybe
    `tracestate`) only when the start was traced (`wovyr.traces`)."""

    TYPE: ClassVar[str] = EventType.EXECUTION_STARTED
    workflow: str
    version: str
    definition_hash: str
    input: dict[str, Any]
    parent_id: str | None
    timeout: float | None
    activities: list[str]
    parent: dict[str, Any] | Absent = ABSENT
    depth: int | Absent = ABSENT
    schedule: str | Absent = ABSENT
    scheduled_at: str | Absent = ABSENT
    continued_from: str | Absent = ABSENT
    chain: dict[str, Any] | Absent = ABSENT
    rerun_of: dict[str, Any] | Absent = ABSENT
    labels: dict[str, str] | Absent = ABSENT
    priority: int | Absent = ABSENT  # 1-9 (0, the default, is not written)
    # A workflow's concurrency slot: {key (evaluated), limit, on_limit}
    concurrency: dict[str, Any] | Absent = ABSENT
    trace: dict[str, str] | Absent = ABSENT


@_record
@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionCompleted(EventData):
    TYPE: ClassVar[str] = EventType.EXECUTION_COMPLETED
    output: Any


@_record
@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionContinued(EventData):
    """The workflow would have completed with `output` and its `continue_as_new.when` held:
    this run ends `continued`, and run `run` of its chain, `continued_as`, starts with
    `input` in the same transaction (its `ExecutionStarted` names this run)."""

    TYPE: ClassVar[str] = EventType.EXECUTION_CONTINUED
    output: Any
    input: dict[str, Any]
    continued_as: str
    run: int


@_record
@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionFailed(EventData):
    TYPE: ClassVar[str] = EventType.EXECUTION_FAILED
    error: dict[str, Any]


@_record
@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionCancelled(EventData):
    TYPE: ClassVar[str] = EventType.EXECUTION_CANCELLED
    reason: str | None
    by: str | None


# --- activities -------------------------------------------------------------------------


@_record
@dataclass(frozen=True, slots=True, kw_only=True)
class ActivityScheduled(EventData):
    """`input` is the rendered input, recorded once (None for waits, settled values and
    failures). `wait` only for a wait (what it waits for); `items` only for a `for_each`
    (the item count; `input` is then the list of items)."""

    TYPE: ClassVar[str] = EventType.ACTIVITY_SCHEDULED
    activity: str
    input: Any
    wait: dict[str, Any] | Absent = ABSENT
    items: int | Absent = ABSENT
    # only for a step of a code workflow (`wovyr.code`), which no definition lists: its
    # kind, the `file:line` of the call that asked for it, and the steps whose results the
    # function took before that call
    kind: str | Absent = ABSENT
    source: str | Absent = ABSENT
    after: list[str] | Absent = ABSENT


@_record
@dataclass(frozen=True, slots=True, kw_only=True)
class ActivityStarted(EventData):
    """`key` is the idempotency key of the attempt. `recovery` only when the attempt is run
    again because its worker was lost (it is the same attempt, with the same key): the
    activity's n-th such re-run, counted against the engine's `max_recoveries`, never
    against `retry.max_attempts`."""

    TYPE: ClassVar[str] = EventType.ACTIVITY_STARTED
    activity: str
    attempt: int
    key: str
    recovery: int | Absent = ABSENT


@_record
@dataclass(frozen=True, slots=True, kw_only=True)
class ActivityCompleted(EventData):
    """`signal` only when a signal wait consumed one (its name)."""

    TYPE: ClassVar[str] = EventType.ACTIVITY_COMPLETED
    activity: str
    attempt: int
    output: Any
    signal: str | Absent = ABSENT
    logs: list[dict[str, Any]] | Absent = ABSENT
    model_calls: list[dict[str, Any]] | Absent = ABSENT


@_record
@dataclass(frozen=True, slots=True, kw_only=True)
class ActivityReused(EventData):
    """A rerun took this activity's result from the execution it reruns (`execution`,
    where attempt `attempt` produced `output` from `input`) instead of running it again:
    it counts as completed, and nothing was executed for it in this run. `items` only for
    a `for_each` activity."""

    TYPE: ClassVar[str] = EventType.ACTIVITY_REUSED
    activity: str
    execution: str
    attempt: int
    input: Any
    output: Any
    items: list[dict[str, Any]] | Absent = ABSENT  # a for_each's items ({status, attempt,
    # input, output}), so that a failing rerun undoes them item by item as the run would


@_record
@dataclass(frozen=True, slots=True, kw_only=True)
class ActivityFailed(EventData):
    """`next_attempt_at` (ISO time) only when `will_retry`; `output` only when a failing
    `for_each` keeps its items' outputs (the saga writes it, maybe null, for an activity
    lost while the workflow fails)."""

    TYPE: ClassVar[str] = EventType.ACTIVITY_FAILED
    activity: str
    attempt: int
    error: dict[str, Any]
    will_retry: bool
    next_attempt_at: str | None
    output: Any = ABSENT
    logs: list[dict[str, Any]] | Absent = ABSENT
    model_calls: list[dict[str, Any]] | Absent = ABSENT

    @classmethod
    def final(
        cls, activity: str, attempt: int, error: dict[str, Any], *, output: Any = ABSENT
    ) -> ActivityFailed:
        """A failure no attempt follows."""
        return cls(
            activity=activity,
            attempt=attempt,
            error=error,
            will_retry=False,
            next_attempt_at=None,
            output=output,
        )

    @classmethod
    def retrying(
        cls, activity: str, attempt: int, error: dict[str, Any], next_attempt_at: str
    ) -> ActivityFailed:
        """A failure attempt `attempt + 1` follows, at `next_attempt_at` (ISO time)."""
        return cls(
            activity=activity,
            attempt=attempt,
            error=error,
            will_retry=True,
            next_attempt_at=next_attempt_at,
        )


@_record
@dataclass(frozen=True, slots=True, kw_only=True)
class ActivitySkipped(EventData):
    TYPE: ClassVar[str] = EventType.ACTIVITY_SKIPPED
    activity: str
    reason: str


# --- timers, signals, approvals ----------------------------------------------------------


@_record
@dataclass(frozen=True, slots=True, kw_only=True)
class TimerArmed(EventData):
    """`fire_at` is an ISO time. The workflow timeout has neither `activity` nor `item`; a
    wait or approval timeout has `activity`; a retry timer has both (`item` null unless it
    retries one item of a `for_each`). A child workflow's timeout (purpose `child_timeout`)
    has `activity`, `item` (as a retry timer) and `attempt`, the attempt whose child it
    bounds. A quota hold (purpose `quota`) has neither, and `reason`: what the execution
    waits for, in words (its `waiting_on` while held)."""

    TYPE: ClassVar[str] = EventType.TIMER_ARMED
    timer: str
    activity: str | Absent = ABSENT
    item: int | Absent | None = ABSENT
    attempt: int | Absent = ABSENT
    purpose: str
    fire_at: str
    reason: str | Absent = ABSENT


@_record
@dataclass(frozen=True, slots=True, kw_only=True)
class TimerFired(EventData):
    TYPE: ClassVar[str] = EventType.TIMER_FIRED
    timer: str
    fired_at: str


@_record
@dataclass(frozen=True, slots=True, kw_only=True)
class TimerCancelled(EventData):
    TYPE: ClassVar[str] = EventType.TIMER_CANCELLED
    timer: str


@_record
@dataclass(frozen=True, slots=True, kw_only=True)
class SignalReceived(EventData):
    TYPE: ClassVar[str] = EventType.SIGNAL_RECEIVED
    name: str
    payload: Any
    # a trigger's `<trigger>:<dedup key>`: the event that sent it is delivered once
    dedup: str | Absent = ABSENT


@_record
@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalDecided(EventData):
    TYPE: ClassVar[str] = EventType.APPROVAL_DECIDED
    activity: str
    approved: bool
    by: str | None
    comment: str | None
    grant: dict[str, Any] | Absent = ABSENT  # more budget for an agent paused on its budget


# --- compensation ------------------------------------------------------------------------


@_record
@dataclass(frozen=True, slots=True, kw_only=True)
class CompensationStarted(EventData):
    """`activities` in reverse completion order; `reason` the first failure."""

    TYPE: ClassVar[str] = EventType.COMPENSATION_STARTED
    activities: list[str]
    reason: dict[str, Any]


@_record
@dataclass(frozen=True, slots=True, kw_only=True)
class CompensationStepStarted(EventData):
    """`recovery` only when the attempt is run again because its worker was lost (as for
    `ActivityStarted`)."""

    TYPE: ClassVar[str] = EventType.COMPENSATION_STEP_STARTED
    activity: str
    index: int | Absent = ABSENT
    attempt: int
    recovery: int | Absent = ABSENT


@_record
@dataclass(frozen=True, slots=True, kw_only=True)
class ActivityCompensated(EventData):
    TYPE: ClassVar[str] = EventType.ACTIVITY_COMPENSATED
    activity: str
    index: int | Absent = ABSENT
    output: Any
    logs: list[dict[str, Any]] | Absent = ABSENT
    model_calls: list[dict[str, Any]] | Absent = ABSENT


@_record
@dataclass(frozen=True, slots=True, kw_only=True)
class CompensationAttemptFailed(EventData):
    """Another attempt follows."""

    TYPE: ClassVar[str] = EventType.COMPENSATION_ATTEMPT_FAILED
    activity: str
    index: int | Absent = ABSENT
    attempt: int
    error: dict[str, Any]
    logs: list[dict[str, Any]] | Absent = ABSENT
    model_calls: list[dict[str, Any]] | Absent = ABSENT


@_record
@dataclass(frozen=True, slots=True, kw_only=True)
class CompensationFailed(EventData):
    TYPE: ClassVar[str] = EventType.COMPENSATION_FAILED
    activity: str
    index: int | Absent = ABSENT
    error: dict[str, Any]
    logs: list[dict[str, Any]] | Absent = ABSENT
    model_calls: list[dict[str, Any]] | Absent = ABSENT


# --- child workflows and for_each items -------------------------------------------------


@_record
@dataclass(frozen=True, slots=True, kw_only=True)
class ChildStarted(EventData):
    """A child workflow now runs for this attempt (of one item, when `index` is written)."""

    TYPE: ClassVar[str] = EventType.CHILD_STARTED
    activity: str
    index: int | Absent = ABSENT
    attempt: int
    child: str


@_record
@dataclass(frozen=True, slots=True, kw_only=True)
class ChildFinished(EventData):
    """Appended to the parent in the same transaction that finishes the child."""

    TYPE: ClassVar[str] = EventType.CHILD_FINISHED
    activity: str
    index: int | None
    attempt: int | None
    child: str
    status: str
    output: Any
    error: dict[str, Any] | None
    call: dict[str, Any] | Absent = ABSENT  # the agent tool call the child ran (its result)


@_record
@dataclass(frozen=True, slots=True, kw_only=True)
class IterationStarted(EventData):
    """Iteration `iteration` (2, 3, ...) of a `repeat` activity begins with `input`, its
    rendering (the first iteration is the activity's `ActivityScheduled`)."""

    TYPE: ClassVar[str] = EventType.ITERATION_STARTED
    activity: str
    iteration: int
    input: Any


@_record
@dataclass(frozen=True, slots=True, kw_only=True)
class IterationCompleted(EventData):
    """Iteration `iteration` of a `repeat` activity ended with `output`. `follows` when
    another iteration comes (`next_at`: when its durable timer fires, absent when at once);
    otherwise an `ActivityCompleted` or `ActivityFailed` follows in the same step.
    `exhausted` when `max_iterations` ended the loop with `until` still false."""

    TYPE: ClassVar[str] = EventType.ITERATION_COMPLETED
    activity: str
    iteration: int
    output: Any
    follows: bool
    next_at: str | Absent = ABSENT
    exhausted: bool | Absent = ABSENT
    logs: list[dict[str, Any]] | Absent = ABSENT
    model_calls: list[dict[str, Any]] | Absent = ABSENT


@_record
@dataclass(frozen=True, slots=True, kw_only=True)
class ModelCallCompleted(EventData):
    """Turn `turn` (1, 2, ...) of an `agent` activity: its model call answered `message`
    (the assistant message: `content`, `tool_calls`). Recorded once the call returns, in a
    commit of its own, so a crash after it never repeats the call. `cost` is null when the
    provider has no prices configured. `usage` has `cached_tokens` when the provider said
    how many input tokens it read from its cache; `provider` (its name) and `latency`
    (seconds the call took) are absent from calls recorded before they were kept."""

    TYPE: ClassVar[str] = EventType.MODEL_CALL_COMPLETED
    activity: str
    turn: int
    attempt: int
    message: dict[str, Any]
    usage: dict[str, int]
    cost: float | None
    model: str
    finish_reason: str | None
    provider: str | Absent = ABSENT
    latency: float | Absent = ABSENT


@_record
@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallCompleted(EventData):
    """One tool call the model asked for in turn `turn` of an `agent` activity ended with
    `result` (what the model is sent back). `error` when the tool failed, was not allowed
    or got arguments it cannot take: the model sees the error as the result."""

    TYPE: ClassVar[str] = EventType.TOOL_CALL_COMPLETED
    activity: str
    turn: int
    call_id: str
    tool: str
    arguments: Any
    result: Any
    error: dict[str, Any] | Absent = ABSENT


@_record
@dataclass(frozen=True, slots=True, kw_only=True)
class ActivitySuspended(EventData):
    """Attempt `attempt` paused to wait for an approval (an `agent`'s tool call listed in
    `require_approval`); `wait` says for what (`kind: approval`, and the kind's own keys).
    The approval is decided like a `wait: {approval}` step's (`ApprovalDecided`)."""

    TYPE: ClassVar[str] = EventType.ACTIVITY_SUSPENDED
    activity: str
    attempt: int
    wait: dict[str, Any]


@_record
@dataclass(frozen=True, slots=True, kw_only=True)
class ActivityResumed(EventData):
    """The approval a suspended attempt waited for was decided: the same attempt runs
    again, with the decision (and what it was asked for) added to the activity's journal."""

    TYPE: ClassVar[str] = EventType.ACTIVITY_RESUMED
    activity: str
    attempt: int
    decision: dict[str, Any]


@_record
@dataclass(frozen=True, slots=True, kw_only=True)
class ItemStarted(EventData):
    """`input` (the item's rendered input) only on its first attempt, when it rendered;
    `recovery` only when the attempt is run again because its worker was lost (as for
    `ActivityStarted`)."""

    TYPE: ClassVar[str] = EventType.ITEM_STARTED
    activity: str
    index: int
    attempt: int
    input: Any = ABSENT
    recovery: int | Absent = ABSENT


@_record
@dataclass(frozen=True, slots=True, kw_only=True)
class ItemCompleted(EventData):
    TYPE: ClassVar[str] = EventType.ITEM_COMPLETED
    activity: str
    index: int
    attempt: int
    output: Any
    logs: list[dict[str, Any]] | Absent = ABSENT
    model_calls: list[dict[str, Any]] | Absent = ABSENT


@_record
@dataclass(frozen=True, slots=True, kw_only=True)
class ItemFailed(EventData):
    TYPE: ClassVar[str] = EventType.ITEM_FAILED
    activity: str
    index: int
    attempt: int
    error: dict[str, Any]
    will_retry: bool
    next_attempt_at: str | None
    logs: list[dict[str, Any]] | Absent = ABSENT
    model_calls: list[dict[str, Any]] | Absent = ABSENT

    @classmethod
    def final(cls, activity: str, index: int, attempt: int, error: dict[str, Any]) -> ItemFailed:
        """A failure of one item no attempt follows."""
        return cls(
            activity=activity,
            index=index,
            attempt=attempt,
            error=error,
            will_retry=False,
            next_attempt_at=None,
        )

    @classmethod
    def retrying(
        cls, activity: str, index: int, attempt: int, error: dict[str, Any], next_attempt_at: str
    ) -> ItemFailed:
        """A failure of one item attempt `attempt + 1` follows, at `next_attempt_at`."""
        return cls(
            activity=activity,
            index=index,
            attempt=attempt,
            error=error,
            will_retry=True,
            next_attempt_at=next_attempt_at,
        )
