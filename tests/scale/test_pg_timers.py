"""Durable timers on PostgreSQL with many dispatchers: due rows are locked with SKIP LOCKED,
so dispatchers split them (a row one holds is skipped by the others, never waited on) and
every timer fires exactly once."""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest

from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.store.postgres import PostgresStore
from wovyr.testing import drain

pytestmark = pytest.mark.postgres

TIMER = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: later}
activities:
  - id: t
    wait: {timer: {after: 1h}}
"""


def waiting(engine: Engine, count: int, prefix: str) -> list[str]:
    ids = [engine.start(TIMER, execution_id=f"{prefix}{i:03}").id for i in range(count)]
    drain(engine)
    assert {engine.query(i).status for i in ids} == {"waiting"}
    return ids


def test_a_timer_another_dispatcher_holds_is_skipped_not_waited_on(
    migrated_postgres_url: str, clock: ManualClock
) -> None:
    store = PostgresStore(migrated_postgres_url, max_size=4)
    engine = Engine(store, clock=clock)
    try:
        ids = waiting(engine, 5, "held")
        clock.advance(hours=1)
        with psycopg.connect(
            migrated_postgres_url
        ) as other:  # a dispatcher in the middle of a fire
            other.execute("SELECT 1 FROM timers WHERE execution_id = %s FOR UPDATE", (ids[0],))
            # the other four, at once: a wait for the lock would never end (the rollback
            # below runs on this thread), and the test's timeout would fail it
            assert engine.fire_due_timers() == 4
            other.rollback()  # that dispatcher failed: its rows are due again
        assert engine.fire_due_timers() == 1
        assert engine.fire_due_timers() == 0
        fired = Counter(e.type for i in ids for e in engine.history(i))
        assert fired["TimerFired"] == 5
    finally:
        store.close()


def test_many_dispatchers_fire_every_timer_once(
    migrated_postgres_url: str, clock: ManualClock
) -> None:
    store = PostgresStore(migrated_postgres_url, max_size=12)
    engines = [Engine(store, clock=clock) for _ in range(6)]
    try:
        ids = waiting(engines[0], 120, "many")
        clock.advance(hours=1)
        with ThreadPoolExecutor(len(engines)) as pool:
            # Small batches, so the dispatchers overlap on the due rows many times over.
            rounds = [pool.submit(lambda e=e: [e.fire_due_timers(limit=7) for _ in range(8)])
                      for e in engines]  # fmt: skip
            counts = [sum(r.result()) for r in rounds]
        assert sum(counts) == len(ids)  # each fired by exactly one dispatcher
        assert sum(1 for c in counts if c) > 1  # and the work was shared
        for execution_id in ids:
            fired = [e for e in engines[0].history(execution_id) if e.type == "TimerFired"]
            assert len(fired) == 1, execution_id
        drain(engines[0])
        assert {engines[0].query(i).status for i in ids} == {"completed"}
    finally:
        store.close()
