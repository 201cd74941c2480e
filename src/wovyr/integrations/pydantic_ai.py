"""A Pydantic AI agent run inside a code workflow, every model request and tool call a step.

```python
agent = Agent(OpenAIChatModel("gpt-5", provider=OpenAIProvider(api_key=...)), name="support")

@agent.tool_plain
def lookup(order_id: str) -> dict: ...

support = DurableAgent(agent)          # registers its activities (in the worker's registry)

@wovyr.workflow(name="support")
async def answer(ctx: wovyr.Context, question: str) -> str:
    result = await support.run(ctx, question)
    return result.output
```

The agent's own loop runs in the replayed workflow function, as Pydantic AI's durable
integrations (Temporal, DBOS, Prefect, Hatchet) run it in their workflow: a capability wraps
the model that serves each request in one whose `request` is `ctx.run` of the activity
`pydantic_ai.<name>.model_request` (the real request, in the worker, given the JSON message
history; it returns the JSON `ModelResponse`), and wraps the agent's function toolsets so a
call is `ctx.run` of `pydantic_ai.<name>.tool.<tool>` (the tool function, in the worker). A
replay gets every finished request and call back from the history, so a crash repeats none
of them. What the loop stamps on messages is replay-safe: the run's start time is recorded
(`ctx.now()`), advanced to each step's recorded end, and its run id is the execution's.

Not durable here: streaming (`run_stream`, `event_stream_handler`), MCP and other toolsets
that are not function toolsets (refused), token counting before a request, batch and
background model modes. The model's provider and its key live in the worker's process; the
history holds the messages, settings and responses, never the key.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from weakref import WeakKeyDictionary

from pydantic import TypeAdapter
from pydantic_ai import Agent, ModelRetry, RunContext
from pydantic_ai._utils import disable_threads, override_now_utc
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.durable_exec import (
    DurabilityEngineSpec,
    DurableRunContext,
    ToolsetCallToolParams,
    conversation_id_from_run_id,
    model_error_retry_after,
    revalidate_function_call,
)
from pydantic_ai.exceptions import ModelHTTPError, UserError
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelResponse
from pydantic_ai.models import Model, ModelRequestParameters, infer_model
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset, ToolsetTool
from pydantic_ai.toolsets.wrapper import WrapperToolset
from pydantic_core import to_jsonable_python

from wovyr.activities.base import ActivityError, ActivityRegistry, NonRetryableError
from wovyr.activities.base import default_registry as _default_registry
from wovyr.code.workflow import Context

__all__ = ["DurableAgent"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_\-]{0,63}$")
# the key Pydantic AI gives a capability without an `id`: random in every run
_SYNTHETIC_ID = re.compile(r"<([a-z0-9_]+):[0-9a-f]{6}>")
_LONGEST_WAIT = 600.0  # seconds: the longest Retry-After a model error makes a step wait
_STEP_OPTIONS = frozenset({"retry", "timeout", "concurrency", "rate_limit"})
_SPEC = DurabilityEngineSpec(
    engine_name="Wovyr", durable_unit_noun="step", durable_container_noun="workflow"
)
_RESPONSE: TypeAdapter[ModelResponse] = TypeAdapter(ModelResponse)
_PARAMETERS: TypeAdapter[ModelRequestParameters] = TypeAdapter(ModelRequestParameters)


@dataclass
class _Run:
    """The agent run in progress in this replay (a context variable: its tasks see it)."""

    ctx: Context
    durable: DurableAgent
    run_id: str


# the agent runs each replay of a workflow function has started, which number their run ids
_RUNS: WeakKeyDictionary[Context, int] = WeakKeyDictionary()
_RUN: ContextVar[_Run | None] = ContextVar("wovyr_pydantic_ai_run", default=None)
# the run's replay-safe clock: per task, so parallel tool calls each read their own step's end
_NOW: ContextVar[datetime] = ContextVar("wovyr_pydantic_ai_now")


def _now() -> datetime:
    return _NOW.get()


def _advance(ended: Any) -> None:
    if isinstance(ended, str):
        at = datetime.fromisoformat(ended)
        if at > _NOW.get():
            _NOW.set(at)


class DurableAgent:
    """A `pydantic_ai.Agent` whose runs in a code workflow are steps (see the module).

    `name` (default: the agent's) names its activities, registered in `registry` (default:
    the one `@wovyr.activity` fills); make it before the worker starts, after the agent's
    tools are declared. `models` are other models a run may select (`model=`, a capability):
    the agent's own model is always known. `model_step` and `tool_step` are the step
    options of its model requests and tool calls (`retry`, `timeout`, `concurrency`,
    `rate_limit`, as `ctx.run` takes them)."""

    def __init__(
        self,
        agent: Agent[Any, Any],
        *,
        name: str | None = None,
        registry: ActivityRegistry | None = None,
        models: Iterable[Model] = (),
        model_step: Mapping[str, Any] | None = None,
        tool_step: Mapping[str, Any] | None = None,
    ) -> None:
        name = name or agent.name
        if not name or not _NAME.match(name):
            raise ValueError(
                f"a durable agent needs a name of letters, digits, _ and - (got {name!r}): "
                "pass name= or give the Agent one"
            )
        for options in (model_step, tool_step):
            unknown = set(options or {}) - _STEP_OPTIONS
            if unknown:
                raise ValueError(
                    f"step options {sorted(unknown)} are not among {sorted(_STEP_OPTIONS)}"
                )
        self.agent = agent
        self.name = name
        self.model_activity = f"pydantic_ai.{name}.model_request"
        self._model_step = dict(model_step or {})
        self._tool_step = dict(tool_step or {})
        self._models = {_model_key(m): m for m in models}
        self._deps: TypeAdapter[Any] = TypeAdapter(agent.deps_type)
        self._capability = _Steps(self)
        # the agent's function tools, by name, with the toolset that holds each
        self._tools: dict[str, FunctionToolset[Any]] = {}
        for toolset in agent.toolsets:
            toolset.apply(self._collect)
        # build the messages' deferred schema here, once, not first in a replay's thread and
        # an activity's at the same time: CPython 3.11 keeps the AST constructor's depth per
        # interpreter, and two threads building ASTs at once have failed with "SystemError:
        # AST constructor recursion depth mismatch" (seen once in this module's tests)
        ModelMessagesTypeAdapter.validate_python([])
        registry = registry if registry is not None else _default_registry
        registry.register(self.model_activity, self._model_request)
        for tool in self._tools:
            registry.register(self.tool_activity(tool), self._tool_handler(tool))

    def _collect(self, toolset: AbstractToolset[Any]) -> None:
        if isinstance(toolset, FunctionToolset):
            for tool in toolset.tools:
                self._tools[tool] = toolset

    def tool_activity(self, tool: str) -> str:
        """The activity that runs the agent's tool `tool`."""
        return f"pydantic_ai.{self.name}.tool.{tool}"

    async def run(self, ctx: Context, user_prompt: Any = None, **kwargs: Any) -> Any:
        """`Agent.run(user_prompt, **kwargs)` inside the workflow function of `ctx`: its
        model requests and tool calls are steps of the execution. Returns the run's
        `AgentRunResult`."""
        if kwargs.get("event_stream_handler") is not None:
            raise UserError("a durable agent run does not stream: leave out event_stream_handler")
        runs = _RUNS.get(ctx, 0)
        _RUNS[ctx] = runs + 1
        run = _Run(ctx, self, f"{ctx.execution_id}:{self.name}:{runs}")
        start = ctx.now()  # recorded once: every replay stamps the same times
        token, clock = _RUN.set(run), _NOW.set(start)
        try:
            with override_now_utc(_now), disable_threads():
                capabilities = [*(kwargs.pop("capabilities", None) or ()), self._capability]
                return await self.agent.run(user_prompt, capabilities=capabilities, **kwargs)
        finally:
            _NOW.reset(clock)
            _RUN.reset(token)

    # --- in the workflow: what becomes a step ----------------------------------------------

    async def request(
        self,
        run: _Run,
        model: Model,
        messages: list[ModelMessage],
        settings: ModelSettings | None,
        parameters: ModelRequestParameters,
    ) -> ModelResponse:
        out = await run.ctx.run(
            self.model_activity,
            args={
                "model": _model_key(model),
                "messages": ModelMessagesTypeAdapter.dump_python(messages, mode="json"),
                "settings": _plain(settings),
                "parameters": _plain(_PARAMETERS.dump_python(parameters)),
            },
            **self._model_step,
        )
        _advance(out.get("ended"))
        return _RESPONSE.validate_python(out["response"])

    async def call(self, run: _Run, name: str, args: dict[str, Any], ctx: RunContext[Any]) -> Any:
        out = await run.ctx.run(
            self.tool_activity(name),
            args={
                "arguments": _plain(args),
                "context": _plain(DurableRunContext.serialize_run_context(ctx)),
                "deps": self._deps.dump_python(ctx.deps, mode="json"),
            },
            **self._tool_step,
        )
        _advance(out.get("ended"))
        if "retry" in out:
            raise ModelRetry(out["retry"])
        return out["return"]

    # --- in the worker: the activities -----------------------------------------------------

    def _model(self, key: str) -> Model:
        if key in self._models:
            return self._models[key]
        if self.agent.model is not None:
            default = infer_model(self.agent.model)
            self._models.setdefault(_model_key(default), default)
        if key in self._models:
            return self._models[key]
        raise NonRetryableError(
            f"the durable agent {self.name} has no model {key}: pass it in models=",
            type="UnknownModel",
        )

    async def _model_request(
        self,
        model: str,
        messages: list[Any],
        settings: dict[str, Any] | None,
        parameters: dict[str, Any],
    ) -> dict[str, Any]:
        served = self._model(model)
        try:
            response = await served.request(
                ModelMessagesTypeAdapter.validate_python(messages),
                settings,  # type: ignore[arg-type]  # a TypedDict: the mapping as sent
                _PARAMETERS.validate_python(parameters),
            )
        except ModelHTTPError as err:  # as Temporal's integration of the SDK sorts them
            raise ActivityError(
                str(err),
                type=f"ModelHTTPError{err.status_code}",
                retryable=err.status_code in (408, 409, 429) or err.status_code >= 500,
                retry_after=model_error_retry_after(err, maximum=_LONGEST_WAIT),
            ) from err
        return {
            "response": _RESPONSE.dump_python(response, mode="json"),
            "ended": datetime.now(UTC).isoformat(),
        }

    def _tool_handler(self, tool: str) -> Any:
        async def call_tool(
            arguments: dict[str, Any], context: dict[str, Any], deps: Any
        ) -> dict[str, Any]:
            toolset = self._tools[tool]
            ctx = DurableRunContext.restore(
                context, deps=self._deps.validate_python(deps), agent=self.agent, engine_spec=_SPEC
            )
            params = await revalidate_function_call(
                toolset,
                ToolsetCallToolParams(tool, tool_args=arguments, ctx=ctx, tool=None),
                engine_spec=_SPEC,
            )
            assert params.tool is not None
            try:
                value = await toolset.call_tool(tool, params.tool_args, params.ctx, params.tool)
                out = {"return": to_jsonable_python(value)}
            except ModelRetry as retry:  # the model is asked again: the step's answer
                out = {"retry": retry.message}
            return {**out, "ended": datetime.now(UTC).isoformat()}

        call_tool.__name__ = call_tool.__qualname__ = f"call_{tool}"
        return call_tool


class _Steps(AbstractCapability[Any]):
    """What makes a run durable: its run id, clock, model and function tools."""

    def __init__(self, durable: DurableAgent) -> None:
        super().__init__()
        self._durable = durable

    def get_default_run_id(self) -> str | None:
        run = _RUN.get()
        return None if run is None else run.run_id

    def get_default_conversation_id(self, run_id: str) -> str | None:
        return conversation_id_from_run_id(run_id) if _RUN.get() is not None else None

    def get_run_clock(self) -> Any:
        return _now if _RUN.get() is not None else None

    def get_wrapper_model(self, model: Model) -> Model | None:
        return _StepModel(model) if _RUN.get() is not None else None

    def get_wrapper_toolset(self, toolset: AbstractToolset[Any]) -> AbstractToolset[Any] | None:
        if _RUN.get() is None:
            return None

        def refuse(leaf: AbstractToolset[Any]) -> None:
            if not isinstance(leaf, FunctionToolset):
                raise UserError(
                    f"toolset {leaf.label} is not a function toolset: in a Wovyr workflow only "
                    "an agent's function tools run as steps"
                )

        toolset.apply(refuse)
        return _StepTools(toolset)


class _StepModel(WrapperModel):
    """The model of a request made in a workflow: the request is a step."""

    async def __aenter__(self) -> _StepModel:
        return self  # the real model is entered in the worker, never in a replay

    async def __aexit__(self, *exc: object) -> bool | None:
        return None

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        run = _RUN.get()
        if run is None:
            return await super().request(messages, model_settings, model_request_parameters)
        return await run.durable.request(
            run, self.wrapped, messages, model_settings, model_request_parameters
        )

    def request_stream(self, *args: Any, **kwargs: Any) -> Any:
        raise UserError("a durable agent run does not stream: use run(), not run_stream()")

    async def count_tokens(self, *args: Any, **kwargs: Any) -> Any:
        raise UserError("a durable agent run does not count tokens before a request")


class _StepTools(WrapperToolset[Any]):
    """The agent's toolset in a workflow: each function tool call is a step."""

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        run = _RUN.get()
        if run is None:
            return await super().call_tool(name, tool_args, ctx, tool)
        if name not in run.durable._tools:
            raise UserError(
                f"tool {name} was not among the agent's function tools when its DurableAgent "
                "was made: declare tools before wrapping the agent"
            )
        return await run.durable.call(run, name, tool_args, ctx)


def _model_key(model: Model) -> str:
    return f"{model.system}:{model.model_name}"


def _plain(value: Any) -> Any:
    """`value` as JSON that every replay in every process makes the same: sets become sorted
    lists (their order is the process's hash seed's), dataclasses mappings, and the keys
    Pydantic AI gives capabilities without an id (random each run) are numbered in the order
    they appear (as Pydantic AI's Hatchet integration makes them; they name nothing in a
    step, whose agent keys its own capabilities)."""
    numbered: dict[str, str] = {}

    def stable(key: str, item: Any) -> Any:
        if key == "capability_id" and isinstance(item, str):
            return renamed(item)
        if key.endswith("capability_ids") and isinstance(item, list):
            return [renamed(i) if isinstance(i, str) else i for i in item]
        return walk(item)

    def renamed(key: str) -> str:
        m = _SYNTHETIC_ID.fullmatch(key)
        if m is None:
            return key
        if key not in numbered:
            numbered[key] = f"<{m[1]}:{sum(1 for k in numbered if k.startswith(f'<{m[1]}:'))}>"
        return numbered[key]

    def walk(item: Any) -> Any:
        if isinstance(item, dict):
            return {k: stable(k, v) for k, v in item.items()}
        if isinstance(item, list):
            return [walk(v) for v in item]
        return item

    return walk(to_jsonable_python(_canonical(value)))


def _canonical(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((_canonical(v) for v in value), key=repr)
    return value
