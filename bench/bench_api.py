"""HTTP API latency: `wovyr serve` as a real process (embedded SQLite store, loopback).

A1  GET /api/v1/workflows/{id} (view + newest 50 events), sequential, keep-alive: p50/p99.
A2  GET /api/v1/workflows (newest 50 summaries) over a store of N executions: p50/p99.
A3  POST /api/v1/workflows (one durable commit each): p50/p99 and starts/s.
A4  `--clients K` (e.g. 32): K concurrent keep-alive clients for `--seconds` S, each looping
    over start (a workflow that waits for a signal), get one, list the newest 50, signal a
    waiting execution (which completes it): requests/s, p50/p99 per kind and overall, errors.
    Beside it, in the same run, the yardstick Y4: the same K clients against a bare
    Starlette app under uvicorn (one JSON answer, no store), so the mixed rate is also a
    share of what this machine's Python HTTP stack can serve at all.

`--pg URL` serves from PostgreSQL instead of the embedded SQLite file (the schema is the
URL's database's `public` unless the URL names `options=-csearch_path=...`).

Usage: python bench/bench_api.py [--requests 2000] [--executions 1000] [--clients 32]
       [--seconds 20] [--pg URL] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
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
SIGNAL_FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: bench-api-signal}
activities:
  - id: hold
    wait: {signal: go}
"""
WOVYR = [sys.executable, "-c", "import sys; from wovyr.cli.main import main; sys.exit(main())"]
BARE_APP = """
import sys
import uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

async def answer(request):
    return JSONResponse({"id": "x", "status": "waiting"})

app = Starlette(routes=[Route("/{path:path}", answer, methods=["GET", "POST"])])
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)
"""


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


async def _mixed_client(
    http: httpx.AsyncClient,
    until: float,
    samples: dict[str, list[float]],
    waiting: list[str],
    errors: list[str],
    rng: random.Random,
    bare: bool,
) -> None:
    """One client's loop: start, get, list, signal (the bare app answers each the same)."""
    start_body = {"definition": SIGNAL_FLOW}
    while time.perf_counter() < until:
        for kind in ("start", "get", "list", "signal"):
            if kind == "start":
                call = http.post("/api/v1/workflows", json=start_body)
            elif kind == "get":
                eid = rng.choice(waiting) if waiting else "none"
                call = http.get(f"/api/v1/workflows/{eid}")
            elif kind == "list":
                call = http.get("/api/v1/workflows", params={"limit": 50})
            else:
                if not waiting:
                    continue
                eid = waiting.pop(rng.randrange(len(waiting)))
                call = http.post(
                    f"/api/v1/workflows/{eid}/signal", json={"name": "go", "payload": 1}
                )
            began = time.perf_counter()
            try:
                response = await call
            except httpx.HTTPError as exc:
                errors.append(f"{kind}: {exc!r}")
                continue
            samples[kind].append(time.perf_counter() - began)
            if response.status_code >= 300:
                errors.append(f"{kind}: {response.status_code} {response.text[:120]}")
            elif kind == "start" and not bare:
                waiting.append(response.json()["id"])


async def mixed_load(
    base: str, headers: dict[str, str], clients: int, seconds: float, *, bare: bool = False
) -> dict[str, Any]:
    """K concurrent clients for `seconds`: requests/s, p50/p99 per kind and overall."""
    samples: dict[str, list[float]] = {k: [] for k in ("start", "get", "list", "signal")}
    waiting: list[str] = ["none"] if bare else []
    errors: list[str] = []
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60, limits=limits) as http:
        began = time.perf_counter()
        until = began + seconds
        await asyncio.gather(
            *(
                _mixed_client(http, until, samples, waiting, errors, random.Random(i), bare)
                for i in range(clients)
            )
        )
        elapsed = time.perf_counter() - began
    every = [x for xs in samples.values() for x in xs]
    return {
        "clients": clients,
        "requests": len(every),
        "requests_per_s": round(len(every) / elapsed, 1),
        "errors": len(errors),
        "first_errors": errors[:3],
        **percentiles(every),
        "by_kind": {k: {"n": len(v), **percentiles(v)} for k, v in samples.items() if v},
    }


def bare_yardstick(clients: int, seconds: float) -> dict[str, Any]:
    """Y4: the same clients against a bare Starlette app under uvicorn (no store)."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", BARE_APP, str(port)])
    try:
        base = f"http://127.0.0.1:{port}"
        wait_ready(base, "/")
        return asyncio.run(mixed_load(base, {}, clients, seconds, bare=True))
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def wait_ready(base: str, path: str = "/readyz") -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"{base}{path}", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit("the server did not start")
        time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--executions", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=0, help="A4: concurrent clients")
    parser.add_argument("--seconds", type=float, default=20.0, help="A4: how long")
    parser.add_argument("--pg", metavar="URL", help="serve from this PostgreSQL database")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="wovyr-bench-api-"))
    port = free_port()
    env = {**os.environ, "WOVYR_HOME": str(home), "WOVYR_DISPATCH_INTERVAL_SECONDS": "1"}
    if args.pg:
        env["WOVYR_DATABASE_URL"] = args.pg
    else:
        env.pop("WOVYR_DATABASE_URL", None)
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
        wait_ready(base)
        token = next(
            ln.strip() for ln in (home / "serve.out").read_text().splitlines() if "wvr_" in ln
        )
        headers = {"Authorization": f"Bearer {token}"}
        if args.clients:
            results["A4_mixed"] = asyncio.run(mixed_load(base, headers, args.clients, args.seconds))
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
    if args.clients:
        results["Y4_bare"] = bare_yardstick(args.clients, args.seconds)
        results["A4_share_of_Y4"] = round(
            results["A4_mixed"]["requests_per_s"] / results["Y4_bare"]["requests_per_s"], 3
        )
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"{'benchmark':<14}{'p50 ms':>10}{'p99 ms':>10}{'mean ms':>10}{'req/s':>10}")
    for name, r in results.items():
        if isinstance(r, dict):
            rate = r.get("requests_per_s", "")
            print(f"{name:<14}{r['p50_ms']:>10}{r['p99_ms']:>10}{r['mean_ms']:>10}{rate:>10}")
    print(f"starts/s: {results['A3_start']['starts_per_s']}")
    if args.clients:
        mixed = results["A4_mixed"]
        print(f"A4 by kind: {json.dumps(mixed['by_kind'])}; errors {mixed['errors']}")
        print(f"A4 / Y4 (bare uvicorn + Starlette, same clients): {results['A4_share_of_Y4']}")


if __name__ == "__main__":
    main()
