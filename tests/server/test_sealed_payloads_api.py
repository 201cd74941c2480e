"""The API and the UI over a store that seals tenant-a's payloads (SQLite): a canary in the
start's input, a signal's payload and an approval's comment reads back right in show,
history and list and on the execution's page, while the database file and WAL hold none of
it; after a shred, the same reads answer 200 with the marker (no error, no traceback) and
tenant-b's executions are untouched."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from tests.server.conftest import APPROVAL_FLOW, Api, serve

from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.engine.tenants import set_sealing
from wovyr.platform.kms import Kms, RootKey
from wovyr.platform.payloads import sealed_store, shred_tenant_payloads
from wovyr.platform.secrets import Secrets
from wovyr.settings import Settings
from wovyr.store.sealing import SHREDDED_MARKER
from wovyr.store.sqlite import SQLiteStore

pytestmark = pytest.mark.anyio

BASE = "/api/v1/workflows"
CANARY = "cnry-api-7c1e/x"


@pytest.fixture
async def sealed_api(tmp_path: Path) -> AsyncIterator[Api]:
    inner = SQLiteStore(tmp_path / "db" / "wovyr.db")
    secrets = Secrets(inner, Kms(RootKey(b"\x42" * 32), "production"))
    store = sealed_store(inner, secrets)
    clock = ManualClock(datetime(2030, 1, 1, 9, 0, tzinfo=UTC))
    set_sealing(store, "tenant-a", True, by="test", at=clock.now())
    engine = Engine(store, clock=clock, secrets=secrets)
    async with serve(engine, Settings(home=tmp_path / "home")) as api:
        yield api
    inner.close()


async def run(api: Api, tenant: str, note: str) -> str:
    op = f"{tenant}:operator"
    body = {"definition": APPROVAL_FLOW, "input": {"note": note}}
    eid = str((await api.call("POST", BASE, op, json=body)).json()["id"])
    await api.drain()
    r = await api.call(
        "POST", f"{BASE}/{eid}/approve", op, json={"activity": "gate", "comment": note}
    )
    assert r.status_code == 200, r.text
    r = await api.call("POST", f"{BASE}/{eid}/signal", op, json={"name": "go", "payload": [note]})
    assert r.status_code == 200, r.text
    await api.drain()
    return eid


async def ui_page(api: Api, tenant: str, eid: str) -> httpx.Response:
    """The execution's page, signed in (a fresh session) with the tenant's viewer key."""
    transport = httpx.ASGITransport(app=api.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://wovyr.test") as ui:
        login = await ui.get("/ui/login")
        token = login.text.split('name="csrf_token" value="', 1)[1].split('"', 1)[0]
        key = api.tokens[f"{tenant}:viewer"]
        await ui.post("/ui/login", data={"api_key": key, "csrf_token": token, "next": "/ui"})
        return await ui.get(f"/ui/executions/{eid}")


async def test_sealed_payloads_over_the_api_and_ui_then_the_shred_marker(
    sealed_api: Api, tmp_path: Path
) -> None:
    api = sealed_api
    sealed = await run(api, "tenant-a", CANARY)
    plain = await run(api, "tenant-b", "plain-note")

    view = (await api.call("GET", f"{BASE}/{sealed}", "tenant-a:viewer")).json()
    assert view["status"] == "completed" and view["input"] == {"note": CANARY}
    assert view["activities"]["prepare"]["output"] == {"note": CANARY}
    data = [e["data"] for e in view["timeline"]]
    assert {"payload": [CANARY]} in [{"payload": d.get("payload")} for d in data]
    history = (await api.call("GET", f"{BASE}/{sealed}/history", "tenant-a:viewer")).json()
    decided = [e for e in history["items"] if e["type"] == "ApprovalDecided"]
    assert decided[0]["data"]["comment"] == CANARY
    listed = (await api.call("GET", BASE, "tenant-a:viewer")).json()["items"]
    assert [i["status"] for i in listed] == ["completed"]
    page = await ui_page(api, "tenant-a", sealed)
    assert page.status_code == 200 and CANARY in page.text
    stored = b"".join(p.read_bytes() for p in (tmp_path / "db").iterdir())
    assert CANARY.encode() not in stored and b"plain-note" in stored

    waiting = str(
        (
            await api.call("POST", BASE, "tenant-a:operator", json={"definition": APPROVAL_FLOW})
        ).json()["id"]
    )
    await api.drain()
    store = api.engine.store
    shredded = shred_tenant_payloads(store, "tenant-a", by="test", at=api.clock.now())
    assert (shredded.destroyed, shredded.executions_failed) == (1, 1)

    r = await api.call("GET", f"{BASE}/{sealed}", "tenant-a:viewer")
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "completed" and r.json()["input"] == {"sealed": SHREDDED_MARKER}
    assert CANARY not in r.text
    r = await api.call("GET", f"{BASE}/{sealed}/history", "tenant-a:viewer")
    assert r.status_code == 200 and r.json()["items"]
    assert all(e["data"] == {"sealed": SHREDDED_MARKER} for e in r.json()["items"])
    r = await api.call("GET", BASE, "tenant-a:viewer")
    assert r.status_code == 200 and {i["id"] for i in r.json()["items"]} == {sealed, waiting}
    failed = (await api.call("GET", f"{BASE}/{waiting}", "tenant-a:viewer")).json()
    assert failed["status"] == "failed" and failed["error"]["message"] == SHREDDED_MARKER
    refused = await api.call(
        "POST", f"{BASE}/{waiting}/signal", "tenant-a:operator", json={"name": "go"}
    )
    assert refused.status_code == 409, refused.text
    page = await ui_page(api, "tenant-a", sealed)
    assert page.status_code == 200 and "the tenant&#39;s key was shredded" in page.text
    assert "Traceback" not in page.text

    other = (await api.call("GET", f"{BASE}/{plain}", "tenant-b:viewer")).json()
    assert other["status"] == "completed" and other["input"] == {"note": "plain-note"}
