"""What tracing costs an engine: the same workflows started and run with tracing off (the
no-op hooks, the default) and on (`OtelTracer`: spans made, batched and exported, here to
OpenTelemetry's in-memory exporter so no network is timed), in the same run.

Each round starts `--workflows` executions of 3 no-op tool steps on a `memory://` store and
drains them with one worker: 1 start span and 3 attempt spans per execution. The yardstick
is the same round with tracing off; the figure is the extra time per span, and the round's
time on / off (best of `--rounds`, the two interleaved because this machine is noisy).

    python bench/bench_tracing.py [--workflows 300] [--rounds 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import time

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from wovyr.activities.base import ActivityRegistry
from wovyr.engine.engine import Engine
from wovyr.platform.tracing import OtelTracer
from wovyr.store import open_store
from wovyr.testing import drain
from wovyr.traces import NO_TRACER, Tracer

THREE = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: traced3}
activities:
  - {id: a, tool: noop}
  - {id: b, needs: [a], tool: noop}
  - {id: c, needs: [b], tool: noop}
"""


def one_round(workflows: int, tracer: Tracer) -> float:
    registry = ActivityRegistry()

    @registry.activity("noop")
    async def noop() -> int:
        return 1

    engine = Engine(open_store("memory://"), activities=registry, tracer=tracer)
    engine.apply(THREE)
    started = time.perf_counter()
    for _ in range(workflows):
        engine.start(name="traced3")
    drain(engine)
    took = time.perf_counter() - started
    engine.close()
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workflows", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print JSON only")
    args = parser.parse_args()

    off: list[float] = []
    on: list[float] = []
    exported = 0
    for _ in range(args.rounds):
        off.append(one_round(args.workflows, NO_TRACER))
        exporter = InMemorySpanExporter()
        on.append(one_round(args.workflows, OtelTracer(exporter=exporter)))
        exported = len(exporter.get_finished_spans())
    spans = args.workflows * 4
    assert exported == spans, (exported, spans)
    best_off, best_on = min(off), min(on)
    results = {
        "workflows": args.workflows,
        "spans_per_round": spans,
        "off_s": best_off,
        "on_s": best_on,
        "on_vs_off": best_on / best_off,
        "extra_us_per_span": (best_on - best_off) / spans * 1e6,
        "off_us_per_attempt": best_off / (args.workflows * 3) * 1e6,
    }
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(json.dumps(results))
    print()
    title = f"round ({args.workflows} x 3 tool steps)"
    print(f"{title:<36}{'seconds':>10}{'vs off':>10}")
    print(f"{'tracing off (yardstick)':<36}{best_off:>10.3f}{1:>10.2f}")
    print(f"{'tracing on (in-memory exporter)':<36}{best_on:>10.3f}{best_on / best_off:>10.2f}")
    print(
        f"extra per span: {results['extra_us_per_span']:.0f} us "
        f"(an attempt with tracing off: {results['off_us_per_attempt']:.0f} us)"
    )


if __name__ == "__main__":
    main()
