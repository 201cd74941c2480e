"""Agent memory search over 100,000 items (SQLite and PostgreSQL), beside a yardstick.

A namespace is filled with `--items` items whose embeddings are random unit vectors of
`--dims` dimensions (float32), seeded through the driver in one transaction (the put path's
cost is not what this measures; PostgreSQL's table is then analyzed, as autovacuum would),
and one `put_memory` through the store so the namespace has a version. Then, per store:

- `cold`: the first search (reads the version and every embedding, builds the normalised
  matrix); the first search after one more put (`after_put`: reads that item, updates a
  copy of the matrix) and after a delete (`after_delete`: rebuilds it);
- `search`: `--queries` searches (top 10) of random vectors through `search_memory`, timed
  one by one (the matrix cached: one version read, the product, the top-k, one read of the
  10 items);
- `yardstick`: the same queries as a plain numpy `matrix @ q` plus `argpartition` over the
  same normalised matrix in memory (what the search cannot be faster than).

Reported as p50 and p99 in milliseconds and the ratio search / yardstick (same run).

Usage: python bench/bench_memory.py [--items 100000] [--dims 256] [--queries 200] [--no-pg]
       [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from wovyr.store.agent_memory import MemoryDelete, MemoryPut
from wovyr.store.base import Store
from wovyr.store.codec import to_micros
from wovyr.store.postgres import PostgresStore
from wovyr.store.sqlite import SQLiteStore
from wovyr.store.vectors import pack

PG_URL = "postgresql://postgres@127.0.0.1:5432/test"
NOW = datetime(2030, 1, 1, 9, tzinfo=UTC)
TENANT, NAMESPACE, MODEL = "bench", "kb", "bench-embedding"


def _vectors(n: int, dims: int, seed: int) -> np.ndarray[Any, np.dtype[np.float32]]:
    rng = np.random.default_rng(seed)
    m = rng.standard_normal((n, dims)).astype(np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    return m


def _rows(matrix: np.ndarray[Any, np.dtype[np.float32]]) -> list[tuple[str, bytes]]:
    return [(f"item-{i:06d}", matrix[i].astype("<f4").tobytes()) for i in range(len(matrix))]


def seed_sqlite(path: Path, matrix: np.ndarray[Any, np.dtype[np.float32]]) -> None:
    import sqlite3

    conn = sqlite3.connect(path)
    with conn:
        conn.executemany(
            "INSERT INTO memory_items (tenant, namespace, key, value, text, embedding,"
            " embedding_model, version, seq, updated_at)"
            " VALUES (?, ?, ?, 'null', ?, ?, ?, 1, 0, ?)",
            [
                (TENANT, NAMESPACE, key, key, blob, MODEL, to_micros(NOW))
                for key, blob in _rows(matrix)
            ],
        )
    conn.close()


def seed_postgres(url: str, matrix: np.ndarray[Any, np.dtype[np.float32]]) -> None:
    import psycopg

    with (
        psycopg.connect(url) as conn,
        conn.cursor() as cur,
        cur.copy(
            "COPY memory_items (tenant, namespace, key, value, text, embedding,"
            " embedding_model, version, seq, updated_at) FROM STDIN"
        ) as copy,
    ):
        for key, blob in _rows(matrix):
            copy.write_row((TENANT, NAMESPACE, key, "null", key, blob, MODEL, 1, 0, NOW))
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE memory_items")  # what autovacuum does to a table filled by puts


def _ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return {"p50_ms": round(statistics.median(ordered) * 1e3, 3), "p99_ms": round(p99 * 1e3, 3)}


def measure(
    store: Store, matrix: np.ndarray[Any, np.dtype[np.float32]], queries: int
) -> dict[str, Any]:
    dims = matrix.shape[1]
    extra = _vectors(1, dims, seed=7)[0]
    put = MemoryPut(TENANT, NAMESPACE, "extra", None, "extra", pack(list(extra)), MODEL)
    store.put_memory(put, NOW)
    probes = _vectors(queries, dims, seed=11)
    t = time.perf_counter()
    store.search_memory(TENANT, NAMESPACE, list(probes[0]), MODEL, 10, NOW)
    cold = time.perf_counter() - t
    samples, yard = [], []
    normalised = np.vstack([matrix, extra[None, :]])  # what the cache holds
    checked = 0
    for q in probes:
        query = list(q)
        t = time.perf_counter()
        hits = store.search_memory(TENANT, NAMESPACE, query, MODEL, 10, NOW)
        samples.append(time.perf_counter() - t)
        t = time.perf_counter()
        scores = normalised @ q
        top = np.argpartition(-scores, 9)[:10]
        top = top[np.argsort(-scores[top])]
        yard.append(time.perf_counter() - t)
        best = f"item-{top[0]:06d}" if top[0] < len(matrix) else "extra"
        checked += hits[0].item.key == best
    store.put_memory(
        MemoryPut(TENANT, NAMESPACE, "extra", None, "x", pack(list(extra)), MODEL), NOW
    )
    t = time.perf_counter()
    store.search_memory(TENANT, NAMESPACE, list(probes[0]), MODEL, 10, NOW)
    after_put = time.perf_counter() - t
    store.delete_memory(MemoryDelete(TENANT, NAMESPACE, "extra"), NOW)
    t = time.perf_counter()
    store.search_memory(TENANT, NAMESPACE, list(probes[0]), MODEL, 10, NOW)
    after_delete = time.perf_counter() - t
    search, yardstick = _ms(samples), _ms(yard)
    return {
        "items": len(matrix) + 1,
        "dims": dims,
        "cold_ms": round(cold * 1e3, 1),
        "after_put_ms": round(after_put * 1e3, 1),
        "after_delete_ms": round(after_delete * 1e3, 1),
        "search": search,
        "yardstick": yardstick,
        "ratio_p50": round(search["p50_ms"] / yardstick["p50_ms"], 2),
        "same_top_hit": f"{checked}/{queries}",
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--dims", type=int, default=256)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--no-pg", action="store_true", help="SQLite only")
    parser.add_argument("--url", default=PG_URL)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    matrix = _vectors(args.items, args.dims, seed=3)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "memory.db"
        SQLiteStore(path).close()  # migrated
        seed_sqlite(path, matrix)
        store = SQLiteStore(path)
        try:
            results["sqlite"] = measure(store, matrix, args.queries)
        finally:
            store.close()
    if not args.no_pg:
        import psycopg

        schema = f"bench_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(args.url, autocommit=True) as admin:
            admin.execute(f"CREATE SCHEMA {schema}")
        try:
            url = f"{args.url}?options=-csearch_path%3D{schema}"
            PostgresStore(url, max_size=2).close()  # migrated
            seed_postgres(url, matrix)
            pg = PostgresStore(url, max_size=2)
            try:
                results["postgres"] = measure(pg, matrix, args.queries)
            finally:
                pg.close()
        finally:
            with psycopg.connect(args.url, autocommit=True) as admin:
                admin.execute(f"DROP SCHEMA {schema} CASCADE")
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(
        f"{'store':<9} {'items':>7} {'dims':>5} {'cold ms':>8} {'put ms':>7} {'delete ms':>9}"
        f" {'p50 ms':>7} {'p99 ms':>7} {'numpy p50':>9} {'numpy p99':>9} {'x p50':>6} top1"
    )
    for name, r in results.items():
        print(
            f"{name:<9} {r['items']:>7} {r['dims']:>5} {r['cold_ms']:>8}"
            f" {r['after_put_ms']:>7} {r['after_delete_ms']:>9}"
            f" {r['search']['p50_ms']:>7} {r['search']['p99_ms']:>7}"
            f" {r['yardstick']['p50_ms']:>9} {r['yardstick']['p99_ms']:>9}"
            f" {r['ratio_p50']:>6} {r['same_top_hit']}"
        )


if __name__ == "__main__":
    main()
