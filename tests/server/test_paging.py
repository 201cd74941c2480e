"""Responses paged by bytes (`WOVYR_MAX_PAGE_BYTES`): an execution's detail holds its `for_each`
items as far as the page does, the rest are read page by page from the items route, and
history pages stop at the budget; following the cursors gives everything exactly once, over
HTTP and through the client and the CLI (`--server`), which put the pages together again.

Before, one execution of a ~1 MB start answered a GET of 205 MB."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.server.conftest import Api, serve

from wovyr.activities.base import ActivityRegistry
from wovyr.cli.main import main
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.settings import Settings
from wovyr.store.sqlite import SQLiteStore
from wovyr.testing import drain

PAGE = 32_768  # bytes of a page in these tests
OP = "tenant-a:operator"
W = "/api/v1/workflows"
ITEMS = 1000
FAN = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: fan}
inputs:
  xs: {type: array}
activities:
  - id: fan
    for_each: "${{ inputs.xs }}"
    set: {i: "${{ index }}"}
  - id: after
    needs: [fan]
    set: {done: true}
"""


@pytest.fixture
async def paged(tmp_path: Path, clock: ManualClock) -> AsyncIterator[Api]:
    engine = Engine(SQLiteStore(), clock=clock, activities=ActivityRegistry())
    with engine:
        async with serve(engine, Settings(home=tmp_path / "home", max_page_bytes=PAGE)) as api:
            yield api


async def started(api: Api) -> str:
    r = await api.call("POST", W, OP, json={"definition": FAN, "input": {"xs": [0] * ITEMS}})
    assert r.status_code == 201, r.text
    await api.drain()
    return str(r.json()["id"])


@pytest.mark.anyio
async def test_a_detail_holds_the_items_its_page_does_and_the_items_route_the_rest(
    paged: Api,
) -> None:
    execution_id = await started(paged)
    r = await paged.call("GET", f"{W}/{execution_id}", OP)
    assert r.status_code == 200 and len(r.content) <= PAGE + 2_000
    fan = r.json()["activities"]["fan"]
    assert fan["items_total"] == ITEMS and 0 < fan["items_next"] < ITEMS
    assert len(fan["items"]) == fan["items_next"]
    assert r.json()["activities"]["after"]["status"] == "completed"  # the rest is whole

    items, start, pages = list(fan["items"]), fan["items_next"], 0
    while start is not None:
        page = await paged.call(
            "GET", f"{W}/{execution_id}/activities/fan/items", OP, params={"start": start}
        )
        assert page.status_code == 200 and len(page.content) <= PAGE + 500
        body = page.json()
        assert body["start"] == start and body["total"] == ITEMS
        items.extend(body["items"])
        start, pages = body["next_start"], pages + 1
    assert pages >= 2
    assert [i["output"]["i"] for i in items] == list(range(ITEMS))

    missing = await paged.call("GET", f"{W}/{execution_id}/activities/after/items", OP)
    assert missing.status_code == 404


@pytest.mark.anyio
async def test_history_pages_stop_at_the_budget_and_follow_on_exactly(paged: Api) -> None:
    execution_id = await started(paged)
    total = (await paged.call("GET", f"{W}/{execution_id}", OP)).json()["event_count"]

    seen: list[int] = []
    after: int | None = 0
    while after is not None:
        r = await paged.call(
            "GET", f"{W}/{execution_id}/history", OP, params={"after_seq": after, "limit": 1000}
        )
        assert r.status_code == 200 and len(r.content) <= PAGE + 1_000
        body = r.json()
        seen.extend(e["seq"] for e in body["items"])
        after = body["next_after_seq"]
    assert seen == list(range(1, total + 1))
    assert len(seen) > 100  # (so that pages were many)

    newest = await paged.call("GET", f"{W}/{execution_id}/history", OP, params={"limit": 1000})
    body = newest.json()
    assert body["items"][-1]["seq"] == total and len(newest.content) <= PAGE + 1_000
    assert body["next_after_seq"] is None and len(body["items"]) < total


# --- the client and the CLI over a real server ------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def live(tmp_path: Path) -> Iterator[tuple[str, str, Engine]]:
    import uvicorn

    from wovyr.server.app import create_app

    engine = Engine(SQLiteStore(tmp_path / "wovyr.db"), activities=ActivityRegistry())
    settings = Settings(home=tmp_path / "home", max_page_bytes=PAGE)
    app = create_app(engine, settings, start_background=False)
    _, token = app.state.authenticator.create_key("tenant-a", "operator", "cli")
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, name="wovyr-paging-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}", token, engine
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        engine.close()


def test_the_cli_puts_the_pages_together(
    live: tuple[str, str, Engine], monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    url, token, engine = live
    tenant = engine.for_tenant("tenant-a")
    record = tenant.start(FAN, {"xs": [0] * ITEMS}, execution_id="fan-1")
    drain(engine)
    detail = httpx.get(f"{url}{W}/fan-1", headers={"Authorization": f"Bearer {token}"}).json()
    assert detail["activities"]["fan"]["items_next"] is not None  # (paged, as above)

    monkeypatch.setenv("WOVYR_API_KEY", token)
    monkeypatch.setenv("WOVYR_SERVER", url)
    assert main(["workflows", "show", record.id, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [i["output"]["i"] for i in shown["activities"]["fan"]["items"]] == list(range(ITEMS))
    assert "items_next" not in shown["activities"]["fan"]  # as the local store shows it
    assert main(["workflows", "history", record.id, "--json"]) == 0
    events = json.loads(capsys.readouterr().out)
    assert [e["seq"] for e in events] == list(range(1, tenant.get("fan-1").seq + 1))
