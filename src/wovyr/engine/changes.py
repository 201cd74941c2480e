"""Changes over a runtime: signal, approve and cancel an execution, commit a step with
what it changes in its parent and children (in the same transaction), and fire due
timers. Each appends events and writes the checkpoint in one store transaction
(optimistic: retried when the log moved under it), then tells the runtime's listeners."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypedDict

from wovyr.activities.builtin.wait import WaitStep
from wovyr.definition.model import Workflow
from wovyr.engine.core.policy import children_to_cancel
from wovyr.engine.core.state import ActivityStatus, ExecutionState, fold, state_from_json
from wovyr.engine.definitions import Definitions
from wovyr.engine.quotas import check_grant
from wovyr.engine.reads import execution_view, live
from wovyr.engine.runtime import Runtime
from wovyr.engine.steps import make_step, timer_steps
from wovyr.engine.views import ExecutionView
from wovyr.errors import (
    Conflict,
    DefinitionDrift,
    ExecutionFinished,
    InputError,
    NotFound,
    Problem,
    StoreError,
)
from wovyr.events import (
    ApprovalDecided,
    ChildFinished,
    Event,
    EventType,
    ExecutionCancelled,
    SignalReceived,
    or_absent,
)
from wovyr.statuses import ExecutionStatus
from wovyr.store.audit import payload_digest
from wovyr.store.base import (
    CommitOutcome,
    ExecutionFilter,
    ExecutionRecord,
    StepWrite,
    Store,
    TimerRecord,
)

__all__ = [
    "Decision",
    "append",
    "approve",
    "cancel",
    "cancel_children",
    "commit_step",
    "fire_due_timers",
    "pinned_guard",
    "require_running",
    "signal",
    "signalled",
]


class Decision(TypedDict, total=False):
    """What an approval decision may say besides yes or no (`approve`)."""

    by: str | None
    comment: str | None
    grant: dict[str, Any] | None
    definition: Workflow | str | None


MAX_RETRIES = 50  # conflicting commits of one change before it gives up ("try again")


def _no_guard(state: ExecutionState) -> None:
    """A signal or a decision sent without a definition: nothing to compare."""


def signal(
    rt: Runtime,
    execution_id: str,
    name: str,
    payload: Any = None,
    *,
    definition: Workflow | str | None = None,
    dedup: str | None = None,
    recheck: bool = False,
) -> ExecutionView:
    """Deliver a signal; buffered until an activity waits for `name`. `definition`: see
    `pinned_guard`. `dedup` marks the signal (`SignalReceived.dedup`) so that it is
    delivered once: with `recheck` (the caller may have sent it before and died), and on
    every recomputation after the log moved (another sender may have just sent it), it is
    not appended when the execution's log already holds a signal with that mark."""
    if not name or not isinstance(name, str):
        raise InputError([Problem("a signal needs a name", path="name")])
    rt.limits.checked("the signal's payload", payload, "payload")
    pinned = pinned_guard(rt, execution_id, definition)
    look = [recheck]

    def events(state: ExecutionState, workflow: Workflow) -> list[Event]:
        require_running(state)
        pinned(state)
        if dedup is not None:
            if look[0] and signalled(rt.store, rt.tenant, state.id, dedup):
                return []
            look[0] = True
        mark = or_absent(dedup)
        return [SignalReceived(name=name, payload=payload, dedup=mark).at(rt.clock.now())]

    details = {"name": name, "payload": payload_digest(payload)}
    return append(rt, execution_id, events, ("execution.signal", details))


def signalled(store: Store, tenant: str, execution_id: str, dedup: str) -> bool:
    """Whether `execution_id`'s log holds a signal marked `dedup` (see `signal`)."""
    return any(
        e.type == EventType.SIGNAL_RECEIVED and e.data.get("dedup") == dedup
        for e in store.history(execution_id, tenant=tenant)
    )


def approve(
    rt: Runtime,
    execution_id: str,
    activity_id: str,
    approved: bool = True,
    *,
    by: str | None = None,
    comment: str | None = None,
    grant: dict[str, Any] | None = None,
    definition: Workflow | str | None = None,
) -> ExecutionView:
    """Decide an approval wait (before it is reached, the decision is kept until it is).
    `grant` (`{tokens, cost}`) approves more budget for an `agent` paused on its budget
    (`budget.on_exhausted: approval`). `definition`: see `pinned_guard`."""
    grant = check_grant(grant)
    pinned = pinned_guard(rt, execution_id, definition)

    def events(state: ExecutionState, workflow: Workflow) -> list[Event]:
        require_running(state)
        pinned(state)
        approval, approvers = _approval_of(workflow, state, activity_id)
        current = state.activity(activity_id)
        # an attempt that paused for an approval (an agent's tool call) is decided alike
        suspended = (
            current.status == ActivityStatus.WAITING
            and bool((current.wait or {}).get("suspended"))
            and (current.wait or {}).get("kind") == "approval"
        )
        if not approval and not suspended:
            raise Conflict(f"activity {activity_id!r} is not an approval")
        if current.status not in (ActivityStatus.PENDING, ActivityStatus.WAITING):
            raise Conflict(f"approval {activity_id!r} is already {current.status}")
        if activity_id in state.approvals:
            raise Conflict(f"approval {activity_id!r} was already decided")
        if approvers and by not in approvers:
            raise Conflict(
                f"{by!r} may not decide {activity_id!r}",
                hint=f"approvers: {', '.join(approvers)}",
            )
        if grant and not (suspended and (current.wait or {}).get("reason") == "budget"):
            raise Conflict(
                f"activity {activity_id!r} does not wait for more budget: a grant "
                "decides only an agent paused on its budget"
            )
        decided = ApprovalDecided(
            activity=activity_id,
            approved=bool(approved),
            by=by,
            comment=comment,
            grant=or_absent(grant if approved else None),
        )
        return [decided.at(rt.clock.now())]

    details = {
        "activity": activity_id,
        "approved": bool(approved),
        "by": by,
        "comment": None if comment is None else payload_digest(comment),
    }
    if grant:
        details["grant"] = grant
    action = "execution.approve" if approved else "execution.deny"
    return append(rt, execution_id, events, (action, details))


def _approval_of(
    workflow: Workflow, state: ExecutionState, activity_id: str
) -> tuple[bool, Sequence[str]]:
    """Whether `activity_id` is an approval wait of the execution, and who may decide it
    (NotFound when it has no such activity). A code workflow's steps are in its history,
    not its definition: what such a wait waits for is what its history recorded."""
    try:
        act = workflow.activity(activity_id)
    except KeyError:
        recorded = state.activities.get(activity_id) if workflow.code is not None else None
        if recorded is None:
            raise NotFound(f"execution {state.id} has no activity {activity_id!r}") from None
        wait = recorded.wait or {}
        return wait.get("kind") == "approval", tuple(wait.get("approvers") or ())
    step = act.step_of(WaitStep)
    approval = step.wait.approval if step is not None else None
    return approval is not None, tuple(approval.approvers) if approval is not None else ()


def cancel(
    rt: Runtime, execution_id: str, reason: str | None = None, *, by: str | None = None
) -> ExecutionView:
    """Cancel: `ExecutionCancelled` is durable when this returns; late results are refused.
    A chain's logical id (or any of its runs) cancels its live run, which ends the chain."""

    def events(state: ExecutionState, workflow: Workflow) -> list[Event]:
        require_running(state)
        return [ExecutionCancelled(reason=reason, by=by).at(rt.clock.now())]

    details = {"by": by, "reason": None if reason is None else payload_digest(reason)}
    view = append(rt, execution_id, events, ("execution.cancel", details))
    # the cascade is part of this one audited cancel, not a change of its own
    cancel_children(rt.view(rt.tenant, None), view.id, by)
    return view


def cancel_children(rt: Runtime, execution_id: str, by: str | None) -> None:
    """Cancel the running children of a cancelled execution (and theirs)."""
    for child in rt.store.list_executions(
        ExecutionFilter(
            tenant=rt.tenant, parent_id=execution_id, status=ExecutionStatus.RUNNING, limit=1000
        )
    ).items:
        with contextlib.suppress(ExecutionFinished):
            cancel(rt, child.id, reason=f"parent {execution_id} cancelled", by=by)


def pinned_guard(
    rt: Runtime, execution_id: str, definition: Workflow | str | None
) -> Callable[[ExecutionState], None]:
    """The drift guard of a signal or a decision sent with a definition (older clients
    upload the execution's definition again with each): nothing to check without one;
    else the check that the execution is pinned to the same content hash, raising
    `DefinitionDrift` (naming both hashes) when it is another. The definition is parsed
    and hashed here, once; it is never stored, and never needed."""
    if definition is None:
        return _no_guard
    sent = Definitions(rt).hash_of(definition)

    def check(state: ExecutionState) -> None:
        if state.definition_hash != sent:
            raise DefinitionDrift(execution_id, sent, state.definition_hash)

    return check


def require_running(state: ExecutionState) -> None:
    if state.finished:
        raise ExecutionFinished(f"execution {state.id} is already {state.status}")


def append(
    rt: Runtime,
    execution_id: str,
    make_events: Callable[[ExecutionState, Workflow], list[Event]],
    audit: tuple[str, dict[str, Any]] | None = None,
) -> ExecutionView:
    """Append what `make_events` returns (recomputed when the log moved); `audit`, the
    (action, details) of the change, rides on the step that applies."""
    definitions = Definitions(rt)
    for _ in range(MAX_RETRIES):
        record = live(rt, execution_id)  # a chain's live run (re-read on each conflict)
        state = state_from_json(record.checkpoint or {})
        workflow = definitions.definition(record.definition_hash)
        events = make_events(state, workflow)
        if not events:  # nothing to change (a signal delivered before)
            return execution_view(definitions, record, state)
        after = fold(events, state)
        step = make_step(
            record.id, state, after, events, rt.clock.now(), tenant=rt.tenant, ready=True
        )
        if audit is not None:
            step = replace(step, audit=rt.audit_entry(audit[0], record.id, audit[1]))
        outcome = commit_step(rt, step, after)
        if outcome is CommitOutcome.OK:
            rt.notify(record.id)
            return execution_view(definitions, record, after)
        if outcome is CommitOutcome.NOT_FOUND:
            break
    else:
        raise StoreError(f"execution {execution_id} kept changing; try again")
    raise NotFound(f"execution {execution_id} not found")


def commit_step(rt: Runtime, step: StepWrite, after: ExecutionState) -> CommitOutcome:
    """Commit one step, with what it changes in other executions in the SAME transaction:
    when it finishes a child workflow, `ChildFinished` is appended to the parent, so a
    parent never misses its child's end; when it fails attempts whose child workflows
    outlived their `timeout`, those children are cancelled (a crash cannot leave a child
    running that nobody waits for)."""
    cancels = children_to_cancel(step.events)
    if not (after.finished and after.parent) and not cancels:
        return rt.store.commit([step])[0]
    tenant = step.tenant  # a parent and its children are of one tenant
    for _ in range(MAX_RETRIES):
        others = parent_step(rt, tenant, after) + cancel_steps(rt, tenant, after, cancels)
        if not others:
            return rt.store.commit([step])[0]
        own, *theirs = rt.store.commit([step, *others], atomic=True)
        if own is not CommitOutcome.OK:
            return own
        if all(outcome is CommitOutcome.OK for outcome in theirs):
            for other in others:
                rt.notify(other.execution_id, tenant)
            owner = rt.for_tenant(tenant)
            for child in cancels:  # their own children, as a cancel does (best effort)
                cancel_children(owner, child, after.id)
            return own
    raise StoreError(f"the executions {after.id} changes kept changing; try again")


def parent_step(rt: Runtime, tenant: str, after: ExecutionState) -> list[StepWrite]:
    """`ChildFinished` on the parent (of `tenant`) of a child that `after` finishes (if
    it runs)."""
    parent = after.parent
    if not (after.finished and parent):
        return []
    record = rt.store.load(parent["id"], tenant)
    if record is None or record.status != ExecutionStatus.RUNNING:
        return []
    before = state_from_json(record.checkpoint or {})
    now = rt.clock.now()
    event = ChildFinished(
        activity=parent["activity"],
        index=parent.get("index"),
        attempt=parent.get("attempt"),
        child=after.id,
        status=after.status,
        output=after.output,
        error=after.error,
        call=or_absent(parent.get("call")),
    ).at(now)
    after_parent = fold([event], before)
    return [make_step(record.id, before, after_parent, [event], now, tenant=tenant, ready=True)]


def cancel_steps(
    rt: Runtime, tenant: str, parent: ExecutionState, children: list[str]
) -> list[StepWrite]:
    """`ExecutionCancelled` for each child (still running) whose timeout fired. Its end
    is not told back to the parent: the parent's step records the timeout itself."""
    steps = []
    now = rt.clock.now()
    for child in children:
        record = rt.store.load(child, tenant)
        if record is None or record.status != ExecutionStatus.RUNNING:
            continue
        before = state_from_json(record.checkpoint or {})
        reason = f"the activity that started it in {parent.id} timed out"
        event = ExecutionCancelled(reason=reason, by=parent.id).at(now)
        after = fold([event], before)
        steps.append(make_step(child, before, after, [event], now, tenant=tenant, ready=True))
    return steps


def fire_due_timers(rt: Runtime, limit: int = 500) -> int:
    """Fire the timers due now, up to `limit`, in ONE transaction (each execution's due
    timers become `TimerFired` events in one step); returns how many fired. A step that
    conflicts with a concurrent change is left for the next pass: its rows stay due.
    On a store with `TimerLocking` (PostgreSQL), concurrent dispatchers take disjoint
    sets of due timers (SKIP LOCKED) instead of all reading the same ones."""
    now = rt.clock.now()
    store = rt.store

    def build(
        timers: list[TimerRecord], records: Mapping[tuple[str, str], ExecutionRecord]
    ) -> list[StepWrite]:
        return timer_steps(now, timers, records)

    locking = rt.timer_locking
    if locking is not None:
        done = locking.fire_timers(now, limit, build)
    else:
        timers = store.due_timers(now, limit)
        records = {}
        for tenant, execution_id in dict.fromkeys((t.tenant, t.execution_id) for t in timers):
            record = store.load(execution_id, tenant)
            if record is not None:
                records[record.key] = record
        steps = build(timers, records)
        done = list(zip(steps, store.commit(steps), strict=True)) if steps else []
    fired = 0
    for step, outcome in done:
        if outcome is CommitOutcome.OK and step.events:
            fired += len(step.events)
            rt.notify(step.execution_id, step.tenant)
    return fired
