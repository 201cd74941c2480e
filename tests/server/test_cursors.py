"""One paging convention on every list: `cursor` in, `next_cursor` out (None on the last
page), the older parameters (`after_seq`, `start`, `after`) still working beside it, and a
cursor the API did not write answered with a 400."""

from __future__ import annotations

from typing import Any

import pytest
from tests.server.conftest import Api

pytestmark = pytest.mark.anyio
OP, ADMIN = "tenant-a:operator", "tenant-a:admin"
FLOW = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: steps}
activities:
  - {id: a, set: {x: 1}}
  - {id: b, needs: [a], set: {x: 2}}
  - {id: gate, needs: [b], wait: {signal: go}}
"""


async def pages(api: Api, path: str, who: str, **params: Any) -> list[dict[str, Any]]:
    out, cursor = [], None
    while True:
        query = {**params, **({"cursor": cursor} if cursor else {})}
        r = await api.call("GET", path, who, params=query)
        assert r.status_code == 200, r.text
        out.append(r.json())
        cursor = r.json()["next_cursor"]
        if cursor is None:
            return out


async def test_batches_page(api: Api) -> None:
    made = []
    for workflow in ("one", "two", "three"):
        body = {"action": "cancel", "filter": {"workflow": workflow}}
        r = await api.call("POST", "/api/v1/batches", OP, json=body)
        assert r.status_code == 201, r.text
        made.append(r.json()["id"])
    got = await pages(api, "/api/v1/batches", OP, limit=1)
    whole = (await api.call("GET", "/api/v1/batches", OP)).json()  # one page: the order
    assert [i["id"] for p in got for i in p["items"]] == [i["id"] for i in whole["items"]]
    assert sorted(i["id"] for i in whole["items"]) == sorted(made)
    assert [len(p["items"]) for p in got] == [1, 1, 1] and whole["next_cursor"] is None


async def test_history_audit_and_batch_items_follow_cursors(api: Api) -> None:
    r = await api.call("POST", "/api/v1/workflows", OP, json={"definition": FLOW, "id": "h"})
    assert r.status_code == 201, r.text
    await api.drain()
    path = "/api/v1/workflows/h/history"
    by_cursor = await pages(api, path, OP, limit=2, after_seq=0)
    old = (await api.call("GET", path, OP, params={"after_seq": 0, "limit": 100})).json()
    assert [e for p in by_cursor for e in p["items"]] == old["items"]
    assert len(by_cursor) > 2 and all(p["total"] == old["total"] for p in by_cursor)

    audit = await pages(api, "/api/v1/audit", ADMIN, limit=1)
    everything = (await api.call("GET", "/api/v1/audit", ADMIN, params={"limit": 100})).json()
    assert [i["seq"] for p in audit for i in p["items"]] == [i["seq"] for i in everything["items"]]


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/workflows",
        "/api/v1/batches",
        "/api/v1/workflows/h/history",
        "/api/v1/workflows/h/logs",
        "/api/v1/audit",
    ],
)
@pytest.mark.parametrize("cursor", ["%%%", "bm90IGpzb24", "LTE", "WzEsMl0"])
async def test_a_cursor_the_api_did_not_write_is_a_400(api: Api, path: str, cursor: str) -> None:
    await api.call("POST", "/api/v1/workflows", OP, json={"definition": FLOW, "id": "h"})
    r = await api.call("GET", path, ADMIN, params={"cursor": cursor})
    assert r.status_code == 400, (path, cursor, r.text)
    assert r.json()["problems"][0]["path"] == "cursor"
