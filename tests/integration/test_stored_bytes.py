"""What an execution and a tenant may store, end to end on every store: a tool's result that
would take its execution past its byte budget fails its activity (not retried) with the
budget and its setting named; an execution stored with a value nested too deeply (by an
engine before the depth cap) still reads; and the tenant's `stored_bytes_per_day` quota
refuses a start whose input passes it, debits every step's values, and once used up refuses
new starts and holds running executions until the next UTC day."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from wovyr.activities.base import ActivityRegistry
from wovyr.clock import ManualClock
from wovyr.engine.core.decide import decide
from wovyr.engine.core.state import state_from_json
from wovyr.engine.engine import Engine
from wovyr.engine.quotas import Quotas
from wovyr.engine.steps import make_step
from wovyr.errors import QuotaExceeded
from wovyr.store.base import CommitOutcome, Store
from wovyr.testing import drain

STEPS = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: steps}
activities:
  - {id: s0, tool: blob}
""" + "".join(f"  - {{id: s{i}, needs: [s{i - 1}], tool: blob}}\n" for i in range(1, 10))


def test_a_result_past_the_execution_budget_fails_its_activity_for_good(
    store: Store, clock: ManualClock, registry: ActivityRegistry
) -> None:
    calls: list[int] = []

    @registry.activity("blob")
    def blob() -> str:
        calls.append(1)
        return "b" * 3_000

    engine = Engine(store, clock=clock, activities=registry, max_execution_bytes=20_000)
    started = engine.start(STEPS)
    drain(engine)

    view = engine.query(started.id)
    assert view.status == "failed"
    statuses = [a["status"] for a in view.activities.values()]
    done = statuses.count("completed")
    assert 4 <= done <= 6 and statuses[done] == "failed"  # ~3 KB each within 20 KB
    error = view.activities[f"s{done}"]["error"]
    assert error["type"] == "ExecutionTooLarge"
    assert f"the output of activity 's{done}' (3002 bytes)" in error["message"]
    assert "budget of 20000 (WOVYR_MAX_EXECUTION_BYTES)" in error["message"]
    assert view.activities[f"s{done}"]["attempt"] == 1 and len(calls) == done + 1  # no retry


DEEP = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: deep}
activities:
  - {id: a0, set: {v: 1}}
""" + "".join(
    f'  - {{id: a{i}, needs: [a{i - 1}], set: {{v: "${{{{ activities.a{i - 1}.output }}}}"}}}}\n'
    for i in range(1, 120)
)


def test_an_execution_stored_with_a_value_too_deep_still_reads(engine: Engine) -> None:
    record = engine.start(DEEP)
    # as an engine before the depth cap decided and stored it: 120 levels deep
    state = state_from_json(record.checkpoint or {})
    decision = decide(engine.definition(record.definition_hash), state, engine.clock.now())
    assert decision.state is not None and decision.state.status == "completed"
    step = make_step(
        record.id, state, decision.state, decision.events, engine.clock.now(),
        tenant="default", ready=False,
    )  # fmt: skip
    assert engine.store.commit([step]) == [CommitOutcome.OK]

    view = engine.query(record.id)
    shown = view.activities["a119"]["output"]
    for _ in range(64):
        shown = shown["v"] if isinstance(shown, dict) and "v" in shown else shown
    assert shown == {"unreadable": "a value nested more than 64 levels deep (not shown)"}
    assert view.activities["a3"]["output"] == {"v": {"v": {"v": {"v": 1}}}}
    history = engine.history(record.id)
    assert len(history) == view.event_count
    assert engine.list(limit=5).items[0].id == record.id


QUICK = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: quick}
inputs:
  s: {type: string, default: ""}
activities:
  - {id: a, set: {v: "${{ inputs.s }}"}}
  - {id: b, needs: [a], tool: note}
"""


def test_the_stored_bytes_quota_refuses_starts_and_holds_running_executions(
    store: Store, clock: ManualClock, registry: ActivityRegistry, engine: Engine
) -> None:
    notes: list[int] = []
    registry.register("note", lambda: notes.append(1) or "ok")
    engine.set_quotas(Quotas(stored_bytes_per_day=10_000), by="test")

    with pytest.raises(QuotaExceeded) as refused:  # its input alone passes the day's bytes
        engine.start(QUICK, {"s": "x" * 12_000})
    assert refused.value.budget == "stored_bytes_per_day"
    assert engine.list(limit=5).items == []

    first = engine.start(QUICK, {"s": "x" * 4_000})  # 4 KB in, then `a` records 4 KB more
    drain(engine)
    assert engine.query(first.id).status == "completed"
    used = store.quota_usage("default", date(2030, 1, 1))["stored_bytes"]
    assert 8_000 < used < 10_000

    second = engine.start(QUICK, {"s": "y" * 1_000})  # fits; its step passes the day's bytes
    drain(engine)
    view = engine.query(second.id)
    held = "quota: stored bytes for tenant default exhausted until 2030-01-02 00:00 UTC"
    assert view.status == "waiting" and view.waiting_on == held
    # held before its step: nothing of it recorded, `b` not run (decided again tomorrow)
    assert [a["status"] for a in view.activities.values()] == ["pending", "pending"]
    assert len(notes) == 1
    assert store.quota_usage("default", date(2030, 1, 1))["stored_bytes"] == used + 1_008
    with pytest.raises(QuotaExceeded):  # a start whose input does not fit what is left
        engine.start(QUICK, {"s": "z" * 2_000})

    clock.set(datetime(2030, 1, 2, tzinfo=UTC))  # the next UTC day: it goes on
    drain(engine)
    assert engine.query(second.id).status == "completed" and len(notes) == 2
    engine.start(QUICK)
