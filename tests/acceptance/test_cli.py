"""The `wovyr` command as a user runs it: real subprocesses over a temporary embedded store."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def wovyr(home: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WOVYR_HOME": str(home)}
    env.pop("WOVYR_DATABASE_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "wovyr", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,  # exit codes are what these tests assert
        cwd=ROOT,
    )


def test_run_completes_with_exit_0(home: Path) -> None:
    done = wovyr(home, "run", str(EXAMPLES / "hello.yaml"), "-i", "name=Ada", "--json")
    assert done.returncode == 0, done.stderr
    view = json.loads(done.stdout)
    assert view["status"] == "completed" and view["output"]["greeting"] == "Hello, Ada!"


def test_failed_saga_exits_1_and_compensates(home: Path) -> None:
    done = wovyr(
        home,
        "run",
        str(EXAMPLES / "order-saga.yaml"),
        "-a",
        "examples/activities.py",
        "-i",
        "order_id=A-2",
        "-i",
        "amount=-1",
        "--json",
    )
    assert done.returncode == 1, done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["error"]["type"] == "CardDeclined"
    assert error["compensation"] == [
        {"activity": "reserve", "status": "compensated", "error": None}
    ]


def test_waiting_exits_3_then_approve_through_the_cli(home: Path) -> None:
    done = wovyr(
        home,
        "run",
        str(EXAMPLES / "approval-escalation.yaml"),
        "-i",
        "request_id=R1",
        "-i",
        "amount=5000",
        "--id",
        "req-1",
        "--json",
    )
    assert done.returncode == 3, done.stderr
    assert json.loads(done.stdout)["status"] == "waiting"
    listed = json.loads(wovyr(home, "workflows", "list", "--json").stdout)
    assert [i["id"] for i in listed["items"]] == ["req-1"]
    approved = wovyr(
        home,
        "workflows",
        "approve",
        "req-1",
        "manager_approval",
        "--by",
        "managers",
        "--comment",
        "ok",
    )
    assert approved.returncode == 0, approved.stderr
    resumed = wovyr(
        home, "run", str(EXAMPLES / "approval-escalation.yaml"), "--id", "req-1", "--json"
    )
    assert json.loads(resumed.stdout)["activities"]["decision"]["status"] == "completed"
    history = json.loads(wovyr(home, "workflows", "history", "req-1", "--json").stdout)
    assert "ApprovalDecided" in [e["type"] for e in history]


def test_bad_input_gets_clear_errors_and_exit_codes(home: Path, tmp_path: Path) -> None:
    usage = wovyr(home, "run")
    assert usage.returncode == 2 and "Traceback" not in usage.stderr
    missing = wovyr(home, "workflows", "show", "nope")
    assert missing.returncode == 4 and "not found" in missing.stderr
    assert "Traceback" not in missing.stderr
    bad_input = wovyr(home, "run", str(EXAMPLES / "hello.yaml"), "-i", "nme=x")
    assert bad_input.returncode == 1 and "Traceback" not in bad_input.stderr
    broken = tmp_path / "broken.yaml"
    broken.write_text(
        "apiVersion: wovyr/v1\nkind: Workflow\nmetadata: {name: b}\nactivities: [{id: a}]\n"
    )
    bad_file = wovyr(home, "run", str(broken))
    assert bad_file.returncode == 1 and f"{broken}:4:" in bad_file.stderr + bad_file.stdout
    unregistered = wovyr(home, "run", str(EXAMPLES / "order-saga.yaml"), "-i", "order_id=x")
    assert unregistered.returncode == 1 and unregistered.stdout == ""  # refused: not started
    for tool in ("inventory.reserve", "inventory.release", "payments.refund", "shipping.ship"):
        assert f"no activity handler is registered as {tool!r}" in unregistered.stderr
    assert wovyr(home, "workflows", "list", "--json").stdout.count('"order-saga"') == 0


def test_definitions_and_schedules_through_the_cli(home: Path) -> None:
    applied = wovyr(home, "definitions", "apply", str(EXAMPLES / "hello.yaml"), "--json")
    assert json.loads(applied.stdout)[0]["result"] == "applied"
    again = wovyr(home, "definitions", "apply", str(EXAMPLES / "hello.yaml"), "--json")
    assert json.loads(again.stdout)[0]["result"] == "unchanged"
    created = wovyr(
        home,
        "schedules",
        "create",
        "greet",
        "--workflow",
        "hello",
        "--cron",
        "0 9 * * MON-FRI",
        "--tz",
        "Europe/Berlin",
        "--json",
    )
    assert created.returncode == 0, created.stderr
    shown = json.loads(created.stdout)
    assert len(shown["next_fire_times"]) == 5
    bad = wovyr(home, "schedules", "create", "x", "--workflow", "hello", "--cron", "61 * * * *")
    assert bad.returncode == 1 and "minute" in bad.stderr.lower()
    assert json.loads(wovyr(home, "schedules", "list", "--json").stdout)[0]["id"] == "greet"


def test_worker_drives_detached_runs_and_stops_on_sigterm(home: Path) -> None:
    """One worker serves a YAML run and a workflow function's run (started by name from
    another process, which applied it when it loaded the module)."""
    started = wovyr(home, "run", str(EXAMPLES / "hello.yaml"), "--detach", "--id", "bg-1")
    assert started.returncode == 0, started.stderr
    flows = ["-a", str(EXAMPLES / "activities.py"), "-a", str(EXAMPLES / "order_saga.py")]
    started = wovyr(
        home, "run", "--workflow", "order-saga-py", *flows, "-i", "order_id=B-1", "--detach",
        "--id", "bg-2",
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    env = {**os.environ, "WOVYR_HOME": str(home), "WOVYR_POLL_INTERVAL_SECONDS": "0.05"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "wovyr", "worker", *flows],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        for execution in ("bg-1", "bg-2"):
            deadline = time.monotonic() + 30
            status = ""
            while time.monotonic() < deadline and status != "completed":
                shown = wovyr(home, "workflows", "show", execution, "--json")
                status = json.loads(shown.stdout)["status"] if shown.returncode == 0 else ""
            assert status == "completed", execution
        shown = json.loads(wovyr(home, "workflows", "show", "bg-2", "--json").stdout)
        assert list(shown["activities"]) == ["reserve", "charge", "ship"]
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "leases released" in err
