"""Outbound webhooks on every store, delivered to a real local HTTP receiver: an admin
registers endpoints; an execution that completes, fails or waits for an approval has its
delivery written in the step's transaction, sent signed (both keys while one is rotated)
under a stable delivery id, retried with a doubling back-off and marked dead with the last
error after the last attempt; a filter that is false sends nothing; a private address is
refused unless the tenant's policy admits it; another tenant sees none of it."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from tests.server.conftest import APPROVAL_FLOW, Api

from wovyr.activities.outbound import SIGNATURE_HEADER, post_signed, signature_of
from wovyr.activities.policy import RESTRICTED
from wovyr.engine.tenants import set_policy
from wovyr.platform.webhooks import DELIVERY_HEADER, EVENT_HEADER, Dispatcher

pytestmark = pytest.mark.anyio
ADMIN_A, OP_A, VIEW_A = "tenant-a:admin", "tenant-a:operator", "tenant-a:viewer"
ADMIN_B, VIEW_B = "tenant-b:admin", "tenant-b:viewer"
NEW_KEY, OLD_KEY = "new-key-0123456789abcdef", "old-key-0123456789abcdef"

FLOW = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: quick}
inputs:
  fail: {type: boolean, default: false}
activities:
  - {id: a, set: {ok: true}}
  - id: boom
    needs: [a]
    when: "${{ inputs.fail }}"
    set: {x: "${{ int('not a number') }}"}
"""


class Receiver:
    """A local HTTP server that records each request and answers `statuses` in turn
    (the last one from then on)."""

    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, str], bytes]] = []
        self.statuses = [200]
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                receiver.requests.append((dict(self.headers.items()), body))
                status = receiver.statuses[min(len(receiver.requests), len(receiver.statuses)) - 1]
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    made = Receiver()
    yield made
    made.close()


def dispatcher(api: Api, **kw: Any) -> Dispatcher:
    """The dispatcher as a worker wires it (`Worker.outbox`), on the test's clock."""
    engine = api.engine
    assert engine.secrets is not None
    return Dispatcher(
        store=engine.store,
        clock=engine.clock,
        send=post_signed,
        policy_for=lambda tenant: engine.for_tenant(tenant).side_effect_policy(),
        secret=engine.secrets.resolve_secret,
        **kw,
    )


async def prepare(api: Api, receiver: Receiver, *, allow: bool = True, **endpoint: Any) -> None:
    for name, value in (("WH_NEW", NEW_KEY), ("WH_OLD", OLD_KEY)):
        r = await api.call("PUT", f"/api/v1/secrets/{name}", ADMIN_A, json={"value": value})
        assert r.status_code == 200, r.text
    if allow:
        policy = replace(RESTRICTED, allow_hosts=(f"127.0.0.1:{receiver.port}",))
        set_policy(api.engine.store, "tenant-a", policy, by="test", at=api.clock.now())
    body = {
        "url": receiver.url,
        "events": ["execution.completed", "execution.failed"],
        "secrets": ["WH_NEW", "WH_OLD"],
        **endpoint,
    }
    r = await api.call("PUT", "/api/v1/webhooks/ops", ADMIN_A, json=body)
    assert r.status_code == 200, r.text
    assert r.json()["secrets"] == ["WH_NEW", "WH_OLD"] and NEW_KEY not in r.text
    for flow in (FLOW, APPROVAL_FLOW):
        headers = {"Content-Type": "application/yaml"}
        r = await api.call("POST", "/api/v1/definitions", OP_A, content=flow, headers=headers)
        assert r.status_code == 201, r.text


async def start(api: Api, execution_id: str, workflow: str = "quick", **input: Any) -> None:
    body = {"workflow": workflow, "id": execution_id, "input": input}
    r = await api.call("POST", "/api/v1/workflows", OP_A, json=body)
    assert r.status_code == 201, r.text
    await api.drain()


async def deliveries(api: Api, who: str = VIEW_A, **params: Any) -> list[dict[str, Any]]:
    r = await api.call("GET", "/api/v1/deliveries", who, params=params)
    assert r.status_code == 200, r.text
    items: list[dict[str, Any]] = r.json()["items"]
    return items


async def test_a_completed_execution_is_delivered_signed_once(api: Api, receiver: Receiver) -> None:
    await prepare(api, receiver)
    await start(api, "x1")
    [pending] = await deliveries(api)
    assert (pending["status"], pending["event"], pending["execution_id"]) == (
        "pending",
        "execution.completed",
        "x1",
    )
    assert await dispatcher(api).dispatch_due() == 1
    [(headers, body)] = receiver.requests
    assert headers[DELIVERY_HEADER] == pending["id"] and headers[EVENT_HEADER] == pending["event"]
    payload = json.loads(body)
    assert payload["id"] == pending["id"] and payload["execution"]["workflow"] == "quick"
    now = api.clock.now()
    for key in (NEW_KEY, OLD_KEY):  # either key of the rotation verifies it
        assert signature_of(headers[SIGNATURE_HEADER], body, [key.encode()], now, 300)
    assert signature_of(headers[SIGNATURE_HEADER], body, [b"another-key"], now, 300) is None
    assert await dispatcher(api).dispatch_due() == 0  # delivered: never again
    detail = (await api.call("GET", f"/api/v1/deliveries/{pending['id']}", VIEW_A)).json()
    assert detail["status"] == "delivered" and detail["attempts"] == 1
    assert [a["status_code"] for a in detail["attempts_made"]] == [200]


async def test_failures_are_retried_with_backoff_then_dead(api: Api, receiver: Receiver) -> None:
    receiver.statuses = [500]
    await prepare(api, receiver)
    await start(api, "x1", fail=True)
    [failed] = await deliveries(api)
    assert failed["event"] == "execution.failed"
    send = dispatcher(api, max_attempts=3, base_backoff=5)
    assert await send.dispatch_due() == 1
    assert await send.dispatch_due() == 0  # not due before its back-off
    api.clock.advance(5)
    assert await send.dispatch_due() == 1
    api.clock.advance(9)
    assert await send.dispatch_due() == 0  # the second back-off is twice the first
    api.clock.advance(1)
    assert await send.dispatch_due() == 1
    detail = (await api.call("GET", f"/api/v1/deliveries/{failed['id']}", VIEW_A)).json()
    assert (detail["status"], detail["attempts"], detail["last_error"]) == ("dead", 3, "HTTP 500")
    assert [a["status_code"] for a in detail["attempts_made"]] == [500, 500, 500]
    assert {h[DELIVERY_HEADER] for h, _ in receiver.requests} == {failed["id"]}  # one id
    api.clock.advance(3600)
    assert await send.dispatch_due() == 0
    assert [d["id"] for d in await deliveries(api, status="dead")] == [failed["id"]]


async def test_a_private_address_is_refused_unless_the_policy_admits_it(
    api: Api, receiver: Receiver
) -> None:
    """Refused when registered if the URL's host is an address the policy refuses; refused
    at each delivery when the policy changed since (or a name resolves to such an address)."""
    for url in (receiver.url, "http://localhost:9/x", "http://[::1]/x", "https://10.1.2.3/x"):
        body = {"url": url, "events": ["execution.completed"], "secrets": ["WH"]}
        r = await api.call("PUT", "/api/v1/webhooks/ops", ADMIN_A, json=body)
        assert r.status_code == 422, (url, r.text)
        assert r.json()["problems"][0]["path"] == "url" and "policy" in r.text, r.text
    await prepare(api, receiver)  # admitted by allow_hosts, then the admin takes that back
    set_policy(api.engine.store, "tenant-a", RESTRICTED, by="test", at=api.clock.now())
    await start(api, "x1")
    assert await dispatcher(api).dispatch_due() == 1
    [dead] = await deliveries(api)
    assert dead["status"] == "dead" and dead["last_error"] == "HTTP target not reachable"
    assert receiver.requests == []


async def test_a_filter_that_is_false_sends_nothing(api: Api, receiver: Receiver) -> None:
    await prepare(api, receiver, filter="${{ event.execution.workflow == 'billing' }}")
    await start(api, "x1")
    assert await dispatcher(api).dispatch_due() == 1
    assert [d["status"] for d in await deliveries(api)] == ["filtered"]
    assert receiver.requests == []


async def test_waiting_for_an_approval_is_an_event(api: Api, receiver: Receiver) -> None:
    await prepare(api, receiver, events=["execution.approval_requested"])
    await start(api, "p1", workflow="purchase")
    [asked] = await deliveries(api)
    assert asked["event"] == "execution.approval_requested"
    assert asked["payload"]["execution"]["waiting_on"].startswith("approval gate")
    assert await dispatcher(api).dispatch_due() == 1
    assert receiver.requests[0][0][EVENT_HEADER] == "execution.approval_requested"
    r = await api.call("POST", "/api/v1/workflows/p1/signal", OP_A, json={"name": "go"})
    assert r.status_code == 200, r.text
    await api.drain()  # still waiting on the same approval: no second request of it
    assert [d["id"] for d in await deliveries(api)] == [asked["id"]]


B_URL = "https://hooks.example.com/b"  # tenant b's (it is sent nothing)


async def test_another_tenant_sees_none_of_it(api: Api, receiver: Receiver) -> None:
    await prepare(api, receiver)
    r = await api.call(
        "PUT",
        "/api/v1/webhooks/ops",
        ADMIN_B,
        json={"url": B_URL, "events": ["execution.completed"], "secrets": ["WH_NEW"]},
    )
    assert r.status_code == 200, r.text
    await start(api, "x1")
    [mine] = await deliveries(api)
    assert await deliveries(api, VIEW_B) == []  # b's endpoint takes only b's events
    assert (await api.call("GET", f"/api/v1/deliveries/{mine['id']}", VIEW_B)).status_code == 404
    listed_b = (await api.call("GET", "/api/v1/webhooks", ADMIN_B)).json()
    assert [e["url"] for e in listed_b] == [B_URL]
    assert (await api.call("DELETE", "/api/v1/webhooks/ops", ADMIN_B)).status_code == 204
    assert (await api.call("GET", "/api/v1/webhooks/ops", ADMIN_A)).status_code == 200
    assert (await api.call("GET", "/api/v1/webhooks/ops", ADMIN_B)).status_code == 404


async def test_an_endpoint_is_checked_and_for_admins(api: Api, receiver: Receiver) -> None:
    bad = {"url": "ftp://x", "events": ["execution.exploded"], "secrets": ["bad name"]}
    r = await api.call("PUT", "/api/v1/webhooks/ops", ADMIN_A, json=bad)
    assert r.status_code == 422
    assert {p["path"] for p in r.json()["problems"]} >= {"url", "events", "secrets"}
    good = {"url": B_URL, "events": ["execution.completed"], "secrets": ["K"]}
    r = await api.call("PUT", "/api/v1/webhooks/ops", OP_A, json=good)
    assert r.status_code == 403
    unfiltered = {**good, "filter": "${{ inputs.x }}"}
    r = await api.call("PUT", "/api/v1/webhooks/ops", ADMIN_A, json=unfiltered)
    assert r.status_code == 422 and r.json()["problems"][0]["path"] == "filter"


async def test_deliveries_page_by_cursor(api: Api, receiver: Receiver) -> None:
    await prepare(api, receiver)
    for i in range(3):
        await start(api, f"x{i}")
        api.clock.advance(timedelta(seconds=1).total_seconds())
    first = (await api.call("GET", "/api/v1/deliveries", VIEW_A, params={"limit": 2})).json()
    params = {"limit": 2, "cursor": first["next_cursor"]}
    rest = (await api.call("GET", "/api/v1/deliveries", VIEW_A, params=params)).json()
    ids = [d["execution_id"] for d in first["items"] + rest["items"]]
    assert ids == ["x2", "x1", "x0"] and rest["next_cursor"] is None
