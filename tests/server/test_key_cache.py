"""API keys remembered by the server (`wovyr.platform.auth.PrincipalCache`): a key revoked
through the server is refused on the very next request; one revoked by another process
(the host's CLI, another server) within `CACHE_TTL` on the server's clock; a remembered key
is always its own tenant's and role's."""

from __future__ import annotations

import pytest
from tests.server.conftest import Api

from wovyr.platform.auth import CACHE_TTL, Authenticator

pytestmark = pytest.mark.anyio
BASE = "/api/v1/workflows"


async def test_a_key_revoked_over_the_api_is_refused_on_the_next_request(api: Api) -> None:
    assert (await api.call("GET", BASE, "tenant-a:viewer")).status_code == 200  # remembered
    key_id = api.key_ids["tenant-a:viewer"]
    r = await api.call("DELETE", f"/api/v1/admin/keys/{key_id}", "tenant-a:admin")
    assert r.status_code == 200 and r.json()["revoked_at"] is not None
    refused = await api.call("GET", BASE, "tenant-a:viewer")
    assert refused.status_code == 401
    assert (await api.call("GET", BASE, "tenant-a:operator")).status_code == 200


async def test_a_key_revoked_by_another_process_is_refused_within_the_ttl(api: Api) -> None:
    assert (await api.call("GET", BASE, "tenant-b:operator")).status_code == 200  # remembered
    # as `wovyr admin keys revoke` does on the host: its own authenticator, the same store
    Authenticator(api.engine.store, api.clock).revoke(api.key_ids["tenant-b:operator"])
    # this server has not read the key again (the store already says revoked) ...
    assert (await api.call("GET", BASE, "tenant-b:operator")).status_code == 200
    api.clock.advance(CACHE_TTL.total_seconds())
    # ... and reads it again once its time is up
    assert (await api.call("GET", BASE, "tenant-b:operator")).status_code == 401
    assert (await api.call("GET", BASE, "tenant-b:viewer")).status_code == 200


async def test_remembered_keys_keep_their_tenant_and_role(api: Api) -> None:
    flow = "apiVersion: wovyr/v1\nkind: Workflow\nmetadata: {name: mine}\nactivities:\n"
    flow += "  - id: a\n    wait: {signal: go}\n"
    for _ in range(2):  # the second round is answered from the cache
        for tenant in ("tenant-a", "tenant-b"):
            r = await api.call("POST", BASE, f"{tenant}:operator", json={"definition": flow})
            assert r.status_code == 201
            eid = r.json()["id"]
            other = "tenant-b" if tenant == "tenant-a" else "tenant-a"
            assert (await api.call("GET", f"{BASE}/{eid}", f"{tenant}:viewer")).status_code == 200
            assert (await api.call("GET", f"{BASE}/{eid}", f"{other}:admin")).status_code == 404
            denied = await api.call("POST", BASE, f"{tenant}:viewer", json={"definition": flow})
            assert denied.status_code == 403
    for who, token in api.tokens.items():
        found = api.authenticator.cached(token)
        if found is not None:
            assert f"{found.tenant}:{found.role}" == who
    assert api.authenticator.cached(api.tokens["tenant-a:revoked"]) is None
