"""`${{ secrets.NAME }}` at dispatch, over every store: the handler gets the value, the
stored input (events, checkpoint) keeps the reference, what the handler returns or raises
has the value scrubbed, an unknown secret fails the activity at once (not retried, named,
no value), data that looks like a reference is never resolved, and for_each items and
retries resolve too."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import pytest

from wovyr.activities.base import ActivityRegistry
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.errors import DefinitionError
from wovyr.platform.kms import Kms, RootKey
from wovyr.platform.secrets import Secrets
from wovyr.store.base import Store
from wovyr.worker import Worker

VALUE = "s3cr3t-v@lue/+"
AT = datetime(2030, 1, 1, tzinfo=UTC)
FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: uses}
inputs:
  data: {type: string, default: "x"}
activities:
  - id: call
    tool: take
    with:
      auth: "Bearer ${{ secrets.TOKEN }}"
      whole: "${{ secrets.TOKEN }}"
      data: "${{ inputs.data }}"
      nested: {list: ["${{ secrets.TOKEN }}", 1]}
"""


def _drain(engine: Engine) -> None:
    async def main() -> None:
        worker = Worker(engine)
        try:
            await worker.run_until_idle()
        finally:
            await worker.close()

    asyncio.run(main())


@pytest.fixture
def setup(store: Store) -> tuple[Engine, list[dict[str, Any]]]:
    seen: list[dict[str, Any]] = []
    registry = ActivityRegistry()

    @registry.activity("take")
    def take(**kwargs: Any) -> dict[str, Any]:
        seen.append(kwargs)
        if kwargs.get("data") == "raise":
            raise RuntimeError(f"refused {kwargs['whole']}")
        return {"echo": kwargs["whole"], "len": len(kwargs["whole"])}

    secrets = Secrets(store, Kms(RootKey(bytes(range(32))), "production"))
    secrets.set_secret("default", "TOKEN", VALUE, by="test", at=AT)
    engine = Engine(store, clock=ManualClock(AT), activities=registry, secrets=secrets)
    return engine, seen


def _stored(engine: Engine, execution_id: str) -> str:
    record = engine.get(execution_id)
    events = engine.store.history(execution_id, 0, None, tenant=engine.tenant)
    return json.dumps([record.checkpoint, [e.data for e in events]])


def test_the_handler_gets_the_value_and_the_store_keeps_the_reference(
    setup: tuple[Engine, list[dict[str, Any]]],
) -> None:
    engine, seen = setup
    started = engine.start(FLOW, {"data": "${{ secrets.TOKEN }}"})
    _drain(engine)
    assert seen[0]["auth"] == f"Bearer {VALUE}"
    assert seen[0]["whole"] == VALUE
    assert seen[0]["nested"] == {"list": [VALUE, 1]}
    assert seen[0]["data"] == "${{ secrets.TOKEN }}"  # data is never resolved
    view = engine.query(started.id)
    assert view.status == "completed"
    assert view.activities["call"]["output"] == {"echo": "***", "len": len(VALUE)}
    stored = _stored(engine, started.id)
    assert VALUE not in stored and "${{ secrets.TOKEN }}" in stored


def test_an_error_that_repeats_the_value_is_scrubbed(
    setup: tuple[Engine, list[dict[str, Any]]],
) -> None:
    engine, seen = setup
    flow = FLOW.replace(
        "    tool: take", "    retry: {max_attempts: 2, initial_interval: 0}\n    tool: take"
    )
    started = engine.start(flow, {"data": "raise"})
    _drain(engine)
    engine.clock.advance(seconds=5)
    _drain(engine)
    assert len(seen) == 2  # the retry resolved again
    view = engine.query(started.id)
    assert view.status == "failed"
    assert "refused ***" in json.dumps(view.activities["call"]["error"])
    assert VALUE not in _stored(engine, started.id)


def test_an_unknown_secret_fails_at_once_naming_it(
    setup: tuple[Engine, list[dict[str, Any]]],
) -> None:
    engine, seen = setup
    flow = FLOW.replace("secrets.TOKEN", "secrets.MISSING").replace(
        "    tool: take", "    retry: {max_attempts: 5}\n    tool: take"
    )
    started = engine.start(flow)
    _drain(engine)
    view = engine.query(started.id)
    assert view.status == "failed" and not seen
    error = view.activities["call"]["error"]
    assert error["type"] == "SecretNotFound"
    assert "'MISSING'" in error["message"]
    assert view.activities["call"]["attempt"] == 1  # not retried


def test_for_each_items_resolve_per_item(setup: tuple[Engine, list[dict[str, Any]]]) -> None:
    engine, seen = setup
    flow = FLOW.replace("    tool: take", '    for_each: "${{ [1, 2, 3] }}"\n    tool: take')
    flow = flow.replace('data: "${{ inputs.data }}"', 'data: "${{ string(item) }}"')
    started = engine.start(flow)
    _drain(engine)
    assert sorted(s["data"] for s in seen) == ["1", "2", "3"]
    assert all(s["whole"] == VALUE for s in seen)
    assert engine.query(started.id).status == "completed"
    assert VALUE not in _stored(engine, started.id)


class _Legacy:
    """A store's secret set before values had a minimum length."""

    def resolve_secret(self, tenant: str, name: str) -> str:
        return "ab1"


def test_a_stored_value_too_short_to_mask_fails_at_once(store: Store) -> None:
    seen: list[Any] = []
    registry = ActivityRegistry()
    registry.register("take", lambda **kw: seen.append(kw))
    engine = Engine(store, clock=ManualClock(AT), activities=registry, secrets=_Legacy())
    started = engine.start(
        FLOW.replace("    tool: take", "    retry: {max_attempts: 3}\n    tool: take")
    )
    _drain(engine)
    view = engine.query(started.id)
    assert view.status == "failed" and seen == []  # the handler never got it
    error = view.activities["call"]["error"]
    assert error["type"] == "SecretTooShort" and "'TOKEN'" in error["message"]
    assert "wovyr secrets set TOKEN" in error["message"]
    assert view.activities["call"]["attempt"] == 1  # not retried


def test_without_a_resolver_it_fails_saying_so(store: Store) -> None:
    registry = ActivityRegistry()
    registry.register("take", lambda **kw: kw)
    engine = Engine(store, clock=ManualClock(AT), activities=registry)
    started = engine.start(FLOW)
    _drain(engine)
    error = engine.query(started.id).activities["call"]["error"]
    assert error["type"] == "SecretsUnavailable"


@pytest.mark.parametrize(
    ("snippet", "where"),
    [
        ('  - id: out\n    set: {v: "${{ secrets.TOKEN }}"}\n', "activities[1].set.v"),
        ("  - id: w\n    when: \"${{ secrets.TOKEN == 'a' }}\"\n    set: {v: 1}\n", "when"),
        (
            "  - id: c\n    workflow: {name: child, input: {k: '${{ secrets.TOKEN }}'}}\n",
            "activities[1].workflow",
        ),
        (
            "  - id: r\n    tool: take\n    with: {a: 1}\n"
            "    repeat: {until: \"${{ secrets.TOKEN == 'a' }}\", max_iterations: 2}\n",
            "repeat.until",
        ),
    ],
)
def test_validation_refuses_secrets_where_they_would_be_stored(
    setup: tuple[Engine, list[dict[str, Any]]], snippet: str, where: str
) -> None:
    engine, _ = setup
    with pytest.raises(DefinitionError) as refused:
        engine.start(FLOW + snippet)
    text = str(refused.value) + json.dumps([p.to_dict() for p in refused.value.problems])
    assert "a secret can be read only in the input of an activity run by a worker" in text
    assert where in text


def test_validation_refuses_a_secret_in_the_workflow_output_with_its_location(
    setup: tuple[Engine, list[dict[str, Any]]],
) -> None:
    engine, _ = setup
    with pytest.raises(DefinitionError) as refused:
        engine.start(FLOW + 'output:\n  leaked: "${{ secrets.TOKEN }}"\n')
    problem = refused.value.problems[0]
    assert problem.path == "output.leaked"
    assert (problem.line, problem.column) == (15, 11)
    assert "here its value would be stored or shown" in problem.message


def test_data_spliced_beside_a_reference_may_not_look_like_one(
    setup: tuple[Engine, list[dict[str, Any]]],
) -> None:
    engine, seen = setup
    flow = FLOW.replace(
        'data: "${{ inputs.data }}"', 'data: "${{ secrets.TOKEN }}-${{ inputs.data }}"'
    )
    started = engine.start(flow, {"data": "${{ secrets.TOKEN }}"})
    _drain(engine)
    view = engine.query(started.id)
    assert not seen and view.status == "failed"
    assert "may not contain '${{'" in view.activities["call"]["error"]["message"]
