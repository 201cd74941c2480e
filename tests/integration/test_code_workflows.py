"""Workflows written as Python functions (`@wovyr.workflow`), end to end on every store: the
function is replayed before each decision, its calls run as ordinary activities (once each),
parallel calls start in one decision, failures raise into the function, an uncaught one
compensates as a YAML saga does, and a changed function is stopped, never mis-replayed."""

from __future__ import annotations

import asyncio
import json
import threading
from contextvars import ContextVar
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest

import wovyr
from wovyr.activities.base import ActivityError, ActivityRegistry, load_activity_modules
from wovyr.clock import ManualClock
from wovyr.code.workflow import _REGISTRY, answer_query, registered
from wovyr.engine.core.state import state_from_json
from wovyr.engine.engine import Engine
from wovyr.errors import Conflict, DefinitionError, InputError
from wovyr.events import EventType
from wovyr.store.base import Store
from wovyr.testing import drain
from wovyr.worker.runner import UNLOADED_RETRY

EXAMPLE = Path(__file__).parents[2] / "examples" / "order-saga.yaml"


# --- the order saga, as the YAML example and as a function ---------------------------------


# the example's function (`examples/order_saga.py`), loaded as `-a` loads it
(SAGA_MODULE,) = load_activity_modules([str(EXAMPLE.with_name("order_saga.py"))])
order_saga = next(wf for wf in registered() if wf.fn.__module__ == SAGA_MODULE)


def shop(registry: ActivityRegistry, calls: list[tuple[str, Any]], *, decline: bool) -> None:
    def reserve(order_id: str, items: list[Any]) -> dict[str, Any]:
        calls.append(("reserve", order_id))
        return {"reservation_id": f"R-{order_id}"}

    def release(reservation_id: str) -> None:
        calls.append(("release", reservation_id))

    def charge(order_id: str, amount: float, currency: str, description: str) -> dict[str, Any]:
        calls.append(("charge", description))
        if decline:
            raise ActivityError("card declined", type="CardDeclined")
        return {"charge_id": f"C-{order_id}"}

    def refund(charge_id: str, amount: float) -> None:
        calls.append(("refund", charge_id))

    def ship(order_id: str, reservation_id: str, express: bool) -> dict[str, Any]:
        calls.append(("ship", reservation_id))
        return {"tracking_number": f"T-{order_id}"}

    for name, fn in {
        "inventory.reserve": reserve,
        "inventory.release": release,
        "payments.charge": charge,
        "payments.refund": refund,
        "shipping.ship": ship,
    }.items():
        registry.register(name, fn)


def observed(engine: Engine, execution_id: str) -> dict[str, Any]:
    """What a user sees of an execution: status, output, error type and each step's end."""
    view = engine.query(execution_id)
    error = view.error or {}
    return {
        "status": view.status,
        "output": view.output,
        "error": (error.get("type"), error.get("activity"), (error.get("error") or {}).get("type")),
        "compensation": [(c["activity"], c["status"]) for c in error.get("compensation", [])],
        # a function reveals only the steps it reached; a YAML workflow also lists those
        # it skipped (`ship` after a declined card)
        "steps": {
            aid: a["status"] for aid, a in view.activities.items() if a["status"] != "skipped"
        },
    }


@pytest.mark.parametrize("decline", [False, True], ids=["ships", "declined"])
def test_the_order_saga_as_yaml_and_as_python_is_seen_the_same(
    engine: Engine, registry: ActivityRegistry, decline: bool
) -> None:
    seen = []
    for definition in (EXAMPLE.read_text(), order_saga.definition()):
        calls: list[tuple[str, Any]] = []
        shop(registry, calls, decline=decline)
        record = engine.start(definition, {"order_id": "A-1", "amount": 20, "items": ["x"]})
        drain(engine, skip_time=True)
        seen.append((observed(engine, record.id), calls))

    assert seen[0] == seen[1]
    result, calls = seen[1]
    if decline:
        assert result["status"] == "failed"
        assert result["error"] == ("ActivityFailed", "charge", "CardDeclined")
        assert result["compensation"] == [("reserve", "compensated")]
        assert calls == [
            ("reserve", "A-1"),
            ("charge", "Order A-1 (1 items)"),
            ("release", "R-A-1"),
        ]
    else:
        assert result["output"] == {"order_id": "A-1", "charge_id": "C-A-1", "tracking": "T-A-1"}
        assert [c[0] for c in calls] == ["reserve", "charge", "ship"]


# --- replay: each call once, parallel calls in one decision, values recorded ----------------


@wovyr.workflow(name="code-fan")
async def fan(ctx: wovyr.Context, n: int) -> dict[str, Any]:
    first = await ctx.run("t.echo", value="${{ inputs.secret }}")
    parts = await asyncio.gather(*(ctx.run("t.square", x=i) for i in range(n)))
    stamp = ctx.now()
    token = ctx.uuid()
    return {"first": first, "sum": sum(parts), "stamp": stamp.isoformat(), "token": token}


def test_calls_run_once_and_gather_starts_them_in_one_decision(
    engine: Engine, registry: ActivityRegistry, clock: ManualClock
) -> None:
    ran: list[Any] = []
    registry.register("t.echo", lambda value: ran.append(value) or value)
    registry.register("t.square", lambda x: ran.append(x) or x * x)

    record = engine.start(fan.definition(), {"n": 4})
    drain(engine)
    view = engine.query(record.id)

    assert view.status == "completed", view.error
    # data that looks like an expression is data: it is never rendered
    assert view.output["first"] == "${{ inputs.secret }}"
    assert view.output["sum"] == 0 + 1 + 4 + 9
    assert view.output["stamp"] == clock.now().isoformat()
    assert ran == ["${{ inputs.secret }}", 0, 1, 2, 3]  # each call ran once
    history = engine.history(record.id)
    types = [(e.type, e.data.get("activity")) for e in history]
    started = [
        i
        for i, (t, a) in enumerate(types)
        if t == EventType.ACTIVITY_STARTED and a and a.startswith("square_")
    ]
    first_done = min(
        i
        for i, (t, a) in enumerate(types)
        if t == EventType.ACTIVITY_COMPLETED and a and a.startswith("square_")
    )
    assert len(started) == 4 and max(started) < first_done  # all four started before any ended
    # the recorded values answer every later replay: the output holds the recorded token
    token = next(
        e.data["output"]["uuid"]
        for e in history
        if e.type == EventType.ACTIVITY_COMPLETED and e.data["activity"] == "uuid_7"
    )
    assert view.output["token"] == token
    # each step names the line of the function that asked for it
    steps = engine.definition(record.definition_hash)
    assert steps.code is not None and steps.activities == []
    assert set(view.activities) == {
        "echo_1",
        "square_2",
        "square_3",
        "square_4",
        "square_5",
        "now_6",
        "uuid_7",
    }


@wovyr.workflow(name="code-waits")
async def waits(ctx: wovyr.Context, who: str) -> dict[str, Any]:
    await ctx.sleep("1h")
    answer = await ctx.signal("go", timeout="1d")
    child = await ctx.child(child_flow, {"x": 2})
    return {"who": who, "answer": answer, "child": child}


@wovyr.workflow(name="code-child")
async def child_flow(ctx: wovyr.Context, x: int) -> int:
    doubled: int = await ctx.run("t.double", x=x)
    return doubled


def test_timers_signals_and_children_are_durable_steps(
    engine: Engine, registry: ActivityRegistry, clock: ManualClock
) -> None:
    registry.register("t.double", lambda x: 2 * x)
    engine.apply(child_flow.definition())
    record = engine.start(waits.definition(), {"who": "ann"})
    drain(engine)
    assert engine.query(record.id).activities["sleep_1"]["status"] == "waiting"

    clock.advance(3600)  # the hour passes; now it waits for the signal (a day at most)
    drain(engine)
    view = engine.query(record.id)
    assert view.status == "waiting" and view.activities["go_2"]["status"] == "waiting"

    engine.signal(record.id, "go", {"ok": True})
    drain(engine)
    view = engine.query(record.id)
    assert view.status == "completed", view.error
    assert view.output == {"who": "ann", "answer": {"ok": True}, "child": 4}


@wovyr.workflow(name="code-branches")
async def branches(ctx: wovyr.Context) -> list[int]:
    async def branch(i: int) -> int:
        looked_up = await ctx.run("t.lookup", i=i)
        total: int = await ctx.run("t.add", x=looked_up)
        return total

    return list(await asyncio.gather(branch(1), branch(2)))


def test_parallel_branches_replay_in_the_order_their_steps_finished(
    engine: Engine, registry: ActivityRegistry
) -> None:
    """Branch 2's steps both finish before branch 1's first: every replay hands the results
    over in that recorded order, so branch 1 asks for its second step after branch 2's, as
    it did live (handed over at once, it would ask first and find branch 2's step there)."""
    second_done = asyncio.Event()

    async def lookup(i: int) -> int:
        if i == 1:
            await second_done.wait()  # set by branch 2's second step
        return 10 * i

    def add(x: int) -> int:
        return x + 1

    async def add_then_release(x: int) -> int:
        if x == 20:
            second_done.set()
        return add(x)

    registry.register("t.lookup", lookup)
    registry.register("t.add", add_then_release)
    record = engine.start(branches.definition(), {})
    drain(engine)

    view = engine.query(record.id)
    assert view.status == "completed", view.error
    assert view.output == [11, 21]
    added = {aid: a["input"] for aid, a in view.activities.items() if aid.startswith("add_")}
    assert added == {"add_3": {"x": 20}, "add_4": {"x": 10}}  # branch 2 asked first


_DEPTH: ContextVar[int] = ContextVar("depth", default=0)


@wovyr.workflow(name="code-unwinds")
async def unwinds(ctx: wovyr.Context) -> list[int]:
    token = _DEPTH.set(1)
    try:
        echoed: list[int] = []

        async def echo(value: int) -> None:
            echoed.append(await ctx.run("t.echo", value=value))

        async with anyio.create_task_group() as group:  # anyio's tasks and cancel scopes
            group.start_soon(echo, 1)
            group.start_soon(echo, 2)
        await ctx.signal("go")
        return sorted(echoed)
    finally:
        _DEPTH.reset(token)  # in the task that set it, also when a waiting replay is dropped
        await ctx.run("t.note", text="done")


def test_a_replay_left_waiting_unwinds_in_its_tasks_and_asks_for_nothing_more(
    engine: Engine, registry: ActivityRegistry
) -> None:
    """Each replay that waits (here on the task group, then on the signal) is dropped by
    cancelling its tasks: anyio's scopes and the function's `finally` run in their own
    task, and the step the `finally` asks for then is not one: it runs once, at the end."""
    notes: list[str] = []
    registry.register("t.echo", lambda value: value)

    def note(text: str) -> None:
        notes.append(text)

    registry.register("t.note", note)
    record = engine.start(unwinds.definition(), {})
    drain(engine)
    view = engine.query(record.id)
    assert view.status == "waiting", view.error
    assert notes == [] and "note_4" not in view.activities

    engine.signal(record.id, "go", {})
    drain(engine)
    view = engine.query(record.id)
    assert view.status == "completed", view.error
    assert view.output == [1, 2]
    assert notes == ["done"]
    assert list(view.activities) == ["echo_1", "echo_2", "go_3", "note_4"]


# --- failure ------------------------------------------------------------------------------


@wovyr.workflow(name="code-catches")
async def catches(ctx: wovyr.Context) -> str:
    try:
        await ctx.run("t.flaky", retry=2)
    except wovyr.StepFailed as failed:
        await ctx.run("t.note", text=failed.type)
        return "recovered from " + failed.type
    return "no failure"


def test_a_failed_step_raises_into_the_function_which_may_catch_it(
    engine: Engine, registry: ActivityRegistry, clock: ManualClock
) -> None:
    notes: list[str] = []
    tries: list[int] = []

    def flaky() -> None:
        tries.append(1)
        raise ActivityError("down", type="Down")

    registry.register("t.flaky", flaky)

    def note(text: str) -> None:
        notes.append(text)

    registry.register("t.note", note)
    record = engine.start(catches.definition(), {})
    drain(engine, skip_time=True)

    view = engine.query(record.id)
    assert view.status == "completed", view.error
    assert view.output == "recovered from Down"
    assert len(tries) == 2 and notes == ["Down"]  # its retry policy ran before it raised


@wovyr.workflow(name="code-raises")
async def raises(ctx: wovyr.Context) -> None:
    await ctx.run("t.echo", value=1)
    raise RuntimeError("the books do not balance")


@wovyr.workflow(name="code-not-json")
async def not_json(ctx: wovyr.Context) -> None:
    await ctx.run("t.echo", value=object())


def test_a_raising_function_fails_with_its_traceback(
    engine: Engine, registry: ActivityRegistry
) -> None:
    registry.register("t.echo", lambda value: value)
    record = engine.start(raises.definition(), {})
    drain(engine)
    view = engine.query(record.id)
    assert view.status == "failed"
    assert view.error["type"] == "RuntimeError"
    assert view.error["message"] == "the books do not balance"
    assert "test_code_workflows.py" in view.error["details"]["traceback"]

    record = engine.start(not_json.definition(), {})
    drain(engine)
    view = engine.query(record.id)
    assert view.status == "failed"
    assert view.error["type"] == "TypeError"
    assert "argument 'value' of t.echo is a object, which is not JSON" in view.error["message"]


# --- a changed function -------------------------------------------------------------------


def _register_version_a() -> wovyr.CodeWorkflow:
    @wovyr.workflow(name="code-changes")
    async def changes(ctx: wovyr.Context) -> str:
        await ctx.run("t.echo", value="a")
        await ctx.signal("go")
        if ctx.patched("extra"):
            await ctx.run("t.echo", value="extra")
        return "done"

    return changes


def _register_version_b() -> wovyr.CodeWorkflow:
    @wovyr.workflow(name="code-changes")
    async def changes(ctx: wovyr.Context) -> str:
        await ctx.run("t.note", text="b")  # another first step than the history holds
        await ctx.signal("go")
        return "done"

    return changes


def test_a_changed_function_is_stopped_naming_the_call_and_its_line(
    engine: Engine, registry: ActivityRegistry
) -> None:
    registry.register("t.echo", lambda value: value)
    registry.register("t.note", lambda text: text)
    try:
        record = engine.start(_register_version_a().definition(), {})
        drain(engine)
        assert engine.query(record.id).status == "waiting"
        _register_version_b()  # deployed under the same name and version
        engine.signal(record.id, "go", {})
        drain(engine)
    finally:
        _REGISTRY.pop(("code-changes", "1"), None)

    view = engine.query(record.id)
    assert view.status == "failed"
    assert view.error["type"] == "NonDeterminism"
    assert "call 1 at test_code_workflows.py:" in view.error["message"]
    assert "asks for note_1; the history holds echo_1 there" in view.error["message"]


def test_patched_keeps_running_executions_on_their_path(
    engine: Engine, registry: ActivityRegistry
) -> None:
    echoed: list[str] = []
    registry.register("t.echo", lambda value: echoed.append(value) or value)
    try:

        @wovyr.workflow(name="code-patch")
        async def before(ctx: wovyr.Context) -> str:
            await ctx.run("t.echo", value="a")
            await ctx.run("t.echo", value="z")
            await ctx.signal("go")
            return "old"

        old = engine.start(before.definition(), {})
        drain(engine)

        @wovyr.workflow(name="code-patch")
        async def after(ctx: wovyr.Context) -> str:
            await ctx.run("t.echo", value="a")
            if ctx.patched("new_step"):
                await ctx.run("t.echo", value="new")
                await ctx.signal("go")
                return "new"
            await ctx.run("t.echo", value="z")
            await ctx.signal("go")
            return "old"

        new = engine.start(after.definition(), {})
        drain(engine)
        for record in (old, new):
            engine.signal(record.id, "go", {})
        drain(engine)
    finally:
        _REGISTRY.pop(("code-patch", "1"), None)

    # the old execution had passed the patch point under the old code: it keeps its path
    assert engine.query(old.id).output == "old"
    assert engine.query(new.id).output == "new"
    assert echoed == ["a", "z", "a", "new"]


# --- what a function cannot be ------------------------------------------------------------


def test_bad_functions_and_documents_are_refused_clearly() -> None:
    with pytest.raises(TypeError, match="takes an async def"):
        wovyr.workflow(name="sync")(lambda ctx: None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not a valid name"):

        @wovyr.workflow(name="no spaces")
        async def spaced(ctx: wovyr.Context) -> None: ...

    with pytest.raises(DefinitionError, match="`code` is not part of the language"):
        wovyr.load_definition(
            "apiVersion: wovyr/v1\nkind: Workflow\nmetadata: {name: x}\n"
            "code: {function: os.system, digest: 'sha256:" + "0" * 64 + "'}\n"
            "activities: [{id: a, set: {x: 1}}]\n"
        )


# --- a worker without the function --------------------------------------------------------


def test_a_worker_without_the_function_holds_the_execution_for_one_that_has_it(
    engine: Engine, registry: ActivityRegistry, clock: ManualClock
) -> None:
    registry.register("t.echo", lambda value: value)

    @wovyr.workflow(name="code-elsewhere")
    async def elsewhere(ctx: wovyr.Context) -> str:
        out: str = await ctx.run("t.echo", value="here")
        return out

    definition = elsewhere.definition()
    _REGISTRY.pop(("code-elsewhere", "1"))  # this process lacks it, as a worker without it
    record = engine.start(definition, {})
    drain(engine)
    view = engine.query(record.id)
    assert view.status == "waiting" and view.activities == {}  # nothing decided, nothing lost
    assert "is not loaded in this process" in (view.waiting_on or "")

    _REGISTRY[("code-elsewhere", "1")] = elsewhere  # a worker that has it
    try:
        clock.advance(UNLOADED_RETRY)
        drain(engine)
    finally:
        _REGISTRY.pop(("code-elsewhere", "1"), None)
    view = engine.query(record.id)
    assert view.status == "completed" and view.output == "here"


# --- approvals and reruns -----------------------------------------------------------------


@wovyr.workflow(name="code-approved")
async def approved(ctx: wovyr.Context, x: int) -> dict[str, Any]:
    a = await ctx.run("t.echo", value=x)
    decision = await ctx.approval(timeout="1d", approvers=["ann"])
    b = await ctx.run("t.echo", value=a + 1)
    return {"b": b, "approved": decision["approved"]}


def test_an_approval_is_decided_by_its_approver_and_a_rerun_reuses_earlier_steps(
    engine: Engine, registry: ActivityRegistry
) -> None:
    ran: list[int] = []

    def echo(value: int) -> int:
        ran.append(value)
        return value

    registry.register("t.echo", echo)
    record = engine.start(approved.definition(), {"x": 1})
    drain(engine)
    with pytest.raises(Conflict, match="'bob' may not decide 'approval_2'"):
        engine.approve(record.id, "approval_2", by="bob")
    engine.approve(record.id, "approval_2", by="ann")
    drain(engine)
    assert engine.query(record.id).output == {"b": 2, "approved": True}

    rerun = engine.rerun(record.id, start_from="echo_3")
    drain(engine)
    view = engine.query(rerun.id)
    assert view.output == {"b": 2, "approved": True}
    assert [a["reused_from"] for a in view.activities.values()] == [record.id, record.id, None]
    assert ran == [1, 2, 2]  # echo_1 reused, echo_3 ran again
    with pytest.raises(InputError, match="has no step 'nope'"):
        engine.rerun(record.id, start_from="nope")


# --- queries ------------------------------------------------------------------------------


@wovyr.workflow(name="code-queried")
async def queried(ctx: wovyr.Context, items: list) -> int:  # type: ignore[type-arg]
    total = 0
    for i, item in enumerate(items):
        ctx.state["stage"] = f"item {i + 1} of {len(items)}"
        total += await ctx.run("t.price", item=item)
        if i == 0:
            await ctx.signal("more")
    ctx.state["stage"] = "done"
    return total


@queried.query
def progress(q: wovyr.Query, unit: str = "EUR") -> dict[str, Any]:
    return {"stage": q.state.get("stage"), "priced": len(q.steps), "unit": unit}


def test_a_query_answers_from_a_replay_and_records_nothing(
    engine: Engine, registry: ActivityRegistry
) -> None:
    def price(item: str) -> int:
        return len(item)

    registry.register("t.price", price)
    record = engine.start(queried.definition(), {"items": ["ab", "cde"]})
    drain(engine)
    state = engine.store.load(record.id, "default")
    assert state is not None
    before = state.seq

    answer = answer_query(
        engine.definition(record.definition_hash),
        state_from_json(state.checkpoint or {}),
        "progress",
        {"unit": "USD"},
        engine.clock.now(),
    )
    assert answer == {"stage": "item 1 of 2", "priced": 1, "unit": "USD"}
    after = engine.store.load(record.id, "default")
    assert after is not None and after.seq == before  # nothing recorded
    with pytest.raises(InputError, match="has no query 'nope'"):
        answer_query(
            engine.definition(record.definition_hash),
            state_from_json(state.checkpoint or {}),
            "nope",
            {},
            engine.clock.now(),
        )


# --- secrets ------------------------------------------------------------------------------

CANARY = "tok-code-4242-very-secret"


class Vault:
    def resolve_secret(self, tenant: str, name: str) -> str:
        assert (tenant, name) == ("default", "CARD_TOKEN")
        return CANARY


@wovyr.workflow(name="code-secret")
async def pays(ctx: wovyr.Context) -> str:
    token = ctx.secret("CARD_TOKEN")
    seen: str = await ctx.run("t.pay", token=token, note=f"with {token}")
    return seen


def test_a_secret_reaches_the_attempt_and_nothing_else(
    store: Store, clock: ManualClock, registry: ActivityRegistry
) -> None:
    got: list[tuple[str, str]] = []

    def pay(token: str, note: str) -> str:
        got.append((token, note))
        return "paid"

    registry.register("t.pay", pay)
    engine = Engine(store, clock=clock, activities=registry, secrets=Vault())
    record = engine.start(pays.definition(), {})
    drain(engine)
    assert engine.query(record.id).output == "paid"
    # the note held the reference as text (a string the function made): data, not resolved
    assert got == [(CANARY, "with ${{ secrets.CARD_TOKEN }}")]
    stored = json.dumps([e.data for e in engine.history(record.id)])
    assert CANARY not in stored and "secrets.CARD_TOKEN" in stored


# --- flow control -------------------------------------------------------------------------


@wovyr.workflow(name="code-one-at-a-time")
async def one_at_a_time(ctx: wovyr.Context, n: int) -> int:
    out: int = await ctx.run("t.add", x=n, concurrency={"key": "one", "limit": 1})
    return out


def test_a_concurrency_key_holds_a_function_step_as_a_yaml_one(
    engine: Engine, registry: ActivityRegistry, clock: ManualClock
) -> None:
    """Three executions whose steps share one slot, the clock standing still: the steps
    refused the slot wait on a timer and run when it is freed, one at a time."""
    from wovyr.worker import Worker

    running, most = [0], [0]
    lock = threading.Lock()

    def add(x: int) -> int:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        with lock:
            running[0] -= 1
        return x + 1

    registry.register("t.add", add)

    async def main() -> list[str]:
        worker = Worker(engine, concurrency=4)
        try:
            ids = [(await worker.start(one_at_a_time.definition(), {"n": n})).id for n in (1, 2, 3)]
            await worker.run_until_idle(only=ids)
            return ids
        finally:
            await worker.close()

    ids = asyncio.run(main())
    assert [engine.query(i).output for i in ids] == [2, 3, 4]
    assert most[0] == 1
    held = [e for i in ids for e in engine.history(i) if e.type == "TimerArmed"]
    assert len(held) >= 2  # two of them waited for the slot


@wovyr.workflow(name="code-signal-timeout")
async def impatient(ctx: wovyr.Context) -> str:
    try:
        payload = await ctx.signal("go", timeout="1h")
    except wovyr.StepFailed as failed:
        return f"gave up: {failed.type}"
    return f"got {payload}"


def test_a_signal_that_does_not_come_in_time_raises_into_the_function(
    engine: Engine, clock: ManualClock
) -> None:
    late, early = (engine.start(impatient.definition(), {}) for _ in range(2))
    drain(engine)
    engine.signal(early.id, "go", 7)
    clock.advance(3600)
    drain(engine)
    assert engine.query(early.id).output == "got 7"
    assert engine.query(late.id).output == "gave up: SignalTimeout"


# --- schedules and cancel -----------------------------------------------------------------


@wovyr.workflow(name="code-tick")
async def tick(ctx: wovyr.Context) -> str:
    stamp = ctx.now()
    await ctx.signal("stop")
    return stamp.isoformat()


def test_a_schedule_starts_a_function_and_cancel_ends_it(
    engine: Engine, clock: ManualClock
) -> None:
    from wovyr.scheduling.schedules import Schedules

    engine.apply(tick.definition())
    schedules = Schedules(engine)
    schedules.create("ticks", workflow="code-tick", cron="0 * * * *")
    clock.set(clock.now().replace(minute=0) + timedelta(hours=1))
    drain(engine)
    drain(engine)
    [record] = engine.list(workflow="code-tick", limit=10).items
    view = engine.query(record.id)
    assert view.status == "waiting" and view.activities["now_1"]["status"] == "completed"
    engine.cancel(record.id, "enough")
    drain(engine)
    view = engine.query(record.id)
    assert view.status == "cancelled"
    assert view.activities["stop_2"]["status"] != "waiting"
