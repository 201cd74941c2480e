"""An agent with two tools, written as a YAML step and as a workflow function's
`ctx.step({"agent": ...})`, against the scripted OpenAI-compatible server: the same answer,
the same model and tool calls recorded in the same order as steps of the execution, each
tool run once, and the provider's key nowhere in the store."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import wovyr
from wovyr.activities.base import ActivityRegistry
from wovyr.activities.providers import ProviderConfig, Providers
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.store.sqlite import SQLiteStore
from wovyr.testing import drain
from wovyr.testing.model_server import ScriptedLLM, text, tool_calls

KEY = "sk-canary-code-agent-5e1"
AGENT = {
    "model": "m1",
    "instructions": "Use the tools.",
    "input": "What is 2 + 3, and where is Paris?",
    "tools": ["math.add", "geo.lookup"],
}
YAML = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: helper-yaml}
activities:
  - id: think
    agent:
      model: m1
      instructions: Use the tools.
      input: What is 2 + 3, and where is Paris?
      tools: [math.add, geo.lookup]
output: "${{ activities.think.output.text }}"
"""
TURNS = [
    tool_calls(("math_add", {"a": 2, "b": 3}), ("geo_lookup", {"city": "Paris"})),
    text("2 + 3 = 5; Paris is in FR."),
]


@wovyr.workflow(name="helper-py")
async def helper(ctx: wovyr.Context) -> str:
    answer = await ctx.step({"agent": AGENT}, id="think")
    return str(answer["text"])


def tools(ran: list[str]) -> ActivityRegistry:
    registry = ActivityRegistry()

    def add(a: int, b: int) -> int:
        """Add two whole numbers."""
        ran.append("add")
        return a + b

    def lookup(city: str, country: str = "FR") -> dict[str, Any]:
        """Where a city is."""
        ran.append("lookup")
        return {"city": city, "country": country}

    registry.register("math.add", add)
    registry.register("geo.lookup", lookup)
    return registry


def test_an_agent_step_as_yaml_and_as_python_is_seen_the_same(tmp_path: Path) -> None:
    seen = []
    for name, definition in (("yaml", YAML), ("py", helper.definition())):
        ran: list[str] = []
        with ScriptedLLM(TURNS, pick="turn") as llm:
            provider = ProviderConfig("default", llm.base_url, api_key=KEY)
            engine = Engine(
                SQLiteStore(tmp_path / f"{name}.db"),
                clock=ManualClock(datetime(2030, 1, 1, tzinfo=UTC)),
                activities=tools(ran),
                providers=Providers({"default": provider}),
            )
            record = engine.start(definition, {})
            drain(engine)
            view = engine.query(record.id)
            steps = [
                (e.type, e.data.get("tool") or e.data.get("name"))
                for e in engine.history(record.id)
                if e.type in ("ModelCallCompleted", "ToolCallCompleted")
            ]
            seen.append((view.status, view.output, steps, sorted(ran), len(llm.completions)))
            engine.close()
    assert seen[0] == seen[1]
    status, output, steps, ran, requests = seen[1]
    assert (status, output) == ("completed", "2 + 3 = 5; Paris is in FR.")
    assert [t for t, _ in steps] == [
        "ModelCallCompleted",
        "ToolCallCompleted",
        "ToolCallCompleted",
        "ModelCallCompleted",
    ]
    assert ran == ["add", "lookup"] and requests == 2
    for path in tmp_path.iterdir():
        assert KEY.encode() not in path.read_bytes()
