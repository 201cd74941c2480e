"""Planning a rerun: which recorded results a new execution reuses, and whether a newer
definition can take them.

A rerun of execution E from activity X is a new execution (its own id, linked to E by
`rerun_of`) whose first step records `ActivityReused` for every activity upstream of X
(X's `needs`, transitively) that completed in E, then runs the rest as any execution
does. Without X nothing is reused: the whole workflow runs again on E's inputs. A result
is reused only if E still stands by it: an activity E compensated (its effect undone)
runs again.

Reusing results on a newer definition is safe only when that definition gives those
activities the same place: each still exists, with the same kind and the same `needs`,
and X exists. Anything else is refused with the reason (`Conflict`), never guessed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from wovyr.definition.model import Workflow
from wovyr.engine.core.state import ActivityStatus, ExecutionState
from wovyr.errors import Conflict, InputError, Problem
from wovyr.events import ActivityReused, Event, or_absent

__all__ = [
    "RerunPlan",
    "check_compatible",
    "incompatibility",
    "plan_rerun",
    "reused_events",
    "upstream",
]


@dataclass(frozen=True)
class RerunPlan:
    """What a rerun reuses: the activities (in definition order) and the activity it
    reruns from (None: all)."""

    reused: tuple[str, ...]
    start_from: str | None


def upstream(workflow: Workflow, activity_id: str) -> set[str]:
    """Every activity `activity_id` depends on, transitively (not itself)."""
    seen: set[str] = set()
    todo = list(workflow.activity(activity_id).needs)
    while todo:
        need = todo.pop()
        if need in seen:
            continue
        seen.add(need)
        todo.extend(workflow.activity(need).needs)
    return seen


def plan_rerun(workflow: Workflow, state: ExecutionState, start_from: str | None) -> RerunPlan:
    """The results of execution `state` (of `workflow`, its pinned definition) a rerun from
    `start_from` reuses: those of its upstream activities that completed."""
    if start_from is None:
        return RerunPlan((), None)
    if workflow.code is not None:  # a function's steps: those it asked before `start_from`
        return _plan_code_rerun(workflow, state, start_from)
    ids = [a.id for a in workflow.activities]
    if start_from not in ids:
        raise InputError(
            [
                Problem(
                    f"workflow {workflow.name!r} v{workflow.version} has no activity "
                    f"{start_from!r}",
                    path="from",
                    hint=f"activities: {', '.join(ids)}",
                )
            ]
        )
    before = upstream(workflow, start_from)
    reused = tuple(
        aid
        for aid in ids
        if aid in before and state.activity(aid).status == ActivityStatus.COMPLETED
    )
    return RerunPlan(reused, start_from)


def _plan_code_rerun(workflow: Workflow, state: ExecutionState, start_from: str) -> RerunPlan:
    """A code workflow's history lists its steps in the order its function asked for them:
    a rerun from one reuses the results of the steps asked before it that completed (the
    function replays them from those results and asks `start_from` and the rest again)."""
    ids = list(state.activities)
    if start_from not in ids:
        raise InputError(
            [
                Problem(
                    f"execution {state.id} of {workflow.name!r} v{workflow.version} has no "
                    f"step {start_from!r}",
                    path="from",
                    hint=f"steps: {', '.join(ids)}",
                )
            ]
        )
    before = ids[: ids.index(start_from)]
    reused = tuple(a for a in before if state.activity(a).status == ActivityStatus.COMPLETED)
    return RerunPlan(reused, start_from)


def incompatibility(old: Workflow, new: Workflow, plan: RerunPlan) -> str | None:
    """Why `new` cannot take the results `plan` reuses from a run of `old` (None: it can)."""
    where = f"{new.name} v{new.version}"
    if (old.code is None) != (new.code is None):
        return f"{where} and v{old.version} are not both workflow functions or both documents"
    if new.code is not None:  # its replay checks each reused step against the function
        return None
    if plan.start_from is not None and not _has(new, plan.start_from):
        return f"{where} has no activity {plan.start_from!r} to rerun from"
    for aid in plan.reused:
        if not _has(new, aid):
            return f"{where} has no activity {aid!r}, whose result the rerun would reuse"
        was, now = old.activity(aid), new.activity(aid)
        if was.kind != now.kind:
            return (
                f"activity {aid!r} is a {now.kind!r} activity in {where}, "
                f"a {was.kind!r} one in v{old.version}: its recorded result does not fit"
            )
        if set(was.needs) != set(now.needs):
            return (
                f"activity {aid!r} needs {sorted(now.needs)} in {where}, "
                f"{sorted(was.needs)} in v{old.version}: its recorded result does not fit"
            )
    return None


def check_compatible(old: Workflow, new: Workflow, plan: RerunPlan) -> None:
    """Conflict (with the reason) when `new` cannot take what `plan` reuses."""
    reason = incompatibility(old, new, plan)
    if reason is not None:
        raise Conflict(
            f"cannot rerun on the latest definition: {reason}",
            hint="rerun on the execution's own definition (without --latest)",
        )


def reused_events(
    state: ExecutionState, plan: RerunPlan, original: str, now: datetime
) -> list[Event]:
    """`ActivityReused` for each reused activity, with its recorded input and output."""
    events = []
    for aid in plan.reused:
        a = state.activity(aid)
        items: list[dict[str, Any]] | None = None
        if a.items is not None:
            keys = ("status", "attempt", "input", "output")
            items = [{k: item.get(k) for k in keys} for item in a.items]
        reused = ActivityReused(
            activity=aid,
            execution=original,
            attempt=a.attempt,
            input=a.input,
            output=a.output,
            items=or_absent(items),
        )
        events.append(reused.at(now))
    return events


def _has(workflow: Workflow, activity_id: str) -> bool:
    return activity_id in _ids(workflow)


def _ids(workflow: Workflow) -> set[str]:
    return {a.id for a in workflow.activities}
