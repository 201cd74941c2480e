"""Large executions on the embedded store: a long agent-like chain and a large map.

S1  an agent-like loop of N turns (5,000; 1,000 in short mode): one tool activity under
    `repeat` (an activity cannot read its own output, so each turn gets its number), each
    iteration its own durable step with its own attempt and result: ms per turn over the
    first and the last tenth (flat: ratio near 1), and peak RSS.
S1c a chain of 500 tool activities (a workflow's cap), each reading the previous one's
    output: the same figures per step.
S2  a for_each over M items (10,000; 2,000 in short mode), 64 at a time: ms per item and
    peak RSS.

Each runs in its own process (so its peak RSS is its own), beside the RSS of a process that
imported the same modules and started nothing (the floor).
Usage: python bench/bench_scale.py [--short] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from wovyr.activities.base import ActivityRegistry
from wovyr.clock import SystemClock
from wovyr.engine.engine import Engine
from wovyr.store.sqlite import SQLiteStore
from wovyr.worker import Worker

__all__ = ["run", "table_lines"]


def agent_loop(turns: int) -> str:
    return (
        f"apiVersion: wovyr/v1\nkind: Workflow\nmetadata: {{name: agent{turns}}}\n"
        "activities:\n"
        "  - id: turn\n"
        "    tool: turn\n"
        '    with: {turn: "${{ iteration }}"}\n'
        f'    repeat: {{until: "${{{{ iteration == {turns} }}}}", max_iterations: {turns}}}\n'
    )


def agent_chain(length: int) -> str:
    steps = ["  - {id: t0, tool: turn, with: {turn: 0}}"] + [
        f"  - {{id: t{i}, needs: [t{i - 1}], tool: turn,"
        f' with: {{turn: {i}, previous: "${{{{ activities.t{i - 1}.output }}}}"}}}}'
        for i in range(1, length)
    ]
    return (
        f"apiVersion: wovyr/v1\nkind: Workflow\nmetadata: {{name: agent{length}}}\n"
        "activities:\n" + "\n".join(steps) + "\n"
    )


def big_map(items: int) -> str:
    return (
        f"apiVersion: wovyr/v1\nkind: Workflow\nmetadata: {{name: map{items}}}\n"
        "inputs:\n  items: {type: array, required: true}\n"
        "activities:\n"
        '  - {id: each, for_each: "${{ inputs.items }}", max_concurrency: 64, tool: turn,'
        ' with: {turn: "${{ item }}"}}\n'
    )


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


async def _run_one(engine: Engine, source: str, inputs: dict[str, Any]) -> None:
    """Run one execution to its end (completed)."""
    worker = Worker(engine, concurrency=64, reserved_slots=0)
    try:
        record = await worker.start(source, inputs)
        task = worker._tasks.get(record.key)
        if task is not None:
            await task
    finally:
        await worker.close()
    final = engine.store.load(record.id, record.tenant)
    assert final is not None and final.status == "completed", final and final.status


def scenario(kind: str, size: int) -> dict[str, Any]:
    """One scenario in this process (called in a child process by `run`)."""
    times: list[float] = []
    registry = ActivityRegistry()

    async def turn(turn: Any, previous: Any = None) -> dict[str, Any]:
        times.append(time.perf_counter())
        return {"turn": turn, "text": "ok"}

    registry.register("turn", turn)
    with tempfile.TemporaryDirectory() as tmp:
        engine = Engine(SQLiteStore(Path(tmp) / "s.db"), clock=SystemClock(), activities=registry)
        if kind == "none":
            engine.close()
            return {"peak_rss_mb": _peak_rss_mb()}
        source = {"loop": agent_loop, "chain": agent_chain, "map": big_map}[kind](size)
        inputs = {"items": list(range(size))} if kind == "map" else {}
        engine.register(source)
        began = time.perf_counter()
        asyncio.run(_run_one(engine, source, inputs))
        elapsed = time.perf_counter() - began
        engine.close()
    out: dict[str, Any] = {
        "size": size,
        "seconds": elapsed,
        "ms_per_step": elapsed / size * 1000,
        "peak_rss_mb": _peak_rss_mb(),
    }
    if kind in ("loop", "chain"):
        tenth = max(2, size // 10)
        early = (times[tenth] - times[0]) / tenth
        late = (times[-1] - times[-1 - tenth]) / tenth
        out["ms_per_step_first_tenth"] = early * 1000
        out["ms_per_step_last_tenth"] = late * 1000
        out["last_over_first"] = late / early
    return out


def _in_child(kind: str, size: int) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, __file__, "--scenario", kind, "--size", str(size)],
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def run(short: bool = False) -> dict[str, Any]:
    turns, items = (1_000, 2_000) if short else (5_000, 10_000)
    return {
        "floor": _in_child("none", 0),
        "loop": _in_child("loop", turns),
        "chain": _in_child("chain", 500),
        "map": _in_child("map", items),
    }


def table_lines(results: dict[str, Any]) -> list[str]:
    loop, c, m = results["loop"], results["chain"], results["map"]
    floor = results["floor"]["peak_rss_mb"]

    def flat(r: dict[str, Any]) -> str:
        return (
            f"{r['ms_per_step']:.2f} ms/step; last tenth / first tenth"
            f" **{r['last_over_first']:.2f}x** ({r['ms_per_step_first_tenth']:.2f} ->"
            f" {r['ms_per_step_last_tenth']:.2f} ms); peak RSS {r['peak_rss_mb']:.0f} MB"
        )

    return [
        "| large executions (SQLite, one process each) | measured |",
        "|---|---|",
        f"| S1 agent-like loop of {loop['size']:,} turns (`repeat`, each turn a durable step)"
        f" | {flat(loop)} |",
        f"| S1c chain of {c['size']} tool activities (each reads the previous output) |"
        f" {flat(c)} |",
        f"| S2 for_each over {m['size']:,} items, 64 at a time | {m['ms_per_step']:.2f} ms/item;"
        f" peak RSS {m['peak_rss_mb']:.0f} MB |",
        f"| RSS floor (same imports, nothing run) | {floor:.0f} MB |",
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--short", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--scenario", choices=("none", "loop", "chain", "map"), help=argparse.SUPPRESS
    )
    parser.add_argument("--size", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.scenario:
        print(json.dumps(scenario(args.scenario, args.size)))
        return
    results = run(short=args.short)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print("\n".join(table_lines(results)))
    print(json.dumps(results))


if __name__ == "__main__":
    main()
