"""API v1 schedules: the CLI's operations over HTTP, and a schedule firing through the
server's own background worker (ManualClock: time moves only when the test says)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from tests.server.conftest import APPROVAL_FLOW, Api, serve

from wovyr.engine.engine import Engine
from wovyr.settings import Settings

pytestmark = pytest.mark.anyio
OP, VIEW = "tenant-a:operator", "tenant-a:viewer"
BASE = "/api/v1/schedules"
TICKING = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: tick}
activities:
  - id: a
    set: {x: 1}
"""


async def test_schedule_lifecycle(api: Api) -> None:
    r = await api.call(
        "POST",
        BASE,
        OP,
        json={"id": "nightly", "definition": APPROVAL_FLOW, "cron": "0 3 * * *", "note": "n"},
    )
    assert r.status_code == 201, r.text
    created = r.json()
    assert created["describe"] and len(created["next_fire_times"]) == 5
    assert created["definition_hash"]  # an inline definition is pinned
    dup = await api.call(
        "POST", BASE, OP, json={"id": "nightly", "definition": TICKING, "every": "1m"}
    )
    assert dup.status_code == 409
    listed = (await api.call("GET", BASE, VIEW)).json()["items"]
    assert [s["id"] for s in listed] == ["nightly"]
    r = await api.call(
        "PATCH", f"{BASE}/nightly", OP, json={"every": "15m", "overlap": "allow_all"}
    )
    assert r.status_code == 200, r.text
    assert r.json()["spec"]["every"] == 900 and r.json()["overlap"] == "allow_all"
    r = await api.call("POST", f"{BASE}/nightly/pause", OP, json={"note": "maintenance"})
    assert r.json()["paused"] is True and r.json()["next_fire_at"] is None
    r = await api.call("POST", f"{BASE}/nightly/resume", OP)
    assert r.json()["paused"] is False and r.json()["next_fire_at"] is not None
    r = await api.call("POST", f"{BASE}/nightly/trigger", OP)
    assert r.status_code == 201
    triggered = r.json()["execution_id"]
    got = await api.call("GET", f"/api/v1/workflows/{triggered}", VIEW)
    assert got.status_code == 200 and got.json()["workflow"] == "purchase"
    r = await api.call(
        "POST",
        f"{BASE}/nightly/backfill",
        OP,
        json={"start": "2029-12-31T23:00:00Z", "end": "2030-01-01T00:00:00Z"},
    )
    assert r.status_code == 201 and len(r.json()["execution_ids"]) == 4
    r = await api.call("DELETE", f"{BASE}/nightly", OP)
    assert r.status_code == 204
    assert (await api.call("GET", f"{BASE}/nightly", VIEW)).status_code == 404


async def test_schedule_validation(api: Api) -> None:
    cases: list[dict[str, Any]] = [
        {"id": "s", "definition": TICKING},  # neither cron nor every
        {"id": "s", "definition": TICKING, "cron": "* * * * *", "every": "1m"},
        {"id": "s", "definition": TICKING, "cron": "not cron"},
        {"id": "s", "workflow": "missing", "every": "1m"},
        {"id": "s", "workflow": "/etc/passwd.yaml", "every": "1m"},
        {"id": "bad id!", "definition": TICKING, "every": "1m"},
        {"id": "s", "definition": "kind: [", "every": "1m"},
    ]
    for body in cases:
        r = await api.call("POST", BASE, OP, json=body)
        assert r.status_code in (404, 422), (body, r.status_code, r.text)
        assert r.headers["content-type"] == "application/problem+json"
    r = await api.call("POST", BASE, OP, json={"id": "s", "definition": TICKING, "every": "1m"})
    assert r.status_code == 201
    r = await api.call("PATCH", f"{BASE}/s", OP, json={"cron": "bogus"})
    assert r.status_code == 422
    r = await api.call(
        "POST",
        f"{BASE}/s/backfill",
        OP,
        json={"start": "2030-01-02T00:00:00Z", "end": "2030-01-01T00:00:00Z"},
    )
    assert r.status_code == 422


async def eventually(check: Callable[[], Any], *, seconds: float = 10.0) -> Any:
    """Poll `check` (an async callable) until it returns a truthy value, or fail."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while True:
        result = await check()
        if result:
            return result
        assert loop.time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


async def test_schedule_fires_through_the_server_alone(engine: Engine, settings: Settings) -> None:
    async with serve(engine, settings, background=True) as api:
        r = await api.call(
            "POST", BASE, OP, json={"id": "every-minute", "definition": TICKING, "every": "1m"}
        )
        assert r.status_code == 201
        api.clock.advance(61)  # the tick is due

        async def fired() -> Any:
            page = (await api.call("GET", "/api/v1/workflows", VIEW)).json()["items"]
            # Time passes: the worker's poll may have begun after the first advance.
            api.clock.advance(1)
            return [i for i in page if i["status"] == "completed"]

        done = await eventually(fired)
        assert done[0]["workflow"] == "tick"
        sched = (await api.call("GET", f"{BASE}/every-minute", VIEW)).json()
        assert sched["fired"] >= 1
        ready = (await api.client.get("/readyz")).json()
        assert ready["checks"]["background"] == "ok"
