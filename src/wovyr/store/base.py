"""The store contract: small Protocols split by role, and `Store`, which names them all.

Every store (SQLite, PostgreSQL) implements the whole of `Store` and passes the
same contract suite; `wovyr.store.capabilities.check_store` refuses, at start-up, a store
that does not. What only some stores can do (PostgreSQL's timer locking, worker
membership, notifications, numbered migrations) is not in the contract: those optional
capabilities are declared in `wovyr.store.capabilities` and asked for there, never probed.

The records the roles exchange are in `wovyr.store.records` (re-exported here).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from wovyr.store.agent_memory import AgentMemoryStore
from wovyr.store.artifacts import ArtifactStore
from wovyr.store.audit import AuditStore
from wovyr.store.bulk import BulkStore
from wovyr.store.events import EventStore
from wovyr.store.flow import FlowStore
from wovyr.store.hooks import StoreObserver
from wovyr.store.platform import (
    ApiKeyStore,
    IdempotencyStore,
    McpServerStore,
    ProviderStore,
    ResponseCacheStore,
    SessionStore,
    TenantStore,
)
from wovyr.store.records import (
    DEFAULT_TENANT,
    Claim,
    ClaimAsk,
    CommitOutcome,
    DefinitionRecord,
    EventRecord,
    ExecutionFilter,
    ExecutionKey,
    ExecutionRecord,
    FairShare,
    LeaseState,
    NewExecution,
    Page,
    StepWrite,
    TimerRecord,
)
from wovyr.store.registry import DefinitionRegistry
from wovyr.store.retention import RetentionStore
from wovyr.store.schedules import ScheduleStore
from wovyr.store.secrets import SecretStore
from wovyr.store.streams import StreamStore

__all__ = [
    "DEFAULT_TENANT",
    "Claim",
    "ClaimAsk",
    "CommitOutcome",
    "DefinitionRecord",
    "DefinitionStore",
    "EventRecord",
    "ExecutionFilter",
    "ExecutionKey",
    "ExecutionRecord",
    "ExecutionStore",
    "FairShare",
    "LeaseState",
    "NewExecution",
    "Page",
    "StepWrite",
    "Store",
    "TimerRecord",
    "TimerStore",
    "WorkQueue",
]


class DefinitionStore(Protocol):
    def put_definition(self, record: DefinitionRecord) -> None: ...
    def get_definition(
        self, definition_hash: str, tenant: str = DEFAULT_TENANT
    ) -> DefinitionRecord | None: ...


class ExecutionStore(Protocol):
    """Executions are named by (tenant, id): the same id in two tenants is two executions,
    and no method reaches another tenant's execution through an id."""

    def create_execution(self, new: NewExecution) -> tuple[bool, ExecutionRecord]:
        """Create `new` unless its tenant has an execution with its id (then return that
        one, with False)."""
        ...

    def commit(self, steps: Sequence[StepWrite], atomic: bool = False) -> list[CommitOutcome]: ...
    def load(self, execution_id: str, tenant: str) -> ExecutionRecord | None: ...
    def list_executions(self, query: ExecutionFilter) -> Page:
        """One page, newest first, of the executions `query` selects: by an index on every
        store that has indexes (labels: execution_labels; an id prefix: the primary key)."""
        ...

    def workflow_names(self, tenant: str, contains: str, limit: int = 50) -> list[str]:
        """The names (sorted) of `tenant`'s stored definitions that contain `contains`,
        ignoring case: what a search by partial workflow name lists executions of."""
        ...

    def history(
        self, execution_id: str, after_seq: int = 0, limit: int | None = None, *, tenant: str
    ) -> list[EventRecord]: ...


class WorkQueue(Protocol):
    def claim(self, ask: ClaimAsk) -> list[Claim]:
        """Lease what `ask` asks for (see `ClaimAsk`); each claim increments the execution's
        fence."""
        ...

    def claimable_tenants(
        self, now: datetime, *, partitions: Sequence[int] | None = None, of: int | None = None
    ) -> list[str]:
        """The tenants with at least one execution `claim` could lease at `now` (in
        `partitions` of `of`), by name: one index probe or two per such tenant, however
        long its backlog (a fair claimer's look for tenants, see `FairShare.turns`)."""
        ...

    def renew_leases(
        self, owner: str, now: datetime, lease_seconds: float
    ) -> dict[ExecutionKey, LeaseState]:
        """Renew every lease `owner` holds; the answer is keyed by (tenant, id)."""
        ...

    def release_owner(self, owner: str) -> int: ...
    def ready_count(self, now: datetime) -> int: ...


class TimerStore(Protocol):
    def due_timers(self, now: datetime, limit: int) -> list[TimerRecord]:
        """Due timers of every tenant (each record names its execution's tenant)."""
        ...

    def next_timer_at(self) -> datetime | None: ...


class Store(
    DefinitionStore,
    DefinitionRegistry,
    ExecutionStore,
    WorkQueue,
    TimerStore,
    ScheduleStore,
    ApiKeyStore,
    IdempotencyStore,
    SessionStore,
    TenantStore,
    AuditStore,
    SecretStore,
    ResponseCacheStore,
    ProviderStore,
    StreamStore,
    BulkStore,
    FlowStore,
    McpServerStore,
    AgentMemoryStore,
    RetentionStore,
    EventStore,
    ArtifactStore,
    Protocol,
):
    """Everything the engine, the workers, the schedules and the server need from one
    backend: every role above, plus its URL, `close` and the commit hooks."""

    url: str

    def add_observer(self, observer: StoreObserver) -> None:
        """Tell `observer` about every write from now on (see `wovyr.store.hooks`)."""
        ...

    def close(self) -> None: ...
