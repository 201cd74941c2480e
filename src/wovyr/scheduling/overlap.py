"""The overlap policy of a schedule, as a pure function of the ticks due and what runs.

Given the ticks to consider (buffered ones first, then the new ones, in order), the ids of
the executions the schedule started that still run, and how many starts it has left, decide
which ticks start now, which running executions to cancel, which ticks wait, and how many
are skipped. No store, no clock: the schedules service turns the answer into one fire.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

__all__ = ["MAX_BUFFER", "OVERLAP_POLICIES", "OverlapPlan", "plan_overlap"]

OVERLAP_POLICIES = ("skip", "buffer_one", "buffer_all", "cancel_other", "allow_all")
MAX_BUFFER = 1000


@dataclass(frozen=True)
class OverlapPlan:
    start: tuple[datetime, ...]  # ticks to start now, in order
    cancel: tuple[str, ...]  # running executions that `cancel_other` supersedes
    buffered: tuple[str, ...]  # ticks (ISO 8601) that wait for the running one to end
    skipped: int


def plan_overlap(
    policy: str,
    queue: Sequence[datetime],
    running: Sequence[str],
    execution_id: Callable[[datetime], str],
    budget: int | None = None,
) -> OverlapPlan:
    """`execution_id(tick)` names the execution a tick would start; `budget` is how many
    starts the schedule has left (None: no limit)."""
    start: list[datetime] = []
    cancel: list[str] = []
    buffered: list[str] = []
    skipped = 0
    busy = list(running)
    for tick in queue:
        if budget is not None and len(start) >= budget:
            skipped += 1
            continue
        if busy and policy == "skip":
            skipped += 1
            continue
        if busy and policy == "buffer_one":
            if buffered:
                skipped += 1
            else:
                buffered.append(tick.isoformat())
            continue
        if busy and policy == "buffer_all":
            if len(buffered) < MAX_BUFFER:
                buffered.append(tick.isoformat())
            else:
                skipped += 1
            continue
        if busy and policy == "cancel_other":
            cancel.extend(b for b in busy if b in running and b not in cancel)
            superseded = [t for t in start if execution_id(t) in busy]  # started this pass
            start = [t for t in start if t not in superseded]
            skipped += len(superseded)
            busy = []
        start.append(tick)
        busy.append(execution_id(tick))
    return OverlapPlan(tuple(start), tuple(cancel), tuple(buffered), skipped)
