"""Provider conformance: the gateway's request and response mapping, per protocol family,
against recorded exchanges written from each provider's documented examples
(tests/fixtures/providers/<family>/*.json; each names its source).

A fixture holds the chat-completions body a kind builds (`call`, with its `options`), the
body the provider must receive (`request`, compared whole), the provider's recorded answer
(`response`: status, headers, a JSON body or a recorded SSE stream) and what it must become:
a `result` (the assistant message, finish reason, tokens, model; a stream's text pieces, as
handed on one by one, join to the message's text) or an `error` (its type, whether it is
retried, the `retry_after` a 429 asks for). The answer is served by the scripted model
server of `wovyr.testing` over real HTTP on 127.0.0.1 (which also checks a Messages or a
Responses request as the API does); no network. The API key is sent only in its header and
appears in no result or error."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from wovyr.activities.base import ActivityError
from wovyr.activities.providers import ChatResult, ProviderConfig, chat, with_options
from wovyr.testing.model_server import ScriptedLLM, raw

FIXTURES = Path(__file__).parents[1] / "fixtures" / "providers"
FAMILIES = {
    "openai-chat": "openai",
    "anthropic-messages": "anthropic",
    "openai-responses": "openai-responses",
}
KEY = "sk-fixture-canary-5f2e81"


def _fixtures() -> list[Any]:
    return [
        pytest.param(family, path, id=f"{family}/{path.stem}")
        for family in FAMILIES
        for path in sorted((FIXTURES / family).glob("*.json"))
    ]


def _reply(response: dict[str, Any]) -> Any:
    body = response["text"] if "text" in response else json.dumps(response["json"])
    return raw(
        response["status"],
        body,
        headers=response.get("headers"),
        content_type=response.get("content_type", "application/json"),
    )


def _call(
    family: str, fixture: dict[str, Any]
) -> tuple[ChatResult | ActivityError, Any, list[str]]:
    kind = FAMILIES[family]
    pieces: list[str] = []
    with ScriptedLLM([_reply(fixture["response"])], anthropic_key=KEY) as llm:
        provider = ProviderConfig(
            family, llm.base_url, kind=kind, api_key=KEY, **fixture.get("provider", {})
        )
        call = dict(fixture["call"])
        body = with_options(call, call.pop("options", None), kind)
        outcome: ChatResult | ActivityError
        try:
            outcome = asyncio.run(chat(provider, KEY, body, timeout=10, on_text=pieces.append))
        except ActivityError as exc:
            outcome = exc
        (received,) = llm.requests
    return outcome, received, pieces


def test_every_family_has_fixtures_of_answers_and_of_each_error_class() -> None:
    for family in FAMILIES:
        loaded = [json.loads(p.read_text()) for p in (FIXTURES / family).glob("*.json")]
        assert all(f["source"].startswith("https://") for f in loaded)
        errors = {f["error"]["type"] for f in loaded if "error" in f}
        assert {"ProviderRateLimited", "ContextLengthExceeded", "ProviderUnavailable"} <= errors
        assert sum("result" in f for f in loaded) >= 5


@pytest.mark.parametrize(("family", "path"), _fixtures())
def test_recorded_exchange(family: str, path: Path) -> None:
    fixture = json.loads(path.read_text())
    outcome, received, pieces = _call(family, fixture)
    if "request" in fixture:
        assert received.body == fixture["request"]
    if FAMILIES[family] == "anthropic":
        assert received.headers["x-api-key"] == KEY
        assert received.headers["anthropic-version"] == "2023-06-01"
        assert "authorization" not in received.headers
    else:
        assert received.headers["authorization"] == f"Bearer {KEY}"
    if "result" in fixture:
        assert isinstance(outcome, ChatResult), outcome
        expected = fixture["result"]
        assert outcome.message == expected["message"]
        assert outcome.finish_reason == expected["finish_reason"]
        assert (outcome.input_tokens, outcome.output_tokens) == (
            expected["input_tokens"],
            expected["output_tokens"],
        )
        assert outcome.model == expected["model"]
        assert outcome.cached_tokens == expected.get("cached_tokens", outcome.cached_tokens)
        assert KEY not in json.dumps(outcome.message)
        if fixture["call"].get("stream"):  # what a journal kept of it is the answer's text
            assert "".join(pieces) == (outcome.message["content"] or "")
            assert pieces == fixture.get("pieces", pieces)
        return
    assert isinstance(outcome, ActivityError), outcome
    expected = fixture["error"]
    assert outcome.type == expected["type"], outcome.message
    assert outcome.retryable is expected["retryable"]
    assert outcome.retry_after == expected.get("retry_after")
    if "says" in expected:
        assert expected["says"] in outcome.message
    assert KEY not in outcome.message
    assert KEY not in json.dumps(outcome.details)


def test_an_option_the_family_does_not_take_fails_before_any_request() -> None:
    from wovyr.activities.base import NonRetryableError

    body = {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hi"}]}
    with pytest.raises(NonRetryableError) as raised:
        with_options(body, {"seed": 7}, "anthropic")
    assert raised.value.type == "UnsupportedOption"
    assert "'seed' is not taken by anthropic providers" in raised.value.message
    assert with_options(body, {"top_k": 5}, "anthropic") == {**body, "top_k": 5}


def test_a_provider_s_options_are_sent_under_the_step_s() -> None:
    with ScriptedLLM([raw(200, json.dumps(_completion()))]) as llm:
        provider = ProviderConfig(
            "p", llm.base_url, options={"seed": 1, "top_p": 0.5}, token_limit="max_tokens"
        )
        body = with_options(
            {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 9},
            {"seed": 2},
            "openai",
        )
        asyncio.run(chat(provider, None, body, timeout=10))
        (received,) = llm.requests
    assert received.body == {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 9,
        "seed": 2,
        "top_p": 0.5,
    }
    assert "authorization" not in received.headers


def test_the_token_limit_key_rule() -> None:
    def key(url: str, **kw: Any) -> str:
        return ProviderConfig("p", url, **kw).token_limit_key

    assert key("https://api.openai.com/v1") == "max_completion_tokens"
    assert key("https://API.OpenAI.com/v1/") == "max_completion_tokens"
    assert key("http://127.0.0.1:11434/v1") == "max_tokens"  # Ollama
    assert key("https://gateway.example/openai/v1") == "max_tokens"
    assert key("http://vllm:8000/v1", token_limit="max_completion_tokens") == (
        "max_completion_tokens"
    )
    assert key("https://api.openai.com/v1", token_limit="max_tokens") == "max_tokens"
    assert key("https://api.anthropic.com/v1", kind="anthropic") == "max_tokens"


def test_a_provider_s_options_are_checked_when_it_is_configured() -> None:
    with pytest.raises(ValueError, match="'top_k' is not taken by openai providers"):
        ProviderConfig("p", "http://x/v1", options={"top_k": 3})
    with pytest.raises(ValueError, match="'max_tokens' is not an option"):
        ProviderConfig("p", "http://x/v1", options={"max_tokens": 3})
    assert ProviderConfig("c", "http://x/v1", kind="anthropic", options={"top_k": 3}).options


def _completion() -> dict[str, Any]:
    message = {"role": "assistant", "content": "ok"}
    return {
        "id": "c",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
