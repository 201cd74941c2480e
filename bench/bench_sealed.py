"""Sealed execution payloads: what the sealing store costs, in one run on SQLite.

B1s  workflows of 3 tool steps (each echoing a ~200-byte input), sequential and 8 in flight,
     in three setups, run in turns (rounds) so the machine's drift hits them alike:
       plain     the driver's store as it is (no sealing store over it);
       unsealed  the sealing store over it, for a tenant that does not seal;
       sealed    the same store, for a tenant that seals (AES-256-GCM under its data key).
     Reported: the median workflows/s of each, and unsealed/plain and sealed/plain.

Usage: python bench/bench_sealed.py [--workflows 200] [--rounds 3] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from wovyr.activities.base import ActivityRegistry
from wovyr.clock import SystemClock
from wovyr.engine.engine import Engine
from wovyr.engine.tenants import set_sealing
from wovyr.platform.kms import Kms, RootKey
from wovyr.platform.payloads import sealed_store
from wovyr.platform.secrets import Secrets
from wovyr.store.base import Store
from wovyr.store.sqlite import SQLiteStore
from wovyr.worker import Worker

FLOW = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: bench_sealed}
inputs:
  text: {type: string}
activities:
  - {id: a, tool: echo, with: {text: "${{ inputs.text }}"}}
  - {id: b, needs: [a], tool: echo, with: {text: "${{ activities.a.output }}"}}
  - {id: c, needs: [b], tool: echo, with: {text: "${{ activities.b.output }}"}}
output: "${{ activities.c.output }}"
"""
TEXT = "payload " * 25  # ~200 bytes
SETUPS = ("plain", "unsealed", "sealed")


def make_engine(folder: Path, setup: str, label: str) -> Engine:
    registry = ActivityRegistry()

    async def echo(text: str) -> str:
        return text

    registry.register("echo", echo)
    inner = SQLiteStore(folder / f"{setup}-{label}.db")
    store: Store = inner
    if setup != "plain":
        secrets = Secrets(inner, Kms(RootKey(b"\x07" * 32), "production"))
        store = sealed_store(inner, secrets)
        set_sealing(store, "sealed", True, by="bench", at=datetime.now(UTC))
    engine = Engine(store, clock=SystemClock(), activities=registry)
    return engine.for_tenant("sealed" if setup == "sealed" else "default")


async def run(engine: Engine, count: int, in_flight: int) -> float:
    worker = Worker(engine, concurrency=max(64, in_flight), reserved_slots=0)
    engine.register(FLOW)
    start = time.perf_counter()
    try:
        remaining = count

        async def one() -> None:
            record = await worker.start(FLOW, {"text": TEXT})
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
    done = engine.list(status="completed", limit=1000).items
    assert len(done) >= min(count, 1000), "not every workflow completed"
    assert done[0].output == TEXT
    return count / elapsed


def measure(folder: Path, count: int, rounds: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for label, in_flight in (("sequential", 1), ("in_flight_8", 8)):
        rates: dict[str, list[float]] = {s: [] for s in SETUPS}
        for r in range(rounds):
            for setup in SETUPS:
                engine = make_engine(folder, setup, f"{label}-{r}")
                try:
                    rates[setup].append(asyncio.run(run(engine, count, in_flight)))
                finally:
                    engine.close()
        median = {s: statistics.median(v) for s, v in rates.items()}
        out[label] = {
            "workflows_per_s": median,
            "unsealed_over_plain": median["unsealed"] / median["plain"],
            "sealed_over_plain": median["sealed"] / median["plain"],
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workflows", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = measure(Path(tmp), args.workflows, args.rounds)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for label, r in results.items():
        rates = r["workflows_per_s"]
        print(
            f"B1s {label:12s} plain {rates['plain']:7.1f} wf/s  unsealed {rates['unsealed']:7.1f}"
            f" ({r['unsealed_over_plain']:.2f}x)  sealed {rates['sealed']:7.1f}"
            f" ({r['sealed_over_plain']:.2f}x)"
        )


if __name__ == "__main__":
    main()
