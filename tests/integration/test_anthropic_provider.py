"""The `llm` and `agent` kinds against a provider of `kind: anthropic`, served by the
scripted test server in the Messages protocol (POST /v1/messages, `x-api-key`,
`tool_use`/`tool_result` blocks, usage): the request is mapped (system on top, tools as
`input_schema`, tool results answering their `tool_use`, alternating roles - the server
refuses anything else), the answer mapped back; a wrong key is a clear failure; the key
is sent only in `x-api-key` and is nowhere in the store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.integration.model_tools import (
    T0,
    agent_flow,
    agent_tools,
    assert_agent_answered,
    no_key_in_store,
    provider_engine,
)

from wovyr.activities.anthropic import request_body
from wovyr.activities.base import ActivityRegistry
from wovyr.activities.providers import ProviderConfig, Providers
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.errors import InputError
from wovyr.platform.providers import parse_provider, tenant_providers
from wovyr.store.sqlite import SQLiteStore
from wovyr.testing import drain
from wovyr.testing.model_server import ScriptedLLM, anthropic_problem, status, text, tool_calls

KEY = "sk-ant-canary-0c4d19"

SUMMARY = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: summary}
activities:
  - id: say
    llm:
      provider: claude
      model: claude-x
      system: You are terse.
      prompt: Say hi.
      response_schema: {type: object, required: [greeting]}
output: "${{ activities.say.output }}"
"""

AGENT = agent_flow("claude", "claude-x")


def _engine(
    db: Path,
    llm: ScriptedLLM,
    registry: ActivityRegistry | None = None,
    clock: ManualClock | None = None,
) -> Engine:
    provider = ProviderConfig(
        "claude", llm.base_url, price_in=3.0, price_out=15.0, kind="anthropic", api_key=KEY
    )
    return provider_engine(db, provider, registry, clock)


def test_an_llm_step_speaks_the_messages_protocol(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    with ScriptedLLM([text('{"greeting": "hi"}', usage=(20, 4))], anthropic_key=KEY) as llm:
        engine = _engine(db, llm)
        engine.start(SUMMARY, execution_id="e1")
        drain(engine)
        view = engine.query("e1")
        assert view.status == "completed", view.activities["say"]
        out = view.output
        assert out["json"] == {"greeting": "hi"}
        assert out["usage"] == {"input_tokens": 20, "output_tokens": 4}
        assert out["cost"] == pytest.approx((20 * 3.0 + 4 * 15.0) / 1e6)
        assert out["finish_reason"] == "stop"
        (sent,) = llm.messages
        assert sent.path == "/v1/messages"
        assert sent.headers["x-api-key"] == KEY
        assert "authorization" not in sent.headers
        assert sent.headers["anthropic-version"] == "2023-06-01"
        assert sent.body["system"] == "You are terse."
        assert sent.body["messages"] == [
            {"role": "user", "content": [{"type": "text", "text": "Say hi."}]}
        ]
        assert sent.body["max_tokens"] == 4096  # required by the API: a default is sent
        assert "response_format" not in sent.body
        engine.close()
    no_key_in_store(db, KEY)


def test_an_agent_loop_maps_tool_use_and_tool_result_both_ways(tmp_path: Path) -> None:
    seen: list[str] = []
    script = [
        tool_calls(("math_add", {"a": 2, "b": 3}), ("geo_lookup", {"city": "Paris"})),
        tool_calls(("explode", {}), ("web_search", {"q": "x"})),
        text("5; Paris is in FR."),
    ]
    db = tmp_path / "w.db"
    with ScriptedLLM(script, pick="turn", anthropic_key=KEY) as llm:
        engine = _engine(db, llm, agent_tools(seen))
        engine.start(AGENT, execution_id="e1")
        drain(engine)
        assert_agent_answered(engine, "e1", seen)
        assert len(llm.messages) == 3  # every request valid (else the server answers 400)
        first = llm.messages[0].body
        assert first["max_tokens"] == 512
        tools = {t["name"]: t for t in first["tools"]}
        assert tools["math_add"]["input_schema"]["required"] == ["a", "b"]
        assert tools["math_add"]["description"] == "Add two whole numbers."
        last = llm.messages[2].body["messages"]
        assert [m["role"] for m in last] == ["user", "assistant", "user", "assistant", "user"]
        assert last[1]["content"] == [
            {"type": "tool_use", "id": "call_0", "name": "math_add", "input": {"a": 2, "b": 3}},
            {"type": "tool_use", "id": "call_1", "name": "geo_lookup", "input": {"city": "Paris"}},
        ]
        results = {b["tool_use_id"]: b for b in last[4]["content"]}
        assert results["call_0"]["content"] == "error: RuntimeError: the tool broke"
        assert results["call_0"]["is_error"] is True
        assert "there is no tool 'web_search'" in results["call_1"]["content"]
        answered = {b["tool_use_id"]: b["content"] for b in last[2]["content"]}
        assert answered["call_0"] == "5"
        assert json.loads(answered["call_1"]) == {"city": "Paris", "country": "FR"}
        # the journal keeps one form of the conversation whatever the provider speaks
        model_calls = [e for e in engine.history("e1") if e.type == "ModelCallCompleted"]
        assert model_calls[0].data["message"]["tool_calls"][0]["function"] == {
            "name": "math_add",
            "arguments": json.dumps({"a": 2, "b": 3}),
        }
        engine.close()
    no_key_in_store(db, KEY)


def test_a_wrong_key_and_an_overloaded_provider_are_clear_outcomes(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    with ScriptedLLM([text("never")], anthropic_key="sk-ant-other") as llm:
        engine = _engine(db, llm)
        engine.start(SUMMARY, execution_id="e1")
        drain(engine)
        view = engine.query("e1")
        assert view.status == "failed"
        error = view.activities["say"]["error"]
        assert error["type"] == "ProviderAuthFailed"
        assert "authentication_error" in error["details"]["body"]
        assert len(llm.messages) == 1  # not retried
        assert KEY not in json.dumps(error)
        engine.close()
    with ScriptedLLM([status(529), text('{"greeting": "hi"}')], anthropic_key=KEY) as llm:
        clock = ManualClock(T0)
        engine = _engine(tmp_path / "w2.db", llm, clock=clock)
        engine.start(SUMMARY, execution_id="e1")
        drain(engine)
        say = engine.query("e1").activities["say"]
        assert (say["status"], say["error"]["type"]) == ("retrying", "ProviderOverloaded")
        clock.advance(60)
        drain(engine)  # 529 (overloaded) is retried by the engine's policy
        assert engine.query("e1").output["json"] == {"greeting": "hi"}
        assert len(llm.messages) == 2
        engine.close()
    no_key_in_store(db, KEY)


def test_the_request_mapping_merges_turns_and_keeps_roles_alternating() -> None:
    body = {
        "model": "m",
        "messages": [
            {"role": "system", "content": "a"},
            {"role": "system", "content": "b"},
            {"role": "user", "content": "q"},
            {
                "role": "assistant",
                "content": "thinking",
                "tool_calls": [
                    {"id": "x", "type": "function", "function": {"name": "f", "arguments": "{"}}
                ],
            },
            {"role": "tool", "tool_call_id": "x", "content": "r"},
            {"role": "user", "content": "and?"},
        ],
        "temperature": 0.1,
    }
    sent = request_body(body)
    assert sent["system"] == "a\n\nb"
    assert sent["temperature"] == 0.1
    assert sent["messages"][1]["content"] == [
        {"type": "text", "text": "thinking"},
        {"type": "tool_use", "id": "x", "name": "f", "input": {}},  # bad JSON: no input
    ]
    assert sent["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "x", "content": "r"},
        {"type": "text", "text": "and?"},
    ]
    assert anthropic_problem(sent, {"anthropic-version": "2023-06-01"}) is None


def test_a_stored_provider_of_kind_anthropic(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "w.db")
    fields = {"base_url": "http://127.0.0.1:9/v1", "kind": "anthropic"}
    record = parse_provider("t1", "claude", fields, by="test", at=T0)
    store.put_provider(record)
    found = tenant_providers(store, "t1", Providers()).get("claude")
    assert found.kind == "anthropic"
    assert parse_provider("t1", "gpt", {"base_url": "http://h/v1"}, by="t", at=T0).kind == (
        "openai"
    )
    with pytest.raises(InputError) as bad:
        parse_provider("t1", "x", {"base_url": "http://h/v1", "kind": "gemini"}, by="t", at=T0)
    assert bad.value.problems[0].path == "kind"
    store.close()
