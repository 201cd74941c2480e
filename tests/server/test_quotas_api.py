"""Quotas over the API: an over-quota start answers 429 problem+json with Retry-After, and
still does from a new app over the same store (a restart) the same UTC day; an admin reads
its tenant's quotas and usage and may lower them, never raise them."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from tests.server.conftest import APPROVAL_FLOW, serve

from wovyr.engine.engine import Engine
from wovyr.engine.quotas import Quotas
from wovyr.settings import Settings

pytestmark = pytest.mark.anyio

BASE = "/api/v1/workflows"
OP = "tenant-a:operator"
ADMIN = "tenant-a:admin"


async def test_the_fourth_start_is_429_with_retry_after_even_after_a_restart(
    engine: Engine, settings: Settings
) -> None:
    engine.for_tenant("tenant-a").set_quotas(Quotas(executions_per_day=3), by="test")
    body = {"definition": APPROVAL_FLOW}
    async with serve(engine, settings) as api:
        for _ in range(3):
            assert (await api.call("POST", BASE, OP, json=body)).status_code == 201
        refused = await api.call("POST", BASE, OP, json=body)
        assert refused.status_code == 429
        assert refused.headers["content-type"].startswith("application/problem+json")
        assert refused.headers["Retry-After"] == str(15 * 3600)  # 09:00 UTC to midnight
        assert "executions per day is 3" in refused.json()["detail"]
        # another tenant has its own budget
        assert (await api.call("POST", BASE, "tenant-b:operator", json=body)).status_code == 201
    restarted = Engine(engine.store, clock=engine.clock, activities=engine.activities)
    async with serve(restarted, settings) as api:
        assert (await api.call("POST", BASE, OP, json=body)).status_code == 429
        api.clock.set(datetime(2030, 1, 2, 0, 0, 1, tzinfo=UTC))  # the next UTC day
        assert (await api.call("POST", BASE, OP, json=body)).status_code == 201


async def test_an_admin_reads_and_lowers_its_quotas_but_never_raises_them(
    engine: Engine, settings: Settings
) -> None:
    engine.for_tenant("tenant-a").set_quotas(Quotas(executions_per_day=10), by="cli")
    async with serve(engine, settings) as api:
        assert (await api.call("GET", "/api/v1/admin/quotas", OP)).status_code == 403
        await api.call("POST", BASE, OP, json={"definition": APPROVAL_FLOW})
        shown = (await api.call("GET", "/api/v1/admin/quotas", ADMIN)).json()
        assert shown["quotas"]["executions_per_day"] == 10
        assert shown["used"] == {"executions": 1.0, "model_tokens": 0.0, "model_cost": 0.0}
        assert shown["running"] == 1 and shown["day"] == "2030-01-01"
        lowered = await api.call(
            "PATCH",
            "/api/v1/admin/quotas",
            ADMIN,
            json={"executions_per_day": 5, "concurrent_executions": 2},
        )
        assert lowered.status_code == 200
        assert lowered.json()["quotas"]["concurrent_executions"] == 2
        for raise_ in ({"executions_per_day": 6}, {"concurrent_executions": None}):
            refused = await api.call("PATCH", "/api/v1/admin/quotas", ADMIN, json=raise_)
            assert refused.status_code == 403
            assert "wovyr admin quotas set tenant-a" in refused.json()["detail"]
        bad = await api.call("PATCH", "/api/v1/admin/quotas", ADMIN, json={"nope": 1})
        assert bad.status_code == 422
        # tenant-b's admin sees its own (none), not tenant-a's
        other = (await api.call("GET", "/api/v1/admin/quotas", "tenant-b:admin")).json()
        assert other["quotas"]["executions_per_day"] is None


async def test_an_admin_may_lower_its_fair_share_never_raise_it(
    engine: Engine, settings: Settings
) -> None:
    path = "/api/v1/admin/quotas"
    async with serve(engine, settings) as api:
        # No weight stored: the default 1 is what the host granted.
        refused = await api.call("PATCH", path, ADMIN, json={"weight": 2})
        assert refused.status_code == 403 and "raise weight" in refused.json()["detail"]
        lowered = await api.call("PATCH", path, ADMIN, json={"weight": 0.5, "max_slots": 4})
        assert lowered.status_code == 200
        assert lowered.json()["quotas"]["weight"] == 0.5
        for raise_ in ({"weight": 0.8}, {"weight": None}, {"max_slots": 5}, {"max_slots": None}):
            refused = await api.call("PATCH", path, ADMIN, json=raise_)
            assert refused.status_code == 403, raise_
        # The host raises it; the tenant's admin may then go down from there.
        engine.for_tenant("tenant-a").set_quotas(Quotas(weight=3.0, max_slots=4), by="cli")
        assert (await api.call("PATCH", path, ADMIN, json={"weight": 2})).status_code == 200
        assert (await api.call("PATCH", path, ADMIN, json={"weight": 2.5})).status_code == 403
        bad = await api.call("PATCH", path, ADMIN, json={"weight": 0})
        assert bad.status_code == 422
        assert engine.for_tenant("tenant-a").quotas().weight == 2.0
        # The cap on executions leased by all workers: set or lowered, never raised.
        set_cap = await api.call("PATCH", path, ADMIN, json={"max_running": 3})
        assert set_cap.status_code == 200 and set_cap.json()["quotas"]["max_running"] == 3
        for raise_ in ({"max_running": 4}, {"max_running": None}):
            assert (await api.call("PATCH", path, ADMIN, json=raise_)).status_code == 403
        assert (await api.call("PATCH", path, ADMIN, json={"max_running": 0})).status_code == 422
        assert engine.for_tenant("tenant-a").quotas().max_running == 3
