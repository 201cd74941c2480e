"""Rate limits and activity concurrency keys as the worker applies them, on every store
(ManualClock): an attempt that finds no units waits on a durable timer (no attempt is
recorded, the execution holds no lease and shows what it waits for), then runs once the
bucket has units; the units are shared by every execution of the tenant."""

from __future__ import annotations

import asyncio
import textwrap

import pytest

from wovyr.activities.base import ActivityRegistry
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.platform.metrics import Metrics, MetricsObserver
from wovyr.store.flow import NewRateLimit
from wovyr.worker.worker import Worker

LIMITED = textwrap.dedent("""
    apiVersion: wovyr/v1
    kind: Workflow
    metadata: {name: limited}
    inputs:
      size: {type: integer, default: 1}
    activities:
      - id: call
        tool: t.call
        with: {n: "${{ inputs.size }}"}
        rate_limit: {key: api, limit: 2, per: 1s, units: "${{ input.n }}"}
    """)


def drive(engine: Engine) -> None:
    asyncio.run(Worker(engine, poll_interval=0.01).run_until_idle())


def test_attempts_wait_for_units_on_a_timer_and_run_when_the_bucket_refills(
    engine: Engine, clock: ManualClock, registry: ActivityRegistry
) -> None:
    calls: list[str] = []
    registry.activity("t.call")(lambda n: calls.append(str(n)) or n)
    metrics = Metrics()
    engine.store.add_observer(MetricsObserver(metrics, lambda t, i: engine.store.load(i, t)))
    ids = [engine.start(LIMITED, {}, execution_id=f"r{i}").id for i in range(5)]
    drive(engine)
    assert len(calls) == 2  # the bucket held 2 units
    labels = {"kind": "rate_limit", "key": "api"}
    assert metrics.value("wovyr_flow_holds_total", engine.tenant, **labels) == 3
    # told to wait 0.5, 1.0 and 1.5 s: one after the other
    throttled = metrics.value("wovyr_flow_throttled_seconds_total", engine.tenant, **labels)
    assert throttled == pytest.approx(3.0)
    waiting = [i for i in ids if engine.query(i).status == "waiting"]
    assert len(waiting) == 3
    view = engine.query(waiting[0])
    assert view.waiting_on is not None and view.waiting_on.startswith(
        "rate limit api: next slot in "
    )
    assert view.activities["call"]["attempt"] == 0  # held before any attempt: not a retry
    record = engine.store.load(waiting[0], engine.tenant)
    assert record is not None and record.lease_owner is None  # it holds no worker slot
    for _ in range(6):  # half a second at a time: one unit each
        clock.advance(0.5)
        drive(engine)
    assert len(calls) == 5
    assert all(engine.query(i).status == "completed" for i in ids)
    assert all(engine.query(i).activities["call"]["attempt"] == 1 for i in ids)


def test_weighted_units_and_a_declared_bucket(
    engine: Engine, clock: ManualClock, registry: ActivityRegistry
) -> None:
    registry.activity("t.call")(lambda n: n)
    named = LIMITED.replace("rate_limit: {key: api, limit: 2, per: 1s,", "rate_limit: {key: llm,")
    engine.store.set_rate_limit(NewRateLimit(engine.tenant, "llm", 10, 1.0, "admin", clock.now()))
    big = engine.start(named, {"size": 8}, execution_id="big").id
    drive(engine)
    assert engine.query(big).status == "completed"
    small = engine.start(named, {"size": 4}, execution_id="small").id
    drive(engine)  # 2 units left: 2 more seconds
    assert engine.query(small).waiting_on == "rate limit llm: next slot in 2.0 s"
    clock.advance(2.0)
    drive(engine)
    assert engine.query(small).status == "completed"
    other = engine.for_tenant("acme")  # another tenant has no bucket "llm"
    held = other.start(named, {"size": 1}, execution_id="x").id
    drive(other)
    assert other.query(held).waiting_on == "rate limit llm: no such bucket"


MAPPED = textwrap.dedent("""
    apiVersion: wovyr/v1
    kind: Workflow
    metadata: {name: mapped}
    inputs:
      items: {type: array}
    activities:
      - id: call
        for_each: "${{ inputs.items }}"
        tool: t.call
        with: {n: "${{ item }}"}
        rate_limit: {key: api, limit: 2, per: 1s}
    """)


def test_a_map_over_a_bucket_smaller_than_its_items_proceeds_at_the_buckets_rate(
    engine: Engine, clock: ManualClock, registry: ActivityRegistry
) -> None:
    # Each item takes its own unit: the bucket's 2 start at once, then 2 a second (a step
    # asking 7 units at once used to wait for ever: "asks more units than the bucket holds").
    calls: list[int] = []
    registry.activity("t.call")(lambda n: calls.append(n) or n)
    engine.start(MAPPED, {"items": list(range(7))}, execution_id="m")
    drive(engine)
    seen = [len(calls)]
    view = engine.query("m")
    assert view.status == "waiting"
    assert view.waiting_on == "items 2/7 done; rate limit api: next slot in 0.5 s"
    for _ in range(4):
        clock.advance(1.0)
        drive(engine)
        seen.append(len(calls))
    assert seen == [2, 4, 6, 7, 7]
    assert sorted(calls) == list(range(7))
    view = engine.query("m")
    assert view.status == "completed"
    assert [item["attempt"] for item in view.activities["call"]["items"]] == [1] * 7


SIBLINGS = textwrap.dedent("""
    apiVersion: wovyr/v1
    kind: Workflow
    metadata: {name: siblings}
    activities:
      - {id: a, tool: t.call, with: {n: 1}, rate_limit: {key: api, limit: 1, per: 2s, units: 1}}
      - {id: b, tool: t.call, with: {n: 2}, rate_limit: {key: api, limit: 1, per: 2s, units: 1}}
      - {id: c, tool: t.call, with: {n: 3}, rate_limit: {key: api, limit: 1, per: 2s, units: 1}}
      - {id: d, needs: [a, b, c], tool: t.call, with: {n: 4}}
    """)


def test_sibling_steps_sharing_a_bucket_start_one_by_one_and_the_others_go_on(
    engine: Engine, clock: ManualClock, registry: ActivityRegistry
) -> None:
    calls: list[int] = []
    registry.activity("t.call")(lambda n: calls.append(n) or n)
    engine.start(SIBLINGS, {}, execution_id="s")
    drive(engine)
    seen = [list(calls)]
    for _ in range(2):
        clock.advance(2.0)
        drive(engine)
        seen.append(list(calls))
    assert seen == [[1], [1, 2], [1, 2, 3, 4]]  # one unit every 2 s, in their order
    assert engine.query("s").status == "completed"


SLOTTED = textwrap.dedent("""
    apiVersion: wovyr/v1
    kind: Workflow
    metadata: {name: slotted}
    activities:
      - id: call
        for_each: "${{ [1, 2, 3, 4, 5] }}"
        tool: t.slot
        with: {n: "${{ item }}"}
        concurrency: {key: gpu, limit: 2}
    """)


def test_a_map_over_a_concurrency_key_holds_at_most_its_limit(
    engine: Engine, registry: ActivityRegistry
) -> None:
    # Each item takes its own slot: a step starting the map's five items used to grant the
    # key five slots at once.
    holders: list[int] = []

    def slot(n: int) -> int:
        now = engine.clock.now()
        holders.append(len(engine.store.activity_slot_holders(engine.tenant, "gpu", now)))
        return n

    registry.activity("t.slot")(slot)
    engine.start(SLOTTED, {}, execution_id="g")
    drive(engine)
    view = engine.query("g")
    assert view.status == "completed", view.waiting_on
    assert len(holders) == 5
    assert max(holders) == 2
