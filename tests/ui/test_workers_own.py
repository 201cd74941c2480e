"""The workers page on a store that keeps no worker membership (SQLite): the server shows
the worker it runs itself, embedded in its process or as its worker process (the owner id
its leases name, the process, when it started and was last heard from), to admins; every
other role learns only that it runs one."""

from __future__ import annotations

import os
import re
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.server.conftest import serve
from tests.server.test_schedules_api import eventually

from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.settings import Settings
from wovyr.store.sqlite import SQLiteStore

pytestmark = pytest.mark.anyio
_TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')


async def _signed_in(client: httpx.AsyncClient, key: str) -> None:
    login = await client.get("/ui/login")
    token = _TOKEN.search(login.text)
    assert token, login.text
    done = await client.post(
        "/ui/login", data={"api_key": key, "csrf_token": token.group(1), "next": "/ui"}
    )
    assert done.status_code == 303, done.text


@pytest.mark.parametrize("in_process", [True, False], ids=["embedded", "worker-process"])
async def test_the_workers_page_shows_the_servers_own_worker(
    tmp_path: Path, in_process: bool
) -> None:
    engine = Engine(
        SQLiteStore(tmp_path / "w.db"), clock=ManualClock(datetime(2030, 1, 1, tzinfo=UTC))
    )
    settings = Settings(home=tmp_path / "home", dispatch_interval=0.2)
    settings = replace(settings, worker_process=not in_process)
    async with serve(engine, settings, background=True) as api:
        background = api.app.state.wovyr.background

        async def reported() -> dict[str, Any] | None:
            own = background.own_worker()
            return own if own is not None and own["owner"] else None

        own = await eventually(reported, seconds=30)
        _, admin = api.authenticator.create_key("acme", "admin", "a-admin")
        _, viewer = api.authenticator.create_key("acme", "viewer", "a-view")
        await _signed_in(api.client, admin)
        page = (await api.client.get("/ui/workers")).text
        row = re.search(r"<tr data-worker=\"([^\"]+)\" data-own-worker>(.*?)</tr>", page, re.S)
        assert row is not None, page
        assert row.group(1) == own["owner"]
        assert f'<td class="mono" data-pid>{own["pid"]}</td>' in row.group(2)
        if in_process:
            assert own["pid"] == os.getpid() and "embedded in the server&#39;s process" in page
        else:
            assert own["pid"] == background.process.pid != os.getpid()
            assert "the server&#39;s worker process" in page
        assert 'id="live-workers">1<' in page

        api.client.cookies.clear()
        await _signed_in(api.client, viewer)
        seen = (await api.client.get("/ui/workers")).text
        assert 'This server runs <strong id="live-workers">1</strong> worker' in seen
        assert own["owner"] not in seen and "data-own-worker" not in seen
    engine.close()
