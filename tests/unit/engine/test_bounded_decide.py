"""The decider's work per call is bounded (`decide(costs=Costs(limit))`): a call stops between
items once its expressions have spent the limit, says so (`Decision.more`), and the calls
that follow from its state decide exactly what one unbounded call would. A `for_each` whose
items would ask too much of their expressions altogether fails before any item starts."""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime
from typing import Any

from wovyr.definition import load_definition
from wovyr.definition.expr import _EVALUATION_BYTES, MAX_COPY_BYTES, MAX_ITEMS_WORK, Costs
from wovyr.engine.core.decide import Decision, decide, start_events
from wovyr.engine.core.state import ExecutionState, fold

NOW = datetime(2030, 1, 1, tzinfo=UTC)
LIMIT = 4 * MAX_COPY_BYTES // 64  # 4 MiB of work a call: a few items each


def fan(expression: str) -> Any:
    return load_definition(
        textwrap.dedent(f"""\
            apiVersion: wovyr/v1
            kind: Workflow
            metadata: {{name: fan}}
            inputs:
              xs: {{type: array}}
              pad: {{type: string, default: ""}}
            activities:
              - id: fan
                for_each: "${{{{ inputs.xs }}}}"
                set: {{v: "{expression}", n: "${{{{ size(inputs.xs) }}}}"}}
            output: "${{{{ size(activities.fan.output) }}}}"
            """)
    )


def started(definition: Any, inputs: dict[str, Any]) -> ExecutionState:
    return fold(start_events(definition, "h", inputs, NOW), id="e1")


def test_a_bounded_call_stops_between_items_and_the_next_calls_finish_the_same_work() -> None:
    definition = fan("${{ item + size(inputs.pad) }}")
    inputs = {"xs": list(range(300)), "pad": "p" * 200_000}  # each item converts 200 KB
    state = started(definition, inputs)

    whole = decide(definition, state, NOW)
    calls: list[Decision] = []
    spent: list[int] = []
    current, more = state, True
    while more:
        costs = Costs(LIMIT)
        decision = decide(definition, current, NOW, costs=costs)
        calls.append(decision)
        spent.append(costs.spent)
        assert decision.state is not None
        current, more = decision.state, decision.more

    # 300 items that each convert `inputs` (about 350 KB as counted): about 25 calls of
    # 4 MiB, each stopping at the first item past its limit
    assert 20 <= len(calls) <= sum(spent) // LIMIT + 1
    one_item = 400_000 + 2 * _EVALUATION_BYTES
    assert all(s <= LIMIT + one_item for s in spent)
    assert [e for d in calls for e in d.events] == whole.events  # the same, in order
    assert current.status == "completed" and current.output == 300


def test_an_unbounded_call_decides_everything_at_once() -> None:
    definition = fan("${{ item }}")
    decision = decide(definition, started(definition, {"xs": list(range(500))}), NOW)
    assert decision.state is not None and decision.state.output == 500
    assert not decision.more


def test_a_map_whose_items_would_read_too_much_fails_before_any_item_starts() -> None:
    definition = fan("${{ inputs.xs[index] }}")  # every item converts the whole list
    xs = [f"value-{i:05d}" for i in range(3000)]  # 3,000 x 1.5 MB: over the 1 GiB bound
    decision = decide(definition, started(definition, {"xs": xs}), NOW)

    assert decision.state is not None and decision.state.status == "failed"
    failed = decision.state.activity("fan")
    assert failed.items is None  # no item started
    assert failed.error is not None and failed.error["type"] == "ForEachTooExpensive"
    assert "3000 items of activity 'fan'" in failed.error["message"]
    assert failed.error["details"]["limit"] == MAX_ITEMS_WORK
    # reading what each item needs instead runs
    ok = fan("${{ item }}")
    assert decide(ok, started(ok, {"xs": xs}), NOW).state.status == "completed"  # type: ignore[union-attr]
