"""MCP pieces that need no server: tool references in an agent's `tools:` (accepted in a
workflow and in an agent document, bad ones refused at parse), and which policies let a
stdio server's program run."""

from __future__ import annotations

import dataclasses
import sys

import pytest

from wovyr.activities.base import ActivityError
from wovyr.activities.mcp import check_stdio_allowed, parse_tool_ref
from wovyr.activities.policy import RESTRICTED, TRUSTED
from wovyr.definition import load_definition
from wovyr.definition.agent import load_agent
from wovyr.errors import DefinitionError

FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {{name: f}}
activities:
  - id: a
    agent: {{input: hi, tools: {tools}}}
"""


def test_tool_references() -> None:
    assert parse_tool_ref("mcp:files/read_file") == ("files", "read_file")
    assert parse_tool_ref("mcp:files") == ("files", None)


def test_agents_take_mcp_tools_beside_registered_ones() -> None:
    flow = load_definition(FLOW.format(tools='[math.add, "mcp:files/read_file", "mcp:gh"]'))
    assert flow.activities[0].step.agent.tools == ["math.add", "mcp:files/read_file", "mcp:gh"]
    document, _ = load_agent(
        "apiVersion: wovyr/v1\nkind: Agent\nmetadata: {name: x}\n"
        'spec: {tools: ["mcp:files", "mcp:gh/search"]}\n'
    )
    assert document.spec.tools == ["mcp:files", "mcp:gh/search"]


@pytest.mark.parametrize("bad", ['"mcp:"', '"mcp:/tool"', '"mcp:a/b/c"', '"mcp:a/b c"'])
def test_bad_mcp_references_are_refused_at_parse(bad: str) -> None:
    with pytest.raises(DefinitionError):
        load_definition(FLOW.format(tools=f"[{bad}]"))


def test_stdio_servers_run_only_where_programs_may() -> None:
    check_stdio_allowed(("anything",), TRUSTED)
    with pytest.raises(ActivityError) as caught:
        check_stdio_allowed(("python",), RESTRICTED)
    assert caught.value.type == "PolicyDenied" and "shell: false" in caught.value.message
    listed = dataclasses.replace(RESTRICTED, shell=True, shell_commands=("npx", sys.executable))
    check_stdio_allowed(("npx", "-y", "server"), listed)
    check_stdio_allowed((sys.executable, "server.py"), listed)
    with pytest.raises(ActivityError) as caught:
        check_stdio_allowed(("/bin/sh", "-c", "x"), listed)
    assert "shell_commands" in caught.value.message
