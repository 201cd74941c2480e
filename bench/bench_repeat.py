"""`repeat` at 10,000 iterations on the embedded SQLite store (WAL, synchronous=FULL): the
checkpoint stays the same size and an iteration costs the same at the 10,000th as at the
100th.

One execution runs a `tool` step (a no-op handler) with `repeat` until iteration 10,000,
no `every` (each iteration follows at once; every one is a full activity run with its own
attempt and commit). The handler notes the time of each call and, at iterations 100 and
10,000, the stored checkpoint's size in bytes (its JSON) and the history's length. Reported:

- checkpoint bytes at 100 and at 10,000 (and the difference);
- events per iteration (the history grows by the same few events each iteration);
- ms per iteration: the median gap between consecutive calls over iterations 51-150 and over
  9,901-10,000, their ratio, and each as a multiple of B0's commit time (the machine's
  fsync'd single-row commit, measured in the same run: this machine's speed varies 3x from
  day to day, the ratios do not).

Usage: python bench/bench_repeat.py [--iterations 10000] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from wovyr.activities.base import ActivityRegistry
from wovyr.clock import SystemClock
from wovyr.engine.engine import Engine
from wovyr.store.codec import dumps
from wovyr.store.sqlite import SQLiteStore
from wovyr.worker import Worker

LOOP = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {{name: bench-repeat}}
activities:
  - id: poll
    tool: tick
    with: {{n: "${{{{ iteration }}}}"}}
    repeat: {{until: "${{{{ iteration == {n} }}}}", max_iterations: {n}}}
output: "${{{{ activities.poll.iterations }}}}"
"""


def b0(folder: Path, n: int = 2000) -> float:
    """fsync'd single-row commits per second (the machine's ceiling)."""
    conn = sqlite3.connect(folder / "b0.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    start = time.perf_counter()
    for i in range(n):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t (v) VALUES (?)", (f"row {i}",))
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - start
    conn.close()
    return n / elapsed


def run(folder: Path, iterations: int) -> dict[str, Any]:
    registry = ActivityRegistry()
    calls: list[float] = []
    marks: dict[int, dict[str, int]] = {}
    store = SQLiteStore(folder / "repeat.db")
    engine = Engine(store, clock=SystemClock(), activities=registry)
    early = min(100, iterations)

    def tick(n: int) -> int:
        calls.append(time.perf_counter())
        if n in (early, iterations):  # the state as the previous iteration left it
            record = store.load("loop", "default")
            assert record is not None
            marks[n] = {"checkpoint_bytes": len(dumps(record.checkpoint)), "events": record.seq}
        return n

    registry.register("tick", tick)

    async def main() -> None:
        worker = Worker(engine, reserved_slots=0)
        try:
            await worker.start(LOOP.format(n=iterations), execution_id="loop")
            await worker.run_until_idle()
        finally:
            await worker.close()

    commits0 = store.commits
    start = time.perf_counter()
    asyncio.run(main())
    elapsed = time.perf_counter() - start
    view = engine.query("loop")
    assert view.status == "completed" and view.output == iterations, view.status
    final = store.load("loop", "default")
    assert final is not None
    gaps = [b - a for a, b in itertools.pairwise(calls)]  # gaps[i]: iteration i+1 -> i+2
    window = max(1, min(50, iterations // 4))

    def around(n: int) -> float:
        """The median gap over the 2 * window iterations around `n` (ending at the last)."""
        end = min(len(gaps), max(n + window - 1, 2 * window))
        return statistics.median(gaps[max(0, end - 2 * window) : end])

    at_early, at_late = around(early), around(iterations)
    profile = {
        str(n): around(n) * 1000
        for n in sorted({early, *(iterations * k // 10 for k in range(1, 11))})
        if n >= early
    }
    out = {
        "iterations": iterations,
        "seconds": elapsed,
        "commits_per_iteration": (store.commits - commits0) / iterations,
        "checkpoint_bytes_at_100": marks[early]["checkpoint_bytes"],
        "checkpoint_bytes_at_end": marks[iterations]["checkpoint_bytes"],
        "checkpoint_bytes_final": len(dumps(final.checkpoint)),
        "events_per_iteration": (marks[iterations]["events"] - marks[early]["events"])
        / (iterations - early),
        "ms_per_iteration_at_100": at_early * 1000,
        "ms_per_iteration_at_end": at_late * 1000,
        "late_over_early": at_late / at_early,
        "ms_per_iteration_profile": profile,
        "mean_ms_per_iteration": elapsed / iterations * 1000,
    }
    engine.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=10_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        ceiling = b0(folder)
        results: dict[str, Any] = {"b0_commits_per_s": ceiling, **run(folder, args.iterations)}
    commit_ms = 1000 / ceiling
    results["at_100_in_b0_commits"] = results["ms_per_iteration_at_100"] / commit_ms
    results["at_end_in_b0_commits"] = results["ms_per_iteration_at_end"] / commit_ms
    if args.json:
        print(json.dumps(results, indent=2))
        return
    n = results["iterations"]
    print(f"B0  SQLite fsync'd single-row commits/s: {ceiling:,.0f} ({commit_ms:.2f} ms each)")
    print(
        f"checkpoint bytes: {results['checkpoint_bytes_at_100']} at iteration 100, "
        f"{results['checkpoint_bytes_at_end']} at {n:,} "
        f"(+{results['checkpoint_bytes_at_end'] - results['checkpoint_bytes_at_100']})"
    )
    print(
        f"events per iteration {results['events_per_iteration']:.2f}; durable commits per "
        f"iteration {results['commits_per_iteration']:.2f}"
    )
    print(
        f"ms per iteration: {results['ms_per_iteration_at_100']:.2f} at 100 "
        f"({results['at_100_in_b0_commits']:.2f} B0 commits), "
        f"{results['ms_per_iteration_at_end']:.2f} at {n:,} "
        f"({results['at_end_in_b0_commits']:.2f} B0 commits): "
        f"ratio {results['late_over_early']:.2f}"
    )
    print(
        "median ms per iteration around iteration "
        + ", ".join(f"{k}: {v:.2f}" for k, v in results["ms_per_iteration_profile"].items())
        + f" (mean over the run {results['mean_ms_per_iteration']:.2f})"
    )
    print(json.dumps(results))


if __name__ == "__main__":
    main()
