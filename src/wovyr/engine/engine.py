"""The engine facade: start, signal, approve, cancel, query, list and history.

Every method that changes an execution appends events and writes the checkpoint in one
store transaction (optimistic: it retries when the sequence moved under it). Nothing here
runs activities; workers do (see `wovyr.worker`). In-process listeners are told after each
change so a local worker reacts at once instead of at its next poll.
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import json
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

from wovyr.activities.base import ActivityRegistry, NonRetryableError, default_registry
from wovyr.activities.builtin.wait import WaitStep
from wovyr.activities.kinds import SecretResolver
from wovyr.activities.policy import SideEffectPolicy
from wovyr.activities.providers import BoundCredentials, CredentialResolver, Providers
from wovyr.activities.sandbox import ShellSandbox
from wovyr.clock import Clock, SystemClock
from wovyr.definition.expr import PASS_WORK, Costs, render
from wovyr.definition.inputs import resolve_inputs
from wovyr.definition.model import ChildWorkflowSpec, Workflow
from wovyr.engine.attempts import attempt_entries
from wovyr.engine.core.bounds import MAX_EXECUTION_BYTES, ExecutionBytes, ValueLimits
from wovyr.engine.core.decide import decide, start_events
from wovyr.engine.core.policy import MAX_RECOVERIES, RunActivity, children_to_cancel
from wovyr.engine.core.state import (
    ActivityStatus,
    ExecutionState,
    ExecutionStatus,
    fold,
    state_from_json,
)
from wovyr.engine.core.waits import CONTINUE_HOLD, QUOTA_HOLD
from wovyr.engine.definitions import (
    DEFINITION_CACHE,
    SOURCE_CACHE,
    STORED_CACHE,
    Definitions,
    Lru,
)
from wovyr.engine.flow import gated
from wovyr.engine.labels import check_labels, execution_labels
from wovyr.engine.quotas import (
    EXECUTIONS,
    MODEL_COST,
    MODEL_TOKENS,
    SECONDS,
    STORED,
    QuotaCache,
    Quotas,
    check_grant,
    day_of,
    midnight_after,
    model_debits,
    model_quota_exhausted,
    quotas_of,
    set_quotas,
    start_debits,
    stored_debits,
)
from wovyr.engine.rerun import check_compatible, plan_rerun, reused_events
from wovyr.engine.retention import Retention, retention_of, set_retention
from wovyr.engine.steps import make_step, timer_steps
from wovyr.engine.views import ExecutionView, build_view, shown_events, status_filter
from wovyr.errors import (
    Conflict,
    DefinitionDrift,
    ExecutionFinished,
    ExpressionError,
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
    TimerArmed,
    or_absent,
)
from wovyr.ids import (
    ID_RULE,
    child_id,
    continued_id,
    derived_id,
    is_chain_run_id,
    is_execution_id,
    new_id,
    validate_execution_id,
)
from wovyr.store import check_store, open_store
from wovyr.store.audit import payload_digest
from wovyr.store.base import (
    DEFAULT_TENANT,
    CommitOutcome,
    EventRecord,
    ExecutionFilter,
    ExecutionRecord,
    NewExecution,
    Page,
    StepWrite,
    Store,
    TimerRecord,
)
from wovyr.store.capabilities import capabilities
from wovyr.store.codec import (
    MAX_DEPTH,
    MAX_PAYLOAD_BYTES,
    PayloadRefused,
    check_payload,
    json_bytes,
    json_depth,
)
from wovyr.store.flow import FlowKey, RateLimitRecord
from wovyr.store.records import MAX_PRIORITY, Debit, SlotRequest
from wovyr.traces import NO_TRACER, TraceContext, Tracer

__all__ = ["DEFAULT_TIMEOUT", "Engine", "ExecutionView", "Started", "check_priority"]

Listener = Callable[[str, str], None]  # told (tenant, execution id) of each change
DEFAULT_TIMEOUT = 300.0  # seconds an attempt may take when its definition gives no timeout
_T = TypeVar("_T")
_MAX_RETRIES = 50
_SOURCE_CACHE = 256
_NAME_MATCHES = 50  # workflow names one name search lists executions of
MAX_KEY_LENGTH = 500  # characters of a concurrency key's value


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


def _no_guard(state: ExecutionState) -> None:
    """A signal or a decision sent without a definition: nothing to compare."""


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


def _check_id(execution_id: str) -> None:
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


def _continue_timer(state: ExecutionState, fire_at: datetime, reason: str) -> TimerArmed:
    """The durable timer holding the hand-over of `state`'s run (`Engine.continue_hold`)."""
    return TimerArmed(
        timer=f"{CONTINUE_HOLD}:{state.seq}",
        purpose=CONTINUE_HOLD,
        fire_at=fire_at.isoformat(),
        reason=reason,
    )


class Engine(Definitions):
    """One public API over a store. Thread-safe; cheap to share."""

    def __init__(
        self,
        store: Store,
        *,
        clock: Clock | None = None,
        activities: ActivityRegistry | None = None,
        tenant: str = DEFAULT_TENANT,
        max_child_depth: int = 10,
        max_items: int = 10_000,
        max_recoveries: int = MAX_RECOVERIES,
        side_effects: SideEffectPolicy | None = None,
        default_timeout: float = DEFAULT_TIMEOUT,
        max_payload_bytes: int = MAX_PAYLOAD_BYTES,
        min_schedule_interval: float = 1.0,
        min_continue_interval: float = 1.0,
        secrets: SecretResolver | None = None,
        providers: Providers | None = None,
        credentials: CredentialResolver | None = None,
        tracer: Tracer | None = None,
        shell_sandbox: ShellSandbox | None = None,
        max_execution_bytes: int | None = MAX_EXECUTION_BYTES,
    ) -> None:
        """`providers`: the model providers `llm` and `agent` activities may call (none by default);
        `credentials`: how a provider's API key is resolved from its config, in the worker
        once per attempt (never stored; by default only keys bound to the providers' own
        configs). `max_recoveries`: how often an activity (an item, a compensation) is
        run again after its attempt was lost with its worker (process killed, lease expired)
        before it fails with `RecoveryBudgetExhausted`; such re-runs never count against its
        `retry.max_attempts`. `side_effects`: one policy for what `shell` and `http`
        activities of every tenant may do; None (the default) reads each tenant's from the
        store (`wovyr.engine.tenants`: the local owner's tenant `default` is trusted, any
        other restricted until an administrator opens it). `default_timeout`: the seconds an
        attempt (an activity's or a compensation's) may take when its definition gives no
        `timeout`. `max_payload_bytes`: the largest JSON a start's inputs, a signal's
        payload or an activity's output may be (each also nests at most 64 levels deep),
        and so may every value a step records (`set` outputs, rendered inputs, a
        `for_each`'s outputs together: `wovyr.engine.core.bounds`). `max_execution_bytes`:
        the most one execution's checkpoint may hold (None: no bound); a value that would
        take it past fails its activity (`ExecutionTooLarge`).
        `min_schedule_interval`: the fewest seconds between two fires any schedule may be
        set to (store-wide; a tenant's `max_schedule_rate` quota may ask for more).
        `min_continue_interval`: the fewest seconds between the starts of two runs of one
        continue-as-new chain (0: none); a run that ends sooner holds its hand-over on a
        durable timer until then (`continue_hold`).
        `secrets`: what workers resolve `${{ secrets.NAME }}` with at dispatch (the edges
        pass `wovyr.platform.secrets.Secrets`); None: an attempt that references a secret
        fails, not retried, saying no secrets are configured. `tracer`: the tracing hooks
        (`wovyr.traces`; off by default): starts record their span's context, attempts
        open spans under it. `shell_sandbox`: what isolated `shell` steps do not see and
        whom they run as (the edges pass `Settings.shell_sandbox()`: the worker's home and
        database; None: only the worker's processes are out of their sight)."""
        check_store(store)  # a partial store fails here, with what it lacks
        if max_recoveries < 0:
            raise ValueError("max_recoveries must be 0 or more")
        if default_timeout <= 0 or max_payload_bytes <= 0:
            raise ValueError("default_timeout and max_payload_bytes must be positive")
        if not min_continue_interval >= 0:
            raise ValueError("min_continue_interval must be 0 or more")
        if max_execution_bytes is not None and max_execution_bytes <= 0:
            raise ValueError("max_execution_bytes must be positive (or None)")
        self.store = store
        self._timer_locking = capabilities(store).timer_locking  # asked once, not per tick
        self.max_child_depth = max_child_depth
        self.max_items = max_items
        self.max_recoveries = max_recoveries
        self.side_effects = side_effects
        self.default_timeout = default_timeout
        self.max_payload_bytes = max_payload_bytes
        self.max_execution_bytes = max_execution_bytes
        # what every step may store (sized as the stores encode)
        self.value_limits = ValueLimits(
            json_bytes, json_depth, max_payload_bytes, MAX_DEPTH, max_execution_bytes
        )
        self.min_schedule_interval = min_schedule_interval
        self.min_continue_interval = min_continue_interval
        self.secrets = secrets
        self.providers = providers or Providers()
        self.credentials: CredentialResolver = credentials or BoundCredentials()
        self.tracer: Tracer = tracer or NO_TRACER
        self.shell_sandbox = shell_sandbox
        self._quota_cache = QuotaCache()  # shared by `for_tenant` engines
        self.clock: Clock = clock or SystemClock()
        self.activities = activities or default_registry
        self.tenant = tenant
        # by content hash; (tenant, hash) known to be in the store; source text -> parsed
        self._definitions: Lru[str, Workflow] = Lru(DEFINITION_CACHE)
        self._stored: Lru[tuple[str, str], bool] = Lru(STORED_CACHE)
        self._sources: Lru[str, tuple[Workflow, str]] = Lru(SOURCE_CACHE)
        self._listeners: list[Listener] = []
        self._lock = threading.Lock()

    def for_tenant(self, tenant: str) -> Engine:
        """The same engine (store, clock, activities, listeners) acting for `tenant`."""
        if tenant == self.tenant:
            return self
        return self._view_as(tenant, self.actor)

    def acting(self, actor: str | None) -> Engine:
        """The same engine whose changes are audited as made by `actor` (`key:<id>/<role>`
        over the API, `local:<user>` on the host's CLI); None: not audited (the system's own
        changes). The edges set it once per request or command: every start, signal,
        approval, cancel, definition apply and quota change through the engine, and the
        schedule changes through `Schedules(engine)`, then append one audit record in the
        transaction of the change."""
        if actor == self.actor:
            return self
        return self._view_as(self.tenant, actor)

    def _view_as(self, tenant: str, actor: str | None) -> Engine:
        other = Engine(
            self.store,
            clock=self.clock,
            activities=self.activities,
            tenant=tenant,
            max_child_depth=self.max_child_depth,
            max_items=self.max_items,
            max_recoveries=self.max_recoveries,
            side_effects=self.side_effects,
            default_timeout=self.default_timeout,
            max_payload_bytes=self.max_payload_bytes,
            min_schedule_interval=self.min_schedule_interval,
            min_continue_interval=self.min_continue_interval,
            secrets=self.secrets,
            providers=self.providers,
            credentials=self.credentials,
            tracer=self.tracer,
            shell_sandbox=self.shell_sandbox,
            max_execution_bytes=self.max_execution_bytes,
        )
        other.actor = actor
        other._quota_cache = self._quota_cache
        other._definitions = self._definitions  # content-addressed: safe to share
        other._stored = self._stored
        other._sources = self._sources
        other._listeners = self._listeners
        return other

    @classmethod
    def open(
        cls,
        url: str | None = None,
        *,
        clock: Clock | None = None,
        activities: ActivityRegistry | None = None,
        default_timeout: float = DEFAULT_TIMEOUT,
        max_payload_bytes: int = MAX_PAYLOAD_BYTES,
        min_schedule_interval: float = 1.0,
        min_continue_interval: float = 1.0,
        secrets: SecretResolver | None = None,
        providers: Providers | None = None,
        credentials: CredentialResolver | None = None,
        tracer: Tracer | None = None,
        max_execution_bytes: int | None = MAX_EXECUTION_BYTES,
    ) -> Engine:
        from wovyr.store import default_url

        return cls(
            open_store(url or default_url()),
            clock=clock,
            activities=activities,
            default_timeout=default_timeout,
            max_payload_bytes=max_payload_bytes,
            min_schedule_interval=min_schedule_interval,
            min_continue_interval=min_continue_interval,
            secrets=secrets,
            providers=providers,
            credentials=credentials,
            tracer=tracer,
            max_execution_bytes=max_execution_bytes,
        )

    def close(self) -> None:
        """Close the store, and the tracer (what it buffered is exported first)."""
        self.store.close()
        self.tracer.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add_listener(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: Listener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def notify(self, execution_id: str, tenant: str | None = None) -> None:
        """Tell the listeners that execution `execution_id` of `tenant` (default: this
        engine's) changed."""
        tenant = tenant or self.tenant
        for listener in list(self._listeners):
            listener(tenant, execution_id)

    # --- starting ------------------------------------------------------------------------

    def start(
        self,
        definition: Workflow | str | None = None,
        input: Mapping[str, Any] | None = None,
        *,
        name: str | None = None,
        version: str | None = None,
        path: Path | None = None,
        execution_id: str | None = None,
        parent_id: str | None = None,
        lease_owner: str | None = None,
        lease_seconds: float = 30.0,
        labels: Mapping[str, str] | None = None,
        priority: int | None = None,
    ) -> ExecutionRecord:
        """Start an execution of exactly one of `definition` (a model or YAML/JSON text),
        `path` (a file) or `name` (registered; `version`, else the latest); starting an id
        that exists returns that execution unchanged. `submit` also tells which it was.
        `labels`: added to (and overriding) the definition's rendered `labels`.
        `priority` (0-9, default 0): within the tenant, higher is claimed first."""
        return self.submit(
            definition,
            input,
            name=name,
            version=version,
            path=path,
            execution_id=execution_id,
            parent_id=parent_id,
            lease_owner=lease_owner,
            lease_seconds=lease_seconds,
            labels=labels,
            priority=priority,
        ).record

    def submit(
        self,
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
        workflow, digest = self.target(definition, name=name, version=version, path=path)
        if execution_id is not None:
            _check_id(execution_id)
        check_priority(priority)
        self.check_side_effects(workflow)
        if labels:
            labels = check_labels(labels)
        inputs = None
        if claim_id is not None:  # a claim is spent only on a valid start: inputs first
            inputs = self._checked("the input", resolve_inputs(workflow, input), "input")
            if workflow.labels:  # and labels that render
                execution_labels(workflow, inputs, labels)
            execution_id = claim_id()
        existing = self.store.load(execution_id, self.tenant) if execution_id else None
        if existing is not None:  # its definition and inputs were fixed when it started
            return Started(existing, created=False)
        if inputs is None:
            inputs = self._checked("the input", resolve_inputs(workflow, input), "input")
        new = self._new_execution(
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
        if self.actor is not None:  # (the input's digest only for a record that is kept)
            audit = self.audit_entry(
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
        created, record = self.store.create_execution(new)
        if created and new.lease_owner is None:  # a leased start is driven by its owner already
            self.notify(new.id)
        if created:
            self.enforce_on_limit(new)
        return Started(record, created)

    def enforce_on_limit(self, new: NewExecution) -> None:
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
        state = self.store.slot_state(new.tenant, slot.key)
        if new.id not in state.waiting:
            return
        reason = f"concurrency {slot.key}: {slot.limit} running (on_limit: {on_limit})"
        target = new.id if on_limit == "cancel_new" else None
        if target is None and state.holders:
            target = state.holders[0]
        if target is not None:
            with contextlib.suppress(ExecutionFinished, NotFound):
                self.for_tenant(new.tenant).cancel(target, reason=reason, by="concurrency")

    def _checked(self, what: str, value: _T, path: str) -> _T:
        """`value`, if the store may keep it (size and depth caps), else `InputError`."""
        try:
            check_payload(value, what, max_bytes=self.max_payload_bytes)
        except PayloadRefused as exc:
            raise InputError([Problem(exc.message, path=path)]) from None
        except TypeError as exc:
            raise InputError([Problem(str(exc), path=path)]) from None
        return value

    def prepare_start(
        self,
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
        self.check_side_effects(workflow)
        check_priority(priority)
        return self._new_execution(
            workflow,
            digest,
            self._checked("the input", resolve_inputs(workflow, input), "input"),
            execution_id=execution_id,
            parent_id=parent_id,
            lease_owner=lease_owner,
            lease_seconds=lease_seconds,
            extra=extra,
            priority=priority,
            trace=trace,
        )

    def _new_execution(
        self,
        workflow: Workflow,
        digest: str,
        inputs: dict[str, Any],
        *,
        execution_id: str | None,
        parent_id: str | None,
        lease_owner: str | None,
        lease_seconds: float,
        extra: dict[str, Any] | None = None,
        carried: builtins.list[Event] | None = None,
        reused: builtins.list[Event] | None = None,
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
        now = self.clock.now()
        exec_id = execution_id or new_id(now)
        traced = self.tracer.execution_started(
            trace,
            tenant=self.tenant,
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
        if lease_owner is not None and gated(workflow):
            lease_owner = None  # its first attempts may have to wait: no decision here
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
                max_items=self.max_items,
                max_recoveries=self.max_recoveries,
                costs=Costs(PASS_WORK),  # the rest (if any) is decided by its worker
                bounds=ExecutionBytes(self.value_limits).step(state),
            )
            assert decision.state is not None
            # a run that would continue as new at once is left to its worker, whose commit
            # creates the chain's next run with it
            if decision.state.status != ExecutionStatus.CONTINUED:
                events, state = events + decision.events, decision.state
        step = make_step(exec_id, empty, state, events, now, tenant=self.tenant, ready=True)
        quotas = self.quotas()
        return NewExecution(
            id=exec_id,
            tenant=self.tenant,
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
            debits=()
            if carried is not None
            else start_debits(quotas, now, lambda: json_bytes(inputs)),
            # a chain's next run replaces its last: the running count does not grow
            max_running=None if carried is not None else quotas.concurrent_executions,
            priority=priority or 0,
            slot=slot,
        )

    def rerun(
        self,
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
        record = self._load(execution_id)
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
            _check_id(new_id)
        state = state_from_json(record.checkpoint or {})
        pinned = self.definition(record.definition_hash)
        plan = plan_rerun(pinned, state, start_from)
        workflow, digest = pinned, record.definition_hash
        if latest:
            try:
                workflow, digest = self.named(pinned.name)
            except NotFound as exc:  # the execution exists: a 404 would say it does not
                raise Conflict(
                    f"cannot rerun on the latest definition: {exc.message}", hint=exc.hint
                ) from None
            if digest != record.definition_hash:
                check_compatible(pinned, workflow, plan)
        self.check_side_effects(workflow)
        given = {**state.input, **dict(input or {})}
        inputs = self._checked("the input", resolve_inputs(workflow, given), "input")
        now = self.clock.now()
        new = self._new_execution(
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
        audit = self.audit_entry(
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
        created, started = self.store.create_execution(replace(new, audit=audit))
        if not created:
            raise Conflict(f"execution {new.id} exists already", hint="choose another id")
        self.notify(new.id)
        return started

    def reruns(self, execution_id: str, limit: int = 50) -> builtins.list[str]:
        """The ids of the executions that rerun `execution_id` (newest first)."""
        page = self.store.list_executions(
            ExecutionFilter(tenant=self.tenant, rerun_of=execution_id, limit=limit)
        )
        return [r.id for r in page.items]

    def continuation(self, after: ExecutionState, events: builtins.list[Event]) -> NewExecution:
        """The chain's next run, for the step that ends `after` with `ExecutionContinued`
        (among `events`): the same pinned definition, the event's inputs and id, linked to
        this run, with this run's buffered signals (those no wait consumed) carried over in
        the order each name received them."""
        ended = next(e for e in reversed(events) if e.type == EventType.EXECUTION_CONTINUED)
        workflow = self.definition(after.definition_hash)
        now = self.clock.now()
        carried = [
            SignalReceived(name=name, payload=payload).at(now)
            for name, payloads in after.signals.items()
            for payload in payloads
        ]
        chain = {"root": after.chain_root, "run": int(ended.data["run"])}
        return self._new_execution(
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

    def live(self, execution_id: str) -> ExecutionRecord:
        """The execution `execution_id` names, following a continue-as-new chain: a run that
        ended `continued` leads to the chain's last run (the live one while the chain goes
        on). Runs are named `continued_id(root, n)`, so the last is found in O(log n) loads
        (doubling, then halving); each found run must name the same chain, so an unrelated
        execution with a look-alike id is never followed. NotFound for a missing id."""
        record = self._load(execution_id)
        if record.status != ExecutionStatus.CONTINUED:
            return record
        state = state_from_json(record.checkpoint or {})
        root, known = state.chain_root, state.chain_run

        def run(n: int) -> ExecutionRecord | None:
            found = self.store.load(continued_id(root, n), self.tenant)
            if found is None:
                return None
            if state_from_json(found.checkpoint or {}).chain_root != root:
                return None
            return found

        last, step = record, 1
        while True:  # doubling: the highest run that exists, up to a power of two beyond
            found = run(known + step)
            if found is None:
                break
            last, known = found, known + step
            if found.status != ExecutionStatus.CONTINUED:
                return found  # only a chain's last run ends otherwise (or runs)
            step *= 2
        low, high = known, known + step  # low exists, high does not
        while high - low > 1:
            middle = (low + high) // 2
            found = run(middle)
            if found is None:
                high = middle
                continue
            last, low = found, middle
            if found.status != ExecutionStatus.CONTINUED:
                return found
        return last

    # --- quotas --------------------------------------------------------------------------

    def quotas(self) -> Quotas:
        """This tenant's quotas (cached for a moment: a start of a tenant without quotas
        costs no read; a change made through this engine applies at once)."""
        return self._quota_cache.get(self.store, self.tenant)

    def set_quotas(self, quotas: Quotas, *, by: str) -> Quotas:
        """Store this tenant's quotas (the caller checked who may); return them."""
        try:
            audit = self.audit_entry(
                "tenant.quotas", self.tenant, {"quotas": payload_digest(quotas.to_dict())}
            )
            return set_quotas(
                self.store, self.tenant, quotas, by=by, at=self.clock.now(), audit=audit
            )
        finally:
            self._quota_cache.forget(self.tenant)

    def retention(self) -> Retention:
        """This tenant's retention settings (`wovyr.engine.retention`)."""
        return retention_of(self.store, self.tenant)

    def set_retention(self, retention: Retention, *, by: str) -> Retention:
        """Store this tenant's retention settings (the caller checked who may); return
        them. Audited as `tenant.retention` in the same transaction."""
        audit = self.audit_entry("tenant.retention", self.tenant, retention.to_dict())
        return set_retention(
            self.store, self.tenant, retention, by=by, at=self.clock.now(), audit=audit
        )

    def quota_usage(self) -> dict[str, Any]:
        """This tenant's quotas, what it used of each daily budget today (UTC) and how many
        of its executions run now.

        `used` holds what the ledger counts (a budget is debited once it has a quota: from
        then on, what counts against it; 0 before any use) and, when executions have no
        quota, the executions started today, counted from the executions themselves: the
        status shows real starts either way. A budget the ledger does not count is absent
        (not counted), never 0."""
        now = self.clock.now()
        running = self.store.list_executions(
            ExecutionFilter(tenant=self.tenant, status="running", limit=10_000)
        )
        quotas = quotas_of(self.store, self.tenant)
        used = self.store.quota_usage(self.tenant, day_of(now))
        limits = {
            EXECUTIONS: quotas.executions_per_day,
            SECONDS: quotas.activity_seconds_per_day,
            MODEL_TOKENS: quotas.model_tokens_per_day,
            MODEL_COST: quotas.model_cost_per_day,
            STORED: quotas.stored_bytes_per_day,
        }
        for budget, limit in limits.items():
            if limit is not None:
                used.setdefault(budget, 0.0)
        if quotas.executions_per_day is None:
            used[EXECUTIONS] = float(self._started_today(now))
        return {
            "tenant": self.tenant,
            "day": day_of(now).isoformat(),
            "quotas": quotas.to_dict(),
            "used": used,
            "running": len(running.items),
        }

    def _started_today(self, now: datetime) -> int:
        """How many executions of this tenant were created on `now`'s UTC day."""
        start = midnight_after(now) - timedelta(days=1)
        count, cursor = 0, None
        while True:
            page = self.store.list_executions(
                ExecutionFilter(
                    tenant=self.tenant, created_after=start, limit=10_000, cursor=cursor
                )
            )
            count += len(page.items)
            if page.next_cursor is None:
                return count
            cursor = page.next_cursor

    def attempt_debits(self, seconds: float) -> tuple[Debit, ...]:
        """What attempts that took `seconds` in all debit when their results commit: their
        seconds, when this tenant has an activity-seconds quota (else nothing is written)."""
        if seconds <= 0 or self.quotas().activity_seconds_per_day is None:
            return ()
        return (Debit(SECONDS, seconds, day_of(self.clock.now())),)

    def stored_debits(self, stored: int) -> tuple[Debit, ...]:
        """What a step that records `stored` bytes of values debits when it commits (when
        this tenant has a stored-bytes quota; else nothing is written)."""
        return stored_debits(self.quotas(), stored, self.clock.now())

    def model_debits(self, tokens: int, cost: float | None) -> tuple[Debit, ...]:
        """What model calls that used `tokens` and `cost` debit in the commit that records
        them (only the budgets this tenant has a quota of)."""
        return model_debits(self.quotas(), tokens, cost, self.clock.now())

    def model_quota_exhausted(self) -> str | None:
        """Why this tenant may make no model call today (a model quota used up), or None;
        one read of today's usage, only for a tenant with a model quota."""
        quotas = self.quotas()
        if quotas.model_tokens_per_day is None and quotas.model_cost_per_day is None:
            return None
        used = self.store.quota_usage(self.tenant, day_of(self.clock.now()))
        return model_quota_exhausted(quotas, used, self.tenant)

    def quota_hold(
        self, state: ExecutionState, unbilled: float = 0.0, unstored: int = 0
    ) -> list[Event] | None:
        """Whether the execution in `state` may start its next attempts: None when it may
        (no activity-seconds or stored-bytes quota, or today's seconds and bytes, with the
        `unbilled` seconds of its finished attempts and the `unstored` bytes of its step
        that the same commit debits, not used up); else the events that hold them until
        the next UTC midnight by this engine's clock (a durable timer whose `reason` is the
        execution's `waiting_on`; none when that hold is armed already). One read of
        today's usage, only for a tenant with one of those quotas."""
        quotas = self.quotas()
        budgets = (
            (SECONDS, quotas.activity_seconds_per_day, unbilled, "activity seconds"),
            (STORED, quotas.stored_bytes_per_day, unstored, "stored bytes"),
        )
        if all(limit is None for _, limit, _, _ in budgets):
            return None
        now = self.clock.now()
        used = self.store.quota_usage(self.tenant, day_of(now))
        spent = [
            (name, what)
            for name, limit, pending, what in budgets
            if limit is not None and used.get(name, 0.0) + pending >= limit
        ]
        if not spent:
            return None
        name, what = spent[0]
        until = midnight_after(now)
        timer = f"{QUOTA_HOLD}:{name}:{until.date().isoformat()}"
        if timer in state.timers:
            return []
        reason = (
            f"quota: {what} for tenant {self.tenant} exhausted until "
            f"{until.date().isoformat()} 00:00 UTC"
        )
        armed = TimerArmed(
            timer=timer, purpose=QUOTA_HOLD, fire_at=until.isoformat(), reason=reason
        )
        return [armed.at(now)]

    def continue_hold(self, state: ExecutionState, paid: bool = False) -> list[Event] | None:
        """Whether the run in `state`, which its step would end `continued`, may hand over
        to its chain's next run now: None when it may, else the events holding the hand-over
        (a durable timer whose `reason` is the run's `waiting_on`; the decider continues
        nothing while it is armed and tries again when it fires).

        Held until `min_continue_interval` seconds after this run started, so one chain
        starts at most one run per interval; then until the next UTC midnight when the
        tenant's quotas refuse the next run as they would refuse a start (`start_debits`:
        one execution of the day, and the day's seconds, tokens and cost not used up). The
        next run's debit is taken here, in a transaction of its own (check and addition
        one statement, as a start's), unless `paid` (this run's hand-over was admitted
        already, and its commit did not apply)."""
        now = self.clock.now()
        interval = self.min_continue_interval
        if interval > 0 and state.created_at:
            ready = datetime.fromisoformat(state.created_at) + timedelta(seconds=interval)
            if ready > now:
                reason = (
                    f"continue-as-new: one run of chain {state.chain_root} every {interval:g} s;"
                    f" the next no sooner than {ready.isoformat()}"
                )
                return [_continue_timer(state, ready, reason).at(now)]
        debits = () if paid else start_debits(self.quotas(), now)
        refused = self.store.debit_quota(self.tenant, debits) if debits else None
        if refused is None:
            return None
        until, limit = midnight_after(now), refused.limit or 0.0
        reason = (
            f"quota: {refused.budget.replace('_', ' ')} per day for tenant {self.tenant} used up"
            f" (limit {limit:g}); the chain's next run waits until"
            f" {until.date().isoformat()} 00:00 UTC"
        )
        return [_continue_timer(state, until, reason).at(now)]

    # --- flow control ---------------------------------------------------------------------

    def set_rate_limit(
        self, key: str, limit: float, per: float, burst: float | None = None, *, by: str = ""
    ) -> RateLimitRecord:
        """Declare this tenant's token bucket `key`: `limit` units per `per` seconds, at most
        `burst` at once (default `limit`); activities naming it (`rate_limit: {key: ...}`)
        use these numbers, whatever their own say."""
        problems = []
        if not key or len(key) > MAX_KEY_LENGTH:
            problems.append(Problem(f"a key is 1 to {MAX_KEY_LENGTH} characters", path="key"))
        for name, value in (("limit", limit), ("per", per), ("burst", burst)):
            if value is not None and not value > 0:
                problems.append(Problem(f"{name} must be above 0", path=name))
        if problems:
            raise InputError(problems)
        capacity = burst if burst is not None else limit
        numbers = {"limit": limit, "per": per, "burst": capacity}
        audit = self.audit_entry("limits.set", key, numbers)
        return self.store.set_rate_limit(
            self.tenant, key, capacity, limit / per, by, self.clock.now(), audit=audit
        )

    def rate_limits(self) -> builtins.list[RateLimitRecord]:
        """This tenant's token buckets, declared or made by activities."""
        return self.store.rate_limits(self.tenant)

    def flow_keys(self) -> builtins.list[FlowKey]:
        """This tenant's concurrency keys in use, with what runs and what waits."""
        return self.store.flow_keys(self.tenant, self.clock.now())

    def delete_rate_limit(self, key: str) -> None:
        audit = self.audit_entry("limits.delete", key)
        if not self.store.delete_rate_limit(self.tenant, key, audit=audit):
            raise NotFound(f"rate limit {key} not found")

    # --- external changes ----------------------------------------------------------------

    def signal(
        self,
        execution_id: str,
        name: str,
        payload: Any = None,
        *,
        definition: Workflow | str | None = None,
    ) -> ExecutionView:
        """Deliver a signal; buffered until an activity waits for `name`. `definition`: see
        `pinned_guard`."""
        if not name or not isinstance(name, str):
            raise InputError([Problem("a signal needs a name", path="name")])
        self._checked("the signal's payload", payload, "payload")
        pinned = self.pinned_guard(execution_id, definition)

        def events(state: ExecutionState, workflow: Workflow) -> list[Event]:
            self._require_running(state)
            pinned(state)
            return [SignalReceived(name=name, payload=payload).at(self.clock.now())]

        details = {"name": name, "payload": payload_digest(payload)}
        return self._append(execution_id, events, ("execution.signal", details))

    def approve(
        self,
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
        pinned = self.pinned_guard(execution_id, definition)

        def events(state: ExecutionState, workflow: Workflow) -> list[Event]:
            self._require_running(state)
            pinned(state)
            try:
                act = workflow.activity(activity_id)
            except KeyError:
                raise NotFound(
                    f"execution {execution_id} has no activity {activity_id!r}"
                ) from None
            wait = act.step_of(WaitStep)
            approval = wait.wait.approval if wait is not None else None
            current = state.activity(activity_id)
            # an attempt that paused for an approval (an agent's tool call) is decided alike
            suspended = (
                current.status == ActivityStatus.WAITING
                and bool((current.wait or {}).get("suspended"))
                and (current.wait or {}).get("kind") == "approval"
            )
            if approval is None and not suspended:
                raise Conflict(f"activity {activity_id!r} is not an approval")
            if current.status not in (ActivityStatus.PENDING, ActivityStatus.WAITING):
                raise Conflict(f"approval {activity_id!r} is already {current.status}")
            if activity_id in state.approvals:
                raise Conflict(f"approval {activity_id!r} was already decided")
            approvers = approval.approvers if approval is not None else ()
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
            return [decided.at(self.clock.now())]

        details = {
            "activity": activity_id,
            "approved": bool(approved),
            "by": by,
            "comment": None if comment is None else payload_digest(comment),
        }
        if grant:
            details["grant"] = grant
        action = "execution.approve" if approved else "execution.deny"
        return self._append(execution_id, events, (action, details))

    def cancel(
        self, execution_id: str, reason: str | None = None, *, by: str | None = None
    ) -> ExecutionView:
        """Cancel: `ExecutionCancelled` is durable when this returns; late results are refused.
        A chain's logical id (or any of its runs) cancels its live run, which ends the chain."""

        def events(state: ExecutionState, workflow: Workflow) -> list[Event]:
            self._require_running(state)
            return [ExecutionCancelled(reason=reason, by=by).at(self.clock.now())]

        details = {"by": by, "reason": None if reason is None else payload_digest(reason)}
        view = self._append(execution_id, events, ("execution.cancel", details))
        # the cascade is part of this one audited cancel, not a change of its own
        self.acting(None)._cancel_children(view.id, by)
        return view

    def _cancel_children(self, execution_id: str, by: str | None) -> None:
        """Cancel the running children of a cancelled execution (and theirs)."""
        for child in self.store.list_executions(
            ExecutionFilter(
                tenant=self.tenant, parent_id=execution_id, status="running", limit=1000
            )
        ).items:
            with contextlib.suppress(ExecutionFinished):
                self.cancel(child.id, reason=f"parent {execution_id} cancelled", by=by)

    def pinned_guard(
        self, execution_id: str, definition: Workflow | str | None
    ) -> Callable[[ExecutionState], None]:
        """The drift guard of a signal or a decision sent with a definition (older clients
        upload the execution's definition again with each): nothing to check without one;
        else the check that the execution is pinned to the same content hash, raising
        `DefinitionDrift` (naming both hashes) when it is another. The definition is parsed
        and hashed here, once; it is never stored, and never needed."""
        if definition is None:
            return _no_guard
        sent = self.hash_of(definition)

        def check(state: ExecutionState) -> None:
            if state.definition_hash != sent:
                raise DefinitionDrift(execution_id, sent, state.definition_hash)

        return check

    def _require_running(self, state: ExecutionState) -> None:
        if state.finished:
            raise ExecutionFinished(f"execution {state.id} is already {state.status}")

    def _append(
        self,
        execution_id: str,
        make_events: Callable[[ExecutionState, Workflow], list[Event]],
        audit: tuple[str, dict[str, Any]] | None = None,
    ) -> ExecutionView:
        """Append what `make_events` returns (recomputed when the log moved); `audit`, the
        (action, details) of the change, rides on the step that applies."""
        for _ in range(_MAX_RETRIES):
            record = self.live(execution_id)  # a chain's live run (re-read on each conflict)
            state = state_from_json(record.checkpoint or {})
            workflow = self.definition(record.definition_hash)
            events = make_events(state, workflow)
            after = fold(events, state)
            step = make_step(
                record.id, state, after, events, self.clock.now(), tenant=self.tenant, ready=True
            )
            if audit is not None:
                step = replace(step, audit=self.audit_entry(audit[0], record.id, audit[1]))
            outcome = self.commit_step(step, after)
            if outcome is CommitOutcome.OK:
                self.notify(record.id)
                return self._view(record, after)
            if outcome is CommitOutcome.NOT_FOUND:
                break
        else:
            raise StoreError(f"execution {execution_id} kept changing; try again")
        raise NotFound(f"execution {execution_id} not found")

    def commit_step(self, step: StepWrite, after: ExecutionState) -> CommitOutcome:
        """Commit one step, with what it changes in other executions in the SAME transaction:
        when it finishes a child workflow, `ChildFinished` is appended to the parent, so a
        parent never misses its child's end; when it fails attempts whose child workflows
        outlived their `timeout`, those children are cancelled (a crash cannot leave a child
        running that nobody waits for)."""
        cancels = children_to_cancel(step.events)
        if not (after.finished and after.parent) and not cancels:
            return self.store.commit([step])[0]
        tenant = step.tenant  # a parent and its children are of one tenant
        for _ in range(_MAX_RETRIES):
            others = self._parent_step(tenant, after) + self._cancel_steps(tenant, after, cancels)
            if not others:
                return self.store.commit([step])[0]
            own, *theirs = self.store.commit([step, *others], atomic=True)
            if own is not CommitOutcome.OK:
                return own
            if all(outcome is CommitOutcome.OK for outcome in theirs):
                for other in others:
                    self.notify(other.execution_id, tenant)
                owner = self.for_tenant(tenant)
                for child in cancels:  # their own children, as a cancel does (best effort)
                    owner._cancel_children(child, after.id)
                return own
        raise StoreError(f"the executions {after.id} changes kept changing; try again")

    def _parent_step(self, tenant: str, after: ExecutionState) -> builtins.list[StepWrite]:
        """`ChildFinished` on the parent (of `tenant`) of a child that `after` finishes (if
        it runs)."""
        parent = after.parent
        if not (after.finished and parent):
            return []
        record = self.store.load(parent["id"], tenant)
        if record is None or record.status != "running":
            return []
        before = state_from_json(record.checkpoint or {})
        now = self.clock.now()
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

    def _cancel_steps(
        self, tenant: str, parent: ExecutionState, children: builtins.list[str]
    ) -> builtins.list[StepWrite]:
        """`ExecutionCancelled` for each child (still running) whose timeout fired. Its end
        is not told back to the parent: the parent's step records the timeout itself."""
        steps = []
        now = self.clock.now()
        for child in children:
            record = self.store.load(child, tenant)
            if record is None or record.status != "running":
                continue
            before = state_from_json(record.checkpoint or {})
            reason = f"the activity that started it in {parent.id} timed out"
            event = ExecutionCancelled(reason=reason, by=parent.id).at(now)
            after = fold([event], before)
            steps.append(make_step(child, before, after, [event], now, tenant=tenant, ready=True))
        return steps

    def start_tool_child(
        self,
        parent: ExecutionState,
        activity_id: str,
        workflow_name: str,
        inputs: Any,
        call: dict[str, Any],
        trace: TraceContext | None = None,
    ) -> str:
        """Start (or find) the child workflow of one tool call of an `agent` activity (its
        latest registered version): its id is derived from the parent, the activity, the
        call's turn and id, so a crashed or retried attempt finds the same child. When the
        child ends, `ChildFinished` carries `call` and joins the activity's journal as that
        call's result (`wovyr.activities.kinds.AwaitChildren`). `InputError` when `inputs`
        do not fit the workflow. `trace`: the span of the attempt that starts it."""
        call_id = str(call["call_id"])
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", call_id):
            call_id = "h" + hashlib.sha256(call_id.encode()).hexdigest()[:16]
        execution_id = derived_id(f"{parent.id}::{activity_id}:t{int(call['turn'])}-{call_id}")
        if self.store.load(execution_id, self.tenant) is not None:
            return execution_id
        if parent.depth + 1 > self.max_child_depth:
            raise NonRetryableError(
                f"child workflow depth limit ({self.max_child_depth}) reached: "
                f"{parent.workflow} would start {workflow_name} at depth {parent.depth + 1}",
                type="ChildDepthExceeded",
            )
        workflow, digest = self.named(workflow_name, None)
        origin: dict[str, Any] = {
            "id": parent.id,
            "activity": activity_id,
            "index": None,
            "attempt": None,
            "call": call,
        }
        new = self.prepare_start(
            workflow,
            digest,
            inputs if isinstance(inputs, dict) else {},
            execution_id=execution_id,
            parent_id=parent.id,
            extra={"parent": origin, "depth": parent.depth + 1},
            trace=trace,
        )
        created, _ = self.store.create_execution(new)
        if created:
            self.notify(execution_id)
        return execution_id

    def start_child(
        self, parent: ExecutionState, run: RunActivity, trace: TraceContext | None = None
    ) -> str:
        """Start (or find) the child workflow of one attempt of a `workflow` activity, in
        this engine's tenant. Its id is derived (`wovyr.ids.child_id`), or the `id` the
        activity gives (which must be a valid execution id: else the attempt fails for good
        with `InvalidChildId`), with `~<attempt>` after a first attempt. `trace`: the span
        of the attempt that starts it (the child's start span is its child)."""
        spec = ChildWorkflowSpec.model_validate(run.input)
        if spec.id is not None and not is_execution_id(spec.id):
            raise NonRetryableError(
                f"the child workflow id {spec.id!r} is refused: {ID_RULE}", type="InvalidChildId"
            )
        if spec.id is not None and is_chain_run_id(spec.id):
            # a chain's later runs are `<root>~c<n>`: a child taking one would stand in the
            # way of (or be mistaken for) a run of that chain
            raise NonRetryableError(
                f"the child workflow id {spec.id!r} ends like a continue-as-new chain's runs "
                "('~c<number>'): those ids are reserved",
                type="InvalidChildId",
            )
        # iteration n > 1 of a `repeat` starts a child of its own: `~i<n>` names it
        again = f"~i{run.iteration}" if run.iteration > 1 else ""
        if spec.id is None:
            activity = run.activity_id + again
            text = child_id(parent.id, activity, run.index, run.attempt, shorten=False)
        else:
            text = spec.id + again
            text = text if run.attempt == 1 else f"{text}~{run.attempt}"
        execution_id = derived_id(text)
        if text != execution_id and self.store.load(text, self.tenant) is not None:
            return text  # started before ids were shortened: the same child
        if self.store.load(execution_id, self.tenant) is not None:
            return execution_id
        if parent.depth + 1 > self.max_child_depth:
            raise NonRetryableError(
                f"child workflow depth limit ({self.max_child_depth}) reached: "
                f"{parent.workflow} would start {spec.name} at depth {parent.depth + 1} "
                "(a workflow that starts itself without end?)",
                type="ChildDepthExceeded",
            )
        workflow, digest = self.named(spec.name, spec.version)
        if workflow.continue_as_new is not None:
            raise NonRetryableError(
                f"workflow {spec.name!r} v{workflow.version} declares continue_as_new and "
                f"cannot run as a child of activity {run.activity_id!r}: a chain outlives "
                "the step that waits for it; start it on its own (a schedule, a start)",
                type="ContinueAsNewChild",
            )
        origin = {
            "id": parent.id,
            "activity": run.activity_id,
            "index": run.index,
            "attempt": run.attempt,
        }
        new = self.prepare_start(
            workflow,
            digest,
            spec.input,
            execution_id=execution_id,
            parent_id=parent.id,
            extra={"parent": origin, "depth": parent.depth + 1},
            # a child runs at its parent's priority unless the activity sets its own
            priority=spec.priority if spec.priority is not None else parent.priority,
            trace=trace,
        )
        created, _ = self.store.create_execution(new)
        if created:
            self.notify(execution_id)
            self.enforce_on_limit(new)
        return execution_id

    def fire_due_timers(self, limit: int = 500) -> int:
        """Fire the timers due now, up to `limit`, in ONE transaction (each execution's due
        timers become `TimerFired` events in one step); returns how many fired. A step that
        conflicts with a concurrent change is left for the next pass: its rows stay due.
        On a store with `TimerLocking` (PostgreSQL), concurrent dispatchers take disjoint
        sets of due timers (SKIP LOCKED) instead of all reading the same ones."""
        now = self.clock.now()
        store = self.store

        def build(
            timers: builtins.list[TimerRecord], records: Mapping[tuple[str, str], ExecutionRecord]
        ) -> builtins.list[StepWrite]:
            return timer_steps(now, timers, records)

        locking = self._timer_locking
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
                self.notify(step.execution_id, step.tenant)
        return fired

    # --- reads ---------------------------------------------------------------------------

    def _load(self, execution_id: str) -> ExecutionRecord:
        record = self.store.load(execution_id, self.tenant)
        if record is None:
            raise NotFound(f"execution {execution_id} not found")
        return record

    def query(self, execution_id: str, *, follow: bool = True) -> ExecutionView:
        """The live state: appends no event and takes no lease. A run that continued as new
        answers with its chain's live (or last) run unless `follow` is False."""
        record = self.live(execution_id) if follow else self._load(execution_id)
        view = self._view(record, state_from_json(record.checkpoint or {}))
        if view.finished:  # only a finished execution can have reruns: no read for the rest
            view = replace(view, reruns=self.reruns(record.id))
        return view

    def get(self, execution_id: str) -> ExecutionRecord:
        return self._load(execution_id)

    def list(
        self,
        *,
        workflow: str | None = None,
        status: str | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        parent_id: str | None = None,
        limit: int = 50,
        cursor: tuple[datetime, str] | None = None,
        labels: Mapping[str, str] | None = None,
        id_prefix: str | None = None,
        name: str | None = None,
    ) -> Page:
        """Executions newest first; pass `page.next_cursor` back for the next page. `status`
        is the status shown (`waiting` and `running` are told apart by `waiting_on`).
        Search: `labels` (every one), `id_prefix` (ids starting so), `name` (workflow names
        containing it, any case: the executions of each matching name walk that name's index,
        and the store merges them into one page)."""
        if not 1 <= limit <= 1000:
            raise InputError([Problem("limit must be between 1 and 1000", path="limit")])
        if id_prefix is not None and not (0 < len(id_prefix) <= 200):
            raise InputError([Problem("an id prefix is 1-200 characters", path="id_prefix")])
        stored, waiting = status_filter(status)
        query = ExecutionFilter(
            tenant=self.tenant,
            workflow=workflow,
            status=stored,
            waiting=waiting,
            created_after=created_after,
            created_before=created_before,
            parent_id=parent_id,
            limit=limit,
            cursor=cursor,
            labels=tuple(check_labels(labels).items()) if labels else (),
            id_prefix=id_prefix or None,
        )
        if not name or workflow is not None:
            return self.store.list_executions(query)
        if len(name) > 200:
            raise InputError([Problem("a name search is at most 200 characters", path="name")])
        names = self.store.workflow_names(self.tenant, name, _NAME_MATCHES)
        if not names:
            return Page([])
        return self.store.list_executions(replace(query, workflows=tuple(names)))

    def history(
        self,
        execution_id: str,
        after_seq: int = 0,
        limit: int | None = None,
        *,
        follow: bool = True,
    ) -> builtins.list[EventRecord]:
        """The events of one run (after `after_seq`, at most `limit`) as they may be shown:
        rendered inputs through their kind's `redact`. A chain's live (or last) run unless
        `follow` is False."""
        record = self.live(execution_id) if follow else self._load(execution_id)
        events = self.store.history(record.id, after_seq, limit, tenant=self.tenant)
        return shown_events(self.definition(record.definition_hash), events)

    def logs(
        self, execution_id: str, after_seq: int = 0, *, follow: bool = True
    ) -> tuple[builtins.list[dict[str, Any]], int, bool]:
        """The attempts of one run (a chain's live or last one unless `follow` is False)
        that logged or failed, ended after `after_seq` (see `wovyr.engine.attempts`); with
        the last seq read (pass it back to follow on) and whether the run has finished."""
        record = self.live(execution_id) if follow else self._load(execution_id)
        events = self.store.history(record.id, after_seq, tenant=self.tenant)
        last = events[-1].seq if events else after_seq
        return attempt_entries(events), last, record.status in ExecutionStatus.TERMINAL

    def _view(self, record: ExecutionRecord, state: ExecutionState) -> ExecutionView:
        view = build_view(self.definition(record.definition_hash), record, state)
        if view.concurrency is not None:  # who holds the key's slots and who waits (a read)
            slots = self.store.slot_state(record.tenant, str(view.concurrency["key"]))
            concurrency = {**view.concurrency, "holders": slots.holders, "waiting": slots.waiting}
            view = replace(view, concurrency=concurrency)
        return view
