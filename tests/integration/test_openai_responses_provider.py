"""The `llm` and `agent` kinds against a provider of `kind: openai-responses`, served by the
scripted test server in OpenAI's Responses protocol (POST /v1/responses, `input` items,
`function_call`/`function_call_output`, usage): the request is mapped (the system message
as `instructions`, tools named at their top level, every tool result answering a call sent
before it - the server refuses anything else), the answer mapped back and journaled in the
one form every provider's conversation has; a streamed answer is journaled piece by piece,
a stream cut or failing midway is a clear retried error; an option the family does not
take fails the step before any request; the key is sent only in `Authorization` and is
nowhere in the store."""

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

from wovyr.activities.base import ActivityRegistry
from wovyr.activities.openai_responses import request_body
from wovyr.activities.providers import ProviderConfig, Providers
from wovyr.engine.engine import Engine
from wovyr.platform.providers import parse_provider, tenant_providers
from wovyr.store.sqlite import SQLiteStore
from wovyr.testing import drain
from wovyr.testing.model_server import (
    ScriptedLLM,
    raw,
    responses_problem,
    status,
    text,
    tool_calls,
)

KEY = "sk-resp-canary-41b7e2"
PNG = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQ"
    "DwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)

SUMMARY = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: summary}
activities:
  - id: say
    llm:
      provider: gpt
      model: gpt-4.1
      system: You are terse.
      prompt: Say hi.
      max_tokens: 300
      response_schema: {type: object, required: [greeting]}
      options: {reasoning: {effort: low}, text: {verbosity: low}}
output: "${{ activities.say.output }}"
"""

IMAGE = f"""\
apiVersion: wovyr/v1
kind: Workflow
metadata: {{name: look}}
activities:
  - id: look
    llm:
      provider: gpt
      model: gpt-4.1
      messages:
        - role: user
          content:
            - {{type: text, text: "What is in this image?"}}
            - {{type: image, url: "{PNG}"}}
            - {{type: image, url: "https://example.com/boardwalk.jpg"}}
output: "${{{{ activities.look.output.text }}}}"
"""


def _engine(db: Path, llm: ScriptedLLM, registry: ActivityRegistry | None = None) -> Engine:
    provider = ProviderConfig(
        "gpt", llm.base_url, price_in=2.0, price_out=8.0, kind="openai-responses", api_key=KEY
    )
    return provider_engine(db, provider, registry)


def test_an_llm_step_speaks_the_responses_protocol(tmp_path: Path) -> None:
    db = tmp_path / "w.db"
    with ScriptedLLM([text('{"greeting": "hi"}', usage=(20, 4), cached=8)]) as llm:
        engine = _engine(db, llm)
        engine.start(SUMMARY, execution_id="e1")
        drain(engine)
        view = engine.query("e1")
        assert view.status == "completed", view.activities["say"]
        out = view.output
        assert out["json"] == {"greeting": "hi"}
        assert out["usage"] == {"input_tokens": 20, "output_tokens": 4}
        assert out["cost"] == pytest.approx((20 * 2.0 + 4 * 8.0) / 1e6)
        assert out["finish_reason"] == "stop"
        (sent,) = llm.responses
        assert sent.path == "/v1/responses"
        assert sent.headers["authorization"] == f"Bearer {KEY}"
        assert sent.body == {
            "model": "gpt-4.1",
            "input": [{"role": "user", "content": "Say hi."}],
            "instructions": "You are terse.",
            "max_output_tokens": 300,
            "reasoning": {"effort": "low"},
            "text": {
                "verbosity": "low",
                "format": {
                    "type": "json_schema",
                    "name": "answer",
                    "schema": {"type": "object", "required": ["greeting"]},
                },
            },
        }
        (done,) = [e for e in engine.history("e1") if e.type == "ActivityCompleted"]
        (call,) = done.data["model_calls"]
        assert (call["input_tokens"], call["output_tokens"], call["cached_tokens"]) == (20, 4, 8)
        engine.close()
    no_key_in_store(db, KEY)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_an_agent_loop_maps_function_calls_and_their_outputs_both_ways(
    tmp_path: Path, stream: bool
) -> None:
    seen: list[str] = []
    script = [
        tool_calls(
            ("math_add", {"a": 2, "b": 3}), ("geo_lookup", {"city": "Paris"}), stream=stream
        ),
        tool_calls(("explode", {}), ("web_search", {"q": "x"}), stream=stream),
        text("5; Paris is in FR.", stream=stream),
    ]
    db = tmp_path / "w.db"
    flow = agent_flow("gpt", "gpt-4.1", f"      stream: {str(stream).lower()}\n")
    with ScriptedLLM(script, pick="turn") as llm:
        engine = _engine(db, llm, agent_tools(seen))
        record = engine.start(flow, execution_id="e1")
        drain(engine)
        assert_agent_answered(engine, "e1", seen)
        assert len(llm.responses) == 3  # every request valid (else the server answers 400)
        first = llm.responses[0].body
        assert first["instructions"] == "Use the tools."
        assert first["max_output_tokens"] == 512
        assert first.get("stream", False) is stream and "stream_options" not in first
        tools = {t["name"]: t for t in first["tools"]}
        assert tools["math_add"]["type"] == "function"
        assert tools["math_add"]["parameters"]["required"] == ["a", "b"]
        assert tools["math_add"]["description"] == "Add two whole numbers."
        assert tools["math_add"]["strict"] is False
        items = llm.responses[2].body["input"]
        assert items[0] == {"role": "user", "content": "What is 2 + 3, and where is Paris?"}
        assert items[1:3] == [
            {
                "type": "function_call",
                "call_id": "call_0",
                "name": "math_add",
                "arguments": json.dumps({"a": 2, "b": 3}),
            },
            {
                "type": "function_call",
                "call_id": "call_1",
                "name": "geo_lookup",
                "arguments": json.dumps({"city": "Paris"}),
            },
        ]
        assert [i.get("type") for i in items[3:]] == [
            "function_call_output",
            "function_call_output",
            "function_call",
            "function_call",
            "function_call_output",
            "function_call_output",
        ]
        # both turns call ids call_0 and call_1: each turn's outputs answer its own calls
        answered = {i["call_id"]: i["output"] for i in items[3:5]}
        assert answered["call_0"] == "5"
        assert json.loads(answered["call_1"]) == {"city": "Paris", "country": "FR"}
        answered = {i["call_id"]: i["output"] for i in items[7:9]}
        assert answered["call_0"] == "error: RuntimeError: the tool broke"
        assert "there is no tool 'web_search'" in answered["call_1"]
        # the journal keeps one form of the conversation whatever the provider speaks
        model_calls = [e for e in engine.history("e1") if e.type == "ModelCallCompleted"]
        assert model_calls[0].data["message"]["tool_calls"][0]["function"] == {
            "name": "math_add",
            "arguments": json.dumps({"a": 2, "b": 3}),
        }
        if stream:  # the final turn's text, journaled as its pieces arrived
            chunks = engine.store.read_stream("default", record.id)
            assert {c.turn for c in chunks if c.kind == "text"} == {3}
            assert "".join(c.text for c in chunks) == "5; Paris is in FR."
        engine.close()
    no_key_in_store(db, KEY)


def test_an_image_part_is_an_input_image(tmp_path: Path) -> None:
    with ScriptedLLM([text("a pixel and a boardwalk")]) as llm:
        engine = _engine(tmp_path / "w.db", llm)
        engine.start(IMAGE, execution_id="e1")
        drain(engine)
        view = engine.query("e1")
        assert view.status == "completed", view.activities["look"]
        assert view.output == "a pixel and a boardwalk"
        (sent,) = llm.responses
        engine.close()
    assert sent.body["input"] == [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "What is in this image?"},
                {"type": "input_image", "image_url": PNG, "detail": "auto"},
                {
                    "type": "input_image",
                    "image_url": "https://example.com/boardwalk.jpg",
                    "detail": "auto",
                },
            ],
        }
    ]


CUT = (
    'event: response.created\ndata: {"type": "response.created", "sequence_number": 0, '
    '"response": {"id": "resp_1", "object": "response", "status": "in_progress", '
    '"model": "gpt-4.1", "output": []}}\n\n'
    'event: response.output_item.added\ndata: {"type": "response.output_item.added", '
    '"sequence_number": 1, "output_index": 0, "item": {"type": "message", "id": "msg_1", '
    '"role": "assistant", "content": []}}\n\n'
    'event: response.output_text.delta\ndata: {"type": "response.output_text.delta", '
    '"sequence_number": 2, "item_id": "msg_1", "output_index": 0, "content_index": 0, '
    '"delta": "half an ans'
)
FAILED = (
    'event: response.created\ndata: {"type": "response.created", "sequence_number": 0, '
    '"response": {"id": "resp_2", "object": "response", "status": "in_progress", '
    '"model": "gpt-4.1", "output": []}}\n\n'
    'event: response.failed\ndata: {"type": "response.failed", "sequence_number": 1, '
    '"response": {"id": "resp_2", "object": "response", "status": "failed", "output": [], '
    '"error": {"code": "server_error", "message": "The server had an error."}}}\n\n'
)
STREAMED = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: talk}
activities:
  - id: ask
    llm: {provider: gpt, model: gpt-4.1, prompt: "go", stream: true}
    retry: {max_attempts: 4, initial_interval: 0s}
output: "${{ activities.ask.output.text }}"
"""


def test_a_stream_cut_or_failing_midway_is_a_clear_retried_error(tmp_path: Path) -> None:
    answer = "".join(f"p{i:02d}" for i in range(40))
    replies = [
        raw(200, CUT, content_type="text/event-stream"),
        raw(200, FAILED, content_type="text/event-stream"),
        status(429, retry_after="0"),
        text(answer, stream=True),
    ]
    with ScriptedLLM(replies) as llm:
        engine = _engine(tmp_path / "w.db", llm)
        record = engine.start(STREAMED)
        drain(engine)
        assert engine.query(record.id).output == answer
        failed = [e.data for e in engine.history(record.id) if e.type == "ActivityFailed"]
        assert [(f["error"]["type"], f["will_retry"]) for f in failed] == [
            ("ProviderMalformedResponse", True),
            ("ProviderUnavailable", True),
            ("ProviderRateLimited", True),
        ]
        assert (
            "in the middle of an event before response.completed" in (failed[0]["error"]["message"])
        )
        assert "The server had an error." in failed[1]["error"]["message"]
        assert len(llm.requests) == 4  # each attempt one call, none repeated
        chunks = engine.store.read_stream("default", record.id, 0, 10_000)
        assert [c.attempt for c in chunks if c.kind == "attempt"] == [1, 2, 3, 4]
        last = [c for c in chunks if c.attempt == 4 and c.kind == "text"]
        assert "".join(c.text for c in last) == answer
        assert len(last) == len(answer) // 4  # a piece a delta (the server sends 4 characters)
        engine.close()


def test_an_option_the_family_does_not_take_fails_the_step_before_any_request(
    tmp_path: Path,
) -> None:
    flow = SUMMARY.replace("{reasoning: {effort: low}, text: {verbosity: low}}", "{seed: 7}")
    with ScriptedLLM([text("never")]) as llm:
        engine = _engine(tmp_path / "w.db", llm)
        engine.start(flow, execution_id="e1")
        drain(engine)
        view = engine.query("e1")
        sent = llm.requests
        engine.close()
    assert view.status == "failed"
    error = view.activities["say"]["error"]
    assert error["type"] == "UnsupportedOption"
    assert "'seed' is not taken by openai-responses providers" in error["message"]
    assert view.activities["say"]["attempt"] == 1  # not retried
    assert sent == []


def test_the_request_mapping_of_a_whole_conversation() -> None:
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
            {"role": "assistant", "content": None},
            {
                "role": "user",
                "content": [{"type": "file", "url": "https://example.com/a.pdf"}],
            },
        ],
        "temperature": 0.1,
        "max_tokens": 9,
        "stream": True,
        "stream_options": {"include_usage": True},
        "response_format": {"type": "json_object"},
        "seed": 1,  # not a Responses option: never sent
    }
    sent = request_body(body)
    assert sent == {
        "model": "m",
        "instructions": "a\n\nb",
        "input": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "thinking"},
            {"type": "function_call", "call_id": "x", "name": "f", "arguments": "{"},
            {"type": "function_call_output", "call_id": "x", "output": "r"},
            {"role": "assistant", "content": ""},
            {
                "role": "user",
                "content": [{"type": "input_file", "file_url": "https://example.com/a.pdf"}],
            },
        ],
        "temperature": 0.1,
        "max_output_tokens": 9,
        "stream": True,
        "text": {"format": {"type": "json_object"}},
    }
    assert responses_problem(sent) is None
    orphan = {**sent, "input": sent["input"][3:]}  # an output answering no call
    assert responses_problem(orphan) == (
        "input[0]",
        "No tool call found for function call output with call_id x.",
    )


def test_a_stored_provider_of_kind_openai_responses(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "w.db")
    fields = {
        "base_url": "https://api.openai.com/v1",
        "kind": "openai-responses",
        "options": {"reasoning": {"effort": "low"}},
    }
    record = parse_provider("t1", "gpt", fields, by="test", at=T0)
    store.put_provider(record)
    found = tenant_providers(store, "t1", Providers()).get("gpt")
    assert found.kind == "openai-responses"
    assert found.token_limit_key == "max_output_tokens"
    assert found.options == {"reasoning": {"effort": "low"}}
    store.close()
