"""Metrics fed by a store observer, on every store: what a worker commits is counted and
attributed to its tenant and workflow, with no wrapper around the store."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from wovyr.activities.base import ActivityRegistry
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.events import Event, EventType
from wovyr.platform.metrics import OTHER, Metrics, MetricsObserver, meter, store_gauges
from wovyr.store.base import Claim, CommitOutcome, ExecutionRecord, NewExecution, StepWrite
from wovyr.testing import drain
from wovyr.worker import Worker

FLAKY = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: flaky}
activities:
  - id: call
    tool: flaky
    retry: {max_attempts: 3, initial_interval: 0}
"""
WAITS = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: waits}
activities:
  - id: go
    wait: {signal: go}
"""


def flaky_tool(registry: ActivityRegistry) -> None:
    calls = {"n": 0}

    def flaky() -> str:
        calls["n"] += 1
        if calls["n"] < 2:
            raise RuntimeError("transient")
        return "ok"

    registry.register("flaky", flaky)


def drive(engine: Engine, definition: str) -> str:
    """Start `definition` and run it until it ends or waits; its execution id."""

    async def main() -> str:
        worker = Worker(engine, lease_seconds=30)
        try:
            record = await worker.start(definition)
            await worker.run_until_idle()
            return record.id
        finally:
            await worker.close()

    return asyncio.run(main())


def test_what_a_worker_commits_is_counted_for_its_tenant(
    engine: Engine, registry: ActivityRegistry
) -> None:
    flaky_tool(registry)
    metrics = meter(engine.store)
    eid = drive(engine.for_tenant("acme"), FLAKY)
    assert engine.for_tenant("acme").query(eid).status == "completed"

    assert metrics.value("wovyr_executions_started_total", "acme", workflow="flaky") == 1
    finished = metrics.value(
        "wovyr_executions_finished_total", "acme", workflow="flaky", status="completed"
    )
    assert finished == 1
    assert metrics.value("wovyr_activity_retries_total", "acme", workflow="flaky") == 1
    text = metrics.render("acme")
    duration = "wovyr_activity_duration_seconds_count"
    assert f'{duration}{{tenant="acme",outcome="completed",workflow="flaky"}} 1' in text
    assert f'{duration}{{tenant="acme",outcome="retried",workflow="flaky"}} 1' in text
    assert eid not in text
    assert "flaky" not in metrics.render("other")  # another tenant sees none of it
    assert metrics.render(None) == text  # the operator's view: every tenant (one here)


def test_the_operators_view_shows_every_tenant(engine: Engine, registry: ActivityRegistry) -> None:
    flaky_tool(registry)
    metrics = meter(engine.store)
    drive(engine.for_tenant("acme"), WAITS)
    drive(engine.for_tenant("globex"), WAITS)
    everyone = metrics.render(None)
    assert 'wovyr_executions_started_total{tenant="acme",workflow="waits"} 1' in everyone
    assert 'wovyr_executions_started_total{tenant="globex",workflow="waits"} 1' in everyone
    assert 'tenant="globex"' not in metrics.render("acme")


def test_a_step_of_an_execution_started_elsewhere_is_attributed_from_the_store(
    engine: Engine,
) -> None:
    eid = drive(engine.for_tenant("acme"), WAITS)  # before this process counted
    metrics = meter(engine.store)
    engine.for_tenant("acme").cancel(eid, "no longer needed")
    cancelled = metrics.value(
        "wovyr_executions_finished_total", "acme", workflow="waits", status="cancelled"
    )
    assert cancelled == 1
    assert metrics.value("wovyr_executions_started_total", "acme", workflow="waits") == 0


class Raises:
    def __init__(self) -> None:
        self.calls = 0

    def created(self, new: NewExecution) -> None:
        self.calls += 1
        raise RuntimeError("an observer's bug")

    def committed(self, steps: Sequence[StepWrite], outcomes: Sequence[CommitOutcome]) -> None:
        self.calls += 1
        raise RuntimeError("an observer's bug")

    def claimed(self, claims: Sequence[Claim]) -> None:
        self.calls += 1
        raise RuntimeError("an observer's bug")


def test_an_observer_that_raises_breaks_no_commit_and_no_other_observer(
    engine: Engine, registry: ActivityRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    flaky_tool(registry)
    broken = Raises()
    engine.store.add_observer(broken)
    metrics = meter(engine.store)
    eid = drive(engine.for_tenant("acme"), FLAKY)
    assert engine.for_tenant("acme").query(eid).status == "completed"
    assert [e.type for e in engine.for_tenant("acme").history(eid)][-1] == "ExecutionCompleted"
    assert broken.calls >= 3
    assert metrics.value("wovyr_executions_started_total", "acme", workflow="flaky") == 1
    finished = metrics.value(
        "wovyr_executions_finished_total", "acme", workflow="flaky", status="completed"
    )
    assert finished == 1
    assert "an observer's bug" in caplog.text


def test_a_commit_refused_for_a_lost_lease_is_counted(engine: Engine) -> None:
    eid = drive(engine, WAITS)
    metrics = meter(engine.store)
    record = engine.get(eid)
    outcomes = engine.store.commit(
        [
            StepWrite(
                execution_id=eid,
                expected_seq=record.seq,
                events=(),
                checkpoint=record.checkpoint or {},
                status=record.status,
                updated_at=engine.clock.now(),
                fence=record.fence + 1,  # a fence no claim ever handed out
            )
        ]
    )
    assert outcomes == [CommitOutcome.LEASE_LOST]
    assert metrics.value("wovyr_lease_losses_total") == 1
    assert "wovyr_lease_losses_total 1" in metrics.render(None)
    assert "wovyr_lease_losses_total 1" not in metrics.render("anyone")  # process-wide


def test_gauges_are_read_from_the_store(engine: Engine) -> None:
    timed = WAITS.replace("wait: {signal: go}", "wait: {timer: {after: 10s}}")
    drive(engine, timed)
    clock = engine.clock
    assert isinstance(clock, ManualClock)
    clock.advance(25)
    gauges = {name: value for name, _, _, value in store_gauges(engine.store, clock.now())}
    assert gauges == {
        "wovyr_queue_depth": 0,
        "wovyr_timer_lag_seconds": 15,
        "wovyr_schedule_lag_seconds": 0,
    }


def test_an_unknown_execution_whose_lookup_fails_is_not_counted() -> None:
    def lookup(tenant: str, execution_id: str) -> None:
        raise OSError("the store is down")

    metrics = Metrics()
    observer = MetricsObserver(metrics, lookup)
    now = ManualClock().now()
    step = StepWrite(
        execution_id="wf_x",
        expected_seq=1,
        events=(Event(EventType.EXECUTION_COMPLETED, now),),
        checkpoint={},
        status="completed",
        updated_at=now,
    )
    observer.committed([step], [CommitOutcome.OK])
    observer.committed([step], [CommitOutcome.LEASE_LOST])
    assert "wovyr_executions_finished_total{" not in metrics.render(None)
    assert metrics.value("wovyr_lease_losses_total") == 1


def test_only_a_step_with_something_to_count_reads_the_store(engine: Engine) -> None:
    eid = drive(engine.for_tenant("acme"), WAITS)  # before this process counted
    lookups: list[str] = []

    def lookup(tenant: str, execution_id: str) -> ExecutionRecord | None:
        lookups.append(execution_id)
        return engine.store.load(execution_id, "default")

    metrics = Metrics()
    engine.store.add_observer(MetricsObserver(metrics, lookup))
    engine.for_tenant("acme").signal(eid, "go")  # a SignalReceived step: nothing to count
    assert lookups == []
    asyncio.run(_run_until_idle(engine))  # the claim tells the tenant and workflow
    assert engine.for_tenant("acme").query(eid).status == "completed"
    assert lookups == []
    completed = metrics.value(
        "wovyr_executions_finished_total", "acme", workflow="waits", status="completed"
    )
    assert completed == 1


async def _run_until_idle(engine: Engine) -> None:
    worker = Worker(engine, lease_seconds=30)
    try:
        await worker.run_until_idle()
    finally:
        await worker.close()


CHAIN = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: chain}
inputs: {n: {type: integer, default: 1}}
activities:
  - {id: a, set: {n: "${{ inputs.n }}"}}
output: "${{ inputs.n }}"
continue_as_new: {when: "${{ inputs.n < 3 }}", input: {n: "${{ inputs.n + 1 }}"}}
"""


def test_a_chain_counts_each_run_started_and_each_hand_over_as_continued(
    engine: Engine, clock: ManualClock
) -> None:
    metrics = meter(engine.store)
    acme = engine.for_tenant("acme")
    eid = drive(acme, CHAIN)
    for _ in range(2):  # a chain starts at most one run a second (min_continue_interval)
        clock.advance(1)
        drain(acme)
    assert acme.query(eid).status == "completed" and acme.query(eid).chain == {
        "root": eid,
        "run": 3,
    }
    assert metrics.value("wovyr_executions_started_total", "acme", workflow="chain") == 3
    for status, count in (("continued", 2), ("completed", 1)):
        value = metrics.value(
            "wovyr_executions_finished_total", "acme", workflow="chain", status=status
        )
        assert value == count, status


ONE_STEP = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: one-step}
activities:
  - id: call
    tool: flaky
"""


def drive_many(engine: Engine, definitions: Sequence[str]) -> None:
    """Start each of `definitions` on one worker and run them until they end or wait."""

    async def main() -> None:
        worker = Worker(engine, lease_seconds=30)
        try:
            for definition in definitions:
                await worker.start(definition)
                await worker.run_until_idle()
        finally:
            await worker.close()

    asyncio.run(main())


def test_an_observer_forgets_each_execution_when_it_ends(
    engine: Engine, registry: ActivityRegistry
) -> None:
    registry.register("flaky", lambda: "ok")
    metrics = Metrics()
    observer = MetricsObserver(metrics, lambda t, i: engine.store.load(i, t))
    engine.store.add_observer(observer)
    n = 50
    drive_many(engine, [ONE_STEP] * n)
    finished = metrics.value(
        "wovyr_executions_finished_total", engine.tenant, workflow="one-step", status="completed"
    )
    assert finished == n  # every one counted, from what the observer remembered
    assert observer.remembered() == (0, 0)  # and nothing kept of any of them


def test_an_observer_keeps_nothing_of_suspended_executions(
    engine: Engine, registry: ActivityRegistry
) -> None:
    metrics = Metrics()
    observer = MetricsObserver(metrics, lambda t, i: engine.store.load(i, t))
    engine.store.add_observer(observer)
    ids = []
    for _ in range(20):
        ids.append(drive(engine, WAITS))  # each left waiting for its signal, lease released
    assert observer.remembered() == (0, 0)
    engine.cancel(ids[0], "done waiting")  # a later step is still attributed (one read)
    cancelled = metrics.value(
        "wovyr_executions_finished_total", engine.tenant, workflow="waits", status="cancelled"
    )
    assert cancelled == 1


def test_an_observer_remembers_at_most_its_bound_of_executions(engine: Engine) -> None:
    metrics = Metrics()
    observer = MetricsObserver(metrics, lambda t, i: engine.store.load(i, t), remember=8)
    engine.store.add_observer(observer)
    for _ in range(40):
        engine.start(WAITS)  # started here, driven by no one in this process
    owners, attempts = observer.remembered()
    assert (owners, attempts) == (8, 0)
    assert metrics.value("wovyr_executions_started_total", engine.tenant, workflow="waits") == 40


def named(n: int) -> str:
    return f"""\
apiVersion: wovyr/v1
kind: Workflow
metadata: {{name: wf-{n}}}
activities:
  - id: a
    set: {{n: {n}}}
"""


def test_distinct_workflow_names_keep_a_bounded_number_of_series(engine: Engine) -> None:
    metrics = Metrics(max_series=5)
    engine.store.add_observer(MetricsObserver(metrics, lambda t, i: engine.store.load(i, t)))
    n = 30
    drive_many(engine, [named(i) for i in range(n)])
    tenant = engine.tenant
    # started, finished (one status here), activity duration: at most 5 + "_other" each
    assert metrics.series() <= 3 * (5 + 1)
    started = [
        metrics.value("wovyr_executions_started_total", tenant, workflow=f"wf-{i}")
        for i in range(n)
    ]
    assert started == [1.0] * 5 + [0.0] * (n - 5)  # the first five have their own series
    other = metrics.value("wovyr_executions_started_total", tenant, workflow=OTHER)
    assert other == n - 5  # and nothing is lost: the rest are counted together
    finished = metrics.value(
        "wovyr_executions_finished_total", tenant, workflow=OTHER, status=OTHER
    )
    assert finished == n - 5
    assert f'workflow="{OTHER}"' in metrics.render(tenant)


def test_request_methods_nobody_authenticated_keep_a_bounded_number_of_series() -> None:
    metrics = Metrics(max_series=4)
    for i in range(500):  # any token is a method to the HTTP parser
        metrics.observe_request(f"M{i}", "unmatched", 405, 0.001)
    assert metrics.series() <= 2 * (4 + 1)  # the counter and the duration histogram
    total = metrics.value("wovyr_http_requests_total", method=OTHER, route=OTHER, status=OTHER)
    assert total == 500 - 4
