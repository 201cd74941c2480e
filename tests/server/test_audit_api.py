"""The audit chain over the API: every mutating route appends exactly one record, with the
right action, target, tenant and actor (the calling key), in the transaction of the change;
a request that changes nothing (refused, replayed, not found) appends none; a tenant's
admin lists its own tenant's records only, and a viewer or operator is refused."""

from __future__ import annotations

from dataclasses import dataclass, field
from hashlib import sha256
from typing import Any

import pytest
from tests.server.conftest import APPROVAL_FLOW, Api

from wovyr.engine.quotas import Quotas
from wovyr.platform.audit import verify_chain
from wovyr.store.agent_memory import MemoryPut
from wovyr.store.audit import AuditRecord, payload_digest

pytestmark = pytest.mark.anyio

OP, ADMIN = "tenant-a:operator", "tenant-a:admin"
YAML = {"Content-Type": "application/yaml"}
FLOW = APPROVAL_FLOW.replace(
    "metadata: {name: purchase}", 'metadata: {name: purchase, version: "1"}'
)
SCHEDULES = "/api/v1/schedules"
RUNS = "/api/v1/workflows"
SECRETS = "/api/v1/secrets"
SECRET_VALUE = "hunter22"  # low entropy: neither it nor a hash of it may be recorded
AGENT = """\
apiVersion: wovyr/v1
kind: Agent
metadata: {name: helper, version: "2"}
spec: {model: m1}
"""


@dataclass
class Route:
    who: str
    method: str
    path: str
    action: str
    target: str | None  # None: checked by the test (a new key's id)
    body: dict[str, Any] | None = None
    kw: dict[str, Any] = field(default_factory=dict)
    status: int = 200


ARTIFACT = b"\x89PNG\r\n\x1a\n an audited image"
ARTIFACT_DIGEST = "sha256:" + sha256(ARTIFACT).hexdigest()

TRIGGER = """\
apiVersion: wovyr/v1
kind: Trigger
metadata: {name: orders}
spec:
  topic: orders.created
  start: {workflow: purchase}
"""

ROUTES = [
    Route(OP, "POST", "/api/v1/definitions", "definition.apply", "purchase@1",
          kw={"content": FLOW, "headers": YAML}, status=201),
    Route(OP, "POST", RUNS, "execution.start", "e1",
          {"workflow": "purchase", "id": "e1", "input": {"note": "secret-ish"}}, status=201),
    Route(OP, "POST", f"{RUNS}/e1/signal", "execution.signal", "e1",
          {"name": "go", "payload": {"x": 1}}),
    Route(OP, "POST", f"{RUNS}/e1/approve", "execution.approve", "e1",
          {"activity": "gate", "approved": True, "comment": "ok"}),
    Route(OP, "POST", "/api/v1/agents", "agent.apply", "helper@2",
          kw={"content": AGENT, "headers": YAML}, status=201),
    Route(OP, "POST", "/api/v1/agents/helper/runs", "execution.start", "r1",
          {"input": "a task", "id": "r1"}, kw={"headers": {"Prefer": "respond-async"}},
          status=202),
    Route(OP, "POST", RUNS, "execution.start", "e2", {"definition": FLOW, "id": "e2"},
          status=201),
    Route(OP, "POST", f"{RUNS}/e2/approve", "execution.deny", "e2",
          {"activity": "gate", "approved": False}),
    Route(OP, "POST", f"{RUNS}/e2/cancel", "execution.cancel", "e2", {"reason": "nope"}),
    Route(OP, "POST", f"{RUNS}/e2/rerun", "execution.rerun", "e3", {"id": "e3"}, status=201),
    Route(OP, "POST", SCHEDULES, "schedule.create", "s1",
          {"id": "s1", "workflow": "purchase", "cron": "0 3 * * *"}, status=201),
    Route(OP, "PATCH", f"{SCHEDULES}/s1", "schedule.update", "s1", {"every": "15m"}),
    Route(OP, "POST", f"{SCHEDULES}/s1/pause", "schedule.pause", "s1", {"note": "n"}),
    Route(OP, "POST", f"{SCHEDULES}/s1/resume", "schedule.resume", "s1"),
    Route(OP, "POST", f"{SCHEDULES}/s1/trigger", "schedule.trigger", "s1", status=201),
    Route(OP, "POST", f"{SCHEDULES}/s1/backfill", "schedule.backfill", "s1",
          {"start": "2029-12-31T23:00:00Z", "end": "2030-01-01T00:00:00Z"}, status=201),
    Route(OP, "DELETE", f"{SCHEDULES}/s1", "schedule.delete", "s1", status=204),
    Route(ADMIN, "POST", "/api/v1/admin/keys", "api_key.create", None,
          {"role": "viewer", "name": "ci"}, status=201),
    Route(ADMIN, "PATCH", "/api/v1/admin/policy", "tenant.policy", "tenant-a",
          {"shell": False}),
    Route(ADMIN, "PATCH", "/api/v1/admin/quotas", "tenant.quotas", "tenant-a",
          {"executions_per_day": 1000}),
    Route(ADMIN, "PUT", "/api/v1/admin/retention", "tenant.retention", "tenant-a",
          {"days": 90, "workflows": {"purchase": 7}}),
    Route(ADMIN, "PUT", "/api/v1/admin/limits/openai", "limits.set", "openai",
          {"limit": 500, "per": 60, "burst": 50}),
    Route(ADMIN, "DELETE", "/api/v1/admin/limits/openai", "limits.delete", "openai",
          status=204),
    Route(ADMIN, "PUT", f"{SECRETS}/API_TOKEN", "secret.set", "API_TOKEN",
          {"value": SECRET_VALUE}),
    Route(ADMIN, "PUT", f"{SECRETS}/API_TOKEN", "secret.set", "API_TOKEN",
          {"value": SECRET_VALUE + "-2"}),
    Route(ADMIN, "DELETE", f"{SECRETS}/API_TOKEN", "secret.delete", "API_TOKEN", status=204),
    Route(ADMIN, "PUT", "/api/v1/providers/p1", "provider.set", "p1",
          {"base_url": "https://llm.example/v1", "api_key_secret": "P1_KEY"}),
    Route(ADMIN, "DELETE", "/api/v1/providers/p1", "provider.delete", "p1", status=204),
    Route(ADMIN, "PUT", "/api/v1/mcp-servers/m1", "mcp.add", "m1",
          {"url": "https://mcp.example/mcp", "header_secrets": {"X-Key": "M1_KEY"}}),
    Route(ADMIN, "DELETE", "/api/v1/mcp-servers/m1", "mcp.remove", "m1", status=204),
    Route(OP, "POST", "/api/v1/batches", "batch.submit", "*",
          {"action": "cancel", "filter": {"status": "waiting"}}, status=201),
    Route(OP, "DELETE", "/api/v1/memory/notes/k1", "memory.delete", "notes/k1", status=204),
    Route(OP, "POST", "/api/v1/triggers", "trigger.apply", "orders",
          kw={"content": TRIGGER, "headers": YAML}, status=201),
    Route(OP, "POST", "/api/v1/events/orders.created", "execution.start", "events",
          {"note": "from an event"}, status=202),
    Route(OP, "DELETE", "/api/v1/triggers/orders", "trigger.delete", "orders", status=204),
    Route(ADMIN, "PUT", "/api/v1/webhooks/ops", "webhook.set", "ops",
          {"url": "https://hooks.example/x", "events": ["execution.failed"], "secrets": ["K"]}),
    Route(ADMIN, "DELETE", "/api/v1/webhooks/ops", "webhook.delete", "ops", status=204),
    Route(OP, "POST", "/api/v1/artifacts", "artifact.put", ARTIFACT_DIGEST,
          kw={"content": ARTIFACT, "headers": {"Content-Type": "image/png"}}, status=201),
]  # fmt: skip


def records(api: Api, tenant: str | None = None) -> list[AuditRecord]:
    return api.engine.store.audit_records(tenant=tenant, limit=10_000)


async def test_every_mutating_route_appends_exactly_one_record(api: Api) -> None:
    created_key = ""
    # what the memory delete removes (no route writes memory: workflows and agents do)
    api.engine.store.put_memory(
        MemoryPut("tenant-a", "notes", "k1", value={"n": 1}), api.engine.clock.now()
    )
    for route in ROUTES:
        before = records(api)
        kw = dict(route.kw)
        if route.body is not None:
            kw["json"] = route.body
        r = await api.call(route.method, route.path, route.who, **kw)
        assert r.status_code == route.status, (route.path, r.text)
        after = records(api)
        assert len(after) == len(before) + 1, route
        last = after[-1]
        role = route.who.split(":")[1]
        assert last.action == route.action
        assert last.actor == f"key:{api.key_ids[route.who]}/{role}"
        assert last.tenant == "tenant-a"
        if route.target is None:
            created_key = r.json()["id"]
            assert last.target == created_key
        elif route.target == "*":  # an id the server chose
            assert last.target == r.json()["id"]
        elif route.target == "events":  # the execution an event started
            assert last.target == r.json()["events"][0]["execution_id"]
        else:
            assert last.target == route.target
    # revoking the key just created, then the details that matter
    r = await api.call("DELETE", f"/api/v1/admin/keys/{created_key}", ADMIN)
    assert r.status_code == 200
    by_action = {rec.action: rec for rec in reversed(records(api))}  # the first of each
    assert by_action["api_key.revoke"].target == created_key
    assert by_action["execution.start"].details["input"] == payload_digest({"note": "secret-ish"})
    assert by_action["execution.signal"].details == {
        "name": "go",
        "payload": payload_digest({"x": 1}),
    }
    approve = by_action["execution.approve"].details
    assert approve["by"] == "tenant-a-operator"  # the approver identity the event records
    assert approve["comment"] == payload_digest("ok")
    text = str([rec.to_dict() for rec in records(api)])
    assert "secret-ish" not in text and "'ok'" not in text  # payloads only as hashes
    sets = [rec for rec in records(api) if rec.action == "secret.set"]
    assert [rec.details for rec in sets] == [{"key_version": 1}, {"key_version": 1}]
    for value in (SECRET_VALUE, SECRET_VALUE + "-2"):
        assert value not in text
        assert (
            payload_digest(value)[7:] not in text and sha256(value.encode()).hexdigest() not in text
        )
    assert verify_chain(api.engine.store, None).ok


async def test_requests_that_change_nothing_append_nothing(api: Api) -> None:
    body = {"definition": FLOW, "id": "same"}
    assert (await api.call("POST", RUNS, OP, json=body)).status_code == 201
    count = len(records(api))
    assert (await api.call("POST", RUNS, OP, json=body)).status_code == 200  # a replay
    assert (
        await api.call("POST", f"{RUNS}/nope/signal", OP, json={"name": "x"})
    ).status_code == 404
    other = await api.call("POST", f"{RUNS}/same/signal", "tenant-b:operator", json={"name": "x"})
    assert other.status_code == 404  # another tenant's execution
    assert (
        await api.call("POST", f"{RUNS}/same/signal", "tenant-a:viewer", json={"name": "x"})
    ).status_code == 403
    assert (await api.call("DELETE", f"{SECRETS}/NOPE", ADMIN)).status_code == 404
    put = await api.call("PUT", f"{SECRETS}/MINE", "tenant-b:admin", json={"value": "value-of-b"})
    assert put.status_code == 200
    count += 1  # tenant-b's set; its secret is missing for tenant-a:
    assert (await api.call("DELETE", f"{SECRETS}/MINE", ADMIN)).status_code == 404
    assert (await api.call("PUT", f"{SECRETS}/BAD", ADMIN, json={"value": 1})).status_code == 422
    assert len(records(api)) == count


async def test_a_start_refused_by_a_quota_leaves_no_record(api: Api) -> None:
    api.engine.for_tenant("tenant-a").set_quotas(Quotas(executions_per_day=1), by="test")
    assert records(api) == []  # set without an actor: the system's own (a test's) change
    assert (await api.call("POST", RUNS, OP, json={"definition": FLOW})).status_code == 201
    refused = await api.call("POST", RUNS, OP, json={"definition": FLOW})
    assert refused.status_code == 429
    assert [r.action for r in records(api)] == ["execution.start"]


async def test_an_admin_lists_its_own_tenant_only(api: Api) -> None:
    for who in (OP, "tenant-b:operator", OP):
        assert (await api.call("POST", RUNS, who, json={"definition": FLOW})).status_code == 201
    for who in ("tenant-a:viewer", OP):
        refused = await api.call("GET", "/api/v1/audit", who)
        assert refused.status_code == 403
    assert (await api.call("GET", "/api/v1/audit")).status_code == 401
    mine = (await api.call("GET", "/api/v1/audit", ADMIN)).json()
    assert [i["seq"] for i in mine["items"]] == [1, 3] and mine["next_after"] is None
    assert {i["tenant"] for i in mine["items"]} == {"tenant-a"}
    assert "prev_hash" not in mine["items"][0]  # the hash of another tenant's record, maybe
    theirs = (await api.call("GET", "/api/v1/audit", "tenant-b:admin")).json()
    assert [i["seq"] for i in theirs["items"]] == [2]
    page = (await api.call("GET", "/api/v1/audit?limit=1", ADMIN)).json()
    assert [i["seq"] for i in page["items"]] == [1] and page["next_after"] == 1
    rest = (await api.call("GET", "/api/v1/audit?after=1", ADMIN)).json()
    assert [i["seq"] for i in rest["items"]] == [3]
    late = (await api.call("GET", "/api/v1/audit?since=2031-01-01T00:00:00Z", ADMIN)).json()
    assert late["items"] == []
    bad = await api.call("GET", "/api/v1/audit?limit=0", ADMIN)
    assert bad.status_code == 422


async def test_the_table_covers_every_mutating_route(api: Api) -> None:
    """A new POST/PATCH/PUT/DELETE route must be added to ROUTES (and so be audited)."""
    spec = (await api.client.get("/openapi.json")).json()
    mutating = {
        (method.upper(), path)
        for path, items in spec["paths"].items()
        for method in items
        if method.upper() != "GET"
    }
    ids = {
        "e1": "{execution_id}",
        "e2": "{execution_id}",
        "s1": "{schedule_id}",
        "API_TOKEN": "{name}",
        "p1": "{name}",
        "m1": "{name}",
        "helper": "{agent}",
        "notes": "{namespace}",
        "k1": "{key}",
        "openai": "{key}",
        "orders": "{name}",
        "orders.created": "{topic}",
        "ops": "{name}",
    }
    covered = {("DELETE", "/api/v1/admin/keys/{key_id}")}  # revoked after the table
    # signed, not keyed: what it starts is audited as the trigger (test_triggers_api.py)
    covered.add(("POST", "/api/v1/hooks/{hook_id}"))
    # a read with a body (a query's arguments): answered from a replay, it records nothing
    covered.add(("POST", "/api/v1/workflows/{execution_id}/query"))
    for route in ROUTES:
        parts = [ids.get(part, part) for part in route.path.split("?")[0].split("/")]
        covered.add((route.method, "/".join(parts)))
    assert mutating == covered
