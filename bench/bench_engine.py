"""Engine benchmarks on the embedded SQLite store (WAL, synchronous=FULL).

B0  the machine's ceiling: fsync'd single-row commits/s.
B1  workflows of 3 no-op tool steps, sequential and 8 in flight: workflows/s, steps/s, each
    as a share of the yardstick (`bench/yardstick.py`: a minimal Python loop issuing the
    same transactions, one execution per transaction and 8 per transaction), measured
    alternately with it in the same run. Beside the rates, what a workflow cost this
    process, the engine's and the yardstick's: CPU (user + kernel), of it the kernel's, and
    voluntary context switches. These count the waits for the disk's fsyncs and the
    hand-offs between the event loop and the threads that write, each of which costs kernel
    time and a hand-over of the GIL: at 8 in flight, 13.4 per workflow for the engine and
    2.0 for the yardstick's loop, which hands nothing off (2026-12-06, this disk).
    Beside them the asyncio floor (`asyncio_floor` in bench/yardstick.py): the yardstick's
    work shaped as an asyncio engine (a task per execution and per attempt, writes grouped
    by one writing thread) with nothing of an engine inside. What the engine spends beyond
    the floor is the engine's own work, not the shape asyncio and group commit impose.
B3  per-step overhead (T(3 tool steps) - T(baseline)) / 3, and durable commits per step.
B4  event append p50 at history length 1 vs 10,000 (ratio).
B3w per-step time in chains of 3, 30, 100 and 300 tool steps, beside the yardstick's for the
    same chain: whether the cost of a step grows with the size of the workflow (target:
    300 steps <= 1.3x 3 steps).

Figures are measured in one run and reported as ratios because this machine is noisy.
With --postgres URL, B1, B3 and B3w run on PostgreSQL (fresh schemas), beside the
yardstick on PostgreSQL.
Usage: python bench/bench_engine.py [--workflows 500] [--short] [--postgres URL] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from yardstick import asyncio_floor, minimal_loop, postgres_schema  # bench/ is on sys.path

from wovyr.activities.base import ActivityRegistry
from wovyr.clock import SystemClock
from wovyr.engine.core.state import fold, replace, state_from_json
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


class Backend:
    """Where the engine and the yardstick run: fresh SQLite files in `folder`, or fresh
    schemas on the PostgreSQL server at `postgres`."""

    def __init__(self, folder: Path, postgres: str | None = None) -> None:
        self.folder = folder
        self.postgres = postgres

    @contextmanager
    def engine(self, name: str) -> Iterator[Engine]:
        if self.postgres is None:
            engine = make_engine(self.folder, name)
            try:
                yield engine
            finally:
                engine.close()
            return
        from wovyr.store.postgres import PostgresStore

        with postgres_schema(self.postgres) as url:
            registry = ActivityRegistry()

            async def noop() -> None:
                return None

            registry.register("noop", noop)
            store = PostgresStore(url, max_size=4)
            engine = Engine(store, clock=SystemClock(), activities=registry)
            try:
                yield engine
            finally:
                engine.close()

    def yardstick(
        self,
        name: str,
        workflows: int,
        steps: int,
        k: int,
        loop: Callable[..., float] = minimal_loop,
    ) -> float:
        """Seconds of the yardstick's `loop` (`minimal_loop`, or `asyncio_floor`)."""
        if self.postgres is None:
            return loop(self.folder / f"{name}.db", workflows, steps, k)
        with postgres_schema(self.postgres) as url:
            return loop(url, workflows, steps, k)


def _commits(engine: Engine) -> int:
    return int(getattr(engine.store, "commits", 0))


async def run_workflows(engine: Engine, source: str, count: int, in_flight: int) -> float:
    worker = Worker(engine, concurrency=max(64, in_flight), reserved_slots=0)
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


def _alternated(runs: Sequence[Callable[[int], float]], rounds: int) -> list[float]:
    """Median seconds of each of `runs` (the engine's and its yardsticks'), run in turn
    `rounds` times each (so that a slow spell of the machine falls on all)."""
    seconds: list[list[float]] = [[] for _ in runs]
    for i in range(rounds):
        for run, taken in zip(runs, seconds, strict=True):
            taken.append(run(i))
    return [statistics.median(taken) for taken in seconds]


class _Cost:
    """What this process spent between `start` and `stop`: CPU (user and kernel) and
    voluntary context switches (every thread's: Linux counts them for the process)."""

    def __init__(self) -> None:
        self.cpu: list[float] = []
        self.kernel: list[float] = []
        self.switches: list[float] = []

    @contextmanager
    def measured(self, per: int) -> Iterator[None]:
        before = resource.getrusage(resource.RUSAGE_SELF)
        yield
        after = resource.getrusage(resource.RUSAGE_SELF)
        kernel = after.ru_stime - before.ru_stime
        self.cpu.append((after.ru_utime - before.ru_utime + kernel) / per)
        self.kernel.append(kernel / per)
        self.switches.append((after.ru_nvcsw - before.ru_nvcsw) / per)

    def figures(self, prefix: str = "") -> dict[str, float]:
        return {
            f"{prefix}cpu_ms_per_workflow": statistics.median(self.cpu) * 1000,
            f"{prefix}kernel_ms_per_workflow": statistics.median(self.kernel) * 1000,
            f"{prefix}switches_per_workflow": statistics.median(self.switches),
        }


def b1_b3(backend: Backend, count: int, rounds: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for label, in_flight in (("sequential", 1), ("in_flight_8", 8)):
        commits: list[float] = []
        ours, theirs, floors = _Cost(), _Cost(), _Cost()

        def engine_run(
            i: int,
            label: str = label,
            in_flight: int = in_flight,
            commits: list[float] = commits,
            cost: _Cost = ours,
        ) -> float:
            with backend.engine(f"b1_{label}_{i}") as engine:
                engine.register(THREE)
                commits0 = _commits(engine)
                with cost.measured(count):
                    elapsed = asyncio.run(run_workflows(engine, THREE, count, in_flight))
                done = engine.list(status="completed", limit=1000).items
                assert len(done) == min(count, 1000), "not every workflow completed"
                commits.append((_commits(engine) - commits0) / count)
            return elapsed

        def loop_run(
            loop: Callable[..., float], cost: _Cost, label: str = label, in_flight: int = in_flight
        ) -> Callable[[int], float]:
            """A run of the yardstick's `loop` (`minimal_loop` or `asyncio_floor`)."""

            def run(i: int) -> float:
                with cost.measured(count):
                    name = f"{loop.__name__}_{label}_{i}"
                    return backend.yardstick(name, count, 3, in_flight, loop)

            return run

        elapsed, yard, floor = _alternated(
            (engine_run, loop_run(minimal_loop, theirs), loop_run(asyncio_floor, floors)), rounds
        )
        out[label] = {
            "workflows_per_s": count / elapsed,
            "steps_per_s": 3 * count / elapsed,
            "commits_per_workflow": statistics.median(commits),
            "yardstick_workflows_per_s": count / yard,
            "share_of_yardstick": yard / elapsed,
            **ours.figures(),
            **theirs.figures("yardstick_"),
            # the same work shaped as an asyncio engine, nothing of an engine inside
            "floor_workflows_per_s": count / floor,
            "floor_share_of_yardstick": yard / floor,
            **floors.figures("floor_"),
        }
    with backend.engine("b3") as engine:
        t0 = asyncio.run(run_workflows(engine, BASELINE, count, 1)) / count
        engine.register(THREE)
        c0 = _commits(engine)
        t3 = asyncio.run(run_workflows(engine, THREE, count, 1)) / count
        commits3 = (_commits(engine) - c0) / count
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


def b3_wide(
    backend: Backend, steps: int, rounds: int, lengths: tuple[int, ...] = (3, 30, 100, 300)
) -> dict[str, dict[str, float]]:
    """Milliseconds per step, sequentially, for chains of growing length (and the
    yardstick's for the same chain)."""
    out: dict[str, dict[str, float]] = {}
    for length in lengths:
        count = max(2, steps // length)

        def engine_run(i: int, length: int = length, count: int = count) -> float:
            with backend.engine(f"b3w_{length}_{i}") as engine:
                return asyncio.run(run_workflows(engine, chain(length), count, 1))

        def yard_run(i: int, length: int = length, count: int = count) -> float:
            return backend.yardstick(f"y3w_{length}_{i}", count, length, 1)

        elapsed, yard = _alternated((engine_run, yard_run), rounds)
        out[str(length)] = {
            "ms_per_step": elapsed / (count * length) * 1000,
            "yardstick_ms_per_step": yard / (count * length) * 1000,
            "share_of_yardstick": yard / elapsed,
        }
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
        after = replace(after, signals={})  # keep the checkpoint flat
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


def run(
    workflows: int, rounds: int, wide_steps: int, history: int, postgres: str | None = None
) -> dict[str, Any]:
    """Every figure of this benchmark (the JSON that `main` prints): on SQLite, or with
    `postgres` (a server URL) B1, B3 and B3w on PostgreSQL (B0 and B4 are SQLite's)."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        backend = Backend(folder, postgres)
        results: dict[str, Any] = {"store": "postgres" if postgres else "sqlite"}
        if postgres is None:
            results["b0_commits_per_s"] = b0(folder)
        results.update(b1_b3(backend, workflows, rounds))
        wide = b3_wide(backend, wide_steps, rounds)
        results["b3_wide"] = wide
        results["b3_wide_300_over_3"] = wide["300"]["ms_per_step"] / wide["3"]["ms_per_step"]
        results["b3_wide_yardstick_300_over_3"] = (
            wide["300"]["yardstick_ms_per_step"] / wide["3"]["yardstick_ms_per_step"]
        )
        if postgres is None:
            results["b4"] = b4(folder, history=history, sample=min(200, history // 10))
            for label in ("sequential", "in_flight_8"):
                r = results[label]
                r["share_of_b0"] = r["workflows_per_s"] / results["b0_commits_per_s"]
    return results


def print_table(results: dict[str, Any]) -> None:
    print(f"store: {results['store']}")
    if "b0_commits_per_s" in results:
        print(f"B0  SQLite fsync'd single-row commits/s: {results['b0_commits_per_s']:,.0f}")
    for label in ("sequential", "in_flight_8"):
        r = results[label]
        print(
            f"B1  {label:12s} {r['workflows_per_s']:8.1f} wf/s {r['steps_per_s']:8.1f} steps/s"
            f"  = {r['share_of_yardstick']:.0%} of the yardstick"
            f" ({r['yardstick_workflows_per_s']:.1f} wf/s)"
            f"  ({r['commits_per_workflow']:.2f} commits/wf)"
        )
        print(
            f"    CPU {r['cpu_ms_per_workflow']:.2f} ms/wf"
            f" (kernel {r['kernel_ms_per_workflow']:.2f}),"
            f" {r['switches_per_workflow']:.1f} context switches/wf; the yardstick's"
            f" {r['yardstick_cpu_ms_per_workflow']:.2f} ms"
            f" (kernel {r['yardstick_kernel_ms_per_workflow']:.2f}),"
            f" {r['yardstick_switches_per_workflow']:.1f}"
        )
        print(
            f"    the asyncio floor: {r['floor_workflows_per_s']:.1f} wf/s"
            f" = {r['floor_share_of_yardstick']:.0%} of the yardstick;"
            f" CPU {r['floor_cpu_ms_per_workflow']:.2f} ms/wf,"
            f" {r['floor_switches_per_workflow']:.1f} context switches/wf"
        )
    b3r = results["b3"]
    print(
        f"B3  per-step overhead {b3r['per_step_overhead_ms']:.2f} ms; durable commits per step "
        f"{b3r['durable_commits_per_step_excluding_start']:.2f} (+1 to start)"
    )
    wide = results["b3_wide"]
    print(
        "B3w ms per step in a chain of "
        + ", ".join(
            f"{n}: {w['ms_per_step']:.2f} ({w['share_of_yardstick']:.0%})" for n, w in wide.items()
        )
        + f" steps: {results['b3_wide_300_over_3']:.2f}x from 3 to 300"
        + f" (yardstick {results['b3_wide_yardstick_300_over_3']:.2f}x)"
    )
    b4r = results.get("b4")
    if b4r is None:
        return
    print(
        f"B4  append p50 {b4r['p50_at_1_ms']:.3f} ms at 1, {b4r['p50_at_10000_ms']:.3f} ms at "
        f"the end: ratio {b4r['ratio']:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workflows", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3, help="alternate runs per figure")
    parser.add_argument("--short", action="store_true", help="fewer runs (for bench/report.py)")
    parser.add_argument("--postgres", default=None, help="a PostgreSQL URL: run there")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.short:
        results = run(min(args.workflows, 150), 2, 300, 2_000, args.postgres)
    else:
        results = run(args.workflows, args.rounds, 600, 10_000, args.postgres)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print_table(results)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
