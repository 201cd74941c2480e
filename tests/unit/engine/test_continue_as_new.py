"""Continue-as-new in the pure core and the ids: `ExecutionContinued` instead of
`ExecutionCompleted` when `when` holds, with the next run's id and inputs (this run's
overlaid with `input`), folded to status `continued` with the links; chain run ids."""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime
from typing import Any

import pytest

from wovyr.definition import load_definition
from wovyr.engine.core.decide import decide, start_events
from wovyr.engine.core.shown import CONTINUE_HOLD, waiting_on
from wovyr.engine.core.state import ExecutionState, ExecutionStatus, fold, state_to_json
from wovyr.events import Event, TimerArmed, TimerFired
from wovyr.ids import ID_MAX_LENGTH, continued_id, is_chain_run_id, is_execution_id

T0 = datetime(2030, 1, 1, tzinfo=UTC)
FLOW = load_definition(
    textwrap.dedent("""\
    apiVersion: wovyr/v1
    kind: Workflow
    metadata: {name: c}
    inputs:
      n: {type: integer, default: 1}
      keep: {type: string, default: same}
    activities:
      - {id: a, set: {n: "${{ inputs.n }}"}}
    output: "${{ activities.a.output }}"
    continue_as_new: {when: "${{ output.n < 3 }}", input: {n: "${{ inputs.n + 1 }}"}}
    """)
)


def run(
    state_id: str, inputs: dict[str, Any], extra: dict[str, Any] | None = None
) -> tuple[list[Event], ExecutionState]:
    events = start_events(FLOW, "h", inputs, T0, extra=extra)
    decision = decide(FLOW, fold(events, id=state_id), T0)
    assert decision.state is not None
    return decision.events, decision.state


def test_when_it_holds_the_run_continues_with_the_next_id_and_inputs() -> None:
    events, state = run("sub", {"n": 1, "keep": "kept"})
    assert events[-1].type == "ExecutionContinued"
    assert events[-1].data == {
        "output": {"n": 1},
        "input": {"n": 2, "keep": "kept"},  # inputs not named keep their values
        "continued_as": "sub~c2",
        "run": 2,
    }
    assert state.status == ExecutionStatus.CONTINUED and state.finished
    assert (state.continued_as, state.chain, state.output) == (
        "sub~c2",
        None or state.chain,
        {"n": 1},
    )
    assert state.chain == {"root": "sub", "run": 1}


def test_a_held_hand_over_waits_for_its_timer_and_settles_the_rest() -> None:
    events = start_events(FLOW, "h", {"n": 1}, T0)
    hold = TimerArmed(
        timer="continue:1", purpose=CONTINUE_HOLD, fire_at="2030-01-02T00:00:00+00:00",
        reason="quota: executions per day used up",
    )  # fmt: skip
    held = fold([*events, hold.at(T0)], id="sub")
    decision = decide(FLOW, held, T0)
    assert [e.type for e in decision.events] == ["ActivityScheduled", "ActivityCompleted"]
    assert decision.state is not None and decision.state.status == ExecutionStatus.RUNNING
    assert waiting_on(decision.state) == "quota: executions per day used up"
    fired = TimerFired(timer="continue:1", fired_at="2030-01-02T00:00:00+00:00").at(T0)
    later = decide(FLOW, fold([fired], decision.state), T0)
    assert later.events[-1].type == "ExecutionContinued"
    assert later.state is not None and later.state.continued_as == "sub~c2"


def test_a_later_run_knows_its_chain_and_the_last_one_completes() -> None:
    extra = {"continued_from": "sub~c2", "chain": {"root": "sub", "run": 3}}
    events, state = run("sub~c3", {"n": 3}, extra)
    assert events[-1].type == "ExecutionCompleted"
    assert (state.status, state.continued_from, state.chain_root, state.chain_run) == (
        "completed",
        "sub~c2",
        "sub",
        3,
    )
    _, second = run(
        "sub~c2", {"n": 2}, {"continued_from": "sub", "chain": {"root": "sub", "run": 2}}
    )
    assert second.continued_as == "sub~c3"


def test_an_execution_outside_a_chain_writes_no_chain_fields() -> None:
    events = start_events(FLOW, "h", {"n": 5}, T0)
    state = decide(FLOW, fold(events, id="x"), T0).state
    assert state is not None and state.status == "completed"
    data = state_to_json(state)
    assert not {"chain", "continued_from", "continued_as"} & set(data)


@pytest.mark.parametrize("root", ["sub", "a" * 190, "b" * ID_MAX_LENGTH])
def test_chain_run_ids_stay_in_the_id_alphabet_and_length(root: str) -> None:
    assert continued_id(root, 1) == root
    ids = [continued_id(root, n) for n in range(2, 200)]
    assert len(set(ids)) == len(ids)
    assert all(is_execution_id(i) and len(i) <= ID_MAX_LENGTH for i in ids)
    assert continued_id(root, 7) == continued_id(root, 7)  # deterministic


def test_chain_run_ids_are_reserved() -> None:
    assert is_chain_run_id("sub~c2") and is_chain_run_id("x~c10")
    assert (
        not is_chain_run_id("sub~2") and not is_chain_run_id("sub~c") and not is_chain_run_id("c2")
    )
