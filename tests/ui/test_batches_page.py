"""Bulk actions in the web UI: the executions list offers "cancel / rerun all matching" for
its filter to an operator (with a box to tick), which submits a batch and shows its page;
the batches page lists progress; a viewer may not act; another tenant's batch is a 404."""

from __future__ import annotations

from collections.abc import Callable

from wovyr.engine.bulk import BatchRunner, Bulk, BulkFilter
from wovyr.engine.engine import Engine

from .conftest import Keys, UiClient

FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: relay}
activities:
  - {id: c, wait: {signal: go}}
"""


def _start(engine: Engine, n: int, tenant: str = "acme") -> None:
    mine = engine.for_tenant(tenant)
    for i in range(n):
        mine.start(FLOW, execution_id=f"r-{i}", labels={"team": "ops"})


def test_an_operator_cancels_all_matching_from_the_list(
    client: UiClient, keys: Keys, ui_engine: Engine
) -> None:
    _start(ui_engine, 3)
    _start(ui_engine, 1, tenant="globex")
    client.sign_in(keys.operator_a)
    page = client.get("/ui", params={"label": "team=ops"})
    assert 'id="bulk-form"' in page.text
    assert '<input type="hidden" name="label" value="team=ops">' in page.text
    token = client.csrf("/ui")
    form = {"csrf_token": token, "label": "team=ops", "action": "cancel"}

    unconfirmed = client.post("/ui/batches", form)
    assert unconfirmed.status_code == 400 and "Tick the box" in unconfirmed.text
    assert Bulk(ui_engine.for_tenant("acme")).batches() == []

    done = client.post("/ui/batches", {**form, "confirm": "yes"})
    assert done.status_code == 303
    target = done.headers["location"]
    assert target.startswith("/ui/batches/") and target.endswith("?notice=submitted")
    batch_id = target.removeprefix("/ui/batches/").split("?")[0]
    shown = client.get(target)
    assert "Bulk action submitted" in shown.text and 'id="batch-status">running<' in shown.text
    assert '<meta http-equiv="refresh" content="2">' in shown.text

    BatchRunner(ui_engine, "r1").run()
    shown = client.get(f"/ui/batches/{batch_id}")
    assert 'id="batch-status">completed<' in shown.text
    assert "3 ok · 0 skipped · 0 errors · 0 pending of 3" in shown.text
    assert shown.text.count('data-outcome="ok"') == 3
    assert 'http-equiv="refresh"' not in shown.text
    assert all(ui_engine.for_tenant("acme").get(f"r-{i}").status == "cancelled" for i in range(3))
    assert ui_engine.for_tenant("globex").get("r-0").status == "running"

    listed = client.get("/ui/batches")
    assert f'data-batch="{batch_id}" data-status="completed"' in listed.text
    audit = [r for r in ui_engine.store.audit_records() if r.action == "batch.submit"]
    assert [r.actor.split("/")[-1] for r in audit] == ["operator"]


def test_viewers_may_not_act_and_other_tenants_see_nothing(
    make_client: Callable[[], UiClient], keys: Keys, ui_engine: Engine
) -> None:
    _start(ui_engine, 2)
    _, batch = Bulk(ui_engine.for_tenant("acme")).submit("cancel", BulkFilter(status="running"))
    viewer: UiClient = make_client()
    viewer.sign_in(keys.viewer_a)
    assert 'id="bulk-form"' not in viewer.get("/ui", params={"status": "running"}).text
    assert viewer.get(f"/ui/batches/{batch.id}").status_code == 200
    token = viewer.csrf("/ui")
    refused = viewer.post(
        "/ui/batches",
        {"csrf_token": token, "status": "running", "action": "cancel", "confirm": "yes"},
    )
    assert refused.status_code == 403

    other: UiClient = make_client()
    other.sign_in(keys.operator_b)
    assert other.get(f"/ui/batches/{batch.id}").status_code == 404
    assert 'id="no-batches"' in other.get("/ui/batches").text


def test_a_list_filtered_beyond_what_a_batch_takes_offers_no_bulk_action(
    client: UiClient, keys: Keys, ui_engine: Engine
) -> None:
    _start(ui_engine, 1)
    client.sign_in(keys.operator_a)
    everything = client.get("/ui")
    assert 'id="bulk-form"' not in everything.text  # no filter: not offered
    by_name = client.get("/ui", params={"name": "rel"})
    assert 'id="bulk-form"' not in by_name.text and 'id="bulk-unavailable"' in by_name.text
    token = client.csrf("/ui")
    refused = client.post(
        "/ui/batches", {"csrf_token": token, "name": "rel", "action": "cancel", "confirm": "yes"}
    )
    assert refused.status_code == 400 and "cannot be acted on in bulk" in refused.text
