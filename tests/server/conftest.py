"""Fixtures for the HTTP API: the real app over every store, on a ManualClock, driven through
`httpx.ASGITransport`, with API keys for two tenants in every role."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from wovyr.activities.base import ActivityRegistry
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.platform.auth import Authenticator
from wovyr.server import create_app
from wovyr.settings import Settings
from wovyr.worker import Worker

TENANTS = ("tenant-a", "tenant-b")
ROLES = ("viewer", "operator", "admin")

APPROVAL_FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: purchase}
inputs:
  note: {type: string, default: ""}
activities:
  - id: prepare
    set: {note: "${{ inputs.note }}"}
  - id: gate
    needs: [prepare]
    wait: {approval: {}}
  - id: go
    needs: [prepare]
    wait: {signal: go}
  - id: ship
    needs: [gate, go]
    set: {shipped: true}
output: {shipped: "${{ activities.ship.output.shipped }}"}
"""


async def until(condition: Callable[[], bool]) -> None:
    """Wait for `condition`, checked every 10 ms, at most 3,000 times (a bound on the
    waiting, not a duration under test)."""
    import asyncio

    for _ in range(3000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the condition never held")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Api:
    """One app and a client; `as_(who)` gives the headers of a key: "tenant-a:operator"."""

    app: FastAPI
    engine: Engine
    clock: ManualClock
    client: httpx.AsyncClient
    authenticator: Authenticator
    tokens: dict[str, str] = field(default_factory=dict)
    key_ids: dict[str, str] = field(default_factory=dict)

    def as_(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}"}

    def configure(self, **changes: Any) -> None:
        """Serve an engine built with `changes` to its runtime (`providers`, `side_effects`)
        from now on: the same store, listeners and caches (an engine is never changed)."""
        engine = Engine.over(replace(self.engine.runtime, **changes))
        self.engine = self.app.state.engine = self.app.state.wovyr.engine = engine

    async def drain(self) -> None:
        """Run everything runnable now (the background worker is off in these tests)."""
        worker = Worker(self.engine)
        try:
            await worker.run_until_idle()
        finally:
            await worker.close()

    async def call(
        self, method: str, path: str, who: str | None = None, **kw: Any
    ) -> httpx.Response:
        headers = dict(kw.pop("headers", {}))
        if who is not None:
            headers.update(self.as_(who))
        return await self.client.request(method, path, headers=headers, **kw)


def add_keys(api: Api) -> None:
    for tenant in TENANTS:
        for role in ROLES:
            who = f"{tenant}:{role}"
            key_id, token = api.authenticator.create_key(tenant, role, f"{tenant}-{role}")
            api.tokens[who], api.key_ids[who] = token, key_id
    key_id, token = api.authenticator.create_key("tenant-a", "admin", "revoked-one")
    api.authenticator.revoke(key_id)
    api.tokens["tenant-a:revoked"], api.key_ids["tenant-a:revoked"] = token, key_id


@asynccontextmanager
async def serve(
    engine: Engine, settings: Settings, *, background: bool = False
) -> AsyncIterator[Api]:
    """The app with its lifespan running (and its background worker when asked)."""
    assert isinstance(engine.clock, ManualClock)
    app = create_app(engine, settings, start_background=background)
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://wovyr.test") as client,
    ):
        api = Api(app, app.state.engine, engine.clock, client, app.state.authenticator)
        add_keys(api)
        yield api


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path / "home", dispatch_interval=1.0, lease_seconds=30.0)


@pytest.fixture
async def api(engine: Engine, settings: Settings) -> AsyncIterator[Api]:
    async with serve(engine, settings) as served:
        yield served


@pytest.fixture
def memory_api_factory(
    registry: ActivityRegistry, clock: ManualClock, tmp_path: Path
) -> Callable[..., Any]:
    """For tests that need one store only: serve(...) over a fresh engine on a memory://
    store (closed with the served app)."""
    from wovyr.store.sqlite import SQLiteStore

    @asynccontextmanager
    async def make(**overrides: Any) -> AsyncIterator[Api]:
        settings = Settings(home=tmp_path / "home", **overrides)
        with Engine(SQLiteStore(), clock=clock, activities=registry) as engine:
            async with serve(engine, settings) as api:
                yield api

    return make
