"""The metrics registry (`wovyr.platform.metrics.Metrics`): the cost of counting and of a
scrape, beside a yardstick measured in the same run.

- `inc`: one counter increment with a tenant and a workflow label (what a committed step
  costs per event counted), per second;
- `observe_request`: one HTTP request counted (a counter and a histogram), per second;
- `render`: one scrape of a tenant's view and of the operator's view, with `--series`
  workflows in each of `--tenants` tenants.

The yardstick is the least the same counting can cost in Python: a dict of floats keyed by
(name, tenant, labels) under a `threading.Lock`. Ratios to it are what compare across
machines (they differ 3x from day to day) and across versions of the registry:

    python bench/bench_metrics.py [--series 100] [--tenants 10] [--json]

Why the registry is our own, not `prometheus-client` (0.26, one registry per tenant so a
tenant's scrape renders only its own series; the same names, labels, cap and tests): in
yardstick increments, the same runs on this machine (ranges over repeated runs):

    2,000 series, 10 tenants      hand-written     prometheus-client
    inc                           1.1x-3.5x        1.8x-2.8x
    observe_request               4.2x-9.6x        4.0x-6.7x
    render (a tenant's view)      5k-14k inc       7k-46k inc
    render (every tenant)         40k-84k inc      242k-480k inc (4,000 series: 742k)

Counting costs the same; the operator's scrape (the host's key, `wovyr worker
--metrics-addr`, every tenant's series) is 4-10x slower, nearly all of it in
`generate_latest` (label names escaped and checked for every sample line), and it runs in
the process that also drives executions.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections.abc import Callable

from wovyr.platform.metrics import Metrics


def per_second(fn: Callable[[int], None], n: int) -> float:
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        fn(n)
        best = min(best, time.perf_counter() - started)
    return n / best


def seconds(fn: Callable[[], object], repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=100, help="workflows per tenant")
    parser.add_argument("--tenants", type=int, default=10)
    parser.add_argument("--json", action="store_true", help="print JSON only")
    args = parser.parse_args()

    lock = threading.Lock()
    plain: dict[tuple[str, str, tuple[tuple[str, str], ...]], float] = {}

    def yardstick(n: int) -> None:
        for i in range(n):
            key = ("wovyr_executions_started_total", "acme", (("workflow", f"w{i % 50}"),))
            with lock:
                plain[key] = plain.get(key, 0.0) + 1.0

    metrics = Metrics()

    def inc(n: int) -> None:
        for i in range(n):
            metrics.inc("wovyr_executions_started_total", "acme", workflow=f"w{i % 50}")

    def request(n: int) -> None:
        for i in range(n):
            metrics.observe_request("GET", f"/api/v1/r{i % 20}", 200, 0.003, "acme")

    scraped = Metrics()
    for t in range(args.tenants):
        for s in range(args.series):
            scraped.inc("wovyr_executions_started_total", f"t{t}", workflow=f"w{s}")
            scraped.observe("wovyr_activity_duration_seconds", 0.2, f"t{t}", workflow=f"w{s}",
                            outcome="completed")  # fmt: skip

    n = 100_000
    stick = per_second(yardstick, n)
    results: dict[str, float] = {
        "yardstick_per_s": stick,
        "inc_per_s": per_second(inc, n),
        "observe_request_per_s": per_second(request, n // 2),
        "render_tenant_s": seconds(lambda: scraped.render("t0")),
        "render_all_s": seconds(lambda: scraped.render(None)),
        "series": scraped.series(),
    }
    results["inc_vs_yardstick"] = stick / results["inc_per_s"]
    results["observe_request_vs_yardstick"] = stick / results["observe_request_per_s"]
    # a scrape in yardstick increments: how many counts one scrape costs
    results["render_tenant_in_increments"] = results["render_tenant_s"] * stick
    results["render_all_in_increments"] = results["render_all_s"] * stick
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(json.dumps(results))
    print()
    print(f"{'measure':<34}{'value':>16}{'vs yardstick':>16}")
    print(f"{'yardstick (dict + lock), /s':<34}{stick:>16,.0f}{1:>16.1f}")
    print(f"{'inc, /s':<34}{results['inc_per_s']:>16,.0f}{results['inc_vs_yardstick']:>15.1f}x")
    print(
        f"{'observe_request, /s':<34}{results['observe_request_per_s']:>16,.0f}"
        f"{results['observe_request_vs_yardstick']:>15.1f}x"
    )
    for view in ("tenant", "all"):
        took = results[f"render_{view}_s"]
        counts = results[f"render_{view}_in_increments"]
        print(f"{f'render ({view}), ms':<34}{took * 1000:>16.2f}{counts:>12,.0f} inc")
    print(f"({results['series']:.0f} series: {args.tenants} tenants x {args.series} workflows x 2)")


if __name__ == "__main__":
    main()
