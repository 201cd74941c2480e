"""The engine facade: start, signal, approve, cancel, query, list and history.

One public API over a `Runtime` (`wovyr.engine.runtime`); each method delegates to the
service that does the work (`starts`, `changes`, `reads`, `usage`, `flow`, `retention`,
`definitions`). Nothing here runs activities (workers do, see `wovyr.worker`). An engine
is never changed after it is built: a view for another tenant or actor is a new engine.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Unpack

from wovyr.activities.policy import SideEffectPolicy
from wovyr.definition.model import Workflow
from wovyr.engine import changes, children, flow, reads, retention, starts, usage
from wovyr.engine.changes import Decision
from wovyr.engine.core.policy import RunActivity
from wovyr.engine.core.state import ExecutionState
from wovyr.engine.definitions import Definitions
from wovyr.engine.quotas import Quotas
from wovyr.engine.reads import ListOptions
from wovyr.engine.retention import Retention
from wovyr.engine.runtime import (
    DEFAULT_TIMEOUT,
    Listener,
    Runtime,
    RuntimeField,
    RuntimeOptions,
    new_runtime,
)
from wovyr.engine.starts import (
    PreparedOptions,
    RerunOptions,
    Started,
    StartOptions,
    check_priority,
)
from wovyr.engine.tenants import TenantPolicy
from wovyr.engine.views import ExecutionView
from wovyr.events import Event
from wovyr.store import open_store
from wovyr.store.audit import AuditEntry
from wovyr.store.base import (
    CommitOutcome,
    EventRecord,
    ExecutionRecord,
    NewExecution,
    Page,
    StepWrite,
    Store,
)
from wovyr.store.flow import FlowKey, RateLimitRecord
from wovyr.store.records import Debit
from wovyr.traces import TraceContext

__all__ = ["DEFAULT_TIMEOUT", "Engine", "ExecutionView", "Started", "check_priority"]

Events = builtins.list[Event]
Records = builtins.list[EventRecord]


class Engine:
    """One public API over a store. Thread-safe; cheap to share."""

    __slots__ = ("definitions", "runtime")

    def __init__(self, store: Store, **options: Unpack[RuntimeOptions]) -> None:
        """An engine over `store` with `options` (each described at `RuntimeOptions`)."""
        self._bind(new_runtime(store, **options))

    def _bind(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.definitions = Definitions(runtime)

    @classmethod
    def over(cls, runtime: Runtime) -> Engine:
        """The engine of an assembled `runtime` (`wovyr.assemble`)."""
        engine = cls.__new__(cls)
        engine._bind(runtime)
        return engine

    @classmethod
    def open(cls, url: str | None = None, **options: Unpack[RuntimeOptions]) -> Engine:
        """An engine over the store at `url` (default: the embedded one in ~/.wovyr)."""
        from wovyr.store import default_url

        return cls(open_store(url or default_url()), **options)

    store = RuntimeField(lambda rt: rt.store)
    clock = RuntimeField(lambda rt: rt.clock)
    tenant = RuntimeField(lambda rt: rt.tenant)
    actor = RuntimeField(lambda rt: rt.actor)
    activities = RuntimeField(lambda rt: rt.activities)
    secrets = RuntimeField(lambda rt: rt.secrets)
    providers = RuntimeField(lambda rt: rt.providers)
    credentials = RuntimeField(lambda rt: rt.credentials)
    tracer = RuntimeField(lambda rt: rt.tracer)
    side_effects = RuntimeField(lambda rt: rt.side_effects)
    shell_sandbox = RuntimeField(lambda rt: rt.shell_sandbox)
    limits = RuntimeField(lambda rt: rt.limits)
    max_child_depth = RuntimeField(lambda rt: rt.limits.max_child_depth)
    max_items = RuntimeField(lambda rt: rt.limits.max_items)
    max_recoveries = RuntimeField(lambda rt: rt.limits.max_recoveries)
    default_timeout = RuntimeField(lambda rt: rt.limits.default_timeout)
    max_payload_bytes = RuntimeField(lambda rt: rt.limits.max_payload_bytes)
    max_execution_bytes = RuntimeField(lambda rt: rt.limits.max_execution_bytes)
    value_limits = RuntimeField(lambda rt: rt.limits.value_limits)
    min_schedule_interval = RuntimeField(lambda rt: rt.limits.min_schedule_interval)
    min_continue_interval = RuntimeField(lambda rt: rt.limits.min_continue_interval)

    def for_tenant(self, tenant: str) -> Engine:
        """The same engine (store, clock, activities, listeners) acting for `tenant`."""
        return self._view(self.runtime.view(tenant, self.actor))

    def acting(self, actor: str | None) -> Engine:
        """The same engine whose changes are audited as made by `actor` (`key:<id>/<role>`
        over the API, `local:<user>` on the host's CLI); None: not audited (the system's own
        changes). The edges set it once per request or command: every start, signal,
        approval, cancel, definition apply and quota change through the engine, and the
        schedule changes through `Schedules(engine)`, then append one audit record in the
        transaction of the change."""
        return self._view(self.runtime.view(self.tenant, actor))

    def _view(self, runtime: Runtime) -> Engine:
        return self if runtime is self.runtime else Engine.over(runtime)

    def close(self) -> None:
        """Close the store, and the tracer (what it buffered is exported first)."""
        self.store.close()
        self.tracer.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add_listener(self, listener: Listener) -> None:
        self.runtime.listeners.add(listener)

    def remove_listener(self, listener: Listener) -> None:
        self.runtime.listeners.remove(listener)

    def notify(self, execution_id: str, tenant: str | None = None) -> None:
        """Tell the listeners that execution `execution_id` of `tenant` (default: this
        engine's) changed."""
        self.runtime.notify(execution_id, tenant)

    # --- definitions (`wovyr.engine.definitions`) -----------------------------------------

    def audit_entry(
        self, action: str, target: str, details: Mapping[str, Any] | None = None
    ) -> AuditEntry | None:
        return self.runtime.audit_entry(action, target, details)

    def tenant_policy(self) -> TenantPolicy:
        return self.definitions.tenant_policy()

    def side_effect_policy(self) -> SideEffectPolicy:
        return self.definitions.side_effect_policy()

    def check_side_effects(self, workflow: Workflow) -> None:
        self.definitions.check_side_effects(workflow)

    def hash_of(self, definition: Workflow | str) -> str:
        return self.definitions.hash_of(definition)

    def register(self, definition: Workflow | str | Path) -> str:
        return self.definitions.register(definition)

    def definition(self, definition_hash: str, tenant: str | None = None) -> Workflow:
        return self.definitions.definition(definition_hash, tenant)

    def apply(
        self,
        definition: Workflow | str | Path,
        *,
        audit_as: tuple[str, str] | None = None,
        revise: bool = False,
    ) -> tuple[str, str]:
        return self.definitions.apply(definition, audit_as=audit_as, revise=revise)

    def named(self, name: str, version: str | None = None) -> tuple[Workflow, str]:
        return self.definitions.named(name, version)

    def resolve(self, definition: Workflow | str | Path) -> tuple[Workflow, str]:
        return self.definitions.resolve(definition)

    def target(
        self,
        definition: Workflow | str | None = None,
        *,
        name: str | None = None,
        version: str | None = None,
        path: Path | None = None,
    ) -> tuple[Workflow, str]:
        return self.definitions.target(definition, name=name, version=version, path=path)

    # --- starts (`wovyr.engine.starts`) ---------------------------------------------------

    def start(
        self,
        definition: Workflow | str | None = None,
        input: Mapping[str, Any] | None = None,
        **options: Unpack[StartOptions],
    ) -> ExecutionRecord:
        """`submit`'s execution (whether this call created it or it existed)."""
        return starts.submit(self.runtime, definition, input, **options).record

    def submit(
        self,
        definition: Workflow | str | None = None,
        input: Mapping[str, Any] | None = None,
        *,
        claim_id: Callable[[], str] | None = None,
        trace: TraceContext | None = None,
        **options: Unpack[StartOptions],
    ) -> Started:
        """THE start path (every edge calls it): see `wovyr.engine.starts.submit`."""
        run = starts.submit
        return run(self.runtime, definition, input, claim_id=claim_id, trace=trace, **options)

    def enforce_on_limit(self, new: NewExecution) -> None:
        starts.enforce_on_limit(self.runtime, new)

    def prepare_start(
        self,
        workflow: Workflow,
        digest: str,
        input: Mapping[str, Any] | None = None,
        **options: Unpack[PreparedOptions],
    ) -> NewExecution:
        return starts.prepare_start(self.runtime, workflow, digest, input, **options)

    def rerun(self, execution_id: str, **options: Unpack[RerunOptions]) -> ExecutionRecord:
        """A new execution rerunning a finished one: see `wovyr.engine.starts.rerun`."""
        return starts.rerun(self.runtime, execution_id, **options)

    def reruns(self, execution_id: str, limit: int = 50) -> builtins.list[str]:
        return reads.reruns(self.definitions, execution_id, limit)

    def continuation(self, after: ExecutionState, events: builtins.list[Event]) -> NewExecution:
        return starts.continuation(self.runtime, after, events)

    def start_tool_child(
        self,
        parent: ExecutionState,
        activity_id: str,
        workflow_name: str,
        inputs: Any,
        call: dict[str, Any],
        trace: TraceContext | None = None,
    ) -> str:
        rt = self.runtime
        return children.start_tool_child(
            rt, parent, activity_id, workflow_name, inputs, call, trace
        )

    def start_child(
        self, parent: ExecutionState, run: RunActivity, trace: TraceContext | None = None
    ) -> str:
        return children.start_child(self.runtime, parent, run, trace)

    # --- quotas, retention and flow control (`usage`, `retention`, `flow`) ----------------

    def quotas(self) -> Quotas:
        return usage.tenant_quotas(self.runtime)

    def set_quotas(self, quotas: Quotas, *, by: str) -> Quotas:
        return usage.set_quotas(self.runtime, quotas, by=by)

    def quota_usage(self) -> dict[str, Any]:
        return usage.quota_usage(self.runtime)

    def attempt_debits(self, seconds: float) -> tuple[Debit, ...]:
        return usage.attempt_debits(self.runtime, seconds)

    def stored_debits(self, stored: int) -> tuple[Debit, ...]:
        return usage.stored_debits(self.runtime, stored)

    def model_debits(self, tokens: int, cost: float | None) -> tuple[Debit, ...]:
        return usage.model_debits(self.runtime, tokens, cost)

    def model_quota_exhausted(self) -> str | None:
        return usage.model_quota_exhausted(self.runtime)

    def quota_hold(
        self, state: ExecutionState, unbilled: float = 0.0, unstored: int = 0
    ) -> Events | None:
        return usage.quota_hold(self.runtime, state, unbilled, unstored)

    def continue_hold(self, state: ExecutionState, paid: bool = False) -> Events | None:
        return usage.continue_hold(self.runtime, state, paid)

    def retention(self) -> Retention:
        return retention.tenant_retention(self.runtime)

    def set_retention(self, settings: Retention, *, by: str) -> Retention:
        return retention.change_retention(self.runtime, settings, by=by)

    def set_rate_limit(
        self, key: str, limit: float, per: float, burst: float | None = None, *, by: str = ""
    ) -> RateLimitRecord:
        return flow.set_rate_limit(self.runtime, key, limit, per, burst, by=by)

    def rate_limits(self) -> builtins.list[RateLimitRecord]:
        return flow.rate_limits(self.runtime)

    def flow_keys(self) -> builtins.list[FlowKey]:
        return flow.flow_keys(self.runtime)

    def delete_rate_limit(self, key: str) -> None:
        flow.delete_rate_limit(self.runtime, key)

    # --- changes (`wovyr.engine.changes`) -------------------------------------------------

    def signal(
        self,
        execution_id: str,
        name: str,
        payload: Any = None,
        *,
        definition: Workflow | str | None = None,
        dedup: str | None = None,
        recheck: bool = False,
    ) -> ExecutionView:
        """Deliver a signal; buffered until an activity waits for `name`. `dedup` and
        `recheck`: delivered once (see `wovyr.engine.changes.signal`)."""
        return changes.signal(
            self.runtime,
            execution_id,
            name,
            payload,
            definition=definition,
            dedup=dedup,
            recheck=recheck,
        )

    def approve(
        self,
        execution_id: str,
        activity_id: str,
        approved: bool = True,
        **options: Unpack[Decision],
    ) -> ExecutionView:
        """Decide an approval wait: see `wovyr.engine.changes.approve`."""
        return changes.approve(self.runtime, execution_id, activity_id, approved, **options)

    def cancel(
        self, execution_id: str, reason: str | None = None, *, by: str | None = None
    ) -> ExecutionView:
        """Cancel: `ExecutionCancelled` is durable when this returns; late results are refused."""
        return changes.cancel(self.runtime, execution_id, reason, by=by)

    def pinned_guard(
        self, execution_id: str, definition: Workflow | str | None
    ) -> Callable[[ExecutionState], None]:
        return changes.pinned_guard(self.runtime, execution_id, definition)

    def commit_step(self, step: StepWrite, after: ExecutionState) -> CommitOutcome:
        return changes.commit_step(self.runtime, step, after)

    def fire_due_timers(self, limit: int = 500) -> int:
        return changes.fire_due_timers(self.runtime, limit)

    # --- reads (`wovyr.engine.reads`) -----------------------------------------------------

    def live(self, execution_id: str) -> ExecutionRecord:
        return reads.live(self.definitions, execution_id)

    def query(self, execution_id: str, *, follow: bool = True) -> ExecutionView:
        """The live state: appends no event and takes no lease."""
        return reads.query(self.definitions, execution_id, follow=follow)

    def get(self, execution_id: str) -> ExecutionRecord:
        return reads.load(self.definitions, execution_id)

    def list(self, **filters: Unpack[ListOptions]) -> Page:
        """Executions newest first: see `wovyr.engine.reads.list_executions`."""
        return reads.list_executions(self.definitions, **filters)

    def history(
        self,
        execution_id: str,
        after_seq: int = 0,
        limit: int | None = None,
        *,
        follow: bool = True,
    ) -> builtins.list[EventRecord]:
        return reads.history(self.definitions, execution_id, after_seq, limit, follow=follow)

    def logs(
        self, execution_id: str, after_seq: int = 0, *, follow: bool = True
    ) -> tuple[builtins.list[dict[str, Any]], int, bool]:
        return reads.logs(self.definitions, execution_id, after_seq, follow=follow)
