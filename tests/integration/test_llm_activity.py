"""The `llm` kind end to end against a scripted OpenAI-compatible server (real HTTP on
127.0.0.1): the answer and its usage and cost, a streamed answer, `response_schema` with
the validation error fed back (bounded, recorded), a 429 whose `Retry-After` sets the retry
timer (ManualClock), provider errors as clear recorded failures, the per-tenant response
cache, and the API key nowhere but in the request's `Authorization` header."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from wovyr import assemble
from wovyr.activities.base import ActivityRegistry
from wovyr.activities.policy import RESTRICTED, TRUSTED, SideEffectPolicy
from wovyr.activities.providers import BoundCredentials, ProviderConfig, Providers
from wovyr.clock import ManualClock
from wovyr.definition import load_definition
from wovyr.engine.engine import Engine
from wovyr.engine.quotas import Quotas, day_of
from wovyr.errors import DefinitionError
from wovyr.settings import load_settings
from wovyr.store.sqlite import SQLiteStore
from wovyr.testing import drain
from wovyr.testing.model_server import Reply, ScriptedLLM, malformed, status, text

KEY = "sk-canary-7f3a9c1e5b"
T0 = datetime(2030, 1, 1, 9, tzinfo=UTC)


def _workflow(llm: str, retry: str = "") -> str:
    return f"""\
apiVersion: wovyr/v1
kind: Workflow
metadata: {{name: ask}}
inputs:
  topic: {{type: string, default: durable execution}}
activities:
  - id: ask
    llm: {llm}
{retry}
output: "${{{{ activities.ask.output }}}}"
"""


PLAIN = _workflow('{model: m1, system: "Be terse.", prompt: "About ${{ inputs.topic }}"}')


def _engine(
    store_path: Path,
    llm: ScriptedLLM,
    *,
    clock: ManualClock | None = None,
    price: tuple[float, float] | None = None,
    key: str | None = KEY,
    side_effects: SideEffectPolicy | None = None,
) -> Engine:
    provider = ProviderConfig(
        "default",
        llm.base_url,
        default_model="m-default",
        price_in=price[0] if price else None,
        price_out=price[1] if price else None,
        api_key=key,
    )
    return Engine(
        SQLiteStore(store_path),
        clock=clock or ManualClock(T0),
        activities=ActivityRegistry(),
        providers=Providers({"default": provider}),
        side_effects=side_effects,
    )


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "w.db"


def _no_key_in_store(db: Path) -> None:
    for path in db.parent.iterdir():
        if path.name.startswith(db.name):
            assert KEY.encode() not in path.read_bytes(), path.name


def test_answer_usage_and_cost(db: Path) -> None:
    with ScriptedLLM([text("It resumes.", usage=(120, 30))]) as llm:
        engine = _engine(db, llm, price=(2.0, 8.0))
        engine.start(PLAIN, execution_id="e1")
        drain(engine)
        view = engine.query("e1")
        assert view.status == "completed"
        assert view.output == {
            "text": "It resumes.",
            "json": None,
            "usage": {"input_tokens": 120, "output_tokens": 30},
            "cost": pytest.approx((120 * 2.0 + 30 * 8.0) / 1e6),
            "model": "m1",
            "finish_reason": "stop",
        }
        (request,) = llm.completions
        assert request.authorization == f"Bearer {KEY}"
        assert request.body["model"] == "m1"
        assert request.body["messages"] == [
            {"role": "system", "content": "Be terse."},
            {"role": "user", "content": "About durable execution"},
        ]
        engine.close()
    _no_key_in_store(db)


def test_default_model_and_no_prices_mean_null_cost(db: Path) -> None:
    with ScriptedLLM([text("ok")]) as llm:
        engine = _engine(db, llm, key=None)
        engine.start(_workflow('{prompt: "hi"}'), execution_id="e1")
        drain(engine)
        view = engine.query("e1")
        assert (view.status, view.output["cost"], view.output["model"]) == (
            "completed",
            None,
            "m-default",
        )
        assert llm.completions[0].authorization is None  # a provider without a key
        engine.close()


def test_a_streamed_answer_is_assembled(db: Path) -> None:
    with ScriptedLLM([text("a streamed answer, in pieces", stream=True, usage=(7, 9))]) as llm:
        engine = _engine(db, llm)
        engine.start(_workflow('{model: m1, prompt: "hi", stream: true}'), execution_id="e1")
        drain(engine)
        view = engine.query("e1")
        assert view.status == "completed"
        assert view.output["text"] == "a streamed answer, in pieces"
        assert view.output["usage"] == {"input_tokens": 7, "output_tokens": 9}
        assert llm.completions[0].body["stream"] is True
        engine.close()


SCHEMA_WF = _workflow(
    "{model: m1, prompt: 'Title?', response_schema: {type: object, required: [title], "
    "properties: {title: {type: string}}, additionalProperties: false}, schema_retries: 2}"
)


def test_an_answer_off_schema_is_sent_back_with_the_error(db: Path) -> None:
    replies = [text("not json at all"), text('{"name": "x"}'), text('```json\n{"title": "T"}\n```')]
    with ScriptedLLM(replies) as llm:
        engine = _engine(db, llm)
        engine.start(SCHEMA_WF, execution_id="e1")
        drain(engine)
        view = engine.query("e1")
        assert view.status == "completed"
        assert view.output["json"] == {"title": "T"}
        assert view.output["usage"] == {"input_tokens": 30, "output_tokens": 15}
        failures = view.output["schema_failures"]
        assert [f["text"] for f in failures] == ["not json at all", '{"name": "x"}']
        assert "not JSON" in failures[0]["error"]
        assert "'title' is a required property" in failures[1]["error"]
        third = llm.completions[2].body
        assert third["response_format"]["type"] == "json_schema"
        assert third["messages"][-2] == {"role": "assistant", "content": '{"name": "x"}'}
        assert "'title' is a required property" in third["messages"][-1]["content"]
        engine.close()


def test_schema_retries_are_bounded_and_the_failure_recorded(db: Path) -> None:
    with ScriptedLLM([text("[1]")]) as llm:  # every answer is off schema
        engine = _engine(db, llm)
        engine.start(SCHEMA_WF, execution_id="e1")
        drain(engine)
        view = engine.query("e1")
        assert view.status == "failed"
        error = view.activities["ask"]["error"]
        assert error["type"] == "SchemaValidationFailed"
        assert "after 3 tries" in error["message"]
        assert len(error["details"]["failures"]) == 3
        assert len(llm.completions) == 3  # 1 + schema_retries, and not retried as an attempt
        engine.close()


def test_a_429_retry_after_sets_the_retry_timer(db: Path) -> None:
    clock = ManualClock(T0)
    wf = _workflow(
        '{model: m1, prompt: "hi"}',
        "    retry: {max_attempts: 3, initial_interval: 1s}",
    )
    with ScriptedLLM([status(429, retry_after="42"), text("after the wait")]) as llm:
        engine = _engine(db, llm, clock=clock)
        engine.start(wf, execution_id="e1")
        drain(engine)
        view = engine.query("e1")
        ask = view.activities["ask"]
        assert (ask["status"], ask["error"]["type"]) == ("retrying", "ProviderRateLimited")
        assert ask["next_attempt_at"] == (T0 + timedelta(seconds=42)).isoformat()
        clock.advance(41)
        drain(engine)
        assert len(llm.completions) == 1  # the policy's 1s back-off did not apply
        clock.advance(1)
        drain(engine)
        view = engine.query("e1")
        assert (view.status, view.output["text"]) == ("completed", "after the wait")
        assert len(llm.completions) == 2
        engine.close()


@pytest.mark.parametrize(
    ("reply", "kind", "calls"),
    [
        (status(401), "ProviderAuthFailed", 1),
        (status(403), "ProviderAuthFailed", 1),
        (status(404), "ModelNotFound", 1),
        (status(400), "ProviderBadRequest", 1),
        (status(500), "ProviderUnavailable", 2),
        (malformed(), "ProviderMalformedResponse", 2),
    ],
)
def test_provider_errors_are_clear_recorded_failures(
    db: Path, reply: Reply, kind: str, calls: int
) -> None:
    wf = _workflow(
        '{model: m1, prompt: "hi"}', "    retry: {max_attempts: 2, initial_interval: 0s}"
    )
    with ScriptedLLM([reply]) as llm:
        engine = _engine(db, llm)
        engine.start(wf, execution_id="e1")
        drain(engine)
        view = engine.query("e1")
        assert view.status == "failed"
        error = view.activities["ask"]["error"]
        assert error["type"] == kind
        assert len(llm.completions) == calls  # auth, model, bad request: not retried
        assert KEY not in json.dumps(error)
        history = json.dumps([e.data for e in engine.history("e1")])
        assert KEY not in history
        engine.close()
    _no_key_in_store(db)


def test_the_provider_is_under_the_tenants_egress_policy(db: Path) -> None:
    with ScriptedLLM([text("ok")]) as llm:
        engine = _engine(db, llm, side_effects=RESTRICTED)  # no private networks
        engine.start(_workflow('{model: m1, prompt: "hi"}'), execution_id="e1")
        drain(engine)
        view = engine.query("e1")
        assert view.status == "failed"
        assert view.activities["ask"]["error"]["type"] == "TargetUnreachable"
        assert llm.completions == []
        engine.close()
    allowed = SideEffectPolicy(private_network=False, allow_hosts=(f"127.0.0.1:{llm.port}",))
    with ScriptedLLM([text("ok")], port=llm.port) as again:
        engine = _engine(db.with_name("w2.db"), again, side_effects=allowed)
        engine.start(_workflow('{model: m1, prompt: "hi"}'), execution_id="e2")
        drain(engine)
        assert engine.query("e2").status == "completed"
        engine.close()


def test_an_identical_request_is_answered_from_the_tenants_cache(db: Path) -> None:
    wf = _workflow('{model: m1, prompt: "About ${{ inputs.topic }}", cache: true}')
    with ScriptedLLM([text("first"), text("second")]) as llm:
        engine = _engine(db, llm, side_effects=TRUSTED)  # tenant acme may reach 127.0.0.1
        engine.start(wf, execution_id="e1")
        engine.start(wf, execution_id="e2")  # (one after the other: the same worker)
        drain(engine, only=["e1"])
        drain(engine, only=["e2"])
        first, second = engine.query("e1").output, engine.query("e2").output
        assert (first["text"], first["cached"]) == ("first", False)
        assert (second["text"], second["cached"]) == ("first", True)
        assert len(llm.completions) == 1
        completed = [e for e in engine.history("e2") if e.type == "ActivityCompleted"]
        assert completed[0].data["output"]["cached"] is True  # the hit is in the history
        engine.start(wf, {"topic": "other"}, execution_id="e3")  # another request: a call
        drain(engine, only=["e3"])
        assert engine.query("e3").output["text"] == "second"
        other = engine.for_tenant("acme")  # another tenant: its own cache
        other.start(wf, execution_id="e1")
        drain(other)
        assert other.query("e1").output["cached"] is False
        assert len(llm.completions) == 3
        engine.close()


def test_an_answer_debits_its_tokens_and_cost_and_a_cached_one_nothing(db: Path) -> None:
    wf = _workflow('{model: m1, prompt: "About ${{ inputs.topic }}", cache: true}')
    with ScriptedLLM([text("first", usage=(120, 30))]) as llm:
        engine = _engine(db, llm, price=(2.0, 8.0))
        engine.set_quotas(Quotas(model_tokens_per_day=10_000, model_cost_per_day=5.0), by="t")
        engine.start(wf, execution_id="e1")
        drain(engine)
        used = engine.store.quota_usage("default", day_of(T0))
        assert used["model_tokens"] == 150  # debited by the commit recording the answer
        assert used["model_cost"] == pytest.approx((120 * 2.0 + 30 * 8.0) / 1e6)
        engine.start(wf, execution_id="e2")  # the same request: answered from the cache
        drain(engine)
        assert engine.query("e2").output["cached"] is True
        assert engine.store.quota_usage("default", day_of(T0)) == used
        assert len(llm.completions) == 1
        engine.close()


def test_the_default_provider_comes_from_the_environment_at_the_edge() -> None:
    env = {
        "WOVYR_LLM_BASE_URL": "http://127.0.0.1:9/v1",
        "WOVYR_LLM_API_KEY": KEY,
        "WOVYR_LLM_MODEL": "m9",
        "WOVYR_LLM_PRICE_IN": "1.5",
        "WOVYR_LLM_PRICE_OUT": "6",
    }
    settings = load_settings(env)
    assert KEY not in repr(settings)
    providers = assemble.model_providers(settings)
    default = providers.get("default")
    assert (default.base_url, default.default_model) == ("http://127.0.0.1:9/v1", "m9")
    assert default.cost(1_000_000, 1_000_000) == 7.5
    assert default.api_key == KEY  # bound to this base URL, in the one config
    assert BoundCredentials().api_key("any", default) == KEY
    assert KEY not in repr(default) and KEY not in repr(providers)
    assert assemble.model_providers(load_settings({})).names() == []


@pytest.mark.parametrize(
    ("llm", "says"),
    [
        ("{prompt: hi, response_schema: {type: 12}}", "not a valid JSON Schema"),
        ("{prompt: hi, messages: []}", "exactly one of `prompt` and `messages`"),
        ("{model: m1}", "exactly one of `prompt` and `messages`"),
        ("{prompt: hi, schema_retries: 9}", "schema_retries"),
        ("{prompt: hi, tempreature: 1}", "tempreature"),
    ],
)
def test_bad_llm_steps_are_located_errors(llm: str, says: str) -> None:
    with pytest.raises(DefinitionError) as caught:
        load_definition(_workflow(llm))
    text_of = str(caught.value)
    assert says in text_of
    assert ":8:" in text_of or "line 8" in text_of  # the `llm:` line of the document
