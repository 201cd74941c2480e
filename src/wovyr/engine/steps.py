"""Turning a state transition into a `StepWrite` (also the steps that fire due timers)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from wovyr.engine.core.shown import waiting_on
from wovyr.engine.core.state import (
    STATE_UNLESS_SET,
    ExecutionState,
    fold,
    state_from_json,
    state_to_json,
)
from wovyr.events import Event, TimerFired
from wovyr.store.base import ExecutionRecord, StepWrite, TimerRecord
from wovyr.store.flow import FlowAcquire
from wovyr.store.records import CheckpointChanges, Debit, NewExecution, SlotRelease

__all__ = ["checkpoint_changes", "make_step", "timer_steps"]

_MISSING = object()


def make_step(
    execution_id: str,
    before: ExecutionState,
    after: ExecutionState,
    events: Sequence[Event],
    now: datetime,
    *,
    tenant: str,
    fence: int | None = None,
    ready: bool,
    release_lease: bool = False,
    debits: Sequence[Debit] = (),
    flow_released: Sequence[tuple[str, str]] = (),
    continued_as: NewExecution | None = None,
    gate: FlowAcquire | None = None,
) -> StepWrite:
    """The write for `before -> after` of execution (`tenant`, `execution_id`): timer rows
    follow the state's armed timers. The rest is `StepWrite`'s, given here so that a step
    is built once (a worker builds one per step of every execution it drives)."""
    armed = [
        (tid, datetime.fromisoformat(info["fire_at"]))
        for tid, info in after.timers.items()
        if tid not in before.timers
    ]
    removed = [tid for tid in before.timers if tid not in after.timers]
    slot = after.concurrency
    released = None
    if slot and after.finished and not before.finished:  # the end gives its slot back
        released = SlotRelease(key=str(slot["key"]), limit=int(slot["limit"]))
    checkpoint = state_to_json(after)
    return StepWrite(
        execution_id=execution_id,
        expected_seq=before.seq,
        events=list(events),
        checkpoint=checkpoint,
        status=after.status,
        updated_at=now,
        fence=fence,
        ready=ready and not after.finished,
        release_lease=release_lease,
        waiting_on=waiting_on(after),
        output=after.output,
        error=after.error,
        timers_armed=armed,
        timers_removed=removed,
        tenant=tenant,
        slot_released=released,
        changes=checkpoint_changes(before, after, checkpoint),
        debits=debits,
        flow_released=flow_released,
        continued_as=continued_as,
        gate=gate,
    )


def checkpoint_changes(
    before: ExecutionState, after: ExecutionState, checkpoint: dict[str, Any]
) -> CheckpointChanges | None:
    """What `checkpoint` (the form of `after`) changes of the form of `before`: the
    top-level values and activities that are other objects (a state shares what an event
    left alone). None when activities were dropped or came anywhere but at the end."""
    was, now = before.activities, after.activities
    forms = checkpoint["activities"]
    changed = {k: forms[k] for k, act in now.items() if was.get(k) is not act}
    if len(now) != len(was):
        new = [k for k in changed if k not in was]
        if len(now) != len(was) + len(new) or list(now)[len(was) :] != new:
            return None
    elif any(k not in was for k in changed):
        return None
    old, fields = before.__dict__, after.__dict__
    return CheckpointChanges(
        set={
            k: v
            for k, v in checkpoint.items()
            if k != "activities" and old.get(k, _MISSING) is not fields[k]
        },
        drop=[k for k in STATE_UNLESS_SET if fields[k] is None and old.get(k) is not None],
        activities=changed,
    )


def timer_steps(
    now: datetime,
    timers: list[TimerRecord],
    records: Mapping[tuple[str, str], ExecutionRecord],
) -> list[StepWrite]:
    """One step per execution with due timers: its `TimerFired` events (and the removal of
    rows for timers its state no longer holds; such a step alone does not wake it).
    `records` holds the executions by (tenant, id)."""
    due: dict[tuple[str, str], list[str]] = {}
    for timer in timers:
        due.setdefault((timer.tenant, timer.execution_id), []).append(timer.timer_id)
    steps = []
    for (tenant, execution_id), timer_ids in due.items():
        record = records.get((tenant, execution_id))
        if record is None:
            continue
        state = state_from_json(record.checkpoint or {})
        events = [
            TimerFired(timer=t, fired_at=now.isoformat()).at(now)
            for t in timer_ids
            if t in state.timers
        ]
        after = fold(events, state)
        step = make_step(execution_id, state, after, events, now, tenant=tenant, ready=bool(events))
        stale = [t for t in timer_ids if t not in state.timers]
        if not events:  # stale rows only: remove them without waking the execution
            step = replace(step, timers_removed=stale, ready=record.ready)
        else:
            step = replace(step, timers_removed=[*step.timers_removed, *stale])
        steps.append(step)
    return steps
