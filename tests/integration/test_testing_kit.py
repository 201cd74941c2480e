"""The testing kit users get (`wovyr.testing`): the scripted model in process and over
HTTP, scripts replaced on a running model, a recorded transcript of a 5-turn agent with
tool calls replayed identically (and a drifted run refused with the first difference), a
replay served from a process of its own, time skipped to each timer, and a worker killed
in the middle of a step and recovered."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from wovyr.activities.base import ActivityContext, ActivityRegistry
from wovyr.activities.providers import ProviderConfig, Providers
from wovyr.engine.engine import Engine
from wovyr.testing import (
    EPOCH,
    CrashPoint,
    ScriptedLLM,
    ScriptedModel,
    Transcript,
    crash,
    drain,
    memory_engine,
    status,
    text,
    tool_calls,
)

AGENT = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: sums}
activities:
  - id: work
    agent:
      model: m1
      instructions: Add, and note each sum.
      input: Add 2 and 3, then 1.
      tools: [math.add, notes.write]
      max_turns: 6
output: "${{ activities.work.output }}"
"""
SCRIPT = [
    tool_calls(("math_add", {"a": 2, "b": 3})),
    tool_calls(("notes_write", {"text": "5"})),
    tool_calls(("math_add", {"a": 5, "b": 1})),
    tool_calls(("notes_write", {"text": "6"})),
    text("The sum is 6."),
]
STEPS = ("ModelCallCompleted", "ToolCallCompleted")


def _tools(notes: list[str], offset: int = 0, point: CrashPoint | None = None) -> ActivityRegistry:
    registry = ActivityRegistry()

    async def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b + offset

    async def write(ctx: ActivityContext, text: str) -> str:
        """Write a note."""
        notes.append(ctx.idempotency_key)
        if point is not None:
            await point()
        return "noted"

    registry.register("math.add", add)
    registry.register("notes.write", write)
    return registry


def _engine(llm: ScriptedLLM, registry: ActivityRegistry) -> Engine:
    provider = ProviderConfig("default", llm.base_url)
    return memory_engine(registry, providers=Providers({"default": provider}))


def _steps(engine: Engine) -> list[dict[str, Any]]:
    return [e.data for e in engine.history("e1") if e.type in STEPS]


def test_the_in_process_model_answers_without_sockets() -> None:
    model = ScriptedModel([tool_calls(("lookup", {"q": "x"})), text("done")], pick="turn")
    ask = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    first = model.respond("/v1/chat/completions", {}, ask)
    assert first.status == 200
    call = first.json()["choices"][0]["message"]["tool_calls"][0]
    assert call["function"] == {"name": "lookup", "arguments": '{"q": "x"}'}
    follow = {**ask, "messages": [*ask["messages"], first.json()["choices"][0]["message"]]}
    assert model.respond("/v1/chat/completions", {}, follow).json()["choices"][0]["message"] == {
        "role": "assistant",
        "content": "done",
    }
    again = model.respond("/v1/chat/completions", {}, ask)  # the same turn: the same answer
    assert again.json() == first.json()
    model.script(status(429, retry_after="7"), pick="order")
    limited = model.respond("/v1/chat/completions", {}, ask)
    assert (limited.status, dict(limited.headers)) == (429, {"Retry-After": "7"})
    assert ScriptedModel().respond("/v1/chat/completions", {}, ask).status == 500  # no script
    refused = model.respond("/v1/messages", {}, {"model": "c", "max_tokens": 5, "messages": []})
    assert refused.status == 400
    assert refused.json()["error"]["message"] == "anthropic-version header is required"
    assert len(model.requests) == 5


def test_a_recorded_transcript_of_a_5_turn_agent_replays_identically(tmp_path: Path) -> None:
    notes: list[str] = []
    with ScriptedLLM(SCRIPT, pick="turn") as llm:
        engine = _engine(llm, _tools(notes))
        engine.start(AGENT, execution_id="e1")
        drain(engine)
        recorded_view, recorded_steps = engine.query("e1"), _steps(engine)
        sent = [r.body for r in llm.completions]
        llm.transcript().save(tmp_path / "sums.json")
        engine.close()
    assert recorded_view.status == "completed"
    assert recorded_view.output["turns"] == 5
    assert len(recorded_view.output["tool_calls"]) == 4

    transcript = Transcript.load(tmp_path / "sums.json")
    assert len(transcript) == 5
    replayed_notes: list[str] = []
    with ScriptedLLM(replay=transcript) as llm:
        engine = _engine(llm, _tools(replayed_notes))
        engine.start(AGENT, execution_id="e1")
        drain(engine)
        view, steps = engine.query("e1"), _steps(engine)
        assert [r.body for r in llm.completions] == sent
        engine.close()
    assert view.status == "completed"
    assert view.output == recorded_view.output
    assert steps == recorded_steps
    assert replayed_notes == notes


def test_a_run_that_drifts_from_its_transcript_fails_naming_the_difference() -> None:
    with ScriptedLLM(SCRIPT, pick="turn") as llm:
        engine = _engine(llm, _tools([]))
        engine.start(AGENT, execution_id="e1")
        drain(engine)
        transcript = llm.transcript()
        engine.close()
    with ScriptedLLM(replay=transcript) as llm:
        engine = _engine(llm, _tools([], offset=1))  # math.add now answers 6, not 5
        engine.start(AGENT, execution_id="e1")
        drain(engine)
        view = engine.query("e1")
        engine.close()
    assert view.status == "failed"
    error = view.activities["work"]["error"]
    assert error["type"] == "ProviderBadRequest"
    assert "no recorded exchange matches this request" in error["message"]
    assert "exchange 1, differs at messages[3].content" in error["message"]


def test_a_replay_survives_a_crash_in_the_middle_of_a_tool_call() -> None:
    with ScriptedLLM(SCRIPT, pick="turn") as llm:
        engine = _engine(llm, _tools([]))
        engine.start(AGENT, execution_id="e1")
        drain(engine)
        transcript, expected = llm.transcript(), engine.query("e1").output
        engine.close()
    notes: list[str] = []
    point = CrashPoint()
    with ScriptedLLM(replay=transcript) as llm:
        engine = _engine(llm, _tools(notes, point=point))
        engine.start(AGENT, execution_id="e1")
        crash(engine, point)  # inside the first notes.write (turn 2)
        assert len(llm.completions) == 2
        drain(engine)
        view = engine.query("e1")
        calls = len(llm.completions)
        engine.close()
    assert view.status == "completed"
    assert view.output == expected
    assert calls == 5  # no model call made twice: turn 2's was recorded before the crash
    assert point.hits == 1
    assert notes[0] == notes[1] == "e1/work/t2/call_0"  # the same key on the run again
    assert len(notes) == 3


def test_a_crash_point_nothing_reaches_is_an_assertion() -> None:
    engine = memory_engine()
    with pytest.raises(AssertionError, match="no step reached the crash point"):
        crash(engine, CrashPoint())
    engine.close()


def test_skip_time_runs_a_month_long_wait_at_once() -> None:
    wait = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: remind}
activities:
  - id: month
    wait: {timer: {after: 30d}}
  - id: later
    needs: [month]
    wait: {timer: {after: 2h}}
output: done
"""
    engine = memory_engine()
    engine.start(wait, execution_id="e1")
    drain(engine)
    assert engine.query("e1").status == "waiting"
    drain(engine, skip_time=True)
    assert engine.query("e1").status == "completed"
    assert (engine.clock.now() - EPOCH).total_seconds() == 30 * 86_400 + 2 * 3600
    engine.close()


def test_the_model_fixture_is_the_plugin_s(model: ScriptedLLM) -> None:
    model.script(text("from the plugin"))
    answer = httpx.post(
        f"{model.base_url}/chat/completions", json={"model": "m", "messages": []}, timeout=10
    )
    assert answer.json()["choices"][0]["message"]["content"] == "from the plugin"
    assert [r.path for r in model.requests] == ["/v1/chat/completions"]


def test_a_transcript_is_served_from_a_process_of_its_own(tmp_path: Path) -> None:
    model = ScriptedModel([text("recorded answer")])
    ask = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    model.respond("/v1/chat/completions", {}, ask)
    model.transcript().save(tmp_path / "t.json")
    with subprocess.Popen(
        [sys.executable, "-m", "wovyr.testing.model_server", str(tmp_path / "t.json")],
        stdout=subprocess.PIPE,
        text=True,
    ) as served:
        try:
            assert served.stdout is not None
            base_url = served.stdout.readline().strip()
            answer = httpx.post(f"{base_url}/chat/completions", json=ask, timeout=10)
            drifted = httpx.post(f"{base_url}/chat/completions", json={**ask, "n": 2}, timeout=10)
        finally:
            served.terminate()
    assert answer.json()["choices"][0]["message"]["content"] == "recorded answer"
    assert drifted.status_code == 400
    assert json.loads(drifted.text)["error"]["type"] == "transcript_mismatch"
