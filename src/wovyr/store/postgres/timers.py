"""The TimerStore half of the PostgreSQL store (mixed into PostgresStore), with
`TimerLocking`: dispatchers split the due timers with `FOR UPDATE SKIP LOCKED`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from psycopg.rows import dict_row

from wovyr.store.base import CommitOutcome, StepWrite, TimerRecord
from wovyr.store.capabilities import TimerSteps
from wovyr.store.checkpoints import Ledger, Plan
from wovyr.store.hooks import Observers
from wovyr.store.postgres import support
from wovyr.store.postgres.support import Connection
from wovyr.store.rows import POSTGRES, execution_record, from_row

__all__ = ["PostgresTimers"]


class PostgresTimers:
    """Needs `_q`, `_read()`, `_run()`, `_outcome()`, `_ledger`, `_settle()` and `channel`
    from PostgresStore."""

    _q: Mapping[str, str]
    _read: Callable[..., list[Any]]
    _run: Callable[..., Any]
    _outcome: Callable[[StepWrite, Any], CommitOutcome]
    _ledger: Ledger
    _settle: Callable[..., None]
    _observers: Observers
    channel: str

    def due_timers(self, now: datetime, limit: int) -> list[TimerRecord]:
        rows = self._read("due_timers", {"now": now, "limit": limit}, named=True)
        return [from_row(TimerRecord, r, POSTGRES) for r in rows]

    def fire_timers(
        self, now: datetime, limit: int, build: TimerSteps
    ) -> list[tuple[StepWrite, CommitOutcome]]:
        """`TimerLocking`: lock due timers (SKIP LOCKED), build their steps and apply them,
        in one transaction. Nothing due (the usual case of a dispatcher's tick) costs one
        plain read, no transaction."""
        if not self._read("any_due_timer", {"now": now}):
            return []

        def body(conn: Connection) -> tuple[list[StepWrite], list[Any]]:
            named = conn.cursor(row_factory=dict_row)
            rows = named.execute(self._q["lock_due_timers"], {"now": now, "limit": limit})
            timers = [from_row(TimerRecord, r, POSTGRES) for r in rows.fetchall()]
            if not timers:
                return [], []
            keys = sorted({(t.tenant, t.execution_id) for t in timers})
            found = named.execute(
                self._q["load_many"],
                {"tenants": [k[0] for k in keys], "ids": [k[1] for k in keys]},
            ).fetchall()
            records = {
                r.key: r
                for r in (execution_record(f, POSTGRES, with_checkpoint=True) for f in found)
            }
            steps = build(timers, records)
            if not steps:
                return [], []
            plans.update((id(step), self._ledger.plan(step)) for step in steps)
            params = support.batch_params(steps, self.channel, [plans[id(s)] for s in steps])
            return steps, conn.execute(self._q["apply_steps"], params).fetchall()

        plans: dict[int, Plan] = {}
        done: tuple[list[StepWrite], list[Any]] = self._run(
            body, write=True, transaction=True, wrote=lambda r: bool(r[0])
        )
        steps, rows = done
        outcomes = [self._outcome(step, row) for step, row in zip(steps, rows, strict=True)]
        self._settle(steps, plans, outcomes)
        self._observers.committed(steps, outcomes)
        return list(zip(steps, outcomes, strict=True))

    def next_timer_at(self) -> datetime | None:
        rows = self._read("next_timer_at", {})
        return POSTGRES.time_or_none(rows[0][0]) if rows else None
