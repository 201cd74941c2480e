"""`/api/v1/admin/keys`: an admin manages the API keys of its own tenant.

Keys of other tenants are invisible here (the same 404 as a missing key); creating keys
for any tenant is the operator's job, on the server host: `wovyr admin keys create`.
"""

from __future__ import annotations

from wovyr.server.api.models import KeyCreate, KeyCreated, KeyOut
from wovyr.server.deps import Admin, Ctx
from wovyr.server.guard import api_router
from wovyr.store.platform import ApiKeyRecord

__all__ = ["router"]

router = api_router("/api/v1/admin/keys", "admin", 401, 403, 404, 413, 422)


def key_out(record: ApiKeyRecord) -> KeyOut:
    return KeyOut.model_validate(record, from_attributes=True)


@router.get("", response_model=list[KeyOut], summary="The tenant's API keys")
def list_keys(ctx: Ctx, principal: Admin) -> list[KeyOut]:
    """The tenant's API keys: id, name, role, display prefix, created, revoked and last
    used times (never a token)."""
    return [key_out(k) for k in ctx.authenticator.list_keys(principal.tenant)]


@router.post("", status_code=201, response_model=KeyCreated, summary="Create an API key")
def create_key(body: KeyCreate, ctx: Ctx, principal: Admin) -> KeyCreated:
    """A new key of the tenant with `role` (viewer, operator, admin); its `token` is in this
    answer only."""
    key_id, token = ctx.authenticator.create_key(
        principal.tenant, body.role, body.name, actor=principal.audit_actor
    )
    record = ctx.authenticator.get_key(key_id, principal.tenant)
    return KeyCreated(**key_out(record).model_dump(), token=token)


@router.delete("/{key_id}", response_model=KeyOut, summary="Revoke an API key")
def revoke_key(key_id: str, ctx: Ctx, principal: Admin) -> KeyOut:
    """Revoke a key of the tenant: it is refused from the next request on."""
    return key_out(ctx.authenticator.revoke(key_id, principal.tenant, actor=principal.audit_actor))
