"""`wovyr worker --metrics-addr`: a real worker process on an embedded SQLite file exports
the counters of the work it did, in the Prometheus text format, over real HTTP.

Waiting is bounded polling against a deadline, never a fixed sleep.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
HELLO = str(ROOT / "examples" / "hello.yaml")
# name{labels} value, per the text exposition format
SAMPLE = re.compile(r'^([a-z_:][a-z0-9_:]*)(\{([a-z_]+="(?:[^"\\]|\\.)*",?)*\})? (\S+)$')


def wovyr_env(home: Path) -> dict[str, str]:
    env = {**os.environ, "WOVYR_HOME": str(home), "WOVYR_POLL_INTERVAL_SECONDS": "0.05"}
    env.pop("WOVYR_DATABASE_URL", None)
    env.pop("WOVYR_METRICS_ADDR", None)
    return env


def wovyr(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "wovyr", *args],
        capture_output=True,
        text=True,
        env=wovyr_env(home),
        timeout=60,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    return done


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_for(check: Callable[[], Any], seconds: float, what: str) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_worker_exports_the_counters_of_its_own_work(tmp_path: Path) -> None:
    home = tmp_path / "home"
    wovyr(home, "definitions", "apply", HELLO)
    # one execution started here and driven by the worker; one the worker starts itself
    wovyr(home, "run", HELLO, "--detach", "--id", "detached-1")
    wovyr(
        home, "schedules", "create", "greet", "--workflow", "hello", "--every", "1s", "--limit", "1"
    )
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "wovyr", "worker", "--metrics-addr", f"127.0.0.1:{port}"],
        env=wovyr_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    url = f"http://127.0.0.1:{port}/metrics"
    finished = (
        'wovyr_executions_finished_total{tenant="default",status="completed",workflow="hello"}'
    )
    started = 'wovyr_executions_started_total{tenant="default",workflow="hello"}'

    def scrape() -> str | None:
        assert proc.poll() is None, "the worker exited"
        try:
            text = httpx.get(url, timeout=5).text
        except httpx.TransportError:
            return None  # not listening yet
        counts = dict(_samples(text))
        return text if counts.get(finished, 0) >= 2 else None

    try:
        text = wait_for(scrape, 60, "the worker's counters")
        response = httpx.get(url, timeout=5)
        assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
        assert httpx.get(f"http://127.0.0.1:{port}/", timeout=5).status_code == 404
        ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5)  # the probes
        assert ready.status_code == 200
        assert ready.json()["checks"] == {"store": "ok", "migrations": "ok", "worker": "ok"}
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).json()["status"] == "ok"
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert f"metrics on http://127.0.0.1:{port}/metrics" in err

    for line in text.splitlines():
        if not line.startswith("#"):
            assert SAMPLE.match(line), line
    counts = dict(_samples(text))
    # the scheduled run was started by this worker; the detached one by another process:
    # both finished here, one started here
    assert counts[started] == 1 and counts[finished] == 2
    duration = 'wovyr_activity_duration_seconds_count{tenant="default",outcome="completed",'
    assert counts[duration + 'workflow="hello"}'] == 2  # `speak` of each (`set` is inline)
    assert "wovyr_queue_depth" in counts and "wovyr_worker_executions" in counts
    assert "detached-1" not in text  # never an execution id as a label
    with_tenant = [k for k in counts if k.startswith("wovyr_executions_")]
    assert with_tenant and all('tenant="default"' in k for k in with_tenant)


def _samples(text: str) -> list[tuple[str, float]]:
    out = []
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out.append((key, float(value)))
    return out
