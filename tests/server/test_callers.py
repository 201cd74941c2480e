"""What the server remembers of its callers. API keys (`wovyr.platform.auth.PrincipalCache`):
a key revoked through the server is refused on the very next request; one revoked by
another process (the host's CLI, another server) within `CACHE_TTL` on the server's clock;
a remembered key is always its own tenant's and role's. Engines (`tenant_engine`): one per
tenant and key, made again when the server's engine changes."""

from __future__ import annotations

import pytest
from tests.server.conftest import Api

from wovyr.engine.runtime import Limits
from wovyr.platform.auth import CACHE_TTL, Authenticator, Principal
from wovyr.server.deps import tenant_engine

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


async def test_an_engine_per_tenant_and_key_until_the_servers_changes(api: Api) -> None:
    ctx = api.app.state.wovyr
    a_viewer = Principal("tenant-a", "viewer", "key_1")
    a_admin = Principal("tenant-a", "admin", "key_2")
    b_viewer = Principal("tenant-b", "viewer", "key_3")
    engine = tenant_engine(ctx, a_viewer)
    assert (engine.tenant, engine.actor) == ("tenant-a", "key:key_1/viewer")
    assert tenant_engine(ctx, a_viewer) is engine
    assert (tenant_engine(ctx, a_admin).tenant, tenant_engine(ctx, a_admin).actor) == (
        "tenant-a",
        "key:key_2/admin",
    )
    assert tenant_engine(ctx, b_viewer).tenant == "tenant-b"
    api.configure(limits=Limits(max_child_depth=3))  # the server's engine is another one
    again = tenant_engine(ctx, a_viewer)
    assert again is not engine and again.max_child_depth == 3
    assert (again.tenant, again.actor) == ("tenant-a", "key:key_1/viewer")
