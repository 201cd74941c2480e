"""Search latency over 100,000 executions (SQLite; PostgreSQL with --pg).

The store is filled with `--executions` executions of 50 workflows (names like
`Order-Fulfilment-17`), one a second, each with two labels (`customer`: one of 500,
`region`: one of 5) and a UUIDv7 id, written through the store's own insert in large
transactions (the start path's cost is not what this measures). Then each query kind runs
`--queries` times with varied arguments through `Engine.list` (a page of 50, as the API
and UI ask), timed one by one:

- `recent`: the newest page (no filter: the baseline);
- `label`: `customer=cN` (about 200 matches: a page, then more);
- `labels2`: `customer=cN` and `region=rM` (the second label checked per row);
- `id_prefix`: the first 13 characters of an existing id (a few matches);
- `name`: a partial, other-case workflow name matching 11 of the 50 names (pages merged);

reported as p50 and p99 in milliseconds, JSON with --json. The issue's bar: p99 < 10 ms.

Usage: python bench/bench_search.py [--executions 100000] [--queries 300] [--pg] [--json]
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from wovyr.engine.engine import Engine
from wovyr.events import Event
from wovyr.ids import new_id
from wovyr.store.base import NewExecution, StepWrite, Store
from wovyr.store.postgres import PostgresStore
from wovyr.store.sqlite import SQLiteStore

PG_URL = "postgresql://postgres@127.0.0.1:5432/test"
T0 = datetime(2030, 1, 1, tzinfo=UTC)
WORKFLOWS = [f"Order-Fulfilment-{i}" for i in range(50)]
BATCH = 5_000


def executions(count: int) -> Iterator[NewExecution]:
    rng = random.Random(7)
    for i in range(count):
        at = T0 + timedelta(seconds=i)
        ident = new_id(at)
        first = StepWrite(
            execution_id=ident,
            expected_seq=0,
            events=[Event("ExecutionStarted", at, {"n": i})],
            checkpoint={"id": ident},
            status=rng.choice(("completed", "completed", "failed", "running")),
            updated_at=at,
            tenant="bench",
        )
        yield NewExecution(
            id=ident,
            tenant="bench",
            workflow=WORKFLOWS[i % len(WORKFLOWS)],
            version="1",
            definition_hash=f"h{i % len(WORKFLOWS)}",
            created_at=at,
            input={"n": i},
            first_step=first,
            labels={"customer": f"c{rng.randrange(500)}", "region": f"r{rng.randrange(5)}"},
        )


def fill(store: Store, count: int) -> list[str]:
    """Write `count` executions in transactions of BATCH; return their ids."""
    from wovyr.store.base import DefinitionRecord

    for n, name in enumerate(WORKFLOWS):
        store.put_definition(DefinitionRecord(f"h{n}", name, "1", "{}", T0, "bench"))
    ids: list[str] = []
    batch: list[NewExecution] = []
    for new in executions(count):
        batch.append(new)
        ids.append(new.id)
        if len(batch) == BATCH:
            _write(store, batch)
            batch = []
    if batch:
        _write(store, batch)
    return ids


def _write(store: Store, batch: list[NewExecution]) -> None:
    if isinstance(store, SQLiteStore):
        with store._write() as conn:
            for new in batch:
                store._insert_execution(conn, new)
    else:
        assert isinstance(store, PostgresStore)

        def body(conn: Any) -> None:
            for new in batch:
                store._insert(conn, new)

        store._run(body, write=True, transaction=True)


def timed(call: Callable[[], Any], times: int) -> dict[str, float]:
    laps = []
    gc.collect()
    gc.disable()  # a collection in the middle of one query is not the query's cost
    try:
        for _ in range(times):
            began = time.perf_counter()
            call()
            laps.append((time.perf_counter() - began) * 1000)
    finally:
        gc.enable()
    laps.sort()
    return {
        "p50_ms": round(statistics.median(laps), 3),
        "p99_ms": round(laps[min(len(laps) - 1, int(len(laps) * 0.99))], 3),
    }


def measure(store: Store, count: int, queries: int) -> dict[str, Any]:
    began = time.perf_counter()
    ids = fill(store, count)
    filled = time.perf_counter() - began
    if isinstance(store, PostgresStore):
        with store._connection() as conn:
            conn.execute("ANALYZE executions")
            conn.execute("ANALYZE execution_labels")
    engine = Engine(store, tenant="bench")
    rng = random.Random(11)
    kinds: dict[str, Callable[[], Any]] = {
        "recent": lambda: engine.list(limit=50),
        "label": lambda: engine.list(labels={"customer": f"c{rng.randrange(500)}"}),
        "labels2": lambda: engine.list(
            labels={"customer": f"c{rng.randrange(500)}", "region": f"r{rng.randrange(5)}"}
        ),
        "id_prefix": lambda: engine.list(id_prefix=rng.choice(ids)[:13]),
        "name": lambda: engine.list(name=f"fulfilment-{rng.randrange(1, 5)}"),
    }
    out: dict[str, Any] = {"executions": count, "fill_s": round(filled, 1)}
    for kind, call in kinds.items():
        call()  # warm the statement cache
        out[kind] = timed(call, queries)
    sample = engine.list(name="FULFILMENT-1")
    out["check"] = {
        "label_page": len(engine.list(labels={"customer": "c1"}).items),
        "name_page": len(sample.items),
        "name_matches": len(store.workflow_names("bench", "fulfilment-1")),
    }
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--executions", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--pg", action="store_true", help="Also PostgreSQL (a fresh schema).")
    parser.add_argument("--url", default=PG_URL)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder:
        store = SQLiteStore(Path(folder) / "search.db")
        try:
            results["sqlite"] = measure(store, args.executions, args.queries)
        finally:
            store.close()
    if args.pg:
        import psycopg

        schema = f"bench_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(args.url, autocommit=True) as admin:
            admin.execute(f"CREATE SCHEMA {schema}")
        try:
            url = f"{args.url}?options=-csearch_path%3D{schema}"
            pg = PostgresStore(url, max_size=2)
            try:
                results["postgres"] = measure(pg, args.executions, args.queries)
            finally:
                pg.close()
        finally:
            with psycopg.connect(args.url, autocommit=True) as admin:
                admin.execute(f"DROP SCHEMA {schema} CASCADE")
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for store_name, found in results.items():
        print(f"{store_name}: {found['executions']} executions (filled in {found['fill_s']} s)")
        print(f"  {'query':<10} {'p50 ms':>8} {'p99 ms':>8}")
        for kind in ("recent", "label", "labels2", "id_prefix", "name"):
            print(f"  {kind:<10} {found[kind]['p50_ms']:>8} {found[kind]['p99_ms']:>8}")
        print(f"  check: {found['check']}")


if __name__ == "__main__":
    main()
