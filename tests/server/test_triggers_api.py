"""Event triggers over the API on every store: a `kind: Trigger` document applied per
tenant; `POST /api/v1/events/{topic}` starts (filter, input mapping, dedup with a TTL, a
rate limit, the tenant's quotas) or signals executions; a trigger's webhook URL takes only
requests signed with one of its secrets (wrong, expired or replayed: 401, nothing started);
an oversized, non-JSON or filtered payload starts nothing and is recorded; the events are
listed newest first by cursor; another tenant sees and triggers nothing of it."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from tests.server.conftest import Api

from wovyr.activities.outbound import sign_body
from wovyr.engine.quotas import Quotas
from wovyr.engine.triggers import MAX_EVENT_BYTES

pytestmark = pytest.mark.anyio
OP_A, OP_B, VIEW_A, ADMIN_A = (
    "tenant-a:operator",
    "tenant-b:operator",
    "tenant-a:viewer",
    "tenant-a:admin",
)
YAML = {"Content-Type": "application/yaml"}

FLOW = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: fulfil}
inputs:
  order: {type: integer}
activities:
  - {id: a, set: {order: "${{ inputs.order }}"}}
output: {order: "${{ activities.a.output.order }}"}
"""

WAITER = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: waiter}
activities:
  - {id: gate, wait: {signal: paid}}
output: {paid: "${{ activities.gate.output }}"}
"""

TRIGGER = """
apiVersion: wovyr/v1
kind: Trigger
metadata: {name: orders}
spec:
  topic: orders.created
  filter: "${{ payload.total > 100 }}"
  start: {workflow: fulfil}
  input: {order: "${{ payload.order }}"}
  dedup: {key: "${{ string(payload.order) }}", ttl: 1h}
"""

HOOKED = """
apiVersion: wovyr/v1
kind: Trigger
metadata: {name: gh}
spec:
  topic: github.push
  webhook: {secrets: [HOOK_NEW, HOOK_OLD], tolerance: 300}
  start: {workflow: fulfil}
  input: {order: "${{ payload.order }}"}
"""


async def setup(api: Api, *documents: str, who: str = OP_A) -> None:
    for flow in (FLOW, WAITER):
        r = await api.call("POST", "/api/v1/definitions", who, content=flow, headers=YAML)
        assert r.status_code == 201, r.text
    for document in documents:
        r = await api.call("POST", "/api/v1/triggers", who, content=document, headers=YAML)
        assert r.status_code == 201, r.text


async def send(api: Api, topic: str, payload: Any, who: str = OP_A) -> Any:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return await api.call("POST", f"/api/v1/events/{topic}", who, content=body)


async def executions(api: Api, who: str = OP_A) -> list[dict[str, Any]]:
    r = await api.call("GET", "/api/v1/workflows", who, params={"limit": 100})
    assert r.status_code == 200, r.text
    items: list[dict[str, Any]] = r.json()["items"]
    return items


async def test_an_event_starts_a_mapped_execution_once(api: Api) -> None:
    await setup(api, TRIGGER)
    r = await send(api, "orders.created", {"order": 7, "total": 150})
    assert r.status_code == 202, r.text
    [event] = r.json()["events"]
    assert (event["outcome"], event["trigger"], event["dedup_key"]) == ("started", "orders", "7")
    again = await send(api, "orders.created", {"order": 7, "total": 150})
    assert again.status_code == 202
    assert again.json()["events"][0]["outcome"] == "duplicate"
    assert again.json()["events"][0]["execution_id"] == event["execution_id"]
    await api.drain()
    [started] = await executions(api)
    assert started["id"] == event["execution_id"] and started["workflow"] == "fulfil"
    detail = await api.call("GET", f"/api/v1/workflows/{started['id']}", OP_A)
    assert detail.json()["output"] == {"order": 7}


async def test_the_dedup_key_expires(api: Api) -> None:
    await setup(api, TRIGGER)
    first = await send(api, "orders.created", {"order": 1, "total": 150})
    api.clock.advance(3601)
    later = await send(api, "orders.created", {"order": 1, "total": 150})
    assert later.json()["events"][0]["outcome"] == "started"
    assert later.json()["events"][0]["execution_id"] != first.json()["events"][0]["execution_id"]
    assert len(await executions(api)) == 2


async def test_what_starts_nothing_is_recorded(api: Api) -> None:
    await setup(api, TRIGGER)
    filtered = await send(api, "orders.created", {"order": 2, "total": 5})
    assert filtered.status_code == 202
    assert filtered.json()["events"][0]["outcome"] == "filtered"
    api.clock.advance(1)  # one event a second: the list's order is the order sent
    bad = await send(api, "orders.created", b"{not json")
    assert bad.status_code == 400
    api.clock.advance(1)
    huge = await send(api, "orders.created", {"pad": "x" * MAX_EVENT_BYTES})
    assert huge.status_code == 413
    assert "too large" in huge.json()["events"][0]["reason"]
    api.clock.advance(1)
    nobody = await send(api, "nobody.listens", {"a": 1})
    assert nobody.status_code == 404
    assert await executions(api) == []
    listed = await api.call("GET", "/api/v1/events", VIEW_A)
    outcomes = [e["outcome"] for e in listed.json()["items"]]
    assert outcomes == ["unmatched", "rejected", "rejected", "filtered"]
    assert all("pad" not in json.dumps(e) for e in listed.json()["items"])


async def test_an_expression_failure_is_recorded_not_raised(api: Api) -> None:
    await setup(api, TRIGGER)
    r = await send(api, "orders.created", {"total": 150})  # no order: the mapping fails
    assert r.status_code == 422
    assert r.json()["events"][0]["outcome"] == "failed"
    assert await executions(api) == []


async def test_the_rate_limit_holds_per_window(api: Api) -> None:
    limited = TRIGGER.replace("orders}", "limited}").replace(
        "  dedup:", "  rate: {limit: 2, per: 60}\n  dedup:"
    )
    await setup(api, limited)
    answers = [await send(api, "orders.created", {"order": i, "total": 200}) for i in range(3)]
    assert [a.status_code for a in answers] == [202, 202, 429]
    assert answers[2].json()["events"][0]["outcome"] == "limited"
    api.clock.advance(61)
    assert (await send(api, "orders.created", {"order": 9, "total": 200})).status_code == 202
    assert len(await executions(api)) == 3


async def test_the_tenants_quotas_hold_for_triggered_starts(api: Api) -> None:
    await setup(api, TRIGGER)
    api.engine.for_tenant("tenant-a").set_quotas(Quotas(executions_per_day=1), by="test")
    assert (await send(api, "orders.created", {"order": 1, "total": 200})).status_code == 202
    refused = await send(api, "orders.created", {"order": 2, "total": 200})
    assert refused.status_code == 429
    assert refused.json()["events"][0]["outcome"] == "limited"
    assert len(await executions(api)) == 1


async def test_an_event_signals_an_execution(api: Api) -> None:
    signal = """
apiVersion: wovyr/v1
kind: Trigger
metadata: {name: payments}
spec:
  topic: payments
  signal: {execution: "${{ payload.execution }}", name: paid}
  input: {amount: "${{ payload.amount }}"}
"""
    await setup(api, signal)
    r = await api.call(
        "POST", "/api/v1/workflows", OP_A, json={"workflow": "waiter", "id": "w1", "input": {}}
    )
    assert r.status_code == 201, r.text
    await api.drain()
    got = await send(api, "payments", {"execution": "w1", "amount": 12})
    assert got.json()["events"][0]["outcome"] == "signalled"
    await api.drain()
    detail = await api.call("GET", "/api/v1/workflows/w1", OP_A)
    assert detail.json()["status"] == "completed"
    assert detail.json()["output"] == {"paid": {"amount": 12}}
    missing = await send(api, "payments", {"execution": "nope", "amount": 1})
    assert missing.json()["events"][0]["outcome"] == "failed"


async def set_secret(api: Api, name: str, value: str) -> None:
    r = await api.call("PUT", f"/api/v1/secrets/{name}", ADMIN_A, json={"value": value})
    assert r.status_code == 200, r.text


async def hook(api: Api, path: str, body: bytes, signature: str) -> Any:
    return await api.call("POST", path, content=body, headers={"Wovyr-Signature": signature})


async def test_a_signed_webhook_starts_and_a_bad_one_does_not(api: Api) -> None:
    await set_secret(api, "HOOK_NEW", "new-key-0123456789abcdef")
    await set_secret(api, "HOOK_OLD", "old-key-0123456789abcdef")
    await setup(api, HOOKED)
    path = (await api.call("GET", "/api/v1/triggers/gh", VIEW_A)).json()["webhook_path"]
    assert path.startswith("/api/v1/hooks/hk_")
    body = json.dumps({"order": 5}).encode()
    now = api.clock.now()
    wrong = await hook(api, path, body, sign_body([b"not-the-key-at-all-0000"], body, now))
    assert wrong.status_code == 401
    assert (await hook(api, path, body, "")).status_code == 401
    stale = sign_body([b"new-key-0123456789abcdef"], body, now - timedelta(seconds=301))
    assert (await hook(api, path, body, stale)).status_code == 401
    tampered = await hook(
        api, path, body + b" ", sign_body([b"new-key-0123456789abcdef"], body, now)
    )
    assert tampered.status_code == 401
    assert await executions(api) == []
    assert (await api.call("GET", "/api/v1/events", VIEW_A)).json()["items"] == []
    good = sign_body([b"new-key-0123456789abcdef"], body, now)
    ok = await hook(api, path, body, good)
    assert ok.status_code == 202, ok.text
    assert ok.json()["events"][0]["source"] == "webhook"
    assert (await hook(api, path, body, good)).status_code == 401  # the same request again
    old = sign_body([b"old-key-0123456789abcdef"], body, now + timedelta(seconds=1))
    assert (await hook(api, path, body, old)).status_code == 202  # the key being rotated out
    assert len(await executions(api)) == 2
    assert (await hook(api, "/api/v1/hooks/hk_unknown", body, good)).status_code == 401
    reapplied = await api.call("POST", "/api/v1/triggers", OP_A, content=HOOKED, headers=YAML)
    assert reapplied.status_code == 200 and reapplied.json()["webhook_path"] == path


async def test_another_tenant_sees_and_triggers_nothing(api: Api) -> None:
    await setup(api, TRIGGER)
    await setup(api, who=OP_B)  # tenant-b has the workflow, not the trigger
    r = await send(api, "orders.created", {"order": 1, "total": 500}, who=OP_B)
    assert r.status_code == 404
    assert await executions(api, OP_B) == []
    assert (await api.call("GET", "/api/v1/triggers/orders", OP_B)).status_code == 404
    assert (await api.call("DELETE", "/api/v1/triggers/orders", OP_B)).status_code == 404
    assert (await api.call("GET", "/api/v1/triggers", OP_B)).json() == []
    b_events = (await api.call("GET", "/api/v1/events", OP_B)).json()["items"]
    assert [e["outcome"] for e in b_events] == ["unmatched"]
    assert (await api.call("GET", "/api/v1/events", VIEW_A)).json()["items"] == []
    assert (await api.call("DELETE", "/api/v1/triggers/orders", OP_A)).status_code == 204


async def test_events_page_by_cursor(api: Api) -> None:
    await setup(api, TRIGGER)
    for i in range(5):
        await send(api, "orders.created", {"order": i, "total": 1})
        api.clock.advance(1)
    seen, cursor = [], None
    while True:
        params: dict[str, Any] = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = (await api.call("GET", "/api/v1/events", VIEW_A, params=params)).json()
        seen += page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    whole = (await api.call("GET", "/api/v1/events", VIEW_A)).json()["items"]
    assert seen == whole and len(whole) == 5
    bad = await api.call("GET", "/api/v1/events", VIEW_A, params={"cursor": "zzz"})
    assert bad.status_code == 400


async def test_a_bad_trigger_document_is_a_located_422(api: Api) -> None:
    bad = TRIGGER.replace("payload.total > 100", "inputs.total > 100")
    r = await api.call("POST", "/api/v1/triggers", OP_A, content=bad, headers=YAML)
    assert r.status_code == 422
    assert "payload and event" in r.text
    viewer = await api.call("POST", "/api/v1/triggers", VIEW_A, content=TRIGGER, headers=YAML)
    assert viewer.status_code == 403
