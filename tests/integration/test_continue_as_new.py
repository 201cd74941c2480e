"""Continue-as-new end to end on every store: a chain of 50 runs under a ManualClock, each
run's history short, signals to the chain's logical id reaching its live run, buffered
signals carried over, queries and cancel following the chain, and the next run created in
the same transaction as the step that ends the last."""

from __future__ import annotations

import cProfile
import itertools
import pstats
from collections.abc import Callable
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest

from wovyr.activities.base import ActivityContext, ActivityRegistry
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.engine.quotas import Quotas
from wovyr.errors import InputError
from wovyr.ids import continued_id
from wovyr.testing import drain

TICKER = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: ticker, version: "1"}
inputs:
  n: {type: integer, default: 1}
  last: {type: integer, default: 50}
  total: {type: integer, default: 0}
activities:
  - id: tick
    wait: {timer: {after: 1m}}
  - id: ping
    needs: [tick]
    wait: {signal: ping}
  - id: count
    needs: [ping]
    set: {n: "${{ inputs.n }}", total: "${{ inputs.total + activities.ping.output }}"}
output: "${{ activities.count.output }}"
continue_as_new:
  when: "${{ inputs.n < inputs.last }}"
  input: {n: "${{ inputs.n + 1 }}", total: "${{ output.total }}"}
"""


def test_fifty_runs_in_a_row_each_short_signals_reach_the_live_run(
    engine: Engine, clock: ManualClock
) -> None:
    engine.start(TICKER, {}, execution_id="bill")
    sizes = []
    for n in range(1, 51):
        drain(engine)
        live = engine.query("bill")  # the logical id answers with the live run
        assert (live.id, live.status) == (continued_id("bill", n), "waiting")
        engine.signal("bill", "ping", n)  # addressed to the logical id
        clock.advance(61)
        drain(engine)
        sizes.append(len(engine.history(continued_id("bill", n), follow=False)))
    last = engine.query("bill")
    assert (last.id, last.status) == ("bill~c50", "completed")
    loads = _store_loads(lambda: engine.query("bill"))
    assert 2 <= loads <= 14, loads  # O(log n) loads for 50 runs, not one per run
    assert last.output == {"n": 50, "total": sum(range(1, 51))}  # every signal reached a run
    assert max(sizes) == min(sizes)  # the same short history in run 1 and run 50
    assert max(sizes) <= 20
    for n in range(1, 51):  # linked both ways
        view = engine.query(continued_id("bill", n), follow=False)
        assert view.continued_from == (continued_id("bill", n - 1) if n > 1 else None)
        assert view.continued_as == (continued_id("bill", n + 1) if n < 50 else None)
        assert view.status == ("continued" if n < 50 else "completed")
        assert view.chain == {"root": "bill", "run": n}


def test_signals_buffered_before_the_hand_over_reach_the_next_run(
    engine: Engine, clock: ManualClock
) -> None:
    engine.start(TICKER, {"last": 3}, execution_id="buf")
    drain(engine)
    engine.signal("buf", "ping", 10)
    engine.signal("buf", "ping", 20)  # run 1 consumes 10; 20 stays buffered
    engine.signal("buf", "ping", 30)
    clock.advance(61)
    drain(engine)
    second = engine.query("buf")
    assert second.id == "buf~c2"
    started = [e for e in engine.history("buf~c2", follow=False) if e.type == "SignalReceived"]
    assert [e.data["payload"] for e in started] == [20, 30]  # carried over, in order
    clock.advance(61)
    drain(engine)  # run 2 consumes 20 at once; run 3 gets 30
    clock.advance(61)
    drain(engine)
    last = engine.query("buf")
    assert (last.id, last.status) == ("buf~c3", "completed")
    assert last.output == {"n": 3, "total": 60}


def test_cancel_by_the_logical_id_ends_the_live_run(engine: Engine, clock: ManualClock) -> None:
    engine.start(TICKER, {"last": 5}, execution_id="c")
    for n in (1, 2):
        drain(engine)
        engine.signal("c", "ping", n)
        clock.advance(61)
    drain(engine)
    view = engine.cancel("c", reason="stop")
    assert (view.id, view.status) == ("c~c3", "cancelled")
    assert engine.query("c", follow=False).status == "continued"
    assert [r.status for r in _runs(engine, "c")] == ["cancelled", "continued", "continued"]


def test_the_next_run_debits_executions_per_day_and_waits_for_the_next_day(
    engine: Engine, clock: ManualClock
) -> None:
    engine.set_quotas(Quotas(executions_per_day=2), by="test")
    engine.start(TICKER, {"last": 4}, execution_id="q")
    for n in range(1, 3):
        drain(engine)
        engine.signal("q", "ping", n)
        clock.advance(61)
    drain(engine)
    held = engine.query("q")
    assert (held.id, held.status) == ("q~c2", "waiting")  # run 2 would hand over to run 3
    assert held.waiting_on == (
        "quota: executions per day for tenant default used up (limit 2); the chain's next "
        "run waits until 2030-01-02 00:00 UTC"
    )
    assert engine.quota_usage()["used"]["executions"] == 2
    clock.set(datetime(2030, 1, 2, tzinfo=UTC))  # the next UTC day: the hold fires
    for n in range(3, 5):
        drain(engine)
        engine.signal("q", "ping", n)
        clock.advance(61)
    drain(engine)
    done = engine.query("q")
    assert (done.id, done.status) == ("q~c4", "completed")
    assert done.output == {"n": 4, "total": 10}  # nothing lost while it was held
    assert engine.quota_usage()["used"]["executions"] == 2  # runs 3 and 4, on day 2


LOOP = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: loop}
inputs: {n: {type: integer, default: 1}}
activities:
  - {id: step, set: {n: "${{ inputs.n }}"}}
output: "${{ inputs.n }}"
continue_as_new: {when: "${{ inputs.n < 500 }}", input: {n: "${{ inputs.n + 1 }}"}}
"""


def test_a_tight_loop_makes_no_more_runs_a_day_than_the_quota_allows(
    engine: Engine, clock: ManualClock, registry: ActivityRegistry
) -> None:
    """The attack: a chain that hands over at once, forever (before: 500 runs here, 4,303 in
    30 s over HTTP, against a limit of 3). Without the minimum interval, only the quota
    bounds it."""
    fast = Engine(engine.store, clock=clock, activities=registry, min_continue_interval=0)
    fast.set_quotas(Quotas(executions_per_day=3), by="test")
    fast.start(LOOP, execution_id="loop")
    drain(fast)
    assert _run_count(fast, "loop") == 3  # the start and two hand-overs: the day's three
    live = fast.query("loop")
    assert (live.id, live.status) == ("loop~c3", "waiting")
    assert live.waiting_on is not None and live.waiting_on.startswith("quota: executions")
    assert fast.quota_usage()["used"]["executions"] == 3.0
    clock.advance(3600)
    drain(fast)  # still the same day: nothing more
    assert _run_count(fast, "loop") == 3
    clock.set(datetime(2030, 1, 2, tzinfo=UTC))
    drain(fast)
    assert _run_count(fast, "loop") == 6  # the next day's three
    assert fast.quota_usage()["used"]["executions"] == 3.0
    assert fast.store.quota_usage("default", date(2030, 1, 1)) == {"executions": 3.0}


def test_a_chain_starts_at_most_one_run_per_minimum_interval(
    engine: Engine, clock: ManualClock, registry: ActivityRegistry
) -> None:
    slow = Engine(engine.store, clock=clock, activities=registry, min_continue_interval=10)
    slow.start(LOOP, execution_id="tight")
    drain(slow)
    assert _run_count(slow, "tight") == 1
    view = slow.query("tight")
    assert view.status == "waiting"
    assert view.waiting_on == (
        "continue-as-new: one run of chain tight every 10 s; the next no sooner than "
        "2030-01-01T09:00:10+00:00"
    )
    for _ in range(35):  # 35 seconds, one at a time
        clock.advance(1)
        drain(slow)
    assert _run_count(slow, "tight") == 4  # runs at 0, 10, 20 and 30 s
    starts = [r.created_at for r in _chain(slow, "tight")]
    assert [(b - a).total_seconds() for a, b in itertools.pairwise(starts)] == [10, 10, 10]


def test_a_held_hand_over_keeps_its_signals_and_can_be_cancelled(
    engine: Engine, clock: ManualClock
) -> None:
    engine.set_quotas(Quotas(executions_per_day=1), by="test")
    engine.start(TICKER, {"last": 3}, execution_id="h")
    drain(engine)
    engine.signal("h", "ping", 1)
    engine.signal("h", "ping", 2)  # buffered for run 2
    clock.advance(61)
    drain(engine)
    assert (engine.query("h").id, engine.query("h").status) == ("h", "waiting")
    engine.signal("h", "ping", 3)  # arrives while the hand-over is held
    drain(engine)
    assert engine.store.load("h~c2", engine.tenant) is None  # still held: no run 2
    clock.set(datetime(2030, 1, 2, tzinfo=UTC))
    drain(engine)
    second = engine.query("h")
    assert second.id == "h~c2"
    carried = [e for e in engine.history("h~c2", follow=False) if e.type == "SignalReceived"]
    assert [e.data["payload"] for e in carried] == [2, 3]
    clock.advance(61)
    drain(engine)  # run 2 ends; run 3 is over the new day's quota: held
    assert engine.query("h").id == "h~c2" and engine.query("h").status == "waiting"
    view = engine.cancel("h", reason="stop")
    assert (view.id, view.status) == ("h~c2", "cancelled")
    clock.set(datetime(2030, 1, 3, tzinfo=UTC))
    drain(engine)
    assert engine.store.load("h~c3", engine.tenant) is None


def test_a_caller_may_not_choose_a_chain_run_id(engine: Engine) -> None:
    with pytest.raises(InputError) as info:
        engine.start(TICKER, {}, execution_id="x~c2")
    assert "reserved" in str(info.value)


def _store_loads(call: Callable[[], object]) -> int:
    """How many times `call` loaded an execution from the store (counted, not timed)."""
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        call()
    finally:
        profiler.disable()
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    return sum(
        calls
        for (path, _, name), (_, calls, *_) in stats.items()
        if name == "load" and "wovyr/store" in path.replace("\\", "/")
    )


def _chain(engine: Engine, root: str) -> list[Any]:
    """The runs of chain `root`, in order (one load each)."""
    runs = []
    for n in itertools.count(1):
        record = engine.store.load(continued_id(root, n), engine.tenant)
        if record is None:
            return runs
        runs.append(record)
    raise AssertionError("unreachable")


def _run_count(engine: Engine, root: str) -> int:
    return len(_chain(engine, root))


def _runs(engine: Engine, prefix: str) -> list[Any]:
    return [r for r in engine.list(limit=100).items if r.id.startswith(prefix)]


def test_next_inputs_that_do_not_fit_fail_the_run_with_a_clear_error(
    engine: Engine, clock: ManualClock
) -> None:
    bad = TICKER.replace('input: {n: "${{ inputs.n + 1 }}"', "input: {n: \"${{ 'x' }}\"")
    engine.start(bad, {"last": 3}, execution_id="bad")
    drain(engine)
    engine.signal("bad", "ping", 1)
    clock.advance(61)
    drain(engine)
    view = engine.query("bad")
    assert (view.id, view.status, view.continued_as) == ("bad", "failed", None)
    assert view.error["type"] == "ContinueAsNewError"
    assert "input 'n'" in view.error["message"]
    assert engine.store.load("bad~c2", engine.tenant) is None


PARENT = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: parent}
activities:
  - {id: kid, workflow: {name: ticker}, retry: {max_attempts: 3}}
"""


def test_a_workflow_that_continues_is_refused_as_a_child(engine: Engine) -> None:
    engine.apply(TICKER)
    engine.start(PARENT, execution_id="p")
    drain(engine)
    view = engine.query("p")
    assert view.status == "failed"
    error = view.activities["kid"]["error"]
    assert error["type"] == "ContinueAsNewChild"
    assert "declares continue_as_new and cannot run as a child" in error["message"]
    assert view.activities["kid"]["attempt"] == 1  # refused for good, not retried


BILLING = Path(__file__).parents[2] / "examples" / "monthly-billing.yaml"


def test_the_monthly_billing_example_bills_each_month_in_its_own_run(
    engine: Engine, registry: ActivityRegistry, clock: ManualClock
) -> None:
    charged: list[tuple[int, str]] = []

    @registry.activity("billing.charge")
    def charge(customer: str, month: int, amount: float, ctx: ActivityContext) -> dict[str, Any]:
        charged.append((month, ctx.idempotency_key))
        return {"customer": customer, "month": month, "amount": amount}

    engine.start(path=BILLING, input={"customer": "C-1", "last_month": 3}, execution_id="sub")
    for month in (1, 2, 3):
        drain(engine)
        assert [m for m, _ in charged] == list(range(1, month))  # the month has not passed
        clock.advance(30 * 86400)
        drain(engine)
    view = engine.query("sub")
    assert (view.id, view.status) == ("sub~c3", "completed")
    assert view.output == {"customer": "C-1", "month": 3, "billed": pytest.approx(3 * 9.99)}
    assert [key for _, key in charged] == [
        "sub/charge/1",
        "sub~c2/charge/1",
        "sub~c3/charge/1",
    ]
