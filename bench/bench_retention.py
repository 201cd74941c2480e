"""Retention: how fast a pass purges finished executions (SQLite; PostgreSQL with --pg).

The store is filled through its own API with two tenants alike: `--executions` finished
executions each (`--events` events, two labels, a stream chunk and a timer each), plus as
many running ones that must stay. Then, in the same run, on the same database:

R   `purge_expired` for tenant `a` (find_expired + purge_executions + the audit record,
    batches of `--batch`): the retention pass
Y   the yardstick, for tenant `b`: a minimal Python loop over the driver that deletes the
    same executions' events and rows by primary key, one transaction per batch of the same
    size (it knows the ids beforehand and skips labels, timers, chunks and the audit)
B0  the machine's ceiling: fsync'd single-row commits per second

Reported: executions purged per second for R and Y, the ratio R/Y, and R's batches per
second as a share of B0 (each batch is one durable commit). JSON with --json.

Usage: python bench/bench_retention.py [--executions 2000] [--events 20] [--batch 500]
       [--pg] [--url URL] [--json]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.engine.retention import Retention, purge_expired
from wovyr.events import Event
from wovyr.store.base import NewExecution, StepWrite, Store
from wovyr.store.postgres import PostgresStore
from wovyr.store.retention import ExpiredFilter
from wovyr.store.sqlite import SQLiteStore
from wovyr.store.streams import NewChunk, StreamAppend

T0 = datetime(2030, 1, 1, tzinfo=UTC)
PG_URL = "postgresql://postgres@127.0.0.1:5432/test"


def _step(ident: str, tenant: str, seq: int, n: int, status: str, at: datetime) -> StepWrite:
    return StepWrite(
        execution_id=ident,
        expected_seq=seq,
        events=[Event("Thing", at, {"i": seq + i, "pad": "x" * 200}) for i in range(n)],
        checkpoint={"seq": seq + n, "pad": "y" * 500},
        status=status,
        updated_at=at,
        ready=False,
        timers_armed=(("t", at + timedelta(days=999)),) if status == "running" else (),
        tenant=tenant,
    )


def fill(store: Store, tenant: str, count: int, events: int) -> list[str]:
    """`count` finished and `count` running executions of `tenant`; the finished ids."""
    finished = []
    for i in range(count * 2):
        ident = f"{tenant}-{i:06d}"
        first = _step(ident, tenant, 0, events // 2, "running", T0)
        new = NewExecution(
            id=ident,
            tenant=tenant,
            workflow=f"wf{i % 10}",
            version="1",
            definition_hash="h",
            created_at=T0,
            input={"n": i},
            first_step=first,
            labels={"customer": f"c{i % 50}", "region": f"r{i % 5}"},
            lease_owner="bench",
            lease_until=T0 + timedelta(minutes=1),
        )
        _, record = store.create_execution(new)
        store.append_stream(
            StreamAppend(tenant, ident, record.fence, [NewChunk("a", 1, 1, "text", "hi")], T0)
        )
        if i % 2 == 0:
            at = T0 + timedelta(seconds=i)
            store.commit([_step(ident, tenant, events // 2, events - events // 2, "completed", at)])
            finished.append(ident)
    return finished


def yardstick_sqlite(path: Path, tenant: str, ids: list[str], batch: int) -> float:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous = FULL")
    began = time.perf_counter()
    for start in range(0, len(ids), batch):
        keys = [(tenant, i) for i in ids[start : start + batch]]
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany("DELETE FROM events WHERE tenant = ? AND execution_id = ?", keys)
        conn.executemany("DELETE FROM executions WHERE tenant = ? AND id = ?", keys)
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - began
    conn.close()
    return len(ids) / elapsed


def yardstick_pg(url: str, tenant: str, ids: list[str], batch: int) -> float:
    with psycopg.connect(url) as conn:
        began = time.perf_counter()
        for start in range(0, len(ids), batch):
            part = ids[start : start + batch]
            with conn.transaction():
                conn.execute(
                    "DELETE FROM events WHERE tenant = %s AND execution_id = ANY(%s)",
                    (tenant, part),
                )
                conn.execute(
                    "DELETE FROM executions WHERE tenant = %s AND id = ANY(%s)", (tenant, part)
                )
        return len(ids) / (time.perf_counter() - began)


def sqlite_b0(folder: Path, n: int = 500) -> float:
    conn = sqlite3.connect(folder / "b0.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    began = time.perf_counter()
    for i in range(n):
        conn.execute("INSERT INTO t (v) VALUES (?)", (str(i),))
    elapsed = time.perf_counter() - began
    conn.close()
    return n / elapsed


@contextmanager
def fresh_schema(url: str) -> Iterator[str]:
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    try:
        yield f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA {schema} CASCADE")


def pg_b0(url: str, n: int = 500) -> float:
    with fresh_schema(url) as schema_url, psycopg.connect(schema_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (id bigserial PRIMARY KEY, v text)")
        began = time.perf_counter()
        for i in range(n):
            conn.execute("INSERT INTO t (v) VALUES (%s)", (str(i),))
        return n / (time.perf_counter() - began)


def measure(store: Store, args: argparse.Namespace, yardstick: Any) -> dict[str, Any]:
    fill(store, "a", args.executions, args.events)
    b_ids = fill(store, "b", args.executions, args.events)
    clock = ManualClock(T0 + timedelta(days=30))
    engine = Engine(store, clock=clock).for_tenant("a")
    settings = Retention(days=1)
    began = time.perf_counter()
    report = purge_expired(engine, settings, batch=args.batch, max_batches=10**6)
    elapsed = time.perf_counter() - began
    assert report.purged == args.executions, report
    assert len(store.find_expired(ExpiredFilter("a", None, T0 + timedelta(days=60), 10))) == 0
    r_rate = report.purged / elapsed
    y_rate = yardstick(b_ids)
    batches = -(-args.executions // args.batch)
    return {
        "executions": args.executions,
        "events_each": args.events,
        "batch": args.batch,
        "retention_per_s": round(r_rate, 1),
        "yardstick_per_s": round(y_rate, 1),
        "retention_over_yardstick": round(r_rate / y_rate, 3),
        "retention_batches_per_s": round(batches / elapsed, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--executions", type=int, default=2000)
    parser.add_argument("--events", type=int, default=20)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--pg", action="store_true")
    parser.add_argument("--url", default=PG_URL)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        b0 = sqlite_b0(folder)
        sqlite_store = SQLiteStore(folder / "wovyr.db")
        try:
            row = measure(
                sqlite_store,
                args,
                lambda ids: yardstick_sqlite(sqlite_store.path, "b", ids, args.batch),
            )
        finally:
            sqlite_store.close()
        row["b0_commits_per_s"] = round(b0, 1)
        row["batches_share_of_b0"] = round(row["retention_batches_per_s"] / b0, 4)
        out["sqlite"] = row
    if args.pg:
        b0 = pg_b0(args.url)
        with fresh_schema(args.url) as url:
            pg_store = PostgresStore(url, max_size=2)
            try:
                row = measure(pg_store, args, lambda ids: yardstick_pg(url, "b", ids, args.batch))
            finally:
                pg_store.close()
        row["b0_commits_per_s"] = round(b0, 1)
        row["batches_share_of_b0"] = round(row["retention_batches_per_s"] / b0, 4)
        out["postgres"] = row
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(json.dumps(out))
    print(f"{'store':<10}{'R exec/s':>12}{'Y exec/s':>12}{'R/Y':>8}{'R batch/s':>12}{'B0':>10}")
    for name, row in out.items():
        print(
            f"{name:<10}{row['retention_per_s']:>12}{row['yardstick_per_s']:>12}"
            f"{row['retention_over_yardstick']:>8}{row['retention_batches_per_s']:>12}"
            f"{row['b0_commits_per_s']:>10}"
        )


if __name__ == "__main__":
    main()
