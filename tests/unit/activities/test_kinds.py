"""The kinds table refuses a kind with a missing or inconsistent piece when it is
registered, never later at run time."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import Field

from wovyr.activities.builtin.tool import ToolStep
from wovyr.activities.dispatch import Dispatch
from wovyr.activities.kinds import KINDS, ActivityKind, KindTable
from wovyr.errors import ConfigError
from wovyr.fields import FrozenModel


class PingStep(FrozenModel):
    ping: str


async def run_ping(step: Any, rendered: Any, dispatch: Dispatch) -> Any:
    return rendered


def test_the_built_in_kinds_are_registered_in_their_documented_order() -> None:
    assert KINDS.names() == [
        "tool",
        "http",
        "shell",
        "set",
        "wait",
        "workflow",
        "llm",
        "agent",
        "mcp",
        "memory",
    ]
    assert KINDS.owner_of("with") == "tool"
    assert KINDS.owner_of("needs") is None
    every = {k.name: k for k in KINDS.kinds()}
    assert [n for n, k in every.items() if k.execute is None] == ["set", "wait"]
    assert [n for n, k in every.items() if not k.compensates] == ["wait", "workflow", "agent"]


def test_a_worker_kind_without_an_executor_is_refused() -> None:
    with pytest.raises(ConfigError, match="needs `execute`"):
        ActivityKind(name="ping", model=PingStep, spec=lambda s: s.ping, execute=None)


def test_a_decider_kind_with_an_executor_is_refused() -> None:
    with pytest.raises(ConfigError, match="needs `execute`"):
        ActivityKind(
            name="ping", model=PingStep, spec=lambda s: s.ping, execute=run_ping, settle="value"
        )


def test_a_model_without_the_selecting_key_is_refused() -> None:
    with pytest.raises(ConfigError, match="no field named"):
        ActivityKind(name="pong", model=PingStep, spec=lambda s: s, execute=run_ping)


class SetWith(FrozenModel):
    set: dict[str, Any]
    with_: dict[str, Any] = Field(default_factory=dict, alias="with")


def test_keys_belong_to_one_kind_and_names_to_one_registration() -> None:
    table = KindTable()
    table.register(ActivityKind(name="ping", model=PingStep, spec=lambda s: s, execute=run_ping))
    with pytest.raises(ConfigError, match="already registered"):
        table.register(
            ActivityKind(name="ping", model=PingStep, spec=lambda s: s.ping, execute=run_ping)
        )
    table.register(ActivityKind(name="tool", model=ToolStep, spec=lambda s: s, execute=run_ping))
    with pytest.raises(ConfigError, match="belong to another kind"):
        table.register(
            ActivityKind(name="set", model=SetWith, spec=lambda s: s, execute=None, settle="value")
        )
    assert table.names() == ["ping", "tool"]
    with pytest.raises(ConfigError, match="no activity kind 'nope'"):
        table.get("nope")
    table.unregister("ping")
    assert table.names() == ["tool"] and table.owner_of("ping") is None


def test_a_kind_needs_only_services_that_exist_and_may_narrow_them_per_attempt() -> None:
    with pytest.raises(ConfigError, match="no service is named engine"):
        ActivityKind(
            name="ping",
            model=PingStep,
            spec=lambda s: s.ping,
            execute=run_ping,
            needs=frozenset({"models", "engine"}),  # type: ignore[arg-type]
        )
    agent = KINDS.get("agent")
    assert "mcp_servers" not in agent.needs_of({"tools": ["search.web", "memory:notes"]})
    assert "mcp_servers" in agent.needs_of({"tools": ["mcp:files/read_file"]})
    assert KINDS.get("tool").needs_of({"x": 1}) == frozenset()
    assert KINDS.get("memory").needs == {"models", "memory_namespaces"}
