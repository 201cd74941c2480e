"""What an isolated `shell` step costs: one attempt of `true`, in three setups run in turns
(rounds), so the machine's drift hits them alike:

  direct      the local owner's (TRUSTED): the worker starts the program itself;
  launcher    a restricted grant accepted unisolated: the launcher lowers the rlimits, execs;
  isolated    a restricted grant as given by default: the launcher also makes mount and PID
              namespaces (and, as root, switches to the sandbox account).

Reported per setup: the median wall milliseconds of an attempt, and the CPU milliseconds
of the processes it started (children's rusage), over `--attempts` attempts a round.

Usage: python bench/bench_shell_isolation.py [--attempts 50] [--rounds 3] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import time
from dataclasses import replace
from typing import Any

from wovyr.activities.builtin.shell import run_shell
from wovyr.activities.policy import RESTRICTED, TRUSTED, SideEffectPolicy
from wovyr.activities.sandbox import ShellSandbox, probe
from wovyr.definition.model import ShellSpec

SETUPS: dict[str, SideEffectPolicy] = {
    "direct": TRUSTED,
    "launcher": replace(RESTRICTED, shell=True, shell_isolation=False),
    "isolated": replace(RESTRICTED, shell=True),
}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


async def _attempts(policy: SideEffectPolicy, count: int) -> tuple[float, float]:
    """Median wall seconds of one attempt, and CPU seconds of its processes on average."""
    spec = ShellSpec(argv=["true"])
    walls = []
    cpu = _children_cpu()
    for _ in range(count):
        began = time.perf_counter()
        await run_shell(spec, timeout=30, policy=policy, sandbox=ShellSandbox())
        walls.append(time.perf_counter() - began)
    return statistics.median(walls), (_children_cpu() - cpu) / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--attempts", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    unavailable = probe(ShellSandbox())
    setups = {k: v for k, v in SETUPS.items() if k != "isolated" or unavailable is None}
    walls: dict[str, list[float]] = {name: [] for name in setups}
    cpus: dict[str, list[float]] = {name: [] for name in setups}
    for _ in range(args.rounds):
        for name, policy in setups.items():
            wall, cpu = asyncio.run(_attempts(policy, args.attempts))
            walls[name].append(wall)
            cpus[name].append(cpu)
    result: dict[str, Any] = {
        "attempts": args.attempts,
        "rounds": args.rounds,
        "isolation": "available" if unavailable is None else f"unavailable: {unavailable}",
        "setups": {
            name: {
                "wall_ms": round(statistics.median(walls[name]) * 1000, 2),
                "cpu_ms": round(statistics.median(cpus[name]) * 1000, 2),
            }
            for name in setups
        },
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"one attempt of `true`, median of {args.rounds} rounds of {args.attempts}")
    print(f"isolation: {result['isolation']}")
    for name, figures in result["setups"].items():
        print(f"  {name:9} wall {figures['wall_ms']:7.2f} ms   cpu {figures['cpu_ms']:7.2f} ms")


if __name__ == "__main__":
    main()
