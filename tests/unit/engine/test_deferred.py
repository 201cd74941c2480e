"""Deferred attempts in the pure decider (`decide(..., deferred=...)`): flow control holds
some of a decision's attempts; the decision leaves them out, with the events that would
start them, as if it had not reached them. Deferred later, they start as they would have."""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime

from wovyr.definition import load_definition
from wovyr.definition.model import Workflow
from wovyr.engine.core.decide import decide, start_events
from wovyr.engine.core.state import ActivityStatus, ExecutionState, fold

NOW = datetime(2030, 1, 1, tzinfo=UTC)
FLOW = load_definition(
    "apiVersion: wovyr/v1\nkind: Workflow\nmetadata: {name: held}\n"
    + textwrap.dedent("""
    activities:
      - {id: a, tool: t}
      - {id: b, tool: t}
      - {id: c, set: {done: true}}
      - id: m
        for_each: "${{ [1, 2, 3, 4] }}"
        tool: t
        with: {n: "${{ item }}"}
    """)
)


def started(definition: Workflow) -> ExecutionState:
    return fold(start_events(definition, "h", {}, NOW), id="ex")


def test_deferred_attempts_and_the_map_items_after_one_are_left_out() -> None:
    state = started(FLOW)
    whole = decide(FLOW, state, NOW)
    assert [r.key for r in whole.runs] == ["a", "b", "m[0]", "m[1]", "m[2]", "m[3]"]
    held = decide(FLOW, state, NOW, deferred=frozenset({"b", "m[1]", "m[2]", "m[3]"}))
    assert [r.key for r in held.runs] == ["a", "m[0]"]
    assert held.state is not None
    # b is as if never reached: pending, nothing recorded; c settled as before; the items
    # from the first deferred one on stay pending, in order
    assert held.state.activity("b").status == ActivityStatus.PENDING
    assert held.state.activity("b").started_at is None
    assert held.state.activity("c").status == ActivityStatus.COMPLETED
    items = held.state.activity("m").items or ()
    assert [i["status"] for i in items] == ["running", "pending", "pending", "pending"]
    assert not any(e.data.get("activity") == "b" for e in held.events)
    # decided again without deferral, they start as they would have
    after = decide(FLOW, held.state, NOW, frozenset({"a", "m[0]"}))
    assert [r.key for r in after.runs] == ["b", "m[1]", "m[2]", "m[3]"]
    # an item deferred keeps the items after it pending even when they are not named
    first_only = decide(FLOW, state, NOW, deferred=frozenset({"m[1]"}))
    assert [r.key for r in first_only.runs] == ["a", "b", "m[0]"]
