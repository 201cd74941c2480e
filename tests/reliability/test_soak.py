"""Soak: a bounded loop of start / query / signal / cancel / list against `wovyr serve` on
loopback, sampling the server's RSS, open file descriptors and request latency. After
warm-up they must stay flat. CI runs a short soak; a long one is a documented command:

    WOVYR_SOAK_SECONDS=1800 .venv/bin/python -m pytest tests/reliability/test_soak.py -s
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.server.test_serve_process import Server, client, make_server  # noqa: F401 - fixture

SECONDS = float(os.environ.get("WOVYR_SOAK_SECONDS", "20"))
WAITS = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: soak}
activities:
  - {id: hold, wait: {signal: go}}
  - {id: done, needs: [hold], set: {ok: true}}
"""


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


@pytest.mark.slow
@pytest.mark.timeout(int(SECONDS) + 180)
def test_soak_memory_fds_and_latency_stay_flat(make_server: Callable[..., Server]) -> None:  # noqa: F811
    server = make_server()
    server.start()
    assert server.proc is not None
    pid = server.proc.pid
    latencies: list[float] = []
    samples: list[tuple[float, int, int]] = []
    with client(server) as http:

        def call(method: str, url: str, **kw: object) -> dict[str, object]:
            began = time.perf_counter()
            response = http.request(method, url, **kw)  # type: ignore[arg-type]
            latencies.append(time.perf_counter() - began)
            assert response.status_code < 300, (url, response.status_code, response.text)
            body: dict[str, object] = response.json()
            return body

        start = time.monotonic()
        next_sample = start
        rounds = 0
        while time.monotonic() - start < SECONDS and rounds < 100_000:  # bounded both ways
            kept = call("POST", "/api/v1/workflows", json={"definition": WAITS})["id"]
            dropped = call("POST", "/api/v1/workflows", json={"definition": WAITS})["id"]
            call("GET", f"/api/v1/workflows/{kept}")
            call("POST", f"/api/v1/workflows/{kept}/signal", json={"name": "go"})
            call("DELETE", f"/api/v1/workflows/{dropped}")
            call("GET", "/api/v1/workflows", params={"limit": 20})
            rounds += 1
            if time.monotonic() >= next_sample:
                samples.append((time.monotonic() - start, rss_kib(pid), open_fds(pid)))
                next_sample += 1.0
    assert server.stop() == 0
    assert len(samples) >= 6, "too few samples"
    third = len(samples) // 3
    middle, last = samples[third : 2 * third], samples[2 * third :]
    rss_middle = statistics.mean(s[1] for s in middle)
    rss_last = statistics.mean(s[1] for s in last)
    span = statistics.mean(s[0] for s in last) - statistics.mean(s[0] for s in middle)
    slope = (rss_last - rss_middle) / span  # KiB per second after warm-up
    fds_after_warmup = [s[2] for s in samples[third:]]
    p99 = sorted(latencies)[int(len(latencies) * 0.99)]
    print(
        f"soak: {rounds} rounds, {len(latencies)} requests in {SECONDS:.0f}s; "
        f"RSS {samples[third][1]} -> {samples[-1][1]} KiB (slope {slope:.1f} KiB/s), "
        f"fds {min(fds_after_warmup)}..{max(fds_after_warmup)}, p99 {p99 * 1000:.1f} ms"
    )
    assert rss_last <= rss_middle * 1.15, f"RSS grew {rss_middle} -> {rss_last} KiB"
    assert max(fds_after_warmup) - min(fds_after_warmup) <= 10, "file descriptors grew"
    assert p99 < 1.0, f"p99 latency {p99:.3f}s"
