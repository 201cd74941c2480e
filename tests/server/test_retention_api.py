"""Retention over the API and in the server's housekeeping: a tenant's admin (only) reads
and sets its own tenant's days, never `export_to` (a folder on the host), each change is
audited as the caller; and a housekeeping round purges what is past every tenant's
retention, with one tenant's setting never touching another tenant."""

from __future__ import annotations

import pytest
from tests.server.conftest import APPROVAL_FLOW, serve

from wovyr.engine.engine import Engine
from wovyr.engine.retention import Retention
from wovyr.errors import NotFound
from wovyr.server.background import Background
from wovyr.settings import Settings

pytestmark = pytest.mark.anyio

PATH = "/api/v1/admin/retention"
ADMIN = "tenant-a:admin"

QUICK = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: quick}
activities:
  - id: x
    set: {ok: true}
"""


async def test_an_admin_reads_and_sets_its_own_tenants_retention(
    engine: Engine, settings: Settings
) -> None:
    engine.for_tenant("tenant-a").set_retention(Retention(export_to="/srv/archive"), by="cli")
    async with serve(engine, settings) as api:
        for who in ("tenant-a:operator", "tenant-a:viewer"):
            assert (await api.call("GET", PATH, who)).status_code == 403
            assert (await api.call("PUT", PATH, who, json={"days": 1})).status_code == 403
        shown = (await api.call("GET", PATH, ADMIN)).json()
        assert shown == {"tenant": "tenant-a", "days": None, "workflows": {}, "export": True}
        body = {"days": 90, "workflows": {"quick": 7}}
        put = await api.call("PUT", PATH, ADMIN, json=body)
        assert put.status_code == 200, put.text
        assert put.json() == {"tenant": "tenant-a", **body, "export": True}
        # the host's folder is kept, and never shown nor set over the API
        assert engine.for_tenant("tenant-a").retention().export_to == "/srv/archive"
        refused = await api.call("PUT", PATH, ADMIN, json={"days": 1, "export_to": "/tmp"})
        assert refused.status_code == 403
        assert "wovyr admin retention set tenant-a --export-to" in refused.json()["detail"]
        for bad in ({"days": 0}, {"days": "7"}, {"workflows": {"quick": -1}}, {"keep": 3}):
            assert (await api.call("PUT", PATH, ADMIN, json=bad)).status_code == 422, bad
        # tenant-b's admin sees and sets its own, not tenant-a's
        other = (await api.call("GET", PATH, "tenant-b:admin")).json()
        assert other == {"tenant": "tenant-b", "days": None, "workflows": {}, "export": False}
        await api.call("PUT", PATH, "tenant-b:admin", json={"days": 3})
        assert engine.for_tenant("tenant-a").retention().days == 90
        audit = engine.store.audit_records(tenant="tenant-a")
        changes = [r for r in audit if r.action == "tenant.retention"]
        assert changes[-1].actor.startswith("key:") and changes[-1].details["days"] == 90


async def test_a_housekeeping_round_purges_past_each_tenants_retention(
    engine: Engine, settings: Settings
) -> None:
    a, b = engine.for_tenant("tenant-a"), engine.for_tenant("tenant-b")
    async with serve(engine, settings) as api:
        done_a = a.start(QUICK, execution_id="same").id
        done_b = b.start(QUICK, execution_id="same").id
        waiting = a.start(APPROVAL_FLOW).id
        await api.drain()
        await api.call("PUT", PATH, ADMIN, json={"days": 2})
        await api.call("PUT", PATH, "tenant-b:admin", json={"days": 30})
        api.clock.advance(days=1)
        background = Background(engine, settings)
        assert [r.purged for r in background.housekeep_now()] == [0, 0]  # not old enough yet
        api.clock.advance(days=2)
        reports = background.housekeep_now()
        assert [(r.tenant, r.purged) for r in reports] == [("tenant-a", 1), ("tenant-b", 0)]
        with pytest.raises(NotFound):
            a.query(done_a)
        assert b.query(done_b).status == "completed"
        assert a.query(waiting).status == "waiting"
        gone = await api.call("GET", f"/api/v1/workflows/{done_a}", ADMIN)
        assert gone.status_code == 404
