"""An OpenAI Agents SDK run inside a code workflow, every model call and tool call a step.

```python
provider = OpenAIProvider(api_key=..., openai_client=AsyncOpenAI(max_retries=0))
triage = Agent(name="triage", model="gpt-5", tools=[lookup_order], handoffs=[refunds])
runner = DurableRunner("support", model_provider=provider, agents=[triage])

@wovyr.workflow(name="support")
async def support(ctx: wovyr.Context, question: str) -> str:
    result = await runner.run(ctx, triage, question)
    return str(result.final_output)
```

As Temporal's integration of the SDK does it (`temporalio.contrib.openai_agents`), the SDK's
runner loop runs in the replayed workflow function with a model provider whose models'
`get_response` is `ctx.run` of the activity `openai_agents.<name>.model_request` (the real
call, in the worker, with `model_provider`; its arguments are the instructions, the input
items, the settings and the descriptions of the tools, handoffs and output schema, and it
returns the JSON `ModelResponse`), and with each agent's function tools replaced by ones whose
invocation is `ctx.run` of `openai_agents.<name>.tool.<tool>` (the tool, in the worker). A
replay gets every finished call back from the history, so a crash repeats none of them.

Not supported here: streaming (`run_streamed`), sessions, MCP servers and hosted tools on an
agent, an agent whose `model` is a `Model` object (name it; the worker's provider makes it),
tracing inside the workflow (turned off: a replay would trace every call again). A tool sees
the run's `context` as the JSON it was given. The provider and its key live in the worker's
process; the history holds the conversation, never the key.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from typing import Any

from agents import (
    Agent,
    AgentOutputSchemaBase,
    FunctionTool,
    Handoff,
    Model,
    ModelProvider,
    ModelResponse,
    ModelSettings,
    ModelTracing,
    RunConfig,
    Runner,
    UserError,
)
from agents.tool import invoke_function_tool
from agents.tool_context import ToolContext
from openai import APIStatusError
from pydantic import TypeAdapter
from pydantic_core import to_jsonable_python

from wovyr.activities.base import ActivityError, ActivityRegistry
from wovyr.activities.base import default_registry as _default_registry
from wovyr.code.workflow import Context

__all__ = ["DurableRunner"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_\-]{0,63}$")
_STEP_OPTIONS = frozenset({"retry", "timeout", "concurrency", "rate_limit"})
_RESPONSE: TypeAdapter[ModelResponse] = TypeAdapter(ModelResponse)
_SETTINGS: TypeAdapter[ModelSettings] = TypeAdapter(ModelSettings)


class DurableRunner:
    """Runs OpenAI Agents SDK agents in a code workflow (see the module).

    `name` names its activities, registered in `registry` (default: the one
    `@wovyr.activity` fills) for the function tools of `agents` and of the agents they hand
    off to; make it before the worker starts. `model_provider` makes the models in the
    worker (give its client `max_retries=0`: the step's retry policy retries). `model_step`
    and `tool_step` are the step options of model calls and tool calls (`retry`, `timeout`,
    `concurrency`, `rate_limit`, as `ctx.run` takes them)."""

    def __init__(
        self,
        name: str,
        *,
        model_provider: ModelProvider,
        agents: Iterable[Agent[Any]] = (),
        registry: ActivityRegistry | None = None,
        model_step: Mapping[str, Any] | None = None,
        tool_step: Mapping[str, Any] | None = None,
    ) -> None:
        if not _NAME.match(name):
            raise ValueError(f"a durable runner's name is letters, digits, _ and - (got {name!r})")
        for options in (model_step, tool_step):
            unknown = set(options or {}) - _STEP_OPTIONS
            if unknown:
                raise ValueError(
                    f"step options {sorted(unknown)} are not among {sorted(_STEP_OPTIONS)}"
                )
        self.name = name
        self.model_activity = f"openai_agents.{name}.model_request"
        self._provider = model_provider
        self._model_step = dict(model_step or {})
        self._tool_step = dict(tool_step or {})
        self._registry = registry if registry is not None else _default_registry
        self._registry.register(self.model_activity, self._model_request)
        self._tools: dict[str, FunctionTool] = {}
        seen: set[int] = set()
        for agent in agents:
            self._register_tools(agent, seen)

    def tool_activity(self, tool: str) -> str:
        """The activity that runs the function tool `tool`."""
        return f"openai_agents.{self.name}.tool.{tool}"

    def _register_tools(self, agent: Agent[Any], seen: set[int]) -> None:
        if id(agent) in seen:
            return
        seen.add(id(agent))
        for tool in agent.tools:
            if not isinstance(tool, FunctionTool):
                continue  # refused when a run meets it
            known = self._tools.get(tool.name)
            if known is not None and known is not tool:
                raise ValueError(
                    f"two function tools are named {tool.name}: a durable runner's tools "
                    "need distinct names (their activities are named after them)"
                )
            self._tools[tool.name] = tool
            self._registry.register(self.tool_activity(tool.name), self._tool_handler(tool))
        for handoff in agent.handoffs:
            if isinstance(handoff, Agent):
                self._register_tools(handoff, seen)

    async def run(self, ctx: Context, agent: Agent[Any], input: Any, **kwargs: Any) -> Any:
        """`Runner.run(agent, input, **kwargs)` inside the workflow function of `ctx`: its
        model calls and tool calls are steps of the execution. Returns the `RunResult`."""
        if kwargs.get("session") is not None:
            raise UserError("a durable run keeps no session: leave out session")
        config = kwargs.pop("run_config", None) or RunConfig()
        if isinstance(config, dict):
            config = RunConfig(**config)
        if config.model is not None and not isinstance(config.model, str):
            raise UserError("a durable run names its model (a string in run_config.model)")
        config = dataclasses.replace(
            config, model_provider=_StepProvider(self, ctx), tracing_disabled=True
        )
        steps = _Converter(self, ctx).agent(agent)
        return await Runner.run(steps, input, run_config=config, **kwargs)

    # --- in the workflow: what becomes a step ----------------------------------------------

    async def get_response(
        self,
        ctx: Context,
        model: str | None,
        system_instructions: str | None,
        input: Any,
        model_settings: ModelSettings,
        tools: list[Any],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff[Any, Any]],
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
    ) -> ModelResponse:
        described = []
        for tool in tools:
            if not isinstance(tool, FunctionTool):
                raise UserError(
                    f"tool {getattr(tool, 'name', tool)!r} is not a function tool: a durable "
                    "run offers the model only function tools"
                )
            described.append(
                {
                    "name": tool.name,
                    "description": tool.description,
                    "params_json_schema": tool.params_json_schema,
                    "strict_json_schema": tool.strict_json_schema,
                }
            )
        schema = None
        if output_schema is not None:
            plain = output_schema.is_plain_text()
            schema = {
                "name": output_schema.name(),
                "plain_text": plain,
                "json_schema": None if plain else output_schema.json_schema(),
                "strict": output_schema.is_strict_json_schema(),
            }
        out = await ctx.run(
            self.model_activity,
            args={
                "model": model,
                "system_instructions": system_instructions,
                "input": to_jsonable_python(input),
                "model_settings": _SETTINGS.dump_python(model_settings, mode="json"),
                "tools": described,
                "output_schema": schema,
                "handoffs": [
                    {
                        "tool_name": h.tool_name,
                        "tool_description": h.tool_description,
                        "input_json_schema": h.input_json_schema,
                        "agent_name": h.agent_name,
                        "strict_json_schema": h.strict_json_schema,
                    }
                    for h in handoffs
                ],
                "previous_response_id": previous_response_id,
                "conversation_id": conversation_id,
                "prompt": to_jsonable_python(prompt),
            },
            **self._model_step,
        )
        return _RESPONSE.validate_python(out)

    # --- in the worker: the activities -----------------------------------------------------

    async def _model_request(
        self,
        model: str | None,
        system_instructions: str | None,
        input: Any,
        model_settings: dict[str, Any],
        tools: list[dict[str, Any]],
        output_schema: dict[str, Any] | None,
        handoffs: list[dict[str, Any]],
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
    ) -> Any:
        async def not_here(ctx: Any, args: str) -> Any:
            raise UserError("a tool is invoked in its own step, never by the model's")

        try:
            response = await self._provider.get_model(model).get_response(
                system_instructions,
                input,
                _SETTINGS.validate_python(model_settings),
                [FunctionTool(on_invoke_tool=not_here, **t) for t in tools],
                None if output_schema is None else _OutputSchema(**output_schema),
                [Handoff(on_invoke_handoff=not_here, **h) for h in handoffs],
                ModelTracing.DISABLED,
                previous_response_id=previous_response_id,
                conversation_id=conversation_id,
                prompt=prompt,
            )
        except APIStatusError as err:
            code = err.response.status_code
            wait = err.response.headers.get("retry-after")
            raise ActivityError(
                f"the model answered {code}: {err.message}",
                type=f"ModelHTTPError{code}",
                retryable=code in (408, 409, 429) or code >= 500,
                retry_after=float(wait) if wait and wait.replace(".", "", 1).isdigit() else None,
            ) from err
        return _RESPONSE.dump_python(response, mode="json")

    def _tool_handler(self, tool: FunctionTool) -> Any:
        async def call_tool(arguments: str, call_id: str, context: Any = None) -> Any:
            invoked = ToolContext(
                context=context, tool_name=tool.name, tool_call_id=call_id, tool_arguments=arguments
            )
            return to_jsonable_python(
                await invoke_function_tool(function_tool=tool, context=invoked, arguments=arguments)
            )

        call_tool.__name__ = call_tool.__qualname__ = f"call_{tool.name}"
        return call_tool


class _StepProvider(ModelProvider):
    """The models of a run in a workflow: each call is a step."""

    def __init__(self, runner: DurableRunner, ctx: Context) -> None:
        self._runner = runner
        self._ctx = ctx

    def get_model(self, model_name: str | None) -> Model:
        return _StepModel(self._runner, self._ctx, model_name)


class _StepModel(Model):
    def __init__(self, runner: DurableRunner, ctx: Context, name: str | None) -> None:
        self._runner = runner
        self._ctx = ctx
        self._name = name

    async def get_response(
        self,
        system_instructions: str | None,
        input: Any,
        model_settings: ModelSettings,
        tools: list[Any],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff[Any, Any]],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
    ) -> ModelResponse:
        return await self._runner.get_response(
            self._ctx,
            self._name,
            system_instructions,
            input,
            model_settings,
            tools,
            output_schema,
            handoffs,
            previous_response_id,
            conversation_id,
            prompt,
        )

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise UserError("a durable run does not stream: use run(), not run_streamed()")


class _Converter:
    """The agents of a run in a workflow: their function tools run as steps."""

    def __init__(self, runner: DurableRunner, ctx: Context) -> None:
        self._runner = runner
        self._ctx = ctx
        self._done: dict[int, Agent[Any]] = {}

    def agent(self, agent: Agent[Any]) -> Agent[Any]:
        known = self._done.get(id(agent))
        if known is not None:
            return known
        if agent.model is not None and not isinstance(agent.model, str):
            raise UserError(
                f"agent {agent.name} has a Model object: a durable run names its model, and "
                "the runner's model_provider makes it in the worker"
            )
        if agent.mcp_servers:
            raise UserError(f"agent {agent.name} has MCP servers: a durable run takes none")
        converted = dataclasses.replace(agent)
        self._done[id(agent)] = converted
        converted.tools = [self.tool(t) for t in agent.tools]
        converted.handoffs = [self.handoff(h) for h in agent.handoffs]
        return converted

    def handoff(self, handoff: Agent[Any] | Handoff[Any, Any]) -> Any:
        if isinstance(handoff, Agent):
            return self.agent(handoff)
        chosen = handoff.on_invoke_handoff

        async def invoke(context: Any, args: str) -> Agent[Any]:
            return self.agent(await chosen(context, args))

        return dataclasses.replace(handoff, on_invoke_handoff=invoke)

    def tool(self, tool: Any) -> Any:
        if not isinstance(tool, FunctionTool):
            raise UserError(
                f"tool {getattr(tool, 'name', tool)!r} is not a function tool: a durable run "
                "runs only function tools (each call a step)"
            )
        if self._runner._tools.get(tool.name) is not tool:
            raise UserError(
                f"tool {tool.name} is not one the DurableRunner registered: pass its agent "
                "in agents= when the runner is made"
            )
        runner, ctx = self._runner, self._ctx

        async def invoke(context: ToolContext[Any], arguments: str) -> Any:
            args: dict[str, Any] = {"arguments": arguments, "call_id": context.tool_call_id}
            if context.context is not None:
                args["context"] = to_jsonable_python(context.context)
            return await ctx.run(runner.tool_activity(tool.name), args=args, **runner._tool_step)

        # the step runs the tool with its own timeout and error handling, in the worker
        return dataclasses.replace(tool, on_invoke_tool=invoke, timeout_seconds=None)


class _OutputSchema(AgentOutputSchemaBase):
    """What a model call needs of an agent's output type (its schema, not its class)."""

    def __init__(
        self, name: str, plain_text: bool, json_schema: dict[str, Any] | None, strict: bool
    ) -> None:
        self._name = name
        self._plain_text = plain_text
        self._schema = json_schema
        self._strict = strict

    def is_plain_text(self) -> bool:
        return self._plain_text

    def name(self) -> str:
        return self._name

    def json_schema(self) -> dict[str, Any]:
        if self._schema is None:
            raise UserError("the output type is plain text: it has no JSON schema")
        return self._schema

    def is_strict_json_schema(self) -> bool:
        return self._strict

    def validate_json(self, json_str: str) -> Any:
        raise UserError("the workflow validates the output, not the model's step")
