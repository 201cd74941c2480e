"""Acceptance: `wovyr mcp serve` as a stdio subprocess, driven by the SDK's own client
(`stdio_client` + `ClientSession`): it lists Wovyr's tools, starts a registered workflow
and reads its result (its `--worker` runs it), as the tenant of the key in WOVYR_API_KEY;
a viewer key reads but cannot start; without a valid key the command refuses to serve."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from wovyr.engine.engine import Engine
from wovyr.platform.auth import Authenticator
from wovyr.store.sqlite import SQLiteStore

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
SERVE = ["-c", "import sys; from wovyr.cli.main import main; sys.exit(main())", "mcp", "serve"]


def _home(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A store with `greet` applied for tenant acme, and acme's operator and viewer keys."""
    home = tmp_path / "home"
    home.mkdir()
    engine = Engine(SQLiteStore(home / "wovyr.db"))
    engine.for_tenant("acme").apply(GREET)
    auth = Authenticator(engine.store)
    tokens = {role: auth.create_key("acme", role, role)[1] for role in ("operator", "viewer")}
    engine.close()
    return home, tokens


def _params(home: Path, token: str | None, *flags: str) -> StdioServerParameters:
    env = {"WOVYR_HOME": str(home), "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    if token is not None:
        env["WOVYR_API_KEY"] = token
    return StdioServerParameters(command=sys.executable, args=[*SERVE, *flags], env=env)


async def _call(mcp: ClientSession, tool: str, **arguments: Any) -> tuple[bool, Any]:
    result = await mcp.call_tool(tool, arguments)
    text = "".join(getattr(block, "text", "") for block in result.content)
    return result.is_error, (text if result.is_error else json.loads(text))


@pytest.mark.timeout(120)
def test_an_mcp_client_starts_a_workflow_and_reads_its_result(tmp_path: Path) -> None:
    home, tokens = _home(tmp_path)

    async def main() -> dict[str, Any]:
        params = _params(home, tokens["operator"], "--worker")
        async with stdio_client(params) as (read, write), ClientSession(read, write) as mcp:
            await mcp.initialize()
            names = {t.name for t in (await mcp.list_tools()).tools}
            assert {"list_workflows", "start_workflow", "get_execution", "cancel"} <= names
            failed, workflows = await _call(mcp, "list_workflows")
            assert not failed and workflows == [{"name": "greet", "version": "1"}]
            failed, started = await _call(
                mcp, "start_workflow", workflow="greet", input={"who": "stdio"}
            )
            assert not failed and started["created"], started
            deadline = time.monotonic() + 60
            while True:  # the serve process's own worker runs it
                failed, view = await _call(mcp, "get_execution", execution_id=started["id"])
                assert not failed, view
                if view["status"] != "running" or time.monotonic() > deadline:
                    return dict(view)
                await anyio.sleep(0.1)

    view = anyio.run(main)
    assert view["status"] == "completed", view
    assert view["output"] == "hello stdio"
    engine = Engine(SQLiteStore(home / "wovyr.db")).for_tenant("acme")
    assert [r.id for r in engine.list().items] == [view["id"]]  # in tenant acme
    engine.close()


@pytest.mark.timeout(120)
def test_a_viewer_key_cannot_start_over_stdio(tmp_path: Path) -> None:
    home, tokens = _home(tmp_path)

    async def main() -> tuple[bool, Any, bool, Any]:
        params = _params(home, tokens["viewer"])
        async with stdio_client(params) as (read, write), ClientSession(read, write) as mcp:
            await mcp.initialize()
            start = await _call(mcp, "start_workflow", workflow="greet", input={"who": "v"})
            listed = await _call(mcp, "list_workflows")
            return (*start, *listed)

    refused, text, listed_failed, workflows = anyio.run(main)
    assert refused and "role 'viewer' may not do this (operator needed)" in text
    assert not listed_failed and workflows == [{"name": "greet", "version": "1"}]
    engine = Engine(SQLiteStore(home / "wovyr.db")).for_tenant("acme")
    assert engine.list().items == []
    engine.close()


@pytest.mark.timeout(120)
def test_serve_refuses_without_a_valid_key(tmp_path: Path) -> None:
    home, _ = _home(tmp_path)
    env = {**os.environ, "WOVYR_HOME": str(home)}
    env.pop("WOVYR_API_KEY", None)
    for token in (None, "wvr_not-a-key"):
        if token is not None:
            env["WOVYR_API_KEY"] = token
        done = subprocess.run(
            [sys.executable, *SERVE],
            check=False,
            env=env,
            input="",
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode != 0
        assert "WOVYR_API_KEY" in done.stderr, done.stderr
        assert done.stdout == ""  # nothing that an MCP client would read as a message
