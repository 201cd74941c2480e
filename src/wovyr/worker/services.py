"""What a runner works with: one record of the parts and operations it uses, for one tenant.

The runner, its attempts and its commits are handed this record, never the engine itself
(`Worker` builds it: `services_for`); an attempt is handed, from it, only the services its
kind declares (`ActivityKind.needs`, assembled by `wovyr.worker.attempts`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from wovyr.activities.base import ActivityRegistry
from wovyr.activities.kinds import SecretResolver
from wovyr.activities.providers import CredentialResolver, Providers
from wovyr.activities.sandbox import ShellSandbox
from wovyr.clock import Clock
from wovyr.definition.model import Workflow
from wovyr.engine.core.bounds import ValueLimits
from wovyr.engine.core.decide import RunActivity
from wovyr.engine.core.state import ExecutionState
from wovyr.engine.quotas import Quotas
from wovyr.engine.tenants import TenantPolicy
from wovyr.events import Event
from wovyr.store.base import CommitOutcome, NewExecution, StepWrite, Store
from wovyr.store.records import Debit
from wovyr.traces import TraceContext, Tracer

__all__ = ["RunnerServices"]


@dataclass(frozen=True)
class RunnerServices:
    """The engine's parts and operations a runner uses, acting for `tenant`."""

    tenant: str
    store: Store
    clock: Clock
    tracer: Tracer
    # --- what attempts are handed (as their kinds declare) ---------------------------------
    activities: ActivityRegistry
    secrets: SecretResolver | None
    providers: Providers
    credentials: CredentialResolver
    shell_sandbox: ShellSandbox | None
    default_timeout: float
    max_payload_bytes: int
    tenant_policy: Callable[[], TenantPolicy]
    start_child: Callable[[ExecutionState, RunActivity, TraceContext | None], str]
    start_tool_child: Callable[
        [ExecutionState, str, str, Any, dict[str, Any], TraceContext | None], str
    ]
    named: Callable[[str, str | None], tuple[Workflow, str]]
    # --- deciding and committing steps ------------------------------------------------------
    value_limits: ValueLimits
    max_items: int
    max_recoveries: int
    commit_step: Callable[[StepWrite, ExecutionState], CommitOutcome]
    continuation: Callable[[ExecutionState, list[Event]], NewExecution]
    notify: Callable[[str], None]
    # --- quotas -----------------------------------------------------------------------------
    quotas: Callable[[], Quotas]
    model_quota_exhausted: Callable[[], str | None]
    quota_hold: Callable[[ExecutionState, float, int], list[Event] | None]
    continue_hold: Callable[[ExecutionState, bool], list[Event] | None]
    attempt_debits: Callable[[float], tuple[Debit, ...]]
    model_debits: Callable[[int, float | None], tuple[Debit, ...]]
    stored_debits: Callable[[int], tuple[Debit, ...]]
