"""An agent run is not one box: the execution page shows each model call and tool call of
its loop as sub-steps, in a graph of their own (each turn's model call, the tool calls it
asked for, the next turn's call), as rows under the activity's Gantt bar, in a table with
tokens, cost and latency, and with their latency on the timeline; an `llm` step's model
calls in the same table, and what the run's calls and its tenant's today used. Over HTTP
(httpx.ASGITransport), a scripted model server (wovyr.testing.model_server) and a ManualClock that
the tools move, so latencies are exact."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fastapi import FastAPI

from wovyr.activities.base import ActivityRegistry
from wovyr.activities.policy import TRUSTED
from wovyr.activities.providers import ProviderConfig, Providers
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.platform.auth import Authenticator
from wovyr.settings import Settings
from wovyr.store.sqlite import SQLiteStore
from wovyr.testing import drain
from wovyr.testing.model_server import ScriptedLLM, text, tool_calls

from .conftest import UiClient

FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: helper}
activities:
  - id: prep
    set: {city: Paris}
  - id: think
    needs: [prep]
    agent:
      model: m1
      instructions: Use the tools.
      input: Where is Paris?
      tools: [geo.lookup, explode]
output: "${{ activities.think.output.text }}"
"""
SCRIPT = [
    tool_calls(("geo_lookup", {"city": "Paris"}), ("explode", {}), usage=(50, 10)),
    text("Paris is in FR.", usage=(100, 20)),
]


@pytest.fixture
def agent_run(tmp_path: Path) -> Iterator[tuple[UiClient, str]]:
    clock = ManualClock(datetime(2030, 1, 1, 9, tzinfo=UTC))
    registry = ActivityRegistry()

    def lookup(city: str) -> dict[str, str]:
        clock.advance(2)  # the lookup takes 2 s of the engine's time
        return {"city": city, "country": "FR"}

    def explode() -> None:  # runs beside the lookup: its latency is 0 or 2 s, by who ends first
        raise RuntimeError("the tool broke")

    registry.register("geo.lookup", lookup)
    registry.register("explode", explode)
    with ScriptedLLM(SCRIPT, pick="turn") as llm:
        provider = ProviderConfig("default", llm.base_url, price_in=1.0, price_out=2.0)
        engine = Engine(
            SQLiteStore(tmp_path / "w.db"),
            clock=clock,
            activities=registry,
            providers=Providers({"default": provider}),
            side_effects=TRUSTED,
        )
        record = engine.for_tenant("acme").start(FLOW)
        drain(engine)
        assert engine.for_tenant("acme").query(record.id).status == "completed"
        client = _viewer(engine, clock, tmp_path)
        try:
            yield client, record.id
        finally:
            client.close()
            engine.close()


def _viewer(engine: Engine, clock: ManualClock, tmp_path: Path) -> UiClient:
    """The UI over `engine`, signed in with a viewer key of tenant acme."""
    from wovyr.server.ui import mount_ui

    auth = Authenticator(engine.store, clock=clock)
    _, key = auth.create_key("acme", "viewer", "watcher")
    app = FastAPI()
    mount_ui(app, engine, Settings(home=tmp_path / "home"), auth)
    client = UiClient(app)
    client.sign_in(key)
    return client


def _node(svg: str, label: str) -> str:
    found = re.search(rf'<g class="node [^"]*" data-activity="{re.escape(label)}"[^>]*>', svg)
    assert found, f"no node {label!r}"
    return found.group(0)


def test_an_agent_runs_model_and_tool_calls_show_as_sub_steps(
    agent_run: tuple[UiClient, str],
) -> None:
    client, execution_id = agent_run
    page = client.get(f"/ui/executions/{execution_id}").text

    # the main graph's node says how many calls it made
    node = re.search(r'data-activity="think".*?</g>', page, re.S)
    assert node and "agent · 4 calls" in html.unescape(node.group(0))

    # a graph of its own: turn 1's model call, the two tool calls it asked for, turn 2's
    graph = re.search(r'<div class="agent-graph" data-agent="think">(.*?)</svg>', page, re.S)
    assert graph, "no agent graph"
    svg = html.unescape(graph.group(1))
    assert 'data-status="completed"' in _node(svg, "turn 1 · model")
    assert 'data-status="completed"' in _node(svg, "turn 1 · geo.lookup")
    assert 'data-status="failed"' in _node(svg, "turn 1 · explode")
    edges = set(re.findall(r'data-from="([^"]+)" data-to="([^"]+)"', svg))
    assert edges == {
        ("turn 1 · model", "turn 1 · geo.lookup"),
        ("turn 1 · model", "turn 1 · explode"),
        ("turn 1 · geo.lookup", "turn 2 · model"),
        ("turn 1 · explode", "turn 2 · model"),
    }
    assert "60 tok · $0.0001" in svg  # turn 1's tokens and cost on its node

    # the table: tokens in and out, cost, latency, the failure
    calls = {
        step: html.unescape(row)
        for step, row in re.findall(
            r'<tr data-step="([^"]+)" data-kind="\w+">(.*?)</tr>', page, re.S
        )
    }
    assert set(calls) == {
        "turn 1 · model",
        "turn 1 · geo.lookup",
        "turn 1 · explode",
        "turn 2 · model",
    }
    assert "50 / 10" in calls["turn 1 · model"] and "$0.0001" in calls["turn 1 · model"]
    assert '<td class="latency">2.0 s</td>' in calls["turn 1 · geo.lookup"]
    assert "RuntimeError: the tool broke" in calls["turn 1 · explode"]
    # turn 2's call started once the last tool's result was recorded (2 s after turn 1's)
    assert '<td class="latency">0 ms</td>' in calls["turn 2 · model"]
    assert "2 model calls, 2 tool calls · 180 tokens · $0.0002" in html.unescape(page)

    # rows under the activity's bar on the Gantt chart, right after it
    bars = re.findall(
        r'<g class="bar( sub)? [^"]*" data-activity="([^"]+)"(?: data-step="([^"]+)")?', page
    )
    order = [(sub, activity, step) for sub, activity, step in bars]
    think = order.index(("", "think", ""))
    assert [html.unescape(s) for _, _, s in order[think + 1 : think + 5]] == [
        "turn 1 · model",
        "turn 1 · geo.lookup",
        "turn 1 · explode",
        "turn 2 · model",
    ]
    # and the timeline says how long each took
    timeline = html.unescape(page.split('id="timeline"')[1])
    assert "think turn 1: tool geo.lookup returned in 2.0 s" in timeline
    assert (
        "think turn 1: model m1 asked for 2 tool calls (50 in, 10 out tokens, $0.0001)" in timeline
    )


MAPPED = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: asker}
activities:
  - id: ask
    for_each: "${{ [1, 2] }}"
    llm: {model: m1, prompt: "About ${{ item }}"}
"""


def test_an_llm_steps_model_calls_and_the_tenants_usage_today_show_on_its_page(
    tmp_path: Path,
) -> None:
    clock = ManualClock(datetime(2030, 1, 1, 9, tzinfo=UTC))
    with ScriptedLLM([text("a", usage=(100, 20))]) as llm:
        provider = ProviderConfig("default", llm.base_url, price_in=1.0, price_out=2.0)
        engine = Engine(
            SQLiteStore(tmp_path / "w.db"),
            clock=clock,
            activities=ActivityRegistry(),
            providers=Providers({"default": provider}),
            side_effects=TRUSTED,
        )
        acme = engine.for_tenant("acme")
        first = acme.start(MAPPED)
        acme.start(MAPPED)  # another run of the tenant's, the same day
        engine.for_tenant("globex").start(MAPPED)  # another tenant's: not acme's
        drain(engine)
        client = _viewer(engine, clock, tmp_path)
        try:
            page = html.unescape(client.get(f"/ui/executions/{first.id}").text)
        finally:
            client.close()
            engine.close()
    calls = dict(re.findall(r'<tr data-step="([^"]+)" data-kind="model">(.*?)</tr>', page, re.S))
    assert set(calls) == {"index 0 · model", "index 1 · model"}
    for row in calls.values():
        assert "100 / 20" in row and "$0.0001" in row  # (100 + 40) / 1e6
        assert '<td class="latency">0 ms</td>' in row  # by the engine's clock, not moved
    assert 'data-agent="ask"' in page and '<div class="agent-graph" data-agent="ask">' not in page
    usage = re.search(r'<dd id="model-usage">(.*?)</dd>', page, re.S)
    assert usage is not None
    # this run's two calls; the tenant's four today (globex's two are its own)
    assert (
        usage.group(1) == "2 model calls · 240 tokens · $0.0003; tenant today: 480 tokens · $0.0006"
    )
