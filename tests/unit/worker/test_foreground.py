"""Foreground runs (`run_workflow`, `arun_workflow`, `drive`) drive the whole tree: child
workflows (recursively), maps over children, retry back-offs and timers due within
`wait_up_to`; they stop, `waiting`, only for signals, approvals and later timers.

The clock is a ManualClock that jumps to each deadline slept for: the test never sleeps, and
a foreground run that waited on the wrong thing would hang (and hit the per-test timeout)
or stop early, instead of passing by luck.
"""

from __future__ import annotations

import asyncio
import textwrap
from datetime import UTC, datetime, timedelta

from wovyr import ActivityContext, ActivityError, ActivityRegistry, Engine, ManualClock
from wovyr.store.sqlite import SQLiteStore
from wovyr.worker import Worker
from wovyr.worker.run import Wait, arun_workflow, drive, run_workflow

START = datetime(2030, 1, 1, tzinfo=UTC)

LEAF = textwrap.dedent("""
    apiVersion: wovyr/v1
    kind: Workflow
    metadata: {name: leaf, version: "1"}
    inputs: {n: {type: integer, required: true}}
    activities:
      - {id: flaky, tool: t.flaky, with: {n: "${{ inputs.n }}"},
         retry: {max_attempts: 3, initial_interval: 30s}}
      - {id: nap, needs: [flaky], wait: {timer: {after: 20s}}}
    output: {n: "${{ activities.flaky.output }}"}
    """)
MIDDLE = textwrap.dedent("""
    apiVersion: wovyr/v1
    kind: Workflow
    metadata: {name: middle, version: "1"}
    inputs: {n: {type: integer, required: true}}
    activities:
      - {id: leaf, workflow: {name: leaf, input: {n: "${{ inputs.n }}"}}}
    output: "${{ activities.leaf.output.n }}"
    """)
ROOT = textwrap.dedent("""
    apiVersion: wovyr/v1
    kind: Workflow
    metadata: {name: root, version: "1"}
    activities:
      - id: lines
        for_each: "${{ [1, 2, 3, 4, 5, 6] }}"
        max_concurrency: 2
        workflow: {name: middle, input: {n: "${{ item }}"}}
    output: {sum: "${{ activities.lines.output.map(x, x).size() }}"}
    """)


class JumpingClock(ManualClock):
    """A ManualClock that moves to the deadline of whoever sleeps on it, at once."""

    def __init__(self) -> None:
        super().__init__(START)
        self.slept: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.advance(max(0.0, seconds))
        await asyncio.sleep(0)


def _engine(clock: ManualClock) -> Engine:
    registry = ActivityRegistry()

    def flaky(n: int, ctx: ActivityContext) -> int:
        if ctx.attempt == 1:  # every leaf fails once: a 30 s back-off in each
            raise ActivityError("not yet", type="Flaky")
        return n * 10

    registry.register("t.flaky", flaky)
    engine = Engine(SQLiteStore(), clock=clock, activities=registry)
    for text in (LEAF, MIDDLE):
        engine.apply(text)
    return engine


def test_a_map_over_child_workflows_with_back_offs_and_timers_runs_to_the_end() -> None:
    clock = JumpingClock()
    engine = _engine(clock)
    view = run_workflow(engine, ROOT, execution_id="root-1")
    assert view.status == "completed", view
    assert view.output == {"sum": 6}
    items = view.activities["lines"]["items"]
    assert [item["output"] for item in items] == [10, 20, 30, 40, 50, 60]
    grandchildren = engine.list(parent_id="root-1::lines[0]").items
    assert [(c.id, c.status) for c in grandchildren] == [("root-1::lines[0]::leaf", "completed")]
    # It slept on the engine's clock, for back-offs and timers only: no wall-clock polling.
    assert clock.slept and all(0 < s <= 30 for s in clock.slept)
    assert clock.now() - START < timedelta(minutes=10)


def test_a_later_timer_stops_the_run_as_waiting_and_says_what_it_waits_for() -> None:
    clock = JumpingClock()
    engine = _engine(clock)
    view = run_workflow(engine, MIDDLE, {"n": 1}, execution_id="m-1", wait_up_to=10)
    assert view.status == "waiting"  # the leaf's 30 s back-off is later than 10 s
    assert clock.slept == []

    async def resume() -> tuple[str, tuple[Wait, ...]]:
        worker = Worker(engine)
        try:
            ran = await drive(worker, "m-1", wait_up_to=10)
            return ran.status, ran.waits
        finally:
            await worker.close()

    status, waits = asyncio.run(resume())
    assert status == "waiting"
    assert [(w.execution_id, w.activity, w.kind) for w in waits] == [
        ("m-1::leaf", "flaky", "retry")
    ]
    # With a longer horizon the same execution runs to the end.
    assert run_workflow(engine, MIDDLE, execution_id="m-1", wait_up_to=60).status == "completed"


def test_signals_and_approvals_anywhere_in_the_tree_stop_the_run_at_once() -> None:
    clock = JumpingClock()
    engine = _engine(clock)
    engine.apply(
        textwrap.dedent("""
        apiVersion: wovyr/v1
        kind: Workflow
        metadata: {name: asks, version: "1"}
        activities:
          - {id: ok, wait: {approval: {approvers: [ada], timeout: 20s}}}
          - {id: go, needs: [ok], wait: {signal: go}}
        """)
    )
    parent = textwrap.dedent("""
        apiVersion: wovyr/v1
        kind: Workflow
        metadata: {name: parent, version: "1"}
        activities:
          - {id: child, workflow: {name: asks}}
        """)

    async def main() -> None:  # the async variant, inside a running loop
        view = await arun_workflow(engine, parent, execution_id="p-1")
        assert view.status == "waiting"
        worker = Worker(engine)
        try:
            ran = await drive(worker, "p-1")
        finally:
            await worker.close()
        # The approval's 20 s timeout is a deadline, not something to wait for here.
        assert clock.slept == []
        assert ran.waits == (Wait("p-1::child", "ok", "approval", approvers=("ada",)),)
        engine.approve("p-1::child", "ok", by="ada")
        view = await arun_workflow(engine, parent, execution_id="p-1")
        assert view.status == "waiting"
        engine.signal("p-1::child", "go")
        view = await arun_workflow(engine, parent, execution_id="p-1")
        assert view.status == "completed"

    asyncio.run(main())


LIMITED = textwrap.dedent("""
    apiVersion: wovyr/v1
    kind: Workflow
    metadata: {name: limited, version: "1"}
    inputs: {units: {type: integer, default: 1}}
    activities:
      - id: first
        tool: t.flaky
        with: {n: 1}
        retry: {max_attempts: 2, initial_interval: 1s}
        rate_limit: {key: api, limit: 1, per: 2s, burst: 4, units: "${{ inputs.units }}"}
      - id: lines
        needs: [first]
        for_each: "${{ [1, 2, 3] }}"
        tool: t.flaky
        with: {n: "${{ item }}"}
        retry: {max_attempts: 2, initial_interval: 1s}
        rate_limit: {key: api, limit: 1, per: 2s, burst: 4, units: "${{ inputs.units }}"}
    output: "${{ activities.lines.output }}"
    """)


def test_rate_limit_holds_within_wait_up_to_are_waited_out_and_a_longer_one_stops_the_run() -> None:
    # Every attempt fails once (a 1 s back-off) and takes a unit of a bucket refilled one
    # unit every 2 s: the run sleeps on the engine's clock for the holds as for the
    # back-offs and ends completed.
    clock = JumpingClock()
    engine = _engine(clock)
    view = run_workflow(engine, LIMITED, execution_id="l-1", wait_up_to=5)
    assert view.status == "completed", view
    assert view.output == [10, 20, 30]
    assert clock.slept and max(clock.slept) <= 5
    # A hold longer than --wait-up-to stops the run, saying what it waits for.
    clock = JumpingClock()
    engine = _engine(clock)

    async def held() -> tuple[str, tuple[Wait, ...]]:
        worker = Worker(engine)
        try:
            record = await worker.start(LIMITED, {"units": 4}, execution_id="l-2")
            ran = await drive(worker, record.id, wait_up_to=5)
            return ran.status, ran.waits
        finally:
            await worker.close()

    status, waits = asyncio.run(held())
    assert status == "waiting"
    # the first attempt took the bucket's 4 units and failed; its retry, 1 s later (slept
    # for), finds half a unit and waits 7 s for 4
    assert [(w.execution_id, w.kind, w.reason) for w in waits] == [
        ("l-2", "flow", "rate limit api: next slot in 7.0 s")
    ]
    assert clock.slept == [1.0]
