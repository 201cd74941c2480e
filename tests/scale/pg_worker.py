"""A worker process for the scale tests and benchmarks: `Worker.run` on PostgreSQL until
SIGTERM, with the tools of `tools.py`.

Usage: python pg_worker.py URL [--lease S] [--poll S] [--concurrency N] [--partitions 0-3
--of 8] [--membership] [--heartbeat S] [--max-per-tenant N] [--plain-claim] [--ready FILE]
[--go FILE] [--report FILE]

--ready: touched once the store is open (the caller waits for it); --go: wait for this file
before working (so several workers start together); --report: on exit, a JSON line with the
worker's stats and the commits the store refused with LEASE_LOST (the stalled-worker test).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
import time
from pathlib import Path

from wovyr.activities.base import load_activity_modules
from wovyr.engine.engine import Engine
from wovyr.store.base import CommitOutcome, StepWrite
from wovyr.store.flow import GatedOutcome
from wovyr.store.postgres import PostgresStore
from wovyr.worker import Worker
from wovyr.worker.partitions import parse_partitions

TOOLS = Path(__file__).with_name("tools.py")


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("url")
    p.add_argument("--lease", type=float, default=30.0)
    p.add_argument("--poll", type=float, default=1.0)
    p.add_argument("--heartbeat", type=float, default=None)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--partitions", default=None)
    p.add_argument("--of", type=int, default=None)
    p.add_argument("--membership", action="store_true")
    p.add_argument("--max-per-tenant", type=int, default=None)
    p.add_argument("--plain-claim", action="store_true")
    p.add_argument("--pool", type=int, default=4)
    p.add_argument("--ready", default=None)
    p.add_argument("--go", default=None)
    p.add_argument("--report", default=None)
    return p.parse_args(argv)


async def work(engine: Engine, args: argparse.Namespace) -> None:
    worker = Worker(
        engine,
        concurrency=args.concurrency,
        lease_seconds=args.lease,
        poll_interval=args.poll,
        heartbeat_interval=args.heartbeat,
        partitions=parse_partitions(args.partitions, args.of) if args.partitions else None,
        of=args.of,
        membership=args.membership,
        fair_share=not args.plain_claim,
        max_per_tenant=args.max_per_tenant,
    )
    refused: list[str] = []
    # every step a runner commits goes through `commit_gated` (`commit` is a wrapper of it)
    commit = worker.committer.commit_gated

    async def counted(step: StepWrite) -> GatedOutcome:
        outcome = await commit(step)
        if outcome is CommitOutcome.LEASE_LOST:
            refused.append(step.execution_id)
        return outcome

    worker.committer.commit_gated = counted  # type: ignore[method-assign]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    if args.ready:
        Path(args.ready).touch()
    if args.go:
        deadline = time.monotonic() + 120
        while not Path(args.go).exists() and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
    try:
        await worker.run(stop, grace_seconds=5)
    finally:
        if args.report:
            report = {"owner": worker.owner, "lease_lost": refused, **vars(worker.stats)}
            Path(args.report).write_text(json.dumps(report))


def main() -> None:
    args = parse(sys.argv[1:])
    # The worker's own lines (partition shares, coverage, retries) land in its log file,
    # where tests read them as signals.
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    load_activity_modules([str(TOOLS)])
    store = PostgresStore(args.url, max_size=args.pool, db_clock=True)
    with Engine(store) as engine:
        asyncio.run(work(engine, args))


if __name__ == "__main__":
    main()
