"""One tenant's heavy step beside another tenant's short ones, on one worker (a `memory://`
store: SQLite without fsync, so that the engine's own work is what is measured).

Tenant A starts `for_each` activities whose items each evaluate an expression that reads a
large input of many values (the shape of a start that once kept a worker busy for a minute:
every item measured the whole input again before evaluating). Tenant B runs a chain of
short tool steps on the same worker meanwhile. Reported, each beside a yardstick measured in
the same run (this machine's speed varies 3x from day to day; the ratios do not):

- A's step: its seconds against the CEL runtime evaluating the same expressions on the same
  data in a plain loop (the least the work can cost): their ratio is the engine's overhead;
- the worker's longest stall while A's step runs (the longest gap a coroutine that only
  yields observes), against the same coroutine's longest gap with the worker idle, and in
  evaluations of A's expression (the plain loop's time for one);
- B's median step while A's step runs, against B's median step alone, and in evaluations;
- the refused shape (`inputs.xs[index]` from every item of a 300 KB list): seconds until
  the map fails with `ForEachTooExpensive` (`--refused-items 0` skips it).

Usage: python bench/bench_bounded.py [--items 1400] [--maps 2] [--refused-items 10000] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import statistics
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

from bench_engine import b0  # bench/ is on sys.path: this folder

from wovyr.activities.base import ActivityRegistry
from wovyr.definition.expr import compile_expression
from wovyr.engine.engine import Engine
from wovyr.store import open_store
from wovyr.worker import Worker

HEAVY = "item * {k} + size(inputs.xs)"  # k: each map its own (no value shared by two)
CHAIN_STEPS = 20


def big(maps: int) -> str:
    head = textwrap.dedent("""\
        apiVersion: wovyr/v1
        kind: Workflow
        metadata: {name: big}
        inputs:
          xs: {type: array}
        activities:
        """)
    return head + "".join(
        f'  - id: fan{m}\n    for_each: "${{{{ inputs.xs }}}}"\n'
        f'    set: {{v: "${{{{ {HEAVY.format(k=m + 1)} }}}}"}}\n'
        for m in range(maps)
    )


REFUSED = textwrap.dedent("""\
    apiVersion: wovyr/v1
    kind: Workflow
    metadata: {name: refused}
    inputs:
      xs: {type: array}
    activities:
      - id: fan
        for_each: "${{ inputs.xs }}"
        set: {v: "${{ inputs.xs[index] }}", n: "${{ size(inputs.xs) }}"}
    """)

CHAIN = textwrap.dedent("""\
    apiVersion: wovyr/v1
    kind: Workflow
    metadata: {name: chain}
    activities:
      - {id: s0, tool: mark}
    """) + "".join(
    f"  - {{id: s{i}, needs: [s{i - 1}], tool: mark}}\n" for i in range(1, CHAIN_STEPS)
)


def raw_cel(items: int, maps: int) -> float:
    """Seconds the CEL runtime takes for the same evaluations in a plain loop."""
    programs = [compile_expression(HEAVY.format(k=m + 1)).program for m in range(maps)]
    inputs = {"xs": list(range(items))}
    start = time.perf_counter()
    for program in programs:
        for i in range(items):
            program.eval(data={"inputs": inputs, "item": i}).plain_value()
    return time.perf_counter() - start


class Stalls:
    """A coroutine that only yields: the longest gap between its turns is the longest the
    worker's event loop was held by anything else."""

    def __init__(self) -> None:
        self.gaps: list[float] = []
        self._stop = False

    async def watch(self) -> None:
        last = time.perf_counter()
        while not self._stop:
            await asyncio.sleep(0)
            now = time.perf_counter()
            self.gaps.append(now - last)
            last = now

    def stop(self) -> None:
        self._stop = True


def run(items: int, maps: int, with_a: bool) -> dict[str, Any]:
    registry = ActivityRegistry()
    marks: list[float] = []

    def mark() -> int:
        marks.append(time.perf_counter())
        return len(marks)

    registry.register("mark", mark)
    engine = Engine(open_store("memory://"), activities=registry)
    a, b = engine.for_tenant("tenant-a"), engine.for_tenant("tenant-b")
    if with_a:
        a.start(big(maps), {"xs": list(range(items))}, execution_id="big")
    b.start(CHAIN, execution_id="chain")
    stalls = Stalls()
    ended: dict[str, float] = {}

    async def main() -> None:
        watcher = asyncio.create_task(stalls.watch())
        worker = Worker(engine)
        try:
            await worker.run_until_idle()
        finally:
            ended["at"] = time.perf_counter()
            stalls.stop()
            await watcher
            await worker.close()

    start = time.perf_counter()
    asyncio.run(main())
    assert b.get("chain").status == "completed"
    if with_a:
        assert a.get("big").status == "completed", a.get("big").status
    steps = [y - x for x, y in itertools.pairwise(marks)]
    return {
        "seconds": ended["at"] - start,
        "longest_stall_ms": max(stalls.gaps) * 1000,
        "b_median_step_ms": statistics.median(steps) * 1000,
        "b_chain_ms": (marks[-1] - marks[0]) * 1000,
    }


def refused(items: int) -> float:
    engine = Engine(open_store("memory://"), activities=ActivityRegistry())
    xs = [f"value-{i:020d}" for i in range(items)]  # about 30 bytes each
    engine.start(REFUSED, {"xs": xs}, execution_id="r")

    async def main() -> None:
        worker = Worker(engine)
        try:
            await worker.run_until_idle()
        finally:
            await worker.close()

    start = time.perf_counter()
    asyncio.run(main())
    elapsed = time.perf_counter() - start
    error = engine.get("r").error or {}
    assert "ForEachTooExpensive" in json.dumps(error), error
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=1400)
    parser.add_argument("--maps", type=int, default=2)
    parser.add_argument("--refused-items", type=int, default=10_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ceiling = b0(Path(tmp))
    commit_ms = 1000 / ceiling
    evaluations = args.items * args.maps
    cel = raw_cel(args.items, args.maps)
    one = cel / evaluations * 1000  # ms of one evaluation in the plain loop
    alone = run(args.items, args.maps, with_a=False)
    beside = run(args.items, args.maps, with_a=True)
    refusal = refused(args.refused_items) if args.refused_items else None
    results = {
        "b0_commits_per_s": ceiling,
        "items": evaluations,
        "values_read_per_item": args.items,
        "raw_cel_seconds": cel,
        "a_step_seconds": beside["seconds"],
        "a_over_raw_cel": beside["seconds"] / cel,
        "idle_longest_stall_ms": alone["longest_stall_ms"],
        "longest_stall_ms": beside["longest_stall_ms"],
        "longest_stall_in_evaluations": beside["longest_stall_ms"] / one,
        "longest_stall_in_b0_commits": beside["longest_stall_ms"] / commit_ms,
        "b_median_step_alone_ms": alone["b_median_step_ms"],
        "b_median_step_beside_a_ms": beside["b_median_step_ms"],
        "b_median_step_beside_a_in_evaluations": beside["b_median_step_ms"] / one,
        "b_chain_beside_a_ms": beside["b_chain_ms"],
        "refused_items": args.refused_items,
        "refused_after_seconds": refusal,
    }
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"B0  SQLite fsync'd single-row commits/s: {ceiling:,.0f} ({commit_ms:.2f} ms each)")
    print(
        f"A: {evaluations:,} items each reading an input of {args.items:,} values: "
        f"{results['a_step_seconds']:.2f} s, {results['a_over_raw_cel']:.2f}x the CEL runtime "
        f"alone ({cel:.2f} s, {one:.2f} ms an evaluation)"
    )
    print(
        f"longest stall of the worker's loop: {results['longest_stall_ms']:.1f} ms "
        f"({results['longest_stall_in_evaluations']:.0f} evaluations, "
        f"{results['longest_stall_in_b0_commits']:.0f} B0 commits; idle "
        f"{results['idle_longest_stall_ms']:.1f} ms)"
    )
    print(
        f"B's median step: {results['b_median_step_beside_a_ms']:.1f} ms beside A "
        f"({results['b_median_step_beside_a_in_evaluations']:.0f} evaluations), "
        f"{results['b_median_step_alone_ms']:.2f} ms alone; "
        f"B's {CHAIN_STEPS} steps took {results['b_chain_beside_a_ms']:.0f} ms beside A"
    )
    if refusal is not None:
        print(
            f"the refused shape ({args.refused_items:,} items reading a list of as many by "
            f"index) fails after {refusal:.2f} s"
        )
    print(json.dumps(results))


if __name__ == "__main__":
    main()
