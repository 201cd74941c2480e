"""Bulk actions in the store: recorded batches, their items, and the per-execution purge.

A batch is one action (`cancel`, `rerun`, `signal`, `delete`) over the executions a frozen
filter selects, run in the background in pages. The store keeps:

- the batch row: what to do (`action`, `filter` as JSON, `signal` and `payload`), how far
  the listing went (`cursor`, an opaque text the engine writes; `listed_all` once the last
  page was listed), the counts of its items by outcome, and a lease (`lease_owner`,
  `lease_until`, `fence`) so that one runner at a time works on it: a runner that lost its
  lease writes nothing (every write is fenced, as an execution's steps are);
- one row per execution the batch listed, numbered in listing order: `pending` from the
  moment it is listed until its outcome (`ok`, `skipped` with a reason, `error` with the
  message) is recorded. A page is listed in one transaction and its outcomes recorded in
  another, so a runner that dies between the two leaves its page's items pending, and the
  next runner finishes exactly those before it lists more.

A submission is deduplicated: the same `idempotency_key` answers the batch it made (at any
time), and without a key the same `fingerprint` (action, filter, signal, payload) answers
the tenant's batch with that fingerprint that is still running. Its audit record is
appended in the transaction that creates it.

`purge_executions` deletes finished executions with everything the store keeps for each
(events, checkpoint, timers, labels, flow-control rows, stream chunks): what a bulk delete
and retention both need.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import field
from datetime import datetime
from typing import Any, Literal, Protocol

from wovyr.statuses import BatchStatus
from wovyr.store.audit import AuditEntry
from wovyr.store.frozen import record

__all__ = [
    "BATCH_ACTIONS",
    "BatchAction",
    "BatchItem",
    "BatchItemFilter",
    "BatchOutcome",
    "BatchRecord",
    "BatchUpdate",
    "BulkStore",
    "ItemOutcome",
    "NewBatch",
]

BatchAction = Literal["cancel", "rerun", "signal", "delete"]
BATCH_ACTIONS: tuple[BatchAction, ...] = ("cancel", "rerun", "signal", "delete")
ItemOutcome = Literal["pending", "ok", "skipped", "error"]


@record
class BatchItemFilter:
    """The items of `tenant`'s batch `batch_id` numbered above `after`, at most `limit`
    (only those with `outcome`, when given)."""

    tenant: str
    batch_id: str
    after: int = 0
    limit: int = 100
    outcome: ItemOutcome | None = None


@record
class NewBatch:
    tenant: str
    id: str
    action: BatchAction
    filter: Mapping[str, Any]  # frozen at submit (see `wovyr.engine.bulk.BulkFilter`)
    created_at: datetime
    created_by: str  # the actor who submitted it (`key:<id>/<role>`, `local:<user>`)
    fingerprint: str  # sha256 of (action, filter, signal, payload), see the module docstring
    signal: str | None = None
    payload: Any = None
    idempotency_key: str | None = None
    audit: AuditEntry | None = None


@record
class BatchRecord:
    tenant: str
    id: str
    action: BatchAction
    filter: dict[str, Any]
    signal: str | None
    payload: Any
    created_at: datetime
    created_by: str
    fingerprint: str
    idempotency_key: str | None
    status: str  # a `BatchStatus`
    updated_at: datetime
    finished_at: datetime | None
    cursor: str | None
    listed_all: bool
    listed: int  # items listed so far
    ok: int
    skipped: int
    errors: int
    pages: int
    lease_owner: str | None = None
    lease_until: datetime | None = None
    fence: int = 0

    @property
    def pending(self) -> int:
        return self.listed - self.ok - self.skipped - self.errors

    @property
    def finished(self) -> bool:
        return self.status == BatchStatus.COMPLETED


@record
class BatchItem:
    n: int  # its place in the batch's listing, from 1
    execution_id: str
    outcome: ItemOutcome
    detail: str = ""  # why skipped, the error's message, or a rerun's new execution id
    at: datetime | None = None  # when its outcome was recorded


@record
class BatchOutcome:
    execution_id: str
    outcome: ItemOutcome
    detail: str = ""


@record
class BatchUpdate:
    """One fenced write to a batch (see `BulkStore.update_batch`)."""

    tenant: str
    batch_id: str
    fence: int
    now: datetime
    lease_until: datetime  # the runner's lease, renewed by the write
    listed: Sequence[str] = ()  # executions to add as pending items, in listing order
    cursor: str | None = None  # the listing's new position (with `listed`)
    listed_all: bool = False  # the listing reached its end
    outcomes: Sequence[BatchOutcome] = field(default_factory=tuple)


class BulkStore(Protocol):
    """Batches of bulk actions and the purge of finished executions."""

    def create_batch(self, new: NewBatch) -> tuple[bool, BatchRecord]:
        """Create `new` (and append its audit record) unless the tenant has a batch with its
        idempotency key, or a running batch with its fingerprint: then that one, with False."""
        ...

    def get_batch(self, tenant: str, batch_id: str) -> BatchRecord | None: ...

    def list_batches(
        self, tenant: str, limit: int = 50, before: tuple[datetime, str] | None = None
    ) -> list[BatchRecord]:
        """The tenant's batches, newest first; with `before` (a batch's `created_at` and
        `id`), those listed after it."""
        ...

    def batch_items(self, query: BatchItemFilter) -> list[BatchItem]:
        """The items `query` selects, in order."""
        ...

    def claim_batch(self, owner: str, now: datetime, lease_seconds: float) -> BatchRecord | None:
        """Lease the running batch (of any tenant) whose lease is free, expired or already
        `owner`'s and that was worked on least recently; the claim increments its fence."""
        ...

    def update_batch(self, update: BatchUpdate) -> BatchRecord | None:
        """In one transaction, if the batch's fence is still `update.fence`: add the listed
        items (pending), move the cursor, record the outcomes of pending items, count them,
        and renew the lease; once everything is listed and nothing is pending the batch is
        completed and its lease released. None (and nothing written) if the fence moved."""
        ...
