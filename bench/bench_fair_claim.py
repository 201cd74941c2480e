"""Claim throughput with fair share on, as a ratio to the plain claim (target >= 0.9).

A store holds N ready executions; a claimer takes them `limit` (64) at a time until none is
left, with the plain claim, with the workers' fair claim (`wovyr.worker.fair.FairClaimer`:
turns decided in memory over the tenants with claimable work, one indexed statement per
claim) and with the store's own fair claim (`FairShare` without turns: it looks through
every tenant with ready work on each claim), each told the tenants of its previous batch as
the slots it holds, as a worker does; in a rotating order, `rounds` times; leases are
cleared between runs (not timed). Figures: executions claimed per second, and fair/plain
and scan/plain per round and overall (medians); also fair/plain per CPU second of this
process (on SQLite all of a claim's work but the fsync waits, so it holds still when other
jobs make the wall-clock figures swing; on PostgreSQL the server's CPU is not in it). Mixes:

  one     1 tenant holds every execution (the fair claim's overhead alone)
  skewed  10 tenants: one holds 90%, nine share the rest (a backlog and its neighbours)
  many    100 tenants, equal shares

On SQLite (a file under a temporary folder) and PostgreSQL (a fresh schema, dropped).
Usage: python bench/bench_fair_claim.py [--count 20000] [--rounds 5] [--limit 64]
       [--url postgresql://postgres@127.0.0.1:5432/test] [--only sqlite,postgres]
       [--mixes one,skewed,many] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

from wovyr.store.base import FairShare, Store
from wovyr.store.postgres import PostgresStore
from wovyr.store.shards import stable_shard
from wovyr.store.sqlite import SQLiteStore
from wovyr.worker.fair import FairClaimer

NOW = datetime(2030, 1, 1, tzinfo=UTC)
MIXES = ("one", "skewed", "many")


def tenant_of(mix: str, i: int, count: int) -> str:
    if mix == "one":
        return "t0"
    if mix == "skewed":
        return "t0" if i < count * 9 // 10 else f"t{1 + i % 9}"
    return f"t{i % 100}"


def rows(mix: str, count: int) -> Iterator[tuple[str, str, int]]:
    for i in range(count):
        execution_id = f"e{i:07}"
        yield tenant_of(mix, i, count), execution_id, stable_shard(execution_id)


KINDS = ("plain", "fair", "scan")


def drain(store: Store, limit: int, kind: str) -> tuple[int, float, float]:
    """Claim everything, `limit` at a time: (executions claimed, seconds, CPU seconds of
    this process: on SQLite the claims' whole work but the fsync waits)."""
    held: Counter[str] = Counter()
    claimed = 0
    claimer = FairClaimer(store)
    began, cpu = time.perf_counter(), time.process_time()
    while True:
        if kind == "fair":
            got = claimer.claim("bench", NOW, 3600, limit, held)
        else:
            share = FairShare(held=held) if kind == "scan" else None
            got = store.claim("bench", NOW, 3600, limit, fair=share)
        if not got:
            return claimed, time.perf_counter() - began, time.process_time() - cpu
        claimed += len(got)
        held = Counter(c.tenant for c in got)


def compare(
    store: Store, reset: Callable[[], None], count: int, limit: int, rounds: int
) -> dict[str, Any]:
    rates: dict[str, list[float]] = {kind: [] for kind in KINDS}
    cpu: dict[str, list[float]] = {kind: [] for kind in KINDS}
    for n in range(rounds):
        # Rotate which goes first, so a warming cache or a checkpoint favours none.
        for kind in KINDS[n % 3 :] + KINDS[: n % 3]:
            reset()
            claimed, seconds, cpu_seconds = drain(store, limit, kind)
            assert claimed == count, (kind, claimed, count)
            rates[kind].append(claimed / seconds)
            cpu[kind].append(cpu_seconds)
    plain = rates["plain"]
    ratios = [f / p for f, p in zip(rates["fair"], plain, strict=True)]
    scans = [f / p for f, p in zip(rates["scan"], plain, strict=True)]
    cpu_ratios = [p / f for f, p in zip(cpu["fair"], cpu["plain"], strict=True)]
    return {
        "cpu_ratio": round(statistics.median(cpu_ratios), 3),
        "cpu_ratios": [round(r, 3) for r in cpu_ratios],
        "plain_per_s": round(statistics.median(plain)),
        "fair_per_s": round(statistics.median(rates["fair"])),
        "scan_per_s": round(statistics.median(rates["scan"])),
        "ratio": round(statistics.median(ratios), 3),
        "ratios": [round(r, 3) for r in ratios],
        "scan_ratio": round(statistics.median(scans), 3),
    }


SQLITE_INSERT = (
    "INSERT INTO executions (tenant, id, workflow, version, definition_hash, status,"
    " created_at, updated_at, seq, ready, checkpoint, shard)"
    " VALUES (?, ?, 'wf', '1', 'h', 'running', 0, 0, 1, 1, '{}', ?)"
)


def bench_sqlite(mix: str, count: int, limit: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        store = SQLiteStore(Path(folder) / "bench.db")
        try:
            with store._write() as conn:
                conn.executemany(SQLITE_INSERT, rows(mix, count))

            def reset() -> None:
                with store._write() as conn:
                    conn.execute("UPDATE executions SET lease_owner = NULL, lease_until = NULL")

            return compare(store, reset, count, limit, rounds)
        finally:
            store.close()


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


PG_INSERT = (
    "INSERT INTO executions (tenant, id, workflow, version, definition_hash, status,"
    " created_at, updated_at, seq, ready, checkpoint, shard)"
    " VALUES (%s, %s, 'wf', '1', 'h', 'running', now(), now(), 1, true, '{}', %s)"
)


def bench_postgres(url: str, mix: str, count: int, limit: int, rounds: int) -> dict[str, Any]:
    with fresh_schema(url) as schema_url:
        store = PostgresStore(schema_url, max_size=2)
        try:
            with psycopg.connect(schema_url, autocommit=True) as conn:
                with conn.cursor() as cur:
                    cur.executemany(PG_INSERT, list(rows(mix, count)))
                conn.execute("VACUUM ANALYZE executions")

                def reset() -> None:
                    conn.execute("UPDATE executions SET lease_owner = NULL, lease_until = NULL")
                    conn.execute("VACUUM executions")

                return compare(store, reset, count, limit, rounds)
        finally:
            store.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--limit", type=int, default=64)
    parser.add_argument("--only", default="sqlite,postgres")
    parser.add_argument("--mixes", default=",".join(MIXES))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results: dict[str, Any] = {"count": args.count, "limit": args.limit, "rounds": args.rounds}
    for backend in args.only.split(","):
        for mix in args.mixes.split(","):
            if backend == "sqlite":
                found = bench_sqlite(mix, args.count, args.limit, args.rounds)
            else:
                found = bench_postgres(args.url, mix, args.count, args.limit, args.rounds)
            results[f"{backend}_{mix}"] = found
    if args.json:
        print(json.dumps(results))
        return
    print(f"claim throughput, {args.count} ready executions, {args.limit} per claim")
    print(
        f"{'store / mix':<18}{'plain/s':>10}{'fair/s':>10}{'fair/plain':>12}"
        f"{'scan/s':>10}{'scan/plain':>12}  (target fair/plain >= 0.9)"
    )
    for key, found in results.items():
        if isinstance(found, dict):
            plain, fair, ratio = found["plain_per_s"], found["fair_per_s"], found["ratio"]
            scan, scan_ratio = found["scan_per_s"], found["scan_ratio"]
            print(
                f"{key:<18}{plain:>10}{fair:>10}{ratio:>12.3f}{scan:>10}{scan_ratio:>12.3f}"
                f"  fair/plain rounds {found['ratios']}; per CPU second of this process"
                f" {found['cpu_ratio']:.3f} (rounds {found['cpu_ratios']})"
            )


if __name__ == "__main__":
    main()
