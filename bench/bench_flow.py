"""Flow control's cost, as ratios to the same work without it, measured in one run.

1. Claim: N ready executions claimed 64 at a time by a worker's fair claim, each round
   followed by the claimed executions' first steps (the attempt each starts), committed in
   one batch as a worker's committer groups them: the yardstick (`plain`). Beside it, in
   the same run: the same with every execution holding a workflow concurrency slot
   (`keyed`: the claim statement reads no slot table, slots move at starts and ends); and
   with each step's attempt gated by one rate-limit unit and one activity concurrency slot,
   the gates asked in a transaction of their own before the steps (`apart`, how gates were
   taken before) or taken in the steps' own transaction (`gated`, how a worker takes them).
   The claim alone is shown too. `gated` is the strict figure: the gate's cost against the
   cheapest step there is (one event, no activity work).
2. End to end: a worker drives N one-step workflows (started beforehand, not timed), plain
   vs with a workflow concurrency key, an activity concurrency key and a rate limit (all
   far above what the run needs, so nothing waits): executions per second. Target >= 0.7:
   the throughput a worker keeps with flow control active.

SQLite (a file per variant in a temporary folder) and PostgreSQL (a fresh schema per
variant, dropped). In the claim part each variant drains its own copy of the rows and the
variants take turns claim round by claim round (a slow moment of the machine falls on all
alike: drained one after the other, the per-round ratios of two identical variants spread
over +-20 %); the order of the turns rotates; medians of per-round ratios.
Usage: python bench/bench_flow.py [--count 5000] [--e2e 300] [--rounds 3]
       [--url postgresql://postgres@127.0.0.1:5432/test] [--only sqlite,postgres] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from yardstick import postgres_schema, stores_per_kind  # bench/ is on sys.path: this folder

from wovyr.activities.base import ActivityRegistry
from wovyr.engine.engine import Engine
from wovyr.events import Event
from wovyr.store.base import Claim, ClaimAsk, CommitOutcome, StepWrite, Store
from wovyr.store.flow import FlowAcquire, RateRequest, SlotClaim
from wovyr.store.postgres import PostgresStore
from wovyr.store.sqlite import SQLiteStore
from wovyr.worker import Worker
from wovyr.worker.fair import FairClaimer

NOW = datetime(2030, 1, 1, tzinfo=UTC)
LIMIT = 64
RATE = RateRequest("bench", 1, capacity=1e12, per_second=1e12)

PLAIN = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: plain}
inputs:
  i: {type: integer, default: 0}
activities:
  - {id: a, tool: noop}
"""
GATED = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: gated}
inputs:
  i: {type: integer, default: 0}
concurrency: {key: "k-${{ inputs.i % 10 }}", limit: 10000}
activities:
  - id: a
    tool: noop
    concurrency: {key: "act", limit: 10000}
    rate_limit: {key: bench, limit: 1000000000, per: 1s}
"""


def first_step(claim: Claim, gate: FlowAcquire | None = None) -> StepWrite:
    """The step a runner commits right after its claim: the attempt it starts."""
    return StepWrite(
        execution_id=claim.execution_id,
        expected_seq=claim.seq,
        events=[Event("ActivityStarted", NOW, {"activity": "a", "attempt": 1})],
        checkpoint={},
        status="running",
        updated_at=NOW,
        fence=claim.fence,
        ready=True,
        tenant=claim.tenant,
        gate=gate,
    )


def gate_of(claim: Claim) -> FlowAcquire:
    """One rate-limit unit and one activity slot: in-flight attempts spread over 64 keys
    (slots are never released here, so a key's holders grow as a long-running load's would)."""
    key = f"act-{hash(claim.execution_id) % 64}"
    slot = SlotClaim(key, f"{claim.execution_id}/a/1", 10**6)
    return FlowAcquire(claim.tenant, claim.execution_id, "bench", NOW, [RATE], [slot])


def drain(store: Store, kind: str) -> Iterator[int]:
    """Claim everything, 64 at a time, as a worker does, one round per `next`: each round's
    claim, then (but for `claim`) the claimed executions' first steps, committed together
    (the committer groups them); `apart` asks their gates in a transaction of their own
    first (as before gates rode on the step), `gated` takes them in the step's transaction.
    Yields how many each round claimed."""
    held: Counter[str] = Counter()
    claimer = FairClaimer(store)
    while True:
        got = claimer.claim(ClaimAsk("bench", NOW, 3600, LIMIT), held)
        if not got:
            return
        if kind == "apart":
            assert all(a.granted for a in store.acquire_flows([gate_of(c) for c in got]))
        if kind == "gated":
            results = store.commit_gated([first_step(c, gate_of(c)) for c in got])
            assert all(r is CommitOutcome.OK for r in results)
        elif kind != "claim":
            assert all(r is CommitOutcome.OK for r in store.commit([first_step(c) for c in got]))
        held = Counter(c.tenant for c in got)
        yield len(got)


KINDS = ("claim", "plain", "keyed", "apart", "gated")


def claims(
    stores: Mapping[str, Store], reset: Callable[[str], None], count: int, rounds: int
) -> dict[str, Any]:
    """Each kind drains its own store (the same rows); the kinds take turns round by round
    (claim and steps), so a slow moment of the machine falls on all of them alike; each
    kind's time is the sum of its own rounds. The order of the turns rotates."""
    rates: dict[str, list[float]] = {k: [] for k in KINDS}
    for n in range(rounds):
        order = KINDS[n % len(KINDS) :] + KINDS[: n % len(KINDS)]
        for kind in order:
            reset(kind)
        runs = {kind: drain(stores[kind], kind) for kind in order}
        claimed = dict.fromkeys(order, 0)
        seconds = dict.fromkeys(order, 0.0)
        while runs:
            for kind in order:
                run = runs.get(kind)
                if run is None:
                    continue
                began = time.perf_counter()
                got = next(run, None)
                seconds[kind] += time.perf_counter() - began
                if got is None:
                    del runs[kind]
                else:
                    claimed[kind] += got
        for kind in order:
            assert claimed[kind] == count, (kind, claimed[kind])
            rates[kind].append(count / seconds[kind])

    def ratio(kind: str) -> float:
        per_round = [k / p for k, p in zip(rates[kind], rates["plain"], strict=True)]
        return round(statistics.median(per_round), 3)

    result: dict[str, Any] = {f"{k}_per_s": round(statistics.median(rates[k])) for k in KINDS}
    result.update({f"{k}_ratio": ratio(k) for k in ("keyed", "apart", "gated")})
    return result


SQLITE_ROWS = (
    "INSERT INTO executions (tenant, id, workflow, version, definition_hash, status,"
    " created_at, updated_at, seq, ready, checkpoint, shard, claim_rank)"
    " VALUES ('t', ?, 'wf', '1', 'h', 'running', 0, 0, 1, 1, '{}', 0, ?)"
)


def sqlite_claims(count: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        stores = {kind: SQLiteStore(Path(folder) / f"{kind}.db") for kind in KINDS}
        try:
            for store in stores.values():
                with store._write() as conn:
                    conn.executemany(SQLITE_ROWS, [(f"e{i:07}", i) for i in range(count)])

            def reset(kind: str) -> None:
                with stores[kind]._write() as conn:
                    conn.execute("UPDATE executions SET lease_owner = NULL, lease_until = NULL")
                    conn.execute("DELETE FROM flow_slots")
                    conn.execute("DELETE FROM activity_slots")
                    if kind == "keyed":
                        conn.execute(
                            "INSERT INTO flow_slots (tenant, key, execution_id, holding)"
                            " SELECT tenant, 'k-' || (rowid % 10), id, 1 FROM executions"
                        )

            return claims(stores, reset, count, rounds)
        finally:
            for store in stores.values():
                store.close()


PG_ROWS = (
    "INSERT INTO executions (tenant, id, workflow, version, definition_hash, status,"
    " created_at, updated_at, seq, ready, checkpoint, shard, claim_rank)"
    " VALUES ('t', %s, 'wf', '1', 'h', 'running', now(), now(), 1, true, '{}', 0, %s)"
)


def postgres_claims(url: str, count: int, rounds: int) -> dict[str, Any]:
    with ExitStack() as stack:
        rows = [(f"e{i:07}", i) for i in range(count)]
        stores, conns = stores_per_kind(stack, url, KINDS, PG_ROWS, rows)

        def reset(kind: str) -> None:
            conn = conns[kind]
            conn.execute("UPDATE executions SET lease_owner = NULL, lease_until = NULL")
            conn.execute("DELETE FROM flow_slots")
            conn.execute("DELETE FROM activity_slots")
            if kind == "keyed":
                conn.execute(
                    "INSERT INTO flow_slots (tenant, key, execution_id, holding)"
                    " SELECT tenant, 'k-' || (claim_rank % 10), id, true FROM executions"
                )
            # every kind starts from clean tables: the slots and tally rows the last round
            # left (deleted above) would otherwise bloat the next one's
            conn.execute("VACUUM executions, activity_slots, activity_slot_tally")

        return claims(stores, reset, count, rounds)


def end_to_end(open_engine: Callable[[], Engine], count: int, rounds: int) -> dict[str, Any]:
    rates: dict[str, list[float]] = {"plain": [], "gated": []}
    if count <= 0:  # --e2e 0: the claim figures only
        return {"plain_per_s": 0.0, "gated_per_s": 0.0, "ratio": 0.0}
    for n in range(rounds):
        order = ("plain", "gated") if n % 2 == 0 else ("gated", "plain")
        for kind in order:
            engine = open_engine()
            try:
                source = PLAIN if kind == "plain" else GATED
                for i in range(count):
                    engine.start(source, {"i": i}, execution_id=f"{kind}-{n}-{i}")

                async def run(engine: Engine = engine) -> float:
                    worker = Worker(engine, concurrency=64, reserved_slots=0)
                    began = time.perf_counter()
                    await worker.run_until_idle()
                    seconds = time.perf_counter() - began
                    await worker.close()
                    return seconds

                seconds = asyncio.run(run())
                done = engine.list(status="completed", workflow=kind, limit=1000).items
                assert len(done) >= min(count, 1000), (kind, len(done))
                rates[kind].append(count / seconds)
            finally:
                engine.close()
    ratios = [g / p for g, p in zip(rates["gated"], rates["plain"], strict=True)]
    return {
        "plain_per_s": round(statistics.median(rates["plain"]), 1),
        "gated_per_s": round(statistics.median(rates["gated"]), 1),
        "ratio": round(statistics.median(ratios), 3),
    }


def registry() -> ActivityRegistry:
    activities = ActivityRegistry()
    activities.register("noop", lambda: None)
    return activities


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--count", type=int, default=5_000)
    parser.add_argument("--e2e", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="sqlite,postgres")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results: dict[str, Any] = {"count": args.count, "e2e": args.e2e, "rounds": args.rounds}
    for backend in args.only.split(","):
        if backend == "sqlite":
            results["sqlite_claim"] = sqlite_claims(args.count, args.rounds)
            with tempfile.TemporaryDirectory() as folder:
                path = Path(folder) / "e2e.db"

                def sqlite_engine(path: Path = path) -> Engine:
                    return Engine(SQLiteStore(path), activities=registry())

                results["sqlite_e2e"] = end_to_end(sqlite_engine, args.e2e, args.rounds)
        else:
            results["postgres_claim"] = postgres_claims(args.url, args.count, args.rounds)
            with postgres_schema(args.url) as url:
                results["postgres_e2e"] = end_to_end(
                    lambda: Engine(PostgresStore(url, max_size=4), activities=registry()),
                    args.e2e,
                    args.rounds,
                )
    if args.json:
        print(json.dumps(results))
        return
    print(
        f"flow control: {args.count} executions claimed {LIMIT} at a time, each claim round"
        f" followed by the claimed executions' first steps (one batch); {args.e2e} driven"
    )
    for backend in args.only.split(","):
        c, e = results[f"{backend}_claim"], results[f"{backend}_e2e"]
        print(
            f"{backend:<9} claim alone {c['claim_per_s']}/s; claim + step {c['plain_per_s']}/s"
            f" (yardstick); with workflow slots held {c['keyed_per_s']}/s (x{c['keyed_ratio']});"
            f" gated, gate in its own transaction {c['apart_per_s']}/s (x{c['apart_ratio']});"
            f" gated, gate in the step {c['gated_per_s']}/s (x{c['gated_ratio']})"
        )
        print(
            f"{'':<9} end to end {e['plain_per_s']}/s plain, {e['gated_per_s']}/s with keys"
            f" and a rate limit (x{e['ratio']}, target >= 0.7)"
        )


if __name__ == "__main__":
    main()
