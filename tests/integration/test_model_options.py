"""`options:` end to end: an `llm` step's and an `agent` step's provider parameters reach
the scripted model server (real HTTP) as they are, rendered (expressions in values), under
the provider's own options, with the answer's token limit under the key the provider takes;
an option the provider's family does not take fails the step before any request is sent."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from wovyr.activities.base import ActivityRegistry
from wovyr.activities.providers import ProviderConfig, Providers
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.store.sqlite import SQLiteStore
from wovyr.testing import drain
from wovyr.testing.model_server import ScriptedLLM, text

T0 = datetime(2030, 1, 1, 9, tzinfo=UTC)

LLM = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: ask}
inputs:
  seed: {type: integer, default: 11}
activities:
  - id: ask
    llm:
      provider: PROVIDER
      model: o4-mini
      prompt: Say hi.
      max_tokens: 500
      options:
        seed: "${{ inputs.seed }}"
        reasoning_effort: low
output: "${{ activities.ask.output.text }}"
"""

AGENT = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: think}
activities:
  - id: think
    agent:
      provider: claude
      model: claude-sonnet-4-5
      input: Say hi.
      options: {top_k: 5, stop_sequences: [END]}
output: "${{ activities.think.output.text }}"
"""


def _engine(db: Path, llm: ScriptedLLM) -> Engine:
    providers = {
        "openai": ProviderConfig(
            "openai", llm.base_url, token_limit="max_completion_tokens", options={"user": "u-1"}
        ),
        "claude": ProviderConfig(
            "claude", llm.base_url, kind="anthropic", options={"metadata": {"user_id": "u-1"}}
        ),
    }
    return Engine(
        SQLiteStore(db),
        clock=ManualClock(T0),
        activities=ActivityRegistry(),
        providers=Providers(providers),
    )


def test_an_llm_step_s_options_are_sent_rendered(tmp_path: Path) -> None:
    with ScriptedLLM([text("hi")]) as llm:
        engine = _engine(tmp_path / "w.db", llm)
        engine.start(LLM.replace("PROVIDER", "openai"), execution_id="e1")
        drain(engine)
        assert engine.query("e1").output == "hi"
        (request,) = llm.completions
        engine.close()
    assert request.body == {
        "model": "o4-mini",
        "messages": [{"role": "user", "content": "Say hi."}],
        "max_completion_tokens": 500,
        "seed": 11,
        "reasoning_effort": "low",
        "user": "u-1",
    }


def test_an_agent_step_s_options_reach_an_anthropic_provider(tmp_path: Path) -> None:
    with ScriptedLLM([text("hi")]) as llm:
        engine = _engine(tmp_path / "w.db", llm)
        engine.start(AGENT, execution_id="e1")
        drain(engine)
        assert engine.query("e1").output == "hi"
        (request,) = llm.messages
        engine.close()
    assert request.body["top_k"] == 5
    assert request.body["stop_sequences"] == ["END"]
    assert request.body["metadata"] == {"user_id": "u-1"}
    assert request.body["max_tokens"] == 4096


def test_an_option_the_provider_s_family_does_not_take_fails_the_step(tmp_path: Path) -> None:
    with ScriptedLLM([text("hi")]) as llm:
        engine = _engine(tmp_path / "w.db", llm)
        engine.start(LLM.replace("PROVIDER", "claude"), execution_id="e1")
        drain(engine)
        view = engine.query("e1")
        sent = llm.requests
        engine.close()
    assert view.status == "failed"
    error = view.activities["ask"]["error"]
    assert error["type"] == "UnsupportedOption"
    assert "'seed' is not taken by anthropic providers" in error["message"]
    assert "'reasoning_effort' is not taken by anthropic providers" in error["message"]
    assert view.activities["ask"]["attempt"] == 1  # not retried
    assert sent == []
