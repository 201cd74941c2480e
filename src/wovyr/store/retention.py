"""Purging finished executions: finding the ones that ended long enough ago, and deleting
each with everything the store keeps for it.

An execution is *finished* once its status is one of `FINISHED` (completed, failed,
cancelled, continued): no step changes it after that, so the time of its last step
(`updated_at`) is the time it finished. `find_expired` walks a partial index that holds only
finished executions, by (tenant, finish time) or (tenant, workflow, finish time), so a
retention pass reads the rows it purges and nothing else, however many executions still run.

`purge_executions` deletes, in ONE transaction, each named execution that is finished, with
its events, checkpoint (the row and any delta rows), timers, label rows, stream chunks and any
flow-control rows left for it; a name that is running (or unknown, or another tenant's) is
skipped, so a purge can never pull an execution from under a worker. What is NOT deleted:
its children, which are executions of their own, purged by their own finish time (a child
that finishes after its parent is gone finds no parent to tell, which the engine already
treats as "nobody waits"); reruns of it (their `rerun_of` then names a missing execution);
and the audit chain, which is append-only by design.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from wovyr.store.audit import AuditEntry
from wovyr.store.frozen import record
from wovyr.store.records import FINISHED  # the partial indexes' condition

__all__ = ["FINISHED", "Expired", "ExpiredFilter", "RetentionStore"]


@record
class Expired:
    """A finished execution `find_expired` found: its id, workflow, status and finish time.
    (`finished_at`, `id`) is also the cursor of the next page."""

    id: str
    workflow: str
    status: str
    finished_at: datetime


@record
class ExpiredFilter:
    """`tenant`'s finished executions (of `workflow`; None: of any) that finished before
    `finished_before`, at most `limit`, after the cursor `after` (a previous page's last
    `(finished_at, id)`)."""

    tenant: str
    workflow: str | None
    finished_before: datetime
    limit: int
    after: tuple[datetime, str] | None = None


class RetentionStore(Protocol):
    def find_expired(self, query: ExpiredFilter) -> list[Expired]:
        """The executions `query` selects, oldest first (then by id): an index range scan
        on every store that has indexes."""
        ...

    def purge_executions(
        self, tenant: str, ids: Sequence[str], *, audit: AuditEntry | None = None
    ) -> list[str]:
        """Delete every execution of `tenant` named in `ids` that is finished, with all the
        store keeps for it, in one transaction (with `audit`, appended in it when anything
        was deleted); return the ids deleted, in the order given. Running, unknown and
        other tenants' ids are skipped (and not in the answer). Retention and bulk delete
        both purge through it."""
        ...
