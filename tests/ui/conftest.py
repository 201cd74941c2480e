"""Fixtures for the web UI: an engine on a ManualClock, a FastAPI app with the UI mounted,
an authenticator with keys for two tenants, and a small synchronous client over
`httpx.ASGITransport` that keeps cookies and reads CSRF tokens from pages."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from wovyr.engine.engine import Engine
from wovyr.platform.auth import Authenticator
from wovyr.settings import Settings
from wovyr.testing import drain, memory_engine

APPROVAL_FLOW = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: purchase, version: "2"}
inputs:
  amount: {type: number, default: 10}
activities:
  - id: prepare
    set: {amount: "${{ inputs.amount }}"}
  - id: approve
    needs: [prepare]
    wait: {approval: {timeout: 2d}}
  - id: ship
    needs: [approve]
    set: {shipped: true, by: "${{ activities.approve.output.by }}"}
output: {shipped: "${{ activities.ship.output.shipped }}"}
"""


@dataclass
class Keys:
    admin_a: str
    operator_a: str
    viewer_a: str
    operator_b: str


@pytest.fixture
def ui_engine() -> Iterator[Engine]:
    with memory_engine() as engine:
        yield engine


@pytest.fixture
def authenticator(ui_engine: Engine) -> Authenticator:
    return Authenticator(ui_engine.store, clock=ui_engine.clock)


@pytest.fixture
def keys(authenticator: Authenticator) -> Keys:
    return Keys(
        admin_a=authenticator.create_key("acme", "admin", "a-admin")[1],
        operator_a=authenticator.create_key("acme", "operator", "a-op")[1],
        viewer_a=authenticator.create_key("acme", "viewer", "a-view")[1],
        operator_b=authenticator.create_key("globex", "operator", "b-op")[1],
    )


@pytest.fixture
def app(ui_engine: Engine, authenticator: Authenticator, tmp_path: Path) -> FastAPI:
    from wovyr.server.ui import mount_ui

    application = FastAPI()
    mount_ui(application, ui_engine, Settings(home=tmp_path / "home"), authenticator)
    return application


_CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


class UiClient:
    """Synchronous calls over ASGITransport on one event loop, with a cookie jar."""

    def __init__(self, app: FastAPI) -> None:
        self._runner = asyncio.Runner()
        self._client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://testserver"
        )

    def request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        return self._runner.run(self._client.request(method, url, **kwargs))

    def get(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("GET", url, **kwargs)

    def post(self, url: str, data: dict[str, str] | None = None, **kw: Any) -> httpx.Response:
        return self.request("POST", url, data=data, **kw)

    def csrf(self, url: str = "/ui") -> str:
        page = self.get(url)
        found = _CSRF.search(page.text)
        assert found, f"no CSRF token on {url}: {page.status_code}"
        return found.group(1)

    def sign_in(self, key: str) -> httpx.Response:
        token = self.csrf("/ui/login")
        return self.post("/ui/login", {"api_key": key, "csrf_token": token, "next": "/ui"})

    @property
    def cookies(self) -> httpx.Cookies:
        return self._client.cookies

    def close(self) -> None:
        self._runner.run(self._client.aclose())
        self._runner.close()


@pytest.fixture
def client(app: FastAPI) -> Iterator[UiClient]:
    c = UiClient(app)
    yield c
    c.close()


@pytest.fixture
def make_client(app: FastAPI) -> Iterator[Any]:
    made: list[UiClient] = []

    def make() -> UiClient:
        made.append(UiClient(app))
        return made[-1]

    yield make
    for c in made:
        c.close()


def start_waiting(engine: Engine, tenant: str = "acme", **inputs: Any) -> str:
    """Start the approval flow for `tenant` and drive it to its approval wait."""
    record = engine.for_tenant(tenant).start(APPROVAL_FLOW, inputs or None)
    drain(engine)
    return record.id
