"""The server's background worker: resume at start-up with bounded concurrency, graceful
shutdown (finish within the grace period, else release the lease), readiness."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest
from tests.server.conftest import serve
from tests.server.test_schedules_api import eventually

from wovyr.activities.base import ActivityRegistry
from wovyr.engine.engine import Engine
from wovyr.settings import Settings
from wovyr.store.base import ClaimAsk

pytestmark = pytest.mark.anyio
BLOCKING = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: blocking}
activities:
  - id: work
    tool: block
  - id: after
    needs: [work]
    set: {done: true}
"""


class Gate:
    """A tool activity that counts how many run at once and waits for `release`."""

    def __init__(self, registry: ActivityRegistry) -> None:
        self.running = 0
        self.peak = 0
        self.calls = 0
        self.release = asyncio.Event()
        registry.register("block", self.run)

    async def run(self) -> str:
        self.calls += 1
        self.running += 1
        self.peak = max(self.peak, self.running)
        try:
            await self.release.wait()
        finally:
            self.running -= 1
        return "ok"


def crash_leftovers(engine: Engine, count: int) -> list[str]:
    """Executions leased by a worker that died: leased, lease expired."""
    ids = [engine.start(BLOCKING, execution_id=f"left-{i}").id for i in range(count)]
    claims = engine.store.claim(ClaimAsk("dead-worker", engine.clock.now(), 5.0, count))
    assert len(claims) == count
    engine.clock.advance(6)  # type: ignore[attr-defined]
    return ids


async def test_start_up_resumes_leftovers_in_bounded_waves(
    engine: Engine, registry: ActivityRegistry, settings: Settings
) -> None:
    gate = Gate(registry)
    ids = crash_leftovers(engine, 6)
    async with serve(engine, replace(settings, concurrency=2), background=True) as api:
        await eventually(lambda: _value(gate.running == 2))
        worker = api.app.state.wovyr.background.worker
        assert len(worker.runners) == 2  # the rest wait their turn: no thundering herd
        gate.release.set()

        async def all_done() -> bool:
            return all(engine.query(i).status == "completed" for i in ids)

        await eventually(all_done)
    assert gate.peak == 2 and gate.calls == 6


async def test_shutdown_releases_leases_after_the_grace_period(
    engine: Engine, registry: ActivityRegistry, settings: Settings
) -> None:
    gate = Gate(registry)
    async with serve(engine, replace(settings, shutdown_grace=0.05), background=True) as api:
        r = await api.call(
            "POST", "/api/v1/workflows", "tenant-a:operator", json={"definition": BLOCKING}
        )
        eid = r.json()["id"]
        await eventually(lambda: _value(gate.running == 1))
    record = engine.for_tenant("tenant-a").get(eid)
    assert record.status == "running" and record.lease_owner is None  # released, not held
    assert engine.store.ready_count(engine.clock.now()) == 1  # the next worker takes it at once


async def test_shutdown_lets_in_flight_work_finish_within_grace(
    engine: Engine, registry: ActivityRegistry, settings: Settings
) -> None:
    gate = Gate(registry)
    served = serve(engine, replace(settings, shutdown_grace=30.0), background=True)
    api = await served.__aenter__()
    try:
        r = await api.call(
            "POST", "/api/v1/workflows", "tenant-a:operator", json={"definition": BLOCKING}
        )
        eid = r.json()["id"]
        await eventually(lambda: _value(gate.running == 1))
    finally:
        worker = api.app.state.wovyr.background.worker
        stopping = asyncio.create_task(served.__aexit__(None, None, None))
        await eventually(lambda: _value(worker._stopping))  # claiming stopped; work in flight
        assert gate.running == 1
        gate.release.set()
        await stopping
    view = engine.for_tenant("tenant-a").query(eid)
    work = view.activities["work"]
    assert work["status"] == "completed" and work["output"] == "ok"


async def test_readyz_reports_a_stopped_background(engine: Engine, settings: Settings) -> None:
    async with serve(engine, settings, background=True) as api:
        assert (await api.client.get("/readyz")).status_code == 200
        await api.app.state.wovyr.background.stop()
        r = await api.client.get("/readyz")
        assert r.status_code == 503
        assert r.json()["checks"]["background"] == "stopped"


async def _value(result: Any) -> Any:
    return result


async def test_the_server_worker_caps_slots_per_tenant_as_set(
    engine: Engine, settings: Settings
) -> None:
    async with serve(engine, replace(settings, max_per_tenant=2), background=True) as api:
        background = api.app.state.wovyr.background
        await eventually(lambda: _value(background.worker is not None))
        worker = background.worker
        assert worker is not None and worker.fair_share and worker.max_per_tenant == 2
        config = background._config()  # what a worker process would be given
        assert config.max_per_tenant == 2


def test_the_worker_process_imports_no_web_stack() -> None:
    """`wovyr serve` starts its worker process while already answering requests: the
    process imports the engine and the worker, not the HTTP application."""
    import subprocess
    import sys

    probe = (
        "import sys, wovyr.server.worker_process\n"
        "web = ('fastapi', 'starlette', 'uvicorn', 'wovyr.server.app', 'wovyr.server.api')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in web or m in web))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
