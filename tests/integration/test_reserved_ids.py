"""Ids ending in `~c<number>` are a continue-as-new chain's later runs: no one may choose one
for an execution. A child's `workflow.id` that takes one is refused where the definition is
accepted (written as a literal: located), or fails its activity (rendered from data); before,
such a child took the id of a chain's next run, and the chain could not hand over to it."""

from __future__ import annotations

import pytest

from wovyr.clock import ManualClock
from wovyr.definition import load_definition
from wovyr.engine.engine import Engine
from wovyr.errors import DefinitionError, InputError
from wovyr.ids import continued_id
from wovyr.testing import drain

CHAIN = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: chain}
inputs:
  n: {type: integer, default: 1}
activities:
  - id: go
    wait: {signal: go}
continue_as_new:
  when: "${{ inputs.n < 3 }}"
  input: {n: "${{ inputs.n + 1 }}"}
"""
OTHER = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: other}
activities:
  - {id: x, set: {v: 1}}
"""


def parent(child_id: str) -> str:
    return f"""\
apiVersion: wovyr/v1
kind: Workflow
metadata: {{name: parent}}
inputs:
  id: {{type: string, default: ""}}
activities:
  - id: spawn
    workflow: {{name: other, id: {child_id!r}}}
"""


def test_a_literal_reserved_child_id_is_refused_where_it_is_written() -> None:
    with pytest.raises(DefinitionError) as refused:
        load_definition(parent("job~c2"))
    (problem,) = refused.value.problems
    assert problem.path == "activities[0].workflow.id" and (problem.line, problem.column) == (8, 33)
    assert "ends like a continue-as-new chain's runs ('~c<number>')" in problem.message
    with pytest.raises(DefinitionError, match="execution ids are 1-200 characters"):
        load_definition(parent("no/slashes"))
    load_definition(parent("job~c"))  # not reserved: no number
    load_definition(parent("${{ inputs.id }}"))  # rendered: checked when it starts


def test_a_rendered_reserved_child_id_fails_and_the_chain_hands_over(
    engine: Engine, clock: ManualClock
) -> None:
    engine.apply(OTHER)
    spawner = engine.start(parent("${{ inputs.id }}"), {"id": continued_id("job", 2)})
    drain(engine)
    spawn = engine.query(spawner.id).activities["spawn"]
    assert spawn["status"] == "failed" and spawn["attempt"] == 1  # not retried
    assert spawn["error"]["type"] == "InvalidChildId"
    assert "ends like a continue-as-new chain's runs" in spawn["error"]["message"]
    assert engine.list(limit=10, workflow="other").items == []  # no child took the id

    engine.start(CHAIN, execution_id="job")
    for _ in range(2):
        drain(engine)
        engine.signal("job", "go")
        clock.advance(2)  # (past the chain's minimum interval between runs)
    drain(engine)
    second = engine.get("job~c2")
    assert second.workflow == "chain" and second.status == "continued"
    assert engine.query("job").id == "job~c3"


def test_a_start_may_not_choose_a_reserved_id(engine: Engine) -> None:
    with pytest.raises(InputError, match="reserved for the runs of a continue-as-new chain"):
        engine.start(OTHER, execution_id="job~c7")
