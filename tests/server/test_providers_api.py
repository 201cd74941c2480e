"""`/api/v1/providers` over the app: an admin sets, lists, shows and deletes its tenant's
model providers; answers show the key's secret NAME, never its value (a canary set as that
secret appears in no answer); another tenant's provider answers exactly like a missing one
and the same name in two tenants is two providers; bad bodies are a 422 that stores
nothing; and an `llm` step started over the API uses the stored provider with the key from
the tenant's secret (a scripted server started here sees it)."""

from __future__ import annotations

import base64

import pytest
from tests.server.conftest import Api

from wovyr.activities.policy import TRUSTED
from wovyr.testing.model_server import ScriptedLLM, text

pytestmark = pytest.mark.anyio

A, B = "tenant-a:admin", "tenant-b:admin"
CANARY = "sk-api-canary-93b1d07e4f"
PROVIDERS = "/api/v1/providers"
FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: ask}
activities:
  - id: ask
    llm: {provider: acme, prompt: "hi"}
output: "${{ activities.ask.output }}"
"""


def clean(body: str) -> bool:
    return CANARY not in body and base64.b64encode(CANARY.encode()).decode() not in body


async def test_set_show_list_delete_and_tenants(api: Api) -> None:
    assert (
        await api.call("PUT", "/api/v1/secrets/ACME_KEY", A, json={"value": CANARY})
    ).status_code == 200
    body = {
        "base_url": "https://llm.example/v1",
        "api_key_secret": "ACME_KEY",
        "default_model": "m1",
        "price_in": 1.5,
        "price_out": 6,
        "options": {"seed": 7, "reasoning_effort": "low"},
        "prices": {"m1": {"input": 2.0, "output": 8.0}},
        "token_limit": "max_completion_tokens",
    }
    r = await api.call("PUT", f"{PROVIDERS}/acme", A, json=body)
    assert r.status_code == 200, r.text
    assert clean(r.text)
    shown = await api.call("GET", f"{PROVIDERS}/acme", A)
    assert shown.status_code == 200 and clean(shown.text)
    got = shown.json()
    assert {k: got[k] for k in body} == {**body, "price_out": 6.0}
    assert got["updated_by"]
    listed = await api.call("GET", PROVIDERS, A)
    assert [p["name"] for p in listed.json()] == ["acme"] and clean(listed.text)
    # tenant B: sees nothing of A's, gets A's provider like a missing one, has its own
    assert (await api.call("GET", PROVIDERS, B)).json() == []
    theirs = await api.call("GET", f"{PROVIDERS}/acme", B)
    missing = await api.call("GET", f"{PROVIDERS}/nope", B)
    assert theirs.status_code == 404 and (theirs.content == missing.content)
    assert (await api.call("DELETE", f"{PROVIDERS}/acme", B)).status_code == 404
    own = await api.call("PUT", f"{PROVIDERS}/acme", B, json={"base_url": "http://b.example/v1"})
    assert own.status_code == 200
    assert (await api.call("GET", f"{PROVIDERS}/acme", A)).json()["base_url"] == body["base_url"]
    assert (await api.call("GET", f"{PROVIDERS}/acme", B)).json()["api_key_secret"] is None
    # roles: an operator of the tenant is refused
    assert (await api.call("GET", PROVIDERS, "tenant-a:operator")).status_code == 403
    assert (await api.call("DELETE", f"{PROVIDERS}/acme", A)).status_code == 204
    assert (await api.call("GET", f"{PROVIDERS}/acme", A)).status_code == 404
    assert (await api.call("GET", f"{PROVIDERS}/acme", B)).status_code == 200


@pytest.mark.parametrize(
    ("name", "body", "says"),
    [
        ("ok", {}, "base URL is required"),
        ("ok", {"base_url": "file:///etc/passwd"}, "http:// or https://"),
        ("ok", {"base_url": "javascript:alert(1)"}, "http:// or https://"),
        ("ok", {"base_url": "https://u:p@x.example/v1"}, "must not hold credentials"),
        ("ok", {"base_url": "https://x.example/v1", "api_key_secret": CANARY}, "NAME of a secret"),
        ("ok", {"base_url": "https://x.example/v1", "price_in": 1}, "both prices"),
        ("ok", {"base_url": "https://x.example/v1", "price_in": "1", "price_out": 1}, "number"),
        ("ok", {"base_url": "https://x.example/v1", "price_in": True, "price_out": 1}, "number"),
        ("ok", {"base_url": "https://x.example/v1", "default_model": ""}, "default_model"),
        ("ok", {"base_url": "https://x.example/v1", "extra": 1}, "unknown field 'extra'"),
        ("bad name", {"base_url": "https://x.example/v1"}, "provider name"),
        ("ok", {"base_url": "https://x.example/v1", "options": {"sede": 1}}, "'seed'"),
        ("ok", {"base_url": "https://x.example/v1", "options": {"top_k": 1}}, "options.top_k"),
        ("ok", {"base_url": "https://x.example/v1", "options": "seed=1"}, "is an object"),
        ("ok", {"base_url": "https://x.example/v1", "prices": {"m": {"input": 1}}}, "prices.m"),
        ("ok", {"base_url": "https://x.example/v1", "token_limit": "max_len"}, "token_limit is"),
        (
            "ok",
            {"base_url": "https://x.example/v1", "kind": "anthropic", "token_limit": "max_tokens"},
            "token_limit applies to kind openai only",
        ),
        (
            "ok",
            {
                "base_url": "https://x.example/v1",
                "kind": "openai-responses",
                "options": {"reasoning_effort": "low"},
            },
            "options.reasoning_effort",
        ),
    ],
)
async def test_bad_bodies_are_a_422_that_stores_nothing(
    api: Api, name: str, body: dict[str, object], says: str
) -> None:
    r = await api.call("PUT", f"{PROVIDERS}/{name}", A, json=body)
    assert r.status_code == 422, r.text
    assert says in r.text
    assert CANARY not in r.text  # a key pasted where a secret name goes is not echoed
    assert (await api.call("GET", PROVIDERS, A)).json() == []
    assert api.engine.store.audit_records() == []


async def test_a_step_started_over_the_api_uses_the_stored_provider(api: Api) -> None:
    api.configure(side_effects=TRUSTED)  # tenant-a may reach the model on 127.0.0.1
    with ScriptedLLM([text("hello", usage=(2000, 500))]) as llm:
        assert (
            await api.call("PUT", "/api/v1/secrets/ACME_KEY", A, json={"value": CANARY})
        ).status_code == 200
        body = {"base_url": llm.base_url, "api_key_secret": "ACME_KEY", "default_model": "m1",
                "price_in": 1.0, "price_out": 4.0}  # fmt: skip
        assert (await api.call("PUT", f"{PROVIDERS}/acme", A, json=body)).status_code == 200
        r = await api.call("POST", "/api/v1/workflows", "tenant-a:operator",
                           json={"definition": FLOW, "id": "e1"})  # fmt: skip
        assert r.status_code == 201, r.text
        await api.drain()
        view = await api.call("GET", "/api/v1/workflows/e1", "tenant-a:viewer")
        assert view.json()["status"] == "completed", view.text
        assert view.json()["output"]["cost"] == pytest.approx((2000 * 1.0 + 500 * 4.0) / 1e6)
        assert [c.authorization for c in llm.completions] == [f"Bearer {CANARY}"]
        history = await api.call("GET", "/api/v1/workflows/e1/history", "tenant-a:viewer")
        assert history.status_code == 200
        assert clean(view.text) and clean(history.text)
        # tenant B naming the same provider has none: a clear failure naming it
        r = await api.call("POST", "/api/v1/workflows", "tenant-b:operator",
                           json={"definition": FLOW, "id": "e1"})  # fmt: skip
        assert r.status_code == 201
        await api.drain()
        theirs = (await api.call("GET", "/api/v1/workflows/e1", "tenant-b:viewer")).json()
        assert theirs["status"] == "failed"
        assert theirs["activities"]["ask"]["error"]["type"] == "UnknownProvider"
        assert len(llm.completions) == 1
