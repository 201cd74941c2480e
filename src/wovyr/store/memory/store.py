"""An in-memory store with the same contract as the durable ones (for tests and embedding).

It keeps nothing across processes; everything else (sequence checks, fences, leases,
timers) behaves exactly as in SQLite and PostgreSQL, and the contract suite proves it.
"""

from __future__ import annotations

import itertools
import threading
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import date, datetime, timedelta
from typing import Any

from wovyr.errors import StoreError
from wovyr.store.agent_memory import MemoryWriteResult
from wovyr.store.audit import AuditAnchor, AuditEntry, AuditRecord
from wovyr.store.base import (
    DEFAULT_TENANT,
    Claim,
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
from wovyr.store.bulk import BatchItem, BatchRecord
from wovyr.store.codec import dumps, loads
from wovyr.store.flow import (
    HOLD_TIMER_PREFIX,
    WAITER_TTL_SECONDS,
    Bucket,
    FlowAcquire,
    FlowAnswer,
    FlowKey,
    GateBook,
    GatedOutcome,
    RateLimitRecord,
    RateRequest,
    SlotClaim,
    plain_outcomes,
)
from wovyr.store.hooks import Observers, StoreObserver
from wovyr.store.memory.agent_memory import MemoryAgentMemory, StoredMemory
from wovyr.store.memory.audit import MemoryAudit
from wovyr.store.memory.bulk import MemoryBulk
from wovyr.store.memory.platform import MemoryPlatform
from wovyr.store.memory.registry import MemoryRegistry
from wovyr.store.memory.schedules import MemorySchedules
from wovyr.store.memory.secrets import MemorySecrets
from wovyr.store.memory.streams import MemoryStreams
from wovyr.store.platform import (
    ApiKeyRecord,
    IdempotencyRecord,
    McpServerRecord,
    ProviderRecord,
    TenantRecord,
)
from wovyr.store.records import SlotRelease, SlotState
from wovyr.store.retention import FINISHED, Expired
from wovyr.store.schedules import ScheduleRecord
from wovyr.store.secrets import DataKeyRecord, KmsRootRecord, SecretRecord
from wovyr.store.shards import shards_for, stable_shard
from wovyr.store.streams import StreamChunk

__all__ = ["MemoryStore"]


def _stored(value: object) -> Any:
    """A copy of `value` as the SQL stores keep it: through the same JSON encoding (tuples
    become lists, datetimes ISO text, NaN null; what JSON cannot hold is refused)."""
    return loads(dumps(value))


class MemoryStore(
    MemorySchedules,
    MemoryRegistry,
    MemoryPlatform,
    MemoryAudit,
    MemorySecrets,
    MemoryStreams,
    MemoryAgentMemory,
    MemoryBulk,
):
    def __init__(self) -> None:
        self.url = "memory://"
        self._lock = threading.RLock()
        self._definitions: dict[tuple[str, str], DefinitionRecord] = {}
        # Executions, their events and timers by (tenant, id): ids are per tenant.
        self._executions: dict[ExecutionKey, ExecutionRecord] = {}
        self._ranks: dict[ExecutionKey, int] = {}  # claim order within a tenant (claim_rank)
        # concurrency keys: (tenant, key) -> [execution id, holding] in start order; the
        # executions waiting for a slot -> their key
        self._slots: dict[tuple[str, str], list[tuple[str, bool]]] = {}
        self._flow_wait: dict[ExecutionKey, str] = {}
        self._buckets: dict[tuple[str, str], tuple[Bucket, str]] = {}  # -> (row, updated_by)
        # activity concurrency: (tenant, key) -> holder -> (execution id, owner)
        self._activity_slots: dict[tuple[str, str], dict[str, tuple[str, str]]] = {}
        # (tenant, key) -> holder -> (seq, execution id, until): attempts waiting for a slot
        self._slot_waiters: dict[tuple[str, str], dict[str, tuple[int, str, datetime]]] = {}
        self._waiter_seq = itertools.count(1)
        # (tenant, execution id) of waiters a freed slot woke (until they look again)
        self._woken: set[ExecutionKey] = set()
        self._events: dict[ExecutionKey, list[EventRecord]] = {}
        self._rerun_of: dict[ExecutionKey, str] = {}  # a rerun -> the execution it reruns
        self._timers: dict[tuple[str, str, str], datetime] = {}  # (tenant, id, timer)
        self._schedules: dict[tuple[str, str], ScheduleRecord] = {}  # (tenant, id)
        self._registered: list[DefinitionRecord] = []  # in the order applied
        self._api_keys: dict[str, ApiKeyRecord] = {}
        self._idempotency_keys: dict[tuple[str, str], IdempotencyRecord] = {}  # (tenant, key)
        self._revoked_sessions: dict[str, datetime] = {}  # session id -> until
        self._tenants: dict[str, TenantRecord] = {}
        self._quota_usage: dict[tuple[str, str, date], float] = {}  # (tenant, budget, day)
        self._audit_log: list[AuditRecord] = []
        self._audit_anchors: list[AuditAnchor] = []
        self._data_keys: dict[tuple[str, int], DataKeyRecord] = {}  # (tenant, version)
        self._secrets: dict[tuple[str, str], SecretRecord] = {}  # (tenant, name)
        self._kms_roots: dict[str, KmsRootRecord] = {}
        self._responses: dict[tuple[str, str], dict[str, Any]] = {}  # (tenant, request hash)
        self._providers: dict[tuple[str, str], ProviderRecord] = {}  # (tenant, name)
        self._streams: dict[ExecutionKey, list[StreamChunk]] = {}  # the stream journals
        self._mcp_servers: dict[tuple[str, str], McpServerRecord] = {}  # (tenant, name)
        self._memory_items: dict[tuple[str, str], dict[str, StoredMemory]] = {}
        self._memory_versions: dict[tuple[str, str], tuple[int, int]] = {}  # version, deletes
        self._memory_writes: dict[tuple[str, str], tuple[MemoryWriteResult, datetime]] = {}
        self._batches: dict[tuple[str, str], BatchRecord] = {}  # (tenant, id)
        self._batch_items: dict[tuple[str, str], list[BatchItem]] = {}  # in listing order
        self._observers = Observers()
        self.commits = 0

    def add_observer(self, observer: StoreObserver) -> None:
        self._observers.add(observer)

    def close(self) -> None:
        return None

    def put_definition(self, record: DefinitionRecord) -> None:
        with self._lock:
            self._definitions.setdefault((record.tenant, record.hash), record)

    def get_definition(
        self, definition_hash: str, tenant: str = DEFAULT_TENANT
    ) -> DefinitionRecord | None:
        return self._definitions.get((tenant, definition_hash))

    def create_execution(self, new: NewExecution) -> tuple[bool, ExecutionRecord]:
        with self._lock:
            created = self._insert_execution(new)
            record = self._executions[(new.tenant, new.id)]
        if created:
            self._observers.created(new)
        return created, record

    def _insert_execution(self, new: NewExecution) -> bool:
        """Insert `new` with its first step unless its id exists (the caller holds the lock
        and tells the observers); True when inserted."""
        key = (new.tenant, new.id)
        if key in self._executions:
            return False
        step = new.first_step
        encoded = self._encode(step)  # before any change: a value JSON cannot hold changes nothing
        self._check_quotas(new)
        self._add_debits(new.tenant, new.debits)
        self._executions[key] = ExecutionRecord(
            id=new.id,
            tenant=new.tenant,
            workflow=new.workflow,
            version=new.version,
            definition_hash=new.definition_hash,
            status=step.status,
            created_at=new.created_at,
            updated_at=step.updated_at,
            seq=0,
            parent_id=new.parent_id,
            input=_stored(new.input),
            lease_owner=new.lease_owner,
            lease_until=new.lease_until,
            fence=1 if new.lease_owner else 0,
            checkpoint={},
            labels=dict(new.labels),
        )
        self._events[key] = []
        if new.rerun_of is not None:
            self._rerun_of[key] = new.rerun_of
        self._ranks[key] = new.claim_rank
        self._apply(step, encoded, key)
        if new.slot is not None:
            self._take_slot(new)
        self._append_audit(new.audit)
        self.commits += 1
        return True

    def commit(self, steps: Sequence[StepWrite], atomic: bool = False) -> list[CommitOutcome]:
        return plain_outcomes(self._commit_steps(steps, atomic))

    def commit_gated(self, steps: Sequence[StepWrite]) -> list[GatedOutcome]:
        return self._commit_steps(steps, False)

    def _commit_steps(self, steps: Sequence[StepWrite], atomic: bool) -> list[GatedOutcome]:
        encoded = [self._encode(step) for step in steps]
        with self._lock:
            for step in steps:  # a taken id refuses the batch before anything changes
                new = step.continued_as
                if new is not None and (new.tenant, new.id) in self._executions:
                    raise StoreError(f"the continued run's id {new.id} is taken")
            results: list[GatedOutcome] = [self._check(step) for step in steps] if atomic else []
            if not any(c is not CommitOutcome.OK for c in results):
                results = [self._check_and_apply(s, e) for s, e in zip(steps, encoded, strict=True)]
                if CommitOutcome.OK in results:
                    self.commits += 1
        self._observers.committed(steps, plain_outcomes(results))
        return results

    def _check_and_apply(
        self, step: StepWrite, encoded: tuple[list[Any], dict[str, object]]
    ) -> GatedOutcome:
        outcome = self._check(step)
        if outcome is CommitOutcome.OK and step.gate is not None:
            # checked first: a step that does not apply takes nothing
            answer = self._acquire(step.gate)
            if not answer.granted:
                return answer
        if outcome is CommitOutcome.OK:
            self._apply(step, encoded)
            if step.status in FINISHED:
                self._woken.discard(step.key)  # an ended execution waits for nothing
            if step.slot_released is not None:
                self._release_slot(step.tenant, step.execution_id, step.slot_released)
            if step.flow_released:
                self._release_activity_slots(step.tenant, step.flow_released, step.updated_at)
            if step.continued_as is not None:
                self._insert_execution(step.continued_as)
            self._append_audit(step.audit)
        return outcome

    def _check(self, step: StepWrite) -> CommitOutcome:
        current = self._executions.get(step.key)
        if current is None:
            return CommitOutcome.NOT_FOUND
        if step.fence is not None and current.fence != step.fence:
            return CommitOutcome.LEASE_LOST
        if current.seq != step.expected_seq:
            return CommitOutcome.CONFLICT
        return CommitOutcome.OK

    @staticmethod
    def _encode(step: StepWrite) -> tuple[list[Any], dict[str, object]]:
        """The step's values as stored, all encoded before anything changes (a value JSON
        cannot hold raises here and the store stays as it was, as a rolled-back SQL
        transaction leaves it)."""
        data = [_stored(e.data) for e in step.events]
        values: dict[str, object] = {
            "checkpoint": _stored(step.checkpoint),
            "output": _stored(step.output),
            "error": _stored(step.error),
        }
        return data, values

    def _apply(
        self,
        step: StepWrite,
        encoded: tuple[list[Any], dict[str, object]],
        key: ExecutionKey | None = None,
    ) -> None:
        """Apply `step` to execution `key` (default: the step's own; a new execution's first
        step is applied to the new execution, as the SQL stores do)."""
        key = key or step.key
        current = self._executions[key]
        base = current.seq
        self._add_debits(key[0], step.debits)
        data, values = encoded
        events = self._events[key]
        for i, (e, stored) in enumerate(zip(step.events, data, strict=True)):
            events.append(EventRecord(step.execution_id, base + i + 1, e.type, e.at, stored))
        for timer in step.timers_removed:
            self._timers.pop((*key, timer), None)
        for timer, fire_at in step.timers_armed:
            if timer.startswith(HOLD_TIMER_PREFIX) and key in self._woken:
                fire_at = min(fire_at, step.updated_at)  # noqa: PLW2901 (woken before armed)
            self._timers[(*key, timer)] = fire_at
        changes: dict[str, object] = {
            **values,
            "seq": base + len(step.events),
            "status": step.status,
            "updated_at": step.updated_at,
            "ready": step.ready,
            "waiting_on": step.waiting_on,
        }
        if step.release_lease:
            changes.update(lease_owner=None, lease_until=None)
        if key in self._flow_wait:  # waiting for a concurrency slot: not ready until handed one
            changes.update(ready=False, waiting_on=current.waiting_on)
        self._executions[key] = replace(current, **changes)  # type: ignore[arg-type]

    def _take_slot(self, new: NewExecution) -> None:
        slot = new.slot
        assert slot is not None
        rows = self._slots.setdefault((new.tenant, slot.key), [])
        held = sum(1 for _, holding in rows if holding)
        holding = held < slot.limit and held == len(rows)
        rows.append((new.id, holding))
        if not holding:
            key = (new.tenant, new.id)
            self._flow_wait[key] = slot.key
            self._executions[key] = replace(
                self._executions[key],
                ready=False,
                lease_owner=None,
                lease_until=None,
                waiting_on=f"concurrency {slot.key}",
            )

    def _release_slot(self, tenant: str, execution_id: str, released: SlotRelease) -> None:
        rows = self._slots.get((tenant, released.key), [])
        rows[:] = [r for r in rows if r[0] != execution_id]
        if self._flow_wait.pop((tenant, execution_id), None) is not None:
            key = (tenant, execution_id)
            self._executions[key] = replace(self._executions[key], waiting_on=None)
        room = released.limit - sum(1 for _, holding in rows if holding)
        for i, (waiting_id, holding) in enumerate(rows):
            if room <= 0:
                break
            if not holding:
                rows[i] = (waiting_id, True)
                room -= 1
                key = (tenant, waiting_id)
                self._flow_wait.pop(key, None)
                self._executions[key] = replace(self._executions[key], ready=True, waiting_on=None)

    def _valid_holders(self, tenant: str, key: str, now: datetime) -> list[str]:
        rows = self._activity_slots.get((tenant, key), {})
        for holder, (execution_id, owner) in list(rows.items()):
            record = self._executions.get((tenant, execution_id))
            held = record is not None and record.lease_owner == owner
            if not held or record is None or record.lease_until is None or record.lease_until < now:
                del rows[holder]  # its worker's lease expired or moved on: the slot is free
        return sorted(rows)

    def acquire_flow(
        self,
        tenant: str,
        execution_id: str,
        owner: str,
        now: datetime,
        rates: Sequence[RateRequest] = (),
        slots: Sequence[SlotClaim] = (),
    ) -> FlowAnswer:
        return self.acquire_flows([FlowAcquire(tenant, execution_id, owner, now, rates, slots)])[0]

    def acquire_flows(self, asks: Sequence[FlowAcquire]) -> list[FlowAnswer]:
        with self._lock:
            return [self._acquire(a) for a in asks]

    def _acquire(self, ask: FlowAcquire) -> FlowAnswer:
        # (the caller holds the lock)
        tenant, now = ask.tenant, ask.now
        buckets = {
            (tenant, r.key): self._buckets[(tenant, r.key)][0]
            for r in ask.rates
            if (tenant, r.key) in self._buckets
        }
        keys = {c.key for c in ask.slots}
        holders = {(tenant, k): self._valid_holders(tenant, k, now) for k in keys}
        waiters = {(tenant, k): self._live_waiters(tenant, k, now) for k in keys}
        book = GateBook(now.timestamp(), buckets, holders, waiters)
        answer = book.decide(ask)
        for key, bucket in book.changed():
            by = self._buckets.get(key, (bucket, ""))[1]
            self._buckets[key] = (bucket, by)
        for a, c in book.takes():
            self._activity_slots.setdefault((tenant, c.key), {})[c.holder] = (
                a.execution_id,
                a.owner,
            )
            self._slot_waiters.get((tenant, c.key), {}).pop(c.holder, None)
            self._woken.discard((tenant, a.execution_id))
        if not answer.granted:  # looked again: a wake that brought it is spent
            self._woken.discard((tenant, ask.execution_id))
        until = now + timedelta(seconds=WAITER_TTL_SECONDS)
        for t, k, holder, execution_id in book.queued():
            self._woken.discard((t, execution_id))  # looked again: no longer woken
            queue = self._slot_waiters.setdefault((t, k), {})
            seq = queue[holder][0] if holder in queue else next(self._waiter_seq)
            queue[holder] = (seq, execution_id, until)
        return answer

    def _release_activity_slots(
        self, tenant: str, released: Sequence[tuple[str, str]], at: datetime
    ) -> None:
        """Free the slots `released` (key, holder) and wake, for each slot freed, the oldest
        waiter of its key not woken yet whose execution has not ended: marked woken, and
        its hold timer, if armed already, due at `at`."""
        freed: Counter[str] = Counter()
        for key, holder in released:
            self._activity_slots.get((tenant, key), {}).pop(holder, None)
            freed[key] += 1
        woken: set[ExecutionKey] = set()
        for key, count in freed.items():
            n = count
            for _, execution_id, _until in sorted(
                self._slot_waiters.get((tenant, key), {}).values()
            ):
                record = self._executions.get((tenant, execution_id))
                waiter = (tenant, execution_id)
                if record is None or record.status in FINISHED or waiter in self._woken:
                    continue
                self._woken.add(waiter)
                woken.add(waiter)
                n -= 1
                if n == 0:
                    break
        for timer, fire_at in list(self._timers.items()) if woken else ():
            if timer[:2] in woken and timer[2].startswith(HOLD_TIMER_PREFIX) and fire_at > at:
                self._timers[timer] = at

    def _live_waiters(self, tenant: str, key: str, now: datetime) -> list[str]:
        """The attempts waiting for a slot of `key`, oldest first; those whose execution
        ended or who did not come back in time are forgotten."""
        queue = self._slot_waiters.get((tenant, key), {})
        for holder, (_, execution_id, until) in list(queue.items()):
            record = self._executions.get((tenant, execution_id))
            if record is None or record.status in FINISHED or until < now:
                del queue[holder]
        return [h for h, _ in sorted(queue.items(), key=lambda item: item[1][0])]

    def flow_keys(self, tenant: str, now: datetime) -> list[FlowKey]:
        with self._lock:
            keys = [
                FlowKey(
                    "workflow", key, sum(1 for _, h in rows if h), sum(1 for _, h in rows if not h)
                )
                for (t, key), rows in sorted(self._slots.items())
                if t == tenant and rows
            ]
            names = sorted(
                {k for t, k in self._activity_slots if t == tenant}
                | {k for t, k in self._slot_waiters if t == tenant}
            )
            for key in names:
                running = len(self._valid_holders(tenant, key, now))
                waiting = len(self._live_waiters(tenant, key, now))
                if running or waiting:
                    keys.append(FlowKey("activity", key, running, waiting))
            return keys

    def activity_slot_holders(self, tenant: str, key: str, now: datetime) -> list[str]:
        with self._lock:
            return self._valid_holders(tenant, key, now)

    def set_rate_limit(
        self,
        tenant: str,
        key: str,
        capacity: float,
        per_second: float,
        by: str,
        now: datetime,
        *,
        audit: AuditEntry | None = None,
    ) -> RateLimitRecord:
        with self._lock:
            old = self._buckets.get((tenant, key))
            tokens = capacity if old is None else min(old[0].tokens, capacity)
            refilled = now.timestamp() if old is None else old[0].refilled_at
            wake = 0.0 if old is None else old[0].wake_at
            bucket = Bucket(capacity, per_second, tokens, refilled, wake, declared=True)
            self._buckets[(tenant, key)] = (bucket, by)
            self._append_audit(audit)
        return RateLimitRecord(tenant, key, capacity, per_second, tokens, True, by, refilled)

    def rate_limits(self, tenant: str) -> list[RateLimitRecord]:
        with self._lock:
            return [
                RateLimitRecord(
                    t, k, b.capacity, b.per_second, b.tokens, b.declared, by, b.refilled_at
                )
                for (t, k), (b, by) in sorted(self._buckets.items())
                if t == tenant
            ]

    def delete_rate_limit(self, tenant: str, key: str, *, audit: AuditEntry | None = None) -> bool:
        with self._lock:
            deleted = self._buckets.pop((tenant, key), None) is not None
            if deleted:
                self._append_audit(audit)
            return deleted

    def slot_state(self, tenant: str, key: str) -> SlotState:
        with self._lock:
            rows = list(self._slots.get((tenant, key), []))
        return SlotState(
            key=key,
            holders=[i for i, holding in rows if holding],
            waiting=[i for i, holding in rows if not holding],
        )

    # --- retention (wovyr.store.retention) --------------------------------------------------

    def find_expired(
        self,
        tenant: str,
        workflow: str | None,
        finished_before: datetime,
        limit: int,
        *,
        after: tuple[datetime, str] | None = None,
    ) -> list[Expired]:
        with self._lock:
            found = sorted(
                (r.updated_at, r.id, r)
                for r in self._executions.values()
                if r.tenant == tenant
                and r.status in FINISHED
                and r.updated_at < finished_before
                and (workflow is None or r.workflow == workflow)
                and (after is None or (r.updated_at, r.id) > after)
            )
        return [Expired(r.id, r.workflow, r.status, at) for at, _, r in found[:limit]]

    def purge_executions(
        self, tenant: str, ids: Sequence[str], *, audit: AuditEntry | None = None
    ) -> list[str]:
        with self._lock:
            keys = [
                (tenant, i)
                for i in dict.fromkeys(ids)
                if (r := self._executions.get((tenant, i))) is not None and r.status in FINISHED
            ]
            for key in keys:
                del self._executions[key]
                self._events.pop(key, None)
                self._ranks.pop(key, None)
                self._rerun_of.pop(key, None)
                self._flow_wait.pop(key, None)
                self._streams.pop(key, None)
            gone = {i for _, i in keys}
            for timer in [t for t in self._timers if t[0] == tenant and t[1] in gone]:
                del self._timers[timer]
            for (t, _), rows in self._slots.items():
                if t == tenant:
                    rows[:] = [row for row in rows if row[0] not in gone]
            for (t, _), holders in self._activity_slots.items():
                if t == tenant:
                    for holder in [h for h, (e, _) in holders.items() if e in gone]:
                        del holders[holder]
            if keys:
                self._append_audit(audit)
                self.commits += 1
        return [i for _, i in keys]

    def load(self, execution_id: str, tenant: str) -> ExecutionRecord | None:
        with self._lock:
            record = self._executions.get((tenant, execution_id))
            if record is None:
                return None
            return replace(record, checkpoint=_stored(record.checkpoint))

    def list_executions(self, query: ExecutionFilter) -> Page:
        with self._lock:
            rows = [
                replace(r, checkpoint=None)
                for r in self._executions.values()
                if (query.tenant is None or r.tenant == query.tenant)
                and (query.workflow is None or r.workflow == query.workflow)
                and (query.status is None or r.status == query.status)
                and (query.waiting is None or bool(r.waiting_on) == query.waiting)
                and (query.parent_id is None or r.parent_id == query.parent_id)
                and (query.rerun_of is None or self._rerun_of.get(r.key) == query.rerun_of)
                and (query.id_prefix is None or r.id.startswith(query.id_prefix))
                and (query.workflows is None or r.workflow in query.workflows)
                and all(r.labels.get(k) == v for k, v in query.labels)
                and (query.created_after is None or r.created_at >= query.created_after)
                and (query.created_before is None or r.created_at < query.created_before)
                and (query.cursor is None or (r.created_at, r.id) < query.cursor)
            ]
        rows.sort(key=lambda r: (r.created_at, r.id), reverse=True)
        items = rows[: query.limit]
        more = len(rows) > query.limit
        return Page(items, (items[-1].created_at, items[-1].id) if more and items else None)

    def workflow_names(self, tenant: str, contains: str, limit: int = 50) -> list[str]:
        needle = contains.lower()
        with self._lock:
            names = {d.name for (t, _), d in self._definitions.items() if t == tenant}
        return sorted(n for n in names if needle in n.lower())[:limit]

    def history(
        self, execution_id: str, after_seq: int = 0, limit: int | None = None, *, tenant: str
    ) -> list[EventRecord]:
        with self._lock:
            events = [e for e in self._events.get((tenant, execution_id), []) if e.seq > after_seq]
        return events[:limit] if limit is not None else events

    def claim(
        self,
        owner: str,
        now: datetime,
        lease_seconds: float,
        limit: int,
        only: Sequence[str] | None = None,
        *,
        tenant: str = DEFAULT_TENANT,
        partitions: Sequence[int] | None = None,
        of: int | None = None,
        fair: FairShare | None = None,
    ) -> list[Claim]:
        shards = shards_for(partitions, of)
        claims: list[Claim] = []
        with self._lock:
            chosen: list[ExecutionRecord] = []
            for r in self._executions.values():
                if only is not None and (r.tenant != tenant or r.id not in only):
                    continue
                if shards is not None and stable_shard(r.id) not in shards:
                    continue
                if r.ready and (r.lease_until is None or r.lease_until < now):
                    chosen.append(r)
            # The SQL stores' order: free rows first, then expired leases, then claim_rank.
            chosen.sort(
                key=lambda r: (r.lease_until is not None, r.lease_until or now, self._ranks[r.key])
            )
            if fair is not None and only is None:
                chosen = _fair_order(chosen, limit, fair, self._leased(now, fair.max_running))
            for r in chosen[:limit]:
                new = replace(
                    r,
                    lease_owner=owner,
                    fence=r.fence + 1,
                    lease_until=now + timedelta(seconds=lease_seconds),
                )
                self._executions[r.key] = new
                self.commits += len(claims) == 0
                claims.append(
                    Claim(
                        r.id,
                        new.fence,
                        new.seq,
                        _stored(new.checkpoint or {}),
                        new.definition_hash,
                        new.tenant,
                    )
                )
        self._observers.claimed(claims)
        return claims

    def _leased(self, now: datetime, tenants: Iterable[str]) -> dict[str, int]:
        """How many executions of each of `tenants` hold a live lease (any worker's; a
        leased execution is ready: the step that suspends or ends it releases the lease)."""
        named = set(tenants)
        if not named:
            return {}
        counts = Counter(
            r.tenant
            for r in self._executions.values()
            if r.tenant in named and r.ready and r.lease_until is not None and r.lease_until >= now
        )
        return {t: counts[t] for t in named}

    def claimable_tenants(
        self, now: datetime, *, partitions: Sequence[int] | None = None, of: int | None = None
    ) -> list[str]:
        shards = shards_for(partitions, of)
        with self._lock:
            return sorted(
                {
                    r.tenant
                    for r in self._executions.values()
                    if r.ready
                    and (r.lease_until is None or r.lease_until < now)
                    and (shards is None or stable_shard(r.id) in shards)
                }
            )

    def renew_leases(
        self, owner: str, now: datetime, lease_seconds: float
    ) -> dict[ExecutionKey, LeaseState]:
        out = {}
        with self._lock:
            for r in list(self._executions.values()):
                if r.lease_owner == owner:
                    self._executions[r.key] = replace(
                        r, lease_until=now + timedelta(seconds=lease_seconds)
                    )
                    out[r.key] = LeaseState(fence=r.fence, seq=r.seq)
        return out

    def release_owner(self, owner: str) -> int:
        count = 0
        with self._lock:
            for r in list(self._executions.values()):
                if r.lease_owner == owner:
                    self._executions[r.key] = replace(r, lease_owner=None, lease_until=None)
                    count += 1
        return count

    def ready_count(self, now: datetime) -> int:
        with self._lock:
            return sum(
                1
                for r in self._executions.values()
                if r.ready and (r.lease_until is None or r.lease_until < now)
            )

    def due_timers(self, now: datetime, limit: int) -> list[TimerRecord]:
        with self._lock:
            due = sorted(
                (at, ex, t, tenant) for (tenant, ex, t), at in self._timers.items() if at <= now
            )
        return [TimerRecord(ex, t, at, tenant) for at, ex, t, tenant in due[:limit]]

    def next_timer_at(self) -> datetime | None:
        with self._lock:
            return min(self._timers.values(), default=None)


def _fair_order(
    ready: list[ExecutionRecord], limit: int, fair: FairShare, leased: Mapping[str, int]
) -> list[ExecutionRecord]:
    """The fair claim's choice (see `FairShare`): each tenant's first `room` claimable
    executions (its `turns` when given, within its `max_running` less the `leased` ones),
    scored by rank, lowest first; ties keep the plain (insertion) order."""
    if fair.turns is not None:
        taken: dict[str, int] = {}
        rooms = dict(fair.turns)
        for tenant, most in fair.max_running.items():
            rooms[tenant] = min(rooms.get(tenant, 0), max(0, most - leased.get(tenant, 0)))
        out = []
        for r in ready:
            if taken.get(r.tenant, 0) < rooms.get(r.tenant, 0):
                taken[r.tenant] = taken.get(r.tenant, 0) + 1
                out.append(r)
        return out[:limit]
    rooms = fair.rooms(dict.fromkeys(r.tenant for r in ready), limit)
    ranks: dict[str, int] = {}
    scored: list[tuple[float, int, ExecutionRecord]] = []
    for position, r in enumerate(ready):
        rank = ranks[r.tenant] = ranks.get(r.tenant, 0) + 1
        if rank <= rooms[r.tenant]:
            scored.append((fair.score(r.tenant, rank), position, r))
    scored.sort(key=lambda s: (s[0], s[1]))
    return [r for _, _, r in scored[:limit]]
