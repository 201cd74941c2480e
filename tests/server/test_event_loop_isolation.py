"""Acceptance: one tenant's worst inputs cannot stall the server (issue #14, item 5).

A real `wovyr serve` on SQLite. Tenant A submits, from several threads at once and a fixed
number of times each, the worst definitions and expressions we know: a 30-operand string
concatenation over a 900 KB input, a `map` copying a 600 KB string into 1,400 items,
`xs.all(x, x in xs)` over 1,400 integers (accepted: it fits the cost estimate), a 450,000-
item input, and definitions of 6,000 and 500 activities. Meanwhile `/healthz` is polled
back to back and tenant B runs one-step workflows. The figures are printed (`pytest -s`) and
compared with the issue's targets (`/healthz` p99 under 100 ms, each of B's workflows within
2 s: met on the 2-core machine this was built on, p99 50-78 ms and B 1.1-1.8 s). What is
asserted has a margin of ten: machines differ 3x from day to day, and the failures this
guards against were stalls of 1 to 60 s, which these bounds still catch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.probe import answers

pytestmark = pytest.mark.slow
WOVYR = [sys.executable, "-c", "import sys; from wovyr.cli.main import main; sys.exit(main())"]
HEADER = "apiVersion: wovyr/v1\nkind: Workflow\nmetadata: {name: %s}\n"
INPUTS = "inputs: {s: {type: string, default: ''}, xs: {type: array, default: []}}\n"
ROUNDS = 3  # submissions of each worst input
B_RUNS = 5  # at least this many one-step workflows of tenant B, all during the attack
P99_BOUND = 1.0  # seconds: ten times the 100 ms target (see the module docstring)
B_BOUND = 20.0  # seconds: ten times the 2 s target


def _set_flow(name: str, expression: str) -> str:
    return (
        HEADER % name
        + INPUTS
        + f'activities:\n  - id: a\n    set: {{v: "${{{{ {expression} }}}}"}}\n'
    )


def _many(name: str, count: int) -> str:
    rows = "".join(f"  - {{id: a{i}, set: {{v: {i}}}}}\n" for i in range(count))
    return HEADER % name + "activities:\n" + rows


WORST: dict[str, tuple[str, dict[str, Any]]] = {
    "concat 30 x 900 KB": (
        _set_flow("concat", "inputs.s" + " + inputs.s" * 29),
        {"s": "a" * 900_000},
    ),
    "map copying 600 KB x 1,400": (
        _set_flow("copy", "inputs.xs.map(x, inputs.s)"),
        {"xs": list(range(1400)), "s": "a" * 600_000},
    ),
    "x in xs over 1,400": (
        _set_flow("member", "inputs.xs.all(x, x in inputs.xs)"),
        {"xs": list(range(1400))},
    ),
    "450,000-item input": (_set_flow("size", "size(inputs.xs)"), {"xs": [0] * 450_000}),
    "6,000 activities": (_many("wide", 6000), {}),
    "500 activities": (_many("wide-ok", 500), {}),
}
ONE_STEP = HEADER % "one" + "activities:\n  - {id: a, set: {v: 1}}\n"


def wait_for(check: Callable[[], Any], seconds: float, what: str) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    env = {**os.environ, "WOVYR_HOME": str(tmp_path / "home")}
    tokens = {}
    for tenant in ("tenant-a", "tenant-b"):
        out = subprocess.run(
            [*WOVYR, "admin", "keys", "create", "--tenant", tenant, "--role", "operator", "--json"],
            env=env,
            capture_output=True,
            check=True,
        )
        tokens[tenant] = json.loads(out.stdout)["token"]
    port = _port()
    base = f"http://127.0.0.1:{port}"
    log = (tmp_path / "serve.out").open("wb")
    proc = subprocess.Popen(
        [*WOVYR, "serve", "--port", str(port), "--log-level", "warning"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )

    def ready() -> bool:
        assert proc.poll() is None, (tmp_path / "serve.out").read_text()
        return answers(base)

    try:
        wait_for(ready, 30, "the server")
        yield base, tokens
    finally:
        proc.terminate()
        assert proc.wait(60) == 0, (tmp_path / "serve.out").read_text()
        log.close()


def _warm_up(base: str, token: str) -> None:
    """One workflow to completion: the worker process is up (it starts with the server)."""
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base, headers=headers, timeout=60) as client:
        started = client.post("/api/v1/workflows", json={"definition": ONE_STEP})
        url = f"/api/v1/workflows/{started.json()['id']}"
        wait_for(lambda: client.get(url).json()["status"] == "completed", 30, "the worker process")


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def test_one_tenants_worst_inputs_stall_neither_healthz_nor_another_tenant(
    server: tuple[str, dict[str, str]],
) -> None:
    base, tokens = server
    _warm_up(base, tokens["tenant-b"])
    attacking = threading.Event()
    attacking.set()
    answers: dict[str, list[int]] = {name: [] for name in WORST}
    healthz: list[float] = []
    tenant_b: list[float] = []
    failures: list[BaseException] = []

    def guarded(fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
            except BaseException as exc:  # reported by the test thread
                failures.append(exc)

        return run

    def attack(names: list[str]) -> None:
        headers = {"Authorization": f"Bearer {tokens['tenant-a']}"}
        with httpx.Client(base_url=base, headers=headers, timeout=120) as client:
            for _ in range(ROUNDS):
                for name in names:
                    definition, inputs = WORST[name]
                    body = {"definition": definition, "input": inputs}
                    answers[name].append(client.post("/api/v1/workflows", json=body).status_code)

    def poll_healthz() -> None:
        with httpx.Client(base_url=base, timeout=60) as client:
            while attacking.is_set():
                started = time.perf_counter()
                assert client.get("/healthz").status_code == 200
                healthz.append(time.perf_counter() - started)

    def run_tenant_b() -> None:
        headers = {"Authorization": f"Bearer {tokens['tenant-b']}"}
        with httpx.Client(base_url=base, headers=headers, timeout=60) as client:
            while attacking.is_set() or len(tenant_b) < B_RUNS:
                started = time.perf_counter()
                r = client.post("/api/v1/workflows", json={"definition": ONE_STEP})
                assert r.status_code == 201, r.text
                url = f"/api/v1/workflows/{r.json()['id']}?events=0"

                def completed(url: str = url) -> bool:
                    return bool(client.get(url).json()["status"] == "completed")

                wait_for(completed, 30, "tenant B's workflow")
                tenant_b.append(time.perf_counter() - started)

    names = list(WORST)
    attackers = [
        threading.Thread(target=guarded(lambda n=n: attack(names[n::3]))) for n in range(3)
    ]
    others = [
        threading.Thread(target=guarded(poll_healthz)),
        threading.Thread(target=guarded(run_tenant_b)),
    ]
    for thread in [*others, *attackers]:
        thread.start()
    for thread in attackers:
        thread.join(300)
    attacking.clear()
    for thread in others:
        thread.join(120)
    assert not failures, failures

    p50, p99 = _quantile(healthz, 0.5), _quantile(healthz, 0.99)
    print(
        f"\n/healthz: {len(healthz)} requests, p50 {p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms,"
        f" max {max(healthz) * 1000:.1f} ms"
        f"\ntenant B: {len(tenant_b)} one-step workflows, slowest {max(tenant_b):.2f} s"
        f" ({', '.join(f'{t:.2f}' for t in tenant_b)})"
        f"\ntenant A's answers: {answers}"
    )
    # What the cost model and the caps refuse is refused at submit or fails its step; what
    # they accept runs. Either way the server keeps answering.
    assert set(answers["6,000 activities"]) == {422}
    assert set(answers["500 activities"]) == {201}
    assert all(len(codes) == ROUNDS for codes in answers.values())
    print(f"targets: p99 < 100 ms {'met' if p99 < 0.1 else 'MISSED'}, "
          f"B < 2 s {'met' if max(tenant_b) < 2.0 else 'MISSED'}")  # fmt: skip
    assert p99 < P99_BOUND, f"/healthz p99 {p99 * 1000:.1f} ms"
    assert max(tenant_b) < B_BOUND, f"tenant B's slowest workflow took {max(tenant_b):.2f} s"
