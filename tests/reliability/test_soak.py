"""Soak: a counted loop of start / query / signal / cancel / list against `wovyr serve` on
loopback, sampling the server's RSS and open file descriptors every `SAMPLE_EVERY` rounds.
After warm-up they must stay flat. The loop is bounded by rounds, not seconds, so it does the
same work on a fast or a slow machine; request latency is printed, not asserted (machines
here differ 3x from day to day: timings belong in `bench/`, e.g. `bench/bench_api.py`).
CI runs a short soak (900 rounds: 20 to 55 s, as loaded as the machine is); a long one (about 30
minutes) is a documented command:

    WOVYR_SOAK_ROUNDS=80000 .venv/bin/python -m pytest tests/reliability/test_soak.py -s
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.server.test_serve_process import Server, client, make_server  # noqa: F401 - fixture

ROUNDS = int(os.environ.get("WOVYR_SOAK_ROUNDS", "900"))
SAMPLE_EVERY = max(1, ROUNDS // 30)
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
@pytest.mark.timeout(max(300, ROUNDS // 2))  # a safety net: about 40 rounds a second here
def test_soak_memory_and_fds_stay_flat(make_server: Callable[..., Server]) -> None:  # noqa: F811
    server = make_server()
    server.start()
    assert server.proc is not None
    pid = server.proc.pid
    latencies: list[float] = []
    samples: list[tuple[int, int, int]] = []  # (round, RSS KiB, open fds)
    with client(server) as http:

        def call(method: str, url: str, **kw: object) -> dict[str, object]:
            began = time.perf_counter()
            response = http.request(method, url, **kw)  # type: ignore[arg-type]
            latencies.append(time.perf_counter() - began)
            assert response.status_code < 300, (url, response.status_code, response.text)
            body: dict[str, object] = response.json()
            return body

        for rounds in range(1, ROUNDS + 1):
            kept = call("POST", "/api/v1/workflows", json={"definition": WAITS})["id"]
            dropped = call("POST", "/api/v1/workflows", json={"definition": WAITS})["id"]
            call("GET", f"/api/v1/workflows/{kept}")
            call("POST", f"/api/v1/workflows/{kept}/signal", json={"name": "go"})
            call("POST", f"/api/v1/workflows/{dropped}/cancel")
            call("GET", "/api/v1/workflows", params={"limit": 20})
            if rounds % SAMPLE_EVERY == 0:
                samples.append((rounds, rss_kib(pid), open_fds(pid)))
    assert server.stop() == 0
    assert len(samples) >= 6, "too few samples"
    third = len(samples) // 3
    middle, last = samples[third : 2 * third], samples[2 * third :]
    rss_middle = statistics.mean(s[1] for s in middle)
    rss_last = statistics.mean(s[1] for s in last)
    span = statistics.mean(s[0] for s in last) - statistics.mean(s[0] for s in middle)
    slope = (rss_last - rss_middle) / span * 100  # KiB per 100 rounds after warm-up
    fds_after_warmup = [s[2] for s in samples[third:]]
    p99 = sorted(latencies)[int(len(latencies) * 0.99)]
    print(
        f"soak: {ROUNDS} rounds, {len(latencies)} requests; "
        f"RSS {samples[third][1]} -> {samples[-1][1]} KiB (slope {slope:.1f} KiB/100 rounds), "
        f"fds {min(fds_after_warmup)}..{max(fds_after_warmup)}, p99 {p99 * 1000:.1f} ms"
    )
    assert rss_last <= rss_middle * 1.15, f"RSS grew {rss_middle} -> {rss_last} KiB"
    assert max(fds_after_warmup) - min(fds_after_warmup) <= 10, "file descriptors grew"
