"""Starts over a runtime: THE start path (`submit`), a start prepared for another writer
(a schedule's fire), the children of `workflow` activities and of an agent's tool calls,
a rerun of a finished execution, and the next run of a continue-as-new chain."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any, TypedDict

from wovyr.definition.expr import PASS_WORK, Costs, render
from wovyr.definition.inputs import resolve_inputs
from wovyr.definition.model import Workflow
from wovyr.engine.changes import cancel
from wovyr.engine.core.bounds import ExecutionBytes
from wovyr.engine.core.decide import decide, start_events
from wovyr.engine.core.state import ExecutionState, ExecutionStatus, fold, state_from_json
from wovyr.engine.definitions import Definitions
from wovyr.engine.flow import MAX_KEY_LENGTH, gated
from wovyr.engine.labels import check_labels, execution_labels
from wovyr.engine.quotas import start_debits
from wovyr.engine.reads import load
from wovyr.engine.rerun import check_compatible, plan_rerun, reused_events
from wovyr.engine.runtime import Runtime
from wovyr.engine.steps import make_step
from wovyr.engine.usage import tenant_quotas
from wovyr.errors import Conflict, ExecutionFinished, ExpressionError, InputError, NotFound, Problem
from wovyr.events import Event, EventType, SignalReceived
from wovyr.ids import (
    is_chain_run_id,
    new_id,
    validate_execution_id,
)
from wovyr.store.audit import payload_digest
from wovyr.store.base import ExecutionRecord, NewExecution
from wovyr.store.codec import json_bytes
from wovyr.store.records import MAX_PRIORITY, SlotRequest
from wovyr.traces import TraceContext

__all__ = [
    "PreparedOptions",
    "RerunOptions",
    "StartOptions",
    "Started",
    "check_id",
    "check_priority",
    "concurrency_key",
    "continuation",
    "enforce_on_limit",
    "new_execution",
    "prepare_start",
    "rerun",
    "submit",
]


class StartOptions(TypedDict, total=False):
    """What a start may name besides the definition and its input (`submit`)."""

    name: str | None
    version: str | None
    path: Path | None
    execution_id: str | None
    parent_id: str | None
    lease_owner: str | None
    lease_seconds: float
    labels: Mapping[str, str] | None
    priority: int | None


class PreparedOptions(TypedDict, total=False):
    """What `prepare_start` takes besides the definition, its hash and its input."""

    execution_id: str | None
    parent_id: str | None
    lease_owner: str | None
    lease_seconds: float
    extra: dict[str, Any] | None
    priority: int | None
    trace: TraceContext | None


class RerunOptions(TypedDict, total=False):
    """What `rerun` takes besides the execution it reruns."""

    start_from: str | None
    input: Mapping[str, Any] | None
    latest: bool
    new_id: str | None


@dataclass(frozen=True)
class Started:
    """What a start did: the execution, and whether this call created it (False: an
    execution with that id already existed and is returned unchanged)."""

    record: ExecutionRecord
    created: bool


def concurrency_key(template: str, inputs: Mapping[str, Any]) -> str:
    """The value of a workflow's `concurrency.key` for `inputs` (text; a value of another
    type as JSON); a key that cannot be evaluated refuses the start."""
    try:
        value = render(template, {"inputs": inputs}, where="concurrency.key")
    except ExpressionError as exc:
        raise InputError([Problem(exc.message, path="concurrency.key")]) from None
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    if not text or len(text) > MAX_KEY_LENGTH:
        raise InputError(
            [
                Problem(
                    f"the concurrency key must be 1 to {MAX_KEY_LENGTH} characters "
                    f"(it was {len(text)})",
                    path="concurrency.key",
                )
            ]
        )
    return text


def check_priority(priority: int | None) -> None:
    """A start's priority is an integer 0-9 (None: 0)."""
    if priority is None:
        return
    if (
        isinstance(priority, bool)
        or not isinstance(priority, int)
        or not 0 <= priority <= MAX_PRIORITY
    ):
        raise InputError(
            [Problem(f"priority must be an integer from 0 to {MAX_PRIORITY}", path="priority")]
        )


def check_id(execution_id: str) -> None:
    """A caller-chosen execution id is acceptable (one alphabet and length for every id,
    chosen or derived: `wovyr.ids`)."""
    try:
        validate_execution_id(execution_id)
    except ValueError as exc:
        raise InputError([Problem(str(exc), path="id")]) from None
    if is_chain_run_id(execution_id):
        raise InputError(
            [
                Problem(
                    "ids ending in '~c<number>' are reserved for the runs of a "
                    "continue-as-new chain",
                    path="id",
                    hint="choose another id; a chain's later runs are reached by its first id",
                )
            ]
        )


def submit(
    rt: Runtime,
    definition: Workflow | str | None = None,
    input: Mapping[str, Any] | None = None,
    *,
    name: str | None = None,
    version: str | None = None,
    path: Path | None = None,
    execution_id: str | None = None,
    claim_id: Callable[[], str] | None = None,
    parent_id: str | None = None,
    lease_owner: str | None = None,
    lease_seconds: float = 30.0,
    labels: Mapping[str, str] | None = None,
    priority: int | None = None,
    trace: TraceContext | None = None,
) -> Started:
    """THE start path (every edge calls it): resolve what is named and check the id; an
    execution that has the id is returned as it is (its definition and inputs were fixed
    when it started); else the inputs are checked and the execution is created. Ids are
    per tenant: another tenant's execution with the same id is another execution, never
    seen nor touched from here. `claim_id`,
    when given, is called once the request is valid (inputs included) and before anything
    is read or written under the id, for the id to use: e.g. the execution an
    Idempotency-Key already holds. `trace`: the caller's W3C trace context (an API
    request's `traceparent`), which the start's span continues when tracing is on."""
    workflow, digest = Definitions(rt).target(definition, name=name, version=version, path=path)
    if execution_id is not None:
        check_id(execution_id)
    check_priority(priority)
    Definitions(rt).check_side_effects(workflow)
    if labels:
        labels = check_labels(labels)
    inputs = None
    if claim_id is not None:  # a claim is spent only on a valid start: inputs first
        inputs = rt.limits.checked("the input", resolve_inputs(workflow, input), "input")
        if workflow.labels:  # and labels that render
            execution_labels(workflow, inputs, labels)
        execution_id = claim_id()
    existing = rt.store.load(execution_id, rt.tenant) if execution_id else None
    if existing is not None:  # its definition and inputs were fixed when it started
        return Started(existing, created=False)
    if inputs is None:
        inputs = rt.limits.checked("the input", resolve_inputs(workflow, input), "input")
    new = new_execution(
        rt,
        workflow,
        digest,
        inputs,
        execution_id=execution_id,
        parent_id=parent_id,
        lease_owner=lease_owner,
        lease_seconds=lease_seconds,
        labels=labels,
        priority=priority,
        trace=trace,
    )
    if rt.actor is not None:  # (the input's digest only for a record that is kept)
        audit = rt.audit_entry(
            "execution.start",
            new.id,
            {
                "workflow": new.workflow,
                "version": new.version,
                "definition_hash": digest,
                "input": payload_digest(inputs),
            },
        )
        new = replace(new, audit=audit)
    created, record = rt.store.create_execution(new)
    if created and new.lease_owner is None:  # a leased start is driven by its owner already
        rt.notify(new.id)
    if created:
        enforce_on_limit(rt, new)
    return Started(record, created)


def enforce_on_limit(rt: Runtime, new: NewExecution) -> None:
    """After `new` was created: when it waits for a slot of its concurrency key and its
    workflow says `on_limit: cancel_new`, cancel it; `cancel_oldest`, cancel the oldest
    holder of the key (whose end hands its slot on, in start order). Each cancel is a
    change of its own (audited as such); `queue` does nothing here."""
    slot = new.slot
    if slot is None:
        return
    started = new.first_step.events[0].data.get("concurrency") or {}
    on_limit = started.get("on_limit", "queue")
    if on_limit == "queue":
        return
    state = rt.store.slot_state(new.tenant, slot.key)
    if new.id not in state.waiting:
        return
    reason = f"concurrency {slot.key}: {slot.limit} running (on_limit: {on_limit})"
    target = new.id if on_limit == "cancel_new" else None
    if target is None and state.holders:
        target = state.holders[0]
    if target is not None:
        with contextlib.suppress(ExecutionFinished, NotFound):
            cancel(rt.for_tenant(new.tenant), target, reason=reason, by="concurrency")


def prepare_start(
    rt: Runtime,
    workflow: Workflow,
    digest: str,
    input: Mapping[str, Any] | None = None,
    *,
    execution_id: str | None = None,
    parent_id: str | None = None,
    lease_owner: str | None = None,
    lease_seconds: float = 30.0,
    extra: dict[str, Any] | None = None,
    priority: int | None = None,
    trace: TraceContext | None = None,
) -> NewExecution:
    """The row and first step of a new execution, for a store to create (maybe together
    with other writes, as a schedule fire does). When `lease_owner` will drive it, the
    first decision (the root activities' `ActivityStarted`) rides in the same commit.
    The inputs and the side-effect policy are checked as `submit` checks them; the id is
    the caller's to derive."""
    Definitions(rt).check_side_effects(workflow)
    check_priority(priority)
    return new_execution(
        rt,
        workflow,
        digest,
        rt.limits.checked("the input", resolve_inputs(workflow, input), "input"),
        execution_id=execution_id,
        parent_id=parent_id,
        lease_owner=lease_owner,
        lease_seconds=lease_seconds,
        extra=extra,
        priority=priority,
        trace=trace,
    )


def new_execution(
    rt: Runtime,
    workflow: Workflow,
    digest: str,
    inputs: dict[str, Any],
    *,
    execution_id: str | None,
    parent_id: str | None,
    lease_owner: str | None,
    lease_seconds: float,
    extra: dict[str, Any] | None = None,
    carried: list[Event] | None = None,
    reused: list[Event] | None = None,
    rerun_of: str | None = None,
    labels: Mapping[str, str] | None = None,
    priority: int | None = None,
    trace: TraceContext | None = None,
) -> NewExecution:
    """A new execution of `workflow` on inputs already checked. `carried`: events that
    follow its start in its first step (the buffered signals a continued run takes
    over); with them, it is the next run of a chain (its own debits, see below).
    `reused`: the `ActivityReused` events of a rerun (of `rerun_of`), after its start.
    `labels`: given at start, over the definition's rendered `labels`. `trace`: the
    context the start's span continues (the tracer's hook records the span; its
    context is stored in `ExecutionStarted`)."""
    now = rt.clock.now()
    exec_id = execution_id or new_id(now)
    traced = rt.tracer.execution_started(
        trace,
        tenant=rt.tenant,
        execution_id=exec_id,
        workflow=workflow.name,
        version=workflow.version,
    )
    if traced is not None:
        extra = {**(extra or {}), "trace": traced}
    tags = execution_labels(workflow, inputs, labels) if workflow.labels or labels else {}
    if tags:
        extra = {**(extra or {}), "labels": tags}
    if priority:
        extra = {**(extra or {}), "priority": priority}
    slot = None
    if workflow.concurrency is not None:
        spec = workflow.concurrency
        slot = SlotRequest(key=concurrency_key(spec.key, inputs), limit=spec.limit)
        taken = {"key": slot.key, "limit": slot.limit, "on_limit": spec.on_limit}
        extra = {**(extra or {}), "concurrency": taken}
        lease_owner = None  # it may wait for a slot: a worker claims it once it may run
    if lease_owner is not None and (gated(workflow) or workflow.code is not None):
        # its first attempts may have to wait, or only a worker holding its code can
        # replay its function: no decision here
        lease_owner = None
    events = start_events(workflow, digest, inputs, now, parent_id=parent_id, extra=extra)
    events += carried or []
    events += reused or []
    empty = ExecutionState(id=exec_id)
    state = fold(events, empty)
    if lease_owner is not None:
        decision = decide(
            workflow,
            state,
            now,
            max_items=rt.limits.max_items,
            max_recoveries=rt.limits.max_recoveries,
            costs=Costs(PASS_WORK),  # the rest (if any) is decided by its worker
            bounds=ExecutionBytes(rt.limits.value_limits).step(state),
        )
        assert decision.state is not None
        # a run that would continue as new at once is left to its worker, whose commit
        # creates the chain's next run with it
        if decision.state.status != ExecutionStatus.CONTINUED:
            events, state = events + decision.events, decision.state
    step = make_step(exec_id, empty, state, events, now, tenant=rt.tenant, ready=True)
    quotas = tenant_quotas(rt)
    return NewExecution(
        id=exec_id,
        tenant=rt.tenant,
        workflow=workflow.name,
        version=workflow.version,
        definition_hash=digest,
        created_at=now,
        input=inputs,
        first_step=step,
        parent_id=parent_id,
        rerun_of=rerun_of,
        labels=tags,
        lease_owner=lease_owner,
        lease_until=now + timedelta(seconds=lease_seconds) if lease_owner else None,
        # a chain's next run was admitted (and debited) by `continue_hold`
        debits=() if carried is not None else start_debits(quotas, now, lambda: json_bytes(inputs)),
        # a chain's next run replaces its last: the running count does not grow
        max_running=None if carried is not None else quotas.concurrent_executions,
        priority=priority or 0,
        slot=slot,
    )


def rerun(
    rt: Runtime,
    execution_id: str,
    *,
    start_from: str | None = None,
    input: Mapping[str, Any] | None = None,
    latest: bool = False,
    new_id: str | None = None,
) -> ExecutionRecord:
    """Start a new execution that reruns the finished execution `execution_id` (of this
    tenant: another tenant's is NotFound) on its inputs overlaid with `input`: the
    results of the activities upstream of `start_from` that completed are recorded as
    reused (`ActivityReused`, nothing runs for them) and the rest runs. On the
    execution's pinned definition, or with `latest` on the newest registered version
    of its workflow, when that can take the reused results (else Conflict, saying why;
    see `wovyr.engine.rerun`). The new execution names the original (`rerun_of`)."""
    record = load(rt, execution_id)
    if record.status not in (
        ExecutionStatus.COMPLETED,
        ExecutionStatus.FAILED,
        ExecutionStatus.CANCELLED,
    ):
        raise Conflict(
            f"execution {execution_id} is {record.shown_status}: only a completed, failed "
            "or cancelled execution can be rerun",
            hint="cancel it first" if record.status == ExecutionStatus.RUNNING else None,
        )
    if new_id is not None:
        check_id(new_id)
    state = state_from_json(record.checkpoint or {})
    pinned = Definitions(rt).definition(record.definition_hash)
    plan = plan_rerun(pinned, state, start_from)
    workflow, digest = pinned, record.definition_hash
    if latest:
        try:
            workflow, digest = Definitions(rt).named(pinned.name)
        except NotFound as exc:  # the execution exists: a 404 would say it does not
            raise Conflict(
                f"cannot rerun on the latest definition: {exc.message}", hint=exc.hint
            ) from None
        if digest != record.definition_hash:
            check_compatible(pinned, workflow, plan)
    Definitions(rt).check_side_effects(workflow)
    given = {**state.input, **dict(input or {})}
    inputs = rt.limits.checked("the input", resolve_inputs(workflow, given), "input")
    now = rt.clock.now()
    new = new_execution(
        rt,
        workflow,
        digest,
        inputs,
        execution_id=new_id,
        parent_id=None,
        lease_owner=None,
        lease_seconds=0.0,
        extra={"rerun_of": {"id": record.id, "from": start_from}},
        reused=reused_events(state, plan, record.id, now),
        rerun_of=record.id,
        labels={**(state.labels or {}), **execution_labels(workflow, inputs)},
    )
    audit = rt.audit_entry(
        "execution.rerun",
        new.id,
        {
            "rerun_of": record.id,
            "from": start_from,
            "reused": list(plan.reused),
            "definition_hash": digest,
            "input": payload_digest(inputs),
        },
    )
    created, started = rt.store.create_execution(replace(new, audit=audit))
    if not created:
        raise Conflict(f"execution {new.id} exists already", hint="choose another id")
    rt.notify(new.id)
    return started


def continuation(rt: Runtime, after: ExecutionState, events: list[Event]) -> NewExecution:
    """The chain's next run, for the step that ends `after` with `ExecutionContinued`
    (among `events`): the same pinned definition, the event's inputs and id, linked to
    this run, with this run's buffered signals (those no wait consumed) carried over in
    the order each name received them."""
    ended = next(e for e in reversed(events) if e.type == EventType.EXECUTION_CONTINUED)
    workflow = Definitions(rt).definition(after.definition_hash)
    now = rt.clock.now()
    carried = [
        SignalReceived(name=name, payload=payload).at(now)
        for name, payloads in after.signals.items()
        for payload in payloads
    ]
    chain = {"root": after.chain_root, "run": int(ended.data["run"])}
    return new_execution(
        rt,
        workflow,
        after.definition_hash,
        dict(ended.data["input"]),
        execution_id=str(ended.data["continued_as"]),
        parent_id=None,
        lease_owner=None,
        lease_seconds=0.0,
        extra={"continued_from": after.id, "chain": chain},
        carried=carried,
        labels={**(after.labels or {}), **execution_labels(workflow, ended.data["input"])},
        priority=after.priority,
        trace=after.trace,  # a chain is one trace
    )
