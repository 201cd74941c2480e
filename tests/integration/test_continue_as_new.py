"""Continue-as-new end to end on every store: a chain of 50 runs under a ManualClock, each
run's history short, signals to the chain's logical id reaching its live run, buffered
signals carried over, queries and cancel following the chain, and the next run created in
the same transaction as the step that ends the last."""

from __future__ import annotations

import cProfile
import pstats
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from wovyr.activities.base import ActivityContext, ActivityRegistry
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
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


def test_the_next_run_debits_executions_per_day_but_is_never_refused(
    engine: Engine, clock: ManualClock
) -> None:
    from wovyr.engine.quotas import Quotas

    engine.set_quotas(Quotas(executions_per_day=2), by="test")
    engine.start(TICKER, {"last": 4}, execution_id="q")
    for n in range(1, 5):
        drain(engine)
        engine.signal("q", "ping", n)
        clock.advance(61)
    drain(engine)
    assert engine.query("q").status == "completed"  # runs 3 and 4 passed the limit of 2
    assert engine.quota_usage()["used"]["executions"] == 4


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
