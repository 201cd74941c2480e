"""What one attempt is handed (`Dispatch`): built by the worker that runs it, from what the
attempt's kind declares it needs (`ActivityKind.needs`, `wovyr.activities.kinds`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from wovyr.activities.base import ActivityContext, ActivityRegistry
from wovyr.activities.kinds import ChildTools, Journal, StreamSink
from wovyr.activities.mcp import McpAccess
from wovyr.activities.memory import MemoryAccess
from wovyr.activities.policy import TRUSTED, SideEffectPolicy
from wovyr.activities.providers import ModelAccess
from wovyr.activities.sandbox import ShellSandbox

__all__ = ["Dispatch"]


@dataclass(frozen=True)
class Dispatch:
    """What an executor may use for one attempt (built by the worker that runs it): its
    context, deadline, the registered tools and its tenant's policy, and the services its
    kind declares (`ActivityKind.needs`), each None when not declared."""

    context: ActivityContext
    timeout: float | None
    tools: ActivityRegistry
    start_child: Callable[[], Awaitable[str]] | None = field(default=None, repr=False)
    policy: SideEffectPolicy = TRUSTED  # what side effects this attempt may have
    models: ModelAccess | None = None  # model providers, their keys, the response cache
    journal: Journal | None = None  # the steps of this activity recorded so far (`agent`)
    stream: StreamSink | None = None  # where a model call streams its text (`llm`, `agent`)
    child_tools: ChildTools | None = None  # registered workflows as tools (`agent`)
    mcp: McpAccess | None = None  # the tenant's MCP servers (need `mcp_servers`)
    memory: MemoryAccess | None = None  # the tenant's memory namespaces (`memory_namespaces`)
    sandbox: ShellSandbox | None = None  # what an isolated `shell` step does not see
