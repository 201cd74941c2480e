"""How a `tool:` activity fails, on every store: `with:` keys are bound to the handler's
signature before the first attempt (a misspelt or missing input fails at once, naming it),
and a handler's exception keeps its own traceback (capped) in the failure event."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from tests.tracebacks import frame_files, wovyr_frames

from wovyr.activities.base import ActivityContext, ActivityRegistry, NonRetryableError
from wovyr.activities.failures import MAX_TRACEBACK_CHARS, MAX_TRACEBACK_FRAMES
from wovyr.engine.engine import Engine
from wovyr.testing import drain


def wf(body: str) -> str:
    head = "apiVersion: wovyr/v1\nkind: Workflow\nmetadata: {name: t}\n"
    return head + textwrap.dedent(body)


def one_tool(tool: str, with_: str, retry: str = "") -> str:
    return wf(
        f"""
        activities:
          - id: step
            tool: {tool}
            with: {with_}
            {retry}
        """
    )


def failure(engine: Engine, execution_id: str) -> dict[str, Any]:
    """The error of the one ActivityFailed event (there must be exactly one)."""
    failed = [e for e in engine.history(execution_id) if e.type == "ActivityFailed"]
    assert len(failed) == 1, [e.type for e in engine.history(execution_id)]
    error: dict[str, Any] = failed[0].data["error"]
    return error


@pytest.fixture
def greeted(registry: ActivityRegistry) -> list[str]:
    calls: list[str] = []

    @registry.activity("greet")
    def greet(name: str, ctx: ActivityContext, greeting: str = "Hello") -> str:
        calls.append(name)
        return f"{greeting}, {name}"

    return calls


# --- item 5: bad input fails at once, clearly -------------------------------------------


def test_a_misspelt_input_fails_the_first_attempt_naming_it(
    engine: Engine, greeted: list[str]
) -> None:
    record = engine.start(one_tool("greet", "{nmae: Ada}"))
    drain(engine)
    view = engine.query(record.id)
    assert view.status == "failed"
    assert view.activities["step"]["attempt"] == 1 and greeted == []
    error = failure(engine, record.id)
    assert error["type"] == "InvalidActivityInput"
    message = error["message"]
    assert "'nmae'" in message and "did you mean 'name'?" in message
    assert "name, greeting (optional)" in message  # the parameters it expects; ctx is ours
    assert error["details"] == {
        "tool": "greet",
        "unknown": ["nmae"],
        "missing": ["name"],
        "parameters": ["name", "greeting"],
    }
    assert "traceback" not in error  # nothing of the user's ran
    assert [e.type for e in engine.history(record.id)].count("ActivityStarted") == 1


def test_a_missing_input_fails_at_once_and_a_right_one_runs(
    engine: Engine, greeted: list[str]
) -> None:
    record = engine.start(one_tool("greet", "{greeting: Hi}"))
    drain(engine)
    error = failure(engine, record.id)
    assert error["type"] == "InvalidActivityInput"
    assert "needs input 'name'" in error["message"] and greeted == []
    ok = engine.start(one_tool("greet", "{name: Ada, greeting: Hi}"))
    drain(engine)
    assert engine.query(ok.id).activities["step"]["output"] == "Hi, Ada"


def test_ctx_is_reserved_and_keyword_catch_alls_take_anything(
    engine: Engine, registry: ActivityRegistry, greeted: list[str]
) -> None:
    @registry.activity("collect")
    async def collect(first: int, **rest: Any) -> dict[str, Any]:
        return {"first": first, **rest}

    record = engine.start(one_tool("greet", "{name: Ada, ctx: 1}"))
    anything = engine.start(one_tool("collect", "{first: 1, second: 2, nmae: x}"))
    drain(engine)
    error = failure(engine, record.id)
    assert error["type"] == "InvalidActivityInput" and "'ctx'" in error["message"]
    assert engine.query(anything.id).activities["step"]["output"] == {
        "first": 1,
        "second": 2,
        "nmae": "x",
    }


# --- item 6: failures keep the handler's traceback --------------------------------------


def _parse_amount(text: str) -> int:
    raise ValueError(f"not an amount: {text!r}")


def test_a_handler_failure_keeps_its_own_frames_only(
    engine: Engine, registry: ActivityRegistry
) -> None:
    @registry.activity("parse")
    def parse(text: str) -> int:
        return _parse_amount(text)

    @registry.activity("parse_async")
    async def parse_async(text: str) -> int:
        raise NonRetryableError(f"refused {text}", type="Refused")

    once = "retry: {max_attempts: 1}"
    sync = engine.start(one_tool("parse", "{text: ten}", once))
    coro = engine.start(one_tool("parse_async", "{text: ten}"))
    drain(engine)
    error = failure(engine, sync.id)
    assert error["type"] == "ValueError" and error["message"] == "not an amount: 'ten'"
    trace = error["traceback"]
    assert trace.startswith("Traceback (most recent call last):\n")
    assert "in parse\n" in trace and "return _parse_amount(text)" in trace
    assert "in _parse_amount\n" in trace
    assert trace.rstrip().endswith("ValueError: not an amount: 'ten'")
    assert wovyr_frames(trace) == []  # no frame of the project's package
    assert set(frame_files(trace)) == {Path(__file__).resolve()}  # nor the event loop's
    assert engine.query(sync.id).error["error"]["traceback"] == trace  # the execution's too

    refused = failure(engine, coro.id)
    assert refused["type"] == "Refused"
    assert "in parse_async\n" in refused["traceback"]
    assert wovyr_frames(refused["traceback"]) == []


def _ping(n: int) -> int:
    if n == 0:
        raise RuntimeError("bottom")
    return _pong(n - 1)


def _pong(n: int) -> int:
    return _ping(n - 1)  # ping and pong alternate: Python prints every frame, none folded


def test_a_deep_or_long_traceback_is_capped(engine: Engine, registry: ActivityRegistry) -> None:
    @registry.activity("deep")
    def deep(n: int) -> int:
        return _ping(n)

    @registry.activity("loud")
    def loud(size: int) -> None:
        raise RuntimeError("x" * size)

    once = "retry: {max_attempts: 1}"
    deep_run = engine.start(one_tool("deep", "{n: 200}", once))
    loud_run = engine.start(one_tool("loud", "{size: 100000}", once))
    drain(engine)
    trace = failure(engine, deep_run.id)["traceback"]
    assert trace.count('  File "') == MAX_TRACEBACK_FRAMES  # the innermost ones
    assert "in deep\n" not in trace and trace.rstrip().endswith("RuntimeError: bottom")
    long_trace = failure(engine, loud_run.id)["traceback"]
    assert len(long_trace) <= MAX_TRACEBACK_CHARS
    assert long_trace.startswith("Traceback (most recent call last):\n")
    assert "in loud\n" in long_trace and "characters cut" in long_trace
    assert long_trace.endswith("x" * 100 + "\n")
