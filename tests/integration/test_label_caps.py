"""Labels are few and short wherever they are written (`wovyr.labels`): at most 32,
keys of 1-63 characters of a small alphabet, values of at most 200 printable characters. A
definition breaking them is refused where it is accepted, with the line of the label (before,
`definitions apply` stored any number of labels of any size, refused only at each start);
a start, a child's start and a rerun are refused naming the label."""

from __future__ import annotations

import pytest

from wovyr.engine.engine import Engine
from wovyr.errors import DefinitionError, InputError
from wovyr.testing import drain


def labelled(labels: str, name: str = "tagged", version: str = "1") -> str:
    return f"""\
apiVersion: wovyr/v1
kind: Workflow
metadata: {{name: {name}, version: "{version}"}}
inputs:
  who: {{type: string, default: me}}
labels:
{labels}activities:
  - {{id: a, set: {{v: 1}}}}
"""


def many(n: int, prefix: str = "k") -> str:
    return "".join(f"  {prefix}{i}: v{i}\n" for i in range(n))


def test_a_definition_over_the_label_rules_is_refused_where_it_is_written(engine: Engine) -> None:
    with pytest.raises(DefinitionError) as refused:
        engine.apply(labelled(many(40)))
    (problem,) = refused.value.problems
    assert problem.message == "at most 32 labels, not 40" and problem.path == "labels"
    assert problem.line == 7

    with pytest.raises(DefinitionError) as refused:
        engine.apply(labelled(f'  "no spaces": x\n  long: "{"y" * 201}"\n'))
    key, value = refused.value.problems
    assert key.message == "label key 'no spaces' is refused" and key.line == 7
    assert value.message == "label 'long' must be at most 200 printable characters"
    assert value.line == 8

    # a value written as an expression is checked once rendered, at the start
    engine.apply(labelled('  who: "${{ inputs.who }}"\n'))
    with pytest.raises(InputError) as at_start:
        engine.start(name="tagged", input={"who": "w" * 201})
    assert [p.path for p in at_start.value.problems] == ["labels.who"]
    assert engine.get(engine.start(name="tagged").id).labels == {"who": "me"}


CHILD_PARENT = f"""\
apiVersion: wovyr/v1
kind: Workflow
metadata: {{name: parent}}
activities:
  - id: spawn
    workflow: {{name: tagged, input: {{who: {"w" * 300}}}}}
"""


def test_a_child_whose_labels_break_the_rules_fails_its_activity_naming_the_label(
    engine: Engine,
) -> None:
    engine.apply(labelled('  who: "${{ inputs.who }}"\n'))
    started = engine.start(CHILD_PARENT)
    drain(engine)

    spawn = engine.query(started.id).activities["spawn"]
    assert spawn["status"] == "failed" and spawn["attempt"] == 1
    assert spawn["error"]["type"] == "InputError"
    assert "label 'who' must be at most 200 printable characters" in spawn["error"]["message"]
    assert engine.list(limit=5, workflow="tagged").items == []


def test_a_rerun_whose_labels_together_pass_the_count_is_refused(engine: Engine) -> None:
    engine.apply(labelled(many(20, "a")))
    first = engine.start(name="tagged", labels={f"b{i}": "x" for i in range(10)})
    drain(engine)
    assert len(engine.get(first.id).labels) == 30
    engine.apply(labelled(many(20, "c"), version="2"))  # other keys: 50 together

    with pytest.raises(InputError) as refused:
        engine.rerun(first.id, latest=True)
    assert refused.value.problems[0].message == "at most 32 labels, not 50"
    engine.rerun(first.id)  # on its own definition: the same 30
