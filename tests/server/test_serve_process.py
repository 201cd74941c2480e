"""Acceptance: `wovyr serve` as a real process on a loopback port, over real HTTP.

- a `wait: {timer: {after: 2s}}` workflow submitted over HTTP completes with no CLI involved;
- an `every: 1s` schedule created over HTTP starts executions through the server alone;
- SIGKILL in the middle of a multi-step workflow, restart: it completes from its last
  checkpoint, and no step whose result was recorded runs again;
- SIGTERM: a clean exit (code 0) that releases the leases it held;
- an idle connection is kept as long as `WOVYR_KEEP_ALIVE_SECONDS` says.

Waiting is bounded polling against a deadline, never a fixed sleep; only the keep-alive
test waits a fixed 6 s, since that a connection stays open can only be seen by waiting.
"""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.probe import answers

pytestmark = pytest.mark.slow
ACTIVITIES = Path(__file__).with_name("step_activities.py")
WOVYR = [sys.executable, "-c", "import sys; from wovyr.cli.main import main; sys.exit(main())"]
TIMER_FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: nap}
activities:
  - id: wait
    wait: {timer: {after: 2s}}
  - id: after
    needs: [wait]
    set: {woke: true}
output: {woke: "${{ activities.after.output.woke }}"}
"""
TICK_FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: tick}
activities:
  - id: a
    set: {x: 1}
"""
STEPS_FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: steps}
activities:
  - {id: s1, tool: step, with: {name: s1}}
  - id: s2
    tool: step
    with: {name: s2}
    needs: [s1]
    retry: {max_attempts: 5, initial_interval: 0}
  - {id: s3, tool: step, with: {name: s3}, needs: [s2]}
"""


def wait_for(check: Callable[[], Any], seconds: float, what: str) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Server:
    """One `wovyr serve` process on a free loopback port."""

    def __init__(self, home: Path, env: dict[str, str]) -> None:
        self.home = home
        self.env = {**os.environ, "WOVYR_HOME": str(home), **env}
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.runs = 0

    def start(self) -> None:
        self.runs += 1
        command = [
            *WOVYR,
            "serve",
            "--port",
            str(self.port),
            "--activities",
            str(ACTIVITIES),
            "--log-level",
            "warning",
        ]
        with (self.home / f"serve-{self.runs}.out").open("wb") as out:
            self.proc = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, env=self.env
            )
        wait_for(self._ready, 30, "the server to be ready")

    def _ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"the server exited: {self.output()}")
        return answers(self.base)

    def output(self) -> str:
        return (self.home / f"serve-{self.runs}.out").read_text(errors="replace")

    def bootstrap_token(self) -> str:
        for line in (self.home / "serve-1.out").read_text().splitlines():
            if line.strip().startswith("wvr_"):
                return line.strip()
        raise AssertionError("no bootstrap key was printed")

    def stop(self, sig: int = signal.SIGTERM) -> int:
        assert self.proc is not None
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=30)


@pytest.fixture
def make_server(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    servers: list[Server] = []

    def make(**env: str) -> Server:
        settings = {"WOVYR_DISPATCH_INTERVAL_SECONDS": "0.2", "WOVYR_LEASE_SECONDS": "1.5", **env}
        server = Server(tmp_path / "home", settings)
        server.home.mkdir(exist_ok=True)
        servers.append(server)
        return server

    yield make
    for server in servers:
        if server.proc is not None and server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait(timeout=30)


def client(server: Server) -> httpx.Client:
    token = server.bootstrap_token()
    return httpx.Client(
        base_url=server.base, headers={"Authorization": f"Bearer {token}"}, timeout=10
    )


def status_of(http: httpx.Client, execution_id: str) -> str:
    r = http.get(f"/api/v1/workflows/{execution_id}")
    assert r.status_code == 200, r.text
    status: str = r.json()["status"]
    return status


@pytest.mark.timeout(120)
def test_timer_workflow_completes_over_http(make_server: Callable[..., Server]) -> None:
    server = make_server()
    server.start()
    with client(server) as http:
        began = time.monotonic()
        r = http.post("/api/v1/workflows", json={"definition": TIMER_FLOW})
        assert r.status_code == 201, r.text
        eid = r.json()["id"]
        wait_for(lambda: status_of(http, eid) == "completed", 30, "the timer workflow")
        assert time.monotonic() - began >= 2.0
        assert http.get(f"/api/v1/workflows/{eid}").json()["output"] == {"woke": True}
    assert server.stop() == 0


@pytest.mark.timeout(120)
def test_schedule_fires_through_the_server(make_server: Callable[..., Server]) -> None:
    server = make_server()
    server.start()
    with client(server) as http:
        r = http.post(
            "/api/v1/schedules", json={"id": "each-second", "definition": TICK_FLOW, "every": "1s"}
        )
        assert r.status_code == 201, r.text

        def two_done() -> bool:
            items = http.get("/api/v1/workflows", params={"workflow": "tick"}).json()["items"]
            return len([i for i in items if i["status"] == "completed"]) >= 2

        wait_for(two_done, 30, "two scheduled executions")
        assert http.get("/api/v1/schedules/each-second").json()["fired"] >= 2
    assert server.stop() == 0


@pytest.mark.timeout(180)
def test_sigkill_mid_step_then_restart_completes_without_repeats(
    make_server: Callable[..., Server], tmp_path: Path
) -> None:
    effects, marker = tmp_path / "effects.log", tmp_path / "go-on"
    server = make_server(
        WOVYR_TEST_EFFECTS=str(effects), WOVYR_TEST_MARKER=str(marker), WOVYR_TEST_BLOCK_AT="s2"
    )
    server.start()
    with client(server) as http:
        r = http.post("/api/v1/workflows", json={"definition": STEPS_FLOW, "id": "crash-me"})
        assert r.status_code == 201, r.text

        def s2_in_flight() -> bool:
            return effects.exists() and "crash-me s2 1 start" in effects.read_text()

        wait_for(s2_in_flight, 30, "step s2 to start")
        assert server.stop(signal.SIGKILL) == -signal.SIGKILL
        marker.touch()
        server.start()
        wait_for(lambda: status_of(http, "crash-me") == "completed", 60, "the resumed workflow")
        assert "wvr_" not in server.output()  # the bootstrap key is printed on the first start only
        history = http.get("/api/v1/workflows/crash-me/history", params={"limit": 1000}).json()
    assert server.stop() == 0

    lines = effects.read_text().split("\n")
    starts = [ln.split()[1] for ln in lines if ln.endswith(" start")]
    assert starts.count("s1") == 1, lines  # recorded before the kill: never run again
    assert starts.count("s2") == 2, lines  # in flight at the kill: run again (at least once)
    assert starts.count("s3") == 1, lines
    completed = [
        e["data"]["activity"] for e in history["items"] if e["type"] == "ActivityCompleted"
    ]
    assert sorted(completed) == ["s1", "s2", "s3"]  # each result recorded exactly once
    starts_of_s2 = [
        (e["data"]["attempt"], e["data"].get("recovery"))
        for e in history["items"]
        if e["type"] == "ActivityStarted" and e["data"]["activity"] == "s2"
    ]
    # The re-run was recorded before it ran: the same attempt (same key), as a recovery.
    assert starts_of_s2 == [(1, None), (1, 1)]


@pytest.mark.timeout(120)
def test_sigterm_exits_cleanly_and_releases_leases(
    make_server: Callable[..., Server], tmp_path: Path
) -> None:
    effects, marker = tmp_path / "effects.log", tmp_path / "never"
    server = make_server(
        WOVYR_TEST_EFFECTS=str(effects),
        WOVYR_TEST_MARKER=str(marker),
        WOVYR_TEST_BLOCK_AT="s1",
        WOVYR_SHUTDOWN_GRACE_SECONDS="0.5",
        WOVYR_LEASE_SECONDS="600",
    )
    server.start()
    with client(server) as http:
        http.post("/api/v1/workflows", json={"definition": STEPS_FLOW, "id": "held"})
        wait_for(lambda: effects.exists() and "held s1 1 start" in effects.read_text(), 30, "s1")
    assert server.stop(signal.SIGTERM) == 0
    from wovyr.store.sqlite import SQLiteStore

    store = SQLiteStore(server.home / "wovyr.db")
    try:
        record = store.load("held", "default")
        assert record is not None and record.lease_owner is None  # released, not left to expire
    finally:
        store.close()


@pytest.mark.timeout(120)
def test_serving_says_once_that_tenant_default_is_restricted_and_how_to_open_it(
    make_server: Callable[..., Server],
) -> None:
    server = make_server()
    server.start()
    said = server.output()
    assert said.count("tenant 'default' now runs under the restricted side-effect policy") == 1
    for command in ("--shell ", "--allow-host localhost:11434 ", "--preset trusted "):
        assert f"\n  wovyr admin tenants set default {command}" in said, said
    assert server.stop() == 0
    server.start()  # the policy is set now: nothing more to say
    assert "side-effect policy" not in server.output()
    assert server.stop() == 0


def _idle_connection(port: int) -> socket.socket:
    """A connection that made one request (its answer read whole) and is now idle."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("GET", "/readyz")
    answer = connection.getresponse()
    answer.read()
    assert answer.status == 200 and not answer.will_close
    assert connection.sock is not None
    sock: socket.socket = connection.sock
    return sock


def _closed_by_the_server(sock: socket.socket, seconds: float) -> bool:
    """Whether the server closes `sock` (an idle keep-alive connection) within `seconds`."""
    sock.settimeout(seconds)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False


@pytest.mark.timeout(120)
def test_the_keep_alive_setting_reaches_the_server(make_server: Callable[..., Server]) -> None:
    """`WOVYR_KEEP_ALIVE_SECONDS` is how long the server keeps an idle connection open (65 s
    by default: longer than clients keep theirs, see tests/unit/test_settings_table.py). Set
    to 7 s here: an idle connection is still open after 6 s (uvicorn's own 5 s would have
    closed it), and the server closes it itself after that, well within the 30 s waited."""
    server = make_server(WOVYR_KEEP_ALIVE_SECONDS="7")
    server.start()
    with _idle_connection(server.port) as sock:
        assert not _closed_by_the_server(sock, 6)
        assert _closed_by_the_server(sock, 30)
    assert server.stop() == 0
