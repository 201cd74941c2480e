"""The per-step cost of a workflow written as a Python function beside the same workflow in
YAML, on the embedded SQLite store (WAL, synchronous=FULL), measured in one run.

Each round starts `--workflows` executions of a chain of S no-op `tool` steps (each step
reads the previous one's output) and drives them with one worker until all completed: once
from the YAML document, once from the `@wovyr.workflow` function that asks for the same
steps. Reported per S (3, 10 and 50 by default): wall and CPU milliseconds per step of
each, and the code/YAML ratios (the yardstick is the YAML run beside it: this machine's
speed varies 3x from day to day, the ratios do not).

A code workflow is replayed from the top before each decision (docs/adr/0002), so its CPU
per step grows with the steps before it: the ratio at S=50 against S=3 shows by how much.

Usage: python bench/bench_code.py [--workflows 100] [--steps 3,10,50] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import wovyr
from wovyr.activities.base import ActivityRegistry
from wovyr.clock import SystemClock
from wovyr.code.workflow import CodeWorkflow
from wovyr.engine.engine import Engine
from wovyr.store.sqlite import SQLiteStore
from wovyr.worker import Worker


def yaml_chain(steps: int) -> str:
    lines = [
        "apiVersion: wovyr/v1",
        "kind: Workflow",
        f"metadata: {{name: bench-yaml-{steps}}}",
        "activities:",
        "  - {id: s1, tool: noop, with: {n: 0}}",
    ]
    for i in range(2, steps + 1):
        lines.append(
            f"  - {{id: s{i}, tool: noop, needs: [s{i - 1}],"
            f' with: {{n: "${{{{ activities.s{i - 1}.output }}}}"}}}}'
        )
    lines.append(f'output: "${{{{ activities.s{steps}.output }}}}"')
    return "\n".join(lines) + "\n"


def code_chain(steps: int) -> CodeWorkflow:
    @wovyr.workflow(name=f"bench-code-{steps}")
    async def chain(ctx: wovyr.Context) -> int:
        n = 0
        for _ in range(steps):
            n = await ctx.run("noop", n=n)
        return n

    return chain


def drive(folder: Path, definition: Any, workflows: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds) to start and finish `workflows` executions."""
    registry = ActivityRegistry()
    registry.register("noop", lambda n: n + 1)
    engine = Engine(SQLiteStore(folder / "bench.db"), clock=SystemClock(), activities=registry)

    async def main() -> None:
        worker = Worker(engine)
        try:
            for i in range(workflows):
                await worker.start(definition, {}, execution_id=f"w{i}")
            await worker.run_until_idle()
        finally:
            await worker.close()

    wall, cpu = time.perf_counter(), time.process_time()
    asyncio.run(main())
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    done = sum(engine.query(f"w{i}").status == "completed" for i in range(workflows))
    engine.close()
    assert done == workflows, f"{done} of {workflows} completed"
    return wall, cpu


def run(workflows: int, sizes: list[int]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:  # imports and caches warmed for both
        (Path(tmp) / "y").mkdir()
        (Path(tmp) / "c").mkdir()
        drive(Path(tmp) / "y", yaml_chain(2), 5)
        drive(Path(tmp) / "c", code_chain(2).definition(), 5)
    rows = []
    for steps in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            base = Path(tmp)
            (base / "yaml").mkdir()
            (base / "code").mkdir()
            y_wall, y_cpu = drive(base / "yaml", yaml_chain(steps), workflows)
            c_wall, c_cpu = drive(base / "code", code_chain(steps).definition(), workflows)
        total = workflows * steps
        rows.append(
            {
                "steps": steps,
                "yaml_ms_per_step": 1000 * y_wall / total,
                "code_ms_per_step": 1000 * c_wall / total,
                "yaml_cpu_ms_per_step": 1000 * y_cpu / total,
                "code_cpu_ms_per_step": 1000 * c_cpu / total,
                "wall_ratio": c_wall / y_wall,
                "cpu_ratio": c_cpu / y_cpu,
            }
        )
    first, last = rows[0], rows[-1]
    growth = last["code_cpu_ms_per_step"] / first["code_cpu_ms_per_step"]
    return {"workflows": workflows, "rows": rows, "code_cpu_growth": growth}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workflows", type=int, default=100)
    parser.add_argument("--steps", default="3,10,50")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.workflows, [int(s) for s in args.steps.split(",")])
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{result['workflows']} workflows per size, one worker, SQLite WAL + FULL")
    print("steps  yaml ms/step  code ms/step  wall code/yaml  cpu code/yaml")
    for r in result["rows"]:
        print(
            f"{r['steps']:>5}  {r['yaml_ms_per_step']:>12.2f}  {r['code_ms_per_step']:>12.2f}"
            f"  {r['wall_ratio']:>14.2f}  {r['cpu_ratio']:>13.2f}"
        )
    print(f"code CPU per step, largest size / smallest: {result['code_cpu_growth']:.2f}x")


if __name__ == "__main__":
    main()
