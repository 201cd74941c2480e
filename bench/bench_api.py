"""HTTP API latency: `wovyr serve` as a real process (embedded SQLite store, loopback).

A1  GET /api/v1/workflows/{id} (view + newest 50 events), sequential, keep-alive: p50/p99.
A2  GET /api/v1/workflows (newest 50 summaries) over a store of N executions: p50/p99.
A3  POST /api/v1/workflows (one durable commit each): p50/p99 and starts/s.
A4  `--clients K` (e.g. 32): K concurrent keep-alive clients for `--seconds` S, each looping
    over start (a workflow that waits for a signal), get one, list the newest 50, signal a
    waiting execution (which completes it): requests/s, p50/p99 per kind and overall, errors.
    Beside it, in the same run, the yardstick Y4: the same K clients against a bare
    Starlette app under uvicorn (one JSON answer, no store), so the mixed rate is also a
    share of what this machine's Python HTTP stack can serve at all; and Y5: the same clients
    against the four routes declared in FastAPI as the server declares them (a bearer-key
    dependency, a validated JSON body, a path and a query parameter), each answering a
    constant (no store, no engine): what the web framework alone costs. For each of the
    three, the CPU the server process (and its worker process) spent per request: the
    clients, the server and its worker share this machine's cores, so a rate says how
    the cores were shared and the CPU per request what a request cost. On the 2-core
    machine Y5 serves as fast as Y4 (0.98-1.31x): the rate of both is the clients' (one
    Python process), so FastAPI is not what holds A4 back; Wovyr's CPU per request is.
    Y6: the routes of Y5 as plain functions, which FastAPI runs in its thread pool as it
    runs the server's own routes: what that hop costs beside the same framework (4 runs,
    2026-12-06: 0.40-0.47 -> 0.64-0.94 ms of server CPU per request, 0.67-0.92x of Y5's
    rate).

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
FASTAPI_ROUTES = """
import sys
from typing import Annotated, Any
import uvicorn
from fastapi import Depends, FastAPI, HTTPException, Query, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel

bearer = HTTPBearer(auto_error=False)

async def caller(
    credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)],
) -> str:
    if credentials is None:
        raise HTTPException(401)
    return credentials.credentials

Caller = Annotated[str, Depends(caller)]

class Start(BaseModel):
    definition: str | None = None
    input: dict[str, Any] | None = None

class Signal(BaseModel):
    name: str
    payload: Any = None

ANSWER = {"id": "x", "status": "waiting"}
app = FastAPI()

@app.post("/api/v1/workflows", status_code=201)
ROUTE def start(body: Start, who: Caller) -> dict[str, Any]:
    return ANSWER

@app.get("/api/v1/workflows/{execution_id}")
ROUTE def get_one(execution_id: str, who: Caller) -> dict[str, Any]:
    return ANSWER

@app.get("/api/v1/workflows")
ROUTE def listing(who: Caller, limit: Annotated[int, Query(ge=1, le=500)] = 50) -> dict[str, Any]:
    return {"items": [ANSWER]}

@app.post("/api/v1/workflows/{execution_id}/signal")
ROUTE def signal(execution_id: str, body: Signal, who: Caller) -> dict[str, Any]:
    return ANSWER

uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", access_log=False)
"""
FASTAPI_APP = FASTAPI_ROUTES.replace("ROUTE def", "async def")  # Y5
# Y6: the same routes as plain functions (FastAPI runs each in its thread pool, as it runs
# the server's own routes) beside the same coroutine dependency, to show what the hop costs
FASTAPI_SYNC_APP = FASTAPI_ROUTES.replace("ROUTE def", "def")


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


def cpu_seconds(pid: int) -> tuple[float, float]:
    """User + system CPU seconds process `pid` has used so far, and its descendants (a
    server's worker process), read from Linux's /proc (0.0 where there is none)."""
    tick = os.sysconf("SC_CLK_TCK")
    used = [0.0, 0.0]
    todo = [(pid, 0)]
    while todo:
        one, which = todo.pop()
        proc = Path("/proc") / str(one)
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            used[which] += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
            for task in (proc / "task").iterdir():
                todo += [(int(c), 1) for c in (task / "children").read_text().split()]
        except (OSError, ValueError, IndexError):  # ended meanwhile, or no /proc
            continue
    return used[0], used[1]


async def mixed_load(
    base: str,
    headers: dict[str, str],
    clients: int,
    seconds: float,
    *,
    bare: bool = False,
    server_pid: int | None = None,
) -> dict[str, Any]:
    """K concurrent clients for `seconds`: requests/s, p50/p99 per kind and overall; with
    `server_pid`, the CPU the server (and its worker process) spent per request meanwhile:
    on a machine the clients share with the server, the rate says how the cores were
    shared, the CPU per request what each request cost."""
    samples: dict[str, list[float]] = {k: [] for k in ("start", "get", "list", "signal")}
    waiting: list[str] = ["none"] if bare else []
    errors: list[str] = []
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60, limits=limits) as http:
        began = time.perf_counter()
        cpu_before = cpu_seconds(server_pid) if server_pid is not None else (0.0, 0.0)
        until = began + seconds
        await asyncio.gather(
            *(
                _mixed_client(http, until, samples, waiting, errors, random.Random(i), bare)
                for i in range(clients)
            )
        )
        elapsed = time.perf_counter() - began
        cpu_after = cpu_seconds(server_pid) if server_pid is not None else (0.0, 0.0)
    own, worker = (after - before for after, before in zip(cpu_after, cpu_before, strict=True))
    every = [x for xs in samples.values() for x in xs]
    per_request = 1000 / max(1, len(every))
    return {
        "server_cpu_ms_per_request": round((own + worker) * per_request, 3),
        # of it, the HTTP server process's and its worker process's (which runs the steps)
        "server_process_cpu_ms_per_request": round(own * per_request, 3),
        "worker_process_cpu_ms_per_request": round(worker * per_request, 3),
        "clients": clients,
        "requests": len(every),
        "requests_per_s": round(len(every) / elapsed, 1),
        "errors": len(errors),
        "first_errors": errors[:3],
        **percentiles(every),
        "by_kind": {k: {"n": len(v), **percentiles(v)} for k, v in samples.items() if v},
    }


def yardstick(clients: int, seconds: float, app: str = BARE_APP) -> dict[str, Any]:
    """Y4: the same clients against a bare Starlette app under uvicorn (no store); with
    `app=FASTAPI_APP`, Y5: against the same routes declared in FastAPI (Y6: as plain
    functions, `FASTAPI_SYNC_APP`)."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", app, str(port)])
    try:
        base = f"http://127.0.0.1:{port}"
        wait_ready(base, "/api/v1/workflows/x", {"Authorization": "Bearer y"})
        headers = {"Authorization": "Bearer y"}
        return asyncio.run(
            mixed_load(base, headers, clients, seconds, bare=True, server_pid=proc.pid)
        )
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def wait_ready(base: str, path: str = "/readyz", headers: dict[str, str] | None = None) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"{base}{path}", headers=headers, timeout=1).status_code == 200:
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
            results["A4_mixed"] = asyncio.run(
                mixed_load(base, headers, args.clients, args.seconds, server_pid=proc.pid)
            )
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
        results["Y4_bare"] = yardstick(args.clients, args.seconds)
        results["Y5_fastapi"] = yardstick(args.clients, args.seconds, FASTAPI_APP)
        results["Y6_fastapi_sync"] = yardstick(args.clients, args.seconds, FASTAPI_SYNC_APP)
        results["Y6_share_of_Y5"] = round(
            results["Y6_fastapi_sync"]["requests_per_s"] / results["Y5_fastapi"]["requests_per_s"],
            3,
        )
        rates = {k: results[k]["requests_per_s"] for k in ("A4_mixed", "Y4_bare", "Y5_fastapi")}
        results["A4_share_of_Y4"] = round(rates["A4_mixed"] / rates["Y4_bare"], 3)
        results["A4_share_of_Y5"] = round(rates["A4_mixed"] / rates["Y5_fastapi"], 3)
        results["Y5_share_of_Y4"] = round(rates["Y5_fastapi"] / rates["Y4_bare"], 3)
        cpu = {k: results[k]["server_cpu_ms_per_request"] for k in rates}
        results["A4_cpu_over_Y4"] = round(cpu["A4_mixed"] / max(cpu["Y4_bare"], 1e-9), 2)
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
        print(
            f"A4 / Y5 (the same routes in FastAPI, constant answers): {results['A4_share_of_Y5']}"
        )
        print(
            "server CPU ms per request (with its worker process): "
            + ", ".join(
                f"{k} {results[k]['server_cpu_ms_per_request']}"
                for k in ("A4_mixed", "Y6_fastapi_sync", "Y5_fastapi", "Y4_bare")
            )
            + f"; A4 / Y4 {results['A4_cpu_over_Y4']}x"
        )
        print(
            "A4's CPU per request: the server process"
            f" {results['A4_mixed']['server_process_cpu_ms_per_request']} ms, its worker"
            f" process {results['A4_mixed']['worker_process_cpu_ms_per_request']} ms"
        )
        print(
            f"Y5 / Y4 (what FastAPI's routing, dependencies and validation leave): "
            f"{results['Y5_share_of_Y4']}"
        )
        print(
            f"Y6 / Y5 (the same routes as plain functions, run in the thread pool): "
            f"{results['Y6_share_of_Y5']}"
        )


if __name__ == "__main__":
    main()
