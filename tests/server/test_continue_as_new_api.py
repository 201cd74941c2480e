"""Continue-as-new over the API: the detail of a chain's logical id is its live run, with the
links both ways; `follow=false` shows a run itself; signals and cancels addressed to the
logical id reach the live run; lists filter on `continued`; another tenant sees nothing."""

from __future__ import annotations

import pytest
from tests.server.conftest import Api

pytestmark = pytest.mark.anyio
OP, VIEW, OTHER = "tenant-a:operator", "tenant-a:viewer", "tenant-b:operator"
BASE = "/api/v1/workflows"

CHAIN = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: monthly}
inputs: {n: {type: integer, default: 1}}
activities:
  - {id: go, wait: {signal: go}}
output: "${{ inputs.n }}"
continue_as_new: {when: "${{ inputs.n < 3 }}", input: {n: "${{ inputs.n + 1 }}"}}
"""


async def test_the_api_shows_and_follows_the_chain(api: Api) -> None:
    r = await api.call("POST", BASE, OP, json={"definition": CHAIN, "id": "sub"})
    assert r.status_code == 201, r.text
    await api.drain()
    api.clock.advance(1)  # a chain starts at most one run a second (min_continue_interval)
    r = await api.call("POST", f"{BASE}/sub/signal", OP, json={"name": "go"})
    assert r.status_code == 200, r.text
    await api.drain()

    live = (await api.call("GET", f"{BASE}/sub", VIEW)).json()
    assert (live["id"], live["status"]) == ("sub~c2", "waiting")
    assert (live["continued_from"], live["continued_as"]) == ("sub", None)
    assert live["chain"] == {"root": "sub", "run": 2}
    assert live["input"] == {"n": 2}
    assert live["timeline"][0]["data"]["continued_from"] == "sub"

    first = (await api.call("GET", f"{BASE}/sub?follow=false", VIEW)).json()
    assert (first["id"], first["status"], first["continued_as"]) == ("sub", "continued", "sub~c2")
    assert first["chain"] == {"root": "sub", "run": 1}
    assert first["timeline"][-1]["type"] == "ExecutionContinued"

    history = (await api.call("GET", f"{BASE}/sub/history", VIEW)).json()
    assert history["items"][0]["data"]["chain"] == {"root": "sub", "run": 2}
    own = (await api.call("GET", f"{BASE}/sub/history?follow=false", VIEW)).json()
    assert own["items"][-1]["type"] == "ExecutionContinued"

    listed = (await api.call("GET", f"{BASE}?status=continued", VIEW)).json()
    assert [i["id"] for i in listed["items"]] == ["sub"]
    assert (await api.call("GET", f"{BASE}?status=continuing", VIEW)).status_code == 422

    r = await api.call("POST", f"{BASE}/sub/cancel", OP)  # the logical id cancels the live run
    assert r.status_code == 200, r.text
    assert (r.json()["id"], r.json()["status"]) == ("sub~c2", "cancelled")


async def test_another_tenant_cannot_reach_a_chain(api: Api) -> None:
    await api.call("POST", BASE, OP, json={"definition": CHAIN, "id": "sub"})
    await api.drain()
    await api.call("POST", f"{BASE}/sub/signal", OP, json={"name": "go"})
    await api.drain()
    for path in ("sub", "sub~c2", "sub?follow=false", "sub/history"):
        assert (await api.call("GET", f"{BASE}/{path}", OTHER)).status_code == 404
    r = await api.call("POST", f"{BASE}/sub/signal", OTHER, json={"name": "go"})
    assert r.status_code == 404
    live = (await api.call("GET", f"{BASE}/sub", VIEW)).json()
    assert live["buffered_signals"] == {}  # nothing reached tenant-a's run


async def test_a_caller_chosen_chain_id_is_refused(api: Api) -> None:
    r = await api.call("POST", BASE, OP, json={"definition": CHAIN, "id": "x~c2"})
    assert r.status_code == 422
    assert "reserved" in r.text


async def test_the_openapi_document_lists_continued(api: Api) -> None:
    doc = (await api.call("GET", "/openapi.json")).json()
    text = str(doc)
    assert "'continued'" in text and "continued_as" in text and "continued_from" in text
