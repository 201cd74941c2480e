"""The `wovyr` pytest plugin (a `pytest11` entry point: installed with Wovyr, active in
every pytest run): fixtures to test workflows and agents.

- `clock`: a ManualClock at `wovyr.testing.EPOCH` (time moves only when the test moves
  it: `clock.advance(hours=2)`, or `drain(engine, skip_time=True)` to each timer);
- `model`: the scripted model server (`wovyr.testing.ScriptedLLM`, real HTTP on
  127.0.0.1) with an empty script: `model.script(text("hi"))`, `model.requests`;
- `mcp_server`: a fake MCP server (`wovyr.testing.FakeMCPServer`, the `mcp` extra) over
  stdio with the built-in tools: `@mcp_server.tool` adds one of the test module's
  functions, `mcp_server.register(engine, "name")`, `mcp_server.calls`;
- `activities`: an empty `ActivityRegistry` for the test's tools;
- `engine`: an engine on a fresh `memory://` store, the `clock`, the `activities`, and the
  provider `default` pointing at `model` (default model `scripted`); closed after the test.

A project's own fixture of the same name takes precedence. Nothing of Wovyr is imported
until a fixture is used.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from wovyr.activities.base import ActivityRegistry
    from wovyr.clock import ManualClock
    from wovyr.engine.engine import Engine
    from wovyr.testing.mcp_server import FakeMCPServer
    from wovyr.testing.model_server import ScriptedLLM

__all__ = ["activities", "clock", "engine", "mcp_server", "model"]


@pytest.fixture
def clock() -> ManualClock:
    from wovyr.clock import ManualClock
    from wovyr.testing.engines import EPOCH

    return ManualClock(EPOCH)


@pytest.fixture
def model() -> Iterator[ScriptedLLM]:
    from wovyr.testing.model_server import ScriptedLLM

    with ScriptedLLM() as server:
        yield server


@pytest.fixture
def mcp_server() -> Iterator[FakeMCPServer]:
    from wovyr.testing.mcp_server import FakeMCPServer

    with FakeMCPServer() as server:
        yield server


@pytest.fixture
def activities() -> ActivityRegistry:
    from wovyr.activities.base import ActivityRegistry

    return ActivityRegistry()


@pytest.fixture
def engine(
    clock: ManualClock, model: ScriptedLLM, activities: ActivityRegistry
) -> Iterator[Engine]:
    from wovyr.activities.providers import DEFAULT_PROVIDER, ProviderConfig, Providers
    from wovyr.testing.engines import memory_engine

    default = ProviderConfig(DEFAULT_PROVIDER, model.base_url, default_model="scripted")
    built = memory_engine(activities, clock=clock, providers=Providers({DEFAULT_PROVIDER: default}))
    try:
        yield built
    finally:
        built.close()
