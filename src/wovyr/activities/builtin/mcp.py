"""The `mcp` kind: one call of a tool of one of the tenant's MCP servers.

    - id: lookup
      mcp:
        server: files                  # registered: wovyr mcp add files --command "..."
        tool: read_file
        arguments: {path: "${{ inputs.path }}"}
      timeout: 30s

The call is the attempt: it is recorded when it ends (`ActivityCompleted`), and a worker
killed mid-call makes the next owner record a new attempt before the call is made again.
The server's tool error (`isError`) fails the attempt as `McpToolError` (retried per the
activity's `retry`); an unknown server, or one the tenant's side-effect policy refuses
(a stdio server where programs may not run, an http server at a refused address), fails it
without a retry. Header secrets of an http server are resolved in the worker at the call.

Output: `{text, content, structured_content?, is_error: false}` (`text`: the text blocks
joined; `content`: every block as the server sent it).
"""

from __future__ import annotations

from typing import Any

from wovyr.activities.base import ActivityError, NonRetryableError
from wovyr.activities.dispatch import Dispatch
from wovyr.activities.kinds import ActivityKind, register_kind
from wovyr.activities.mcp import call_tool
from wovyr.kinds.steps import MCP, McpSpec, McpStep

__all__ = ["KIND", "McpSpec", "McpStep"]


async def _execute(step: McpStep, rendered: Any, dispatch: Dispatch) -> Any:
    try:
        spec = McpSpec.model_validate(rendered)
    except ValueError as exc:
        raise NonRetryableError(f"invalid mcp input: {exc}", type="InvalidInput") from None
    if dispatch.mcp is None:
        raise NonRetryableError("this worker cannot reach MCP servers", type="UnknownMcpServer")
    output = await call_tool(
        dispatch.mcp, spec.server, spec.tool, spec.arguments, dispatch.policy, dispatch.timeout
    )
    if output["is_error"]:
        raise ActivityError(
            f"MCP tool {spec.server}/{spec.tool} failed: {output['text'][:2000]}",
            type="McpToolError",
            details={"content": output["content"]},
        )
    return output


KIND = register_kind(
    ActivityKind.of(
        MCP,
        execute=_execute,
        side_effects=True,  # a stdio server is a process; an http one goes through egress
        needs=frozenset({"mcp_servers"}),
    )
)
