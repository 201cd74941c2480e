"""Timer and schedule dispatch at scale on the embedded SQLite store.

B6  100,000 pending timers, 1,000 due: due-scan time, fires/s, and the query plan.
B7  one dispatcher tick over 10,000 schedules: none due (writes counted: must be zero),
    and 1% due.

Usage: python bench/bench_schedules.py [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.scheduling.schedules import Schedules
from wovyr.store.codec import to_micros
from wovyr.store.sqlite import SQLiteStore
from wovyr.worker import Worker

TIMER = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: sleeper}
activities:
  - {id: t, wait: {timer: {after: 1h}}}
"""
QUICK = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: quick}
activities:
  - {id: x, set: {ok: true}}
"""
T0 = datetime(2030, 1, 1, tzinfo=UTC)


def b6(folder: Path, due: int = 1000, pending: int = 100_000) -> dict[str, Any]:
    clock = ManualClock(T0)
    engine = Engine(SQLiteStore(folder / "b6.db"), clock=clock)

    async def arm() -> None:
        worker = Worker(engine, concurrency=256, reserved_slots=0)
        try:
            for _ in range(due):
                await worker.start(TIMER)
            await worker.run_until_idle()
        finally:
            await worker.close()

    asyncio.run(arm())
    conn = sqlite3.connect(folder / "b6.db")
    far = to_micros(T0 + timedelta(days=365))
    conn.executemany(
        "INSERT INTO timers (execution_id, timer_id, fire_at) VALUES (?, ?, ?)",
        ((f"ghost-{i}", "t", far + i) for i in range(pending - due)),
    )
    conn.commit()
    plan = conn.execute(
        "EXPLAIN QUERY PLAN SELECT execution_id, timer_id, fire_at FROM timers"
        " WHERE fire_at <= ? ORDER BY fire_at LIMIT ?",
        (0, 1000),
    ).fetchall()
    conn.close()
    clock.advance(hours=1)
    start = time.perf_counter()
    found = engine.store.due_timers(clock.now(), 1000)
    scan = time.perf_counter() - start
    start = time.perf_counter()
    fired = engine.fire_due_timers(limit=1000)
    fire = time.perf_counter() - start
    engine.close()
    assert len(found) == due and fired == due
    return {
        "timers": pending,
        "due": due,
        "due_scan_ms": scan * 1000,
        "fires_per_s": fired / fire,
        "plan": " | ".join(str(r[-1]) for r in plan),
    }


def b7(folder: Path, count: int = 10_000) -> dict[str, Any]:
    clock = ManualClock(T0)
    store = SQLiteStore(folder / "b7.db")
    engine = Engine(store, clock=clock)
    engine.apply(QUICK)
    service = Schedules(engine)
    first = service.create("s-0", workflow="quick", cron="0 * * * *")
    conn = sqlite3.connect(folder / "b7.db")  # clone the row: 10,000 creates would dominate
    rows = conn.execute("SELECT * FROM schedules").fetchall()[0]
    conn.executemany(
        f"INSERT INTO schedules VALUES ({','.join('?' * len(rows))})",
        ([rows[0], f"s-{i}", *rows[2:]] for i in range(1, count)),
    )
    conn.commit()
    conn.close()
    commits = store.commits
    start = time.perf_counter()
    started = service.dispatch_due(limit=1000)
    idle = time.perf_counter() - start
    idle_writes = store.commits - commits
    assert started == 0
    due_count = count // 100
    conn = sqlite3.connect(folder / "b7.db")
    conn.execute(
        "UPDATE schedules SET next_fire_at = ? WHERE rowid > ?",
        (to_micros(T0 + timedelta(hours=2)), due_count),
    )
    conn.commit()
    conn.close()
    clock.set(T0 + timedelta(hours=1))
    start = time.perf_counter()
    started = service.dispatch_due(limit=1000)
    busy = time.perf_counter() - start
    engine.close()
    assert started == due_count, started
    assert first.next_fire_at == T0 + timedelta(hours=1)
    return {
        "schedules": count,
        "idle_tick_ms": idle * 1000,
        "idle_tick_writes": idle_writes,
        "due": due_count,
        "busy_tick_ms": busy * 1000,
        "fires_per_s": due_count / busy,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = {"b6": b6(Path(tmp)), "b7": b7(Path(tmp))}
    if args.json:
        print(json.dumps(results, indent=2))
        return
    r6, r7 = results["b6"], results["b7"]
    print(
        f"B6  {r6['timers']:,} timers, {r6['due']:,} due: scan {r6['due_scan_ms']:.2f} ms, "
        f"{r6['fires_per_s']:,.0f} fires/s; plan: {r6['plan']}"
    )
    print(
        f"B7  {r7['schedules']:,} schedules: idle tick {r7['idle_tick_ms']:.2f} ms with "
        f"{r7['idle_tick_writes']} writes; 1% due: {r7['busy_tick_ms']:.0f} ms "
        f"({r7['fires_per_s']:,.0f} fires/s)"
    )
    print(json.dumps(results))


if __name__ == "__main__":
    main()
