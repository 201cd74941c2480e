"""`/api/v1/secrets`: an admin sets, lists and deletes its own tenant's secrets.

Values go in (`PUT {"value": "..."}`) and never come out: `GET` returns a secret's name,
version and times. Another tenant's secret answers exactly like a missing one (404). Only
the worker reads values, at dispatch (`wovyr.platform.secrets`).
"""

from __future__ import annotations

from typing import Any

from fastapi import Body, Response
from pydantic import BaseModel

from wovyr.errors import InputError, Problem
from wovyr.platform.secrets import SecretInfo, Secrets
from wovyr.server.deps import Admin, Ctx, ServerContext
from wovyr.server.guard import api_router

__all__ = ["router"]

router = api_router("/api/v1/secrets", "admin", 401, 403, 404, 413, 422)


class SecretOut(BaseModel):
    name: str
    version: int
    created_at: str
    updated_at: str
    updated_by: str


def _out(info: SecretInfo) -> SecretOut:
    return SecretOut(**info.to_dict())


def _secrets(ctx: ServerContext) -> Secrets:
    assert ctx.secrets is not None
    return ctx.secrets


@router.get("", response_model=list[SecretOut], summary="The tenant's secrets (no values)")
def list_secrets(ctx: Ctx, principal: Admin) -> list[SecretOut]:
    """The tenant's secrets: names, versions and times (a value is never read back)."""
    return [_out(i) for i in _secrets(ctx).list_secrets(principal.tenant)]


@router.get("/{name}", response_model=SecretOut, summary="A secret's metadata (no value)")
def get_secret(name: str, ctx: Ctx, principal: Admin) -> SecretOut:
    """A secret's metadata: name, version, times (never its value)."""
    return _out(_secrets(ctx).secret_info(principal.tenant, name))


@router.put("/{name}", response_model=SecretOut, summary="Set a secret (a new version)")
def put_secret(
    name: str,
    ctx: Ctx,
    principal: Admin,
    body: dict[str, Any] = Body(  # noqa: B008 - FastAPI's way to take the whole body
        description='{"value": "..."}: the value, text (never returned)',
        examples=[{"value": "sk-..."}],
    ),
) -> SecretOut:
    """Set a secret's value (a new version): it is never read back. Audited."""
    value = body.get("value")
    unknown = sorted(set(body) - {"value"})
    if not isinstance(value, str) or unknown:
        problems = [Problem(f"unknown field {k!r}", path=k) for k in unknown]
        if not isinstance(value, str):
            problems.append(Problem("'value' must be a string", path="value"))
        raise InputError(problems)  # the body is never echoed: it may hold the value
    info = _secrets(ctx).set_secret(
        principal.tenant,
        name,
        value,
        by=principal.key_id,
        at=ctx.clock.now(),
        actor=principal.audit_actor,
    )
    return _out(info)


@router.delete("/{name}", status_code=204, summary="Delete a secret")
def delete_secret(name: str, ctx: Ctx, principal: Admin) -> Response:
    """Delete a secret (204); steps that reference it then fail (`SecretNotFound`). Audited."""
    _secrets(ctx).delete_secret(
        principal.tenant, name, by=principal.key_id, at=ctx.clock.now(), actor=principal.audit_actor
    )
    return Response(status_code=204)
