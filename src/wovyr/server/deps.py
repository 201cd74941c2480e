"""Request dependencies: the server context, the caller (`Principal`) and its tenant's engine.

Authentication answers 401 (no key; an unknown, malformed or revoked key: one message for
all, so a probe learns nothing about which keys exist); authorization answers 403 when the
key's role is below what the route needs. Every engine a handler gets is scoped to the
caller's tenant, so another tenant's objects are simply not found.

The dependencies are coroutines: FastAPI runs a plain function in the thread pool, and a
hop there and back for each of them cost more than the request's own work. A key the
authenticator verified lately is known without a store read (`Authenticator.cached`); any
other is verified in the thread pool (it reads the store).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Annotated

from fastapi import Depends, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from wovyr.clock import Clock
from wovyr.engine.engine import Engine
from wovyr.platform.auth import Authenticator, Principal
from wovyr.platform.metrics import Metrics
from wovyr.platform.secrets import Secrets
from wovyr.scheduling.schedules import Schedules
from wovyr.server.guard import CALLER_TENANT
from wovyr.server.problems import ApiProblem
from wovyr.server.streams import StreamHub
from wovyr.settings import Settings

if TYPE_CHECKING:
    from wovyr.server.background import Background

__all__ = [
    "Admin",
    "Caller",
    "Ctx",
    "Operator",
    "ServerContext",
    "Viewer",
    "require",
    "schedules_for",
    "tenant_engine",
]

_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="wovyr"'}
bearer = HTTPBearer(
    auto_error=False,
    scheme_name="ApiKey",
    description="An API key: `Authorization: Bearer wvr_...` (`wovyr admin keys create`).",
)


@dataclass
class ServerContext:
    """What the app's handlers share; kept on `app.state.wovyr`."""

    engine: Engine
    settings: Settings
    authenticator: Authenticator
    metrics: Metrics
    clock: Clock
    started_at: datetime
    background: Background | None = None
    secrets: Secrets | None = None  # the tenants' secrets (the engine's resolver too)
    checks: dict[str, str] = field(default_factory=dict)
    streams: StreamHub = field(default_factory=StreamHub)  # the followers of live streams
    # `tenant_engine`'s engines by (tenant, actor), each with the engine it was made from
    engines: dict[tuple[str, str], tuple[Engine, Engine]] = field(default_factory=dict)


async def context(request: Request) -> ServerContext:
    ctx: ServerContext = request.app.state.wovyr
    return ctx


Ctx = Annotated[ServerContext, Depends(context)]


Credentials = Annotated[HTTPAuthorizationCredentials | None, Security(bearer)]


async def authenticate(request: Request, credentials: Credentials) -> Principal:
    ctx = await context(request)
    if credentials is None:
        raise ApiProblem(401, "An API key is required.", headers=_CHALLENGE)
    token = credentials.credentials
    principal = ctx.authenticator.cached(token)
    if principal is None:
        principal = await run_in_threadpool(ctx.authenticator.verify, token)
    if principal is None:
        raise ApiProblem(401, "The API key is invalid or revoked.", headers=_CHALLENGE)
    setattr(request.state, CALLER_TENANT, principal.tenant)  # the request counts for it
    return principal


Caller = Annotated[Principal, Depends(authenticate)]  # any valid key, whatever its role


def require(role: str) -> object:
    """A dependency: the caller, who must hold at least `role` (one dependency, not one
    on `authenticate`: each level costs FastAPI a resolution per request)."""

    async def check(request: Request, credentials: Credentials) -> Principal:
        principal = await authenticate(request, credentials)
        if not principal.can(role):
            raise ApiProblem(
                403, f"This needs the {role} role; the key's role is {principal.role}."
            )
        return principal

    return Depends(check)


Viewer = Annotated[Principal, require("viewer")]
Operator = Annotated[Principal, require("operator")]
Admin = Annotated[Principal, require("admin")]


_ENGINES = 256  # callers' engines kept (a view of the server's engine each: a few objects)


def tenant_engine(ctx: ServerContext, principal: Principal) -> Engine:
    """The engine of the caller's tenant, acting as the caller: every change a handler
    makes through it is appended to the audit chain as made by the caller's key. Made
    once per tenant and key while the server's engine stays the same (a view is cheap,
    but not free: it asks the store what it can do)."""
    key = (principal.tenant, principal.audit_actor)
    found = ctx.engines.get(key)
    if found is not None and found[0] is ctx.engine:
        return found[1]
    engine = ctx.engine.for_tenant(principal.tenant).acting(principal.audit_actor)
    if len(ctx.engines) >= _ENGINES:
        ctx.engines.clear()
    ctx.engines[key] = (ctx.engine, engine)
    return engine


def schedules_for(ctx: ServerContext, principal: Principal) -> Schedules:
    return Schedules(tenant_engine(ctx, principal))
