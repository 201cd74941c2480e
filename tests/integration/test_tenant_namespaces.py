"""Execution ids are per tenant: the same id (and the same schedule name, and the ids derived
from them: children, schedule ticks) in two tenants names two executions, and nothing one
tenant does collides with, blocks or reveals the other's."""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime

import pytest

from wovyr.clock import ManualClock
from wovyr.engine.core.policy import RunActivity
from wovyr.engine.core.state import state_from_json
from wovyr.engine.engine import Engine
from wovyr.errors import InputError, NotFound
from wovyr.ids import ID_MAX_LENGTH, child_id, derived_id, is_execution_id
from wovyr.scheduling.schedules import Schedules
from wovyr.store.base import ExecutionFilter
from wovyr.testing import drain


def wf(name: str, body: str) -> str:
    head = f"apiVersion: wovyr/v1\nkind: Workflow\nmetadata: {{name: {name}}}\n"
    return head + textwrap.dedent(body)


WAITS = wf(
    "waits",
    """
    inputs:
      n: {type: integer, default: 0}
    activities:
      - id: hold
        wait: {signal: go}
    output: "${{ activities.hold.output }}"
    """,
)
QUICK = wf(
    "quick",
    """
    activities:
      - id: x
        set: {ok: true}
    """,
)
PARENT = wf(
    "parent",
    """
    activities:
      - id: c
        workflow: {name: waits}
    output: "${{ activities.c.output }}"
    """,
)
NAMED_CHILD = wf(
    "named",
    """
    inputs:
      child: {type: string}
    activities:
      - id: c
        workflow: {name: quick, id: "${{ inputs.child }}"}
    """,
)


@pytest.fixture
def a(engine: Engine) -> Engine:
    tenant = engine.for_tenant("a")
    for doc in (WAITS, QUICK, PARENT, NAMED_CHILD):
        tenant.apply(doc)
    return tenant


@pytest.fixture
def b(engine: Engine) -> Engine:
    tenant = engine.for_tenant("b")
    for doc in (WAITS, QUICK, PARENT, NAMED_CHILD):
        tenant.apply(doc)
    return tenant


def test_the_same_id_in_two_tenants_is_two_executions(a: Engine, b: Engine) -> None:
    first = a.submit(name="waits", input={"n": 1}, execution_id="order-7")
    second = b.submit(name="waits", input={"n": 2}, execution_id="order-7")
    assert first.created and second.created
    assert (first.record.tenant, second.record.tenant) == ("a", "b")
    again = b.submit(name="waits", input={"n": 3}, execution_id="order-7")
    assert not again.created and again.record.input == {"n": 2}
    drain(a)
    a.signal("order-7", "go", {"from": "a"})
    drain(a)
    assert a.query("order-7").status == "completed"
    assert a.query("order-7").output == {"from": "a"}
    assert b.query("order-7").status == "waiting"  # a's signal reached only a's execution
    b.cancel("order-7", reason="b cancels its own")
    assert b.query("order-7").status == "cancelled"
    assert a.query("order-7").status == "completed"
    assert [r.id for r in a.list().items] == ["order-7"] == [r.id for r in b.list().items]
    a_types = [e.type for e in a.history("order-7")]
    b_types = [e.type for e in b.history("order-7")]
    assert "SignalReceived" in a_types and "SignalReceived" not in b_types
    assert "ExecutionCancelled" in b_types and "ExecutionCancelled" not in a_types


def test_another_tenants_id_answers_as_a_missing_one(a: Engine, b: Engine) -> None:
    a.start(name="waits", execution_id="shared")
    for call in (
        lambda e, i: e.query(i),
        lambda e, i: e.get(i),
        lambda e, i: e.history(i),
        lambda e, i: e.signal(i, "go"),
        lambda e, i: e.cancel(i),
        lambda e, i: e.approve(i, "hold"),
    ):
        with pytest.raises(NotFound) as theirs:
            call(b, "shared")
        with pytest.raises(NotFound) as missing:
            call(b, "absent")
        assert str(theirs.value) == str(missing.value).replace("absent", "shared")
    assert a.query("shared").status == "running"


def test_children_with_the_same_derived_id_are_each_their_tenants(a: Engine, b: Engine) -> None:
    a.start(name="parent", execution_id="p")
    b.start(name="parent", execution_id="p")
    drain(a)
    child = child_id("p", "c")
    assert a.query(child).status == "waiting" and b.query(child).status == "waiting"
    b.signal(child, "go", "b's")
    drain(b)
    assert b.query("p").status == "completed" and b.query("p").output == "b's"
    assert a.query("p").status == "waiting" and a.query(child).status == "waiting"
    kids = a.store.list_executions(ExecutionFilter(tenant="a", parent_id="p"))
    assert [k.id for k in kids.items] == [child]


def test_a_pre_created_child_id_of_one_tenant_does_not_affect_another(a: Engine, b: Engine) -> None:
    # Tenant a takes the id b's parent will derive for its child: b's parent is unaffected.
    a.start(name="waits", execution_id=child_id("order-7", "c"))
    b.start(name="parent", execution_id="order-7")
    drain(b)
    kid = b.query(child_id("order-7", "c"))
    assert kid.status == "waiting" and kid.parent_id == "order-7"
    b.signal(kid.id, "go", 1)
    drain(b)
    assert b.query("order-7").status == "completed"
    assert a.query(child_id("order-7", "c")).status == "waiting"


def test_schedules_of_the_same_name_fire_each_in_its_tenant(
    engine: Engine, clock: ManualClock, a: Engine, b: Engine
) -> None:
    tick = "tick-20300101T091500Z"
    # Tenant a pre-creates the id b's schedule will use for its first tick (and the id of
    # the tick of the schedule `beta.tick` the old scheme would have given b).
    a.start(name="quick", execution_id=tick)
    Schedules(b).create("tick", workflow="quick", every="15m")
    Schedules(a).create("beta.tick", workflow="quick", every="15m")
    clock.set(datetime(2030, 1, 1, 9, 15, tzinfo=UTC))
    drain(engine)
    [b_schedule] = Schedules(b).list()
    assert b_schedule.fired_count == 1
    assert [r.id for r in b.list(workflow="quick").items] == [tick]
    assert b.query(tick).status == "completed"
    assert sorted(r.id for r in a.list(workflow="quick").items) == [
        "beta.tick-20300101T091500Z",
        tick,
    ]


def test_a_tick_the_tenant_already_has_is_neither_started_nor_counted(
    engine: Engine, clock: ManualClock, a: Engine
) -> None:
    a.start(name="waits", execution_id="five-20300101T091500Z")
    Schedules(a).create("five", workflow="quick", every="15m", overlap="allow_all")
    for minute in (15, 30, 45):
        clock.set(datetime(2030, 1, 1, 9, minute, tzinfo=UTC))
        drain(engine)
    [schedule] = Schedules(a).list()
    started = sorted(r.id for r in a.list(workflow="quick").items)
    assert started == [f"five-20300101T09{m}00Z" for m in ("30", "45")]
    assert schedule.fired_count == len(started) == 2
    assert a.query("five-20300101T091500Z").workflow == "waits"


def test_ids_obey_one_alphabet_and_length(a: Engine) -> None:
    for bad in ("a/b", "line\nbreak", "crlf\r\n", "x" * (ID_MAX_LENGTH + 1), "", "-lead"):
        with pytest.raises(InputError) as caught:
            a.start(name="quick", execution_id=bad)
        assert caught.value.problems[0].path == "id"
        assert "1-200 characters" in caught.value.problems[0].message
    assert a.list().items == []
    longest = "x" * ID_MAX_LENGTH
    assert a.start(name="quick", execution_id=longest).id == longest


def test_a_derived_id_that_would_be_too_long_is_shortened_stably() -> None:
    parent = "p" * ID_MAX_LENGTH
    first = child_id(parent, "charge", 12, 3)
    assert len(first) == ID_MAX_LENGTH and is_execution_id(first)
    assert first == child_id(parent, "charge", 12, 3)  # the same start: the same id
    assert first != child_id(parent, "charge", 13, 3) != child_id(parent, "charge", 12, 4)
    assert child_id("p", "c", 2, 2) == "p::c[2]~2"  # short ones are as they always were
    with pytest.raises(ValueError, match="1-200 characters"):
        derived_id("has/slash")


def test_a_child_id_outside_the_alphabet_fails_the_activity(a: Engine) -> None:
    for bad in ("a/b", "x\ny", "c\r\nd"):
        execution_id = f"named-{len(bad)}-{ord(bad[1])}"
        a.start(name="named", input={"child": bad}, execution_id=execution_id)
        drain(a)
        view = a.query(execution_id)
        assert view.status == "failed"
        assert "InvalidChildId" in str(view.error)
    assert [r.workflow for r in a.list(workflow="quick").items] == []


def test_a_long_child_id_is_shortened_and_a_legacy_one_is_still_found(a: Engine) -> None:
    long_parent = "p" * 199
    a.start(name="parent", execution_id=long_parent)
    drain(a)
    short = child_id(long_parent, "c")
    assert len(short) == ID_MAX_LENGTH and a.query(short).parent_id == long_parent
    run = RunActivity(activity_id="c", attempt=2, kind="workflow", input={"name": "waits"})
    parent = state_from_json(a.get(long_parent).checkpoint or {})
    # A child an earlier engine created under the unshortened id is still the child.
    legacy = child_id(long_parent, "c", attempt=2, shorten=False)
    assert len(legacy) > ID_MAX_LENGTH
    workflow, digest = a.named("waits")
    a.store.create_execution(
        a.prepare_start(workflow, digest, None, execution_id=legacy, parent_id=long_parent)
    )
    assert a.start_child(parent, run) == legacy
    children = a.list(workflow="waits", parent_id=long_parent).items
    assert sorted(r.id for r in children) == sorted([legacy, short])
