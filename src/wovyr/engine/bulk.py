"""Bulk actions: cancel, rerun, signal or delete the executions a filter selects.

`Bulk(engine).submit(...)` records a batch (`wovyr.store.bulk`) and answers at once; a
`BatchRunner` (the server's background loop, or the CLI's `--wait`) does the work in pages:

1. it claims a batch (a lease: two runners never work on one batch at once, and a runner
   that died is replaced when its lease expires);
2. it lists the next page of the batch's executions with the store's list query, from the
   cursor the batch keeps, and records them as the batch's pending items together with the
   new cursor (one transaction);
3. it applies the action to each item through the engine (each change its own audited
   transaction, as through the API) and records the page's outcomes (one transaction):
   `ok`, `skipped` with the reason (already finished, still running, not found) or `error`
   with the message.

A runner that dies between 2 and 3 leaves that page's items pending; the next runner takes
them first. A cancel it already made is recognised (the execution's `ExecutionCancelled`
names the batch) and a rerun it already started is found by its id (derived from the
batch's and the execution's), so each counts once as `ok`; a delete already done is `ok`
too. A signal is the exception: one sent just before the crash is sent again (signals have
no identity of their own to check).

The filter is frozen at submit: `until` (created before) is never later than the submit
time, so executions started afterwards are not swept in. Re-submitting (same idempotency
key, or the same action, filter, signal and payload while that batch still runs) answers
the existing batch and changes nothing.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import socket
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from wovyr.clock import utc
from wovyr.engine.core.state import ExecutionStatus
from wovyr.engine.engine import Engine
from wovyr.engine.labels import check_labels
from wovyr.engine.views import status_filter
from wovyr.errors import (
    Conflict,
    ExecutionFinished,
    InputError,
    NotFound,
    Problem,
    StoreError,
    WovyrError,
)
from wovyr.events import EventType
from wovyr.ids import derived_id, new_id
from wovyr.statuses import SHOWN_STATUSES
from wovyr.store.audit import payload_digest
from wovyr.store.base import ExecutionFilter, ExecutionRecord
from wovyr.store.bulk import (
    BATCH_ACTIONS,
    BatchAction,
    BatchItem,
    BatchItemFilter,
    BatchOutcome,
    BatchRecord,
    BatchUpdate,
    NewBatch,
)
from wovyr.store.codec import from_micros, to_micros

__all__ = [
    "PAGE_SIZE",
    "STATUSES",
    "BatchRunner",
    "Bulk",
    "BulkFilter",
    "decode_cursor",
    "encode_cursor",
    "runner_name",
]

PAGE_SIZE = 100  # executions per page: listed in one transaction, outcomes in another
STATUSES = SHOWN_STATUSES
_RERUNNABLE = frozenset(
    {ExecutionStatus.COMPLETED, ExecutionStatus.FAILED, ExecutionStatus.CANCELLED}
)


@dataclass(frozen=True)
class BulkFilter:
    """Which executions a batch acts on (every criterion given must hold): the shown
    `status`, the `workflow` name, every one of `labels`, ids starting with `id_prefix`,
    created at or after `since` and before `until`."""

    status: str | None = None
    workflow: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    id_prefix: str | None = None
    since: datetime | None = None
    until: datetime | None = None

    def checked(self) -> BulkFilter:
        """This filter if it is acceptable (and selects something narrower than
        everything), else InputError."""
        problems: list[Problem] = []
        if self.status is not None and self.status not in STATUSES:
            problems.append(Problem(f"status is one of {', '.join(STATUSES)}", path="status"))
        if self.workflow is not None and not 0 < len(self.workflow) <= 200:
            problems.append(Problem("a workflow name is 1-200 characters", path="workflow"))
        if self.id_prefix is not None and not 0 < len(self.id_prefix) <= 200:
            problems.append(Problem("an id prefix is 1-200 characters", path="id_prefix"))
        if self.since and self.until and self.since >= self.until:
            problems.append(Problem("since must be before until", path="since"))
        if not any((self.status, self.workflow, self.labels, self.id_prefix, self.since)) and (
            self.until is None
        ):
            problems.append(
                Problem(
                    "a bulk action needs at least one criterion (status, workflow, label, "
                    "id prefix, since or until)",
                    path="filter",
                )
            )
        if problems:
            raise InputError(problems)
        labels = check_labels(self.labels, "labels") if self.labels else {}
        return replace(
            self,
            labels=labels,
            since=utc(self.since) if self.since else None,
            until=utc(self.until) if self.until else None,
        )

    def frozen(self, now: datetime) -> BulkFilter:
        """The filter as submitted at `now`: nothing created afterwards (`until` is
        exclusive, so the bound is the microsecond after `now`)."""
        bound = now + timedelta(microseconds=1)
        return replace(self, until=bound if self.until is None else min(self.until, bound))

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "workflow": self.workflow,
            "labels": dict(self.labels),
            "id_prefix": self.id_prefix,
            "since": self.since.isoformat() if self.since else None,
            "until": self.until.isoformat() if self.until else None,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BulkFilter:
        since, until = data.get("since"), data.get("until")
        return cls(
            status=data.get("status"),
            workflow=data.get("workflow"),
            labels=dict(data.get("labels") or {}),
            id_prefix=data.get("id_prefix"),
            since=datetime.fromisoformat(since) if since else None,
            until=datetime.fromisoformat(until) if until else None,
        )

    def query(
        self, tenant: str, limit: int, cursor: tuple[datetime, str] | None
    ) -> ExecutionFilter:
        stored, waiting = status_filter(self.status)
        return ExecutionFilter(
            tenant=tenant,
            workflow=self.workflow,
            status=stored,
            waiting=waiting,
            created_after=self.since,
            created_before=self.until,
            labels=tuple(sorted(self.labels.items())),
            id_prefix=self.id_prefix,
            limit=limit,
            cursor=cursor,
        )


def encode_cursor(cursor: tuple[datetime, str] | None) -> str | None:
    """A listing position as the batch keeps it (opaque text)."""
    if cursor is None:
        return None
    raw = json.dumps([to_micros(cursor[0]), cursor[1]]).encode()
    return base64.urlsafe_b64encode(raw).decode()


def decode_cursor(text: str | None) -> tuple[datetime, str] | None:
    if not text:
        return None
    micros, ident = json.loads(base64.urlsafe_b64decode(text))
    return from_micros(int(micros)), str(ident)


def _fingerprint(action: str, given: BulkFilter, signal: str | None, payload: Any) -> str:
    canonical = json.dumps(
        {"action": action, "filter": given.to_json(), "signal": signal, "payload": payload},
        sort_keys=True,
        separators=(",", ":"),
        default=str,
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class Bulk:
    """Submit and read the batches of `engine`'s tenant (as `engine`'s actor)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.store = engine.store

    def submit(
        self,
        action: str,
        given: BulkFilter,
        *,
        signal: str | None = None,
        payload: Any = None,
        idempotency_key: str | None = None,
    ) -> tuple[bool, BatchRecord]:
        """Record a batch (audited as `batch.submit`), or find the one this submission
        repeats; (created, batch). The work is done later, by a `BatchRunner`."""
        if action not in BATCH_ACTIONS:
            raise InputError([Problem(f"action is one of {', '.join(BATCH_ACTIONS)}", "action")])
        checked = given.checked()
        if action == "signal":
            if not signal:
                raise InputError([Problem("a bulk signal needs the signal's name", "signal")])
            self.engine.limits.checked("the signal's payload", payload, "payload")
        elif signal is not None or payload is not None:
            raise InputError([Problem("only a bulk signal takes a signal and payload", "signal")])
        if idempotency_key is not None and not 0 < len(idempotency_key) <= 200:
            raise InputError([Problem("an idempotency key is 1-200 characters", "idempotency_key")])
        engine = self.engine
        now = engine.clock.now()
        frozen = checked.frozen(now)
        batch_id = new_id(now)
        fingerprint = _fingerprint(action, checked, signal, payload)
        details: dict[str, Any] = {"action": action, "filter": frozen.to_json()}
        if action == "signal":
            details |= {"signal": signal, "payload": payload_digest(payload)}
        typed: BatchAction = action  # checked above
        created, batch = self.store.create_batch(
            NewBatch(
                tenant=engine.tenant,
                id=batch_id,
                action=typed,
                filter=frozen.to_json(),
                created_at=now,
                created_by=engine.actor or "system",
                fingerprint=fingerprint,
                signal=signal,
                payload=payload,
                idempotency_key=idempotency_key,
                audit=engine.audit_entry("batch.submit", batch_id, details),
            )
        )
        if not created and idempotency_key is not None and batch.fingerprint != fingerprint:
            raise Conflict(
                f"idempotency key {idempotency_key!r} was used for another bulk action "
                f"(batch {batch.id})",
                hint="use a new key for a different action or filter",
            )
        return created, batch

    def get(self, batch_id: str) -> BatchRecord:
        batch = self.store.get_batch(self.engine.tenant, batch_id)
        if batch is None:
            raise NotFound(f"batch {batch_id} not found")
        return batch

    def batches(
        self, limit: int = 50, before: tuple[datetime, str] | None = None
    ) -> list[BatchRecord]:
        """Newest first; `before`: those listed after the batch of that time and id."""
        return self.store.list_batches(self.engine.tenant, limit, before)

    def items(
        self, batch_id: str, after: int = 0, limit: int = 100, outcome: str | None = None
    ) -> list[BatchItem]:
        self.get(batch_id)  # another tenant's: NotFound
        if outcome not in (None, "pending", "ok", "skipped", "error"):
            raise InputError([Problem("outcome is pending, ok, skipped or error", "outcome")])
        query = BatchItemFilter(
            self.engine.tenant,
            batch_id,
            after,
            limit,
            outcome,  # type: ignore[arg-type]  # checked above
        )
        return self.store.batch_items(query)


def runner_name() -> str:
    return f"batches:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class BatchRunner:
    """Works on the batches of every tenant, one page per `step`."""

    def __init__(
        self,
        engine: Engine,
        owner: str | None = None,
        *,
        lease_seconds: float = 30.0,
        page_size: int = PAGE_SIZE,
    ) -> None:
        if page_size < 1 or lease_seconds <= 0:
            raise ValueError("page_size and lease_seconds must be positive")
        self.engine = engine
        self.store = engine.store
        self.owner = owner or runner_name()
        self.lease_seconds = lease_seconds
        self.page_size = page_size

    def step(self) -> BatchRecord | None:
        """Claim the batch (of any tenant) waiting longest for work and do one page of it;
        the batch as it is now, or None when no batch needs work (or the lease was lost)."""
        batch = self.store.claim_batch(self.owner, self.engine.clock.now(), self.lease_seconds)
        if batch is None:
            return None
        return self._work(batch)

    def run(self, batch_id: str | None = None, max_steps: int | None = None) -> int:
        """Step until no batch (or `batch_id`) needs work; the steps taken."""
        steps = 0
        while max_steps is None or steps < max_steps:
            batch = self.step()
            if batch is None:
                break
            steps += 1
            if batch_id is not None and batch.id == batch_id and batch.finished:
                break
        return steps

    def _update(self, batch: BatchRecord, **kw: Any) -> BatchRecord | None:
        now = self.engine.clock.now()
        return self.store.update_batch(
            BatchUpdate(
                tenant=batch.tenant,
                batch_id=batch.id,
                fence=batch.fence,
                now=now,
                lease_until=now + timedelta(seconds=self.lease_seconds),
                **kw,
            )
        )

    def _work(self, batch: BatchRecord) -> BatchRecord | None:
        left = BatchItemFilter(batch.tenant, batch.id, limit=self.page_size, outcome="pending")
        pending = self.store.batch_items(left)
        if pending:  # a page an earlier runner listed but did not finish
            ids = [i.execution_id for i in pending]
            return self._update(batch, outcomes=self._apply(batch, ids))
        if batch.listed_all:
            return self._update(batch, listed_all=True)
        query = BulkFilter.from_json(batch.filter).query(
            batch.tenant, self.page_size, decode_cursor(batch.cursor)
        )
        page = self.store.list_executions(query)
        ids = [r.id for r in page.items]
        listed = self._update(
            batch,
            listed=ids,
            cursor=encode_cursor(page.next_cursor),
            listed_all=page.next_cursor is None,
        )
        if listed is None or not ids:
            return listed
        return self._update(batch, outcomes=self._apply(batch, ids))

    # --- the actions -----------------------------------------------------------------------

    def _apply(self, batch: BatchRecord, ids: Sequence[str]) -> list[BatchOutcome]:
        engine = self.engine.for_tenant(batch.tenant).acting(
            None if batch.created_by == "system" else batch.created_by
        )
        if batch.action == "delete":
            return self._delete(batch, ids)
        out: list[BatchOutcome] = []
        for execution_id in ids:
            try:
                out.append(self._one(engine, batch, execution_id))
            except NotFound:
                out.append(BatchOutcome(execution_id, "skipped", "not found"))
            except StoreError:  # the store, not the item: the page is done again later
                raise
            except WovyrError as exc:
                out.append(BatchOutcome(execution_id, "error", exc.message))
        return out

    def _one(self, engine: Engine, batch: BatchRecord, execution_id: str) -> BatchOutcome:
        record = self.store.load(execution_id, batch.tenant)
        if record is None:
            return BatchOutcome(execution_id, "skipped", "not found")
        if batch.action == "rerun":
            return self._rerun(engine, batch, record)
        if record.status in ExecutionStatus.TERMINAL:
            if batch.action == "cancel" and self._cancelled_by(batch, record):
                return BatchOutcome(execution_id, "ok", "cancelled")
            return BatchOutcome(execution_id, "skipped", f"already {record.status}")
        try:
            if batch.action == "cancel":
                engine.cancel(execution_id, reason=f"batch {batch.id}", by=batch.created_by)
                return BatchOutcome(execution_id, "ok", "cancelled")
            engine.signal(execution_id, batch.signal or "", batch.payload)
            return BatchOutcome(execution_id, "ok", "signalled")
        except ExecutionFinished as exc:  # it ended meanwhile
            return BatchOutcome(execution_id, "skipped", exc.message)

    def _cancelled_by(self, batch: BatchRecord, record: ExecutionRecord) -> bool:
        """Whether `record` was cancelled by this batch (a page redone after a crash)."""
        if record.status != ExecutionStatus.CANCELLED:
            return False
        tail = self.store.history(record.id, max(0, record.seq - 4), tenant=batch.tenant)
        return any(
            e.type == EventType.EXECUTION_CANCELLED and e.data.get("reason") == f"batch {batch.id}"
            for e in tail
        )

    def _rerun(self, engine: Engine, batch: BatchRecord, record: ExecutionRecord) -> BatchOutcome:
        rerun_id = derived_id(f"{record.id}~r{batch.id}")
        if self.store.load(rerun_id, batch.tenant) is not None:  # done before a crash
            return BatchOutcome(record.id, "ok", rerun_id)
        if record.status not in _RERUNNABLE:
            return BatchOutcome(record.id, "skipped", f"{record.shown_status}: not rerun")
        engine.rerun(record.id, new_id=rerun_id)
        return BatchOutcome(record.id, "ok", rerun_id)

    def _delete(self, batch: BatchRecord, ids: Sequence[str]) -> list[BatchOutcome]:
        purged = set(self.store.purge_executions(batch.tenant, ids))
        out: list[BatchOutcome] = []
        for execution_id in ids:
            if execution_id in purged:
                out.append(BatchOutcome(execution_id, "ok", "deleted"))
                continue
            record = self.store.load(execution_id, batch.tenant)
            if record is None:  # deleted by this batch before a crash (or by someone else)
                out.append(BatchOutcome(execution_id, "ok", "deleted"))
            else:
                out.append(
                    BatchOutcome(execution_id, "skipped", f"{record.shown_status}: not finished")
                )
        return out
