"""A bulk cancel of 1,000 executions by filter, through a real `wovyr serve` that is SIGKILLed
mid-batch and started again: the batch completes in pages with exactly one outcome per
execution (each `ok`: a cancel made just before the kill is recognised, not counted as
skipped, and none is made twice), executions started after the submit are left alone, and
submitting it again answers the same batch and changes nothing."""

from __future__ import annotations

import signal
from collections.abc import Callable

import httpx
import pytest
from tests.server.test_serve_process import (  # the fixture by name
    Server,
    client,
    make_server,  # noqa: F401
    wait_for,
)

from wovyr.engine.engine import Engine
from wovyr.events import EventType
from wovyr.store.sqlite import SQLiteStore

pytestmark = pytest.mark.slow
COUNT = 1000
FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: orders}
activities:
  - {id: wait, wait: {signal: go}}
"""


def batch(http: httpx.Client, batch_id: str, **params: int) -> dict[str, object]:
    r = http.get(f"/api/v1/batches/{batch_id}", params=params)
    assert r.status_code == 200, r.text
    shown: dict[str, object] = r.json()
    return shown


def progress(http: httpx.Client, batch_id: str) -> dict[str, int]:
    shown = batch(http, batch_id, limit=0)
    values: dict[str, int] = shown["progress"]  # type: ignore[assignment]
    return values


@pytest.mark.timeout(600)
def test_bulk_cancel_of_1000_survives_a_sigkill_mid_batch(
    make_server: Callable[..., Server],  # noqa: F811
) -> None:
    server = make_server()
    store = SQLiteStore(server.home / "wovyr.db")  # before the server: no worker races
    try:
        engine = Engine(store)
        for i in range(COUNT):
            engine.start(FLOW, execution_id=f"order-{i:04d}")
    finally:
        store.close()
    server.start()
    body = {"action": "cancel", "filter": {"workflow": "orders"}, "idempotency_key": "sweep"}
    with client(server) as http:
        r = http.post("/api/v1/batches", json=body)
        assert r.status_code == 201, r.text
        batch_id = r.json()["id"]
        late = http.post("/api/v1/workflows", json={"definition": FLOW, "id": "late-one"})
        assert late.status_code == 201, late.text

        wait_for(lambda: progress(http, batch_id)["ok"] >= 200, 120, "200 cancels")
        assert server.stop(signal.SIGKILL) == -signal.SIGKILL

        store = SQLiteStore(server.home / "wovyr.db")
        killed = store.get_batch("default", batch_id)
        store.close()
        assert killed is not None and killed.status == "running", killed
        assert 200 <= killed.ok < COUNT  # the kill came mid-batch

        server.start()
        wait_for(lambda: batch(http, batch_id, limit=0)["status"] == "completed", 300, "the batch")
        done = progress(http, batch_id)
        assert done == {
            "listed": COUNT,
            "ok": COUNT,
            "skipped": 0,
            "errors": 0,
            "pending": 0,
            "pages": COUNT // 100,
            "listed_all": True,
        }
        items: list[dict[str, object]] = []
        after = 0
        while True:
            shown = batch(http, batch_id, after=after, limit=1000)
            items += shown["items"]  # type: ignore[arg-type]
            if shown["next_after"] is None:
                break
            after = int(shown["next_after"])  # type: ignore[call-overload]
        assert [i["n"] for i in items] == list(range(1, COUNT + 1))
        assert sorted(str(i["execution_id"]) for i in items) == [
            f"order-{i:04d}" for i in range(COUNT)
        ]

        again = http.post("/api/v1/batches", json=body)
        assert again.status_code == 200 and again.json()["id"] == batch_id
        assert again.json()["progress"] == done
        assert http.get("/api/v1/workflows/late-one").json()["status"] != "cancelled"
    assert server.stop() == 0

    store = SQLiteStore(server.home / "wovyr.db")
    try:
        for i in range(COUNT):
            record = store.load(f"order-{i:04d}", "default")
            assert record is not None and record.status == "cancelled"
            cancels = [
                e
                for e in store.history(record.id, max(0, record.seq - 4), tenant="default")
                if e.type == EventType.EXECUTION_CANCELLED
            ]
            assert len(cancels) == 1 and cancels[0].data["reason"] == f"batch {batch_id}"
        submits = [r for r in store.audit_records() if r.action == "batch.submit"]
        assert [r.target for r in submits] == [batch_id]
    finally:
        store.close()
