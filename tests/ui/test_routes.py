"""The web UI over HTTP (httpx.ASGITransport): sign-in, the list, an execution's page, and
the actions, all as plain form posts and redirects: the pages need no JavaScript."""

from __future__ import annotations

import re
from http.cookies import SimpleCookie
from pathlib import Path
from urllib.parse import urlencode

from wovyr.engine.engine import Engine
from wovyr.platform.auth import Authenticator
from wovyr.server.ui.session import SessionCodec, load_secret
from wovyr.settings import Settings
from wovyr.testing import drain, memory_engine

from .conftest import Keys, UiClient, start_waiting

SIGNAL_FLOW = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: waits-for-go}
activities:
  - id: hold
    wait: {signal: go}
  - id: after
    needs: [hold]
    set: {got: "${{ activities.hold.output }}"}
output: "${{ activities.after.output.got }}"
"""


def _node_status(html: str, activity: str) -> str:
    found = re.search(rf'data-activity="{activity}" data-status="([^"]+)"', html)
    assert found, f"no DAG node {activity}"
    return found.group(1)


def test_root_redirects_to_the_ui(client: UiClient) -> None:
    response = client.get("/")
    assert response.status_code == 307 and response.headers["location"] == "/ui"


def test_pages_need_a_session(client: UiClient, ui_engine: Engine) -> None:
    eid = start_waiting(ui_engine)
    for url in ("/ui", f"/ui/executions/{eid}"):
        response = client.get(url)
        assert response.status_code == 303
        assert response.headers["location"].startswith("/ui/login?next=")
    assert client.get(f"/ui/executions/{eid}/live").status_code == 401
    response = client.post(f"/ui/executions/{eid}/approve", {"activity": "approve"})
    assert response.status_code == 303
    assert response.headers["location"] == f"/ui/login?next=%2Fui%2Fexecutions%2F{eid}"


def test_sign_in_sets_a_strict_http_only_cookie_without_the_key(
    client: UiClient, keys: Keys
) -> None:
    response = client.sign_in(keys.operator_a)
    assert response.status_code == 303 and response.headers["location"] == "/ui"
    cookies = [v for k, v in response.headers.multi_items() if k == "set-cookie"]
    session = next(c for c in cookies if c.startswith("wovyr_session="))
    lowered = session.lower()
    assert "httponly" in lowered and "samesite=strict" in lowered and "path=/ui" in lowered
    value = SimpleCookie(session)["wovyr_session"].value
    assert keys.operator_a not in value and keys.operator_a.split("_", 1)[1] not in value
    page = client.get("/ui")
    assert page.status_code == 200 and "tenant <strong>acme</strong>" in page.text


def test_bad_key_and_missing_login_token(client: UiClient, keys: Keys) -> None:
    token = client.csrf("/ui/login")
    bad = client.post("/ui/login", {"api_key": "wvr_nope", "csrf_token": token})
    assert bad.status_code == 401 and "not valid" in bad.text
    assert "wovyr_session" not in client.cookies
    forged = client.post("/ui/login", {"api_key": keys.operator_a, "csrf_token": "x"})
    assert forged.status_code == 403
    assert "wovyr_session" not in client.cookies


OFF_UI = (
    "https://evil.example/",
    "//evil.example/ui",
    "/ui/../../x\\y",
    "/api/v1",
    "/ui/../api/v1/workflows",  # same site, but out of the UI
    "/ui/executions/x/../../../api/v1/admin/keys",
    "/ui/./executions",
    "/ui/%2e%2e/api/v1/workflows",  # a browser resolves %2e%2e as ..
    "/ui/%2E%2E%2Fapi%2Fv1",
    "/ui/%252e%252e/api",  # encoded twice
    "/ui/%2F%2Fevil.example",
    "/ui/%5c%5cevil.example",
    "/ui/executions\t/x",
    "/ui/executions%0d%0aSet-Cookie:%20x=1",
    "/uix/elsewhere",
    "ui/executions",
    "https:/ui",
    "",
)


def test_sign_in_never_redirects_out_of_the_ui(client: UiClient, keys: Keys) -> None:
    for target in OFF_UI:
        token = client.csrf("/ui/login")
        response = client.post(
            "/ui/login", {"api_key": keys.viewer_a, "csrf_token": token, "next": target}
        )
        assert response.status_code == 303
        assert response.headers["location"] == "/ui", target
        signed_in = client.get(f"/ui/login?{urlencode({'next': target})}")
        assert signed_in.headers["location"] == "/ui", target  # signed in already: the same
        client.cookies.clear()
    for target in ("/ui", "/ui/executions/a-1", "/ui?status=waiting&q=a..b", "/ui/flow"):
        token = client.csrf("/ui/login")
        response = client.post(
            "/ui/login", {"api_key": keys.viewer_a, "csrf_token": token, "next": target}
        )
        assert response.headers["location"] == target
        client.cookies.clear()


def test_the_sign_in_form_carries_only_a_page_of_the_ui(client: UiClient) -> None:
    page = client.get(f"/ui/login?{urlencode({'next': '/ui/%2e%2e/api/v1/workflows'})}")
    assert page.status_code == 200
    assert 'name="next" value="/ui"' in page.text and "%2e%2e" not in page.text


def test_a_metrics_key_cannot_sign_in(
    client: UiClient, authenticator: Authenticator, ui_engine: Engine
) -> None:
    """A `metrics` key may read the tenant's metrics, not its executions: the UI shows
    those, so such a key does not sign in (it did, and read the whole tenant)."""
    eid = start_waiting(ui_engine)
    _, scraper = authenticator.create_key("acme", "metrics", "scraper")
    response = client.sign_in(scraper)
    assert response.status_code == 403
    assert "A key of role metrics cannot sign in to the web UI" in response.text
    assert "wovyr_session" not in client.cookies
    assert client.get("/ui").status_code == 303  # still signed out
    assert client.get(f"/ui/executions/{eid}").status_code == 303


def test_a_metrics_session_signed_before_the_refusal_reads_nothing(
    client: UiClient, authenticator: Authenticator, ui_engine: Engine, tmp_path: Path
) -> None:
    """A session a metrics key got before sign-in refused it (a cookie signed with the
    app's secret, kept under its home) opens no page."""
    eid = start_waiting(ui_engine)
    key_id, _ = authenticator.create_key("acme", "metrics", "scraper")
    principal = authenticator.principal_for_key(key_id)
    assert principal is not None
    _, cookie = SessionCodec(load_secret(tmp_path / "home")).issue(principal)
    # (the jar's name for a host without a dot, as a cookie the server set is kept)
    client.cookies.set("wovyr_session", cookie, domain="testserver.local", path="/ui")
    for page in ("/ui", f"/ui/executions/{eid}"):
        response = client.get(page)
        assert response.status_code == 303, page
        assert response.headers["location"].startswith("/ui/login?next=")
    assert client.get(f"/ui/executions/{eid}/live").status_code == 401
    assert eid not in client.get("/ui/login").text


def test_sign_in_returns_to_the_page_asked_for(
    client: UiClient, keys: Keys, ui_engine: Engine
) -> None:
    eid = start_waiting(ui_engine)
    first = client.get(f"/ui/executions/{eid}")
    login = client.get(first.headers["location"])
    assert f'value="/ui/executions/{eid}"' in login.text
    token = client.csrf(first.headers["location"])
    response = client.post(
        "/ui/login",
        {"api_key": keys.viewer_a, "csrf_token": token, "next": f"/ui/executions/{eid}"},
    )
    assert response.headers["location"] == f"/ui/executions/{eid}"


def test_execution_page_shows_dag_waits_timeline_and_actions(
    client: UiClient, keys: Keys, ui_engine: Engine
) -> None:
    eid = start_waiting(ui_engine, amount=250)
    client.sign_in(keys.operator_a)
    page = client.get(f"/ui/executions/{eid}")
    assert page.status_code == 200
    html = page.text
    assert _node_status(html, "prepare") == "completed"
    assert _node_status(html, "approve") == "waiting"
    assert _node_status(html, "ship") == "pending"
    assert 'id="execution-status">waiting<' in html
    assert re.search(r'id="waiting-on">approval', html)
    assert "started purchase v2" in html and "approve waits for approval" in html
    assert "&#34;amount&#34;: 250" in html  # inputs, escaped
    assert 'action="/ui/executions/' + eid + '/approve"' in html
    assert 'name="decision" value="reject"' in html
    assert 'action="/ui/executions/' + eid + '/cancel"' in html
    assert "<script" in html and "onclick" not in html  # one external script, nothing inline
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert page.headers["cache-control"] == "no-store"


def test_approve_with_a_comment_then_complete(
    client: UiClient, keys: Keys, ui_engine: Engine
) -> None:
    eid = start_waiting(ui_engine)
    client.sign_in(keys.operator_a)
    token = client.csrf(f"/ui/executions/{eid}")
    response = client.post(
        f"/ui/executions/{eid}/approve",
        {"csrf_token": token, "activity": "approve", "decision": "approve", "comment": "ok"},
    )
    assert response.status_code == 303
    assert response.headers["location"] == f"/ui/executions/{eid}?notice=approved"
    drain(ui_engine)
    page = client.get(response.headers["location"])
    assert "Approved." in page.text
    assert _node_status(page.text, "ship") == "completed"
    assert 'id="execution-status">completed<' in page.text
    assert "approve approved by a-op: \u201cok\u201d" in page.text
    assert f'action="/ui/executions/{eid}/approve"' not in page.text  # finished: no actions
    decided = [
        e for e in ui_engine.store.history(eid, tenant="acme") if e.type == "ApprovalDecided"
    ]
    assert decided[0].data == {
        "activity": "approve",
        "approved": True,
        "by": "a-op",
        "comment": "ok",
    }
    # audited as the key the session signed in with, in the decision's transaction
    principal = Authenticator(ui_engine.store).verify(keys.operator_a)
    assert principal is not None
    audited = ui_engine.store.audit_records(tenant="acme")
    assert [(r.action, r.actor, r.target) for r in audited] == [
        ("execution.approve", f"key:{principal.key_id}/operator", eid)
    ]


def test_reject_fails_the_execution(client: UiClient, keys: Keys, ui_engine: Engine) -> None:
    eid = start_waiting(ui_engine)
    client.sign_in(keys.admin_a)
    token = client.csrf(f"/ui/executions/{eid}")
    response = client.post(
        f"/ui/executions/{eid}/approve",
        {"csrf_token": token, "activity": "approve", "decision": "reject", "comment": "no"},
    )
    assert response.headers["location"].endswith("?notice=rejected")
    drain(ui_engine)
    page = client.get(f"/ui/executions/{eid}")
    assert 'id="execution-status">failed<' in page.text
    assert "ApprovalRejected" in page.text
    assert _node_status(page.text, "approve") == "failed"


def test_post_without_or_with_a_wrong_csrf_token_is_403(
    client: UiClient, keys: Keys, ui_engine: Engine
) -> None:
    eid = start_waiting(ui_engine)
    client.sign_in(keys.operator_a)
    form = {"activity": "approve", "decision": "approve"}
    assert client.post(f"/ui/executions/{eid}/approve", form).status_code == 403
    wrong = {**form, "csrf_token": "A" * 32}
    assert client.post(f"/ui/executions/{eid}/approve", wrong).status_code == 403
    assert client.post(f"/ui/executions/{eid}/cancel", {}).status_code == 403
    assert client.post("/ui/logout", {}).status_code == 403
    assert ui_engine.for_tenant("acme").query(eid).status == "waiting"


def test_a_token_from_another_session_is_refused(
    make_client: object, keys: Keys, ui_engine: Engine
) -> None:
    eid = start_waiting(ui_engine)
    alice, mallory = make_client(), make_client()  # type: ignore[operator]
    alice.sign_in(keys.operator_a)
    mallory.sign_in(keys.admin_a)
    stolen = mallory.csrf(f"/ui/executions/{eid}")
    response = alice.post(
        f"/ui/executions/{eid}/cancel", {"csrf_token": stolen, "reason": "forged"}
    )
    assert response.status_code == 403
    assert ui_engine.for_tenant("acme").query(eid).status == "waiting"


def test_viewer_sees_but_cannot_act(client: UiClient, keys: Keys, ui_engine: Engine) -> None:
    eid = start_waiting(ui_engine)
    client.sign_in(keys.viewer_a)
    page = client.get(f"/ui/executions/{eid}")
    assert page.status_code == 200 and _node_status(page.text, "approve") == "waiting"
    assert "/approve" not in page.text and "may view this execution but not act" in page.text
    token = client.csrf(f"/ui/executions/{eid}")  # the sign-out form carries one
    for action, form in (
        ("approve", {"activity": "approve", "decision": "approve"}),
        ("signal", {"name": "go"}),
        ("cancel", {}),
    ):
        response = client.post(f"/ui/executions/{eid}/{action}", {**form, "csrf_token": token})
        assert response.status_code == 403, action
    assert ui_engine.for_tenant("acme").query(eid).status == "waiting"


def test_other_tenants_execution_is_the_same_404_as_a_missing_one(
    make_client: object, keys: Keys, ui_engine: Engine
) -> None:
    eid = start_waiting(ui_engine, amount=4242)
    b = make_client()  # type: ignore[operator]
    b.sign_in(keys.operator_b)
    theirs = b.get(f"/ui/executions/{eid}")
    missing_id = eid[:-4] + ("0000" if not eid.endswith("0000") else "1111")
    missing = b.get(f"/ui/executions/{missing_id}")
    assert theirs.status_code == missing.status_code == 404
    assert theirs.text.replace(eid, "X") == missing.text.replace(missing_id, "X")
    assert "4242" not in theirs.text and "purchase" not in theirs.text
    assert b.get(f"/ui/executions/{eid}/live").status_code == 404
    token = b.csrf("/ui")
    for action, form in (
        ("approve", {"activity": "approve", "decision": "approve"}),
        ("signal", {"name": "go"}),
        ("cancel", {}),
    ):
        response = b.post(f"/ui/executions/{eid}/{action}", {**form, "csrf_token": token})
        assert response.status_code == 404, action
        assert "purchase" not in response.text
    listing = b.get("/ui")
    assert eid not in listing.text and "No executions match" in listing.text
    assert ui_engine.for_tenant("acme").query(eid).status == "waiting"


def test_signal_with_a_json_payload(client: UiClient, keys: Keys, ui_engine: Engine) -> None:
    eid = ui_engine.for_tenant("acme").start(SIGNAL_FLOW).id
    drain(ui_engine)
    client.sign_in(keys.operator_a)
    page = client.get(f"/ui/executions/{eid}")
    assert re.search(r'id="waiting-on">signal go', page.text)
    token = client.csrf(f"/ui/executions/{eid}")
    bad = client.post(
        f"/ui/executions/{eid}/signal", {"csrf_token": token, "name": "go", "payload": "{oops"}
    )
    assert bad.status_code == 400 and "not valid JSON" in bad.text
    assert "{oops" in bad.text  # what was typed is kept
    good = client.post(
        f"/ui/executions/{eid}/signal",
        {"csrf_token": token, "name": "go", "payload": '{"n": 7}'},
    )
    assert good.headers["location"].endswith("?notice=signalled")
    drain(ui_engine)
    view = ui_engine.for_tenant("acme").query(eid)
    assert view.status == "completed" and view.output == {"n": 7}


def test_cancel_then_cancel_again_is_a_409_page(
    client: UiClient, keys: Keys, ui_engine: Engine
) -> None:
    eid = start_waiting(ui_engine)
    client.sign_in(keys.operator_a)
    token = client.csrf(f"/ui/executions/{eid}")
    done = client.post(f"/ui/executions/{eid}/cancel", {"csrf_token": token, "reason": "dup"})
    assert done.headers["location"].endswith("?notice=cancelled")
    page = client.get(done.headers["location"])
    assert 'id="execution-status">cancelled<' in page.text
    assert "cancelled by a-op: dup" in page.text
    assert _node_status(page.text, "approve") == "skipped"
    again = client.post(f"/ui/executions/{eid}/cancel", {"csrf_token": token})
    assert again.status_code == 409 and "already cancelled" in again.text


def test_approving_what_is_not_an_approval_is_a_409(
    client: UiClient, keys: Keys, ui_engine: Engine
) -> None:
    eid = start_waiting(ui_engine)
    client.sign_in(keys.operator_a)
    token = client.csrf(f"/ui/executions/{eid}")
    response = client.post(
        f"/ui/executions/{eid}/approve",
        {"csrf_token": token, "activity": "prepare", "decision": "approve"},
    )
    assert response.status_code == 409 and "not an approval" in response.text
    missing = client.post(
        f"/ui/executions/{eid}/approve", {"csrf_token": token, "activity": "approve"}
    )
    assert missing.status_code == 400


def test_sign_out_ends_the_session_even_for_a_replayed_cookie(client: UiClient, keys: Keys) -> None:
    client.sign_in(keys.operator_a)
    cookie = client.cookies["wovyr_session"]
    token = client.csrf("/ui")
    response = client.post("/ui/logout", {"csrf_token": token})
    assert response.status_code == 303 and response.headers["location"] == "/ui/login"
    assert client.get("/ui").status_code == 303
    client.cookies.set("wovyr_session", cookie, domain="testserver", path="/ui")
    assert client.get("/ui").status_code == 303


def test_a_revoked_key_ends_its_sessions(
    client: UiClient, keys: Keys, authenticator: Authenticator
) -> None:
    client.sign_in(keys.operator_a)
    assert client.get("/ui").status_code == 200
    principal = authenticator.verify(keys.operator_a)
    assert principal is not None
    authenticator.revoke(principal.key_id)
    assert client.get("/ui").status_code == 303


def test_tampered_cookie_is_ignored(client: UiClient, keys: Keys) -> None:
    client.sign_in(keys.viewer_a)
    body, mac = client.cookies["wovyr_session"].split(".")
    import base64
    import json

    data = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    data["rol"], data["ten"] = "admin", "globex"
    forged = base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()
    client.cookies.clear()
    client.cookies.set("wovyr_session", f"{forged}.{mac}", domain="testserver", path="/ui")
    assert client.get("/ui").status_code == 303


def test_form_limits(client: UiClient, keys: Keys, ui_engine: Engine) -> None:
    eid = start_waiting(ui_engine)
    client.sign_in(keys.operator_a)
    token = client.csrf(f"/ui/executions/{eid}")
    big = client.post(
        f"/ui/executions/{eid}/signal",
        {"csrf_token": token, "name": "go", "payload": "x" * 70_000},
    )
    assert big.status_code == 413
    wrong_type = client.request("POST", f"/ui/executions/{eid}/cancel", json={"csrf_token": token})
    assert wrong_type.status_code == 415
    assert ui_engine.for_tenant("acme").query(eid).status == "waiting"


def test_static_files_are_served(client: UiClient) -> None:
    js = client.get("/ui/static/wovyr.js")
    assert js.status_code == 200 and "javascript" in js.headers["content-type"]
    css = client.get("/ui/static/wovyr.css")
    assert css.status_code == 200 and "prefers-color-scheme: dark" in css.text


def test_live_fragment_carries_the_parts_and_version(
    client: UiClient, keys: Keys, ui_engine: Engine
) -> None:
    eid = start_waiting(ui_engine)
    client.sign_in(keys.operator_a)
    live = client.get(f"/ui/executions/{eid}/live")
    assert live.status_code == 200
    assert "<html" not in live.text
    for part in ("summary", "actions", "body"):
        assert f'data-live="{part}"' in live.text
    version = ui_engine.for_tenant("acme").query(eid).event_count
    assert f'data-version="{version}" data-finished="false"' in live.text
    page = client.get(f"/ui/executions/{eid}")
    assert f'data-live-url="/ui/executions/{eid}/live"' in page.text


def test_mounted_by_create_app_and_kept_out_of_openapi(tmp_path: Path) -> None:
    from wovyr.server.app import create_app

    engine = memory_engine()
    app = create_app(engine, Settings(home=tmp_path), start_background=False)
    _, token = app.state.authenticator.create_key("acme", "operator", "ops")
    client = UiClient(app)
    try:
        assert client.get("/").headers["location"] == "/ui"
        client.sign_in(token)
        eid = start_waiting(engine)
        page = client.get(f"/ui/executions/{eid}")
        assert page.status_code == 200 and _node_status(page.text, "approve") == "waiting"
        paths = client.get("/openapi.json").json()["paths"]
        assert not [p for p in paths if p == "/" or p.startswith("/ui")]
    finally:
        client.close()
        engine.close()


CHILD = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: child-waits}
activities:
  - id: hold
    wait: {signal: go}
"""
PARENT = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: parent-of-one}
activities:
  - id: kid
    workflow: {name: child-waits}
"""


def test_parent_and_child_link_to_each_other(
    client: UiClient, keys: Keys, ui_engine: Engine
) -> None:
    acme = ui_engine.for_tenant("acme")
    acme.apply(CHILD)
    parent = acme.start(PARENT).id
    drain(ui_engine)
    client.sign_in(keys.viewer_a)
    page = client.get(f"/ui/executions/{parent}")
    assert "Child executions" in page.text
    child = re.search(
        r'<tr data-execution="([^"]+)">\s*<td class="mono"><a href="([^"]+)"', page.text
    )
    assert child and child.group(1).startswith(parent)
    child_page = client.get(child.group(2))
    assert child_page.status_code == 200 and "child-waits" in child_page.text
    assert f'id="parent-link">{parent}<' in child_page.text


SAGA_MAP = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: saga-map}
inputs: {zero: {type: integer, default: 0}}
activities:
  - id: reserve
    set: {ok: true}
    compensate: {set: {undone: true}}
  - id: lines
    needs: [reserve]
    for_each: "${{ [1, 2, 3] }}"
    set: {v: "${{ item }}"}
    compensate: {set: {undone: "${{ item }}"}}
  - id: charge
    needs: [lines]
    set: {v: "${{ 10 / inputs.zero }}"}
    retry: {max_attempts: 1}
"""


def test_execution_page_draws_map_items_the_saga_and_a_gantt(
    client: UiClient, keys: Keys, ui_engine: Engine
) -> None:
    eid = ui_engine.for_tenant("acme").start(SAGA_MAP).id
    drain(ui_engine)
    client.sign_in(keys.viewer_a)
    html = client.get(f"/ui/executions/{eid}").text
    # the map's node carries its items' progress; both compensable nodes their saga step
    assert 'data-total="3" data-done="3" data-failed="0" data-active="0"' in html
    assert "items 3/3" in html
    assert re.findall(r'class="edge undo"[^>]*data-from="(\w+)" data-to="(\w+)"', html) == [
        ("lines", "reserve")
    ]
    # the Gantt: one bar per started activity, in start order
    gantt = html[html.index('<svg xmlns="http://www.w3.org/2000/svg" class="gantt"') :]
    gantt = gantt[: gantt.index("</svg>")]
    assert re.findall(r'<g class="bar status-([\w-]+)" data-activity="(\w+)"', gantt) == [
        ("compensated", "reserve"),
        ("compensated", "lines"),
        ("failed", "charge"),
    ]
