"""What the audit chain costs on the start path (SQLite and PostgreSQL).

A start through the engine facade (`Engine.submit` of a one-step workflow) with no actor
(nothing audited: the system's own starts, and every start before the audit chain) and
with an actor (one audit record appended in the start's transaction: on PostgreSQL the
start becomes a transaction that also locks the chain's head row, on SQLite one more
INSERT inside the same BEGIN IMMEDIATE). Both kinds run in alternating rounds in one
process and one run, so the ratio is fair on a noisy machine; B0 (fsync'd single-row
commits/s of the same database, one connection) is measured in the same run as the
yardstick. On PostgreSQL also with 8 threads starting at once: the head row serialises
every audited start of every process, so this is where appending on every start costs
most.

Usage: python bench/bench_audit.py [--starts 300] [--rounds 3] [--url URL] [--json]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg

from wovyr.engine.engine import Engine
from wovyr.store.base import Store
from wovyr.store.postgres import PostgresStore
from wovyr.store.sqlite import SQLiteStore

FLOW = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: audited}
inputs: {n: {type: integer, default: 0}}
activities:
  - {id: a, set: {x: "${{ inputs.n }}"}}
"""
PG_URL = "postgresql://postgres@127.0.0.1:5432/test"


def starts_per_second(engine: Engine, count: int, threads: int = 1) -> float:
    """`count` starts split over `threads`, timed."""
    per = count // threads

    def run() -> None:
        for i in range(per):
            engine.submit(FLOW, {"n": i})

    workers = [threading.Thread(target=run) for _ in range(threads)]
    began = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return per * threads / (time.perf_counter() - began)


def compare(store: Store, starts: int, rounds: int, threads: int = 1) -> dict[str, float]:
    """Alternating rounds of unaudited and audited starts; the best round of each."""
    plain = Engine(store)
    audited = plain.acting("local:bench")
    plain.submit(FLOW)  # parse and pin once, outside the timing
    plain_runs, audited_runs = [], []
    for _ in range(rounds):
        plain_runs.append(starts_per_second(plain, starts, threads))
        audited_runs.append(starts_per_second(audited, starts, threads))
    best_plain, best_audited = max(plain_runs), max(audited_runs)
    return {
        "threads": threads,
        "unaudited_starts_per_s": round(best_plain, 1),
        "audited_starts_per_s": round(best_audited, 1),
        "audited_over_unaudited": round(best_audited / best_plain, 3),
    }


def sqlite_b0(folder: Path, n: int = 1000) -> float:
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


def pg_b0(url: str, n: int = 1000) -> float:
    with fresh_schema(url) as schema_url, psycopg.connect(schema_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (id bigserial PRIMARY KEY, v text)")
        began = time.perf_counter()
        for i in range(n):
            conn.execute("INSERT INTO t (v) VALUES (%s)", (str(i),))
        return n / (time.perf_counter() - began)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--starts", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--url", default=PG_URL)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        b0 = sqlite_b0(folder)
        store = SQLiteStore(folder / "wovyr.db")
        try:
            sqlite = compare(store, args.starts, args.rounds)
        finally:
            store.close()
        out["sqlite"] = {"b0_commits_per_s": round(b0, 1), **sqlite}
        out["sqlite"]["audited_share_of_b0"] = round(sqlite["audited_starts_per_s"] / b0, 3)
    b0 = pg_b0(args.url)
    out["postgres"] = {"b0_commits_per_s": round(b0, 1)}
    for threads in (1, 8):
        with fresh_schema(args.url) as schema_url:
            pg = PostgresStore(schema_url, max_size=max(4, threads))
            try:
                result = compare(pg, args.starts, args.rounds, threads)
            finally:
                pg.close()
        result["audited_share_of_b0"] = round(result["audited_starts_per_s"] / b0, 3)
        out["postgres"][f"threads_{threads}"] = result
    if args.json:
        print(json.dumps(out, indent=2))
        return
    for backend, figures in out.items():
        print(f"{backend}: B0 {figures['b0_commits_per_s']} commits/s")
        rows = (
            [figures]
            if "threads" in figures
            else [v for v in figures.values() if isinstance(v, dict)]
        )
        for row in rows:
            print(
                f"  {row['threads']} thread(s): {row['unaudited_starts_per_s']} starts/s "
                f"unaudited, {row['audited_starts_per_s']} audited "
                f"(ratio {row['audited_over_unaudited']}, {row['audited_share_of_b0']} of B0)"
            )


if __name__ == "__main__":
    main()
