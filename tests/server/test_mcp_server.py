"""Wovyr's MCP server mounted on the app at /mcp, driven by the SDK's own client
(`ClientSession` over streamable HTTP, through the app's ASGI interface): it lists its
tools, starts a registered workflow and reads its result, signals, approves and cancels -
as the tenant and role of the API key of each request. A viewer key reads but cannot
start; another tenant's execution answers like a missing one; no key is a 401."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from tests.server.conftest import APPROVAL_FLOW, Api

pytestmark = pytest.mark.anyio

GREET = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: greet, version: "1"}
inputs: {who: {type: string}}
activities:
  - id: hello
    set: {text: "hello ${{ inputs.who }}"}
output: "${{ activities.hello.output.text }}"
"""
TOOLS = {
    "list_workflows",
    "list_agents",
    "start_workflow",
    "start_agent",
    "get_execution",
    "get_agent_run",
    "signal",
    "approve",
    "cancel",
}


@asynccontextmanager
async def session(api: Api, who: str) -> AsyncIterator[ClientSession]:
    transport = httpx2.ASGITransport(app=api.app)
    client = httpx2.AsyncClient(
        transport=transport, base_url="http://wovyr.test", headers=api.as_(who)
    )
    async with (
        client,
        streamable_http_client("http://wovyr.test/mcp", http_client=client) as (read, write),
        ClientSession(read, write) as mcp,
    ):
        await mcp.initialize()
        yield mcp


async def call(mcp: ClientSession, tool: str, **arguments: Any) -> tuple[bool, Any]:
    """(is_error, the answer's JSON, or its text when it is an error)."""
    result = await mcp.call_tool(tool, arguments)
    text = "".join(getattr(block, "text", "") for block in result.content)
    return result.is_error, (text if result.is_error else json.loads(text))


async def test_list_start_and_read_a_result_as_an_operator(memory_api_factory: Any) -> None:
    async with memory_api_factory() as api:
        api.engine.for_tenant("tenant-a").apply(GREET)
        async with session(api, "tenant-a:operator") as mcp:
            listed = await mcp.list_tools()
            assert {t.name for t in listed.tools} == TOOLS
            start = next(t for t in listed.tools if t.name == "start_workflow")
            assert start.input_schema["required"] == ["workflow"]
            failed, workflows = await call(mcp, "list_workflows")
            assert not failed and workflows == [{"name": "greet", "version": "1"}]
            failed, started = await call(
                mcp, "start_workflow", workflow="greet", input={"who": "mcp"}, execution_id="g1"
            )
            assert not failed, started
            assert started["id"] == "g1" and started["created"] is True
            await api.drain()
            failed, view = await call(mcp, "get_execution", execution_id="g1")
            assert not failed and view["status"] == "completed"
            assert view["output"] == "hello mcp"
        # it is the tenant's own execution, started by the operator's key
        audit = [r for r in api.engine.store.audit_records() if r.tenant == "tenant-a"]
        assert any(r.actor.startswith(f"key:{api.key_ids['tenant-a:operator']}") for r in audit)


async def test_signal_approve_and_cancel(memory_api_factory: Any) -> None:
    async with memory_api_factory() as api:
        api.engine.for_tenant("tenant-a").apply(APPROVAL_FLOW)
        async with session(api, "tenant-a:operator") as mcp:
            for run in ("p1", "p2"):
                failed, _ = await call(mcp, "start_workflow", workflow="purchase", execution_id=run)
                assert not failed
            await api.drain()
            failed, view = await call(mcp, "signal", execution_id="p1", name="go")
            assert not failed, view
            failed, view = await call(
                mcp, "approve", execution_id="p1", activity="gate", comment="fine"
            )
            assert not failed, view
            await api.drain()
            failed, view = await call(mcp, "get_execution", execution_id="p1")
            assert view["status"] == "completed" and view["output"] == {"shipped": True}
            history = api.engine.for_tenant("tenant-a").history("p1")
            (decided,) = [e.data for e in history if e.type == "ApprovalDecided"]
            assert decided["by"] == "tenant-a-operator" and decided["comment"] == "fine"
            failed, view = await call(mcp, "cancel", execution_id="p2", reason="not needed")
            assert not failed and view["status"] == "cancelled"
            failed, text = await call(mcp, "cancel", execution_id="p2")
            assert failed and "already cancelled" in text


async def test_a_viewer_key_reads_but_cannot_start(memory_api_factory: Any) -> None:
    async with memory_api_factory() as api:
        api.engine.for_tenant("tenant-a").apply(GREET)
        api.engine.for_tenant("tenant-a").start(name="greet", input={"who": "x"}, execution_id="v1")
        async with session(api, "tenant-a:viewer") as mcp:
            failed, text = await call(mcp, "start_workflow", workflow="greet", input={"who": "v"})
            assert failed
            assert "role 'viewer' may not do this (operator needed)" in text
            failed, text = await call(mcp, "cancel", execution_id="v1")
            assert failed and "operator needed" in text
            failed, view = await call(mcp, "get_execution", execution_id="v1")
            assert not failed and view["status"] == "running"
        assert [r.id for r in api.engine.for_tenant("tenant-a").list().items] == ["v1"]


async def test_another_tenants_execution_is_missing(memory_api_factory: Any) -> None:
    async with memory_api_factory() as api:
        api.engine.for_tenant("tenant-a").apply(GREET)
        api.engine.for_tenant("tenant-a").start(name="greet", input={"who": "a"}, execution_id="a1")
        async with session(api, "tenant-b:operator") as mcp:
            failed, text = await call(mcp, "get_execution", execution_id="a1")
            assert failed and "a1" in text
            missing, other = await call(mcp, "get_execution", execution_id="nothing-here")
            assert missing and other.replace("nothing-here", "a1") == text
            failed, workflows = await call(mcp, "list_workflows")
            assert not failed and workflows == []
            failed, text = await call(mcp, "start_workflow", workflow="greet", input={"who": "b"})
            assert failed


async def test_no_key_or_a_revoked_key_is_401(memory_api_factory: Any) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    async with memory_api_factory() as api:
        for headers in ({}, api.as_("tenant-a:revoked"), {"Authorization": "Bearer wvr_nope"}):
            r = await api.client.post(
                "/mcp", json=body, headers={**headers, "Accept": "application/json"}
            )
            assert r.status_code == 401, r.text
            assert r.headers["WWW-Authenticate"] == "Bearer"
            assert r.headers["content-type"] == "application/problem+json"
        assert isinstance(api.client, httpx.AsyncClient)


async def test_two_apps_in_one_process_each_answer_from_their_own_engine(
    memory_api_factory: Any,
) -> None:
    """The tools are built once per process and shared by every server: each call must
    still reach the engine (and the keys) of the app it was made to."""
    other = GREET.replace("name: greet", "name: other")
    async with memory_api_factory() as first, memory_api_factory() as second:
        assert first.engine is not second.engine
        first.engine.for_tenant("tenant-a").apply(GREET)
        second.engine.for_tenant("tenant-a").apply(other)
        second.engine.for_tenant("tenant-a").start(
            name="other", input={"who": "b"}, execution_id="o1"
        )
        async with (
            session(first, "tenant-a:operator") as a,
            session(second, "tenant-a:operator") as b,
        ):
            assert await call(a, "list_workflows") == (False, [{"name": "greet", "version": "1"}])
            assert await call(b, "list_workflows") == (False, [{"name": "other", "version": "1"}])
            failed, _ = await call(a, "get_execution", execution_id="o1")
            assert failed
            failed, view = await call(b, "get_execution", execution_id="o1")
            assert not failed and view["workflow"] == "other"


_FIRST_USE = """\
import asyncio, sys
import httpx
from wovyr.assemble import open_engine
from wovyr.platform.auth import Authenticator
from wovyr.server import create_app
from wovyr.settings import Settings

async def main() -> None:
    with open_engine(Settings(home=sys.argv[1], database_url="memory://")) as engine:
        app = create_app(engine, Settings(home=sys.argv[1]), start_background=False)
        print("built", "mcp" in sys.modules)
        _, token = Authenticator(engine.store, engine.clock).create_key("default", "operator")
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        headers = {"Accept": "application/json, text/event-stream"}
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://wovyr.test"
            ) as client,
        ):
            refused = await client.post("/mcp", json=body, headers=headers)
            print("refused", refused.status_code, "mcp" in sys.modules)
            headers["Authorization"] = f"Bearer {token}"
            answers = await asyncio.gather(
                *(client.post("/mcp", json=body, headers=headers) for _ in range(3))
            )
            print("answered", [int(a.status_code) for a in answers], "mcp" in sys.modules)
            print("tools", len(answers[0].json()["result"]["tools"]))
        print("stopped")

asyncio.run(main())
"""


def test_the_sdk_is_imported_by_the_first_mcp_request_not_by_the_app(tmp_path: Any) -> None:
    """Building the app does not import the `mcp` SDK (half a second of every server's
    start-up); the first request to /mcp does, once, and three requests arriving together
    are all answered by the one server built; the lifespan's end stops its sessions."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _FIRST_USE, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "built False",
        "refused 401 False",
        "answered [200, 200, 200] True",
        f"tools {len(TOOLS)}",
        "stopped",
    ]
