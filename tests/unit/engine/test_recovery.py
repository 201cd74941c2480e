"""Lost attempts in the pure decider: an attempt the state calls running that is not in
flight was lost with its worker. It runs again as the same attempt (same idempotency key),
recorded first with `recovery: n`, and only the recovery budget bounds that: never the
retry policy. Items and compensations follow the same rule."""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime
from typing import Any

from wovyr.definition import load_definition
from wovyr.definition.model import Workflow
from wovyr.engine.core.decide import (
    MAX_RECOVERIES,
    Outcome,
    RunActivity,
    decide,
    outcome_events,
    start_events,
)
from wovyr.engine.core.state import ExecutionState, fold, state_from_json, state_to_json
from wovyr.events import ActivityStarted, CompensationStepStarted, Event, ItemStarted, typed

NOW = datetime(2030, 1, 1, tzinfo=UTC)


def wf(body: str) -> Workflow:
    head = "apiVersion: wovyr/v1\nkind: Workflow\nmetadata: {name: lost}\n"
    return load_definition(head + textwrap.dedent(body))


def begin(definition: Workflow) -> tuple[ExecutionState, list[RunActivity]]:
    state = fold(start_events(definition, "h", {}, NOW), id="ex")
    decision = decide(definition, state, NOW)
    assert decision.state is not None
    return decision.state, decision.runs


def crash(
    definition: Workflow, state: ExecutionState, budget: int = MAX_RECOVERIES
) -> tuple[ExecutionState, list[Event], list[RunActivity]]:
    """A new owner decides with nothing in flight: what the crashed worker ran is lost."""
    decision = decide(definition, state, NOW, frozenset(), max_recoveries=budget)
    assert decision.state is not None
    return decision.state, decision.events, decision.runs


def record(
    definition: Workflow,
    state: ExecutionState,
    run: RunActivity,
    outcome: Outcome,
    still_running: tuple[RunActivity, ...] = (),
) -> tuple[ExecutionState, list[RunActivity]]:
    """Record an attempt's outcome and decide what follows, as a runner does."""
    state = fold(outcome_events(definition, state, run, outcome, NOW), state)
    decision = decide(definition, state, NOW, frozenset(r.key for r in still_running))
    assert decision.state is not None
    return decision.state, decision.runs


ONE = wf(
    """
    activities:
      - {id: s, tool: t, retry: {max_attempts: 1}}
    """
)


def test_a_lost_attempt_runs_again_as_the_same_attempt_whatever_its_retry_policy() -> None:
    state, runs = begin(ONE)
    assert runs == [RunActivity("s", 1, "tool", {})]
    for n in range(1, 6):  # max_attempts is 1: five losses are no failure
        state, events, runs = crash(ONE, state)
        assert [typed(e) for e in events] == [
            ActivityStarted(activity="s", attempt=1, key="ex/s/1", recovery=n)
        ]
        assert runs == [RunActivity("s", 1, "tool", {})]
        assert state.activity("s").recoveries == n
    state, _ = record(ONE, state, runs[0], Outcome(output="ok"))
    assert state.status == "completed"
    assert state.activity("s").attempt == 1


def test_the_budget_counts_recoveries_across_attempts() -> None:
    definition = wf(
        """
        activities:
          - {id: s, tool: t, retry: {max_attempts: 3, initial_interval: 0s}}
        """
    )
    state, runs = begin(definition)
    state, _, runs = crash(definition, state, budget=2)
    state, runs = record(definition, state, runs[0], Outcome(error={"type": "E", "message": "m"}))
    assert runs == [RunActivity("s", 2, "tool", {})]  # a real failure is a new attempt
    state, events, _ = crash(definition, state, budget=2)
    assert typed(events[0]) == ActivityStarted(activity="s", attempt=2, key="ex/s/2", recovery=2)
    state, events, runs = crash(definition, state, budget=2)
    assert runs == [] and state.status == "failed"
    error = state.activity("s").error
    assert error is not None and error["type"] == "RecoveryBudgetExhausted"
    assert error["details"] == {"lost": 3, "max_recoveries": 2}
    assert "activity s lost its worker 3 times (attempt 2)" in error["message"]


def test_a_lost_item_runs_again_within_its_own_budget() -> None:
    definition = wf(
        """
        activities:
          - id: each
            for_each: "${{ [1, 2] }}"
            tool: t
            with: {v: "${{ item }}"}
            retry: {max_attempts: 1}
        """
    )
    state, runs = begin(definition)
    assert [r.index for r in runs] == [0, 1]
    state, _ = record(definition, state, runs[0], Outcome(output=1), runs[1:])  # item 0 done
    state, events, runs = crash(definition, state, budget=1)
    assert [typed(e) for e in events] == [
        ItemStarted(activity="each", index=1, attempt=1, recovery=1)
    ]
    assert runs == [RunActivity("each", 1, "tool", {"v": 2}, index=1)]
    items = state.activity("each").items
    assert items is not None and items[1]["recoveries"] == 1 and "recoveries" not in items[0]
    state, events, runs = crash(definition, state, budget=1)
    assert runs == [] and state.status == "failed"
    items = state.activity("each").items
    assert items is not None and items[1]["error"]["type"] == "RecoveryBudgetExhausted"
    assert "item 1 of each lost its worker 2 times" in items[1]["error"]["message"]


UNDO = wf(
    """
    activities:
      - id: a
        tool: t
        compensate: {tool: undo, retry: {max_attempts: 2}}
      - {id: b, tool: t, needs: [a], retry: {max_attempts: 1}}
    """
)


def compensating() -> tuple[ExecutionState, RunActivity]:
    """`a` completed, `b` failed: the compensation of `a` runs (attempt 1)."""
    state, runs = begin(UNDO)
    state, runs = record(UNDO, state, runs[0], Outcome(output="a"))
    state, runs = record(UNDO, state, runs[0], Outcome(error={"type": "E", "message": "b"}))
    [undo] = runs
    assert (undo.activity_id, undo.attempt, undo.compensation) == ("a", 1, True)
    return state, undo


def test_a_lost_compensation_runs_again_as_the_same_attempt() -> None:
    state, _ = compensating()
    for n in (1, 2, 3):  # more than its retry policy's 2 attempts
        state, events, runs = crash(UNDO, state, budget=3)
        assert [typed(e) for e in events] == [
            CompensationStepStarted(activity="a", attempt=1, recovery=n)
        ]
        assert [(r.attempt, r.compensation) for r in runs] == [(1, True)]
    state, events, runs = crash(UNDO, state, budget=3)
    assert runs == [] and state.status == "failed"
    error = state.activity("a").compensation_error
    assert error is not None and error["type"] == "RecoveryBudgetExhausted"
    assert "the compensation of a lost its worker 4 times" in error["message"]


def test_a_failed_compensation_attempt_is_retried_not_recovered() -> None:
    state, undo = compensating()
    state, runs = record(UNDO, state, undo, Outcome(error={"type": "E", "message": "undo"}))
    assert [(r.attempt, r.compensation) for r in runs] == [(2, True)]
    assert state.activity("a").compensation_recoveries == 0
    assert not state.activity("a").compensation_retry  # cleared by the next attempt's start
    state, events, runs = crash(UNDO, state)  # attempt 2 is lost: same attempt again
    assert [typed(e) for e in events] == [
        CompensationStepStarted(activity="a", attempt=2, recovery=1)
    ]


def test_new_state_keys_are_in_the_checkpoint_only_when_set() -> None:
    state, _ = begin(ONE)
    plain = state_to_json(state)["activities"]["s"]
    assert not {"recoveries", "compensation_recoveries", "compensation_retry"} & set(plain)
    state, _, _ = crash(ONE, state)
    stored: dict[str, Any] = state_to_json(state)
    assert stored["activities"]["s"]["recoveries"] == 1
    assert state_from_json(stored) == state
    assert state_from_json(state_to_json(begin(ONE)[0])).activity("s").recoveries == 0
