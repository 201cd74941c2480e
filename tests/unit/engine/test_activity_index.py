"""The state's derived views (`ActivityIndex`: open, active and failed activities, and the
checkpoint forms) are carried from state to state by `apply`; whatever path a state took,
they must equal what a fresh build from its activities gives, and the checkpoint must be
what encoding it from scratch gives. The golden logs cover every event type."""

from __future__ import annotations

import json
import textwrap
from dataclasses import fields
from dataclasses import replace as rebuilt
from datetime import UTC, datetime
from typing import Any

import pytest
from tests.unit.engine.test_old_logs import LOGS, events_of

from wovyr.definition import load_definition
from wovyr.definition.expr import render
from wovyr.engine.core.context import ActivitiesView, expression_context
from wovyr.engine.core.decide import Outcome, decide, outcome_events, start_events
from wovyr.engine.core.state import (
    ActivityIndex,
    ExecutionState,
    activity_index,
    apply,
    fold,
    state_from_json,
    state_to_json,
)

NOW = datetime(2030, 1, 1, tzinfo=UTC)


def uncached(state: ExecutionState) -> ExecutionState:
    """The same state built anew: no derived value carried over."""
    values: dict[str, Any] = {f.name: getattr(state, f.name) for f in fields(state)}
    values["activities"] = {k: rebuilt(a) for k, a in state.activities.items()}
    return ExecutionState(**values)


def assert_index_is_fresh(state: ExecutionState) -> None:
    carried, fresh = activity_index(state), ActivityIndex.of(state.activities)
    assert (carried.open, carried.active, carried.failed) == (
        fresh.open,
        fresh.active,
        fresh.failed,
    )


@pytest.mark.parametrize("execution_id", sorted(LOGS))
@pytest.mark.parametrize("encode_every", [1, 2, 3])
def test_the_carried_index_and_checkpoint_equal_a_fresh_build_after_every_event(
    execution_id: str, encode_every: int
) -> None:
    events = events_of(LOGS[execution_id])
    state = fold(events[:1], id=execution_id)
    activity_index(state)  # built once: from here on, `apply` carries it
    for n, event in enumerate(events[1:], start=1):
        state = apply(state, event)
        assert_index_is_fresh(state)
        if n % encode_every == 0:  # encodings go stale between some of the checkpoints
            assert state_to_json(state) == state_to_json(uncached(state))
    assert json.loads(json.dumps(state_to_json(state))) == LOGS[execution_id]["checkpoint"]


def test_a_state_read_from_its_checkpoint_builds_its_index_on_first_use() -> None:
    log = LOGS[sorted(LOGS)[0]]
    state = state_from_json(log["checkpoint"])
    assert_index_is_fresh(state)
    assert json.loads(json.dumps(state_to_json(state))) == log["checkpoint"]


def test_a_checkpoint_can_be_changed_by_its_reader_without_changing_the_next() -> None:
    definition = load_definition(
        textwrap.dedent(
            """
            apiVersion: wovyr/v1
            kind: Workflow
            metadata: {name: two}
            activities:
              - {id: a, tool: t}
              - {id: b, needs: [a], tool: t}
            """
        )
    )
    state = fold(start_events(definition, "h", {}, NOW), id="ex")
    decision = decide(definition, state, NOW)
    assert decision.state is not None
    first = state_to_json(decision.state)
    first["activities"]["zzz"] = {}  # the outer dict is the reader's own
    (run,) = decision.runs
    done = outcome_events(definition, decision.state, run, Outcome(output=1), NOW)
    after = decide(definition, fold(done, decision.state), NOW)
    assert after.state is not None
    assert "zzz" not in state_to_json(after.state)["activities"]
    assert state_to_json(after.state) == state_to_json(uncached(after.state))
    assert activity_index(after.state).open == {"b"}
    assert activity_index(after.state).active == {"b"}


def test_the_activities_view_reads_like_the_plain_context() -> None:
    state = fold(events_of(LOGS[sorted(LOGS)[0]]), id="ex")
    view = expression_context(state)["activities"]
    assert isinstance(view, ActivitiesView)
    plain = {k: view[k] for k in view}
    assert len(view) == len(state.activities) and set(plain) == set(state.activities)
    some = next(iter(state.activities))
    ctx = {"inputs": {}, "activities": plain}
    # named (the evaluator selects it) and read whole (the view is made plain data)
    named = f"${{{{ activities['{some}'].status }}}}"
    assert render(named, expression_context(state)) == render(named, ctx)
    whole = "${{ size(activities) }}"
    assert render(whole, expression_context(state)) == render(whole, ctx) == len(plain)


def test_a_definition_finds_its_activities_by_id_and_follows_a_copy() -> None:
    definition = load_definition(
        "apiVersion: wovyr/v1\nkind: Workflow\nmetadata: {name: one}\n"
        "activities:\n  - {id: a, tool: t}\n  - {id: b, tool: t}\n"
    )
    assert definition.activity("b") is definition.activities[1]
    with pytest.raises(KeyError):
        definition.activity("c")
    other = definition.model_copy(update={"activities": definition.activities[:1]})
    assert other.activity("a") is definition.activities[0]
    with pytest.raises(KeyError):
        other.activity("b")
    assert definition.activity("b") is definition.activities[1]
