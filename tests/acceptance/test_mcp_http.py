"""Acceptance: a real `wovyr serve` process serves Wovyr's MCP server at /mcp; the SDK's
client (`ClientSession` over streamable HTTP, on loopback) lists its tools, starts a
workflow applied over the API and reads its result (the server's worker runs it), with an
operator key; a viewer key reads but cannot start; the 401 without a key."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from tests.server.test_serve_process import Server

pytestmark = pytest.mark.slow

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


async def _call(mcp: ClientSession, tool: str, **arguments: Any) -> tuple[bool, Any]:
    result = await mcp.call_tool(tool, arguments)
    text = "".join(getattr(block, "text", "") for block in result.content)
    return result.is_error, (text if result.is_error else json.loads(text))


async def _drive(url: str, operator: str, viewer: str) -> dict[str, Any]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {viewer}"}) as client,
        streamable_http_client(url, http_client=client) as (read, write),
        ClientSession(read, write) as mcp,
    ):
        await mcp.initialize()
        refused, text = await _call(mcp, "start_workflow", workflow="greet", input={"who": "v"})
        assert refused and "operator needed" in text
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {operator}"}) as client,
        streamable_http_client(url, http_client=client) as (read, write),
        ClientSession(read, write) as mcp,
    ):
        await mcp.initialize()
        names = {t.name for t in (await mcp.list_tools()).tools}
        assert {"list_workflows", "start_workflow", "get_execution", "approve"} <= names
        failed, started = await _call(
            mcp, "start_workflow", workflow="greet", input={"who": "http"}, execution_id="h1"
        )
        assert not failed, started
        deadline = time.monotonic() + 60
        while True:
            failed, view = await _call(mcp, "get_execution", execution_id="h1")
            assert not failed, view
            if view["status"] != "running" or time.monotonic() > deadline:
                return dict(view)
            await anyio.sleep(0.1)


@pytest.mark.timeout(180)
def test_an_mcp_client_over_http_starts_a_workflow_and_reads_its_result(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    server = Server(home, {"WOVYR_DISPATCH_INTERVAL_SECONDS": "0.2"})
    server.start()
    try:
        admin = server.bootstrap_token()
        with httpx.Client(
            base_url=server.base, headers={"Authorization": f"Bearer {admin}"}, timeout=30
        ) as http:
            applied = http.post(
                "/api/v1/definitions",
                content=GREET,
                headers={"Content-Type": "application/yaml"},
            )
            assert applied.status_code == 201, applied.text
            keys = {}
            for role in ("operator", "viewer"):
                made = http.post("/api/v1/admin/keys", json={"role": role, "name": role})
                assert made.status_code == 201, made.text
                keys[role] = made.json()["token"]
            anonymous = httpx.post(f"{server.base}/mcp", json={}, timeout=30)
            assert anonymous.status_code == 401
        view = anyio.run(_drive, f"{server.base}/mcp", keys["operator"], keys["viewer"])
        assert view["status"] == "completed", view
        assert view["output"] == "hello http"
    finally:
        assert server.stop() == 0, server.output()
