"""`on_failure: continue` in the pure decider: once its retries are exhausted the activity
ends failed and the workflow goes on; its dependents run and route on its status and error;
an uncaught failure anywhere still fails (and compensates) the workflow as before."""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime
from typing import Any

from wovyr.definition import load_definition
from wovyr.definition.model import Workflow
from wovyr.engine.core.decide import Outcome, RunActivity, decide, outcome_events, start_events
from wovyr.engine.core.state import ExecutionState, fold

NOW = datetime(2030, 1, 1, tzinfo=UTC)
BOOM = {"type": "Boom", "message": "primary model down"}


def wf(body: str) -> Workflow:
    head = "apiVersion: wovyr/v1\nkind: Workflow\nmetadata: {name: catch}\n"
    return load_definition(head + textwrap.dedent(body))


def run_all(
    definition: Workflow, results: dict[str, list[Outcome]]
) -> tuple[ExecutionState, list[str]]:
    """Drive the decider, answering each attempt from `results[activity]` in order; return
    the final state and the activities run, in order."""
    state = fold(start_events(definition, "h", {}, NOW), id="ex")
    decision = decide(definition, state, NOW)
    assert decision.state is not None
    state, pending, ran = decision.state, list(decision.runs), []
    while pending:
        run: RunActivity = pending.pop(0)
        ran.append(run.activity_id)
        outcome = results[run.activity_id].pop(0)
        state = fold(outcome_events(definition, state, run, outcome, NOW), state)
        decision = decide(definition, state, NOW, frozenset(r.key for r in pending))
        assert decision.state is not None
        state = decision.state
        pending += decision.runs
    return state, ran


FALLBACK = wf(
    """
    activities:
      - id: primary
        tool: llm
        on_failure: continue
        retry: {max_attempts: 2, initial_interval: 0}
      - id: fallback
        needs: [primary]
        when: "${{ activities.primary.status == 'failed' }}"
        tool: small_llm
      - id: report
        needs: [fallback]
        when: "${{ activities.primary.status == 'failed' }}"
        set:
          why: "${{ activities.primary.error.message }}"
    output:
      answer: >-
        ${{ activities.primary.status == 'completed'
            ? activities.primary.output : activities.fallback.output }}
    """
)


def test_a_caught_failure_routes_to_the_fallback_and_the_workflow_completes() -> None:
    fail = Outcome(error=BOOM, retryable=True)
    state, ran = run_all(
        FALLBACK, {"primary": [fail, fail], "small_llm": [], "fallback": [Outcome(output="42")]}
    )

    assert ran == ["primary", "primary", "fallback"]  # retried first, then caught
    assert state.status == "completed"
    assert state.activity("primary").status == "failed"
    assert state.activity("primary").error is not None
    assert state.activity("primary").error["message"] == "primary model down"
    assert state.output == {"answer": "42"}
    assert state.activity("report").output == {"why": "primary model down"}


def test_when_the_primary_succeeds_the_fallback_is_skipped() -> None:
    state, ran = run_all(FALLBACK, {"primary": [Outcome(output="big")]})

    assert ran == ["primary"]
    assert state.activity("fallback").status == "skipped"
    assert state.status == "completed" and state.output == {"answer": "big"}


def test_without_a_fallback_the_workflow_completes_with_the_failure_recorded() -> None:
    lone = wf(
        """
        activities:
          - {id: notify, tool: t, on_failure: continue, retry: {max_attempts: 1}}
          - {id: after, needs: [notify], set: {ok: true}}
        """
    )
    state, ran = run_all(lone, {"notify": [Outcome(error=BOOM, retryable=False)]})

    assert ran == ["notify"]
    assert state.status == "completed"
    assert state.activity("notify").status == "failed"
    assert state.activity("after").status == "completed"


def test_an_uncaught_failure_still_fails_and_compensates_the_workflow() -> None:
    saga = wf(
        """
        activities:
          - {id: book, tool: t, compensate: {tool: undo}}
          - {id: optional, tool: t, needs: [book], on_failure: continue, retry: {max_attempts: 1}}
          - {id: charge, tool: t, needs: [optional], retry: {max_attempts: 1}}
        """
    )
    results: dict[str, list[Outcome]] = {
        "book": [Outcome(output=1)],
        "optional": [Outcome(error=BOOM, retryable=False)],
        "charge": [Outcome(error={"type": "Declined", "message": "card"}, retryable=False)],
        "undo": [],
    }
    state, ran = run_all(saga, {**results, "book": [Outcome(output=1), Outcome(output="undone")]})

    assert ran == ["book", "optional", "charge", "book"]  # the last: book's compensation
    assert state.status == "failed"
    error: Any = state.error
    assert error["activity"] == "charge"  # the uncaught one is the reason, not `optional`
    assert state.activity("book").status == "compensated"
    assert state.activity("optional").status == "failed"  # not compensated: it never completed
