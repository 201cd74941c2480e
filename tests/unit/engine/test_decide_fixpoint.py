"""`decide` settles every pure step to a fixpoint: deciding again from its state, with its
attempts in flight, finds nothing more. The decider stops after a pass that only started
plain attempts without making the pass that would confirm it (`_only_started`): these
tests hold that shortcut to the fixpoint on every shape where a second pass does matter
(a buffered signal consumed by a wait just begun, a value settled at once, a skip, a map,
a retry, a child, a code step) and count the passes where it does not."""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import wovyr.engine.core.decide as decide_module
from wovyr.definition import load_definition
from wovyr.engine.core.decide import Decision, Outcome, decide, outcome_events, start_events
from wovyr.engine.core.state import ExecutionState, fold
from wovyr.events import SignalReceived

NOW = datetime(2030, 1, 1, tzinfo=UTC)

SHAPES = {
    "chain": """
        - {id: a, tool: t}
        - {id: b, needs: [a], tool: t}
        - {id: c, needs: [b], tool: t}
    """,
    "fan-out and join": """
        - {id: a, tool: t}
        - {id: b, needs: [a], tool: t}
        - {id: c, needs: [a], tool: t}
        - {id: d, needs: [b, c], tool: t}
    """,
    "a value settled beside a start": """
        - {id: a, tool: t}
        - {id: v, needs: [a], set: {x: 1}}
        - {id: b, needs: [a], tool: t}
        - {id: c, needs: [v], tool: t}
    """,
    "a skip beside a start": """
        - {id: a, tool: t}
        - {id: s, needs: [a], when: "${{ false }}", tool: t}
        - {id: b, needs: [a], tool: t}
        - {id: c, needs: [s], tool: t}
    """,
    "a wait whose signal came first": """
        - {id: a, tool: t}
        - {id: w, needs: [a], wait: {signal: go}}
        - {id: b, needs: [a], tool: t}
        - {id: c, needs: [w], tool: t}
    """,
    "a map beside a start": """
        - {id: a, tool: t}
        - {id: m, needs: [a], for_each: "${{ [1, 2, 3] }}", tool: t}
        - {id: b, needs: [a], tool: t}
    """,
    "a retried attempt": """
        - {id: a, tool: t, retry: {max_attempts: 3, initial_interval: 0s}}
        - {id: b, needs: [a], tool: t}
    """,
    "a child beside a start": """
        - {id: a, tool: t}
        - {id: k, needs: [a], workflow: {name: other}}
        - {id: b, needs: [a], tool: t}
    """,
}


def workflow(activities: str) -> Any:
    body = textwrap.indent(textwrap.dedent(activities).strip(), "  ")
    return load_definition(
        f"apiVersion: wovyr/v1\nkind: Workflow\nmetadata: {{name: shapes}}\nactivities:\n{body}\n"
    )


def in_flight(decision: Decision, before: frozenset[str]) -> frozenset[str]:
    return before | {r.key for r in decision.runs}


def assert_fixpoint(definition: Any, decision: Decision, running: frozenset[str]) -> None:
    assert decision.state is not None
    again = decide(definition, decision.state, NOW, running)
    assert (again.events, again.runs) == ([], []), "a second decision found more to do"


@pytest.mark.parametrize("shape", SHAPES)
def test_every_decision_is_a_fixpoint_until_the_execution_ends(shape: str) -> None:
    definition = workflow(SHAPES[shape])
    events = start_events(definition, "h", {}, NOW)
    state: ExecutionState = fold(events, id="e1")
    if "signal" in SHAPES[shape]:  # buffered before the wait is reached
        state = fold([SignalReceived(name="go", payload=1).at(NOW)], state)
    decision = decide(definition, state, NOW)
    running = in_flight(decision, frozenset())
    assert_fixpoint(definition, decision, running)
    failed_once: set[str] = set()
    for _ in range(20):  # every attempt ends (the first of a retried one fails)
        assert decision.state is not None
        if decision.state.finished or not decision.runs:
            break
        state, running = decision.state, frozenset(running)
        produced = []
        for run in decision.runs:
            outcome = Outcome(output={"ok": run.key})
            if "retry" in SHAPES[shape] and run.activity_id not in failed_once:
                failed_once.add(run.activity_id)
                outcome = Outcome(error={"type": "Boom", "message": "once"})
            if run.kind == "workflow":
                outcome = Outcome(child=f"child-{run.key}")
            step = outcome_events(definition, state, run, outcome, NOW)
            state = fold(step, state)
            produced += step
            running = running - {run.key}
        later = NOW + timedelta(seconds=1)
        decision = decide(definition, state, later, running)
        running = in_flight(decision, running)
        assert_fixpoint(definition, decision, running)


def test_a_step_that_only_starts_attempts_is_decided_in_one_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The chain's start and each of its steps: one pass each, where the confirming pass
    made it two."""
    passes: list[int] = []
    real = decide_module._step

    def counted(*args: Any) -> Any:
        passes.append(1)
        return real(*args)

    monkeypatch.setattr(decide_module, "_step", counted)
    definition = workflow(SHAPES["chain"])
    state = fold(start_events(definition, "h", {}, NOW), id="e1")
    decision = decide(definition, state, NOW)
    assert [r.activity_id for r in decision.runs] == ["a"]
    assert len(passes) == 1
    assert decision.state is not None
    run = decision.runs[0]
    after = fold(outcome_events(definition, decision.state, run, Outcome(), NOW), decision.state)
    passes.clear()
    decision = decide(definition, after, NOW)
    assert [r.activity_id for r in decision.runs] == ["b"]
    assert len(passes) == 1
