"""Engine benchmarks on the embedded SQLite store (WAL, synchronous=FULL).

B0  the machine's ceiling: fsync'd single-row commits/s.
B1  500 workflows of 3 no-op tool steps, sequential and 8 in flight: workflows/s, steps/s,
    and each as a share of B0 (and of B0/5, the target's yardstick).
B3  per-step overhead (T(3 tool steps) - T(baseline)) / 3, and durable commits per step.
B4  event append p50 at history length 1 vs 10,000 (ratio).
B3w per-step time in chains of 3, 30, 100 and 300 tool steps: how the cost of a step grows
    with the size of the workflow (decide scans the DAG; the checkpoint grows with it).

Figures are measured in one run and reported as ratios because this machine is noisy.
Usage: python bench/bench_engine.py [--workflows 500] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from wovyr.activities.base import ActivityRegistry
from wovyr.clock import SystemClock
from wovyr.engine.core.state import fold, state_from_json
from wovyr.engine.engine import Engine
from wovyr.engine.steps import make_step
from wovyr.events import Event
from wovyr.store.sqlite import SQLiteStore
from wovyr.worker import Worker

THREE = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: bench3}
activities:
  - {id: a, tool: noop}
  - {id: b, needs: [a], tool: noop}
  - {id: c, needs: [b], tool: noop}
"""
BASELINE = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: bench0}
activities:
  - {id: a, set: {x: 1}}
"""


def b0(folder: Path, n: int = 2000) -> float:
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


def make_engine(folder: Path, name: str) -> Engine:
    registry = ActivityRegistry()

    async def noop() -> None:
        return None

    registry.register("noop", noop)
    return Engine(SQLiteStore(folder / f"{name}.db"), clock=SystemClock(), activities=registry)


async def run_workflows(engine: Engine, source: str, count: int, in_flight: int) -> float:
    worker = Worker(engine, concurrency=max(64, in_flight))
    engine.register(source)
    start = time.perf_counter()
    try:
        remaining = count

        async def one() -> None:
            record = await worker.start(source)
            task = worker._tasks.get(record.key)
            if task is not None:
                await task

        while remaining > 0:
            batch = min(in_flight, remaining)
            await asyncio.gather(*(one() for _ in range(batch)))
            remaining -= batch
    finally:
        elapsed = time.perf_counter() - start
        await worker.close()
    return elapsed


def b1_b3(folder: Path, count: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for label, in_flight in (("sequential", 1), ("in_flight_8", 8)):
        engine = make_engine(folder, f"b1_{label}")
        store = engine.store
        assert isinstance(store, SQLiteStore)
        commits0 = store.commits
        elapsed = asyncio.run(run_workflows(engine, THREE, count, in_flight))
        done = engine.list(status="completed", limit=1000).items
        assert len(done) == min(count, 1000), "not every workflow completed"
        out[label] = {
            "workflows_per_s": count / elapsed,
            "steps_per_s": 3 * count / elapsed,
            "commits_per_workflow": (store.commits - commits0) / count,
        }
        engine.close()
    engine = make_engine(folder, "b3")
    t0 = asyncio.run(run_workflows(engine, BASELINE, count, 1)) / count
    store = engine.store
    assert isinstance(store, SQLiteStore)
    c0 = store.commits
    t3 = asyncio.run(run_workflows(engine, THREE, count, 1)) / count
    commits3 = (store.commits - c0) / count
    engine.close()
    out["b3"] = {
        "per_step_overhead_ms": (t3 - t0) / 3 * 1000,
        "baseline_ms": t0 * 1000,
        "three_step_ms": t3 * 1000,
        "durable_commits_per_workflow": commits3,
        "durable_commits_per_step_excluding_start": (commits3 - 1) / 3,
    }
    return out


def chain(length: int) -> str:
    steps = ["  - {id: a0, tool: noop}"] + [
        f"  - {{id: a{i}, needs: [a{i - 1}], tool: noop}}" for i in range(1, length)
    ]
    return (
        f"apiVersion: wovyr/v1\nkind: Workflow\nmetadata: {{name: chain{length}}}\n"
        "activities:\n" + "\n".join(steps) + "\n"
    )


def b3_wide(folder: Path, steps: int = 600) -> dict[str, float]:
    """Milliseconds per step, sequentially, for chains of growing length."""
    out: dict[str, float] = {}
    for length in (3, 30, 100, 300):
        engine = make_engine(folder, f"b3w_{length}")
        count = max(2, steps // length)
        elapsed = asyncio.run(run_workflows(engine, chain(length), count, 1))
        engine.close()
        out[str(length)] = elapsed / (count * length) * 1000
    return out


def b4(folder: Path, history: int = 10_000, sample: int = 200) -> dict[str, float]:
    """Append one event per transaction through the store, as the engine does."""
    engine = make_engine(folder, "b4")
    record = engine.start(BASELINE)
    store = engine.store
    state = state_from_json(store.load(record.id, "default").checkpoint or {})  # type: ignore[union-attr]

    def append() -> float:
        nonlocal state
        now = engine.clock.now()
        events = [Event("SignalReceived", now, {"name": "bench", "payload": None})]
        after = fold(events, state)
        after = type(after)(**{**after.__dict__, "signals": {}})  # keep the checkpoint flat
        step = make_step(record.id, state, after, events, now, tenant=record.tenant, ready=False)
        start = time.perf_counter()
        assert store.commit([step])[0].value == "ok"
        elapsed = time.perf_counter() - start
        state = after
        return elapsed

    early = [append() for _ in range(sample)]
    for _ in range(history - 2 * sample):
        append()
    late = [append() for _ in range(sample)]
    engine.close()
    p50_early, p50_late = statistics.median(early), statistics.median(late)
    return {
        "p50_at_1_ms": p50_early * 1000,
        "p50_at_10000_ms": p50_late * 1000,
        "ratio": p50_late / p50_early,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workflows", type=int, default=500)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        ceiling = b0(folder)
        results: dict[str, Any] = {"b0_commits_per_s": ceiling}
        results.update(b1_b3(folder, args.workflows))
        results["b3_wide_ms_per_step"] = b3_wide(folder)
        results["b4"] = b4(folder)
    for label in ("sequential", "in_flight_8"):
        r = results[label]
        r["share_of_b0"] = r["workflows_per_s"] / ceiling
        r["share_of_b0_over_5"] = r["workflows_per_s"] / (ceiling / 5)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"B0  SQLite fsync'd single-row commits/s: {ceiling:,.0f}")
    for label in ("sequential", "in_flight_8"):
        r = results[label]
        print(
            f"B1  {label:12s} {r['workflows_per_s']:8.1f} wf/s {r['steps_per_s']:8.1f} steps/s"
            f"  = {r['share_of_b0_over_5']:.0%} of B0/5"
            f"  ({r['commits_per_workflow']:.2f} commits/wf)"
        )
    b3r = results["b3"]
    print(
        f"B3  per-step overhead {b3r['per_step_overhead_ms']:.2f} ms; durable commits per step "
        f"{b3r['durable_commits_per_step_excluding_start']:.2f} (+1 to start)"
    )
    wide = results["b3_wide_ms_per_step"]
    print(
        "B3w ms per step in a chain of "
        + ", ".join(f"{n}: {ms:.2f}" for n, ms in wide.items())
        + f" steps ({wide['300'] / wide['3']:.1f}x from 3 to 300)"
    )
    b4r = results["b4"]
    print(
        f"B4  append p50 {b4r['p50_at_1_ms']:.3f} ms at 1, {b4r['p50_at_10000_ms']:.3f} ms at "
        f"10,000: ratio {b4r['ratio']:.2f}"
    )
    print(json.dumps(results))


if __name__ == "__main__":
    main()
