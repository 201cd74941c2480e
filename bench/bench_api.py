"""HTTP API latency: `wovyr serve` as a real process (embedded SQLite store, loopback).

A1  GET /api/v1/workflows/{id} (view + newest 50 events), sequential, keep-alive: p50/p99.
A2  GET /api/v1/workflows (newest 50 summaries) over a store of N executions: p50/p99.
A3  POST /api/v1/workflows (one durable commit each): p50/p99 and starts/s.

Usage: python bench/bench_api.py [--requests 2000] [--executions 1000] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: bench-api}
activities:
  - id: a
    set: {x: 1}
  - id: gate
    needs: [a]
    wait: {approval: {}}
"""
WOVYR = [sys.executable, "-c", "import sys; from wovyr.cli.main import main; sys.exit(main())"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def pick(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return {
        "p50_ms": round(pick(0.50) * 1000, 3),
        "p99_ms": round(pick(0.99) * 1000, 3),
        "mean_ms": round(statistics.fmean(ordered) * 1000, 3),
    }


def timed(n: int, call: Callable[[], httpx.Response]) -> list[float]:
    out = []
    for _ in range(n):
        began = time.perf_counter()
        r = call()
        out.append(time.perf_counter() - began)
        assert r.status_code < 300, r.text
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--executions", type=int, default=1000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="wovyr-bench-api-"))
    port = free_port()
    env = {**os.environ, "WOVYR_HOME": str(home), "WOVYR_DISPATCH_INTERVAL_SECS": "1"}
    log = (home / "serve.out").open("wb")
    proc = subprocess.Popen(
        [*WOVYR, "serve", "--port", str(port), "--log-level", "warning"],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    results: dict[str, Any] = {}
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("the server did not start")
            time.sleep(0.05)
        token = next(
            ln.strip() for ln in (home / "serve.out").read_text().splitlines() if "wvr_" in ln
        )
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=base, headers=headers, timeout=30) as http:
            body = {"definition": FLOW}
            starts = timed(args.executions, lambda: http.post("/api/v1/workflows", json=body))
            results["A3_start"] = {
                **percentiles(starts),
                "starts_per_s": round(len(starts) / sum(starts), 1),
            }
            eid = http.get("/api/v1/workflows", params={"limit": 1}).json()["items"][0]["id"]
            time.sleep(2)  # let the worker reach the approval waits (not measured)
            one = timed(args.requests, lambda: http.get(f"/api/v1/workflows/{eid}"))
            results["A1_get_one"] = percentiles(one)
            listed = timed(args.requests // 4, lambda: http.get("/api/v1/workflows"))
            results["A2_list_50"] = percentiles(listed)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"{'benchmark':<14}{'p50 ms':>10}{'p99 ms':>10}{'mean ms':>10}")
    for name, r in results.items():
        print(f"{name:<14}{r['p50_ms']:>10}{r['p99_ms']:>10}{r['mean_ms']:>10}")
    print(f"starts/s: {results['A3_start']['starts_per_s']}")


if __name__ == "__main__":
    main()
