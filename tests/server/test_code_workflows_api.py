"""A workflow function over the API: applied for a tenant, started by name, signalled and
shown with the steps its function asked (their kind, line and order); another tenant
neither sees it nor starts it (its name is the first tenant's)."""

from __future__ import annotations

import pytest
from tests.server.conftest import Api

import wovyr

pytestmark = pytest.mark.anyio
OP, VIEW, OTHER = "tenant-a:operator", "tenant-a:viewer", "tenant-b:operator"
BASE = "/api/v1/workflows"


@wovyr.workflow(name="api-greeter")
async def greeter(ctx: wovyr.Context, name: str) -> str:
    reply = await ctx.signal("reply")
    return f"hello {name}, {reply['text']}"


LINE = greeter.fn.__code__.co_firstlineno


async def test_a_function_starts_by_name_and_shows_its_steps(api: Api) -> None:
    api.engine.for_tenant("tenant-a").apply(greeter.definition())
    body = {"workflow": "api-greeter", "input": {"name": "ann"}, "id": "g1"}
    r = await api.call("POST", BASE, OP, json=body)
    assert r.status_code == 201, r.text
    await api.drain()
    shown = (await api.call("GET", f"{BASE}/g1", VIEW)).json()
    assert shown["status"] == "waiting"
    step = shown["activities"]["reply_1"]
    assert (step["kind"], step["status"]) == ("wait", "waiting")
    assert step["source"] == f"test_code_workflows_api.py:{LINE + 2}"

    assert (
        await api.call("POST", f"{BASE}/g1/signal", OTHER, json={"name": "reply"})
    ).status_code == 404
    r = await api.call(
        "POST", f"{BASE}/g1/signal", OP, json={"name": "reply", "payload": {"text": "hi"}}
    )
    assert r.is_success, r.text
    await api.drain()
    done = (await api.call("GET", f"{BASE}/g1", VIEW)).json()
    assert (done["status"], done["output"]) == ("completed", "hello ann, hi")

    r = await api.call("POST", BASE, OTHER, json={**body, "id": "g2"})
    assert r.status_code == 422, r.text  # tenant-b applied no such workflow
    assert "no workflow 'api-greeter' is registered" in r.text


@wovyr.workflow(name="api-counter")
async def counter(ctx: wovyr.Context) -> int:
    ctx.state["seen"] = 0
    for _ in range(2):
        await ctx.signal("tick")
        ctx.state["seen"] += 1
    return int(ctx.state["seen"])


@counter.query
def seen(q: wovyr.Query, plus: int = 0) -> int:
    return int(q.state["seen"]) + plus


async def test_a_query_is_answered_for_the_tenant_only(api: Api) -> None:
    api.engine.for_tenant("tenant-a").apply(counter.definition())
    r = await api.call("POST", BASE, OP, json={"workflow": "api-counter", "id": "c1"})
    assert r.status_code == 201, r.text
    await api.drain()
    assert (await api.call("POST", f"{BASE}/c1/signal", OP, json={"name": "tick"})).is_success
    await api.drain()
    path = f"{BASE}/c1/query"
    r = await api.call("POST", path, VIEW, json={"name": "seen", "args": {"plus": 10}})
    assert r.status_code == 200, r.text
    assert r.json() == {"query": "seen", "result": 11}
    assert (await api.call("POST", path, OTHER, json={"name": "seen"})).status_code == 404
    r = await api.call("POST", path, VIEW, json={"name": "nope"})
    assert r.status_code == 422 and "queries: seen" in r.text
    r = await api.call("POST", path, VIEW, json={"name": "seen", "args": {"minus": 1}})
    assert r.status_code == 422, r.text
