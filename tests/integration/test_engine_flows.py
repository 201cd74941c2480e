"""End-to-end engine behaviour on every store, with a ManualClock and real workers."""

from __future__ import annotations

import textwrap
from datetime import timedelta
from typing import Any

import pytest

from wovyr.activities.base import ActivityContext, ActivityRegistry, NonRetryableError
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.errors import Conflict, ExecutionFinished, InputError, NotFound
from wovyr.testing import drain


def wf(body: str, name: str = "t") -> str:
    head = f"apiVersion: wovyr/v1\nkind: Workflow\nmetadata: {{name: {name}}}\n"
    return head + textwrap.dedent(body)


def types(engine: Engine, execution_id: str) -> list[str]:
    return [e.type for e in engine.history(execution_id)]


THREE_STEPS = wf(
    """
    inputs:
      n: {type: integer, default: 1}
    activities:
      - id: a
        tool: add
        with: {x: "${{ inputs.n }}"}
      - id: b
        needs: [a]
        tool: add
        with: {x: "${{ activities.a.output }}"}
      - id: c
        needs: [b]
        tool: add
        with: {x: "${{ activities.b.output }}"}
    output: {result: "${{ activities.c.output }}"}
    """
)


@pytest.fixture
def calls(registry: ActivityRegistry) -> list[tuple[str, Any]]:
    seen: list[tuple[str, Any]] = []

    @registry.activity("add")
    def add(x: int, ctx: ActivityContext) -> int:
        seen.append((ctx.idempotency_key, x))
        return x + 1

    return seen


def test_three_steps_chain_outputs_and_complete(engine: Engine, calls: list[Any]) -> None:
    record = engine.start(THREE_STEPS, {"n": 10})
    drain(engine)
    view = engine.query(record.id)
    assert view.status == "completed"
    assert view.output == {"result": 13}
    assert [x for _, x in calls] == [10, 11, 12]
    assert calls[0][0] == f"{record.id}/a/1"
    assert types(engine, record.id) == [
        "ExecutionStarted",
        "ActivityScheduled",
        "ActivityStarted",
        "ActivityCompleted",
        "ActivityScheduled",
        "ActivityStarted",
        "ActivityCompleted",
        "ActivityScheduled",
        "ActivityStarted",
        "ActivityCompleted",
        "ExecutionCompleted",
    ]


def test_one_durable_commit_per_activity_on_the_happy_path(
    engine: Engine, calls: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    from wovyr.worker import Worker

    engine.register(THREE_STEPS)  # a definition is stored once, not per start
    writes: list[str] = []
    store = engine.store
    real_commit, real_create = store.commit, store.create_execution

    def commit(steps: Any) -> Any:
        writes.extend("step" for _ in [steps] if steps)
        return real_commit(steps)

    def create(new: Any) -> Any:
        writes.append("create")
        return real_create(new)

    monkeypatch.setattr(store, "commit", commit)
    monkeypatch.setattr(store, "create_execution", create)

    async def main() -> str:
        worker = Worker(engine)
        try:
            rec = await worker.start(THREE_STEPS, {"n": 1})
            await worker.run_until_idle(only=[rec.id])
            return rec.id
        finally:
            await worker.close()

    execution_id = asyncio.run(main())
    assert engine.query(execution_id).status == "completed"
    # start (1, with the first ActivityStarted) + one commit per activity (3): each result
    # commit also starts what it unblocks; the last completes and releases the lease.
    assert writes == ["create", "step", "step", "step"]


GATED_STEPS = THREE_STEPS.replace(
    "tool: add\n",
    "tool: add\n"
    + textwrap.indent(
        'concurrency: {key: "adders", limit: 8}\nrate_limit: {key: adds, limit: 1000, per: 1s}\n',
        "    ",
    ),
).replace("name: t", "name: gated")


def test_a_gated_attempt_costs_no_transaction_of_its_own(
    engine: Engine, calls: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gate (an activity slot and a rate-limit unit) is taken in the transaction of the
    step that starts the attempt, and the slot goes back in the one recording its result."""
    import asyncio

    from wovyr.worker import Worker

    assert GATED_STEPS.count("rate_limit") == 3
    engine.register(GATED_STEPS)
    writes: list[str] = []
    store = engine.store
    real_commit, real_gated, real_acquire = store.commit, store.commit_gated, store.acquire_flows

    def commit(steps: Any, atomic: bool = False) -> Any:
        writes.append("step")
        return real_commit(steps, atomic)

    def commit_gated(steps: Any) -> Any:
        writes.append("gated step")
        return real_gated(steps)

    def acquire_flows(asks: Any) -> Any:
        writes.append("gate")
        return real_acquire(asks)

    monkeypatch.setattr(store, "commit", commit)
    monkeypatch.setattr(store, "commit_gated", commit_gated)
    monkeypatch.setattr(store, "acquire_flows", acquire_flows)

    async def main() -> str:
        worker = Worker(engine)
        try:
            rec = await worker.start(GATED_STEPS, {"n": 1})
            await worker.run_until_idle(only=[rec.id])
            return rec.id
        finally:
            await worker.close()

    execution_id = asyncio.run(main())
    assert engine.query(execution_id).status == "completed"
    assert [x for _, x in calls] == [1, 2, 3]
    # one gated step per attempt started (each but the first also records the result
    # before it), then the last result; no gate on its own
    assert writes == ["gated step", "gated step", "gated step", "step"]
    assert store.activity_slot_holders(engine.tenant, "adders", engine.clock.now()) == []


ONE_AT_A_TIME = wf(
    """
    inputs:
      n: {type: integer, default: 1}
    activities:
      - id: a
        tool: add
        with: {x: "${{ inputs.n }}"}
        concurrency: {key: "one", limit: 1}
    """,
    name="one-at-a-time",
)


def test_a_freed_activity_slot_wakes_its_waiter_at_once(
    engine: Engine, calls: list[Any], clock: ManualClock
) -> None:
    """Three executions whose attempts share one slot, the clock standing still: each
    attempt refused the slot is held by a timer due at its recheck (later than now), and
    the step that frees the slot moves the oldest waiter's to now; so all three run, one
    after the other, without the clock moving (without the wake the worker would stop idle
    with two executions held)."""
    import asyncio

    from wovyr.worker import Worker

    before = clock.now()

    async def main() -> list[str]:
        worker = Worker(engine, concurrency=4)
        try:
            ids = [(await worker.start(ONE_AT_A_TIME, {"n": n})).id for n in (1, 2, 3)]
            await worker.run_until_idle(only=ids)
            return ids
        finally:
            await worker.close()

    ids = asyncio.run(main())
    assert clock.now() == before
    assert [engine.query(i).status for i in ids] == ["completed"] * 3
    assert sorted(x for _, x in calls) == [1, 2, 3]
    held = [e for i in ids for e in engine.history(i) if e.type == "TimerArmed"]
    assert len(held) >= 2  # two of them waited for the slot


def test_starting_an_existing_id_returns_it(engine: Engine, calls: list[Any]) -> None:
    first = engine.start(THREE_STEPS, {"n": 1}, execution_id="order-1")
    again = engine.start(THREE_STEPS, {"n": 99}, execution_id="order-1")
    assert again.id == first.id and again.input == {"n": 1}
    assert len(engine.list().items) == 1


def test_retry_backoff_uses_durable_timers(
    engine: Engine, clock: ManualClock, registry: ActivityRegistry
) -> None:
    attempts: list[int] = []

    @registry.activity("flaky")
    def flaky(ctx: ActivityContext) -> str:
        attempts.append(ctx.attempt)
        if ctx.attempt < 3:
            raise RuntimeError("not yet")
        return "ok"

    rec = engine.start(
        wf("""
        activities:
          - id: f
            tool: flaky
            retry: {max_attempts: 5, initial_interval: 10s, backoff: 2}
        """)
    )
    drain(engine)
    view = engine.query(rec.id)
    assert attempts == [1]
    assert view.status == "waiting" and "retry f attempt 2" in (view.waiting_on or "")
    clock.advance(9)
    drain(engine)
    assert attempts == [1]
    clock.advance(1)
    drain(engine)
    assert attempts == [1, 2]
    clock.advance(19)
    drain(engine)
    assert attempts == [1, 2]
    clock.advance(1)
    drain(engine)
    assert attempts == [1, 2, 3]
    assert engine.query(rec.id).status == "completed"
    failed = [e for e in engine.history(rec.id) if e.type == "ActivityFailed"]
    assert [e.data["will_retry"] for e in failed] == [True, True]


SAGA = wf("""
    activities:
      - id: reserve
        tool: step
        with: {name: reserve}
        compensate: {tool: undo, with: {name: reserve}}
      - id: charge
        needs: [reserve]
        tool: step
        with: {name: charge}
        compensate: {tool: undo, with: {name: "${{ activities.charge.output }}"}}
      - id: ship
        needs: [charge]
        tool: boom
        retry: {max_attempts: 3, non_retryable: [NoStock]}
    """)


def test_failure_runs_compensations_in_reverse_order(
    engine: Engine, registry: ActivityRegistry
) -> None:
    undone: list[str] = []
    registry.register("step", lambda name: name)
    registry.register("undo", lambda name: undone.append(name) or f"undid {name}")

    def boom() -> None:
        raise NonRetryableError("warehouse empty", type="NoStock")

    registry.register("boom", boom)
    rec = engine.start(SAGA)
    drain(engine)
    view = engine.query(rec.id)
    assert view.status == "failed"
    assert undone == ["charge", "reserve"]
    assert view.error["activity"] == "ship"
    assert view.error["error"]["type"] == "NoStock"
    assert [s["status"] for s in view.error["compensation"]] == ["compensated", "compensated"]
    assert view.activities["ship"]["attempt"] == 1  # non-retryable: one attempt
    assert types(engine, rec.id)[-1] == "ExecutionFailed"


def test_non_retryable_type_from_policy(engine: Engine, registry: ActivityRegistry) -> None:
    class NoStock(Exception):
        pass

    def boom() -> None:
        raise NoStock("none")

    registry.register("step", lambda name: name)
    registry.register("undo", lambda name: None)
    registry.register("boom", boom)
    rec = engine.start(SAGA)
    drain(engine)
    assert engine.query(rec.id).activities["ship"]["attempt"] == 1


def test_condition_false_skips_and_dependants_still_run(
    engine: Engine, registry: ActivityRegistry
) -> None:
    registry.register("echo", lambda v: v)
    rec = engine.start(
        wf("""
        inputs: {big: {type: boolean, default: false}}
        activities:
          - id: check
            when: "${{ inputs.big }}"
            tool: echo
            with: {v: checked}
          - id: after
            needs: [check]
            set: {was: "${{ activities.check.status }}"}
        output: "${{ activities.after.output.was }}"
        """)
    )
    drain(engine)
    view = engine.query(rec.id)
    assert view.status == "completed"
    assert view.activities["check"]["status"] == "skipped"
    assert view.output == "skipped"


SIGNALS = wf("""
    activities:
      - id: first
        wait: {signal: go}
      - id: second
        needs: [first]
        wait: {signal: go}
    output: ["${{ activities.first.output }}", "${{ activities.second.output }}"]
    """)


def test_signals_before_the_wait_are_buffered_in_order(engine: Engine) -> None:
    rec = engine.start(SIGNALS)
    engine.signal(rec.id, "go", {"n": 1})
    engine.signal(rec.id, "go", {"n": 2})
    drain(engine)
    view = engine.query(rec.id)
    assert view.status == "completed"
    assert view.output == [{"n": 1}, {"n": 2}]


def test_signal_wait_suspends_until_delivered(engine: Engine) -> None:
    rec = engine.start(SIGNALS)
    drain(engine)
    view = engine.query(rec.id)
    assert view.status == "waiting" and view.waiting_on == "signal go"
    engine.signal(rec.id, "go", 1)
    drain(engine)
    engine.signal(rec.id, "go", 2)
    drain(engine)
    assert engine.query(rec.id).output == [1, 2]
    with pytest.raises(ExecutionFinished):
        engine.signal(rec.id, "go", 3)


SIGNAL_WITH_TIMEOUT = wf("""
    activities:
      - {id: go, wait: {signal: go}, timeout: 1h, on_failure: continue}
    output:
      status: "${{ activities.go.status }}"
      payload: "${{ activities.go.status == 'completed' ? activities.go.output : null }}"
    """)


def test_a_signal_wait_with_a_timeout_fails_when_no_signal_came(
    engine: Engine, clock: ManualClock
) -> None:
    late = engine.start(SIGNAL_WITH_TIMEOUT)
    early = engine.start(SIGNAL_WITH_TIMEOUT)
    drain(engine)
    assert (
        engine.query(late.id).pending_waits[0]["timeout_at"]
        == (clock.now() + timedelta(hours=1)).isoformat()
    )
    engine.signal(early.id, "go", {"n": 1})
    drain(engine)
    clock.advance(3600)
    drain(engine)
    assert engine.query(early.id).output == {"status": "completed", "payload": {"n": 1}}
    assert "TimerCancelled" in types(engine, early.id)  # its timeout was cancelled
    view = engine.query(late.id)
    assert view.output == {"status": "failed", "payload": None}
    assert view.activities["go"]["error"]["type"] == "SignalTimeout"


APPROVAL = wf("""
    activities:
      - id: approve
        wait: {approval: {timeout: 2d, approvers: [alice, bob]}}
      - id: done
        needs: [approve]
        set: {by: "${{ activities.approve.output.by }}"}
    output: "${{ activities.done.output.by }}"
    """)


def test_approval_approved(engine: Engine) -> None:
    rec = engine.start(APPROVAL)
    drain(engine)
    assert engine.query(rec.id).pending_waits[0]["kind"] == "approval"
    with pytest.raises(Conflict):
        engine.approve(rec.id, "approve", True, by="mallory")
    engine.approve(rec.id, "approve", True, by="alice", comment="fine")
    drain(engine)
    view = engine.query(rec.id)
    assert view.status == "completed" and view.output == "alice"
    assert not engine.store.due_timers(engine.clock.now().replace(year=2100), 10)


def test_approval_rejected_fails(engine: Engine) -> None:
    rec = engine.start(APPROVAL)
    drain(engine)
    engine.approve(rec.id, "approve", False, by="bob", comment="no")
    drain(engine)
    view = engine.query(rec.id)
    assert view.status == "failed"
    assert view.error["error"]["type"] == "ApprovalRejected"


def test_approval_timeout_fires(engine: Engine, clock: ManualClock) -> None:
    rec = engine.start(APPROVAL)
    drain(engine)
    clock.advance(days=2)
    drain(engine)
    view = engine.query(rec.id)
    assert view.status == "failed" and view.error["error"]["type"] == "ApprovalTimeout"
    with pytest.raises(ExecutionFinished):
        engine.approve(rec.id, "approve", True, by="alice")


def test_approval_decided_before_reached_is_kept(
    engine: Engine, registry: ActivityRegistry
) -> None:
    rec = engine.start(APPROVAL)
    engine.approve(rec.id, "approve", True, by="bob")
    drain(engine)
    assert engine.query(rec.id).output == "bob"


def test_approve_errors(engine: Engine, calls: list[Any]) -> None:
    rec = engine.start(THREE_STEPS)
    with pytest.raises(Conflict):
        engine.approve(rec.id, "a", True)
    with pytest.raises(NotFound):
        engine.approve(rec.id, "nope", True)
    with pytest.raises(NotFound):
        engine.approve("missing", "a", True)


def test_timer_wait_after_30_days(engine: Engine, clock: ManualClock) -> None:
    rec = engine.start(
        wf("""
        activities:
          - id: remind
            wait: {timer: {after: 30d}}
        output: "${{ activities.remind.output.fired }}"
        """)
    )
    drain(engine)
    assert engine.query(rec.id).status == "waiting"
    clock.advance(days=29, hours=23)
    drain(engine)
    assert engine.query(rec.id).status == "waiting"
    clock.advance(hours=1)
    drain(engine)
    view = engine.query(rec.id)
    assert view.status == "completed" and view.output is True
    fired = [e for e in engine.history(rec.id) if e.type == "TimerFired"]
    assert fired[0].data["fired_at"] == clock.now().isoformat()


def test_cancel_skips_pending_and_is_final(engine: Engine) -> None:
    rec = engine.start(SIGNALS)
    drain(engine)
    view = engine.cancel(rec.id, "changed my mind")
    assert view.status == "cancelled"
    assert view.activities["first"]["status"] == "skipped"
    assert view.activities["second"]["status"] == "skipped"
    assert types(engine, rec.id)[-1] == "ExecutionCancelled"
    with pytest.raises(ExecutionFinished):
        engine.cancel(rec.id)
    drain(engine)
    assert engine.query(rec.id).status == "cancelled"


def test_query_changes_nothing(engine: Engine) -> None:
    rec = engine.start(SIGNALS)
    drain(engine)
    before = engine.store.load(rec.id, "default")
    for _ in range(3):
        engine.query(rec.id)
    after = engine.store.load(rec.id, "default")
    assert before is not None and after is not None
    assert (before.seq, before.lease_owner, before.fence, before.updated_at) == (
        after.seq,
        after.lease_owner,
        after.fence,
        after.updated_at,
    )


def test_bad_input_is_refused_and_nothing_is_stored(engine: Engine, calls: list[Any]) -> None:
    with pytest.raises(InputError):
        engine.start(THREE_STEPS, {"n": "ten"})
    with pytest.raises(InputError):
        engine.start(THREE_STEPS, {"m": 1})
    with pytest.raises(InputError):
        engine.start(THREE_STEPS, {}, execution_id="bad id with spaces")
    assert engine.list().items == []
    with pytest.raises(NotFound):
        engine.query("missing")
    with pytest.raises(NotFound):
        engine.signal("missing", "go")
    with pytest.raises(NotFound):
        engine.cancel("missing")


def test_unregistered_tool_fails_the_execution_clearly(engine: Engine) -> None:
    rec = engine.start(
        wf("""
        activities:
          - id: x
            tool: not.there
        """)
    )
    drain(engine)
    view = engine.query(rec.id)
    assert view.status == "failed"
    assert view.activities["x"]["error"]["type"] == "ActivityNotRegistered"
    assert view.activities["x"]["attempt"] == 1


def test_outputs_are_stored_as_json_or_refused(engine: Engine, registry: ActivityRegistry) -> None:
    """Non-finite floats become null in every store; a Python object that is not JSON data
    fails its attempt for good (retrying would return the same object)."""

    @registry.activity("odd")
    def odd(kind: str) -> Any:
        if kind == "nan":
            return {"score": float("nan"), "big": 2**70, "t": (1, 2)}
        return {"obj": object()}

    flow = wf("""
        activities:
          - id: x
            tool: odd
            with: {kind: "${{ inputs.kind }}"}
            retry: {max_attempts: 3, initial_interval: 0}
        inputs:
          kind: {type: string}
        """)
    stored = engine.start(flow, {"kind": "nan"})
    refused = engine.start(flow, {"kind": "object"})
    drain(engine)
    view = engine.query(stored.id)
    assert view.status == "completed", view.activities["x"]["error"]
    assert view.activities["x"]["output"] == {"score": None, "big": 2**70, "t": [1, 2]}
    history = engine.history(stored.id)
    done = next(e for e in history if e.type == "ActivityCompleted")
    assert done.data["output"]["score"] is None
    view = engine.query(refused.id)
    assert view.status == "failed"
    assert view.activities["x"]["error"]["type"] == "OutputNotSerializable"
    assert view.activities["x"]["attempt"] == 1


def test_workflow_timeout(engine: Engine, clock: ManualClock) -> None:
    rec = engine.start(
        wf("""
        timeout: 1h
        activities:
          - id: w
            wait: {signal: never}
        """)
    )
    drain(engine)
    clock.advance(hours=1)
    drain(engine)
    view = engine.query(rec.id)
    assert view.status == "failed"
    assert view.error["error"]["type"] == "WorkflowTimeout"


def test_list_filters_and_cursor(engine: Engine, clock: ManualClock, calls: list[Any]) -> None:
    ids = []
    for _ in range(5):
        ids.append(engine.start(THREE_STEPS).id)
        clock.advance(1)
    waits = engine.start(SIGNALS).id
    drain(engine)
    page = engine.list(workflow="t", status="completed", limit=2)
    assert [r.id for r in page.items] == ids[::-1][:2]
    page2 = engine.list(workflow="t", status="completed", limit=2, cursor=page.next_cursor)
    assert [r.id for r in page2.items] == ids[::-1][2:4]
    assert [r.id for r in engine.list(status="waiting").items] == [waits]
    assert engine.list(status="running").items == []  # waiting is not also running


def test_a_worker_drives_every_tenant_and_tenants_stay_apart(
    engine: Engine, calls: list[Any]
) -> None:
    other = engine.for_tenant("b")
    rec = other.start(THREE_STEPS, {"n": 5})
    drain(engine)
    assert other.query(rec.id).output == {"result": 8}
    with pytest.raises(NotFound):
        engine.query(rec.id)
    with pytest.raises(NotFound):
        engine.signal(rec.id, "go")
    assert engine.list().items == []


TIMER = wf("""
    activities:
      - id: t
        wait: {timer: {after: 1h}}
    """)


def test_due_timers_fire_in_one_batch(engine: Engine, clock: ManualClock) -> None:
    ids = [engine.start(TIMER).id for _ in range(40)]
    drain(engine)
    commits = engine.store.commits  # type: ignore[attr-defined]
    clock.advance(hours=1)
    assert engine.fire_due_timers(limit=1000) == 40
    assert engine.store.commits == commits + 1  # type: ignore[attr-defined]  # one transaction
    assert engine.fire_due_timers(limit=1000) == 0
    drain(engine)
    assert {engine.query(i).status for i in ids} == {"completed"}


def test_another_tenants_execution_id_is_its_own(engine: Engine, calls: list[Any]) -> None:
    engine.start(THREE_STEPS, execution_id="shared")
    other = engine.for_tenant("b").start(THREE_STEPS, execution_id="shared")
    assert other.tenant == "b" and other.seq == 1
    assert [r.id for r in engine.for_tenant("b").list().items] == ["shared"]
