"""PostgreSQL store: psycopg 3 with a connection pool, for many workers on many hosts.

Same contract and semantics as the SQLite store (the contract suite runs on both), plus:

- The claim is one statement (`FOR UPDATE SKIP LOCKED` + `UPDATE ... RETURNING`), optionally
  filtered by partitions of the stable shard (`wovyr.store.shards`).
- A batch of steps is one transaction sent in pipeline mode: one network round trip and one
  fsync for the whole batch, each step still checked on its own.
- Times: by default leases are measured with the `now` the engine passes (its clock, which
  is what tests control). With `db_clock=True` claims, renewals and lease checks use the
  database's `now()` instead, so workers on hosts with skewed clocks agree.
- Membership (`worker_members`, see `members.py`): live workers, from which partitions are
  assigned to workers that join (`Worker(membership=True)`).
- `LISTEN/NOTIFY`: a write that leaves an execution ready and unleased sends
  `NOTIFY wovyr_ready, '<id>'` in its transaction; `wait_for_work` waits for one. The
  channel is `wovyr_ready` in the `public` schema and `wovyr_ready:<schema>` in another, so
  installations in different schemas of one database do not wake each other.
- Errors: every psycopg error becomes `StoreError`, connection failures `StoreUnavailable`.
  A read that lost its connection is retried once; a write is retried only when the server
  certainly rolled it back (deadlock, serialization failure), never when its outcome is
  unknown.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from wovyr.errors import StoreError, StoreUnavailable
from wovyr.store import redact_url
from wovyr.store.audit import AuditEntry, AuditRecord
from wovyr.store.base import (
    Claim,
    CommitOutcome,
    ExecutionFilter,
    ExecutionRecord,
    NewExecution,
    Page,
    StepWrite,
)
from wovyr.store.capabilities import SnapshotInfo
from wovyr.store.checkpoints import Ledger, Plan
from wovyr.store.codec import dumps
from wovyr.store.events import first_step_of, outbox_events
from wovyr.store.flow import FlowAnswer, GatedOutcome, plain_outcomes
from wovyr.store.hooks import Observers, StoreObserver
from wovyr.store.postgres import support
from wovyr.store.postgres.audit import append_audit_row, audit_head_lock_sql
from wovyr.store.postgres.flow import FlowGates, PostgresRateLimits, flow_queries
from wovyr.store.postgres.members import PostgresMembers
from wovyr.store.postgres.partitions import PostgresEventPartitions
from wovyr.store.postgres.queries import migrations, queries
from wovyr.store.postgres.retention import PostgresRetention
from wovyr.store.postgres.secrets import PostgresScrub
from wovyr.store.postgres.snapshot import dump_schema
from wovyr.store.postgres.support import Connection
from wovyr.store.postgres.timers import PostgresTimers
from wovyr.store.records import SlotState
from wovyr.store.rows import (
    POSTGRES,
    claim_record,
    execution_record,
)
from wovyr.store.shards import shards_for, stable_shard
from wovyr.store.sql import Tx
from wovyr.store.sql.agent_memory import SQLAgentMemory
from wovyr.store.sql.artifacts import SQLArtifacts
from wovyr.store.sql.audit import SQLAudit
from wovyr.store.sql.bulk import SQLBulk
from wovyr.store.sql.events import SQLEvents, write_outbox
from wovyr.store.sql.executions import SQLExecutions
from wovyr.store.sql.flow import SQLFlow
from wovyr.store.sql.platform import SQLPlatform
from wovyr.store.sql.queue import ClaimPlan, SQLQueue
from wovyr.store.sql.quotas import SQLQuotas
from wovyr.store.sql.registry import SQLRegistry
from wovyr.store.sql.retention import SQLRetention
from wovyr.store.sql.schedules import SQLSchedules
from wovyr.store.sql.secrets import SQLSecrets
from wovyr.store.sql.streams import SQLStreams

__all__ = ["PostgresStore"]

T = TypeVar("T")
RETRYABLE_WRITE = (pg_errors.DeadlockDetected, pg_errors.SerializationFailure)


class PostgresStore(
    SQLQueue,
    SQLExecutions,
    SQLSchedules,
    SQLRegistry,
    PostgresMembers,
    SQLPlatform,
    SQLQuotas,
    SQLAudit,
    SQLSecrets,
    PostgresScrub,
    PostgresTimers,
    SQLStreams,
    SQLAgentMemory,
    PostgresRateLimits,
    SQLFlow,
    PostgresRetention,
    SQLRetention,
    SQLBulk,
    PostgresEventPartitions,
    SQLEvents,
    SQLArtifacts,
):
    """The scale-out store. `url` is a libpq URL (`postgresql://user@host:5432/db?...`)."""

    def __init__(
        self,
        url: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        db_clock: bool = False,
        auto_migrate: bool = True,
        connect_timeout: float = 10.0,
    ) -> None:
        self.url = url
        self.db_clock = db_clock
        self.commits = 0  # durable write transactions issued by this object (for benchmarks)
        self._count_lock = threading.Lock()
        self._connect_timeout = connect_timeout
        self._q = queries()
        self._listen_lock = threading.Lock()
        self._listener: Connection | None = None
        self._listener_lost = False
        self._closed = False
        self._observers = Observers()
        self._pool: ConnectionPool[Connection] = ConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            open=False,
            kwargs={"autocommit": True, "connect_timeout": max(1, round(connect_timeout))},
            timeout=connect_timeout,
            name="wovyr",
            configure=support.configure,
        )
        try:
            # One plain connection first: a server that is down fails fast with libpq's own
            # message, instead of the pool retrying (and logging) until its timeout.
            psycopg.connect(url, connect_timeout=max(1, round(connect_timeout))).close()
            self._pool.open(wait=True, timeout=connect_timeout)
        except psycopg.Error as exc:
            self._pool.close()
            raise StoreUnavailable(f"cannot reach PostgreSQL at {redact_url(url)}: {exc}") from exc
        except BaseException:
            self._pool.close()
            raise
        try:
            schema = self._read("current_schema", {})[0][0]
        except BaseException:
            self.close()
            raise
        self.channel = support.channel(schema)
        self._ledger = Ledger()  # what this object last wrote of each checkpoint
        if auto_migrate:
            try:
                self.migrate()
            except BaseException:
                self.close()
                raise

    # --- plumbing ------------------------------------------------------------------------

    def _run(
        self,
        body: Callable[[Connection], T],
        *,
        write: bool,
        transaction: bool = False,
        wrote: Callable[[T], bool] | None = None,
    ) -> T:
        """Run `body` on a pooled connection (autocommit, or in one transaction), translating
        driver errors; retry a read that lost its connection, or a write the server rolled
        back because of a deadlock, once. A write counts as a durable commit unless `wrote`
        says, from its result, that it changed nothing."""
        for attempt in (1, 2):
            try:
                with self._connection() as conn:
                    if transaction:
                        with conn.transaction():
                            result = body(conn)
                    else:
                        result = body(conn)
                if write and (wrote is None or wrote(result)):
                    with self._count_lock:
                        self.commits += 1
                return result
            except PoolClosed as exc:
                raise StoreError("the store is closed") from exc
            except PoolTimeout as exc:
                raise StoreUnavailable(f"no PostgreSQL connection available: {exc}") from exc
            except RETRYABLE_WRITE as exc:
                if attempt == 2:
                    raise support.translate(exc, write=write) from exc
            except psycopg.OperationalError as exc:
                if write or attempt == 2:
                    raise support.translate(exc, write=write) from exc
            except psycopg.Error as exc:
                raise support.translate(exc, write=write) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    @contextmanager
    def _connection(self) -> Iterator[Connection]:
        """A live pooled connection. Dead ones (a terminated backend, a restarted server)
        are closed, which makes the pool replace them, and the next one is tried at once."""
        for _ in range(self._pool.max_size):
            conn = self._pool.getconn()
            if support.usable(conn):
                break
            conn.close()
            self._pool.putconn(conn)
        else:
            conn = self._pool.getconn()  # all were dead: wait for a fresh one
        try:
            with conn:  # as the pool's own connection(): roll back on error, keep it open
                yield conn
        finally:
            self._pool.putconn(conn)

    _dialect = POSTGRES  # for the roles written once for both SQL stores (wovyr.store.sql)

    def _sql_write(self, body: Callable[[Tx], T]) -> T:
        return self._write(lambda conn: body(_Tx(conn, self)))

    def _sql_read(self, sql: str, params: Mapping[str, Any]) -> list[Any]:
        return self._run(
            lambda conn: conn.cursor(row_factory=dict_row).execute(sql, params).fetchall(),
            write=False,
        )

    def _sql_write_one(self, sql: str, params: Mapping[str, Any]) -> list[Any]:
        """One statement in autocommit (no BEGIN/COMMIT round trips)."""
        return self._run(
            lambda conn: conn.cursor(row_factory=dict_row).execute(sql, params).fetchall(),
            write=True,
        )

    def _write(self, body: Callable[[Connection], T]) -> T:
        """Several statements in one transaction."""
        return self._run(body, write=True, transaction=True)

    def _write_one(self, name: str, params: dict[str, Any], *, named: bool = False) -> list[Any]:
        """One statement, its own transaction (autocommit: no BEGIN/COMMIT round trips);
        `named`: rows read by column name (records, see `wovyr.store.rows`)."""
        sql = self._q[name]
        return self._run(
            lambda conn: support.rows(_cursor(conn, named).execute(sql, params)), write=True
        )

    def _read(
        self,
        name: str,
        params: dict[str, Any],
        *,
        prepare: bool | None = None,
        named: bool = False,
    ) -> list[Any]:
        sql = self._q[name]
        return self._run(
            lambda conn: support.rows(_cursor(conn, named).execute(sql, params, prepare=prepare)),
            write=False,
        )

    def _now(self, now: datetime) -> datetime | None:
        """The time a lease query measures against: None makes the SQL use the DB's now()."""
        return None if self.db_clock else now

    _lease_now = _now  # for the shared roles' `{lease_now}` (wovyr.store.sql)

    # --- life cycle ----------------------------------------------------------------------

    def migrate(self) -> int:
        """Apply pending numbered migrations under an advisory lock; return the version."""

        def body(conn: Connection) -> int:
            conn.execute(self._q["migrations_lock"])
            conn.execute(self._q["migrations_table"], prepare=False)  # DDL: never prepared
            done = {row[0] for row in conn.execute(self._q["migrations_applied"])}
            for version, script in migrations():
                if version not in done:
                    conn.execute(script.encode("utf-8"), prepare=False)
                    conn.execute(self._q["migration_done"], {"version": version})
            row = conn.execute(self._q["schema_version"]).fetchone()
            return int(row[0]) if row else 0

        return self._write(body)

    def schema_version(self) -> int:
        """The highest migration applied (0 on an empty database)."""

        def body(conn: Connection) -> int:
            exists = conn.execute(self._q["migrations_table_exists"]).fetchone()
            if not exists or not exists[0]:
                return 0
            row = conn.execute(self._q["schema_version"]).fetchone()
            return int(row[0]) if row else 0

        return self._run(body, write=False)

    def latest_migration(self) -> int:
        """The highest migration this code ships."""
        return max((version for version, _ in migrations()), default=0)

    def pending_migrations(self) -> list[int]:
        """The migrations this Wovyr knows that the database has not applied yet (by set, not
        by the highest applied: a migration numbered below one applied can still be pending)."""

        def body(conn: Connection) -> set[int]:
            exists = conn.execute(self._q["migrations_table_exists"]).fetchone()
            if not exists or not exists[0]:
                return set()
            return {int(row[0]) for row in conn.execute(self._q["migrations_applied"])}

        done = self._run(body, write=False)
        return [version for version, _ in migrations() if version not in done]

    def add_observer(self, observer: StoreObserver) -> None:
        self._observers.add(observer)

    def snapshot(self, dest: Path) -> SnapshotInfo:
        """`pg_dump -Fc` of this store's schema into the new file `dest`: one consistent
        snapshot that blocks no writer (`wovyr.store.postgres.snapshot`)."""
        schema = str(self._read("current_schema", {})[0][0])
        dump_schema(self.url, schema, Path(dest))
        return SnapshotInfo("postgres", schema)

    def close(self) -> None:
        """Close the pool and the listening connection (waits for a pending
        `wait_for_work` to time out)."""
        if self._closed:
            return
        self._closed = True
        self._pool.close()
        with self._listen_lock:
            if self._listener is not None:
                self._listener.close()
                self._listener = None

    def wait_for_work(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for a notification on `channel`; True when one came.

        Also True right after the listening connection was re-established (notifications
        sent while it was down are lost, so the caller should look for work).
        """
        with self._listen_lock:
            if self._closed:
                raise StoreError("the store is closed")
            try:
                if self._listener is None:
                    self._listener = psycopg.connect(
                        self.url,
                        autocommit=True,
                        connect_timeout=max(1, round(self._connect_timeout)),
                    )
                    listen = sql.SQL(self._q["listen"]).format(channel=sql.Identifier(self.channel))
                    self._listener.execute(listen)
                    if self._listener_lost:
                        self._listener_lost = False
                        return True
                arrived = bool(list(self._listener.notifies(timeout=timeout, stop_after=1)))
                if arrived:  # drain what else is queued: one wake-up covers them all
                    for _ in self._listener.notifies(timeout=0):
                        pass
                return arrived
            except psycopg.Error as exc:
                if self._listener is not None:
                    self._listener.close()
                    self._listener = None
                self._listener_lost = True
                raise support.translate(exc, write=False) from exc

    # --- executions ----------------------------------------------------------------------

    def create_execution(self, new: NewExecution) -> tuple[bool, ExecutionRecord]:
        # quotas and concurrency slots: a transaction, not a statement
        if (
            new.debits
            or new.max_running is not None
            or new.slot is not None
            or outbox_events(new.first_step, 0)  # its outbox rows go in its transaction
        ):
            rows = self._run(lambda conn: self._insert(conn, new), write=True, transaction=True)
        elif new.audit is not None:
            rows = self._run(lambda conn: self._insert_audited(conn, new), write=True)
        else:
            rows = self._run(lambda conn: self._insert(conn, new), write=True)
        if rows:
            self._observers.created(new)
            if new.slot is None:
                return True, execution_record(rows[0], POSTGRES, with_checkpoint=True)
            rows = self._read("load", {"id": new.id, "tenant": new.tenant}, named=True)
            return True, execution_record(rows[0], POSTGRES, with_checkpoint=True)
        record = self.load(new.id, new.tenant)  # the tenant has the id: return what is there
        if record is None:  # pragma: no cover - deleted between insert and load
            raise StoreError(f"execution {new.id} vanished right after it was created")
        return False, record

    def _insert_execution(self, conn: Connection, new: NewExecution) -> bool:
        """Insert `new` with its first step unless its tenant has its id; True when inserted."""
        return bool(self._insert(conn, new))

    def _insert(self, conn: Connection, new: NewExecution) -> list[Any]:
        """One statement: the execution, its first events and timers, the notification."""
        params = self._insert_params(new)
        slot = new.slot
        if slot is not None:  # in the caller's transaction
            conn.execute(self._q["slot_lock"], {"tenant": new.tenant, "key": slot.key})
        rows = support.rows(_cursor(conn, True).execute(self._q["create_execution"], params))
        if rows and (new.debits or new.max_running is not None):
            self._check_start(_Tx(conn, self), new)  # in the caller's transaction
        if rows and slot is not None:
            take = {"tenant": new.tenant, "key": slot.key, "id": new.id, "limit": slot.limit}
            conn.execute(self._q["take_slot"], take)
        if rows:
            append_audit_row(conn, new.audit)
            if outbox_events(new.first_step, 0):  # a run that ends in its first step
                write_outbox(_Tx(conn, self), POSTGRES, first_step_of(new), 0)
        return rows

    def _insert_params(self, new: NewExecution) -> dict[str, Any]:
        step = new.first_step
        lease_for = None
        if self.db_clock and new.lease_owner and new.lease_until is not None:
            lease_for = new.lease_until - new.created_at  # the same lease, on the DB's clock
        return {
            **support.step_params(step),
            "id": new.id,
            "tenant": new.tenant,
            "workflow": new.workflow,
            "version": new.version,
            "definition_hash": new.definition_hash,
            "created_at": new.created_at,
            "parent_id": new.parent_id,
            "rerun_of": new.rerun_of,
            "labels": dumps(dict(new.labels)) if new.labels else None,
            "lease_owner": new.lease_owner,
            "lease_until": new.lease_until if new.lease_owner else None,
            "lease_for": lease_for,
            "fence": 1 if new.lease_owner else 0,
            "shard": stable_shard(new.id),
            "input": dumps(new.input),
            "channel": self.channel,
            "priority": new.priority,
            "claim_rank": new.claim_rank,
        }

    def _insert_audited(self, conn: Connection, new: NewExecution) -> list[Any]:
        """`_insert` and its audit record in one transaction of two round trips: BEGIN, the
        insert and the chain head's lock go out together; the record (whose hash needs the
        head) and COMMIT go out together. The head stays locked for one round trip and the
        commit, which is what every audited write of every process waits for."""
        with conn.pipeline(), conn.transaction():
            cursor = _cursor(conn, True).execute(
                self._q["create_execution"], self._insert_params(new)
            )
            head = conn.execute(audit_head_lock_sql())
            top = head.fetchone()  # the first round trip
            rows = cursor.fetchall()
            if rows:
                assert top is not None  # the migration inserts the one head row
                append_audit_row(conn, new.audit, head=(int(top[0]), top[1]))
        return rows

    def commit(self, steps: Sequence[StepWrite], atomic: bool = False) -> list[CommitOutcome]:
        """Write a batch of steps in one transaction, each checked on its own; with `atomic`,
        nothing is written unless every step applies."""
        if not steps:
            return []
        outcomes = plain_outcomes(self._commit(steps, atomic))
        self._observers.committed(steps, outcomes)
        return outcomes

    def commit_gated(self, steps: Sequence[StepWrite]) -> list[GatedOutcome]:
        if not steps:
            return []
        results = list(self._commit(steps, False))
        self._observers.committed(steps, plain_outcomes(results))
        return results

    def _commit(self, steps: Sequence[StepWrite], atomic: bool) -> Sequence[GatedOutcome]:
        """The steps written, each checkpoint whole or as a delta (`wovyr.store.checkpoints`:
        the plans are made before and remembered after)."""
        plans = {id(step): self._ledger.plan(step) for step in steps}
        results = self._commit_planned(steps, atomic, plans)
        self._settle(steps, plans, results)
        return results

    def _settle(
        self,
        steps: Sequence[StepWrite],
        plans: Mapping[int, Plan],
        results: Sequence[GatedOutcome],
    ) -> None:
        for step, result in zip(steps, results, strict=True):
            if result is CommitOutcome.OK:
                self._ledger.wrote(step, plans[id(step)])
            else:
                self._ledger.forget(step.key)

    def _commit_planned(
        self, steps: Sequence[StepWrite], atomic: bool, plans: Mapping[int, Plan]
    ) -> Sequence[GatedOutcome]:
        distinct = len({step.key for step in steps}) == len(steps)
        gated = any(step.gate is not None for step in steps)
        released = any(step.flow_released for step in steps)
        ended = any(step.slot_released for step in steps)
        if any(
            step.debits or step.audit is not None or step.continued_as or outbox_events(step, 0)
            for step in steps
        ) or ((gated or released or ended) and (atomic or not distinct)):
            return self._commit_with_debits(steps, atomic, plans)
        if gated or ended:
            return self._commit_batched(steps, plans)
        if distinct and not atomic and (len(steps) > 1 or released):
            # One set-based statement for the batch: its own transaction, one fsync, one
            # round trip, and a fraction of the per-statement cost on both sides (the
            # activity slots the steps release included).
            batch = support.batch_params(steps, self.channel, [plans[id(s)] for s in steps])
            rows = self._write_one("apply_steps", batch)
            return [self._outcome(step, row) for step, row in zip(steps, rows, strict=True)]
        params = self._params(steps, plans)
        if atomic:
            return self._commit_atomic(steps, params)

        def body(conn: Connection) -> list[Any]:
            # Steps of one execution must see each other: one statement each, in order;
            # BEGIN, every step and COMMIT go out together: one round trip for the batch.
            with conn.pipeline(), conn.transaction():
                cursors = [conn.execute(self._q["apply_step"], p) for p in params]
            return [cursor.fetchone() for cursor in cursors]

        if len(params) == 1:  # one statement is its own transaction: no BEGIN, no COMMIT
            rows = self._write_one("apply_step", params[0])
        else:
            rows = self._run(body, write=True)
        return [self._outcome(step, row) for step, row in zip(steps, rows, strict=True)]

    def _commit_atomic(
        self, steps: Sequence[StepWrite], params: list[dict[str, Any]]
    ) -> list[CommitOutcome]:
        def body(conn: Connection) -> list[Any]:
            rows: list[Any] = []
            with conn.transaction():
                for p in params:
                    rows.append(conn.execute(self._q["apply_step"], p).fetchone())
                    if not rows[-1][0]:
                        raise psycopg.Rollback()  # leaves the block, rolled back, no error
            return rows

        rows = self._run(body, write=True)
        outcomes = [self._outcome(step, row) for step, row in zip(steps, rows, strict=False)]
        return outcomes + [CommitOutcome.CONFLICT] * (len(steps) - len(outcomes))

    def _commit_batched(
        self, steps: Sequence[StepWrite], plans: Mapping[int, Plan]
    ) -> list[GatedOutcome]:
        """Steps of distinct executions, some carrying flow gates or ending holders of
        concurrency slots, in one pipelined transaction of three round trips whatever their
        number: BEGIN, the slot keys' locks and the gates' rows locked and read; the steps
        whose gates are granted in one set-based statement (which releases their activity
        slots) together with the gates' writes; the slots the steps end handed on, with
        COMMIT. A granted step that did not apply (rare) has its gate given back before."""
        asks = [step.gate for step in steps if step.gate is not None]
        # The concurrency keys these steps hand slots of, locked first and in one order (a
        # start locks its key before it writes a row): no two writers wait on each other.
        keys = sorted({(s.tenant, s.slot_released.key) for s in steps if s.slot_released})

        def body(conn: Connection) -> list[Any]:
            with conn.pipeline(), conn.transaction():
                for tenant, key in keys:
                    conn.execute(self._q["slot_lock"], {"tenant": tenant, "key": key})
                gates = FlowGates(asks, self._now(asks[0].now)).lock(conn) if asks else None
                results: list[Any] = [None] * len(steps)
                go: list[int] = []
                for i, step in enumerate(steps):
                    if gates is not None and step.gate is not None:
                        answer = gates.decide(step.gate)
                        if not answer.granted:
                            results[i] = answer
                            continue
                    go.append(i)
                applied = None
                if go:
                    chosen = [steps[i] for i in go]
                    params = support.batch_params(
                        chosen, self.channel, [plans[id(s)] for s in chosen]
                    )
                    applied = _cursor(conn, False).execute(self._q["apply_steps"], params)
                if gates is not None:  # as if every granted step applies (sent with them)
                    FlowGates.write(conn, gates)
                undone = []
                for i, row in zip(go, applied.fetchall() if applied else [], strict=True):
                    results[i] = row
                    gate = steps[i].gate
                    if not row[0] and gate is not None and gates is not None:
                        gates.undo(gate)
                        undone.append(gate)
                if undone and gates is not None:
                    FlowGates.give_back(conn, gates, undone)
                for step, result in zip(steps, results, strict=True):
                    ended = step.slot_released
                    if ended is not None and not isinstance(result, FlowAnswer) and result[0]:
                        conn.execute(
                            self._q["release_slot"],
                            {"tenant": step.tenant, "key": ended.key, "id": step.execution_id,
                             "limit": ended.limit, "channel": self.channel},
                        )  # fmt: skip
            return results

        results = self._run(body, write=True)
        return [
            r if isinstance(r, FlowAnswer) else self._outcome(step, r)
            for step, r in zip(steps, results, strict=True)
        ]

    def _commit_with_debits(
        self, steps: Sequence[StepWrite], atomic: bool, plans: Mapping[int, Plan]
    ) -> list[GatedOutcome]:
        """The steps one statement each, and the debits and audit records of those that
        apply, in one transaction (only steps that use a budget with a limit carry debits;
        only steps of the facade's external changes carry an audit record), with the chain's
        next run of a step that continues as new (a taken id refuses it all)."""
        params = self._params(steps, plans)

        # The concurrency keys these steps hand slots of, locked first and in one order (a
        # start locks its key before it writes a row): no two writers wait on each other.
        keys = sorted({(s.tenant, s.slot_released.key) for s in steps if s.slot_released})

        asks = [step.gate for step in steps if step.gate is not None]

        def body(conn: Connection) -> list[Any]:
            rows: list[Any] = []
            with conn.transaction():
                for tenant, key in keys:
                    conn.execute(self._q["slot_lock"], {"tenant": tenant, "key": key})
                gates = None
                if asks:  # after the concurrency keys, as everywhere
                    gates = FlowGates(asks, self._now(asks[0].now)).lock(conn)
                for step, p in zip(steps, params, strict=True):
                    if gates is not None and step.gate is not None:
                        answer = gates.decide(step.gate)
                        if not answer.granted:
                            if atomic:
                                raise psycopg.Rollback()
                            rows.append(answer)
                            continue
                    rows.append(conn.execute(self._q["apply_step"], p).fetchone())
                    if not rows[-1][0] and gates is not None and step.gate is not None:
                        gates.undo(step.gate)
                    if rows[-1][0]:
                        released = step.slot_released
                        if released is not None:
                            conn.execute(
                                self._q["release_slot"],
                                {
                                    "tenant": step.tenant,
                                    "key": released.key,
                                    "id": step.execution_id,
                                    "limit": released.limit,
                                    "channel": self.channel,
                                },
                            )
                        for key, holder in step.flow_released:
                            conn.execute(
                                flow_queries()["activity_slots_release"],
                                {
                                    "tenant": step.tenant,
                                    "key": key,
                                    "holder": holder,
                                    "at": step.updated_at,
                                    "channel": self.channel,
                                },
                            )
                        self._debit(_Tx(conn, self), step.tenant, step.debits, checked=False)
                        new = step.continued_as
                        if new is not None and not self._insert(conn, new):
                            raise StoreError(f"the continued run's id {new.id} is taken")
                        append_audit_row(conn, step.audit)
                        write_outbox(_Tx(conn, self), POSTGRES, step, step.expected_seq)
                    elif atomic:
                        raise psycopg.Rollback()
                if gates is not None:
                    FlowGates.write(conn, gates)
            return rows

        rows = self._run(body, write=True)
        outcomes: list[GatedOutcome] = [
            row if isinstance(row, FlowAnswer) else self._outcome(step, row)
            for step, row in zip(steps, rows, strict=False)
        ]
        return outcomes + [CommitOutcome.CONFLICT] * (len(steps) - len(outcomes))

    def _params(
        self, steps: Sequence[StepWrite], plans: Mapping[int, Plan]
    ) -> list[dict[str, Any]]:
        """`apply_step`'s parameters for each step."""
        return [
            {**support.step_params(step, plans[id(step)]), "channel": self.channel}
            for step in steps
        ]

    def _outcome(self, step: StepWrite, row: Any) -> CommitOutcome:
        changed, seq, fence = row[0], row[1], row[2]
        if changed:
            return CommitOutcome.OK
        if seq is None:
            return CommitOutcome.NOT_FOUND
        if step.fence is not None and fence == step.fence and seq == step.expected_seq:
            # The row matched the statement's snapshot, but the UPDATE met a newer version
            # (a concurrent claim or commit held the row lock): look again to tell which.
            fresh = self._read("seq_and_fence", {"tenant": step.tenant, "id": step.execution_id})
            fence = fresh[0][1] if fresh else fence
        if step.fence is not None and fence != step.fence:
            return CommitOutcome.LEASE_LOST
        return CommitOutcome.CONFLICT

    def load(self, execution_id: str, tenant: str) -> ExecutionRecord | None:
        rows = self._read("load", {"id": execution_id, "tenant": tenant}, named=True)
        return execution_record(rows[0], POSTGRES, with_checkpoint=True) if rows else None

    def list_executions(self, query: ExecutionFilter) -> Page:
        params = {
            "tenant": query.tenant,
            "workflow": query.workflow,
            "status": query.status,
            "waiting": query.waiting,
            "parent_id": query.parent_id,
            "rerun_of": query.rerun_of,
            "id_prefix": query.id_prefix or None,
            "id_upto": (query.id_prefix + "\U0010ffff") if query.id_prefix else None,
            "workflows": list(query.workflows) if query.workflows is not None else None,
            "created_after": query.created_after,
            "created_before": query.created_before,
            "cursor_at": query.cursor[0] if query.cursor else None,
            "cursor_id": query.cursor[1] if query.cursor else None,
            "limit": query.limit + 1,
        }
        name = "list_executions"
        if query.labels:  # walk the first label's index rows; check the others per row
            (key, value), *others = query.labels
            params.update(
                label_key=key,
                label_value=value,
                more_labels=dumps(dict(others)) if others else None,
            )
            name = "list_by_label"
        elif query.workflows is not None:
            name = "list_by_workflows"
        # Unprepared: planned with the values given, so the NULL filters fold away and the
        # index matching the filters actually used serves the page.
        rows = self._read(name, params, prepare=False, named=True)
        records = [execution_record(r, POSTGRES, with_checkpoint=False) for r in rows]
        items = records[: query.limit]
        more = len(records) > query.limit
        return Page(items, (items[-1].created_at, items[-1].id) if more and items else None)

    # --- work queue ----------------------------------------------------------------------

    def _claim(self, ask: ClaimPlan) -> list[Claim]:
        """The claim of `ask` (`SQLQueue.claim`): plain, fair, or by turns."""
        fair, limit = ask.fair, ask.limit
        params: dict[str, Any] = {
            "owner": ask.owner,
            "now": self._now(ask.now),
            "lease": ask.lease,
            "only": list(ask.only) if ask.only is not None else None,
            "tenant": ask.tenant,
            "shards": sorted(ask.shards) if ask.shards is not None else None,
            "limit": limit,
        }
        query = "claim"
        if fair is not None and fair.turns is not None:
            query = "claim_turns"
            wanted = [(t, n) for t, n in fair.turns.items() if n > 0]
            if not wanted or limit <= 0:
                return []
            params["tenants"] = [t for t, _ in wanted]
            params["rooms"] = [min(n, limit) for _, n in wanted]
            capped = sorted(t for t, _ in wanted if t in fair.max_running)
            if capped:
                params["caps"] = [fair.max_running.get(t) for t, _ in wanted]
                return self._claim_capped(params, capped)
        elif fair is not None:
            query = "claim_fair"
            named = sorted({*fair.held, *fair.weights})
            params["tenants"] = named
            params["held"] = [fair.held.get(t, 0) for t in named]
            params["weights"] = [float(fair.weights.get(t, 1.0)) for t in named]
            params["cap"] = fair.cap
        rows = self._write_one(query, params, named=True)
        return [claim_record(r, POSTGRES) for r in rows]

    def _claim_capped(self, params: dict[str, Any], capped: list[str]) -> list[Claim]:
        """The claim by turns with tenants capped by `max_running`: one transaction that
        locks each of them (in name order, so two claims never wait on each other in a
        circle), then claims, counting their live leases."""
        lock, claim = self._q["leased_lock"], self._q["claim_turns_capped"]

        def body(conn: Connection) -> list[Any]:
            for tenant in capped:
                conn.execute(lock, {"tenant": tenant})
            return support.rows(_cursor(conn, True).execute(claim, params))

        rows = self._write(body)
        return [claim_record(r, POSTGRES) for r in rows]

    def claimable_tenants(
        self, now: datetime, *, partitions: Sequence[int] | None = None, of: int | None = None
    ) -> list[str]:
        shards = shards_for(partitions, of)
        params = {"now": self._now(now), "shards": sorted(shards) if shards is not None else None}
        return sorted(r[0] for r in self._read("claimable_tenants", params))

    def release_owner(self, owner: str) -> int:
        rows = self._write_one("release_owner", {"owner": owner, "channel": self.channel})
        return int(rows[0][0]) if rows else 0

    def ready_count(self, now: datetime) -> int:
        rows = self._read("ready_count", {"now": self._now(now)})
        return int(rows[0][0])

    # --- flow control --------------------------------------------------------------------

    def slot_state(self, tenant: str, key: str) -> SlotState:
        rows = self._read("slot_state", {"tenant": tenant, "key": key})
        return SlotState(
            key=key,
            holders=[r[0] for r in rows if r[1]],
            waiting=[r[0] for r in rows if not r[1]],
        )


def _cursor(conn: Connection, named: bool) -> psycopg.Cursor[Any]:
    """A cursor whose rows are dicts by column name (`named`: records) or plain tuples."""
    return conn.cursor(row_factory=dict_row) if named else conn.cursor()


class _Tx:
    """A write transaction's connection, for the shared roles (`wovyr.store.sql.Tx`)."""

    __slots__ = ("conn", "store")

    def __init__(self, conn: Connection, store: PostgresStore) -> None:
        self.conn = conn
        self.store = store

    def rows(self, sql: str, params: Mapping[str, Any]) -> list[Any]:
        return self.conn.cursor(row_factory=dict_row).execute(sql, params).fetchall()

    def run(self, sql: str, params: Mapping[str, Any]) -> int:
        return self.conn.execute(sql, params).rowcount

    def run_many(self, sql: str, params: Iterable[Mapping[str, Any]]) -> None:
        with self.conn.cursor() as cur:
            cur.executemany(sql, params)

    def append_audit(self, entry: AuditEntry | None) -> AuditRecord | None:
        return append_audit_row(self.conn, entry)

    def insert_execution(self, new: NewExecution) -> bool:
        return self.store._insert_execution(self.conn, new)
