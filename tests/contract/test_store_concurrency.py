"""Contract: workflow concurrency keys on every store. At most `limit` executions per key
value hold a slot; the others wait (not claimable, shown waiting on the key) and get the
slots in start order, each handed over in the transaction of the step that ends a holder;
a waiting execution's own steps (a signal) cannot make it claimable; a key is per tenant;
`on_limit: cancel_new | cancel_oldest`."""

from __future__ import annotations

import asyncio
import textwrap

from wovyr.engine.engine import Engine
from wovyr.worker.worker import Worker

GATED = textwrap.dedent("""
    apiVersion: wovyr/v1
    kind: Workflow
    metadata: {{name: gated}}
    inputs:
      customer: {{type: string, required: true}}
    concurrency: {{key: "c-${{{{ inputs.customer }}}}", limit: {limit}, on_limit: {on_limit}}}
    activities:
      - {{id: go, wait: {{signal: go}}}}
    """)


def flow(limit: int = 2, on_limit: str = "queue") -> str:
    return GATED.format(limit=limit, on_limit=on_limit)


def drive(engine: Engine) -> None:
    asyncio.run(Worker(engine).run_until_idle())


def test_a_key_holds_at_most_limit_and_hands_slots_on_in_start_order(engine: Engine) -> None:
    for i in range(5):
        engine.start(flow(), {"customer": "ada"}, execution_id=f"e{i}")
    engine.start(flow(), {"customer": "bob"}, execution_id="other-key")
    state = engine.store.slot_state(engine.tenant, "c-ada")
    assert (state.holders, state.waiting) == (["e0", "e1"], ["e2", "e3", "e4"])
    view = engine.query("e2")
    assert view.status == "waiting" and view.waiting_on == "concurrency c-ada"
    assert view.concurrency == {
        "key": "c-ada",
        "limit": 2,
        "on_limit": "queue",
        "holders": ["e0", "e1"],
        "waiting": ["e2", "e3", "e4"],
    }
    drive(engine)  # the holders run up to their wait; the others are not claimed
    assert engine.query("e0").waiting_on != "concurrency c-ada"
    assert engine.query("e0").activities["go"]["status"] == "waiting"
    assert engine.query("other-key").activities["go"]["status"] == "waiting"
    assert engine.query("e2").activities["go"]["status"] == "pending"
    engine.signal("e2", "go", None)  # buffered: it does not make e2 claimable
    record = engine.store.load("e2", engine.tenant)
    assert record is not None and not record.ready
    assert record.waiting_on == "concurrency c-ada"
    drive(engine)
    assert engine.query("e2").activities["go"]["status"] == "pending"
    engine.signal("e0", "go", None)
    drive(engine)  # e0 ends: its slot goes to e2 (which ends at once), then to e3
    assert engine.query("e0").status == "completed"
    assert engine.query("e2").status == "completed"
    state = engine.store.slot_state(engine.tenant, "c-ada")
    assert (state.holders, state.waiting) == (["e1", "e3"], ["e4"])
    engine.cancel("e4", reason="no longer needed")  # a waiting one leaves the queue
    state = engine.store.slot_state(engine.tenant, "c-ada")
    assert (state.holders, state.waiting) == (["e1", "e3"], [])
    for name in ("e1", "e3", "other-key"):
        engine.signal(name, "go", None)
    drive(engine)
    assert {engine.query(f"e{i}").status for i in range(4)} == {"completed"}
    state = engine.store.slot_state(engine.tenant, "c-ada")
    assert (state.holders, state.waiting) == ([], [])


def test_keys_are_per_tenant(engine: Engine) -> None:
    other = engine.for_tenant("acme")
    engine.start(flow(limit=1), {"customer": "x"}, execution_id="a1")
    engine.start(flow(limit=1), {"customer": "x"}, execution_id="a2")
    other.start(flow(limit=1), {"customer": "x"}, execution_id="b1")
    assert engine.store.slot_state(engine.tenant, "c-x").holders == ["a1"]
    assert engine.store.slot_state(engine.tenant, "c-x").waiting == ["a2"]
    assert engine.store.slot_state("acme", "c-x").holders == ["b1"]
    assert other.query("b1").status == "running"


def test_cancel_new_ends_the_start_that_finds_no_slot(engine: Engine) -> None:
    engine.start(flow(limit=1, on_limit="cancel_new"), {"customer": "x"}, execution_id="n1")
    engine.start(flow(limit=1, on_limit="cancel_new"), {"customer": "x"}, execution_id="n2")
    assert engine.query("n2").status == "cancelled"
    assert engine.query("n1").status == "running"
    state = engine.store.slot_state(engine.tenant, "c-x")
    assert (state.holders, state.waiting) == (["n1"], [])


def test_cancel_oldest_makes_room_for_the_new_start(engine: Engine) -> None:
    engine.start(flow(limit=1, on_limit="cancel_oldest"), {"customer": "x"}, execution_id="o1")
    engine.start(flow(limit=1, on_limit="cancel_oldest"), {"customer": "x"}, execution_id="o2")
    assert engine.query("o1").status == "cancelled"
    state = engine.store.slot_state(engine.tenant, "c-x")
    assert (state.holders, state.waiting) == (["o2"], [])
    record = engine.store.load("o2", engine.tenant)
    assert record is not None and record.ready and record.waiting_on is None
