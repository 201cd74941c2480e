"""What a step may store (`wovyr.engine.core.bounds`): every value the decider records is
refused over the depth cap, the size cap or the execution's byte budget, and its owner
(the activity, the item, the execution) fails in its place with an error naming the limit
and its setting. Before, a chain of `set` steps nested a value 287 levels deep (after which
every read of the execution failed) and a `for_each` wrote a copy of its input per item."""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime
from typing import Any

from wovyr.definition import load_definition
from wovyr.engine.core.bounds import ExecutionBytes, StepBytes, ValueLimits
from wovyr.engine.core.decide import decide, start_events
from wovyr.engine.core.state import ExecutionState, fold
from wovyr.store.codec import json_bytes, json_depth

NOW = datetime(2030, 1, 1, tzinfo=UTC)
LIMITS = ValueLimits(json_bytes, json_depth, value_bytes=4_000, execution_bytes=40_000)


def workflow(body: str, inputs: str = "") -> Any:
    head = "apiVersion: wovyr/v1\nkind: Workflow\nmetadata: {name: w}\n"
    return load_definition(head + textwrap.dedent(inputs) + textwrap.dedent(body))


def run(definition: Any, inputs: dict[str, Any] | None = None) -> ExecutionState:
    state = fold(start_events(definition, "h", inputs or {}, NOW), id="e1")
    bounds = ExecutionBytes(LIMITS).step(state)
    decision = decide(definition, state, NOW, bounds=bounds)
    assert decision.state is not None
    return decision.state


def error_of(state: ExecutionState, activity: str) -> dict[str, Any]:
    err = state.activity(activity).error
    assert err is not None, state.activity(activity)
    return err


def chain(n: int) -> Any:
    """a0 sets 1; each next one wraps what the one before gave: {v: {v: ... 1}}."""
    step = '  - {{id: a{i}, needs: [a{j}], set: {{v: "${{{{ activities.a{j}.output }}}}"}}}}\n'
    acts = "".join(step.format(i=i, j=i - 1) for i in range(1, n))
    return workflow("activities:\n  - {id: a0, set: {v: 1}}\n" + acts)


def test_a_chain_of_set_steps_stops_at_the_depth_cap_with_a_clear_error() -> None:
    state = run(chain(80))

    assert state.status == "failed"
    assert state.activity("a63").status == "completed"  # 64 levels: the most a value holds
    err = error_of(state, "a64")
    assert err["type"] == "PayloadTooDeep"
    assert err["message"] == "the output of activity 'a64' is nested more than 64 levels deep"
    assert state.error is not None and state.error["activity"] == "a64"


def test_a_set_output_over_the_size_cap_fails_its_activity_naming_the_setting() -> None:
    definition = workflow(
        'activities:\n  - {id: big, set: {v: "${{ inputs.s + inputs.s }}"}}\n',
        "inputs:\n  s: {type: string}\n",
    )
    state = run(definition, {"s": "x" * 3_000})

    err = error_of(state, "big")
    assert err["type"] == "PayloadTooLarge"
    assert "the output of activity 'big' is 6008 bytes" in err["message"]
    assert "over the cap of 4000 bytes (WOVYR_MAX_PAYLOAD_BYTES)" in err["message"]
    assert state.activity("big").output is None  # nothing of it was recorded


ARRAY = "inputs:\n  xs: {type: array}\n"
MAP = """\
activities:
  - id: fan
    for_each: "${{ inputs.xs }}"
    set: {v: "${{ item }}"}
"""
COPIES = """\
activities:
  - id: fan
    for_each: "${{ inputs.xs }}"
    set: {v: "${{ inputs.pad }}"}
"""


def test_a_map_whose_items_outputs_together_pass_the_cap_fails_after_its_items() -> None:
    xs = [f"{i:03d}" + "y" * 60 for i in range(30)]  # 2 KB of items: their outputs 5.5 KB
    definition = workflow(MAP.replace("${{ item }}", "${{ item + item + item }}"), ARRAY)
    state = run(definition, {"xs": xs})

    fan = state.activity("fan")
    assert fan.items is not None and all(i["status"] == "completed" for i in fan.items)
    err = error_of(state, "fan")
    assert err["type"] == "PayloadTooLarge"
    assert err["message"].startswith("the output of activity 'fan' (its items' outputs together)")
    assert state.status == "failed"


def test_a_map_copying_its_input_into_every_item_stops_at_the_execution_budget() -> None:
    definition = workflow(COPIES, "inputs:\n  xs: {type: array}\n  pad: {type: string}\n")
    state = run(definition, {"xs": list(range(100)), "pad": "p" * 3_000})

    fan = state.activity("fan")
    assert fan.items is not None
    statuses = [i["status"] for i in fan.items]
    # the execution's input (3 KB) and each item's rendered input and output (3 KB each):
    # the budget of 40 KB holds five items; the sixth fails without its output, and no
    # item starts after it
    assert statuses == ["completed"] * 5 + ["failed"] + ["pending"] * 94
    refused = fan.items[5]
    assert refused["error"]["type"] == "ExecutionTooLarge"
    message = refused["error"]["message"]
    assert "the output of item 5 of activity 'fan' (3008 bytes)" in message
    assert "would take execution e1 past its byte budget of 40000" in message
    assert "(WOVYR_MAX_EXECUTION_BYTES)" in message
    assert refused.get("output") is None
    # the checkpoint: the values within the budget, and the engine's own fields (statuses,
    # attempts, the failures' errors) beside them
    assert ExecutionBytes(LIMITS).of(state) <= 40_000 + 2_000
    assert error_of(state, "fan")["type"] == "ItemFailed"


def test_a_workflow_output_over_the_cap_fails_the_execution() -> None:
    definition = workflow(
        'activities:\n  - {id: a, set: {v: 1}}\noutput: "${{ inputs.s + inputs.s }}"\n',
        "inputs:\n  s: {type: string}\n",
    )
    state = run(definition, {"s": "x" * 3_000})

    assert state.status == "failed"
    assert state.error is not None and state.error["type"] == "PayloadTooLarge"
    assert "the workflow's output is" in state.error["message"]
    assert state.output is None


def test_a_failing_map_too_large_to_keep_its_outputs_fails_without_them() -> None:
    definition = workflow(
        """\
        activities:
          - id: fan
            for_each: "${{ inputs.xs }}"
            set: {v: "${{ 10 / (item - 29) }}", pad: "${{ inputs.pad }}"}
        """,
        "inputs:\n  xs: {type: array}\n  pad: {type: string}\n",
    )
    limits = ValueLimits(json_bytes, json_depth, value_bytes=10_000, execution_bytes=None)
    state = fold(
        start_events(definition, "h", {"xs": list(range(30)), "pad": "p" * 400}, NOW), id="e1"
    )
    decision = decide(definition, state, NOW, bounds=StepBytes(limits))
    assert decision.state is not None
    fan = decision.state.activity("fan")

    # item 29 divides by zero: the map fails with that, as it would, keeping no outputs
    # (29 of ~420 bytes: over the cap together)
    assert fan.status == "failed" and fan.error is not None
    assert fan.error["type"] == "ItemFailed" and fan.error["details"]["index"] == 29
    assert fan.output is None


def test_an_unbounded_decision_is_what_it_was() -> None:
    state = fold(start_events(chain(80), "h", {}, NOW), id="e1")
    decision = decide(chain(80), state, NOW)
    assert decision.state is not None and decision.state.status == "completed"
