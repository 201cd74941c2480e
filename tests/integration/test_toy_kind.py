"""A new activity kind registered from this test module through the kinds table alone
(model, spec builder, executor) parses, validates, appears in the schema, runs end to end on
every store, retries and compensates like a built-in - and is gone once unregistered."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import Field

from wovyr.activities.base import ActivityError
from wovyr.activities.dispatch import Dispatch
from wovyr.activities.kinds import KINDS, ActivityKind
from wovyr.definition import load_definition
from wovyr.definition.schema import json_schema
from wovyr.engine.engine import Engine
from wovyr.errors import DefinitionError
from wovyr.fields import FrozenModel
from wovyr.testing import drain

SAID: list[tuple[str, str]] = []


class EchoSpec(FrozenModel):
    text: str
    times: int = Field(default=1, ge=1, le=10)
    fail_first: bool = False


class EchoStep(FrozenModel):
    echo: EchoSpec


async def run_echo(step: EchoStep, rendered: Any, dispatch: Dispatch) -> Any:
    spec = EchoSpec.model_validate(rendered)
    key = dispatch.context.idempotency_key
    SAID.append((key, spec.text))
    if spec.fail_first and dispatch.context.attempt == 1:
        raise ActivityError("not yet", type="NotYet")
    return {"said": spec.text * spec.times, "attempt": dispatch.context.attempt}


ECHO = ActivityKind(
    name="echo",
    model=EchoStep,
    spec=lambda step: step.echo.model_dump(mode="json"),
    execute=run_echo,
    description="says its text (a kind defined by a test)",
)


@pytest.fixture
def echo() -> Iterator[ActivityKind]:
    SAID.clear()
    with KINDS.registered(ECHO) as kind:
        yield kind


def doc(body: str) -> str:
    head = "apiVersion: wovyr/v1\nkind: Workflow\nmetadata: {name: toy}\n"
    return head + textwrap.dedent(body)


FLOW = doc(
    """
    inputs: {word: {type: string}}
    activities:
      - id: hello
        echo: {text: "${{ inputs.word }}", times: 2}
      - id: again
        needs: [hello]
        echo: {text: "${{ activities.hello.output.said }}!", fail_first: true}
        retry: {max_attempts: 2, initial_interval: 0s}
    output: "${{ activities.again.output }}"
    """
)


def test_a_registered_kind_runs_end_to_end(echo: ActivityKind, engine: Engine) -> None:
    record = engine.start(definition=FLOW, input={"word": "hi"})
    drain(engine)
    view = engine.query(record.id)
    assert view.status == "completed", view.error
    assert view.output == {"said": "hihi!", "attempt": 2}
    assert view.activities["hello"]["kind"] == "echo"
    assert view.activities["hello"]["input"] == {"text": "hi", "times": 2, "fail_first": False}
    assert [
        (f"{record.id}/hello/1", "hi"),
        (f"{record.id}/again/1", "hihi!"),
        (f"{record.id}/again/2", "hihi!"),
    ] == SAID


def test_a_registered_kind_compensates_and_maps(echo: ActivityKind, engine: Engine) -> None:
    flow = doc(
        """
        activities:
          - id: each
            for_each: "${{ ['a', 'b'] }}"
            echo: {text: "${{ item }}"}
            compensate: {echo: {text: "undo ${{ item }}"}}
          - id: boom
            needs: [each]
            set: {v: "${{ 1 / 0 }}"}
        """
    )
    record = engine.start(definition=flow)
    drain(engine)
    assert engine.query(record.id).status == "failed"
    assert [text for _, text in SAID] == ["a", "b", "undo b", "undo a"]


def test_the_kind_is_validated_located_and_in_the_schema(echo: ActivityKind) -> None:
    with pytest.raises(DefinitionError) as caught:
        load_definition(doc("activities:\n  - id: a\n    echo: {text: x, times: 99}\n"))
    (problem,) = caught.value.problems
    assert problem.path == "activities[0].echo.times"
    assert (problem.line, problem.column) == (6, 28)  # the `times` value
    activity = json_schema()["definitions"]["Activity"]
    assert "echo" in activity["properties"]
    assert {"required": ["echo"]} in activity["oneOf"]
    workflow = load_definition(FLOW)
    assert workflow.activities[0].step_of(EchoStep) == EchoStep(
        echo=EchoSpec(text="${{ inputs.word }}", times=2)
    )


def test_an_unregistered_kind_is_an_unknown_key() -> None:
    with pytest.raises(DefinitionError, match="unknown field 'echo'") as caught:
        load_definition(doc("activities:\n  - id: a\n    echo: {text: x}\n"))
    allowed = (caught.value.problems[0].hint or "").removeprefix("allowed fields: ").split(", ")
    assert {"tool", "with", "http", "wait", "needs"} <= set(allowed)
    assert not {"echo", "kind", "step"} & set(allowed)
    assert "echo" not in json_schema()["definitions"]["Activity"]["properties"]


async def run_probe(step: Any, rendered: Any, dispatch: Dispatch) -> Any:
    """What this attempt was handed, by `Dispatch` field."""
    services = ("models", "journal", "stream", "child_tools", "mcp", "memory", "sandbox")
    handed = [name for name in services if getattr(dispatch, name) is not None]
    return handed + (["start_child"] if dispatch.start_child is not None else [])


def test_an_attempt_is_handed_only_what_its_kind_declares(engine: Engine) -> None:
    flow = doc("activities:\n  - id: look\n    probe: {text: x}\n")
    for needs, handed in [
        (frozenset(), []),
        (frozenset({"memory_namespaces", "start_child"}), ["memory", "start_child"]),
        (frozenset({"journal", "stream"}), ["journal", "stream"]),
    ]:
        probe = ActivityKind(
            name="probe",
            model=ProbeStep,
            spec=lambda step: step.probe.model_dump(mode="json"),
            execute=run_probe,
            needs=needs,
        )
        with KINDS.registered(probe):
            record = engine.start(definition=flow)
            drain(engine)
            assert engine.query(record.id).output is None
            assert engine.query(record.id).activities["look"]["output"] == handed


class ProbeStep(FrozenModel):
    probe: EchoSpec
