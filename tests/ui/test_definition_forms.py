"""Starting a definition and applying one from the UI, over HTTP (httpx.ASGITransport): the
start form is generated from the definition's inputs (types, defaults, required, choices)
and a refused start comes back with each problem at its field and what was typed; an admin
applies a pasted document (a refused one comes back with its problems at their lines).
CSRF and roles hold as over the API: an operator may start, an admin may apply, a viewer
neither; another tenant's definition is the same 404 as a missing one."""

from __future__ import annotations

import html
import re

from wovyr.engine.engine import Engine

from .conftest import Keys, UiClient

ORDER = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: order, version: "1"}
inputs:
  customer: {type: string, required: true, description: Who ordered.}
  quantity: {type: integer, default: 1}
  price: {type: number, required: true}
  express: {type: boolean, default: false}
  tier: {type: string, enum: [gold, silver], default: silver}
  items: {type: array, default: []}
activities:
  - {id: total, set: {amount: "${{ double(inputs.quantity) * inputs.price }}"}}
output: {amount: "${{ activities.total.output.amount }}", tier: "${{ inputs.tier }}"}
"""
SHELL = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: shelly, version: "1"}
activities:
  - {id: run, shell: {argv: [echo, hi]}}
"""


def _field(page: str, name: str) -> str:
    """The HTML of one input's field on the start form."""
    found = re.search(rf'<div class="field[^"]*" data-input="{name}">(.*?)</div>', page, re.S)
    assert found, f"no field {name}"
    return found.group(1)


def _start(client: UiClient, **fields: str) -> tuple[int, str, str]:
    token = client.csrf("/ui/definitions/order")
    form = {"csrf_token": token, "version": "1", **{f"in:{k}": v for k, v in fields.items()}}
    response = client.post("/ui/definitions/order/start", form)
    return response.status_code, response.headers.get("location", ""), response.text


def test_the_start_form_follows_the_inputs(client: UiClient, keys: Keys, ui_engine: Engine) -> None:
    ui_engine.for_tenant("acme").apply(ORDER)
    client.sign_in(keys.operator_a)
    page = client.get("/ui/definitions/order").text
    customer = _field(page, "customer")
    assert 'name="in:customer"' in customer and " required" in customer
    assert "Who ordered." in customer and "· required" in customer
    quantity = _field(page, "quantity")
    assert 'type="number" step="1" value="1"' in quantity and " required" not in quantity
    assert 'type="number" step="any" value=""' in _field(page, "price")
    express = _field(page, "express")
    assert '<option value="false" selected>false</option>' in express
    assert '<option value="">(not given: false)</option>' in express
    tier = _field(page, "tier")
    assert '<option value="silver" selected>silver</option>' in tier and "gold" in tier
    assert "<textarea" in _field(page, "items") and "[]</textarea>" in _field(page, "items")


def test_an_operator_starts_it_and_lands_on_the_execution(
    client: UiClient, keys: Keys, ui_engine: Engine
) -> None:
    ui_engine.for_tenant("acme").apply(ORDER)
    client.sign_in(keys.operator_a)
    code, location, _ = _start(
        client, customer="ada", quantity="3", price="2.5", express="", tier="gold", items="[1]"
    )
    assert code == 303 and location.startswith("/ui/executions/")
    assert location.endswith("?notice=started")
    execution_id = location.removeprefix("/ui/executions/").split("?")[0]
    view = ui_engine.for_tenant("acme").query(execution_id)
    assert view.input == {
        "customer": "ada",
        "quantity": 3,
        "price": 2.5,
        "express": False,
        "tier": "gold",
        "items": [1],
    }
    assert "Execution started." in client.get(location).text
    started = [
        e for e in ui_engine.store.audit_records(tenant="acme") if e.action == "execution.start"
    ]
    assert (
        started and started[-1].actor.startswith("key:") and started[-1].actor.endswith("/operator")
    )


def test_a_refused_start_shows_each_problem_at_its_field(
    client: UiClient, keys: Keys, ui_engine: Engine
) -> None:
    ui_engine.for_tenant("acme").apply(ORDER)
    client.sign_in(keys.operator_a)
    # the field's own check: not a number, not JSON
    code, _, page = _start(client, customer="ada", quantity="three", price="1", items="[1,")
    assert code == 400 and "Not started" in page
    assert "not a whole number" in _field(page, "quantity")
    assert 'value="three"' in _field(page, "quantity")  # what was typed stays
    assert "not valid JSON" in _field(page, "items")
    assert "field-error" not in _field(page, "price")
    # the engine's: a required input left empty, a value outside the choices
    code, _, page = _start(client, customer="", price="1", tier="bronze")
    assert code == 400
    assert "input 'customer' is required" in html.unescape(_field(page, "customer"))
    assert "must be one of" in _field(page, "tier")
    assert ui_engine.for_tenant("acme").list().items == []  # nothing was started


def test_roles_csrf_policy_and_tenants_hold_for_the_start_form(
    make_client: object, keys: Keys, ui_engine: Engine
) -> None:
    acme = ui_engine.for_tenant("acme")
    acme.apply(ORDER)
    viewer: UiClient = make_client()  # type: ignore[operator]
    viewer.sign_in(keys.viewer_a)
    page = viewer.get("/ui/definitions/order").text
    assert 'id="start-form"' not in page and "may view this definition but not start" in page
    token = viewer.csrf("/ui/definitions/order")
    form = {"csrf_token": token, "version": "1", "in:customer": "x", "in:price": "1"}
    refused = viewer.post("/ui/definitions/order/start", form)
    assert refused.status_code == 403 and "may not start" in refused.text

    operator: UiClient = make_client()  # type: ignore[operator]
    operator.sign_in(keys.operator_a)
    forged = operator.post("/ui/definitions/order/start", {**form, "csrf_token": token})
    assert forged.status_code == 403  # another session's token
    assert acme.list().items == []

    # the tenant's side-effect policy applies as it does to an API start: applied while
    # shell was allowed, refused at the start once it no longer is
    from wovyr.activities.policy import RESTRICTED, TRUSTED
    from wovyr.engine.tenants import set_policy

    set_policy(ui_engine.store, "acme", TRUSTED, by="host", at=ui_engine.clock.now())
    acme.apply(SHELL)
    set_policy(ui_engine.store, "acme", RESTRICTED, by="host", at=ui_engine.clock.now())
    token = operator.csrf("/ui/definitions/shelly")
    page = operator.post("/ui/definitions/shelly/start", {"csrf_token": token, "version": "1"})
    assert page.status_code == 400
    assert "refused by the side-effect policy of tenant 'acme'" in html.unescape(page.text)
    assert acme.list().items == []

    other: UiClient = make_client()  # type: ignore[operator]
    other.sign_in(keys.operator_b)
    token = other.csrf("/ui/definitions")
    missing = other.post("/ui/definitions/order/start", {"csrf_token": token, "version": "1"})
    assert missing.status_code == 404 and "no definition 'order'" in html.unescape(missing.text)


def _apply(client: UiClient, document: str) -> tuple[int, str, str]:
    token = client.csrf("/ui/definitions")
    response = client.post("/ui/definitions", {"csrf_token": token, "document": document})
    return response.status_code, response.headers.get("location", ""), response.text


def test_an_admin_applies_a_pasted_definition(
    client: UiClient, keys: Keys, ui_engine: Engine
) -> None:
    client.sign_in(keys.admin_a)
    assert 'id="apply-form"' in client.get("/ui/definitions").text
    code, location, _ = _apply(client, ORDER)
    assert (code, location) == (303, "/ui/definitions/order?version=1&notice=applied")
    assert "Definition applied." in client.get(location).text
    assert _apply(client, ORDER)[1].endswith("notice=unchanged")
    registered = ui_engine.store.registered_definition("order", "1", "acme")
    assert registered is not None
    applied = [
        e for e in ui_engine.store.audit_records(tenant="acme") if e.action == "definition.apply"
    ]
    assert applied and applied[-1].actor.endswith("/admin")
    # a document with problems comes back with them, at their lines, and the text kept
    broken = ORDER.replace("  - {id: total", "  - {id: total, needs: [nope]")
    code, _, page = _apply(client, broken)
    assert code == 400 and "needs unknown activity &#39;nope&#39;" in page
    assert re.search(r"line 1\d, column \d+: needs unknown activity", html.unescape(page))
    assert "needs: [nope]" in html.unescape(page)
    # the same name and version with other content: refused, with the fix
    code, _, page = _apply(client, ORDER.replace("double(", "1.0 * double("))
    assert code == 409 and "bump metadata.version" in page


def test_only_an_admin_may_apply(make_client: object, keys: Keys, ui_engine: Engine) -> None:
    for key in (keys.viewer_a, keys.operator_a):
        c: UiClient = make_client()  # type: ignore[operator]
        c.sign_in(key)
        assert 'id="apply-form"' not in c.get("/ui/definitions").text
        code, _, page = _apply(c, ORDER)
        assert code == 403 and "may not apply definitions" in page
    admin: UiClient = make_client()  # type: ignore[operator]
    admin.sign_in(keys.admin_a)
    forged = admin.post("/ui/definitions", {"csrf_token": "nope", "document": ORDER})
    assert forged.status_code == 403
    assert ui_engine.store.list_registered("acme") == []
