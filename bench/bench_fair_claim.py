"""Claim throughput with fair share on, as a ratio to the plain claim (target >= 0.9).

A store holds N ready executions; a claimer takes them `limit` (64) at a time until none is
left, with the plain claim, with the workers' fair claim (`wovyr.worker.fair.FairClaimer`:
turns decided in memory over the tenants with claimable work, one indexed statement per
claim) and with the store's own fair claim (`FairShare` without turns: it looks through
every tenant with ready work on each claim), each told the tenants of its previous batch as
the slots it holds, as a worker does. Each kind drains its own copy of the rows (a file or
a schema of its own) and the kinds take turns claim by claim, so a load that comes and goes
on the machine (other jobs) falls on all of them alike; `rounds` times, the first kind
rotating; leases are cleared between rounds (not timed). Only the claim calls are timed.
Figures: executions claimed per second, and fair/plain and scan/plain per round and overall
(medians); also fair/plain per CPU second of this process (on SQLite all of a claim's work
but the fsync waits; on PostgreSQL the server's CPU is not in it). Mixes:

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
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from yardstick import stores_per_kind  # bench/ is on sys.path: this folder

from wovyr.store.base import ClaimAsk, FairShare, Store
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


def rows(mix: str, count: int) -> Iterator[tuple[str, str, int, int]]:
    """(tenant, id, shard, claim_rank): ranks differ, as real starts' do (their start time
    in microseconds); equal ranks would let PostgreSQL fold a tenant's index entries into
    one posting list, whose dead entries a scan can never mark while live ones share it."""
    for i in range(count):
        execution_id = f"e{i:07}"
        yield tenant_of(mix, i, count), execution_id, stable_shard(execution_id), 1_000_000 + i


KINDS = ("plain", "fair", "scan")


class Drain:
    """One kind of claim draining its own copy of the rows, `limit` at a time, each claim
    told the tenants of its previous batch as the slots it holds (as a worker is)."""

    def __init__(self, store: Store, kind: str, limit: int) -> None:
        self.store, self.kind, self.limit = store, kind, limit
        self.claimer = FairClaimer(store)
        self.held: Counter[str] = Counter()
        self.claimed, self.seconds, self.cpu = 0, 0.0, 0.0
        self.done = False

    def step(self) -> None:
        """One claim, timed (wall clock and this process's CPU)."""
        began, cpu = time.perf_counter(), time.process_time()
        if self.kind == "fair":
            got = self.claimer.claim(ClaimAsk("bench", NOW, 3600, self.limit), self.held)
        else:
            share = FairShare(held=self.held) if self.kind == "scan" else None
            got = self.store.claim(ClaimAsk("bench", NOW, 3600, self.limit, fair=share))
        self.seconds += time.perf_counter() - began
        self.cpu += time.process_time() - cpu
        self.claimed += len(got)
        self.held = Counter(c.tenant for c in got)
        self.done = not got


def drain_together(stores: dict[str, Store], limit: int, first: int) -> dict[str, Drain]:
    """Claim everything from each kind's store, one claim of each kind after the other
    (starting with kind `first`), so a load that comes and goes on the machine falls on
    every kind alike."""
    drains = {kind: Drain(stores[kind], kind, limit) for kind in KINDS}
    order = [drains[k] for k in KINDS[first:] + KINDS[:first]]
    while not all(d.done for d in order):
        for d in order:
            if not d.done:
                d.step()
    return drains


def compare(
    stores: dict[str, Store], reset: Callable[[], None], count: int, limit: int, rounds: int
) -> dict[str, Any]:
    rates: dict[str, list[float]] = {kind: [] for kind in KINDS}
    cpu: dict[str, list[float]] = {kind: [] for kind in KINDS}
    for n in range(rounds):
        reset()
        for kind, d in drain_together(stores, limit, n % 3).items():
            assert d.claimed == count, (kind, d.claimed, count)
            rates[kind].append(d.claimed / d.seconds)
            cpu[kind].append(d.cpu)
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
    " created_at, updated_at, seq, ready, checkpoint, shard, claim_rank)"
    " VALUES (?, ?, 'wf', '1', 'h', 'running', 0, 0, 1, 1, '{}', ?, ?)"
)


def bench_sqlite(mix: str, count: int, limit: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        stores = {kind: SQLiteStore(Path(folder) / f"{kind}.db") for kind in KINDS}
        try:
            for store in stores.values():
                with store._write() as conn:
                    conn.executemany(SQLITE_INSERT, rows(mix, count))

            def reset() -> None:
                for store in stores.values():
                    with store._write() as conn:
                        conn.execute("UPDATE executions SET lease_owner = NULL, lease_until = NULL")

            return compare(dict(stores), reset, count, limit, rounds)
        finally:
            for store in stores.values():
                store.close()


PG_INSERT = (
    "INSERT INTO executions (tenant, id, workflow, version, definition_hash, status,"
    " created_at, updated_at, seq, ready, checkpoint, shard, claim_rank)"
    " VALUES (%s, %s, 'wf', '1', 'h', 'running', now(), now(), 1, true, '{}', %s, %s)"
)


def bench_postgres(url: str, mix: str, count: int, limit: int, rounds: int) -> dict[str, Any]:
    with ExitStack() as stack:
        stores, conns = stores_per_kind(stack, url, KINDS, PG_INSERT, list(rows(mix, count)))

        def reset() -> None:
            for conn in conns.values():
                conn.execute("UPDATE executions SET lease_owner = NULL, lease_until = NULL")
                conn.execute("VACUUM executions")

        return compare(dict(stores), reset, count, limit, rounds)


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
