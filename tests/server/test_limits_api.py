"""Rate-limit buckets over the API (`/api/v1/admin/limits`): an admin declares, reads,
changes and deletes its tenant's buckets, each change audited as its key; the list shows
the buckets activities made too; bad numbers are a 422; another tenant's bucket of the
same name is its own (the 404s and roles are in test_isolation)."""

from __future__ import annotations

import pytest
from tests.server.conftest import serve

from wovyr.engine.engine import Engine
from wovyr.settings import Settings
from wovyr.store.flow import FlowAcquire, RateRequest

pytestmark = pytest.mark.anyio

BASE = "/api/v1/admin/limits"
ADMIN = "tenant-a:admin"


async def test_an_admin_declares_reads_changes_and_deletes_its_buckets(
    engine: Engine, settings: Settings
) -> None:
    made = RateRequest("made", units=1, capacity=5, per_second=1.0)  # an activity's own
    engine.store.acquire_flow(FlowAcquire("tenant-a", "x", "W", engine.clock.now(), rates=[made]))
    async with serve(engine, settings) as api:
        put = await api.call("PUT", f"{BASE}/openai", ADMIN, json={"limit": 500, "per": 60})
        assert put.status_code == 200, put.text
        shown = put.json()
        assert shown["key"] == "openai" and shown["declared"] is True
        assert shown["per_second"] == pytest.approx(500 / 60) and shown["burst"] == 500
        changed = await api.call(
            "PUT", f"{BASE}/openai", ADMIN, json={"limit": 10, "per": 1, "burst": 2}
        )
        assert (changed.json()["per_second"], changed.json()["burst"]) == (10, 2)
        listed = (await api.call("GET", BASE, ADMIN)).json()
        assert [(r["key"], r["declared"]) for r in listed] == [("made", False), ("openai", True)]
        one = (await api.call("GET", f"{BASE}/openai", ADMIN)).json()
        assert one["burst"] == 2 and one["updated_by"]
        for bad in ({"limit": 0}, {"limit": 1, "per": -1}, {"limit": 1, "burst": 0}, {}):
            assert (await api.call("PUT", f"{BASE}/x", ADMIN, json=bad)).status_code == 422
        # tenant-b's bucket of the same name is its own
        assert (await api.call("GET", f"{BASE}/openai", "tenant-b:admin")).status_code == 404
        assert (await api.call("GET", BASE, "tenant-b:admin")).json() == []
        assert (await api.call("DELETE", f"{BASE}/openai", ADMIN)).status_code == 204
        assert (await api.call("DELETE", f"{BASE}/openai", ADMIN)).status_code == 404
        assert (await api.call("GET", f"{BASE}/openai", ADMIN)).status_code == 404
        trail = (await api.call("GET", "/api/v1/audit", ADMIN)).json()["items"]
        mine = [(r["action"], r["target"]) for r in trail if r["action"].startswith("limits.")]
        assert mine == [
            ("limits.set", "openai"),
            ("limits.set", "openai"),
            ("limits.delete", "openai"),
        ]
        assert all(
            r["actor"].startswith("key:") for r in trail if r["action"].startswith("limits.")
        )


WORKFLOW_KEYED = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: keyed}
concurrency: {key: one, limit: 1}
activities:
  - id: gate
    wait: {approval: {}}
"""


async def test_a_viewer_sees_the_keys_in_use_and_the_buckets(
    engine: Engine, settings: Settings
) -> None:
    async with serve(engine, settings) as api:
        op = "tenant-a:operator"
        for _ in range(2):
            body = {"definition": WORKFLOW_KEYED}
            assert (await api.call("POST", "/api/v1/workflows", op, json=body)).status_code == 201
        await api.call("PUT", f"{BASE}/openai", ADMIN, json={"limit": 5})
        shown = (await api.call("GET", "/api/v1/flow", "tenant-a:viewer")).json()
        assert shown["keys"] == [{"kind": "workflow", "key": "one", "running": 1, "waiting": 1}]
        assert [b["key"] for b in shown["buckets"]] == ["openai"]
        other = (await api.call("GET", "/api/v1/flow", "tenant-b:viewer")).json()
        assert other == {"keys": [], "buckets": []}
