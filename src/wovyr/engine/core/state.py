"""Execution state as frozen records, and the pure `apply(state, event)` that folds events.

Nothing here reads a clock or does I/O: every time comes from an event. The checkpoint a
store keeps is `state_to_json(fold(events))`; `state_from_json` reads it back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, TypeVar

from wovyr.events import Event, EventType
from wovyr.statuses import ActivityStatus, ChildStatus, ExecutionStatus

__all__ = [
    "STATE_UNLESS_SET",
    "ActivityIndex",
    "ActivityState",
    "ActivityStatus",
    "ExecutionState",
    "ExecutionStatus",
    "activity_bytes",
    "activity_index",
    "apply",
    "fold",
    "state_from_json",
    "state_to_json",
]


@dataclass(frozen=True)
class ActivityState:
    status: str = ActivityStatus.PENDING
    attempt: int = 0
    input: Any = None
    output: Any = None
    error: dict[str, Any] | None = None
    started_at: str | None = None
    finished_at: str | None = None
    next_attempt_at: str | None = None
    completion_order: int | None = None
    wait: dict[str, Any] | None = None  # what a waiting activity waits for (for queries/UI)
    timer_fired: bool = False
    skip_reason: str | None = None
    compensation_attempt: int = 0
    compensation_output: Any = None
    compensation_error: dict[str, Any] | None = None
    items: tuple[dict[str, Any], ...] | None = None  # the items of a for_each activity
    child: str | None = None  # the child workflow this attempt started
    child_result: dict[str, Any] | None = None  # ChildFinished data, until consumed
    # Written to the checkpoint only when set (older checkpoints lack them):
    recoveries: int = 0  # re-runs of lost attempts (ActivityStarted `recovery`)
    compensation_recoveries: int = 0  # the same for the compensation
    compensation_retry: bool = False  # the compensation attempt failed; the next follows
    iterations: int = 0  # iterations of a `repeat` activity completed so far
    exhausted: bool = False  # a `repeat` ended by max_iterations with `until` still false
    # the sub-steps recorded so far (the activity's journal), kept across attempts
    journal: tuple[dict[str, Any], ...] = ()
    reused_from: str | None = None  # a rerun's activity whose result came from that run
    # a code workflow's step (no definition lists it): its kind and the call's `file:line`
    kind: str | None = None
    source: str | None = None
    after: list[str] | None = None  # the steps whose results the function took before it


# ActivityState fields left out of the checkpoint while they hold their default, so that a
# log without the events that set them folds to the checkpoint an older engine wrote.
_UNLESS_SET = (
    "recoveries",
    "compensation_recoveries",
    "compensation_retry",
    "iterations",
    "exhausted",
    "journal",
    "reused_from",
    "kind",
    "source",
    "after",
)


# an activity no event touched yet: one record, shared (records are never changed in place)
_PENDING = ActivityState()


@dataclass(frozen=True)
class ExecutionState:
    id: str
    workflow: str = ""
    version: str = ""
    definition_hash: str = ""
    status: str = ExecutionStatus.RUNNING
    input: dict[str, Any] = field(default_factory=dict)
    output: Any = None
    error: dict[str, Any] | None = None
    parent_id: str | None = None
    parent: dict[str, Any] | None = None  # {id, activity, index, attempt} of a child
    depth: int = 0
    created_at: str = ""
    updated_at: str = ""
    activities: Mapping[str, ActivityState] = field(default_factory=dict)
    signals: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    approvals: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    timers: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    timed_out: bool = False
    compensation: dict[str, Any] | None = None  # {"order": [...], "reason": {...}}
    completions: int = 0
    seq: int = 0
    # Continue-as-new (written to the checkpoint only when set): the chain's {root, run}
    # (absent for run 1 until it continues), the run this one continues, the run that
    # continues this one.
    chain: dict[str, Any] | None = None
    continued_from: str | None = None
    continued_as: str | None = None
    rerun_of: dict[str, Any] | None = None  # a rerun's {id, from} (ExecutionStarted)
    labels: dict[str, str] | None = None  # set at start, for search (ExecutionStarted)
    # Flow control (written only when set): the start's priority (1-9; None is 0) and the
    # workflow's concurrency slot {key, limit, on_limit}.
    priority: int | None = None
    concurrency: dict[str, Any] | None = None
    # The W3C trace context of the start's span (ExecutionStarted.trace; only when traced):
    # every attempt's span is its child, whichever worker runs it.
    trace: dict[str, str] | None = None

    @property
    def chain_root(self) -> str:
        """The chain's logical id: its first run's id (this run's, outside a chain)."""
        return str((self.chain or {}).get("root") or self.id)

    @property
    def chain_run(self) -> int:
        """This run's number in its chain (1 for the first run and outside a chain)."""
        return int((self.chain or {}).get("run") or 1)

    @property
    def finished(self) -> bool:
        return self.status in ExecutionStatus.TERMINAL

    def activity(self, activity_id: str) -> ActivityState:
        return self.activities.get(activity_id) or _PENDING


# ExecutionState fields left out of the checkpoint while None (see _UNLESS_SET).
STATE_UNLESS_SET = (
    "chain",
    "continued_from",
    "continued_as",
    "rerun_of",
    "labels",
    "priority",
    "concurrency",
    "trace",
)

# Derived values cached in a record's __dict__ (never fields: not compared, not stored).
_JSON = "_json"  # ActivityState: its checkpoint form
_BYTES = "_bytes"  # ActivityState: (how it was measured, the size of its checkpoint form)
_INDEX = "_index"  # ExecutionState: its ActivityIndex

_ACTIVE = frozenset({ActivityStatus.RUNNING, ActivityStatus.WAITING, ActivityStatus.RETRYING})
_OPEN = _ACTIVE | {ActivityStatus.PENDING}


def _fresh(act: ActivityState) -> bool:
    """Pending and never scheduled: it waits for its needs."""
    return act.status == ActivityStatus.PENDING and act.started_at is None


@dataclass(frozen=True, eq=False)
class ActivityIndex:
    """Derived views of a state's activities, so that a step costs what it changes rather
    than what the workflow holds: which activities are open (pending, running, waiting or
    retrying: all the decider looks at), active (open and not pending), fresh (pending and
    never scheduled) and failed, and their checkpoint forms. A pure function of
    `activities`: `apply` carries it from state to state for the one activity an event
    changes (set and dict copies, no Python loop over the activities), and a state whose
    activities came another way gets it rebuilt on first use.

    Two memos ride on it, each one attribute (read and replaced whole, so a reader never
    pairs one half of an old value with one half of a new):
    `encoded` = (the checkpoint forms in `activities` order, or None; the ids to encode
    again), and `frontier` = (the decider's plan of a definition, the fresh activities it
    found ready, the ids `touched` since: left open or became fresh), which the decider
    keeps (`wovyr.engine.core.decide`)."""

    activities: Mapping[str, ActivityState]  # the mapping this index describes
    open: frozenset[str]
    active: frozenset[str]
    fresh: frozenset[str]
    failed: frozenset[str]
    encoded: tuple[dict[str, dict[str, Any]] | None, frozenset[str]] = (None, frozenset())
    frontier: tuple[Any, frozenset[str], frozenset[str]] | None = None

    @classmethod
    def of(cls, activities: Mapping[str, ActivityState]) -> ActivityIndex:
        return cls(
            activities,
            frozenset(k for k, a in activities.items() if a.status in _OPEN),
            frozenset(k for k, a in activities.items() if a.status in _ACTIVE),
            frozenset(k for k, a in activities.items() if _fresh(a)),
            frozenset(k for k, a in activities.items() if a.status == ActivityStatus.FAILED),
        )

    def changed(
        self,
        activities: Mapping[str, ActivityState],
        activity_id: str,
        before: ActivityState | None,
        after: ActivityState,
    ) -> ActivityIndex:
        """The index of `activities`: these activities with `activity_id` now `after`."""
        opened, active, fresh = self.open, self.active, self.fresh
        failed, frontier = self.failed, self.frontier
        if before is None or before.status != after.status or _fresh(before) != _fresh(after):
            now = after.status
            opened = _member(opened, activity_id, now in _OPEN)
            active = _member(active, activity_id, now in _ACTIVE)
            fresh = _member(fresh, activity_id, _fresh(after))
            failed = _member(failed, activity_id, now == ActivityStatus.FAILED)
            left = activity_id in self.open and activity_id not in opened
            came = activity_id in fresh and activity_id not in self.fresh
            if frontier is not None and (left or came):
                plan, ready, touched = frontier
                frontier = (plan, ready, touched | {activity_id})
        encoded, stale = self.encoded
        if encoded is not None and activity_id not in stale:
            stale = stale | {activity_id}
        return ActivityIndex(activities, opened, active, fresh, failed, (encoded, stale), frontier)

    def remember(self, frontier: tuple[Any, frozenset[str], frozenset[str]]) -> None:
        """Keep the decider's frontier memo (a cache of a pure function of `activities`)."""
        object.__setattr__(self, "frontier", frontier)

    def checkpoint_activities(self) -> dict[str, dict[str, Any]]:
        """The activities' checkpoint forms (a new dict; its values are shared, read-only)."""
        encoded, stale = self.encoded
        if encoded is None or not all(k in encoded for k in stale):
            # (an activity new to the mapping: rebuilt, to keep the mapping's order)
            encoded = {k: _activity_to_json(a) for k, a in self.activities.items()}
        elif stale:
            encoded = dict(encoded)
            for k in stale:
                encoded[k] = _activity_to_json(self.activities[k])
        if stale or encoded is not self.encoded[0]:  # remembered (a cache of a pure function)
            object.__setattr__(self, "encoded", (encoded, frozenset()))
        return dict(encoded)


def _member(ids: frozenset[str], activity_id: str, member: bool) -> frozenset[str]:
    if member == (activity_id in ids):
        return ids
    return ids | {activity_id} if member else ids - {activity_id}


def activity_index(state: ExecutionState) -> ActivityIndex:
    """The state's `ActivityIndex` (built on first use when `apply` did not carry it)."""
    index: ActivityIndex | None = state.__dict__.get(_INDEX)
    if index is None or index.activities is not state.activities:
        index = ActivityIndex.of(state.activities)
        state.__dict__[_INDEX] = index
    return index


_T = TypeVar("_T", "ExecutionState", "ActivityState")


def replace(record: _T, **changes: Any) -> _T:
    """`dataclasses.replace` for these frozen records, without re-running `__init__`
    (this is the hot path of every fold; field names are checked once per class)."""
    allowed = _FIELDS.get(type(record))
    if allowed is None:
        allowed = _FIELDS[type(record)] = frozenset(f.name for f in fields(record))
    if not allowed.issuperset(changes):
        raise TypeError(f"unknown fields {sorted(set(changes) - allowed)}")
    new = object.__new__(type(record))
    new.__dict__.update(record.__dict__)
    new.__dict__.update(changes)
    new.__dict__.pop(_JSON, None)  # a cached encoding is of the old record
    new.__dict__.pop(_BYTES, None)  # and so is a cached size
    return new


_FIELDS: dict[type, frozenset[str]] = {}


def fold(
    events: Iterable[Event], state: ExecutionState | None = None, *, id: str = ""
) -> ExecutionState:
    current = state or ExecutionState(id=id)
    for event in events:
        current = apply(current, event)
    return current


def apply(state: ExecutionState, event: Event) -> ExecutionState:
    """The state after `event`: pure, total (unknown types only bump the sequence)."""
    handler = _HANDLERS.get(event.type)
    at = _isoformat(event.at)
    new = handler(state, event, at) if handler else state
    if new is state:
        return replace(state, seq=state.seq + 1, updated_at=at)
    # a handler answers `state` or a record of its own, made by `replace` for this event
    # (shared with nobody yet): stamped in place, not copied once more
    new.__dict__["seq"] = state.seq + 1
    new.__dict__["updated_at"] = at
    return new


_LAST_AT: tuple[datetime, str] | None = None  # the time of the events a step records


def _isoformat(at: datetime) -> str:
    """`at.isoformat()`, kept for the last time seen: a step's events share one."""
    global _LAST_AT
    last = _LAST_AT
    if last is not None and last[0] is at:
        return last[1]
    text = at.isoformat()
    _LAST_AT = (at, text)
    return text


def _set_activity(
    state: ExecutionState,
    activity_id: str,
    *,
    with_state: Mapping[str, Any] | None = None,
    **changes: Any,
) -> ExecutionState:
    """`state` with the activity's record changed by `changes` (and the state's own fields
    by `with_state`: one copy of the state for both)."""
    acts = dict(state.activities)
    before = state.activities.get(activity_id)
    acts[activity_id] = after = replace(before or _PENDING, **changes)
    new = replace(state, activities=acts, **(with_state or {}))
    index: ActivityIndex | None = state.__dict__.get(_INDEX)
    if index is not None and index.activities is state.activities:
        new.__dict__[_INDEX] = index.changed(acts, activity_id, before, after)
    return new


def _started(state: ExecutionState, e: Event, at: str) -> ExecutionState:
    return replace(
        state,
        workflow=e.get("workflow", ""),
        version=str(e.get("version", "")),
        definition_hash=e.get("definition_hash", ""),
        input=dict(e.get("input") or {}),
        parent_id=e.get("parent_id"),
        parent=e.get("parent"),
        depth=int(e.get("depth") or 0),
        chain=e.get("chain"),
        continued_from=e.get("continued_from"),
        rerun_of=e.get("rerun_of"),
        labels=e.get("labels"),
        priority=e.get("priority"),
        concurrency=e.get("concurrency"),
        trace=e.get("trace"),
        created_at=at,
        status=ExecutionStatus.RUNNING,
        activities=dict.fromkeys(e.get("activities") or (), _PENDING),
    )


def _finished(status: str) -> Any:
    def handler(state: ExecutionState, e: Event, at: str) -> ExecutionState:
        acts = dict(state.activities)
        if status == ExecutionStatus.CANCELLED:
            for aid, act in acts.items():
                if act.status in ActivityStatus.ACTIVE or act.status == ActivityStatus.PENDING:
                    acts[aid] = replace(
                        act, status=ActivityStatus.SKIPPED, skip_reason="cancelled", wait=None
                    )
        return replace(
            state,
            status=status,
            output=e.get("output") if status == ExecutionStatus.COMPLETED else state.output,
            error=e.get("error") if status != ExecutionStatus.COMPLETED else None,
            activities=acts,
            timers={},
        )

    return handler


def _continued(state: ExecutionState, e: Event, at: str) -> ExecutionState:
    """Ends the run as `continued`, with the output it would have completed with."""
    run = int(e.get("run") or 2)
    ended: ExecutionState = _finished(ExecutionStatus.CONTINUED)(state, e, at)
    chain = {"root": state.chain_root, "run": run - 1}
    return replace(ended, output=e.get("output"), continued_as=e.get("continued_as"), chain=chain)


def _scheduled(state: ExecutionState, e: Event, at: str) -> ExecutionState:
    wait = e.get("wait")
    count = e.get("items")
    if count is not None:  # a for_each: its items run as sub-steps
        items = tuple({"status": ActivityStatus.PENDING, "attempt": 0} for _ in range(count))
        return _set_activity(
            state,
            e.data["activity"],
            input=e.get("input"),
            status=ActivityStatus.RUNNING,
            items=items,
            started_at=at,
        )
    code = {k: e.data[k] for k in ("kind", "source", "after") if k in e.data}  # code's
    return _set_activity(
        state,
        e.data["activity"],
        input=e.get("input"),
        status=ActivityStatus.WAITING if wait else ActivityStatus.PENDING,
        wait=wait,
        started_at=at,
        **code,
    )


def _activity_started(state: ExecutionState, e: Event, at: str) -> ExecutionState:
    act = state.activity(e.data["activity"])
    return _set_activity(
        state,
        e.data["activity"],
        status=ActivityStatus.RUNNING,
        attempt=int(e.data["attempt"]),
        next_attempt_at=None,
        timer_fired=False,
        child=None,
        child_result=None,
        started_at=act.started_at or at,
        recoveries=int(e.data.get("recovery", act.recoveries)),
    )


def _activity_completed(state: ExecutionState, e: Event, at: str) -> ExecutionState:
    signal = e.get("signal")
    if signal is not None:
        queue = tuple(state.signals.get(signal, ()))[1:]
        signals = {k: v for k, v in state.signals.items() if k != signal}
        if queue:
            signals[signal] = queue
        state = replace(state, signals=signals)
    aid = e.data["activity"]
    if aid in state.approvals:
        state = replace(state, approvals={k: v for k, v in state.approvals.items() if k != aid})
    done = state.completions + 1
    return _set_activity(
        state,
        aid,
        with_state={"completions": done},
        status=ActivityStatus.COMPLETED,
        output=e.get("output"),
        error=None,
        finished_at=at,
        completion_order=done,
        wait=None,
    )


def _activity_reused(state: ExecutionState, e: Event, at: str) -> ExecutionState:
    """Completed with the result of the run this one reruns (nothing ran for it here)."""
    done = state.completions + 1
    return _set_activity(
        state,
        e.data["activity"],
        with_state={"completions": done},
        status=ActivityStatus.COMPLETED,
        attempt=int(e.data["attempt"]),
        input=e.get("input"),
        output=e.get("output"),
        error=None,
        started_at=at,
        finished_at=at,
        completion_order=done,
        reused_from=e.get("execution"),
        items=tuple(dict(i) for i in e.data["items"]) if "items" in e.data else None,
    )


def _activity_failed(state: ExecutionState, e: Event, at: str) -> ExecutionState:
    retry = bool(e.get("will_retry"))
    if "output" in e.data:  # a for_each that failed keeps its completed items' outputs
        state = _set_activity(state, e.data["activity"], output=e.data["output"])
    return _set_activity(
        state,
        e.data["activity"],
        status=ActivityStatus.RETRYING if retry else ActivityStatus.FAILED,
        error=e.get("error"),
        next_attempt_at=e.get("next_attempt_at"),
        finished_at=None if retry else at,
        timer_fired=False,
        wait=None,
    )


def _skipped(state: ExecutionState, e: Event, at: str) -> ExecutionState:
    return _set_activity(
        state,
        e.data["activity"],
        status=ActivityStatus.SKIPPED,
        skip_reason=e.get("reason"),
        finished_at=at,
        wait=None,
    )


def _iteration_completed(state: ExecutionState, e: Event, at: str) -> ExecutionState:
    """One iteration ended: its output is the activity's latest; when another follows, the
    activity waits for it (a `repeat` wait, due at `next_at` or at once)."""
    changes: dict[str, Any] = {
        "iterations": int(e.data["iteration"]),
        "output": e.get("output"),
        "child_result": None,  # consumed: the next iteration starts a child of its own
    }
    if e.get("exhausted"):
        changes["exhausted"] = True
    if e.get("follows"):
        next_at = e.get("next_at")
        changes.update(
            status=ActivityStatus.WAITING,
            wait={"kind": "repeat", "iteration": int(e.data["iteration"]) + 1, "at": next_at},
            next_attempt_at=next_at,
            timer_fired=False,
        )
    return _set_activity(state, e.data["activity"], **changes)


def _iteration_started(state: ExecutionState, e: Event, at: str) -> ExecutionState:
    return _set_activity(
        state,
        e.data["activity"],
        status=ActivityStatus.PENDING,
        input=e.get("input"),
        attempt=0,
        wait=None,
        error=None,
        next_attempt_at=None,
        timer_fired=False,
        recoveries=0,
        journal=(),
    )


def _suspended(state: ExecutionState, e: Event, at: str) -> ExecutionState:
    """The attempt waits for an approval; `suspended` tells the decider to resume it."""
    wait = {**e.data["wait"], "suspended": True}
    return _set_activity(
        state, e.data["activity"], status=ActivityStatus.WAITING, wait=wait, timer_fired=False
    )


def _resumed(state: ExecutionState, e: Event, at: str) -> ExecutionState:
    """The decision joins the journal and is consumed: a later approval is asked anew."""
    aid = e.data["activity"]
    act = state.activity(aid)
    decision = e.data.get("decision") or {}
    step = {"step": "children" if "children" in decision else "approval", **decision}
    if aid in state.approvals:
        state = replace(state, approvals={k: v for k, v in state.approvals.items() if k != aid})
    return _set_activity(
        state,
        aid,
        status=ActivityStatus.RUNNING,
        wait=None,
        journal=(*act.journal, step),
        recoveries=0,
        timer_fired=False,
    )


def _journal_step(kind: str) -> Any:
    """A sub-step of an activity (a model call, a tool call) joins its journal. It is
    progress: the recovery budget counts the attempt's losses since the last one (a step
    that kills its worker every time still exhausts it; a long run of steps does not)."""

    def handler(state: ExecutionState, e: Event, at: str) -> ExecutionState:
        aid = e.data["activity"]
        step = {"step": kind, **{k: v for k, v in e.data.items() if k != "activity"}}
        journal = (*state.activity(aid).journal, step)
        return _set_activity(state, aid, journal=journal, recoveries=0)

    return handler


def _timer_armed(state: ExecutionState, e: Event, at: str) -> ExecutionState:
    timers = dict(state.timers)
    timers[e.data["timer"]] = {
        "fire_at": e.data["fire_at"],
        "activity": e.get("activity"),
        "purpose": e.get("purpose"),
        "item": e.get("item"),
    }
    if "attempt" in e.data:  # a child timeout: the attempt whose child it bounds
        timers[e.data["timer"]]["attempt"] = e.data["attempt"]
    if "reason" in e.data:  # a quota hold: what the execution waits for
        timers[e.data["timer"]]["reason"] = e.data["reason"]
    return replace(state, timers=timers)


def _timer_fired(state: ExecutionState, e: Event, at: str) -> ExecutionState:
    timer = state.timers.get(e.data["timer"])
    state = replace(state, timers={k: v for k, v in state.timers.items() if k != e.data["timer"]})
    if timer is None:
        return state
    if timer.get("purpose") == "workflow_timeout":
        return replace(state, timed_out=True)
    if timer.get("purpose") == "child_timeout":
        return _child_timed_out(state, timer, e.data["fired_at"])
    if timer.get("item") is not None:
        return _set_item(state, timer["activity"], timer["item"], timer_fired=True)
    if timer.get("activity"):
        return _set_activity(state, timer["activity"], timer_fired=True)
    return state


def _child_timed_out(state: ExecutionState, timer: dict[str, Any], fired_at: str) -> ExecutionState:
    """A child workflow outlived its activity's `timeout`: the fire stands for the child's
    result (status `timed_out`) unless the attempt moved on or its child already ended."""
    aid, index, attempt = timer["activity"], timer.get("item"), timer.get("attempt")
    act = state.activity(aid)
    if index is not None:
        items = act.items or ()
        if not 0 <= index < len(items):
            return state
        holder: dict[str, Any] = items[index]
        status, child = holder["status"], holder.get("child")
        current, result = holder.get("attempt"), holder.get("child_result")
    else:
        status, child, current, result = act.status, act.child, act.attempt, act.child_result
    waiting = status in (ActivityStatus.RUNNING, ActivityStatus.WAITING)
    if not waiting or current != attempt or result is not None:
        return state
    timed_out = {
        "activity": aid,
        "index": index,
        "attempt": attempt,
        "child": child,
        "status": ChildStatus.TIMED_OUT,
        "fired_at": fired_at,
    }
    if index is not None:
        return _set_item(state, aid, index, child_result=timed_out)
    return _set_activity(state, aid, child_result=timed_out)


def _timer_cancelled(state: ExecutionState, e: Event, at: str) -> ExecutionState:
    return replace(state, timers={k: v for k, v in state.timers.items() if k != e.data["timer"]})


def _signal(state: ExecutionState, e: Event, at: str) -> ExecutionState:
    signals = dict(state.signals)
    signals[e.data["name"]] = (*signals.get(e.data["name"], ()), e.get("payload"))
    return replace(state, signals=signals)


def _approval(state: ExecutionState, e: Event, at: str) -> ExecutionState:
    approvals = dict(state.approvals)
    approvals[e.data["activity"]] = {
        "approved": bool(e.data["approved"]),
        "by": e.get("by"),
        "comment": e.get("comment"),
        "at": at,
    }
    if e.get("grant"):
        approvals[e.data["activity"]]["grant"] = e.data["grant"]
    return replace(state, approvals=approvals)


def _compensation_started(state: ExecutionState, e: Event, at: str) -> ExecutionState:
    return replace(
        state, compensation={"order": list(e.data["activities"]), "reason": e.get("reason")}
    )


def _compensation_step(state: ExecutionState, e: Event, at: str) -> ExecutionState:
    recovery = e.data.get("recovery")
    if e.get("index") is not None:
        changes: dict[str, Any] = {
            "compensation": "running",
            "compensation_attempt": int(e.data["attempt"]),
        }
        if recovery is not None:
            changes["compensation_recoveries"] = int(recovery)
        state = _set_item(
            state, e.data["activity"], e.data["index"], _drop=("compensation_retry",), **changes
        )
        recovery = None  # the item's count, not the activity's
    act = state.activity(e.data["activity"])
    return _set_activity(
        state,
        e.data["activity"],
        status=ActivityStatus.COMPENSATING,
        compensation_attempt=int(e.data["attempt"]),
        compensation_retry=False,
        compensation_recoveries=act.compensation_recoveries if recovery is None else recovery,
    )


def _compensated(state: ExecutionState, e: Event, at: str) -> ExecutionState:
    return _set_compensation(
        state, e, "compensated", ActivityStatus.COMPENSATED, compensation_output=e.get("output")
    )


def _compensation_failed(state: ExecutionState, e: Event, at: str) -> ExecutionState:
    return _set_compensation(
        state, e, "failed", ActivityStatus.COMPENSATION_FAILED, compensation_error=e.get("error")
    )


def _compensation_attempt_failed(state: ExecutionState, e: Event, at: str) -> ExecutionState:
    """The attempt failed and another follows (in the same commit): `compensation_retry`
    tells the decider that the attempt not in flight failed, and was not lost."""
    return _set_compensation(
        state, e, None, None, compensation_error=e.get("error"), compensation_retry=True
    )


def _set_compensation(
    state: ExecutionState,
    e: Event,
    item_status: str | None,
    status: ActivityStatus | None,
    **changes: Any,
) -> ExecutionState:
    """Apply a compensation's `changes` to the event's for_each item (its `compensation`
    becomes `item_status`) or, without an index, to its activity (its status `status`)."""
    if e.get("index") is not None:
        if item_status is not None:
            changes = {"compensation": item_status, **changes}
        return _set_item(state, e.data["activity"], e.data["index"], **changes)
    if status is not None:
        changes = {"status": status, **changes}
    return _set_activity(state, e.data["activity"], **changes)


def _set_item(
    state: ExecutionState,
    activity_id: str,
    index: int,
    _drop: tuple[str, ...] = (),
    **changes: Any,
) -> ExecutionState:
    """Change item `index` of a for_each (and remove its keys in `_drop`)."""
    items = list(state.activity(activity_id).items or ())
    if not 0 <= index < len(items):
        return state
    item = {**items[index], **changes}
    for key in _drop:
        item.pop(key, None)
    items[index] = item
    return _set_activity(state, activity_id, items=tuple(items))


def _child_started(state: ExecutionState, e: Event, at: str) -> ExecutionState:
    aid, index, child = e.data["activity"], e.get("index"), e.data["child"]
    if index is not None:
        return _set_item(state, aid, index, status=ActivityStatus.WAITING, child=child)
    return _set_activity(
        state, aid, status=ActivityStatus.WAITING, child=child, wait={"kind": "child", "id": child}
    )


def _child_finished(state: ExecutionState, e: Event, at: str) -> ExecutionState:
    call = e.get("call")
    if call is not None:  # a journaled call ran as this child: its result is a step
        return _tool_child_step(state, e, call)
    result = dict(e.data)
    if e.get("index") is not None:
        return _set_item(state, e.data["activity"], e.data["index"], child_result=result)
    return _set_activity(state, e.data["activity"], child_result=result)


def _tool_child_step(state: ExecutionState, e: Event, call: dict[str, Any]) -> ExecutionState:
    """The end of a child workflow a journaled call started joins the activity's
    journal as that call's tool step (once: a repeated ChildFinished changes nothing)."""
    aid = e.data["activity"]
    act = state.activity(aid)
    key = (call.get("turn"), call.get("call_id"))
    if any(
        s.get("step") == "tool" and (s.get("turn"), s.get("call_id")) == key for s in act.journal
    ):
        return state
    step: dict[str, Any] = {
        "step": "tool",
        "turn": call.get("turn"),
        "call_id": call.get("call_id"),
        "tool": call.get("tool"),
        "arguments": call.get("arguments"),
        "result": e.get("output"),
        "child": e.data["child"],
    }
    if e.data["status"] != ChildStatus.COMPLETED:
        error = e.get("error") or {}
        inner = error
        while isinstance(inner.get("error"), dict) and not inner.get("message"):
            inner = inner["error"]  # an activity's failure inside the workflow's
        where = f" in activity {error['activity']!r}" if error.get("activity") else ""
        why = f": {inner.get('type')}: {inner.get('message')}" if inner.get("message") else ""
        step["error"] = {
            "type": str(error.get("type") or "ChildWorkflowFailed"),
            "message": f"the workflow ended {e.data['status']}{where}{why}"[:2000],
        }
    return _set_activity(state, aid, journal=(*act.journal, step), recoveries=0)


def _item_started(state: ExecutionState, e: Event, at: str) -> ExecutionState:
    changes: dict[str, Any] = {
        "status": ActivityStatus.RUNNING,
        "attempt": int(e.data["attempt"]),
        "timer_fired": False,
        "child_result": None,
    }
    if "input" in e.data:
        changes["input"] = e.data["input"]
    if "recovery" in e.data:  # re-run after its worker was lost: same attempt
        changes["recoveries"] = int(e.data["recovery"])
    return _set_item(state, e.data["activity"], e.data["index"], **changes)


def _item_completed(state: ExecutionState, e: Event, at: str) -> ExecutionState:
    return _set_item(
        state,
        e.data["activity"],
        e.data["index"],
        status=ActivityStatus.COMPLETED,
        output=e.get("output"),
        error=None,
    )


def _item_failed(state: ExecutionState, e: Event, at: str) -> ExecutionState:
    retry = bool(e.get("will_retry"))
    return _set_item(
        state,
        e.data["activity"],
        e.data["index"],
        status=ActivityStatus.RETRYING if retry else ActivityStatus.FAILED,
        error=e.get("error"),
        next_attempt_at=e.get("next_attempt_at"),
        timer_fired=False,
    )


_HANDLERS: dict[str, Any] = {
    EventType.EXECUTION_STARTED: _started,
    EventType.EXECUTION_COMPLETED: _finished(ExecutionStatus.COMPLETED),
    EventType.EXECUTION_FAILED: _finished(ExecutionStatus.FAILED),
    EventType.EXECUTION_CANCELLED: _finished(ExecutionStatus.CANCELLED),
    EventType.EXECUTION_CONTINUED: _continued,
    EventType.ACTIVITY_SCHEDULED: _scheduled,
    EventType.ACTIVITY_STARTED: _activity_started,
    EventType.ACTIVITY_COMPLETED: _activity_completed,
    EventType.ACTIVITY_REUSED: _activity_reused,
    EventType.ACTIVITY_FAILED: _activity_failed,
    EventType.ACTIVITY_SKIPPED: _skipped,
    EventType.TIMER_ARMED: _timer_armed,
    EventType.TIMER_FIRED: _timer_fired,
    EventType.ITERATION_COMPLETED: _iteration_completed,
    EventType.ITERATION_STARTED: _iteration_started,
    EventType.TIMER_CANCELLED: _timer_cancelled,
    EventType.SIGNAL_RECEIVED: _signal,
    EventType.APPROVAL_DECIDED: _approval,
    EventType.COMPENSATION_STARTED: _compensation_started,
    EventType.COMPENSATION_STEP_STARTED: _compensation_step,
    EventType.ACTIVITY_COMPENSATED: _compensated,
    EventType.COMPENSATION_FAILED: _compensation_failed,
    EventType.COMPENSATION_ATTEMPT_FAILED: _compensation_attempt_failed,
    EventType.CHILD_STARTED: _child_started,
    EventType.CHILD_FINISHED: _child_finished,
    EventType.ITEM_STARTED: _item_started,
    EventType.ITEM_COMPLETED: _item_completed,
    EventType.ITEM_FAILED: _item_failed,
    EventType.ACTIVITY_SUSPENDED: _suspended,
    EventType.ACTIVITY_RESUMED: _resumed,
    EventType.MODEL_CALL_COMPLETED: _journal_step("model"),
    EventType.TOOL_CALL_COMPLETED: _journal_step("tool"),
}


def state_to_json(state: ExecutionState) -> dict[str, Any]:
    """The checkpoint form: plain dicts and lists (built by hand: `asdict` deep-copies, and
    this runs on every commit)."""
    data = dict(state.__dict__)
    data.pop(_INDEX, None)
    data["activities"] = activity_index(state).checkpoint_activities()
    data["signals"] = {k: list(v) for k, v in state.signals.items()}
    data["approvals"] = dict(state.approvals)
    data["timers"] = dict(state.timers)
    for key in STATE_UNLESS_SET:
        if data[key] is None:
            del data[key]
    return data


def _activity_to_json(act: ActivityState) -> dict[str, Any]:
    """The activity's checkpoint form, made once per record: a step changes one or two
    activities, and the checkpoint holds them all. The dict is shared by every checkpoint
    that holds this record, so nothing may change it (the stores encode or copy it)."""
    cached: dict[str, Any] | None = act.__dict__.get(_JSON)
    if cached is not None:
        return cached
    data = dict(act.__dict__)
    data.pop(_BYTES, None)
    for key in _UNLESS_SET:
        if not data[key]:
            del data[key]
    act.__dict__[_JSON] = data
    return data


def activity_bytes(act: ActivityState, measure: Callable[[Any], int]) -> int:
    """The size of `act`'s checkpoint form as `measure` sizes it (the bytes of its JSON),
    measured once per record and `measure`: a step changes one or two activities."""
    cached: tuple[Callable[[Any], int], int] | None = act.__dict__.get(_BYTES)
    if cached is not None and cached[0] is measure:
        return cached[1]
    size = measure(_activity_to_json(act))
    act.__dict__[_BYTES] = (measure, size)
    return size


def state_from_json(data: Mapping[str, Any]) -> ExecutionState:
    raw = dict(data)
    raw["activities"] = {
        k: ActivityState(
            **{
                **v,
                "items": tuple(v["items"]) if v.get("items") is not None else None,
                "journal": tuple(v.get("journal") or ()),
            }
        )
        for k, v in (raw.get("activities") or {}).items()
    }
    raw["signals"] = {k: tuple(v) for k, v in (raw.get("signals") or {}).items()}
    return ExecutionState(**raw)
