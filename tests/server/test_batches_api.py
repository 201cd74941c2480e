"""Bulk actions over the API: `POST /api/v1/batches` records a batch (201; the same key or a
running twin answers it with 200), the server's background loop works on it, `GET` shows
its progress and item outcomes; operator for cancel/signal/rerun, admin for delete;
another tenant's batch answers 404; the submission is audited."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.server.conftest import Api, serve
from tests.server.test_schedules_api import eventually

from wovyr.activities.base import ActivityRegistry
from wovyr.clock import ManualClock
from wovyr.engine.bulk import BatchRunner
from wovyr.engine.engine import Engine
from wovyr.settings import Settings
from wovyr.store.sqlite import SQLiteStore

pytestmark = pytest.mark.anyio
OP, VIEW, ADMIN = "tenant-a:operator", "tenant-a:viewer", "tenant-a:admin"
OTHER = "tenant-b:admin"
BASE = "/api/v1/batches"

FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: orders}
activities:
  - {id: wait, wait: {signal: go}}
"""


def start(engine: Engine, n: int, tenant: str = "tenant-a") -> None:
    mine = engine.for_tenant(tenant)
    for i in range(n):
        mine.start(FLOW, execution_id=f"run-{i}", labels={"team": "ops"})


async def test_submit_run_and_read_a_bulk_cancel(api: Api) -> None:
    start(api.engine, 5)
    start(api.engine, 2, tenant="tenant-b")
    body = {"action": "cancel", "filter": {"labels": {"team": "ops"}}, "idempotency_key": "k"}
    assert (await api.call("POST", BASE, VIEW, json=body)).status_code == 403
    r = await api.call("POST", BASE, OP, json=body)
    assert r.status_code == 201, r.text
    batch = r.json()
    assert batch["status"] == "running" and batch["progress"]["listed"] == 0
    assert r.headers["location"] == f"{BASE}/{batch['id']}"
    again = await api.call("POST", BASE, OP, json=body)
    assert again.status_code == 200 and again.json()["id"] == batch["id"]

    BatchRunner(api.engine, "r1", page_size=2).run()

    r = await api.call("GET", f"{BASE}/{batch['id']}", VIEW, params={"limit": 3})
    assert r.status_code == 200, r.text
    shown = r.json()
    assert shown["status"] == "completed"
    assert shown["progress"] == {
        "listed": 5,
        "ok": 5,
        "skipped": 0,
        "errors": 0,
        "pending": 0,
        "pages": 3,
        "listed_all": True,
    }
    assert [i["execution_id"] for i in shown["items"]] == ["run-4", "run-3", "run-2"]
    assert shown["items"][0]["outcome"] == "ok" and shown["next_after"] == 3
    rest = await api.call("GET", f"{BASE}/{batch['id']}", VIEW, params={"after": 3})
    assert [i["n"] for i in rest.json()["items"]] == [4, 5] and rest.json()["next_after"] is None
    assert api.engine.for_tenant("tenant-b").get("run-0").status == "running"
    listed = await api.call("GET", BASE, VIEW)
    assert [b["id"] for b in listed.json()["items"]] == [batch["id"]]

    assert (await api.call("GET", f"{BASE}/{batch['id']}", OTHER)).status_code == 404
    assert (await api.call("GET", BASE, OTHER)).json()["items"] == []
    audit = (await api.call("GET", "/api/v1/audit", ADMIN)).json()
    submits = [r for r in audit["items"] if r["action"] == "batch.submit"]
    assert len(submits) == 1 and submits[0]["target"] == batch["id"]


async def test_a_bulk_delete_needs_an_admin(api: Api) -> None:
    start(api.engine, 2)
    api.engine.for_tenant("tenant-a").cancel("run-0")
    body = {"action": "delete", "filter": {"status": "cancelled"}}
    r = await api.call("POST", BASE, OP, json=body)
    assert r.status_code == 403 and "admin" in r.json()["detail"]
    r = await api.call("POST", BASE, ADMIN, json=body)
    assert r.status_code == 201, r.text
    BatchRunner(api.engine, "r1").run()
    shown = (await api.call("GET", f"{BASE}/{r.json()['id']}", ADMIN)).json()
    assert [(i["execution_id"], i["outcome"]) for i in shown["items"]] == [("run-0", "ok")]
    assert (await api.call("GET", "/api/v1/workflows/run-0", ADMIN)).status_code == 404


async def test_bad_submissions_are_refused(api: Api) -> None:
    bad = [
        {"action": "cancel", "filter": {}},
        {"action": "signal", "filter": {"status": "running"}},
        {"action": "nuke", "filter": {"status": "running"}},
        {"action": "cancel", "filter": {"status": "sleeping"}},
    ]
    for body in bad:
        r = await api.call("POST", BASE, OP, json=body)
        assert r.status_code == 422, (body, r.text)
    r = await api.call(
        "POST",
        BASE,
        OP,
        json={"action": "cancel", "filter": {"status": "running"}, "idempotency_key": "k"},
    )
    assert r.status_code == 201
    r = await api.call(
        "POST",
        BASE,
        OP,
        json={"action": "cancel", "filter": {"status": "waiting"}, "idempotency_key": "k"},
    )
    assert r.status_code == 409


async def test_the_servers_background_works_on_a_submitted_batch(
    registry: ActivityRegistry, clock: ManualClock, tmp_path: Path
) -> None:
    engine = Engine(SQLiteStore(), clock=clock, activities=registry)
    start(engine, 3)
    settings = Settings(home=tmp_path / "home", dispatch_interval=3600.0)
    async with serve(engine, settings, background=True) as api:
        body = {"action": "signal", "filter": {"status": "waiting"}, "signal": "go"}
        await api.drain()  # they wait for the signal now
        r = await api.call("POST", BASE, OP, json=body)
        assert r.status_code == 201, r.text
        batch_id = r.json()["id"]

        async def completed() -> bool:
            shown = (await api.call("GET", f"{BASE}/{batch_id}", VIEW)).json()
            return bool(shown["status"] == "completed" and shown["progress"]["ok"] == 3)

        # woken by the submission: the next look (an hour away) is not waited for
        await eventually(completed)
    engine.close()
