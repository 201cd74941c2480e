"""The schedules, definitions and workers pages over HTTP (httpx.ASGITransport): what each
role sees and may do, form posts that redirect back (no JavaScript needed), and tenant
isolation (tenant B never sees or touches tenant A's schedules or definitions)."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

from wovyr.engine.engine import Engine
from wovyr.scheduling.schedules import Schedules
from wovyr.store.base import ClaimAsk
from wovyr.testing import drain

from .conftest import APPROVAL_FLOW, Keys, UiClient

APPROVAL_FLOW_V3 = APPROVAL_FLOW.replace('version: "2"', 'version: "3"')


def _setup(engine: Engine) -> Schedules:
    """Tenant acme: `purchase` v2 and v3 applied, one hourly schedule on it."""
    acme = engine.for_tenant("acme")
    acme.apply(APPROVAL_FLOW)
    acme.apply(APPROVAL_FLOW_V3)
    service = Schedules(acme)
    service.create("hourly", workflow="purchase", cron="0 * * * *", note="every hour")
    return service


def _csrf(client: UiClient, url: str) -> str:
    return client.csrf(url)


def test_new_pages_need_a_session(client: UiClient) -> None:
    for url in ("/ui/schedules", "/ui/definitions", "/ui/definitions/purchase", "/ui/workers"):
        response = client.get(url)
        assert response.status_code == 303, url
        assert response.headers["location"].startswith("/ui/login?next=")
    response = client.post("/ui/schedules/hourly/pause", {})
    assert response.status_code == 303
    assert response.headers["location"] == "/ui/login?next=%2Fui%2Fschedules"


def test_schedules_list_next_fires_in_utc_and_local_time(
    client: UiClient, keys: Keys, ui_engine: Engine
) -> None:
    _setup(ui_engine)
    client.sign_in(keys.viewer_a)
    page = client.get("/ui/schedules")
    assert page.status_code == 200
    assert 'data-schedule="hourly"' in page.text and "every hour" in page.text
    times = re.findall(r'<time datetime="([^"]+)" data-local>([^<]+)</time>', page.text)
    assert len(times) == 3  # the next three fires, each as UTC text the script localizes
    now = ui_engine.clock.now()
    iso, text = times[0]
    assert iso.endswith("+00:00") and text.endswith(" UTC")
    first = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    assert iso == first.isoformat()
    assert first.strftime("%Y-%m-%d %H:%M:%S UTC") in page.text
    # a viewer sees, but gets no action forms
    assert "/ui/schedules/hourly/pause" not in page.text
    assert "may only read" in page.text


def test_viewer_cannot_act_on_a_schedule(client: UiClient, keys: Keys, ui_engine: Engine) -> None:
    service = _setup(ui_engine)
    client.sign_in(keys.viewer_a)
    token = _csrf(client, "/ui/schedules")
    for action in ("pause", "trigger"):
        response = client.post(f"/ui/schedules/hourly/{action}", {"csrf_token": token})
        assert response.status_code == 403, action
    record = service.get("hourly")
    assert not record.paused and record.fired_count == 0


def test_operator_pauses_resumes_and_triggers(
    client: UiClient, keys: Keys, ui_engine: Engine
) -> None:
    service = _setup(ui_engine)
    client.sign_in(keys.operator_a)
    token = _csrf(client, "/ui/schedules")
    assert client.post("/ui/schedules/hourly/pause", {}).status_code == 403  # no CSRF token
    assert not service.get("hourly").paused

    paused = client.post("/ui/schedules/hourly/pause", {"csrf_token": token})
    assert paused.status_code == 303
    assert paused.headers["location"] == "/ui/schedules?notice=paused"
    assert service.get("hourly").paused
    page = client.get(paused.headers["location"])
    assert 'data-paused="true"' in page.text and "Schedule paused." in page.text
    assert "/ui/schedules/hourly/resume" in page.text

    resumed = client.post("/ui/schedules/hourly/resume", {"csrf_token": token})
    assert resumed.status_code == 303 and not service.get("hourly").paused

    triggered = client.post("/ui/schedules/hourly/trigger", {"csrf_token": token})
    assert triggered.status_code == 303
    started = re.search(r"started=([^&]+)", triggered.headers["location"])
    assert started
    execution = ui_engine.for_tenant("acme").query(started.group(1))
    assert execution.workflow == "purchase"
    landing = client.get(triggered.headers["location"])
    assert 'id="started-link"' in landing.text
    audit = [e.action for e in ui_engine.store.audit_records(tenant="acme")]
    assert {"schedule.pause", "schedule.resume", "schedule.trigger"} <= set(audit)


def test_backfill_from_the_form(client: UiClient, keys: Keys, ui_engine: Engine) -> None:
    service = _setup(ui_engine)
    client.sign_in(keys.operator_a)
    token = _csrf(client, "/ui/schedules")
    now = ui_engine.clock.now().replace(minute=0, second=0, microsecond=0)
    start, end = now - timedelta(hours=3), now - timedelta(minutes=1)
    form = {
        "csrf_token": token,
        "start": start.strftime("%Y-%m-%dT%H:%M"),
        "end": end.strftime("%Y-%m-%dT%H:%M"),
    }
    response = client.post("/ui/schedules/hourly/backfill", form)
    assert response.status_code == 303
    assert "notice=backfilled" in response.headers["location"]
    runs = ui_engine.for_tenant("acme").list(workflow="purchase").items
    assert len(runs) == 2  # the ticks at now-2h and now-1h, (start, end]
    # bad input: a clear error on the page, nothing started
    bad = client.post("/ui/schedules/hourly/backfill", {**form, "end": "yesterday"})
    assert bad.status_code == 400 and "needs a start and an end" in bad.text
    backwards = client.post(
        "/ui/schedules/hourly/backfill", {**form, "start": form["end"], "end": form["start"]}
    )
    assert backwards.status_code == 400 and "must be after its start" in backwards.text
    assert len(ui_engine.for_tenant("acme").list(workflow="purchase").items) == 2
    assert service.get("hourly").fired_count == 2


def test_tenant_b_never_sees_or_touches_a_schedules(
    make_client: object, keys: Keys, ui_engine: Engine
) -> None:
    service = _setup(ui_engine)
    b: UiClient = make_client()  # type: ignore[operator]
    b.sign_in(keys.operator_b)
    page = b.get("/ui/schedules")
    assert page.status_code == 200 and "hourly" not in page.text and "no-schedules" in page.text
    token = _csrf(b, "/ui/schedules")
    for action in ("pause", "trigger", "backfill"):
        response = b.post(f"/ui/schedules/hourly/{action}", {"csrf_token": token})
        assert response.status_code == 404, action
    record = service.get("hourly")
    assert not record.paused and record.fired_count == 0
    defs = b.get("/ui/definitions")
    assert defs.status_code == 200 and "purchase" not in defs.text
    assert b.get("/ui/definitions/purchase").status_code == 404


def test_definitions_list_and_detail(client: UiClient, keys: Keys, ui_engine: Engine) -> None:
    _setup(ui_engine)
    acme = ui_engine.for_tenant("acme")
    started = acme.start(name="purchase")  # the latest applied: v3
    drain(ui_engine)
    client.sign_in(keys.viewer_a)
    listing = client.get("/ui/definitions")
    assert listing.status_code == 200
    row = re.search(r'<tr data-definition="purchase">.*?</tr>', listing.text, re.S)
    assert row and "3, 2" in row.group(0)

    latest = client.get("/ui/definitions/purchase")
    assert latest.status_code == 200
    assert '<h1>purchase <span class="muted">v3</span>' in latest.text
    assert 'data-activity="approve"' in latest.text  # the DAG, drawn like an execution's
    assert "- id: approve\n  needs:\n  - prepare" in latest.text  # the document, as YAML
    assert "/ui?workflow=purchase&amp;version=2" in latest.text

    older = client.get("/ui/definitions/purchase?version=2")
    assert older.status_code == 200 and "version: &#39;2&#39;" in older.text
    assert client.get("/ui/definitions/purchase?version=9").status_code == 404
    assert client.get("/ui/definitions/nothing").status_code == 404

    # executions per version: the list filtered by workflow and version
    v3 = client.get("/ui?workflow=purchase&version=3")
    v2 = client.get("/ui?workflow=purchase&version=2")
    assert started.id in v3.text and started.id not in v2.text
    assert 'id="version-note"' in v3.text and 'value="3"' in v3.text


def test_workers_page_by_role(make_client: object, keys: Keys, ui_engine: Engine) -> None:
    """Leases of the tenant's own executions only: globex's leased execution is not counted
    for acme, and only an admin sees which worker holds what."""
    ui_engine.for_tenant("acme").start(APPROVAL_FLOW)
    ui_engine.for_tenant("globex").start(APPROVAL_FLOW)
    ui_engine.for_tenant("globex").start(APPROVAL_FLOW)
    claims = ui_engine.store.claim(ClaimAsk("host-1:42", ui_engine.clock.now(), 30.0, 10))
    assert len(claims) == 3
    viewer: UiClient = make_client()  # type: ignore[operator]
    viewer.sign_in(keys.viewer_a)
    page = viewer.get("/ui/workers")
    assert page.status_code == 200
    assert "admins only" in page.text and "host-1:42" not in page.text
    assert re.search(r'id="in-flight">1<', page.text)
    admin: UiClient = make_client()  # type: ignore[operator]
    admin.sign_in(keys.admin_a)
    page = admin.get("/ui/workers")
    assert page.status_code == 200
    row = re.search(r'<tr data-lease-owner="host-1:42">.*?</tr>', page.text, re.S)
    assert row and "<td>1</td>" in row.group(0)
    assert "does not keep a worker membership" in page.text  # SQLite keeps none
    other: UiClient = make_client()  # type: ignore[operator]
    other.sign_in(keys.operator_b)
    assert re.search(r'id="in-flight">2<', other.get("/ui/workers").text)


def test_workers_page_on_every_store(engine: Engine, tmp_path: Path) -> None:
    """What each store knows: PostgreSQL keeps the live workers (its members table), shown
    to admins with their heartbeats; the count alone to everyone else; SQLite says it keeps
    none. Leases are counted on every store."""
    from fastapi import FastAPI

    from wovyr.platform.auth import Authenticator
    from wovyr.server.ui import mount_ui
    from wovyr.settings import Settings
    from wovyr.store.capabilities import capabilities
    from wovyr.store.shards import Peer

    auth = Authenticator(engine.store, clock=engine.clock)
    admin_key = auth.create_key("acme", "admin", "a-admin")[1]
    viewer_key = auth.create_key("globex", "viewer", "b-view")[1]
    app = FastAPI()
    mount_ui(app, engine, Settings(home=tmp_path / "home"), auth)
    engine.for_tenant("acme").start(APPROVAL_FLOW)
    now = engine.clock.now()
    assert len(engine.store.claim(ClaimAsk("host-1:42", now, 30.0, 10))) == 1
    membership = capabilities(engine.store).membership
    if membership is not None:
        membership.worker_heartbeat(Peer("host-1:42", "member"), now, 30.0)
        membership.worker_heartbeat(Peer("host-2:7", "fixed", 4, (0, 1)), now, 30.0)
    admin, viewer = UiClient(app), UiClient(app)
    try:
        admin.sign_in(admin_key)
        page = admin.get("/ui/workers").text
        assert re.search(r'<tr data-lease-owner="host-1:42">.*?<td>1</td>', page, re.S)
        viewer.sign_in(viewer_key)
        seen = viewer.get("/ui/workers").text
        assert "host-1:42" not in seen and "host-2:7" not in seen
        assert re.search(r'id="in-flight">0<', seen)  # acme's lease is not globex's
        if membership is None:
            assert "does not keep a worker membership" in page
        else:
            assert 'data-worker="host-1:42"' in page and 'data-worker="host-2:7"' in page
            assert re.search(r'<tr data-worker="host-2:7">.*?<td>fixed</td>', page, re.S)
            assert re.search(r'id="live-workers">2<', seen)
    finally:
        admin.close()
        viewer.close()


def test_execution_timeline_names_times_and_copy_buttons(
    client: UiClient, keys: Keys, ui_engine: Engine
) -> None:
    from .conftest import start_waiting

    eid = start_waiting(ui_engine)
    client.sign_in(keys.viewer_a)
    page = client.get(f"/ui/executions/{eid}").text
    names = re.findall(r'<span class="event-name">([^<]+)</span>', page)
    assert names[0] == "Execution started" and "Activity completed" in names
    assert re.search(r'<span class="abs mono" title="[^"]+ UTC">\d\d:\d\d:\d\d\.\d{3}</span>', page)
    # copy buttons come hidden (no script, no dead button); the script shows them
    assert page.count('<button type="button" class="copy" hidden>Copy</button><pre>') >= 2
