"""Caps with defaults: every attempt has a deadline (the engine's default when the
definition gives none), stored payloads are capped in size and depth (inputs and signal
payloads refused before anything is stored, outputs failing their attempt for good), a
request body nested too deeply is refused up front, and no response may be cached."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from tests.server.conftest import Api, serve

from wovyr.activities.base import ActivityRegistry
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.errors import InputError
from wovyr.settings import Settings
from wovyr.store.codec import MAX_DEPTH, check_payload, json_depth, loads
from wovyr.store.sqlite import SQLiteStore

pytestmark = pytest.mark.anyio
OP, VIEW = "tenant-a:operator", "tenant-a:viewer"
BASE = "/api/v1/workflows"
CAP = 4096  # bytes: the payload cap of these tests

RUN = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: run}
inputs:
  what: {type: string, default: small}
  data: {type: array, default: []}
activities:
  - id: work
    tool: caps.produce
    with: {what: "${{ inputs.what }}"}
    retry: {max_attempts: 3}
  - id: go
    wait: {signal: go}
"""

HANG = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: hang}
activities:
  - id: stuck
    tool: caps.hang
    retry: {max_attempts: 1}
"""


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


@pytest.fixture
def produced(registry: ActivityRegistry) -> dict[str, int]:
    calls = {"produce": 0}

    @registry.activity("caps.produce")
    def produce(what: str) -> Any:
        calls["produce"] += 1
        return {"small": "ok", "large": "x" * (CAP * 2), "deep": nested(MAX_DEPTH + 1)}[what]

    @registry.activity("caps.hang")
    async def hang() -> None:
        await asyncio.Event().wait()  # never set: only a deadline ends this attempt

    return calls


@pytest.fixture
async def capped(
    registry: ActivityRegistry, clock: ManualClock, tmp_path: Path
) -> AsyncIterator[Api]:
    engine = Engine(
        SQLiteStore(),
        clock=clock,
        activities=registry,
        default_timeout=0.2,
        max_payload_bytes=CAP,
    )
    with engine:
        async with serve(engine, Settings(home=tmp_path / "home")) as api:
            yield api


async def _executions(api: Api) -> list[Any]:
    r = await api.call("GET", BASE, VIEW)
    assert r.status_code == 200, r.text
    items: list[Any] = r.json()["items"]
    return items


async def _activity(api: Api, eid: str, activity: str) -> dict[str, Any]:
    detail = (await api.call("GET", f"{BASE}/{eid}", VIEW)).json()
    found: dict[str, Any] = detail["activities"][activity]
    return found


@pytest.mark.usefixtures("produced")
async def test_an_activity_without_a_timeout_is_bounded_by_the_engines_default(
    capped: Api,
) -> None:
    r = await capped.call("POST", BASE, OP, json={"definition": HANG})
    assert r.status_code == 201, r.text
    await asyncio.wait_for(capped.drain(), 10)
    stuck = await _activity(capped, r.json()["id"], "stuck")
    assert stuck["status"] == "failed"
    assert stuck["error"]["type"] == "Timeout"
    assert "0.2s" in stuck["error"]["message"]


def test_the_default_timeout_and_payload_cap_come_from_settings() -> None:
    from wovyr.settings import load_settings

    settings = load_settings(
        {"WOVYR_DEFAULT_TIMEOUT_SECONDS": "7", "WOVYR_MAX_PAYLOAD_BYTES": "99"}
    )
    assert (settings.default_timeout, settings.max_payload_bytes) == (7.0, 99)
    with Engine(SQLiteStore()) as engine:
        assert engine.default_timeout == 300.0
        assert engine.max_payload_bytes == 2 * 1024 * 1024


async def test_a_start_input_over_the_cap_is_a_422_and_nothing_is_stored(
    capped: Api, produced: dict[str, int]
) -> None:
    body = {"definition": RUN, "input": {"what": "x" * (CAP + 1)}}
    r = await capped.call("POST", BASE, OP, json=body)
    assert r.status_code == 422, r.text
    assert "over the cap of 4096" in r.text
    assert await _executions(capped) == []
    assert produced["produce"] == 0


async def test_a_signal_payload_over_the_cap_is_a_422_and_not_received(capped: Api) -> None:
    r = await capped.call("POST", BASE, OP, json={"definition": RUN})
    eid = r.json()["id"]
    r = await capped.call(
        "POST", f"{BASE}/{eid}/signal", OP, json={"name": "go", "payload": "y" * (CAP + 1)}
    )
    assert r.status_code == 422, r.text
    history = (await capped.call("GET", f"{BASE}/{eid}/history", VIEW)).json()
    assert not [e for e in history["items"] if e["type"] == "SignalReceived"]
    with pytest.raises(InputError, match="nested more than 64 levels"):
        capped.engine.for_tenant("tenant-a").signal(eid, "go", nested(MAX_DEPTH + 1))


@pytest.mark.parametrize(
    ("what", "error"), [("large", "PayloadTooLarge"), ("deep", "PayloadTooDeep")]
)
async def test_an_output_over_a_cap_fails_its_attempt_for_good(
    capped: Api, produced: dict[str, int], what: str, error: str
) -> None:
    r = await capped.call("POST", BASE, OP, json={"definition": RUN, "input": {"what": what}})
    eid = r.json()["id"]
    await capped.drain()
    work = await _activity(capped, eid, "work")
    assert work["status"] == "failed"
    assert work["error"]["type"] == error
    assert produced["produce"] == 1  # not retried, though the retry policy allows 3
    detail = (await capped.call("GET", f"{BASE}/{eid}", VIEW)).json()
    assert detail["status"] in ("failed", "waiting")


async def test_a_request_nested_250_levels_is_a_422_up_front_and_nothing_is_stored(
    capped: Api, caplog: pytest.LogCaptureFixture
) -> None:
    for depth in (MAX_DEPTH + 1, 250, 100_000):
        data = "[" * depth + "]" * depth
        raw = f'{{"definition": {_json_text(RUN)}, "input": {{"data": {data}}}}}'
        with caplog.at_level(logging.ERROR):
            r = await capped.call(
                "POST", BASE, OP, content=raw, headers={"content-type": "application/json"}
            )
        assert r.status_code == 422, (depth, r.text)
        assert "nested more than 64 levels" in r.text
    assert await _executions(capped) == []
    assert not [rec for rec in caplog.records if rec.levelno >= logging.ERROR]
    ok = {"definition": RUN, "input": {"data": nested(MAX_DEPTH - 2)}}
    assert (await capped.call("POST", BASE, OP, json=ok)).status_code == 201


def _json_text(value: str) -> str:
    import json

    return json.dumps(value)


def test_values_stored_before_the_caps_still_load_whatever_their_depth() -> None:
    assert json_depth(loads("[" * 250 + "]" * 250)) == 250
    assert loads("[" * 100_000 + "]" * 100_000) == {
        "unreadable": "a value nested too deeply to read"
    }
    assert check_payload(nested(MAX_DEPTH - 1), "x") > 0


async def test_every_api_and_ui_response_says_no_store(capped: Api) -> None:
    for path, who in (
        (BASE, VIEW),
        (f"{BASE}/nope", VIEW),
        (BASE, None),
        ("/healthz", None),
        ("/ui/login", None),
        ("/ui", None),
    ):
        r = await capped.call("GET", path, who)
        assert r.headers.get("cache-control") == "no-store", (path, r.status_code)


async def test_every_api_and_ui_response_says_nosniff(capped: Api) -> None:
    """A JSON body holds a tenant's text: a browser must never sniff it into HTML."""
    too_big = {"headers": {"content-type": "application/json"}, "content": b"x" * 2_000_000}
    for method, path, who, extra in (
        ("GET", BASE, VIEW, {}),
        ("GET", f"{BASE}/nope", VIEW, {}),  # the uniform 404 problem
        ("GET", BASE, None, {}),  # 401
        ("POST", BASE, OP, too_big),  # 413, answered by the guard itself
        ("GET", "/openapi.json", None, {}),
        ("GET", "/healthz", None, {}),
        ("GET", "/ui/login", None, {}),
        ("GET", "/ui", None, {}),
        ("GET", "/ui/static/wovyr.css", None, {}),
    ):
        r = await capped.call(method, path, who, **extra)
        assert r.headers.get_list("x-content-type-options") == ["nosniff"], (path, r.status_code)


CHILD = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: child}
inputs:
  data: {type: string}
activities:
  - id: noop
    set: {ok: true}
"""

PARENT = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: parent}
inputs:
  part: {type: string}
activities:
  - id: spawn
    workflow: {name: child, input: {data: "${{ inputs.part + inputs.part }}"}}
    retry: {max_attempts: 3}
"""


async def test_a_child_input_over_the_cap_fails_the_parents_activity_for_good(
    capped: Api,
) -> None:
    tenant = capped.engine.for_tenant("tenant-a")
    tenant.apply(CHILD)
    body = {"definition": PARENT, "input": {"part": "z" * (CAP // 2 + 10)}}
    r = await capped.call("POST", BASE, OP, json=body)
    assert r.status_code == 201, r.text
    await capped.drain()
    spawn = await _activity(capped, r.json()["id"], "spawn")
    assert spawn["status"] == "failed", spawn
    # the rendered input is over the cap: refused when the step is scheduled, before any
    # attempt could start the child
    assert spawn["attempt"] == 0 and "over the cap of 4096" in spawn["error"]["message"]
    assert [e["workflow"] for e in await _executions(capped)] == ["parent"]
