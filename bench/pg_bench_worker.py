"""A worker process for bench_postgres.py: `Worker.run` over a PostgreSQL schema with a
no-op tool, started together with its peers (a go file), until SIGTERM; on exit it writes
a JSON report (durable commits, group-commit batches, claims).

Usage: python pg_bench_worker.py URL READY GO REPORT [--concurrency N] [--profile FILE]
       [--sleep-ms MS]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from wovyr.activities.base import ActivityRegistry
from wovyr.engine.engine import Engine
from wovyr.store.postgres import PostgresStore
from wovyr.worker import Worker


async def work(engine: Engine, args: argparse.Namespace) -> dict[str, object]:
    worker = Worker(
        engine,
        concurrency=args.concurrency,
        lease_seconds=30,
        poll_interval=1,
        reserved_slots=0,  # one tenant: no slots kept for others (as before the reserve)
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    Path(args.ready).touch()
    deadline = time.monotonic() + 300
    while not Path(args.go).exists() and time.monotonic() < deadline:
        await asyncio.sleep(0.002)
    began = os.times()  # CPU from the start signal on: not the imports and connections
    await worker.run(stop, grace_seconds=5)
    ended = os.times()
    return {
        "process_cpu_s": ended.user + ended.system - began.user - began.system,
        "claimed": worker.stats.claimed,
        "batches": worker.committer.batches,
        "batched_steps": worker.committer.steps,
    }


def main() -> None:
    p = argparse.ArgumentParser()
    for name in ("url", "ready", "go", "report"):
        p.add_argument(name)
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--profile", default=None)
    p.add_argument("--sleep-ms", type=float, default=0, help="the tool waits this long (I/O)")
    args = p.parse_args()
    registry = ActivityRegistry()

    async def noop() -> None:
        if args.sleep_ms:
            await asyncio.sleep(args.sleep_ms / 1000)

    registry.register("noop", noop)
    store = PostgresStore(args.url, max_size=4, db_clock=True)
    timing = {"commit_wall_s": 0.0, "commit_cpu_s": 0.0, "commit_calls": 0}
    commit = store.commit

    def timed(steps: Any, *rest: Any) -> Any:
        wall, cpu = time.perf_counter(), time.thread_time()
        try:
            return commit(steps, *rest)
        finally:
            timing["commit_wall_s"] += time.perf_counter() - wall
            timing["commit_cpu_s"] += time.thread_time() - cpu
            timing["commit_calls"] += 1

    store.commit = timed  # type: ignore[method-assign,assignment]
    with Engine(store, activities=registry) as engine:
        profiler = cProfile.Profile() if args.profile else None
        if profiler is not None:
            profiler.enable()
        report = asyncio.run(work(engine, args))
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(args.profile)
        report["commits"] = store.commits
        report.update(timing)
    Path(args.report).write_text(json.dumps(report))


if __name__ == "__main__":
    main()
