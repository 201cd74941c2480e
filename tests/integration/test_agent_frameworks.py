"""Agents of other frameworks made durable in workflow functions (`wovyr.integrations`):
a Pydantic AI agent and an OpenAI Agents SDK agent, each with two tools, run against the
scripted OpenAI-compatible server through the framework's own OpenAI model class. Every model
request and tool call is a step of the execution; a worker killed mid-run resumes without
repeating a completed model request or tool call; the model's key never reaches the store."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from datetime import datetime, timedelta
from typing import Any

import pytest
from agents import Agent as SdkAgent
from agents import OpenAIProvider as SdkProvider
from agents import RunContextWrapper, function_tool
from httpx2 import Limits
from openai import AsyncOpenAI, DefaultAsyncHttpxClient
from pydantic_ai import Agent, ModelRetry, RunContext
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

import wovyr
from wovyr.activities.base import ActivityRegistry
from wovyr.engine.engine import Engine
from wovyr.events import EventType
from wovyr.integrations.openai_agents import DurableRunner
from wovyr.integrations.pydantic_ai import DurableAgent
from wovyr.testing import EPOCH, CrashPoint, crash, drain, memory_engine
from wovyr.testing.model_server import ScriptedLLM, status, text, tool_calls

KEY = "sk-canary-frameworks-5f3a9c"

# what the workflows below run: each test makes its agent (the model server's port is its
# own) and puts it here, where the functions, replayed in the worker, find it
AGENT: dict[str, Any] = {}

PARALLEL = [
    tool_calls(("weather", {"city": "Oslo"}), ("clock", {"zone": "CET"})),
    text("Oslo is at -3 C; it is 12:00 CET."),
]
ONE_AFTER_THE_OTHER = [  # a call id per call: the Agents SDK refuses one used twice
    tool_calls(("weather", {"city": "Oslo"}, "call_weather")),
    tool_calls(("clock", {"zone": "CET"}, "call_clock")),
    text("Cold, and noon."),
]


@wovyr.workflow(name="pydantic-ai-support")
async def pydantic_support(ctx: wovyr.Context, question: str) -> str:
    result = await AGENT["pydantic_ai"].run(ctx, question, deps="C")
    return str(result.output)


@wovyr.workflow(name="openai-agents-support")
async def sdk_support(ctx: wovyr.Context, question: str) -> str:
    runner, agent = AGENT["openai_agents"]
    result = await runner.run(ctx, agent, question, context={"unit": "C"})
    return str(result.final_output)


class Tools:
    """Two tools that count their effects; `clock` may first reach a crash point."""

    def __init__(self, point: CrashPoint | None = None) -> None:
        self.calls: list[tuple[str, str]] = []
        self.point = point

    def weather(self, city: str, unit: str) -> str:
        self.calls.append(("weather", city))
        return f"{city}: -3 {unit}"

    async def clock(self, zone: str) -> str:
        if self.point is not None:
            await self.point()  # the worker dies here the first time: before the effect
        self.calls.append(("clock", zone))
        return f"12:00 {zone}"


def client(llm: ScriptedLLM) -> AsyncOpenAI:
    """The OpenAI client both frameworks' model classes send through. It keeps no idle
    connection: `drain` runs each pass on an event loop of its own, and a connection pooled
    on one would be left open when it closes (a worker's one loop reuses them)."""
    return AsyncOpenAI(
        base_url=llm.base_url,
        api_key=KEY,
        max_retries=0,  # the step's retry policy retries, not the client
        http_client=DefaultAsyncHttpxClient(limits=Limits(max_keepalive_connections=0)),
    )


def pydantic_agent(
    llm: ScriptedLLM, tools: Tools, registry: ActivityRegistry, **steps: Any
) -> DurableAgent:
    model = OpenAIChatModel("gpt-test", provider=OpenAIProvider(openai_client=client(llm)))
    agent: Agent[str, str] = Agent(model, name="support", deps_type=str)

    @agent.tool
    def weather(ctx: RunContext[str], city: str) -> str:
        """The weather in a city."""
        return tools.weather(city, ctx.deps)

    @agent.tool_plain
    async def clock(zone: str) -> str:
        """The time in a zone."""
        return await tools.clock(zone)

    durable = DurableAgent(agent, registry=registry, **steps)
    AGENT["pydantic_ai"] = durable
    return durable


def sdk_agent(
    llm: ScriptedLLM, tools: Tools, registry: ActivityRegistry, **steps: Any
) -> DurableRunner:
    @function_tool
    def weather(wrapper: RunContextWrapper[Any], city: str) -> str:
        """The weather in a city."""
        return tools.weather(city, wrapper.context["unit"])

    @function_tool
    async def clock(zone: str) -> str:
        """The time in a zone."""
        return await tools.clock(zone)

    agent: SdkAgent[Any] = SdkAgent(name="support", model="gpt-test", tools=[weather, clock])
    provider = SdkProvider(openai_client=client(llm))
    runner = DurableRunner(
        "support", model_provider=provider, agents=[agent], registry=registry, **steps
    )
    AGENT["openai_agents"] = (runner, agent)
    return runner


FRAMEWORKS = {
    # framework: (make the agent, its workflow, the requests the model server got)
    "pydantic_ai": (pydantic_agent, pydantic_support, lambda llm: llm.completions),
    "openai_agents": (sdk_agent, sdk_support, lambda llm: llm.responses),
}


def steps(engine: Engine, execution: str) -> tuple[list[str], Counter[str]]:
    """The steps that completed, in order, and how many attempts of each started."""
    history = engine.history(execution)
    done = [e.data["activity"] for e in history if e.type == EventType.ACTIVITY_COMPLETED]
    started = Counter(e.data["activity"] for e in history if e.type == EventType.ACTIVITY_STARTED)
    return done, started


def store_holds(engine: Engine, secret: str) -> bool:
    """Whether any file of the engine's store (the database, its WAL) holds `secret`."""
    folder = engine.store.path.parent  # type: ignore[attr-defined]
    return any(secret.encode() in f.read_bytes() for f in folder.iterdir() if f.is_file())


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_an_agent_with_two_tools_runs_as_a_workflow_of_steps(framework: str) -> None:
    make, workflow, requests = FRAMEWORKS[framework]
    registry, tools = ActivityRegistry(), Tools()
    engine = memory_engine(registry)
    with ScriptedLLM(PARALLEL, pick="turn") as llm:
        make(llm, tools, registry)
        record = engine.start(workflow.definition(), {"question": "Weather and time in Oslo?"})
        drain(engine)
        sent = requests(llm)

    view = engine.query(record.id)
    assert view.status == "completed", view.error
    assert view.output == "Oslo is at -3 C; it is 12:00 CET."
    # each model request and each tool call is a step, run once; the two tools in parallel
    done, started = steps(engine, record.id)
    model_steps = [s for s in done if s.startswith("model_request_")]
    assert len(model_steps) == 2 and len(sent) == 2
    assert sorted(s.rsplit("_", 1)[0] for s in done if s not in model_steps) in (
        ["clock", "weather"],
        ["clock", "now", "weather"],  # Pydantic AI's run records its start time first
    )
    assert set(started.values()) == {1}
    assert sorted(tools.calls) == [("clock", "CET"), ("weather", "Oslo")]
    # the second request carried both tools' results (the run context reached the tool)
    second = json.dumps(sent[1].body)
    assert "Oslo: -3 C" in second and "12:00 CET" in second
    # the key went to the model and nowhere else
    assert sent[0].authorization == f"Bearer {KEY}"
    assert not store_holds(engine, KEY)
    assert KEY not in json.dumps([e.data for e in engine.history(record.id)], default=str)
    engine.close()


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_a_worker_killed_mid_run_resumes_without_repeating_a_call(framework: str) -> None:
    make, workflow, requests = FRAMEWORKS[framework]
    point = CrashPoint()
    registry, tools = ActivityRegistry(), Tools(point)
    engine = memory_engine(registry)
    with ScriptedLLM(ONE_AFTER_THE_OTHER, pick="turn") as llm:
        make(llm, tools, registry)
        record = engine.start(workflow.definition(), {"question": "Weather, then time?"})
        crash(engine, point)  # two model requests and `weather` done; dies inside `clock`
        assert point.hits == 1
        assert len(requests(llm)) == 2 and tools.calls == [("weather", "Oslo")]
        assert engine.query(record.id).status != "completed"

        drain(engine)  # a new worker recovers the execution after the lease
        sent = requests(llm)

    view = engine.query(record.id)
    assert view.status == "completed", view.error
    assert view.output == "Cold, and noon."
    # each model request was sent once and each tool's effect happened once
    assert len(sent) == 3
    assert tools.calls == [("weather", "Oslo"), ("clock", "CET")]
    done, started = steps(engine, record.id)
    assert [s.rsplit("_", 1)[0] for s in done if not s.startswith("now_")] == [
        "model_request",
        "weather",
        "model_request",
        "clock",
        "model_request",
    ]
    # only the step the worker died in started again
    assert {s: n for s, n in started.items() if n > 1} == {
        next(s for s in done if s.startswith("clock_")): 2
    }
    assert not store_holds(engine, KEY)
    engine.close()


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_a_429_is_retried_by_the_model_step_after_its_retry_after(framework: str) -> None:
    """The model answers 429 with Retry-After: the step's retry policy (not the client's)
    sends the request again once that wait has passed; the tools ran once."""
    make, workflow, requests = FRAMEWORKS[framework]
    registry, tools = ActivityRegistry(), Tools()
    engine = memory_engine(registry)
    script = [PARALLEL[0], status(429, retry_after="30"), PARALLEL[1]]
    with ScriptedLLM(script) as llm:  # in order: the second request is refused
        make(llm, tools, registry, model_step={"retry": {"max_attempts": 3}})
        record = engine.start(workflow.definition(), {"question": "Weather and time?"})
        drain(engine)
        assert engine.query(record.id).status == "waiting"  # for the retry, 30 s away
        drain(engine, skip_time=True)
        sent = requests(llm)

    view = engine.query(record.id)
    assert view.status == "completed", view.error
    assert view.output == "Oslo is at -3 C; it is 12:00 CET."
    assert len(sent) == 3 and sorted(tools.calls) == [("clock", "CET"), ("weather", "Oslo")]
    history = engine.history(record.id)
    failed = [e.data for e in history if e.type == EventType.ACTIVITY_FAILED]
    assert [f["error"]["type"] for f in failed] == ["ModelHTTPError429"]
    assert failed[0]["activity"].startswith("model_request_") and failed[0]["will_retry"]
    waited = datetime.fromisoformat(failed[0]["next_attempt_at"]) - EPOCH
    assert waited == timedelta(seconds=30)  # the server's Retry-After, not the back-off
    engine.close()


def test_a_pydantic_ai_tool_asks_the_model_to_retry() -> None:
    """`ModelRetry` raised by a tool in its step reaches the model as a retry prompt."""
    registry = ActivityRegistry()
    engine = memory_engine(registry)
    script = [
        tool_calls(("weather", {"city": "oslo"})),
        tool_calls(("weather", {"city": "Oslo"})),
        text("-3 C"),
    ]
    seen: list[str] = []
    with ScriptedLLM(script, pick="turn") as llm:
        model = OpenAIChatModel("gpt-test", provider=OpenAIProvider(openai_client=client(llm)))
        agent: Agent[str, str] = Agent(model, name="support", deps_type=str)

        @agent.tool_plain
        def weather(city: str) -> str:
            seen.append(city)
            if not city.istitle():
                raise ModelRetry("Write the city's name with a capital letter.")
            return f"{city}: -3 C"

        AGENT["pydantic_ai"] = DurableAgent(agent, registry=registry)
        record = engine.start(pydantic_support.definition(), {"question": "Oslo?"})
        drain(engine)
        second = json.dumps(llm.completions[1].body)

    view = engine.query(record.id)
    assert view.status == "completed", view.error
    assert view.output == "-3 C" and seen == ["oslo", "Oslo"]
    assert "capital letter" in second
    engine.close()


@wovyr.workflow(name="openai-agents-triage")
async def sdk_triage(ctx: wovyr.Context, question: str) -> str:
    runner, agent = AGENT["openai_agents"]
    result = await runner.run(ctx, agent, question)
    return f"{result.last_agent.name}: {result.final_output}"


def test_an_agents_sdk_handoff_runs_the_other_agents_tools_as_steps() -> None:
    """The runner registers the tools of the agents a handoff reaches; the handoff itself is
    the model's answer (no step of its own)."""
    registry = ActivityRegistry()
    engine = memory_engine(registry)
    refunded: list[str] = []

    @function_tool
    def refund(order: str) -> str:
        """Refund an order."""
        refunded.append(order)
        return f"refunded {order}"

    script = [
        tool_calls(("transfer_to_refunds", {}, "call_handoff")),
        tool_calls(("refund", {"order": "A-1"}, "call_refund")),
        text("Refunded."),
    ]
    with ScriptedLLM(script) as llm:
        refunds: SdkAgent[Any] = SdkAgent(name="refunds", model="gpt-test", tools=[refund])
        triage: SdkAgent[Any] = SdkAgent(name="triage", model="gpt-test", handoffs=[refunds])
        provider = SdkProvider(openai_client=client(llm))
        runner = DurableRunner(
            "triage", model_provider=provider, agents=[triage], registry=registry
        )
        AGENT["openai_agents"] = (runner, triage)
        record = engine.start(sdk_triage.definition(), {"question": "Refund A-1"})
        drain(engine)

    view = engine.query(record.id)
    assert view.status == "completed", view.error
    assert view.output == "refunds: Refunded."
    assert list(view.activities) == [
        "model_request_1",
        "model_request_2",
        "refund_3",
        "model_request_4",
    ]
    assert refunded == ["A-1"]
    engine.close()


def test_importing_wovyr_imports_no_agent_framework() -> None:
    code = (
        "import sys, wovyr, wovyr.integrations, wovyr.code.workflow, wovyr.testing\n"
        "wovyr.Engine, wovyr.workflow\n"
        "print(sorted(m for m in ('pydantic_ai', 'agents', 'openai') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
