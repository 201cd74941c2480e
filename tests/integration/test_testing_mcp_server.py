"""The fake MCP server of the testing kit (`wovyr.testing.FakeMCPServer`): a test's own
module-level functions (sync and async) are the tools of a real MCP server, over stdio and
over HTTP, that an `mcp` step calls, each call recorded with its arguments (kept once the
server stops); what a tool raises is a tool error on the step; a function the server
process cannot import is refused where it is given; the `mcp_server` fixture of the plugin;
and without the `mcp` SDK the kit still imports, and only the server says which extra it
needs."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from typing import Any, Literal

import pytest

from wovyr.testing import FakeMCPServer, ToolCall, drain, memory_engine

CALL = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: lookup}
activities:
  - id: find
    mcp: {server: orders, tool: TOOL, arguments: {order_id: A-17}}
output: "${{ activities.find.output }}"
"""


def lookup(order_id: str) -> dict[str, str]:
    """Look an order up."""
    return {"order_id": order_id, "status": "shipped"}


async def cancel(order_id: str) -> str:
    """Cancel an order."""
    raise ValueError(f"order {order_id} has shipped")


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_tests_functions_are_the_tools_an_mcp_step_calls(
    transport: Literal["stdio", "http"],
) -> None:
    engine = memory_engine()
    with FakeMCPServer([lookup, cancel], transport=transport) as orders:
        orders.register(engine, "orders")
        engine.start(CALL.replace("TOOL", "lookup"), execution_id="e1")
        engine.start(CALL.replace("TOOL", "cancel"), execution_id="e2")
        drain(engine)
    calls = orders.calls  # kept when the server stops
    view = engine.query("e1")
    assert view.status == "completed", view.activities["find"]
    assert view.output["structured_content"] == {"order_id": "A-17", "status": "shipped"}
    failed = engine.query("e2").activities["find"]["error"]
    assert failed["type"] == "McpToolError"
    assert "order A-17 has shipped" in failed["message"]
    assert sorted((c.tool, c.arguments["order_id"]) for c in calls) == [
        ("cancel", "A-17"),
        ("lookup", "A-17"),
    ]
    assert all(isinstance(c, ToolCall) and c.pid > 0 for c in calls)
    engine.close()


def test_the_mcp_server_fixture_takes_the_tests_tools(mcp_server: FakeMCPServer) -> None:
    engine = memory_engine()
    mcp_server.tool(lookup)
    mcp_server.register(engine, "orders")
    engine.start(CALL.replace("TOOL", "lookup"), execution_id="e1")
    engine.start(CALL.replace("TOOL", "add").replace("{order_id: A-17}", "{a: 2, b: 3}"))
    drain(engine)
    assert engine.query("e1").output["structured_content"]["status"] == "shipped"
    made = {c.tool: c.arguments for c in mcp_server.calls}
    assert made == {"lookup": {"order_id": "A-17"}, "add": {"a": 2, "b": 3}}
    assert len(mcp_server.calls) == 2
    engine.close()


def _nested() -> Callable[..., Any]:
    def inner() -> str:
        return "x"

    return inner


@pytest.mark.parametrize("tool", [lambda: "x", _nested()], ids=["lambda", "nested"])
def test_a_function_the_server_cannot_import_is_refused_where_given(
    tool: Callable[..., Any],
) -> None:
    with pytest.raises(ValueError, match="module-level function of an importable module"):
        FakeMCPServer([tool])


def test_without_the_mcp_sdk_the_server_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)  # as if not installed
    with pytest.raises(ImportError, match=r"pip install 'wovyr\[mcp\]'"):
        FakeMCPServer()


def test_the_kit_and_its_plugin_do_not_import_the_mcp_sdk() -> None:
    code = (
        "import sys\n"
        "import wovyr.testing, wovyr.testing.pytest_plugin\n"
        "from wovyr.testing import FakeMCPServer, drain, memory_engine\n"
        "print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith('mcp.')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"
