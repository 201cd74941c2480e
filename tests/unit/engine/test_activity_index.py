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
from wovyr.definition.model import Workflow
from wovyr.engine.core.context import ActivitiesView, expression_context
from wovyr.engine.core.decide import (
    Outcome,
    RunActivity,
    _candidates,
    decide,
    outcome_events,
    start_events,
)
from wovyr.engine.core.state import (
    ActivityIndex,
    ActivityStatus,
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


def reference_candidates(definition: Workflow, state: ExecutionState) -> list[str]:
    """What a pass must look at, by the rule written out over every activity: not settled
    (completed, skipped, failed, compensating, compensated), and not a never-scheduled
    pending activity one of whose needs is neither settled nor failed."""
    closed = ActivityStatus.DONE_OK | {ActivityStatus.FAILED}
    out = []
    for act in definition.activities:
        a = state.activity(act.id)
        if act.id in state.activities and a.status in closed:
            continue
        fresh = a.status == ActivityStatus.PENDING and a.started_at is None
        if fresh and any(state.activity(n).status not in closed for n in act.needs):
            continue
        out.append(act.id)
    return out


def drive(definition: Workflow, fail: frozenset[str]) -> ExecutionState:
    """Run `definition` in the pure core, checking the decider's candidates on every state it
    is handed; attempts end (the oldest first) in success, or in failure for `fail`."""
    state = fold(start_events(definition, "h", {}, NOW), id="ex")
    running: list[RunActivity] = []
    for _ in range(500):
        assert [a.id for a in _candidates(definition, state, activity_index(state))] == (
            reference_candidates(definition, state)
        )
        decision = decide(definition, state, NOW, frozenset(r.key for r in running))
        assert decision.state is not None
        state = decision.state
        assert_index_is_fresh(state)
        running += decision.runs
        if not running:
            return state
        run = running.pop(0)
        if run.activity_id in fail:
            outcome = Outcome(error={"type": "Boom", "message": "no"}, retryable=False)
        else:
            outcome = Outcome(output={"from": run.activity_id})
        state = fold(outcome_events(definition, state, run, outcome, NOW), state)
    raise AssertionError("the execution did not end")


GRAPH = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: graph}
activities:
  - {id: a, tool: t}
  - {id: e, tool: t}
  - {id: b, needs: [a], when: "${{ false }}", tool: t}
  - {id: c, needs: [a], tool: t, on_failure: continue, retry: {max_attempts: 1}}
  - {id: s, needs: [a], set: {x: 1}}
  - {id: d, needs: [b, c, s], tool: t}
  - {id: m, needs: [d], for_each: "${{ [1, 2, 3] }}", tool: t}
  - {id: f, needs: [e, m], tool: t, compensate: {tool: t}}
  - {id: g, needs: [f], tool: t, retry: {max_attempts: 1}}
"""


@pytest.mark.parametrize(
    ("fail", "status"),
    [
        (frozenset(), "completed"),
        (frozenset({"c"}), "completed"),  # a failure the workflow continues past
        (frozenset({"g"}), "failed"),  # compensation of f, then the end
    ],
)
def test_the_decider_looks_at_what_the_rule_says_whatever_happens(
    fail: frozenset[str], status: str
) -> None:
    definition = load_definition(GRAPH)
    assert drive(definition, fail).status == status


def test_a_long_chain_passes_over_only_its_open_activities() -> None:
    steps = "\n".join(f"  - {{id: a{i}, needs: [a{i - 1}], tool: t}}" for i in range(1, 200))
    definition = load_definition(
        "apiVersion: wovyr/v1\nkind: Workflow\nmetadata: {name: chain}\nactivities:\n"
        f"  - {{id: a0, tool: t}}\n{steps}\n"
    )
    state = drive(definition, frozenset())
    assert state.status == "completed"
    half = fold(start_events(definition, "h", {}, NOW), id="ex")
    decision = decide(definition, half, NOW)
    assert decision.state is not None
    assert [
        a.id for a in _candidates(definition, decision.state, activity_index(decision.state))
    ] == ["a0"]
