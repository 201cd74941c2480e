"""The events and webhooks pages over HTTP (httpx.ASGITransport) on a real store: the
received events (topic, trigger, outcome, the execution linked) a page at a time and the
triggers; the outbound deliveries (status, attempts, last error) and the endpoints, a
viewer reading them all, secrets shown by name only and an endpoint's URL path only to an
admin; tenant B never sees tenant A's events, triggers, deliveries or endpoints."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import timedelta

from tests.server.test_triggers_api import FLOW, HOOKED, TRIGGER

from wovyr.engine.engine import Engine
from wovyr.engine.triggers import apply_trigger, receive_event
from wovyr.store.events import AttemptRecord, DeliveryRecord, WebhookEndpointRecord
from wovyr.testing import drain

from .conftest import Keys, UiClient


def _send(engine: Engine, order: int, total: int = 150, tenant: str = "acme") -> None:
    body = json.dumps({"order": order, "total": total}).encode()
    receive_event(engine.for_tenant(tenant), "orders.created", body)
    engine.clock.advance(1)  # type: ignore[attr-defined]


def _setup(engine: Engine, tenant: str = "acme") -> None:
    mine = engine.for_tenant(tenant)
    mine.apply(FLOW)
    apply_trigger(mine, TRIGGER)
    apply_trigger(mine, HOOKED)  # a webhook's, signed with HOOK_NEW or HOOK_OLD


def _row(text: str, attribute: str, value: str) -> str:
    found = re.search(rf'<tr {attribute}="{re.escape(value)}".*?</tr>', text, re.S)
    assert found, f"no row {attribute}={value}"
    return found.group(0)


def test_the_pages_need_a_session(client: UiClient) -> None:
    for page in ("/ui/events", "/ui/deliveries"):
        response = client.get(page)
        assert response.status_code == 303
        assert response.headers["location"].startswith("/ui/login?next=")


def test_a_viewer_reads_the_events_each_outcome_and_the_execution_linked(
    client: UiClient, keys: Keys, ui_engine: Engine
) -> None:
    _setup(ui_engine)
    _send(ui_engine, 1)
    _send(ui_engine, 1)  # duplicate
    _send(ui_engine, 2, total=5)  # filtered
    receive_event(ui_engine.for_tenant("acme"), "nobody.listens", b"{}")
    client.sign_in(keys.viewer_a)
    page = client.get("/ui/events")
    assert page.status_code == 200
    assert '<a href="/ui/events">Events</a>' in page.text  # in the navigation
    outcomes = re.findall(r'data-outcome="(\w+)"', page.text)
    assert outcomes == ["unmatched", "filtered", "duplicate", "started"]  # newest first
    started = ui_engine.store.list_trigger_events("acme").items[-1]
    assert started.outcome == "started" and started.execution_id
    row = _row(page.text, "data-event", started.id)
    assert f'href="/ui/executions/{started.execution_id}"' in row
    assert "orders.created" in row and ">1<" in row  # the topic and the dedup key
    duplicate = [
        r for r in ui_engine.store.list_trigger_events("acme").items if r.outcome == "duplicate"
    ]
    assert duplicate[0].execution_id == started.execution_id
    assert f'data-execution="{started.execution_id}"' in _row(
        page.text, "data-event", duplicate[0].id
    )
    trigger = _row(page.text, "data-trigger", "orders")
    assert "start fulfil" in trigger and "payload.total &gt; 100" in trigger
    assert "/api/v1/hooks/hk_" in _row(page.text, "data-trigger", "gh")
    assert '"total"' not in page.text  # no payload

    narrowed = client.get("/ui/events", params={"trigger": "orders"})
    assert re.findall(r'data-outcome="(\w+)"', narrowed.text) == [
        "filtered",
        "duplicate",
        "started",
    ]


def test_events_page_a_cursor_at_a_time(client: UiClient, keys: Keys, ui_engine: Engine) -> None:
    _setup(ui_engine)
    for order in range(55):
        _send(ui_engine, order)
    client.sign_in(keys.viewer_a)
    first = client.get("/ui/events")
    found = re.search(r'id="next-page" rel="next"|href="([^"]+)" id="next-page"', first.text)
    assert found and found.group(1)
    shown = set(re.findall(r'data-event="([^"]+)"', first.text))
    second = client.get(found.group(1).replace("&amp;", "&"))
    assert second.status_code == 200 and 'id="next-page"' not in second.text
    more = set(re.findall(r'data-event="([^"]+)"', second.text))
    assert len(shown) == 50 and len(more) == 5 and not shown & more
    everything = {r.id for r in ui_engine.store.list_trigger_events("acme", limit=100).items}
    assert shown | more == everything
    bad = client.get("/ui/events", params={"after": "not-a-cursor"})
    assert bad.status_code == 400 and "not a page cursor" in bad.text


def _endpoint(engine: Engine, tenant: str, name: str) -> None:
    at = engine.clock.now()
    engine.store.put_webhook_endpoint(
        WebhookEndpointRecord(
            tenant,
            name,
            "https://hooks.example.com/T0K3N-path/wovyr",
            ("execution.completed",),
            "${{ event.execution.workflow == 'fulfil' }}",
            ("WEBHOOK_KEY",),
            at,
        )
    )


def _delivered(engine: Engine) -> list[DeliveryRecord]:
    """Tenant acme's endpoint `ops` and the delivery of one triggered execution's end."""
    _setup(engine)
    _endpoint(engine, "acme", "ops")
    _send(engine, 7)
    drain(engine)
    return list(engine.store.list_deliveries("acme").items)


def test_deliveries_and_endpoints_with_attempts_and_last_error(
    make_client: Callable[[], UiClient], keys: Keys, ui_engine: Engine
) -> None:
    [delivery] = _delivered(ui_engine)
    failed_at = ui_engine.clock.now()
    ui_engine.store.record_attempt(
        AttemptRecord("acme", delivery.id, 1, failed_at, 503, "HTTP 503"),
        status="pending",
        next_at=failed_at + timedelta(seconds=5),
        last_error="HTTP 503 <b>busy</b>",
    )
    viewer = make_client()
    viewer.sign_in(keys.viewer_a)
    page = viewer.get("/ui/deliveries")
    assert page.status_code == 200
    row = _row(page.text, "data-delivery", delivery.id)
    assert 'data-status="pending"' in row and '<td class="attempts">1</td>' in row
    assert "HTTP 503 &lt;b&gt;busy&lt;/b&gt;" in row  # escaped
    assert f'href="/ui/executions/{delivery.execution_id}"' in row
    endpoint = _row(page.text, "data-endpoint", "ops")
    assert "https://hooks.example.com/…" in endpoint and "T0K3N" not in page.text
    assert "WEBHOOK_KEY" in endpoint  # the secret by name

    admin = make_client()
    admin.sign_in(keys.admin_a)
    assert "T0K3N-path" in _row(admin.get("/ui/deliveries").text, "data-endpoint", "ops")

    dead = viewer.get("/ui/deliveries", params={"status": "dead"})
    assert 'id="no-deliveries"' in dead.text
    assert viewer.get("/ui/deliveries", params={"status": "bogus"}).status_code == 400


def test_tenant_b_never_sees_tenant_a(
    make_client: Callable[[], UiClient], keys: Keys, ui_engine: Engine
) -> None:
    assert _delivered(ui_engine)
    other = make_client()
    other.sign_in(keys.operator_b)
    events = other.get("/ui/events")
    assert 'id="no-events"' in events.text and 'id="no-triggers"' in events.text
    assert "orders.created" not in events.text
    deliveries = other.get("/ui/deliveries")
    assert 'id="no-deliveries"' in deliveries.text and 'id="no-endpoints"' in deliveries.text
    assert "hooks.example.com" not in deliveries.text
