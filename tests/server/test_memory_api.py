"""`/api/v1/memory/{namespace}` on every store: a viewer lists and reads its tenant's items,
an operator deletes one; another tenant's namespace answers exactly like a missing one."""

from __future__ import annotations

import pytest
from tests.server.conftest import Api

from wovyr.engine.memory import TenantMemory

pytestmark = pytest.mark.anyio

BASE = "/api/v1/memory"


def _put(api: Api, tenant: str, key: str, value: object, text: str | None = None) -> None:
    memory = TenantMemory(api.engine.store, tenant, api.engine.clock)
    memory.put("notes", key, value, text, None, None, None, None)


async def test_list_get_and_delete_in_the_callers_tenant(api: Api) -> None:
    for key in ("b", "a", "c"):
        _put(api, "tenant-a", key, {"k": key}, text=f"note {key}")
    listed = await api.call("GET", f"{BASE}/notes?limit=2", "tenant-a:viewer")
    assert listed.status_code == 200, listed.text
    body = listed.json()
    assert [i["key"] for i in body["items"]] == ["a", "b"] and body["next"] == "b"
    rest = await api.call("GET", f"{BASE}/notes?after=b", "tenant-a:viewer")
    assert [i["key"] for i in rest.json()["items"]] == ["c"] and rest.json()["next"] is None
    got = await api.call("GET", f"{BASE}/notes/a", "tenant-a:viewer")
    assert got.status_code == 200
    assert got.json()["value"] == {"k": "a"} and got.json()["text"] == "note a"
    assert got.json()["version"] == 1
    refused = await api.call("DELETE", f"{BASE}/notes/a", "tenant-a:viewer")
    assert refused.status_code == 403
    deleted = await api.call("DELETE", f"{BASE}/notes/a", "tenant-a:operator")
    assert deleted.status_code == 204
    [record] = [r for r in api.engine.store.audit_records() if r.action == "memory.delete"]
    assert (record.tenant, record.target) == ("tenant-a", "notes/a")
    assert record.actor == f"key:{api.key_ids['tenant-a:operator']}/operator"
    assert (await api.call("GET", f"{BASE}/notes/a", "tenant-a:viewer")).status_code == 404
    again = await api.call("DELETE", f"{BASE}/notes/a", "tenant-a:operator")
    assert again.status_code == 404
    bad = await api.call("GET", f"{BASE}/no%20spaces", "tenant-a:viewer")
    assert bad.status_code == 422


async def test_another_tenants_namespace_answers_like_a_missing_one(api: Api) -> None:
    _put(api, "tenant-a", "k", "mine")
    theirs = await api.call("GET", f"{BASE}/notes/k", "tenant-b:viewer")
    gone = await api.call("DELETE", f"{BASE}/notes/k", "tenant-b:operator")
    listed = await api.call("GET", f"{BASE}/notes", "tenant-b:viewer")
    never = await api.call("GET", f"{BASE}/never", "tenant-b:viewer")
    assert listed.status_code == never.status_code == 404
    assert listed.json() == never.json()
    empty = await api.call("GET", f"{BASE}/notes?prefix=k", "tenant-b:viewer")
    assert empty.json() == {"items": [], "next": None, "next_cursor": None}
    assert (await api.call("GET", f"{BASE}/notes/k", "tenant-a:viewer")).status_code == 200
    TenantMemory(api.engine.store, "tenant-a", api.engine.clock).delete("notes", "k", None)
    missing = await api.call("GET", f"{BASE}/notes/k", "tenant-a:viewer")
    assert theirs.status_code == gone.status_code == missing.status_code == 404
    assert theirs.json() == gone.json() == missing.json()
