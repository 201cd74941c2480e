"""Search on every store: labels from the definition (rendered from the inputs) and from
the start, checked and kept; lists by label, id prefix and partial workflow name (pages
merged across the names that match, in order, with a cursor); another tenant's executions
never found."""

from __future__ import annotations

import pytest

from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.errors import DefinitionError, InputError

ORDER = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: %s}
inputs: {customer: {type: string, default: acme}}
labels: {customer: "${{ inputs.customer }}", team: "ops"}
activities:
  - {id: wait, wait: {signal: go}}
"""


def test_labels_come_from_the_definition_and_the_start(engine: Engine) -> None:
    engine.start(ORDER % "Order-Fulfilment", {"customer": "globex"}, execution_id="a")
    engine.start(ORDER % "order-refund", execution_id="b", labels={"team": "billing", "p": "1"})
    assert engine.get("a").labels == {"customer": "globex", "team": "ops"}
    assert engine.query("b").labels == {"customer": "acme", "team": "billing", "p": "1"}
    assert [r.id for r in engine.list(labels={"customer": "acme"}).items] == ["b"]
    assert [r.id for r in engine.list(labels={"team": "ops", "customer": "globex"}).items] == ["a"]
    assert engine.list(labels={"team": "ops", "customer": "acme"}).items == []
    assert engine.for_tenant("other").list(labels={"customer": "acme"}).items == []


def test_bad_labels_are_refused_with_the_reason_and_nothing_is_started(engine: Engine) -> None:
    with pytest.raises(InputError, match="label key 'bad key' is refused"):
        engine.start(ORDER % "x", execution_id="c", labels={"bad key": "v"})
    with pytest.raises(InputError, match="at most 200 printable characters"):
        engine.start(ORDER % "x", execution_id="c", labels={"k": "v" * 201})
    with pytest.raises(InputError, match="at most 32 labels"):
        engine.start(ORDER % "x", execution_id="c", labels={f"k{i}": "v" for i in range(33)})
    with pytest.raises(DefinitionError, match="activities"):  # labels read inputs only
        engine.start((ORDER % "x").replace("inputs.customer", "activities.wait.output"))
    assert engine.list().items == []


def test_id_prefix_and_partial_names_page_in_order(engine: Engine, clock: ManualClock) -> None:
    names = ["Order-Fulfilment", "order-refund", "shipping"]
    for i in range(9):
        engine.start(ORDER % names[i % 3], execution_id=f"run-{i}")
        clock.advance(1)
    found = engine.list(name="ORDER", limit=4)
    assert [r.id for r in found.items] == ["run-7", "run-6", "run-4", "run-3"]
    rest = engine.list(name="ORDER", limit=4, cursor=found.next_cursor)
    assert [r.id for r in rest.items] == ["run-1", "run-0"] and rest.next_cursor is None
    assert [r.id for r in engine.list(name="fulfil").items] == ["run-6", "run-3", "run-0"]
    assert [r.id for r in engine.list(id_prefix="run-").items][:2] == ["run-8", "run-7"]
    assert [r.id for r in engine.list(id_prefix="run-5").items] == ["run-5"]
    assert engine.list(name="nothing-like-it").items == []
    assert engine.for_tenant("other").list(name="order").items == []
    assert engine.for_tenant("other").list(id_prefix="run").items == []


def test_a_rerun_keeps_the_labels_given_at_start(engine: Engine) -> None:
    engine.start(ORDER % "o", execution_id="o", labels={"ticket": "T-1"})
    engine.cancel("o")
    rerun = engine.rerun("o", input={"customer": "initech"})
    assert engine.get(rerun.id).labels == {"customer": "initech", "team": "ops", "ticket": "T-1"}
