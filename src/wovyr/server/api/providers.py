"""`/api/v1/providers`: an admin sets, lists, shows and deletes its own tenant's model
providers (`llm` and `agent` steps name them as `provider: NAME`).

A provider holds the NAME of a secret of the tenant for its API key (`api_key_secret`),
never a key: what is shown is that name. Another tenant's provider answers exactly like a
missing one (404). Every change is audited as made by the calling key, in the transaction
of the change.
"""

from __future__ import annotations

from typing import Any

from fastapi import Body, Response
from pydantic import BaseModel

from wovyr.errors import NotFound
from wovyr.platform.providers import (
    ProviderInfo,
    audit_details,
    delete_provider,
    list_providers,
    parse_provider,
    provider_info,
    set_provider,
)
from wovyr.server.api.etags import PRECONDITION, TAGGED, IfMatch, check_unchanged, tag
from wovyr.server.deps import Admin, Ctx, tenant_engine
from wovyr.server.guard import api_router

__all__ = ["router"]

router = api_router("/api/v1/providers", "admin", 401, 403, 404, 413, 422)


class ProviderOut(BaseModel):
    name: str
    base_url: str
    api_key_secret: str | None  # the secret's NAME, never its value
    default_model: str | None
    price_in: float | None  # per 1M input tokens
    price_out: float | None  # per 1M output tokens
    updated_at: str
    updated_by: str
    kind: str  # openai (chat completions), anthropic (Messages API) or openai-responses
    options: dict[str, Any] = {}  # provider parameters sent with every call
    prices: dict[str, Any] = {}  # per model: {input, output} per 1M tokens
    token_limit: str | None = None  # max_tokens or max_completion_tokens (kind openai)


def _out(info: ProviderInfo) -> ProviderOut:
    return ProviderOut(**info.to_dict())


@router.get("", response_model=list[ProviderOut], summary="The tenant's model providers")
def get_providers(ctx: Ctx, principal: Admin) -> list[ProviderOut]:
    """The tenant's model providers (OpenAI-compatible, OpenAI Responses or Anthropic
    endpoints; keys by secret name, never a value)."""
    return [_out(i) for i in list_providers(ctx.engine.store, principal.tenant)]


def _current(ctx: Ctx, tenant: str, name: str) -> ProviderOut | None:
    """The provider now (None: the tenant has no such provider)."""
    try:
        return _out(provider_info(ctx.engine.store, tenant, name))
    except NotFound:
        return None


@router.get(
    "/{name}",
    response_model=ProviderOut,
    summary="A model provider",
    description="Its settings (the key's secret by name, never a value) and its `ETag`.",
    responses=TAGGED,
)
def get_provider(name: str, response: Response, ctx: Ctx, principal: Admin) -> ProviderOut:
    return tag(response, _out(provider_info(ctx.engine.store, principal.tenant, name)))


@router.put(
    "/{name}",
    response_model=ProviderOut,
    summary="Set a model provider",
    description="Creates or replaces the tenant's provider `name` (audited). With "
    "`If-Match`, a 412 when it changed since that ETag (or does not exist).",
    responses={**TAGGED, **PRECONDITION},
)
def put_provider(
    name: str,
    response: Response,
    ctx: Ctx,
    principal: Admin,
    if_match: IfMatch = None,
    body: dict[str, Any] = Body(  # noqa: B008 - FastAPI's way to take the whole body
        description="kind (openai, anthropic or openai-responses; default openai), base_url "
        "(http or https), "
        "api_key_secret (the NAME of a secret of the "
        "tenant), default_model, price_in and price_out (per 1M tokens, both or neither), "
        "options (provider parameters sent with every call, checked against the kind's "
        "allow-list as a step's options are) and prices (per model, {input, output} per 1M "
        "tokens, over price_in and price_out) and, for kind openai, token_limit (how an "
        "answer's token limit is sent: max_tokens or max_completion_tokens; default by the "
        "host: max_completion_tokens to api.openai.com, max_tokens elsewhere)",
        examples=[
            {
                "base_url": "https://api.openai.com/v1",
                "api_key_secret": "OPENAI_API_KEY",
                "default_model": "gpt-4o-mini",
                "price_in": 0.15,
                "price_out": 0.6,
                "options": {"seed": 7},
                "prices": {"gpt-4o": {"input": 2.5, "output": 10}},
            }
        ],
    ),
) -> ProviderOut:
    engine = tenant_engine(ctx, principal)
    if if_match is not None:
        check_unchanged(if_match, _current(ctx, principal.tenant, name))
    record = parse_provider(principal.tenant, name, body, by=principal.key_id, at=ctx.clock.now())
    info = ProviderInfo.of(record)
    set_provider(
        engine.store, record, audit=engine.audit_entry("provider.set", name, audit_details(info))
    )
    return tag(response, _out(info))


@router.delete(
    "/{name}",
    status_code=204,
    summary="Delete a model provider",
    description="Steps naming it then fail (`UnknownProvider`). With `If-Match`, a 412 when "
    "it changed since that ETag.",
    responses=PRECONDITION,
)
def remove_provider(name: str, ctx: Ctx, principal: Admin, if_match: IfMatch = None) -> Response:
    engine = tenant_engine(ctx, principal)
    if if_match is not None:
        check_unchanged(if_match, _current(ctx, principal.tenant, name))
    audit = engine.audit_entry("provider.delete", name)
    delete_provider(engine.store, principal.tenant, name, audit=audit)
    return Response(status_code=204)
