"""Hostile use of a tenant's quotas over HTTP: a tenant that tries to spend more of the
server than its host granted, and what that leaves for another tenant.

- A continue-as-new chain that hands over at once, forever, makes no more runs a day than
  the tenant's `executions_per_day` (it was: 4,303 runs in 30 s against a limit of 3), and
  never more than one run a second per chain (`min_continue_interval`); another tenant's
  chain runs on.
- A tenant has at most `max_schedules` schedules (200 schedules made 4,124 runs in 22 s);
  its admin cannot raise the cap; another tenant's schedules do not count.
- A tenant whose executions hold a worker's slots with slow attempts cannot take them all:
  another tenant's execution is claimed in the next round (it waited 30 s for one of 64
  slots to free).

Counted with the ManualClock of the fixtures: each `advance` is a second, each `drain`
runs everything runnable at that time. The store is real (every backend).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from tests.server.conftest import Api

from wovyr.engine.quotas import Quotas
from wovyr.worker import Worker

pytestmark = pytest.mark.anyio

ATTACKER, ATTACKER_ADMIN = "tenant-b:operator", "tenant-b:admin"
OTHER = "tenant-a:operator"
BASE = "/api/v1/workflows"


def loop(runs: int) -> str:
    """A chain that hands over as soon as it starts, `runs` times (no I/O in a run)."""
    return f"""\
apiVersion: wovyr/v1
kind: Workflow
metadata: {{name: loop}}
inputs: {{n: {{type: integer, default: 1}}}}
activities:
  - {{id: step, set: {{n: "${{{{ inputs.n }}}}"}}}}
output: "${{{{ inputs.n }}}}"
continue_as_new: {{when: "${{{{ inputs.n < {runs} }}}}", input: {{n: "${{{{ inputs.n + 1 }}}}"}}}}
"""


async def runs_of(api: Api, who: str) -> list[dict[str, Any]]:
    listed = await api.call("GET", f"{BASE}?limit=200&workflow=loop", who)
    assert listed.status_code == 200, listed.text
    return list(listed.json()["items"])


async def seconds(api: Api, count: int) -> None:
    """`count` seconds, each followed by a pass of the worker."""
    await api.drain()
    for _ in range(count):
        api.clock.advance(1)
        await api.drain()


async def test_a_chain_that_never_ends_stops_at_the_daily_quota(api: Api) -> None:
    api.engine.for_tenant("tenant-b").set_quotas(Quotas(executions_per_day=3), by="host")
    r = await api.call("POST", BASE, ATTACKER, json={"definition": loop(500), "id": "spin"})
    assert r.status_code == 201, r.text
    r = await api.call("POST", BASE, OTHER, json={"definition": loop(5), "id": "mine"})
    assert r.status_code == 201, r.text
    await seconds(api, 10)
    assert len(await runs_of(api, ATTACKER)) == 3  # the start and two hand-overs: the limit
    live = (await api.call("GET", f"{BASE}/spin", ATTACKER)).json()
    assert (live["id"], live["status"]) == ("spin~c3", "waiting")
    assert live["waiting_on"].startswith("quota: executions per day for tenant tenant-b")
    again = await api.call("POST", BASE, ATTACKER, json={"definition": loop(1)})
    assert again.status_code == 429  # a plain start is refused as before
    mine = (await api.call("GET", f"{BASE}/mine", OTHER)).json()
    assert (mine["id"], mine["status"]) == ("mine~c5", "completed")  # untouched by b's
    used = (await api.call("GET", "/api/v1/admin/quotas", ATTACKER_ADMIN)).json()["used"]
    assert used["executions"] == 3


async def test_a_chain_starts_at_most_one_run_a_second(api: Api) -> None:
    r = await api.call("POST", BASE, ATTACKER, json={"definition": loop(500), "id": "spin"})
    assert r.status_code == 201, r.text
    await seconds(api, 5)
    assert len(await runs_of(api, ATTACKER)) == 6  # at 0, 1, ..., 5 s; no quota set
    live = (await api.call("GET", f"{BASE}/spin", ATTACKER)).json()
    assert live["waiting_on"].startswith("continue-as-new: one run of chain spin every 1 s")


async def test_schedules_past_the_tenants_cap_are_refused(api: Api) -> None:
    api.engine.for_tenant("tenant-b").set_quotas(Quotas(max_schedules=2), by="host")

    async def create(who: str, name: str) -> Any:
        body = {"id": name, "definition": loop(1), "every": "1m"}
        return await api.call("POST", "/api/v1/schedules", who, json=body)

    for name in ("s1", "s2"):
        assert (await create(ATTACKER, name)).status_code == 201
    refused = await create(ATTACKER, "s3")
    assert refused.status_code == 429
    assert "at most 2 schedules" in refused.json()["detail"]
    raised = await api.call(
        "PATCH", "/api/v1/admin/quotas", ATTACKER_ADMIN, json={"max_schedules": 200}
    )
    assert raised.status_code == 403  # only the host raises a cap
    cleared = await api.call(
        "PATCH", "/api/v1/admin/quotas", ATTACKER_ADMIN, json={"max_schedules": None}
    )
    assert cleared.status_code == 403  # removing it is raising it
    listed = await api.call("GET", "/api/v1/schedules", ATTACKER)
    assert [s["id"] for s in listed.json()["items"]] == ["s1", "s2"]
    for name in ("s1", "s2", "s3"):  # another tenant: its own count, no cap
        assert (await create(OTHER, name)).status_code == 201


def one_step(tool: str) -> str:
    return f"""\
apiVersion: wovyr/v1
kind: Workflow
metadata: {{name: {tool}}}
activities:
  - {{id: s, tool: {tool}}}
"""


async def test_a_tenant_filling_a_worker_leaves_slots_for_another(api: Api) -> None:
    turns: asyncio.Queue[None] = asyncio.Queue()  # the attacker's attempts end only on a turn

    async def slow() -> str:
        await turns.get()
        return "slow"

    api.engine.activities.register("slow", slow)
    api.engine.activities.register("quick", lambda: "quick")
    for i in range(70):
        body = {"definition": one_step("slow"), "id": f"hog-{i}"}
        assert (await api.call("POST", BASE, ATTACKER, json=body)).status_code == 201
    worker = Worker(api.engine)  # 64 slots, as a server's
    try:
        assert await worker.tick() == 56  # all the attacker may hold: 8 are kept for others
        body = {"definition": one_step("quick"), "id": "mine"}
        assert (await api.call("POST", BASE, OTHER, json=body)).status_code == 201
        assert await worker.tick() == 1  # the next round, with none of the attacker's done
        await asyncio.wait([worker._tasks[("tenant-a", "mine")]])
        mine = (await api.call("GET", f"{BASE}/mine", OTHER)).json()
        assert mine["status"] == "completed"
        hogs = await api.call("GET", f"{BASE}?limit=100&status=running", ATTACKER)
        assert len(hogs.json()["items"]) == 70  # none of them ended
    finally:
        await worker.shutdown(grace_seconds=0)
