"""One paging convention on every list: `cursor` in, `next_cursor` out (None on the last
page), the older parameters (`after_seq`, `start`, `after`) still working beside it, and a
cursor the API did not write answered with a 400."""

from __future__ import annotations

import base64
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


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/api/v1/workflows/h/logs", "after_seq"),
        ("/api/v1/workflows/h/history", "after_seq"),
        ("/api/v1/audit", "after"),
    ],
)
async def test_a_position_past_a_64_bit_integer_is_refused_not_a_500(
    api: Api, path: str, name: str
) -> None:
    """The stores hold sequence numbers as signed 64-bit integers: a larger one, given as
    the parameter or inside a cursor, is the caller's error on every store (PostgreSQL
    answered a 500 when it reached the database)."""
    await api.call("POST", "/api/v1/workflows", OP, json={"definition": FLOW, "id": "h"})
    for value in (2**63, 2**64 + 5):
        r = await api.call("GET", path, ADMIN, params={name: value})
        assert r.status_code == 422, (path, value, r.text)
        cursor = base64.urlsafe_b64encode(str(value).encode()).decode().rstrip("=")
        r = await api.call("GET", path, ADMIN, params={"cursor": cursor})
        assert r.status_code == 400, (path, value, r.text)
    r = await api.call("GET", path, ADMIN, params={name: 2**63 - 1})  # the largest: fine
    assert r.status_code == 200, (path, r.text)
