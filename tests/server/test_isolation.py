"""Tenant isolation across EVERY route: the OpenAPI document is walked, and each operation is
called with tenant A's ids by tenant B (every role), with no key, a malformed key, an
unknown key, A's revoked key and a role too low. Tenant B must never receive A's data (A's
objects are seeded with canary strings that no response may contain), another tenant's
object gets exactly the 404 of a missing one, and A's objects are unchanged afterwards."""

from __future__ import annotations

import itertools
import re
from typing import Any

import httpx
import pytest
from tests.server.conftest import APPROVAL_FLOW, Api

from wovyr.definition.parse import load_definition
from wovyr.engine.memory import TenantMemory

pytestmark = pytest.mark.anyio

CANARY = "canary-7f3a"
A_FLOW = APPROVAL_FLOW.replace("name: purchase", f"name: {CANARY}-flow")
B_FLOW = APPROVAL_FLOW.replace("name: purchase", "name: b-flow")
_fresh = itertools.count()
B_DOCUMENT = load_definition(B_FLOW).model_dump(by_alias=True, mode="json", exclude_defaults=True)
A_AGENT = f"""\
apiVersion: wovyr/v1
kind: Agent
metadata: {{name: {CANARY}-agent}}
spec: {{model: m1, instructions: {CANARY}}}
"""
B_AGENT = {"apiVersion": "wovyr/v1", "kind": "Agent", "metadata": {"name": "b-agent"}}

# The role each operation needs: the test is the spec. A route missing here fails the test.
REQUIRED_ROLE = {
    ("POST", "/api/v1/workflows"): "operator",
    ("GET", "/api/v1/workflows"): "viewer",
    ("GET", "/api/v1/workflows/{execution_id}"): "viewer",
    ("GET", "/api/v1/workflows/{execution_id}/stream"): "viewer",
    ("POST", "/api/v1/workflows/{execution_id}/cancel"): "operator",
    ("GET", "/api/v1/workflows/{execution_id}/history"): "viewer",
    ("GET", "/api/v1/workflows/{execution_id}/activities/{activity}/items"): "viewer",
    ("POST", "/api/v1/workflows/{execution_id}/signal"): "operator",
    ("POST", "/api/v1/workflows/{execution_id}/query"): "viewer",
    ("POST", "/api/v1/workflows/{execution_id}/rerun"): "operator",
    ("GET", "/api/v1/workflows/{execution_id}/logs"): "viewer",
    ("POST", "/api/v1/workflows/{execution_id}/approve"): "operator",
    ("POST", "/api/v1/batches"): "operator",
    ("GET", "/api/v1/batches"): "viewer",
    ("GET", "/api/v1/batches/{batch_id}"): "viewer",
    ("POST", "/api/v1/definitions"): "operator",
    ("GET", "/api/v1/definitions"): "viewer",
    ("GET", "/api/v1/definitions/{name}"): "viewer",
    ("GET", "/api/v1/definitions/{name}/{version}"): "viewer",
    ("POST", "/api/v1/agents"): "operator",
    ("GET", "/api/v1/agents"): "viewer",
    ("GET", "/api/v1/agents/{agent}"): "viewer",
    ("POST", "/api/v1/agents/{agent}/runs"): "operator",
    ("GET", "/api/v1/agents/runs/{run_id}"): "viewer",
    ("POST", "/api/v1/schedules"): "operator",
    ("GET", "/api/v1/schedules"): "viewer",
    ("GET", "/api/v1/schedules/{schedule_id}"): "viewer",
    ("PATCH", "/api/v1/schedules/{schedule_id}"): "operator",
    ("DELETE", "/api/v1/schedules/{schedule_id}"): "operator",
    ("POST", "/api/v1/schedules/{schedule_id}/pause"): "operator",
    ("POST", "/api/v1/schedules/{schedule_id}/resume"): "operator",
    ("POST", "/api/v1/schedules/{schedule_id}/trigger"): "operator",
    ("POST", "/api/v1/schedules/{schedule_id}/backfill"): "operator",
    ("GET", "/api/v1/admin/keys"): "admin",
    ("POST", "/api/v1/admin/keys"): "admin",
    ("DELETE", "/api/v1/admin/keys/{key_id}"): "admin",
    ("GET", "/api/v1/admin/policy"): "admin",
    ("PATCH", "/api/v1/admin/policy"): "admin",
    ("GET", "/api/v1/admin/quotas"): "admin",
    ("PATCH", "/api/v1/admin/quotas"): "admin",
    ("GET", "/api/v1/admin/retention"): "admin",
    ("PUT", "/api/v1/admin/retention"): "admin",
    ("GET", "/api/v1/admin/limits"): "admin",
    ("GET", "/api/v1/admin/limits/{key}"): "admin",
    ("PUT", "/api/v1/admin/limits/{key}"): "admin",
    ("DELETE", "/api/v1/admin/limits/{key}"): "admin",
    ("GET", "/api/v1/flow"): "viewer",
    ("GET", "/api/v1/audit"): "admin",
    ("GET", "/api/v1/secrets"): "admin",
    ("GET", "/api/v1/secrets/{name}"): "admin",
    ("PUT", "/api/v1/secrets/{name}"): "admin",
    ("DELETE", "/api/v1/secrets/{name}"): "admin",
    ("GET", "/api/v1/providers"): "admin",
    ("GET", "/api/v1/providers/{name}"): "admin",
    ("PUT", "/api/v1/providers/{name}"): "admin",
    ("DELETE", "/api/v1/providers/{name}"): "admin",
    ("GET", "/api/v1/mcp-servers"): "admin",
    ("GET", "/api/v1/mcp-servers/{name}"): "admin",
    ("PUT", "/api/v1/mcp-servers/{name}"): "admin",
    ("DELETE", "/api/v1/mcp-servers/{name}"): "admin",
    ("GET", "/api/v1/memory/{namespace}"): "viewer",
    ("GET", "/api/v1/memory/{namespace}/{key}"): "viewer",
    ("DELETE", "/api/v1/memory/{namespace}/{key}"): "operator",
    ("GET", "/metrics"): "viewer",
    ("POST", "/api/v1/triggers"): "operator",
    ("GET", "/api/v1/triggers"): "viewer",
    ("GET", "/api/v1/triggers/{name}"): "viewer",
    ("DELETE", "/api/v1/triggers/{name}"): "operator",
    ("POST", "/api/v1/events/{topic}"): "operator",
    ("POST", "/api/v1/hooks/{hook_id}"): "",  # signed, not keyed
    ("GET", "/api/v1/events"): "viewer",
    ("GET", "/api/v1/webhooks"): "admin",
    ("GET", "/api/v1/webhooks/{name}"): "admin",
    ("PUT", "/api/v1/webhooks/{name}"): "admin",
    ("DELETE", "/api/v1/webhooks/{name}"): "admin",
    ("GET", "/api/v1/deliveries"): "viewer",
    ("GET", "/api/v1/deliveries/{delivery_id}"): "viewer",
    ("POST", "/api/v1/artifacts"): "operator",
    ("GET", "/api/v1/artifacts"): "viewer",
    ("GET", "/api/v1/artifacts/{digest}"): "viewer",
    ("GET", "/healthz"): "",
    ("GET", "/readyz"): "",
}


# A PUT names the secret it sets: tenant B setting one of the same name sets its own (so
# the test has B set another name, then checks A's secret is untouched).
_PUT_SECRET = ("PUT", "/api/v1/secrets/{name}")
A_SECRET = "A_SECRET"
# The same for a provider: B setting one sets its own.
_PUT_PROVIDER = ("PUT", "/api/v1/providers/{name}")
A_PROVIDER = "a-provider"
# And for an MCP server.
_PUT_MCP = ("PUT", "/api/v1/mcp-servers/{name}")
A_MCP = "a-mcp"
# And for a webhook endpoint.
_PUT_WEBHOOK = ("PUT", "/api/v1/webhooks/{name}")
A_WEBHOOK = "a-webhook"
A_TRIGGER = "a-trigger"
A_TRIGGER_DOC = f"""\
apiVersion: wovyr/v1
kind: Trigger
metadata: {{name: {A_TRIGGER}}}
spec:
  topic: a-topic
  webhook: {{secrets: [A_SECRET]}}
  start: {{workflow: {CANARY}-flow}}
  input: {{note: {CANARY}}}
"""
B_TRIGGER = {
    "apiVersion": "wovyr/v1",
    "kind": "Trigger",
    "metadata": {"name": "b-trigger"},
    "spec": {"topic": "b-topic", "start": {"workflow": "b-flow"}},
}
# And for a rate-limit bucket.
_PUT_LIMIT = ("PUT", "/api/v1/admin/limits/{key}")
A_LIMIT = "a-limit"


def body_for(method: str, path: str) -> Any:
    """A valid body, so each call gets past validation to the tenant lookup."""
    n = next(_fresh)
    if (method, path) == ("POST", "/api/v1/workflows"):
        return {"definition": B_FLOW, "input": {"note": "from b"}}
    if (method, path) == ("POST", "/api/v1/schedules"):
        return {"id": f"b-sched-{n}", "definition": B_FLOW, "every": "1h"}
    if (method, path) == ("POST", "/api/v1/definitions"):
        return B_DOCUMENT
    if (method, path) == ("POST", "/api/v1/agents"):
        return B_AGENT
    if (method, path) == ("POST", "/api/v1/agents/{agent}/runs"):
        return {"input": "from b"}
    if (method, path) == ("POST", "/api/v1/batches"):
        return {"action": "signal", "filter": {"workflow": "b-flow"}, "signal": "go"}
    if path.endswith("/signal"):
        return {"name": "go", "payload": "b"}
    if path.endswith("/query"):
        return {"name": "progress", "args": {}}
    if path.endswith("/rerun"):
        return {"input": {"note": "from b"}}
    if path.endswith("/approve"):
        return {"activity": "gate", "approved": False, "comment": "b"}
    if path.endswith("/backfill"):
        return {"start": "2029-12-31T00:00:00Z", "end": "2030-01-01T00:00:00Z"}
    if (method, path) == ("PATCH", "/api/v1/admin/policy"):
        return {"shell_cpu_seconds": 30}  # tightening: allowed
    if (method, path) == ("PATCH", "/api/v1/admin/quotas"):
        return {"executions_per_day": 100_000}  # setting where none is: allowed
    if (method, path) == ("PUT", "/api/v1/admin/retention"):
        return {"days": 30}  # tenant b's own retention: never tenant a's
    if method == "PATCH":
        return {"note": "b was here"}
    if path.endswith(("/pause", "/resume")):
        return {"note": "b"}
    if (method, path) == _PUT_SECRET:
        return {"value": "b's own value"}
    if (method, path) == _PUT_PROVIDER:
        return {"base_url": "http://b.example/v1", "api_key_secret": "B_KEY"}
    if (method, path) == _PUT_MCP:
        return {"url": "https://b.example/mcp", "header_secrets": {"X-Key": "B_KEY"}}
    if (method, path) == _PUT_LIMIT:
        return {"limit": 7, "per": 60}
    if (method, path) == _PUT_WEBHOOK:
        return {"url": "https://b.example/hook", "events": ["execution.failed"], "secrets": ["B"]}
    if (method, path) == ("POST", "/api/v1/triggers"):
        return B_TRIGGER
    if (method, path) == ("POST", "/api/v1/artifacts"):
        return b"\x89PNG\r\n\x1a\n tenant b's own image " + str(n).encode()
    if path.startswith(("/api/v1/events/", "/api/v1/hooks/")):
        return {"note": "from b"}
    if (method, path) == ("POST", "/api/v1/admin/keys"):
        return {"role": "viewer", "name": f"b-{n}"}
    return None


async def seed_tenant_a(api: Api) -> dict[str, str]:
    a = "tenant-a:operator"
    r = await api.call(
        "POST",
        "/api/v1/workflows",
        a,
        json={"definition": A_FLOW, "input": {"note": CANARY}, "id": f"{CANARY}-exec"},
    )
    assert r.status_code == 201, r.text
    await api.drain()
    r = await api.call(
        "POST",
        "/api/v1/schedules",
        a,
        json={
            "id": f"{CANARY}-sched",
            "definition": A_FLOW,
            "every": "1h",
            "input": {"note": CANARY},
            "note": CANARY,
        },
    )
    assert r.status_code == 201, r.text
    key = await api.call(
        "POST", "/api/v1/admin/keys", "tenant-a:admin", json={"role": "viewer", "name": CANARY}
    )
    assert key.status_code == 201
    applied = await api.call(
        "POST",
        "/api/v1/definitions",
        a,
        content=A_FLOW,
        headers={"Content-Type": "application/yaml"},
    )
    assert applied.status_code == 201, applied.text
    agent = await api.call(
        "POST", "/api/v1/agents", a, content=A_AGENT, headers={"Content-Type": "application/yaml"}
    )
    assert agent.status_code == 201, agent.text
    run = await api.call(
        "POST",
        f"/api/v1/agents/{CANARY}-agent/runs",
        a,
        json={"input": CANARY, "id": f"{CANARY}-run"},
        headers={"Prefer": "respond-async"},
    )
    assert run.status_code == 202, run.text
    secret = await api.call(
        "PUT", f"/api/v1/secrets/{A_SECRET}", "tenant-a:admin", json={"value": CANARY}
    )
    assert secret.status_code == 200, secret.text
    provider = await api.call(
        "PUT",
        f"/api/v1/providers/{A_PROVIDER}",
        "tenant-a:admin",
        json={"base_url": f"http://{CANARY}.example/v1", "api_key_secret": A_SECRET},
    )
    assert provider.status_code == 200, provider.text
    server = await api.call(
        "PUT",
        f"/api/v1/mcp-servers/{A_MCP}",
        "tenant-a:admin",
        json={"url": f"https://{CANARY}.example/mcp", "header_secrets": {"X-Key": A_SECRET}},
    )
    assert server.status_code == 200, server.text
    memory = TenantMemory(api.engine.store, "tenant-a", api.engine.clock)
    memory.put(f"{CANARY}-ns", f"{CANARY}-key", CANARY, CANARY, None, None, None, None)
    batch = await api.call(
        "POST",
        "/api/v1/batches",
        a,
        json={"action": "signal", "filter": {"workflow": f"{CANARY}-flow"}, "signal": CANARY},
    )
    assert batch.status_code == 201, batch.text
    limit = await api.call(
        "PUT", f"/api/v1/admin/limits/{A_LIMIT}", "tenant-a:admin", json={"limit": 3, "per": 1}
    )
    assert limit.status_code == 200, limit.text
    image = b"\x89PNG\r\n\x1a\n" + CANARY.encode()
    artifact = await api.call(
        "POST", "/api/v1/artifacts", a, content=image, headers={"Content-Type": "image/png"}
    )
    assert artifact.status_code == 201, artifact.text
    return {
        "namespace": f"{CANARY}-ns",
        "key": f"{CANARY}-key",
        "batch_id": batch.json()["id"],
        "execution_id": f"{CANARY}-exec",
        "schedule_id": f"{CANARY}-sched",
        "key_id": key.json()["id"],
        "name": f"{CANARY}-flow",
        "version": "1",
        "secret": A_SECRET,
        "provider": A_PROVIDER,
        "mcp": A_MCP,
        "limit": A_LIMIT,
        "digest": artifact.json()["digest"],
        "agent": f"{CANARY}-agent",
        "run_id": f"{CANARY}-run",
        "activity": "prepare",
        **await seed_events(api),
    }


async def seed_events(api: Api) -> dict[str, str]:
    """Tenant A's trigger (with a webhook), webhook endpoint and a delivery."""
    a, admin = "tenant-a:operator", "tenant-a:admin"
    yaml = {"Content-Type": "application/yaml"}
    r = await api.call("POST", "/api/v1/triggers", a, content=A_TRIGGER_DOC, headers=yaml)
    assert r.status_code == 201, r.text
    hook_id = r.json()["webhook_path"].rsplit("/", 1)[1]
    endpoint = {"url": "https://a.example/hook", "events": ["execution.cancelled"]}
    r = await api.call(
        "PUT", f"/api/v1/webhooks/{A_WEBHOOK}", admin, json={**endpoint, "secrets": [A_SECRET]}
    )
    assert r.status_code == 200, r.text
    gone = {"definition": A_FLOW, "input": {"note": CANARY}, "id": f"{CANARY}-gone"}
    assert (await api.call("POST", "/api/v1/workflows", a, json=gone)).status_code == 201
    r = await api.call("POST", f"/api/v1/workflows/{CANARY}-gone/cancel", a)
    assert r.status_code == 200, r.text
    [delivery] = (await api.call("GET", "/api/v1/deliveries", a)).json()["items"]
    return {
        "trigger": A_TRIGGER,
        "topic": "a-topic",
        "hook_id": hook_id,
        "webhook": A_WEBHOOK,
        "delivery_id": delivery["id"],
    }


def operations(spec: dict[str, Any]) -> list[tuple[str, str, bool]]:
    ops = []
    for path, items in spec["paths"].items():
        for method, op in items.items():
            ops.append((method.upper(), path, bool(op.get("security"))))
    return ops


def fill(path: str, ids: dict[str, str]) -> str:
    if path.startswith("/api/v1/secrets/"):
        ids = {**ids, "name": ids["secret"].replace("-", "_")}  # a valid secret name
    if path.startswith("/api/v1/providers/"):
        ids = {**ids, "name": ids["provider"]}
    if path.startswith("/api/v1/mcp-servers/"):
        ids = {**ids, "name": ids["mcp"]}
    if path.startswith("/api/v1/admin/limits/"):
        ids = {**ids, "key": ids["limit"]}
    if path.startswith("/api/v1/triggers/"):
        ids = {**ids, "name": ids["trigger"]}
    if path.startswith("/api/v1/webhooks/"):
        ids = {**ids, "name": ids["webhook"]}
    return re.sub(r"\{(\w+)\}", lambda m: ids[m.group(1)], path)


def assert_clean(response: httpx.Response, context: str) -> None:
    assert CANARY not in response.text, f"{context}: tenant A's data leaked: {response.text[:300]}"
    assert response.status_code < 500, f"{context}: {response.status_code} {response.text[:300]}"


async def test_every_route_isolates_tenants(api: Api) -> None:
    spec = (await api.client.get("/openapi.json")).json()
    ops = operations(spec)
    assert {(m, p) for m, p, _ in ops} == set(REQUIRED_ROLE), "update REQUIRED_ROLE"
    a_ids = await seed_tenant_a(api)
    missing_ids = {k: f"missing-{k}" for k in a_ids}
    a_before = (
        await api.call("GET", f"/api/v1/workflows/{a_ids['execution_id']}", "tenant-a:viewer")
    ).json()

    for method, path, secured in ops:
        role = REQUIRED_ROLE[(method, path)]
        assert secured == bool(role), f"{method} {path}: security does not match its role"
        own = {
            _PUT_SECRET: {"secret": "B_OWN"},
            _PUT_PROVIDER: {"provider": "b-own"},
            _PUT_MCP: {"mcp": "b-own"},
            _PUT_LIMIT: {"limit": "b-own"},
            _PUT_WEBHOOK: {"webhook": "b-own"},
        }
        url = fill(path, {**a_ids, **own.get((method, path), {})})

        async def call(
            headers: dict[str, str], url: str = url, method: str = method, path: str = path
        ) -> httpx.Response:
            body = body_for(method, path)
            kw: dict[str, Any] = {"headers": headers}
            if isinstance(body, bytes):
                kw["content"], kw["headers"] = body, {**headers, "Content-Type": "image/png"}
            elif body is not None:
                kw["json"] = body
            return await api.client.request(method, url, **kw)

        if not secured:
            r = await call({})
            assert_clean(r, f"{method} {path} anonymous")
            continue
        bad_headers = {
            "no key": {},
            "malformed": {"Authorization": "Basic dXNlcjpwYXNz"},
            "unknown key": {"Authorization": "Bearer wvr_" + "x" * 43},
            "not a token": {"Authorization": "Bearer " + "y" * 600},
            "revoked key": api.as_("tenant-a:revoked"),
        }
        for label, headers in bad_headers.items():
            r = await call(headers)
            assert r.status_code == 401, f"{method} {path} {label}: {r.status_code}"
            assert r.headers["content-type"] == "application/problem+json"
            assert_clean(r, f"{method} {path} {label}")
        for low in ("viewer", "operator"):
            if ROLES_RANK[low] < ROLES_RANK[role]:
                for tenant in ("tenant-a", "tenant-b"):
                    r = await call(api.as_(f"{tenant}:{low}"))
                    assert r.status_code == 403, f"{method} {path} as {tenant}:{low}"
                    assert_clean(r, f"{method} {path} as {tenant}:{low}")
        for b_role in ("viewer", "operator", "admin"):
            if ROLES_RANK[b_role] < ROLES_RANK[role]:
                continue
            who = f"tenant-b:{b_role}"
            r = await call(api.as_(who))
            assert_clean(r, f"{method} {path} as {who}")
            if (method, path) in (_PUT_SECRET, _PUT_PROVIDER, _PUT_MCP, _PUT_LIMIT, _PUT_WEBHOOK):
                assert r.status_code == 200, f"{method} {path} as {who}: {r.text[:200]}"
            elif "{" in path:
                assert r.status_code == 404, f"{method} {path} as {who}: {r.status_code}"
                gone = await call(api.as_(who), fill(path, missing_ids))
                assert (gone.status_code, gone.content) == (r.status_code, r.content)
            else:
                assert r.status_code in (200, 201), f"{method} {path} as {who}: {r.text[:200]}"

    # A's objects are exactly as they were.
    a = "tenant-a:admin"
    after = (await api.call("GET", f"/api/v1/workflows/{a_ids['execution_id']}", a)).json()
    assert after["event_count"] == a_before["event_count"] and after["status"] == "waiting"
    sched = (await api.call("GET", f"/api/v1/schedules/{a_ids['schedule_id']}", a)).json()
    assert sched["paused"] is False and sched["note"] == CANARY and sched["fired"] == 0
    secret = (await api.call("GET", f"/api/v1/secrets/{A_SECRET}", a)).json()
    assert secret["version"] == 1
    assert api.engine.secrets is not None
    assert api.engine.secrets.resolve_secret("tenant-a", A_SECRET) == CANARY
    provider = (await api.call("GET", f"/api/v1/providers/{A_PROVIDER}", a)).json()
    assert provider["base_url"] == f"http://{CANARY}.example/v1"
    server = (await api.call("GET", f"/api/v1/mcp-servers/{A_MCP}", a)).json()
    assert server["url"] == f"https://{CANARY}.example/mcp"
    item = (await api.call("GET", f"/api/v1/memory/{CANARY}-ns/{CANARY}-key", a)).json()
    assert item["value"] == CANARY and item["version"] == 1
    limit = (await api.call("GET", f"/api/v1/admin/limits/{A_LIMIT}", a)).json()
    assert (limit["per_second"], limit["burst"]) == (3, 3)
    trigger = (await api.call("GET", f"/api/v1/triggers/{A_TRIGGER}", a)).json()
    assert trigger["document"]["spec"]["input"] == {"note": CANARY}
    webhook = (await api.call("GET", f"/api/v1/webhooks/{A_WEBHOOK}", a)).json()
    assert webhook["url"] == "https://a.example/hook"
    a_events = (await api.call("GET", "/api/v1/events", a)).json()["items"]
    assert a_events == []  # B's events went to B's own record
    keys = (await api.call("GET", "/api/v1/admin/keys", a)).json()
    assert [k["revoked_at"] for k in keys if k["id"] == a_ids["key_id"]] == [None]
    # ... and A still sees its own data (the canary is real).
    listed = await api.call("GET", "/api/v1/workflows", "tenant-a:viewer")
    assert CANARY in listed.text


ROLES_RANK = {"": -1, "viewer": 0, "operator": 1, "admin": 2}


async def test_owner_binding_survives_a_new_app(engine: Any, settings: Any) -> None:
    """After a restart (a new app over the same store) tenant B still sees nothing of A's."""
    from tests.server.conftest import serve

    async with serve(engine, settings) as first:
        a_ids = await seed_tenant_a(first)
        tokens = dict(first.tokens)
    async with serve(engine, settings) as second:
        second.tokens.update(tokens)  # the keys are durable too
        r = await second.call("GET", f"/api/v1/workflows/{a_ids['execution_id']}", "tenant-b:admin")
        assert r.status_code == 404
        listed = await second.call("GET", "/api/v1/workflows", "tenant-b:admin")
        assert CANARY not in listed.text
        mine = await second.call("GET", "/api/v1/workflows", "tenant-a:viewer")
        assert CANARY in mine.text


async def test_the_same_ids_and_names_in_two_tenants_are_independent(api: Api) -> None:
    """Ids are per tenant: B starts, signals, cancels and schedules with A's very ids and
    names and gets objects of its own; A's are untouched."""
    a_ids = await seed_tenant_a(api)
    eid, sid = a_ids["execution_id"], a_ids["schedule_id"]
    b = "tenant-b:operator"
    r = await api.call(
        "POST", "/api/v1/workflows", b, json={"definition": B_FLOW, "id": eid, "input": {}}
    )
    assert r.status_code == 201 and r.json()["id"] == eid
    assert CANARY not in r.text.replace(eid, ""), "B's start shows nothing of A's"
    again = await api.call("POST", "/api/v1/workflows", b, json={"definition": B_FLOW, "id": eid})
    assert again.status_code == 200 and again.json()["workflow"] == "b-flow"
    await api.drain()
    r = await api.call("POST", f"/api/v1/workflows/{eid}/signal", b, json={"name": "go"})
    assert r.status_code in (200, 202), r.text
    r = await api.call("POST", f"/api/v1/workflows/{eid}/cancel", b)
    assert r.status_code in (200, 202), r.text
    mine = (await api.call("GET", f"/api/v1/workflows/{eid}", b)).json()
    assert mine["status"] == "cancelled" and mine["workflow"] == "b-flow"
    r = await api.call(
        "POST", "/api/v1/schedules", b, json={"id": sid, "definition": B_FLOW, "every": "1h"}
    )
    assert r.status_code == 201, r.text
    assert CANARY not in r.text.replace(sid, ""), "B's schedule shows nothing of A's"
    trig = await api.call("POST", f"/api/v1/schedules/{sid}/trigger", b)
    assert trig.status_code in (200, 201, 202), trig.text
    a = "tenant-a:admin"
    theirs = (await api.call("GET", f"/api/v1/workflows/{eid}", a)).json()
    assert theirs["status"] == "waiting" and theirs["input"] == {"note": CANARY}
    sched = (await api.call("GET", f"/api/v1/schedules/{sid}", a)).json()
    assert sched["fired"] == 0 and sched["note"] == CANARY


async def test_ids_outside_the_alphabet_are_refused(api: Api) -> None:
    for bad in ("a/b", "new\nline", "cr\r\nlf", "x" * 201, " lead", "tab\tbed"):
        r = await api.call(
            "POST", "/api/v1/workflows", "tenant-b:operator", json={"definition": B_FLOW, "id": bad}
        )
        assert r.status_code == 422, (bad, r.status_code, r.text)
        assert r.headers["content-type"] == "application/problem+json"
    listed = await api.call("GET", "/api/v1/workflows", "tenant-b:viewer")
    assert listed.json()["items"] == []
