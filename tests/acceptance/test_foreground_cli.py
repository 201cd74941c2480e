"""`wovyr run` drives what its execution needs, as a user runs it (real subprocesses over a
temporary embedded store, no worker): child workflows, maps over children, retry back-offs
and short timers run in the foreground; it stops (exit 3) only for signals, approvals and
timers later than --wait-up-to, printing the exact commands that continue it.

Timers here are real and short (200 ms); every wait is bounded by the subprocess timeout.
"""

from __future__ import annotations

import json
import shlex
import textwrap
from pathlib import Path

import pytest
from tests.acceptance.test_cli import EXAMPLES, wovyr

FLAKY = textwrap.dedent("""
    import wovyr

    @wovyr.activity("flaky.once")
    def once(ctx: wovyr.ActivityContext) -> dict:
        if ctx.attempt < 2:
            raise wovyr.ActivityError("not yet", type="Flaky")
        return {"attempt": ctx.attempt}
    """)
BACKOFF = textwrap.dedent("""
    apiVersion: wovyr/v1
    kind: Workflow
    metadata: {name: backoff, version: "1"}
    activities:
      - {id: flaky, tool: flaky.once, retry: {max_attempts: 3, initial_interval: 200ms}}
      - {id: nap, needs: [flaky], wait: {timer: {after: 200ms}}}
      - {id: ok, needs: [nap], wait: {approval: {approvers: [ada]}}}
    output: {attempt: "${{ activities.flaky.output.attempt }}"}
    """)
MAP = textwrap.dedent("""
    apiVersion: wovyr/v1
    kind: Workflow
    metadata: {name: map-lines, version: "1"}
    inputs:
      skus: {type: array, default: [A, B, C, D, E, F]}
    activities:
      - id: lines
        for_each: "${{ inputs.skus }}"
        max_concurrency: 2
        workflow: {name: order-line, version: "1", input: {sku: "${{ item }}", unit_price: 2.0}}
    output: {totals: "${{ activities.lines.output.map(line, line.total) }}"}
    """)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def _all_executions(home: Path) -> list[dict[str, object]]:
    listed = wovyr(home, "workflows", "list", "--json", "--limit", "100")
    assert listed.returncode == 0, listed.stderr
    items: list[dict[str, object]] = json.loads(listed.stdout)["items"]
    return items


def test_the_parent_child_example_runs_its_children_and_exits_0(home: Path) -> None:
    assert wovyr(home, "definitions", "apply", str(EXAMPLES / "order-line.yaml")).returncode == 0
    done = wovyr(
        home,
        "run",
        str(EXAMPLES / "parent-child.yaml"),
        "-a",
        "examples/activities.py",
        "-i",
        "order_id=O-1",
        "--json",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    view = json.loads(done.stdout)
    assert view["status"] == "completed"
    assert view["output"] == {"order_id": "O-1", "total": 43.0, "lines": ["WIDGET-1", "GADGET-7"]}
    executions = _all_executions(home)
    assert len(executions) == 3
    assert {e["status"] for e in executions} == {"completed"}


def test_a_map_over_six_child_workflows_exits_0(home: Path, tmp_path: Path) -> None:
    assert wovyr(home, "definitions", "apply", str(EXAMPLES / "order-line.yaml")).returncode == 0
    flow = tmp_path / "map.yaml"
    flow.write_text(MAP)
    done = wovyr(home, "run", str(flow), "--id", "m-1", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["output"] == {"totals": [2.0] * 6}
    children = [e for e in _all_executions(home) if e["parent_id"] == "m-1"]
    assert len(children) == 6 and {c["status"] for c in children} == {"completed"}


def test_back_offs_and_short_timers_run_here_and_an_approval_prints_its_commands(
    home: Path, tmp_path: Path
) -> None:
    (tmp_path / "flaky.py").write_text(FLAKY)
    flow = tmp_path / "backoff.yaml"
    flow.write_text(BACKOFF)
    activities = str(tmp_path / "flaky.py")
    stopped = wovyr(home, "run", str(flow), "-a", activities, "--id", "b-1")
    assert stopped.returncode == 3, stopped.stdout + stopped.stderr
    assert "b-1 (backoff v1): waiting" in stopped.stdout
    lines = [line.strip() for line in stopped.stdout.splitlines()]
    approve = "wovyr workflows approve b-1 ok --by ada"  # the store: WOVYR_HOME, as given
    resume = f"wovyr run {flow} -a {activities} --id b-1"
    assert approve in lines and resume in lines, stopped.stdout
    # The printed commands, run exactly as printed, finish the job.
    approved = wovyr(home, *shlex.split(approve)[1:])
    assert approved.returncode == 0, approved.stderr
    done = wovyr(home, *shlex.split(resume)[1:], "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    view = json.loads(done.stdout)
    assert view["status"] == "completed" and view["output"] == {"attempt": 2}
    assert view["activities"]["nap"]["status"] == "completed"


def test_a_timer_later_than_wait_up_to_stops_with_exit_3_and_status_waiting(
    home: Path, tmp_path: Path
) -> None:
    (tmp_path / "flaky.py").write_text(FLAKY)
    flow = tmp_path / "backoff.yaml"
    flow.write_text(BACKOFF)
    stopped = wovyr(
        home, "run", str(flow), "-a", str(tmp_path / "flaky.py"), "--wait-up-to", "0", "--json"
    )
    assert stopped.returncode == 3, stopped.stdout + stopped.stderr
    result = json.loads(stopped.stdout)
    assert result["status"] == "waiting"
    assert [(w["activity"], w["kind"], w["command"]) for w in result["waits"]] == [
        ("flaky", "retry", None)
    ]
    assert result["continue_with"].startswith(f"wovyr run {flow} -a ")


LIMITED = textwrap.dedent("""
    apiVersion: wovyr/v1
    kind: Workflow
    metadata: {name: limited, version: "1"}
    activities:
      - id: lines
        for_each: "${{ [1, 2, 3] }}"
        tool: flaky.once
        retry: {max_attempts: 3, initial_interval: 0s}
        rate_limit: {key: api, limit: 1, per: 200ms, burst: 1}
    output: "${{ activities.lines.output.size() }}"
    """)


def test_rate_limit_holds_shorter_than_wait_up_to_run_here_and_a_longer_one_exits_3(
    home: Path, tmp_path: Path
) -> None:
    # One unit every 200 ms for three items (each failing once): the run waits out the holds
    # in the foreground, like its back-offs, and completes (it used to stop, exit 3).
    (tmp_path / "flaky.py").write_text(FLAKY)
    flow = tmp_path / "limited.yaml"
    flow.write_text(LIMITED)
    activities = str(tmp_path / "flaky.py")
    done = wovyr(home, "run", str(flow), "-a", activities, "--id", "r-1", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    view = json.loads(done.stdout)
    assert view["status"] == "completed" and view["output"] == 3
    # A hold longer than --wait-up-to stops the run and says what it waits for.
    stopped = wovyr(home, "run", str(flow), "-a", activities, "--id", "r-2", "--wait-up-to", "0")
    assert stopped.returncode == 3, stopped.stdout + stopped.stderr
    lines = [line.strip() for line in stopped.stdout.splitlines()]
    held = [line for line in lines if line.startswith("rate limit api: next slot in ")]
    assert len(held) == 1 and "(r-2 holds its next attempts until " in held[0], stopped.stdout
