"""A tenant's stored model providers at dispatch, against scripted OpenAI-compatible servers
(real HTTP on 127.0.0.1), over a real SQLite file and real sealed secrets: the key of a
stored provider comes from the tenant's secret and is sent only as `Authorization: Bearer`
(never in the database file, its WAL or the history, plain or base64), its prices make
`cost` known, a provider of the same name in two tenants is each tenant's own, and an
unknown provider or a missing secret is a clear failure, not retried, naming it; its
options are sent with every call (checked against its kind's allow-list when it is set,
each bad key located) and its prices per model make the cost of that model's calls."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from wovyr.activities.base import ActivityRegistry
from wovyr.activities.policy import TRUSTED
from wovyr.activities.providers import ProviderConfig, Providers
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.errors import InputError
from wovyr.platform.kms import Kms, RootKey
from wovyr.platform.providers import SecretCredentials, parse_provider, set_provider
from wovyr.platform.secrets import Secrets
from wovyr.store.sqlite import SQLiteStore
from wovyr.testing import drain
from wovyr.testing.model_server import ScriptedLLM, text

T0 = datetime(2030, 1, 1, 9, tzinfo=UTC)
CANARY_A = "sk-canary-a-81d0f6b2c4"
CANARY_B = "sk-canary-b-2e9a7c53f1"
ENV_KEY = "sk-env-default-key"

FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {{name: ask}}
activities:
  - id: ask
    llm: {{provider: {provider}, prompt: "hi"}}
    retry: {{max_attempts: 3, initial_interval: 0s}}
output: "${{{{ activities.ask.output }}}}"
"""


class World:
    def __init__(self, db: Path, env: ScriptedLLM | None = None) -> None:
        self.db = db
        self.store = SQLiteStore(db)
        self.secrets = Secrets(self.store, Kms(RootKey(bytes.fromhex("ab" * 32)), "production"))
        providers = Providers()
        if env is not None:
            default = ProviderConfig("default", env.base_url, "m-env", api_key=ENV_KEY)
            providers = Providers({"default": default})
        self.engine = Engine(
            self.store,
            clock=ManualClock(T0),
            activities=ActivityRegistry(),
            providers=providers,
            credentials=SecretCredentials(self.secrets),
            secrets=self.secrets,
            side_effects=TRUSTED,  # the scripted servers are on loopback
        )

    def provider(self, tenant: str, name: str, **fields: object) -> None:
        fields.setdefault("default_model", "m1")
        record = parse_provider(tenant, name, fields, by="test", at=T0)
        set_provider(self.store, record)

    def run(self, tenant: str, provider: str, execution_id: str) -> Engine:
        engine = self.engine.for_tenant(tenant)
        engine.start(FLOW.format(provider=provider), execution_id=execution_id)
        drain(self.engine)
        return engine

    def history(self, tenant: str, execution_id: str) -> str:
        engine = self.engine.for_tenant(tenant)
        return json.dumps([e.data for e in engine.history(execution_id)], default=str)

    def assert_nowhere(self, *values: str) -> None:
        self.engine.close()
        files = [p for p in self.db.parent.iterdir() if p.name.startswith(self.db.name)]
        assert files
        for path in files:
            data = path.read_bytes()
            for value in values:
                for form in (value.encode(), base64.b64encode(value.encode())):
                    assert form not in data, (path.name, value)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "w.db"


def test_a_stored_provider_sends_its_secret_and_prices_its_cost(db: Path) -> None:
    with ScriptedLLM([text("It resumes.", usage=(1000, 200))]) as llm:
        world = World(db)
        world.secrets.set_secret("tenant-a", "ACME_KEY", CANARY_A, by="test", at=T0)
        world.provider(
            "tenant-a", "acme", base_url=llm.base_url, api_key_secret="ACME_KEY",
            default_model="m-acme", price_in=2.5, price_out=10.0,
        )  # fmt: skip
        engine = world.run("tenant-a", "acme", "e1")
        view = engine.query("e1")
        assert view.status == "completed", view.activities["ask"].get("error")
        assert view.output["text"] == "It resumes."
        assert view.output["model"] == "m-acme"
        assert view.output["cost"] == pytest.approx((1000 * 2.5 + 200 * 10.0) / 1e6)
        (request,) = llm.completions
        assert request.authorization == f"Bearer {CANARY_A}"
        assert request.body["model"] == "m-acme"
        history = world.history("tenant-a", "e1")
        for form in (CANARY_A, base64.b64encode(CANARY_A.encode()).decode()):
            assert form not in history
            assert form not in json.dumps(view.output)
        world.assert_nowhere(CANARY_A)


def test_each_tenant_uses_its_own_provider_of_the_same_name(db: Path) -> None:
    with ScriptedLLM([text("from a")]) as llm_a, ScriptedLLM([text("from b")]) as llm_b:
        world = World(db)
        world.secrets.set_secret("tenant-a", "KEY", CANARY_A, by="test", at=T0)
        world.secrets.set_secret("tenant-b", "KEY", CANARY_B, by="test", at=T0)
        world.provider("tenant-a", "acme", base_url=llm_a.base_url, api_key_secret="KEY")
        world.provider("tenant-b", "acme", base_url=llm_b.base_url, api_key_secret="KEY")
        a = world.run("tenant-a", "acme", "ea")
        b = world.run("tenant-b", "acme", "eb")
        assert a.query("ea").output["text"] == "from a"
        assert b.query("eb").output["text"] == "from b"
        assert [r.authorization for r in llm_a.completions] == [f"Bearer {CANARY_A}"]
        assert [r.authorization for r in llm_b.completions] == [f"Bearer {CANARY_B}"]
        world.assert_nowhere(CANARY_A, CANARY_B)


def test_another_tenants_provider_is_unknown(db: Path) -> None:
    with ScriptedLLM([text("never")]) as llm:
        world = World(db)
        world.secrets.set_secret("tenant-a", "KEY", CANARY_A, by="test", at=T0)
        world.provider("tenant-a", "acme", base_url=llm.base_url, api_key_secret="KEY")
        c = world.run("tenant-c", "acme", "ec")
        view = c.query("ec")
        assert view.status == "failed"
        error = view.activities["ask"]["error"]
        assert error["type"] == "UnknownProvider"
        assert "'acme'" in error["message"]
        assert view.activities["ask"]["attempt"] == 1  # not retried
        assert llm.completions == []
        assert CANARY_A not in world.history("tenant-c", "ec")
        assert CANARY_A not in json.dumps(error)


def test_a_missing_secret_fails_naming_it_not_retried(db: Path) -> None:
    with ScriptedLLM([text("never")]) as llm:
        world = World(db)
        world.provider("tenant-a", "acme", base_url=llm.base_url, api_key_secret="ACME_KEY")
        # tenant-b has a secret of that name: tenant-a never sees it
        world.secrets.set_secret("tenant-b", "ACME_KEY", CANARY_B, by="test", at=T0)
        engine = world.run("tenant-a", "acme", "e1")
        view = engine.query("e1")
        assert view.status == "failed"
        error = view.activities["ask"]["error"]
        assert error["type"] == "SecretMissing"
        assert "'ACME_KEY'" in error["message"] and "'acme'" in error["message"]
        assert view.activities["ask"]["attempt"] == 1
        assert llm.completions == []
        assert CANARY_B not in json.dumps(error)


def test_a_stored_provider_comes_before_the_environments(db: Path) -> None:
    with ScriptedLLM([text("env")]) as env, ScriptedLLM([text("stored")]) as stored:
        world = World(db, env)
        world.secrets.set_secret("tenant-a", "KEY", CANARY_A, by="test", at=T0)
        world.provider("tenant-a", "default", base_url=stored.base_url, api_key_secret="KEY")
        a = world.run("tenant-a", "default", "ea")
        b = world.run("tenant-b", "default", "eb")  # no stored one: the environment's
        assert a.query("ea").output["text"] == "stored"
        assert b.query("eb").output["text"] == "env"
        assert [r.authorization for r in stored.completions] == [f"Bearer {CANARY_A}"]
        assert [r.authorization for r in env.completions] == [f"Bearer {ENV_KEY}"]
        world.engine.close()


AGENT = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: think}
activities:
  - id: think
    agent: {provider: acme, instructions: "Answer.", input: "hi"}
output: "${{ activities.think.output }}"
"""


def test_an_agent_uses_the_tenants_stored_provider(db: Path) -> None:
    with ScriptedLLM([text("done", usage=(400, 40))]) as llm:
        world = World(db)
        world.secrets.set_secret("tenant-a", "ACME_KEY", CANARY_A, by="test", at=T0)
        world.provider(
            "tenant-a", "acme", base_url=llm.base_url, api_key_secret="ACME_KEY",
            price_in=1.0, price_out=5.0,
        )  # fmt: skip
        engine = world.engine.for_tenant("tenant-a")
        engine.start(AGENT, execution_id="e1")
        drain(world.engine)
        view = engine.query("e1")
        assert view.status == "completed", view.activities["think"].get("error")
        assert view.output["text"] == "done"
        assert view.output["cost"] == pytest.approx((400 * 1.0 + 40 * 5.0) / 1e6)
        assert [r.authorization for r in llm.completions] == [f"Bearer {CANARY_A}"]
        assert CANARY_A not in world.history("tenant-a", "e1")
        world.assert_nowhere(CANARY_A)


def test_a_stored_providers_options_go_with_every_call_and_its_model_prices_cost_them(
    db: Path,
) -> None:
    with ScriptedLLM([text("ok", usage=(1000, 200))]) as llm:
        world = World(db)
        world.provider(
            "tenant-a", "acme", base_url=llm.base_url, default_model="m1-2030-01-01",
            price_in=1.0, price_out=1.0, options={"seed": 7, "top_p": 0.5},
            prices={"m1": {"input": 3.0, "output": 6.0}},
        )  # fmt: skip
        engine = world.run("tenant-a", "acme", "e1")
        view = engine.query("e1")
        assert view.status == "completed", view.activities["ask"].get("error")
        (request,) = llm.completions
        assert (request.body["seed"], request.body["top_p"]) == (7, 0.5)
        assert view.output["cost"] == pytest.approx((1000 * 3.0 + 200 * 6.0) / 1e6)


def test_a_stored_providers_bad_options_and_prices_are_refused_at_their_keys() -> None:
    fields = {
        "base_url": "https://api.example.com/v1",
        "options": {"seed": 7, "sede": 1, "top_k": 3, "max_tokens": 9},
        "prices": {"m1": {"input": -1, "output": 2}},
    }
    with pytest.raises(InputError) as refused:
        parse_provider("t1", "acme", fields, by="test", at=T0)
    found = {p.path: p.message for p in refused.value.problems}
    assert set(found) == {"options.sede", "options.top_k", "options.max_tokens", "prices"}
    assert "did you mean 'seed'" in found["options.sede"]
    assert "openai providers" in found["options.top_k"]  # an Anthropic option
    assert "not an option" in found["options.max_tokens"]  # the step's own field
    assert "prices.m1.input is a finite number" in found["prices"]
    anthropic = {**fields, "kind": "anthropic", "options": {"top_k": 3}, "prices": None}
    record = parse_provider("t1", "claude", anthropic, by="test", at=T0)
    assert record.options == {"top_k": 3}
    with pytest.raises(InputError, match="options is an object"):
        parse_provider("t1", "x", {**fields, "options": [1], "prices": None}, by="t", at=T0)
