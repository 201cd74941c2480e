"""The `agent` kind: a tool-calling loop whose every model call and tool call is a durable
step of the execution.

    - id: research
      agent:
        provider: default
        model: gpt-4o-mini
        instructions: You answer with sources.
        input: "${{ inputs.question }}"
        attachments: [{type: image, url: "https://example.com/chart.png"}]  # content parts
        tools: [search.web, pages.fetch, "mcp:files/read_file", "mcp:github"]
        max_turns: 8
        budget: {tokens: 50000, cost: 0.50}
      timeout: 10m                           # the whole loop (an attempt)

One turn is one model call (offered the allowed tools, with the JSON Schema of each
derived from its signature) and then the tool calls it asked for, run concurrently. A
tool `mcp:SERVER/TOOL` is a tool of one of the tenant's MCP servers (`mcp:SERVER`: every
tool the server lists), offered with the input schema the server lists for it (`tools/list`
when the attempt starts) and called through `wovyr.activities.mcp` under the tenant's
side-effect policy. Each
model call is recorded as `ModelCallCompleted` and each tool call as `ToolCallCompleted`
in the execution's log, in a commit of its own, as soon as it ends (`Dispatch.journal`).
A later attempt of the activity (after a retry, or after its worker was killed) replays
the recorded steps and carries on from the first step not recorded: a completed model call
or tool call is never made again; one in flight at a crash is made again.

A tool that raises, a tool not in `tools`, or arguments that do not fit the tool's
signature are sent to the model as that call's result (an error it can act on), never a
crash. The loop fails, not retried, with `MaxTurnsExceeded` when the model still asks for
tools after `max_turns` turns, and with `BudgetExceeded` at the turn whose model call took
the run past `budget.tokens` or `budget.cost` - or, with `budget.on_exhausted: approval`,
pauses there (an approval wait of the activity, `reason: budget`) until a person approves
with a grant of more tokens or cost (`approve --grant-tokens N`, API `grant: {tokens,
cost}`; an approval without a grant extends each limit by its first size) or denies, which
stops the run with `BudgetExceeded`. `approval_timeout` bounds every approval wait of the
loop: at its fire (a durable timer) a tool call counts as denied (the model is told,
`ApprovalTimeout`) and a budget pause as stopped. A model call's provider errors fail the
attempt as the `llm` kind's do (429 and 5xx retried per the activity's `retry`, honouring
`Retry-After`; the next attempt resumes the loop).

A tool `memory:NAMESPACE` gives the model four tools over that memory namespace of the
tenant (`wovyr.activities.memory_tools`): `remember` (key, text, value), `recall` (key),
`search` (query, top_k) and `forget` (key); texts are embedded by `embedding` (provider and
model). A write is recorded under the tool call's own key (`<execution>/<activity>/t<turn>/
<call id>`), so a call made again after a crash writes nothing twice.

With `stream: true` every model call is streamed and its text journaled as it arrives (each
turn a generation of the attempt: see the `llm` kind), for `GET .../stream` and
`wovyr workflows watch`.

Output: `{text, turns, tool_calls: [{turn, id, tool, arguments, result, error?}], usage:
{input_tokens, output_tokens}, cost, model, finish_reason}`.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
from typing import Any

from wovyr.activities.base import ActivityRegistry, NonRetryableError, call_handler
from wovyr.activities.builtin.llm import call_model, model_for
from wovyr.activities.dispatch import Dispatch
from wovyr.activities.kinds import (
    ActivityKind,
    AwaitApproval,
    AwaitChildren,
    Journal,
    Need,
    StepProblem,
    WorkflowTool,
    register_kind,
)
from wovyr.activities.mcp import (
    MCP_TOOL_PREFIX,
    McpSessions,
    McpTool,
    call_tool,
    list_tools,
    parse_tool_ref,
)
from wovyr.activities.memory import EmbeddingSpec
from wovyr.activities.memory_tools import (
    MEMORY_TOOL_PREFIX,
    memory_call,
    memory_functions,
)
from wovyr.activities.providers import ModelAccess, with_options
from wovyr.activities.tool_schema import (
    InvalidToolArguments,
    call_arguments,
    function_name,
    tool_signature,
)
from wovyr.errors import InputError, NotFound
from wovyr.events import ModelCallCompleted, ToolCallCompleted, or_absent
from wovyr.kinds.steps import (
    AGENT,
    TOOL_PATTERN,
    WORKFLOW_TOOL,
    AgentBudget,
    AgentSpec,
    AgentStep,
    ToolName,
)

__all__ = ["KIND", "TOOL_PATTERN", "AgentBudget", "AgentSpec", "AgentStep", "ToolName"]

MAX_RESULT_CHARS = 16_000  # of one tool result sent to the model (and recorded)


@dataclasses.dataclass
class _Run:
    """The loop's running totals."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = 0.0
    calls: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    def add(self, usage: dict[str, int], cost: float | None) -> None:
        self.input_tokens += int(usage.get("input_tokens", 0))
        self.output_tokens += int(usage.get("output_tokens", 0))
        self.cost = None if cost is None or self.cost is None else self.cost + cost

    @property
    def usage(self) -> dict[str, int]:
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens}


async def _execute(step: AgentStep, rendered: Any, dispatch: Dispatch) -> Any:
    """The loop (see the module docstring); an `AwaitApproval` when a call waits for one.
    An attempt that names MCP tools keeps one session per server open for the loop."""

    try:
        spec = AgentSpec.model_validate(rendered)
    except ValueError as exc:
        raise NonRetryableError(f"invalid agent input: {exc}", type="InvalidInput") from None
    if not any(t.startswith(MCP_TOOL_PREFIX) for t in spec.tools):
        return await _loop(spec, dispatch)
    if dispatch.mcp is None:
        raise NonRetryableError("this worker cannot reach MCP servers", type="UnknownMcpServer")
    async with McpSessions(dispatch.mcp, dispatch.policy, dispatch.timeout) as sessions:
        kept = dataclasses.replace(dispatch.mcp, sessions=sessions)
        return await _loop(spec, dataclasses.replace(dispatch, mcp=kept))


async def _loop(spec: AgentSpec, dispatch: Dispatch) -> Any:
    import asyncio  # by the first run, not by importing the kind (a read loads every kind)

    if dispatch.models is None or dispatch.journal is None:
        raise NonRetryableError("this worker cannot run agents", type="UnknownProvider")
    access, journal = dispatch.models, dispatch.journal
    model = model_for(access, spec.provider, spec.model)
    provider = access.providers.get(spec.provider)
    if spec.budget.cost is not None and provider.cost(0, 0, model) is None:
        raise NonRetryableError(
            f"budget.cost needs prices for provider {spec.provider!r} "
            "(WOVYR_LLM_PRICE_IN and WOVYR_LLM_PRICE_OUT for `default`)",
            type="InvalidInput",
        )
    workflows = await asyncio.to_thread(_workflow_tools, spec.tools, dispatch)
    offered, names = _offered_tools(spec.tools, dispatch.tools, workflows)
    if any(t.startswith(MCP_TOOL_PREFIX) for t in spec.tools):
        await _offer_mcp_tools(spec.tools, dispatch, offered, names)
    for ref, function in memory_functions(spec.tools):
        name = function_name(ref.replace("/", "_"), set(names))
        names[name] = ref
        offered.append({"type": "function", "function": {**function, "name": name}})
    models = {s["turn"]: s for s in journal.steps if s["step"] == "model"}
    tools = {(s["turn"], s["call_id"]): s for s in journal.steps if s["step"] == "tool"}
    decided = {
        (s["turn"], s["call_id"]): s
        for s in journal.steps
        if s["step"] == "approval" and s.get("reason") != "budget"
    }
    grants = [s for s in journal.steps if s["step"] == "approval" and s.get("reason") == "budget"]
    messages: list[dict[str, Any]] = []
    if spec.instructions:
        messages.append({"role": "system", "content": spec.instructions})
    task = spec.input if isinstance(spec.input, str) else json.dumps(spec.input)
    if spec.attachments:
        parts = [p.model_dump(mode="json", exclude_none=True) for p in spec.attachments]
        messages.append({"role": "user", "content": [{"type": "text", "text": task}, *parts]})
    else:
        messages.append({"role": "user", "content": task})
    run = _Run()
    turn = 0
    while True:
        turn += 1
        if turn > spec.max_turns:
            raise NonRetryableError(
                f"the agent reached max_turns ({spec.max_turns}) and the model still asks "
                "for tools",
                type="MaxTurnsExceeded",
                details=_details(run, turn - 1),
            )
        made = models.get(turn)
        if made is None:
            made = await _model_call(
                spec, model, messages, offered, turn, access, dispatch, journal
            )
        message = made["message"]
        run.add(made["usage"], made["cost"])
        messages.append(message)
        paused = _check_budget(spec, run, turn, grants)
        if paused is not None:
            return paused
        calls = message.get("tool_calls") or []
        if not calls:
            return {
                "text": message.get("content"),
                "turns": turn,
                "tool_calls": run.calls,
                "usage": run.usage,
                "cost": run.cost,
                "model": made["model"],
                "finish_reason": made["finish_reason"],
            }
        waiting = _first_unapproved(
            calls, turn, names, spec.require_approval, tools, decided, spec.approval_timeout
        )
        ready = [c for c in calls if not _needs_decision(c, turn, names, spec, tools, decided)]
        results = await asyncio.gather(
            *(
                _tool_call(
                    call, turn, names, tools, dispatch, journal, spec.tools, decided, spec.embedding
                )
                for call in ready
            )
        )
        if waiting is not None:  # the calls that need no decision ran (and are recorded)
            return AwaitApproval(waiting)
        children = {str(r["call_id"]): str(r["pending"]) for r in results if "pending" in r}
        if children:  # their ends join the journal; then this attempt runs again
            return AwaitChildren(turn, children)
        for call, result in zip(ready, results, strict=True):
            run.calls.append({k: v for k, v in result.items() if k not in ("step", "activity")})
            messages.append(
                {"role": "tool", "tool_call_id": call["id"], "content": _content(result)}
            )


async def _model_call(
    spec: AgentSpec,
    model: str,
    messages: list[dict[str, Any]],
    offered: list[dict[str, Any]],
    turn: int,
    access: ModelAccess,
    dispatch: Dispatch,
    journal: Journal,
) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "messages": messages}
    if offered:
        body["tools"] = offered
    if spec.temperature is not None:
        body["temperature"] = spec.temperature
    if spec.max_tokens is not None:
        body["max_tokens"] = spec.max_tokens
    if spec.stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    body = with_options(body, spec.options, access.providers.get(spec.provider).kind)
    result = await call_model(
        access,
        spec.provider,
        body,
        timeout=dispatch.timeout,
        policy=dispatch.policy,
        stream=dispatch.stream,
        turn=turn,
        journaled=True,
    )
    provider = access.providers.get(spec.provider)
    call = result.record(provider)
    usage = {"input_tokens": result.input_tokens, "output_tokens": result.output_tokens}
    if result.cached_tokens:
        usage["cached_tokens"] = result.cached_tokens
    event = ModelCallCompleted(
        activity=dispatch.context.activity_id,
        turn=turn,
        attempt=dispatch.context.attempt,
        message=result.message,
        usage=usage,
        cost=call["cost"],
        model=result.model,
        finish_reason=result.finish_reason,
        provider=provider.name,
        latency=call["latency"],
    )
    await journal.record(event)
    return {k: v for k, v in event.to_data().items() if k != "activity"}


def _budget(spec: AgentSpec, grants: list[dict[str, Any]]) -> tuple[int | None, float | None]:
    """The run's budget now: `budget` plus what people granted (an approval without a
    grant extends each limit by its first size)."""
    tokens, cost = spec.budget.tokens, spec.budget.cost
    for decision in grants:
        if not decision.get("approved"):
            continue
        grant = decision.get("grant") or {
            "tokens": spec.budget.tokens,
            "cost": spec.budget.cost,
        }
        if tokens is not None and grant.get("tokens"):
            tokens += int(grant["tokens"])
        if cost is not None and grant.get("cost"):
            cost += float(grant["cost"])
    return tokens, cost


def _check_budget(
    spec: AgentSpec, run: _Run, turn: int, grants: list[dict[str, Any]]
) -> AwaitApproval | None:
    """Nothing while the run is within its budget; past it, `BudgetExceeded` (or, with
    `on_exhausted: approval`, a pause until a person grants more or stops the run)."""
    tokens = run.input_tokens + run.output_tokens
    limit_tokens, limit_cost = _budget(spec, grants)
    over = []
    if limit_tokens is not None and tokens > limit_tokens:
        over.append(f"{tokens} tokens > budget.tokens {limit_tokens}")
    if limit_cost is not None and run.cost is not None and run.cost > limit_cost:
        over.append(f"cost {run.cost:g} > budget.cost {limit_cost:g}")
    if not over:
        return None
    message = f"the agent exceeded its budget at turn {turn}: {'; '.join(over)}"
    if spec.budget.on_exhausted == "approval":
        stopped = next((d for d in grants if not d.get("approved")), None)
        if stopped is None:
            asked: dict[str, Any] = {
                "reason": "budget",
                "turn": turn,
                "exceeded": "; ".join(over),
                "usage": run.usage,
                "cost": run.cost,
                "budget": {"tokens": limit_tokens, "cost": limit_cost},
            }
            if spec.approval_timeout is not None:
                asked["timeout"] = spec.approval_timeout
            return AwaitApproval(asked)
        if stopped.get("timed_out"):
            message += "; no one granted more before the approval timeout"
        else:
            message += f"; {stopped.get('by') or 'a person'} stopped the run"
            if stopped.get("comment"):
                message += f": {stopped['comment']}"
    raise NonRetryableError(message, type="BudgetExceeded", details=_details(run, turn))


def _details(run: _Run, turns: int) -> dict[str, Any]:
    return {"turns": turns, "usage": run.usage, "cost": run.cost, "tool_calls": len(run.calls)}


def _workflow_tools(allowed: list[str], dispatch: Dispatch) -> dict[str, WorkflowTool]:
    """The registered workflows among `allowed` (`workflow:NAME`), by tool name; a
    workflow that is not registered fails the run (`UnknownWorkflow`, not retried)."""
    wanted = [t for t in allowed if t.startswith(WORKFLOW_TOOL)]
    if not wanted:
        return {}
    if dispatch.child_tools is None:
        raise NonRetryableError("this worker cannot run workflow tools", type="UnknownWorkflow")
    out = {}
    for tool in wanted:
        try:
            out[tool] = dispatch.child_tools.describe(tool.removeprefix(WORKFLOW_TOOL))
        except NotFound as exc:
            raise NonRetryableError(
                f"tool {tool!r}: {exc.message} (apply it: `wovyr apply`)",
                type="UnknownWorkflow",
            ) from None
    return out


def _offered_tools(
    allowed: list[str], registry: ActivityRegistry, workflows: dict[str, WorkflowTool]
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The `tools` entries offered to the model, and function name -> registered name."""
    offered: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    for tool in allowed:
        found = workflows.get(tool)
        if found is not None:
            name = function_name(tool, set(names))
            names[name] = tool
            function = {
                "name": name,
                "description": found.description,
                "parameters": found.parameters,
            }
            offered.append({"type": "function", "function": function})
            continue
        if tool not in registry:
            continue  # not offered; a call to it is answered with an error
        name = function_name(tool, set(names))
        names[name] = tool
        offered.append(tool_signature(tool, registry.get(tool)).function(name))
    return offered, names


async def _offer_mcp_tools(
    allowed: list[str], dispatch: Dispatch, offered: list[dict[str, Any]], names: dict[str, str]
) -> None:
    """Add the MCP tools `allowed` names to `offered` and `names` (each server listed once,
    in the order of `allowed`). A tool a server does not list is not offered (a call to it
    is answered with an error)."""
    if dispatch.mcp is None:
        raise NonRetryableError("this worker cannot reach MCP servers", type="UnknownMcpServer")
    wanted: dict[str, list[str | None]] = {}
    for entry in allowed:
        if entry.startswith(MCP_TOOL_PREFIX):
            server, tool = parse_tool_ref(entry)
            wanted.setdefault(server, []).append(tool)
    for server, tools in wanted.items():
        listed = await list_tools(dispatch.mcp, server, dispatch.policy, dispatch.timeout)
        every = None in tools
        for found in listed:
            if (every or found.name in tools) and found.ref not in names.values():
                name = function_name(f"{server}_{found.name}", set(names))
                names[name] = found.ref
                offered.append(_mcp_function(found, name))


def _mcp_function(tool: McpTool, name: str) -> dict[str, Any]:
    schema = dict(tool.input_schema)
    schema.pop("title", None)
    schema.setdefault("type", "object")
    description = tool.description or f"{tool.name} (MCP server {tool.server})"
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": schema},
    }


async def _mcp_call(
    tool: str, text: Any, dispatch: Dispatch
) -> tuple[Any, Any, dict[str, Any] | None]:
    """(arguments, result, error) of one call of MCP tool `tool` (`mcp:SERVER/TOOL`)."""
    arguments, refused = call_arguments(text)
    if refused is not None:
        return arguments, None, refused
    assert dispatch.mcp is not None  # offered only when there is access
    server, name = parse_tool_ref(tool)
    output = await call_tool(
        dispatch.mcp, server, str(name), arguments, dispatch.policy, dispatch.timeout
    )
    value = output.get("structured_content", output["text"])
    if output["is_error"]:
        return arguments, None, {"type": "McpToolError", "message": output["text"][:2000]}
    return arguments, value, None


def _tool_of(call: dict[str, Any], names: dict[str, str]) -> str:
    name = str((call.get("function") or {}).get("name"))
    return names.get(name, name)


def _needs_decision(
    call: dict[str, Any],
    turn: int,
    names: dict[str, str],
    spec: AgentSpec,
    recorded: dict[tuple[int, str], dict[str, Any]],
    decided: dict[tuple[int, str], dict[str, Any]],
) -> bool:
    """A call of a tool in `require_approval`, neither run nor decided yet."""
    key = (turn, str(call.get("id")))
    return (
        _tool_of(call, names) in spec.require_approval
        and _tool_of(call, names) in names.values()
        and key not in recorded
        and key not in decided
    )


def _first_unapproved(
    calls: list[dict[str, Any]],
    turn: int,
    names: dict[str, str],
    require: list[str],
    recorded: dict[tuple[int, str], dict[str, Any]],
    decided: dict[tuple[int, str], dict[str, Any]],
    timeout: float | None,
) -> dict[str, Any] | None:
    """What to ask a person about: the first call of this turn that waits for a decision
    (one at a time: each is its own approval of the activity)."""
    for call in calls:
        key = (turn, str(call.get("id")))
        tool = _tool_of(call, names)
        if tool in require and tool in names.values() and key not in recorded | decided.keys():
            asked: dict[str, Any] = {
                "turn": turn,
                "call_id": key[1],
                "tool": tool,
                "arguments": str((call.get("function") or {}).get("arguments") or ""),
            }
            if timeout is not None:
                asked["timeout"] = timeout
            return asked
    return None


async def _tool_call(
    call: dict[str, Any],
    turn: int,
    names: dict[str, str],
    recorded: dict[tuple[int, str], dict[str, Any]],
    dispatch: Dispatch,
    journal: Journal,
    allowed: list[str],
    decided: dict[tuple[int, str], dict[str, Any]],
    embedding: EmbeddingSpec | None = None,
) -> dict[str, Any]:
    call_id = str(call.get("id"))
    found = recorded.get((turn, call_id))
    if found is not None:
        return found
    function = call.get("function") or {}
    name = str(function.get("name"))
    tool = names.get(name, name)
    text = function.get("arguments")
    arguments: Any = text
    error: dict[str, Any] | None = None
    result: Any = None
    decision = decided.get((turn, call_id))
    if decision is not None and decision.get("timed_out"):
        error = {
            "type": "ApprovalTimeout",
            "message": "no one approved this call before the approval timeout; it was not made",
        }
    elif decision is not None and not decision.get("approved"):
        by = decision.get("by") or "a person"
        comment = decision.get("comment")
        error = {
            "type": "ApprovalDenied",
            "message": f"{by} denied this call" + (f": {comment}" if comment else ""),
        }
    elif tool not in names.values():
        close = difflib.get_close_matches(name, list(names), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        error = {
            "type": "ToolNotAllowed",
            "message": f"there is no tool {name!r}{hint}; tools: {', '.join(names) or 'none'}",
        }
        if tool in allowed:
            error = {"type": "ToolNotRegistered", "message": f"tool {tool!r} is not loaded"}
    elif tool.startswith(WORKFLOW_TOOL):
        started = await _start_child(tool, text, turn, call_id, dispatch)
        if "pending" in started:
            return {"turn": turn, "call_id": call_id, "tool": tool, **started}
        arguments, error = started.get("arguments", text), started["error"]
    elif tool.startswith(MCP_TOOL_PREFIX):
        arguments, result, error = await _mcp_call(tool, text, dispatch)
    elif tool.startswith(MEMORY_TOOL_PREFIX):  # written once per call: the id is the call's
        write_id = f"{dispatch.context.activity_key}/t{turn}/{call_id}"
        arguments, result, error = await memory_call(tool, text, dispatch, embedding, write_id)
    else:
        handler = dispatch.tools.get(tool)
        try:
            kwargs = tool_signature(tool, handler).arguments(text)
            arguments = _jsonable(kwargs)
        except InvalidToolArguments as exc:
            error = {"type": "InvalidArguments", "message": str(exc)}
        else:
            ctx = dataclasses.replace(
                dispatch.context,
                idempotency_key=f"{dispatch.context.activity_key}/t{turn}/{call_id}",
            )
            try:
                result = _jsonable(await call_handler(handler, kwargs, ctx))
            except Exception as exc:  # the model sees the error; the loop goes on
                error = {"type": type(exc).__name__, "message": str(exc)[:2000]}
    event = ToolCallCompleted(
        activity=dispatch.context.activity_id,
        turn=turn,
        call_id=call_id,
        tool=tool,
        arguments=arguments,
        result=result,
        error=or_absent(error),
    )
    await journal.record(event)
    return {k: v for k, v in event.to_data().items() if k != "activity"}


async def _start_child(
    tool: str, text: Any, turn: int, call_id: str, dispatch: Dispatch
) -> dict[str, Any]:
    """Start (or find) the child execution of a workflow tool's call: `{pending: id}`, or
    `{error}` (arguments that are not a JSON object, or do not fit the workflow's inputs:
    told to the model, nothing started)."""
    assert dispatch.child_tools is not None  # checked when the tools were offered
    try:
        arguments = json.loads(text) if isinstance(text, str) and text.strip() else {}
    except ValueError as exc:
        return {"error": {"type": "InvalidArguments", "message": f"not valid JSON: {exc}"}}
    if not isinstance(arguments, dict):
        return {"error": {"type": "InvalidArguments", "message": "arguments must be an object"}}
    call = {"turn": turn, "call_id": call_id, "tool": tool, "arguments": arguments}
    try:
        child = await dispatch.child_tools.start(tool.removeprefix(WORKFLOW_TOOL), arguments, call)
    except InputError as exc:
        return {
            "arguments": arguments,
            "error": {"type": "InvalidArguments", "message": str(exc)[:2000]},
        }
    return {"pending": child, "arguments": arguments}


def _jsonable(value: Any) -> Any:
    """`value` as JSON data (pydantic models dumped; anything else by its text)."""
    return json.loads(json.dumps(value, default=_default))


def _default(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    return str(value)


def _content(result: dict[str, Any]) -> str:
    """What the model is sent back for one tool call."""
    if "error" in result:
        error = result["error"]
        return f"error: {error.get('type')}: {error.get('message')}"
    value = result.get("result")
    text = value if isinstance(value, str) else json.dumps(value)
    return text[:MAX_RESULT_CHARS]


def _preflight(step: AgentStep, tools: ActivityRegistry) -> list[StepProblem]:
    """A tool in `tools` that no handler is registered as."""
    problems = []
    for i, tool in enumerate(step.agent.tools):
        if tool.startswith(WORKFLOW_TOOL):
            continue  # a registered workflow: looked up when the run starts
        if tool.startswith(MCP_TOOL_PREFIX):
            continue  # a server's tools are known when it is asked, at dispatch
        if tool.startswith(MEMORY_TOOL_PREFIX):
            continue  # built in
        if tool not in tools:
            close = difflib.get_close_matches(tool, tools.names(), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            hint += f"registered: {', '.join(tools.names()) or 'none'}"
            message = f"no activity handler is registered as {tool!r}"
            problems.append(StepProblem(("agent", "tools", str(i)), message, hint))
    return problems


_NEEDS: frozenset[Need] = frozenset(
    {"models", "journal", "stream", "child_tools", "memory_namespaces", "mcp_servers"}
)


def _needs_for(rendered: Any) -> frozenset[Need]:
    """An attempt is handed the tenant's MCP servers only when its tools name one
    (reading them is a store read and a decryption of their secrets)."""
    tools = rendered.get("tools") if isinstance(rendered, dict) else None
    if isinstance(tools, list) and any(
        isinstance(t, str) and t.startswith(MCP_TOOL_PREFIX) for t in tools
    ):
        return _NEEDS
    return _NEEDS - {"mcp_servers"}


KIND = register_kind(
    ActivityKind.of(
        AGENT,
        execute=_execute,
        preflight=_preflight,
        side_effects=True,  # the provider's address is checked at dispatch, like `http`'s
        needs=_NEEDS,
        needs_for=_needs_for,
    )
)
