"""The flow-control page over HTTP (httpx.ASGITransport): a tenant's concurrency keys in use
(workflow keys' holders and waiting executions, activity keys' attempts, each linking to
its execution) and rate-limit buckets (tokens as of now); an admin declares and deletes
buckets from it, other roles only read; tenant B never sees or touches tenant A's keys or
buckets."""

from __future__ import annotations

import re
from pathlib import Path

from wovyr.engine.engine import Engine
from wovyr.store.base import ClaimAsk
from wovyr.store.flow import FlowAcquire, RateRequest, SlotClaim

from .conftest import Keys, UiClient

KEYED = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: keyed}
concurrency: {key: "acct-${{ inputs.acct }}", limit: 1}
inputs: {acct: {type: string}}
activities:
  - id: gate
    wait: {approval: {}}
"""
OWNER = "host-1:42"


def _keyed(engine: Engine, tenant: str, acct: str, *ids: str) -> None:
    """Start `ids` on workflow key `acct-<acct>` of `tenant`: the first holds its slot."""
    for execution_id in ids:
        engine.for_tenant(tenant).start(KEYED, {"acct": acct}, execution_id=execution_id)


def _activity_slots(engine: Engine, tenant: str, key: str, *executions: str) -> list[str]:
    """Each execution's attempt of `step` asks key `key`'s one slot, as a worker holding
    their leases does: the first is granted, the others wait. The attempts' holder ids."""
    now = engine.clock.now()
    engine.store.claim(ClaimAsk(OWNER, now, 30.0, 100))
    holders = [f"{e}/step/1" for e in executions]
    answers = [
        engine.store.acquire_flow(FlowAcquire(tenant, e, OWNER, now, slots=[SlotClaim(key, h, 1)]))
        for e, h in zip(executions, holders, strict=True)
    ]
    assert [a.granted for a in answers] == [True] + [False] * (len(executions) - 1)
    return holders


def _row(text: str, attribute: str, value: str) -> str:
    found = re.search(rf'<tr {attribute}="{re.escape(value)}".*?</tr>', text, re.S)
    assert found, f"no row {attribute}={value}"
    return found.group(0)


def test_the_page_needs_a_session(client: UiClient) -> None:
    response = client.get("/ui/flow")
    assert response.status_code == 303
    assert response.headers["location"] == "/ui/login?next=%2Fui%2Fflow"
    response = client.post("/ui/flow/limits", {"key": "x", "limit": "1"})
    assert response.status_code == 303
    assert response.headers["location"] == "/ui/login?next=%2Fui%2Fflow"


def test_keys_in_use_with_holders_and_waiters_linked_and_buckets_now(
    client: UiClient, keys: Keys, ui_engine: Engine
) -> None:
    _keyed(ui_engine, "acme", "7", "k-1", "k-2", "k-3")
    running = _activity_slots(ui_engine, "acme", "gpu-eu", "k-1", "k-2")
    acme = ui_engine.for_tenant("acme")
    acme.set_rate_limit("openai", 5, 1, 10, by="a-admin")
    now = ui_engine.clock.now()
    made = RateRequest("tok", units=3, capacity=10, per_second=2)
    taken = ui_engine.store.acquire_flow(FlowAcquire("acme", "k-1", OWNER, now, rates=[made]))
    assert taken.granted
    ui_engine.clock.advance(1.0)  # the bucket `tok` refills 2 units meanwhile

    client.sign_in(keys.viewer_a)
    page = client.get("/ui/flow")
    assert page.status_code == 200
    assert '<a href="/ui/flow">Flow control</a>' in page.text  # in the navigation

    workflow = _row(page.text, "data-key", "acct-7")
    assert 'data-kind="workflow"' in workflow
    assert '<td class="running">1</td>' in workflow and '<td class="waiting">2</td>' in workflow
    assert re.search(r'data-holder="k-1" href="/ui/executions/k-1"', workflow)
    waiters = re.findall(r'data-waiter="([^"]+)" href="([^"]+)"', workflow)
    assert waiters == [("k-2", "/ui/executions/k-2"), ("k-3", "/ui/executions/k-3")]

    activity = _row(page.text, "data-key", "gpu-eu")
    assert 'data-kind="activity"' in activity
    assert '<td class="running">1</td>' in activity and '<td class="waiting">1</td>' in activity
    # the attempt's id shown, its execution's page linked
    assert f'data-holder="{running[0]}" href="/ui/executions/k-1"' in activity
    assert running[1] not in activity and "attempts not yet started" in activity

    declared = _row(page.text, "data-bucket", "openai")
    assert 'data-declared="true"' in declared and "a-admin" in declared
    assert '<td class="capacity">10</td>' in declared and '<td class="rate">5</td>' in declared
    assert '<td class="tokens">10</td>' in declared
    activity_made = _row(page.text, "data-bucket", "tok")
    assert 'data-declared="false"' in activity_made and "an activity" in activity_made
    assert '<td class="tokens">9</td>' in activity_made  # 10 - 3 + 2 s x 1 s
    # a viewer reads: no forms
    assert "/ui/flow/limits" not in page.text and "may only read" in page.text


def test_key_and_bucket_names_are_escaped(client: UiClient, keys: Keys, ui_engine: Engine) -> None:
    _keyed(ui_engine, "acme", "<b>x</b>", "k-1")
    ui_engine.for_tenant("acme").set_rate_limit("<i>y</i>", 1, 1)
    client.sign_in(keys.admin_a)
    page = client.get("/ui/flow").text
    assert "<b>x</b>" not in page and "acct-&lt;b&gt;x&lt;/b&gt;" in page
    assert "<i>y</i>" not in page and "&lt;i&gt;y&lt;/i&gt;" in page
    assert 'action="/ui/flow/limits/%3Ci%3Ey%3C%2Fi%3E/delete"' in page


def test_nothing_in_use(client: UiClient, keys: Keys) -> None:
    client.sign_in(keys.viewer_a)
    page = client.get("/ui/flow").text
    assert 'id="no-keys"' in page and 'id="no-buckets"' in page


def test_an_admin_declares_and_deletes_a_bucket(
    make_client: object, keys: Keys, ui_engine: Engine
) -> None:
    acme = ui_engine.for_tenant("acme")
    admin: UiClient = make_client()  # type: ignore[operator]
    admin.sign_in(keys.admin_a)
    token = admin.csrf("/ui/flow")
    form = {"csrf_token": token, "key": "openai", "limit": "60", "per": "60", "burst": "5"}
    assert admin.post("/ui/flow/limits", {**form, "csrf_token": ""}).status_code == 403
    assert acme.rate_limits() == []

    saved = admin.post("/ui/flow/limits", form)
    assert saved.status_code == 303 and saved.headers["location"] == "/ui/flow?notice=set"
    (record,) = acme.rate_limits()
    assert (record.key, record.capacity, record.per_second, record.declared) == (
        "openai",
        5,
        1.0,
        True,
    )
    page = admin.get(saved.headers["location"]).text
    assert "Rate limit saved." in page
    assert 'action="/ui/flow/limits/openai/delete"' in page

    bad = admin.post("/ui/flow/limits", {**form, "limit": "-1"})
    assert bad.status_code == 400 and "limit must be above 0" in bad.text
    nan = admin.post("/ui/flow/limits", {**form, "burst": "nan"})
    assert nan.status_code == 400 and "finite number" in nan.text
    assert acme.rate_limits()[0].capacity == 5  # nothing changed

    for role in (keys.operator_a, keys.viewer_a):
        other: UiClient = make_client()  # type: ignore[operator]
        other.sign_in(role)
        theirs = other.csrf("/ui/flow")
        assert other.post("/ui/flow/limits", {**form, "csrf_token": theirs}).status_code == 403
        gone = other.post("/ui/flow/limits/openai/delete", {"csrf_token": theirs})
        assert gone.status_code == 403
    assert len(acme.rate_limits()) == 1

    deleted = admin.post("/ui/flow/limits/openai/delete", {"csrf_token": token})
    assert deleted.status_code == 303 and deleted.headers["location"] == "/ui/flow?notice=deleted"
    assert acme.rate_limits() == []
    assert admin.post("/ui/flow/limits/openai/delete", {"csrf_token": token}).status_code == 404
    audit = [(e.action, e.actor) for e in ui_engine.store.audit_records(tenant="acme")]
    assert [a for a, _ in audit if a.startswith("limits.")] == ["limits.set", "limits.delete"]
    assert all(actor.startswith("key:") for a, actor in audit if a.startswith("limits."))


def test_tenant_b_never_sees_or_touches_a_keys_and_buckets(
    make_client: object, keys: Keys, ui_engine: Engine
) -> None:
    _keyed(ui_engine, "acme", "7", "k-1", "k-2")
    _activity_slots(ui_engine, "acme", "gpu-eu", "k-1")
    ui_engine.for_tenant("acme").set_rate_limit("openai", 5, 1)
    _keyed(ui_engine, "globex", "9", "g-1")
    ui_engine.for_tenant("globex").set_rate_limit("anthropic", 2, 1)

    b: UiClient = make_client()  # type: ignore[operator]
    b.sign_in(keys.operator_b)
    seen = b.get("/ui/flow").text
    for secret in ("acct-7", "k-1", "k-2", "gpu-eu", "openai"):
        assert secret not in seen, secret
    assert 'data-key="acct-9"' in seen and 'data-bucket="anthropic"' in seen

    a: UiClient = make_client()  # type: ignore[operator]
    a.sign_in(keys.admin_a)
    mine = a.get("/ui/flow").text
    assert "acct-9" not in mine and "g-1" not in mine and "anthropic" not in mine
    # acme's admin cannot delete globex's bucket: the same 404 as a missing one
    token = a.csrf("/ui/flow")
    response = a.post("/ui/flow/limits/anthropic/delete", {"csrf_token": token})
    assert response.status_code == 404
    assert [r.key for r in ui_engine.for_tenant("globex").rate_limits()] == ["anthropic"]


def test_the_page_on_every_store(engine: Engine, tmp_path: Path) -> None:
    """Each store's slot rows, holders and buckets (SQLite's trigger-kept counts, the
    PostgreSQL queries) make the same page; another tenant's rows stay out of it."""
    from fastapi import FastAPI

    from wovyr.platform.auth import Authenticator
    from wovyr.server.ui import mount_ui
    from wovyr.settings import Settings

    from .conftest import UiClient as Client

    auth = Authenticator(engine.store, clock=engine.clock)
    viewer_key = auth.create_key("acme", "viewer", "a-view")[1]
    app = FastAPI()
    mount_ui(app, engine, Settings(home=tmp_path / "home"), auth)
    _keyed(engine, "acme", "7", "k-1", "k-2")
    _keyed(engine, "globex", "7", "g-1", "g-2")
    holders = _activity_slots(engine, "acme", "gpu", "k-1")
    engine.for_tenant("acme").set_rate_limit("openai", 6, 60, by="a-admin")
    viewer = Client(app)
    try:
        viewer.sign_in(viewer_key)
        page = viewer.get("/ui/flow").text
    finally:
        viewer.close()
    workflow = _row(page, "data-key", "acct-7")
    assert re.findall(r'data-holder="([^"]+)"', workflow) == ["k-1"]
    assert re.findall(r'data-waiter="([^"]+)"', workflow) == ["k-2"]
    activity = _row(page, "data-key", "gpu")
    assert f'data-holder="{holders[0]}" href="/ui/executions/k-1"' in activity
    bucket = _row(page, "data-bucket", "openai")
    assert '<td class="rate">0.1</td>' in bucket and '<td class="tokens">6</td>' in bucket
    assert "g-1" not in page and "g-2" not in page


def test_holders_are_read_for_the_first_keys_only(
    client: UiClient, keys: Keys, ui_engine: Engine
) -> None:
    from wovyr.server.ui.catalog import KEYS_DETAILED

    for n in range(KEYS_DETAILED + 1):
        _keyed(ui_engine, "acme", f"{n:04d}", f"k-{n:04d}")
    client.sign_in(keys.viewer_a)
    page = client.get("/ui/flow").text
    assert page.count("data-holder=") == KEYS_DETAILED
    last = _row(page, "data-key", f"acct-{KEYS_DETAILED:04d}")
    assert '<td class="running">1</td>' in last and "data-holder" not in last
