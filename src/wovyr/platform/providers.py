"""Tenants' model providers: set, list, show, delete, and their resolution at dispatch.

A provider is an endpoint a tenant's `llm` and `agent` steps name (its `kind`: `openai`, an
OpenAI-compatible chat-completions API, `anthropic`, the Messages API, or
`openai-responses`, OpenAI's Responses API) (`provider: NAME`): its base URL, the NAME of
the tenant's secret that holds its API key (never a value: the key stays sealed in
`wovyr.platform.secrets` until the worker sends it), an optional default model and prices
per 1M tokens (which make a step's `cost` known), and for an `openai` provider how an
answer's token limit is sent (`token_limit`: `max_tokens` or `max_completion_tokens`; none:
by the rule of its host, `ProviderConfig.token_limit_key`).
Another tenant's provider answers exactly like a missing one.

At dispatch a step's provider is the tenant's stored one of that name, else the one the
worker's environment defines (`default`, from `WOVYR_LLM_*`): `tenant_providers` builds that
view for one attempt, and `SecretCredentials` (the `CredentialResolver` the edges give the
engine) resolves a stored provider's key from the tenant's secret its config names, a host
provider's from the key bound to its config; never by reading the provider again, so the
host's key never pairs with a tenant's endpoint (a stored provider named `default`,
deleted or not, never gets it). The base URL is checked
here for its form only (http or https, a host, no credentials in it); the tenant's
side-effect policy still governs every call.

Setting and deleting are audited: the caller passes the audit entry, appended in the
transaction of the change.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol
from urllib.parse import urlsplit

from wovyr.activities.base import NonRetryableError
from wovyr.activities.providers import (
    PROVIDER_KINDS,
    TOKEN_LIMITS,
    ProviderConfig,
    Providers,
    price_problems,
)
from wovyr.errors import InputError, KmsError, NotFound, Problem
from wovyr.kinds.options import option_problems
from wovyr.platform.fields import checked_name, shown_fields
from wovyr.platform.secrets import SECRET_NAME
from wovyr.store.audit import AuditEntry, payload_digest
from wovyr.store.platform import ProviderRecord, ProviderStore

__all__ = [
    "PROVIDER_FIELDS",
    "PROVIDER_KINDS",
    "PROVIDER_NAME",
    "TOKEN_LIMITS",
    "ProviderInfo",
    "ProviderMissing",
    "SecretCredentials",
    "audit_details",
    "check_provider_name",
    "delete_provider",
    "list_providers",
    "parse_provider",
    "provider_info",
    "set_provider",
    "tenant_providers",
]

PROVIDER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
PROVIDER_FIELDS = (
    "base_url",
    "api_key_secret",
    "default_model",
    "price_in",
    "price_out",
    "kind",
    "options",
    "prices",
    "token_limit",
)
_MAX_URL = 2048
_MAX_MODEL = 256


class ProviderMissing(NotFound):
    """No such provider."""


@dataclass(frozen=True)
class ProviderInfo:
    """What is shown of a provider: its secret's name, never a value."""

    name: str
    base_url: str
    api_key_secret: str | None
    default_model: str | None
    price_in: float | None
    price_out: float | None
    updated_at: datetime
    updated_by: str
    kind: str = "openai"
    options: Mapping[str, Any] = field(default_factory=dict)
    prices: Mapping[str, Any] = field(default_factory=dict)
    token_limit: str | None = None

    @classmethod
    def of(cls, record: ProviderRecord) -> ProviderInfo:
        return cls(
            record.name,
            record.base_url,
            record.api_key_secret,
            record.default_model,
            record.price_in,
            record.price_out,
            record.updated_at,
            record.updated_by,
            record.kind,
            dict(record.options or {}),
            dict(record.prices or {}),
            record.token_limit,
        )

    def to_dict(self) -> dict[str, Any]:
        return {**shown_fields(self), "options": dict(self.options), "prices": dict(self.prices)}


def audit_details(info: ProviderInfo) -> dict[str, Any]:
    """What the audit record of setting a provider holds: small facts (its URL, its secret's
    name) and the digest of all its fields."""
    fields = info.to_dict()
    del fields["updated_at"], fields["updated_by"]
    return {
        "base_url": info.base_url,
        "api_key_secret": info.api_key_secret,
        "provider": payload_digest(fields),
    }


def check_provider_name(name: str, path: str = "name") -> str:
    """`name` if it is a provider name (a letter or digit, then letters, digits, `_`, `.`,
    `-`; at most 64), else `InputError`."""
    return checked_name(
        name,
        PROVIDER_NAME,
        path,
        "a provider name is a letter or digit followed by letters, digits, '_', "
        "'.' or '-' (at most 64)",
        "e.g. openai, local-vllm",
    )


def _url(value: Any, problems: list[Problem]) -> str:
    if not isinstance(value, str) or not value:
        problems.append(Problem("the base URL is required, text", path="base_url"))
        return ""
    if len(value) > _MAX_URL:
        problems.append(Problem(f"the base URL is at most {_MAX_URL} characters", "base_url"))
        return ""
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        problems.append(Problem("the base URL is not a URL", path="base_url"))
        return ""
    if parts.scheme not in ("http", "https") or not parts.hostname:
        problems.append(
            Problem(
                "the base URL must be http:// or https:// with a host",
                path="base_url",
                hint="e.g. https://api.openai.com/v1",
            )
        )
    elif parts.username is not None or parts.password is not None:
        problems.append(
            Problem(
                "the base URL must not hold credentials: keep the key in a secret",
                path="base_url",
                hint="--api-key-secret NAME",
            )
        )
    elif parts.query or parts.fragment:
        problems.append(Problem("the base URL takes no query or fragment", path="base_url"))
    return value


def _price(value: Any, path: str, problems: list[Problem]) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        problems.append(Problem("a price is a number (per 1M tokens)", path=path))
        return None
    price = float(value)
    if not math.isfinite(price) or price < 0:
        problems.append(Problem("a price is a finite number, 0 or more", path=path))
        return None
    return price


def parse_provider(
    tenant: str, name: str, fields: Mapping[str, Any], *, by: str, at: datetime
) -> ProviderRecord:
    """The record `fields` (those of `PROVIDER_FIELDS`) describe, or `InputError` naming
    every problem."""
    check_provider_name(name)
    problems = [Problem(f"unknown field {k!r}", path=str(k)) for k in fields]
    problems = [p for p in problems if p.path not in PROVIDER_FIELDS]
    base_url = _url(fields.get("base_url"), problems)
    secret = fields.get("api_key_secret")
    if secret is not None and (not isinstance(secret, str) or not SECRET_NAME.match(secret)):
        problems.append(
            Problem(
                "api_key_secret is the NAME of a secret of the tenant (a letter or '_' "
                "followed by letters, digits or '_'), not a key",
                path="api_key_secret",
                hint="wovyr secrets set NAME, then --api-key-secret NAME",
            )
        )
    model = fields.get("default_model")
    if model is not None and (
        not isinstance(model, str) or not model.strip() or len(model) > _MAX_MODEL
    ):
        problems.append(
            Problem(f"default_model is non-empty text (at most {_MAX_MODEL})", "default_model")
        )
    price_in = _price(fields.get("price_in"), "price_in", problems)
    price_out = _price(fields.get("price_out"), "price_out", problems)
    if (fields.get("price_in") is None) != (fields.get("price_out") is None):
        problems.append(
            Problem("give both prices (price_in and price_out) or neither", path="price_in")
        )
    kind = fields.get("kind") or "openai"
    if kind not in PROVIDER_KINDS:
        problems.append(
            Problem(
                f"kind is one of {', '.join(PROVIDER_KINDS)}",
                path="kind",
                hint="openai: chat completions (OpenAI, vLLM, Ollama, ...); anthropic: "
                "Messages; openai-responses: OpenAI's Responses API",
            )
        )
    options = _json_map(fields.get("options"), "options", problems)
    if options and kind in PROVIDER_KINDS:  # the same allow-list as a step's options
        problems.extend(
            Problem(message, path=f"options.{key}")
            for key, message in zip(options, _option_messages(options, str(kind)), strict=False)
            if message
        )
    prices = _json_map(fields.get("prices"), "prices", problems)
    problems.extend(Problem(p, path="prices") for p in price_problems(prices or {}))
    token_limit = _token_limit(fields.get("token_limit"), str(kind), problems)
    if problems:
        raise InputError(problems)
    return ProviderRecord(
        tenant,
        name,
        base_url,
        secret,
        model,
        price_in,
        price_out,
        at,
        by,
        kind=str(kind),
        options=options or None,
        prices=prices or None,
        token_limit=token_limit,
    )


def _token_limit(value: Any, kind: str, problems: list[Problem]) -> str | None:
    """`value` if it is how an `openai` provider is sent the token limit (None: none given,
    the host's rule)."""
    if value is None:
        return None
    if value not in TOKEN_LIMITS:
        problems.append(
            Problem(
                f"token_limit is one of {', '.join(TOKEN_LIMITS)}",
                path="token_limit",
                hint="max_completion_tokens for OpenAI's reasoning models (and Azure "
                "deployments of them); max_tokens for vLLM, Ollama, llama.cpp, LiteLLM",
            )
        )
        return None
    if kind != "openai":
        problems.append(
            Problem(
                f"token_limit applies to kind openai only (a {kind} provider is sent the "
                "one key its API takes)",
                path="token_limit",
            )
        )
        return None
    return str(value)


def _json_map(value: Any, path: str, problems: list[Problem]) -> dict[str, Any] | None:
    """`value` if it is a JSON object (None: none given)."""
    if value is None:
        return None
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        problems.append(Problem(f"{path} is an object", path=path))
        return None
    return dict(value)


def _option_messages(options: Mapping[str, Any], kind: str) -> list[str]:
    """One message per key of `options` (empty when `kind`'s providers take it)."""
    return [next(iter(option_problems({k: v}, kind)), "") for k, v in options.items()]


def set_provider(
    store: ProviderStore, record: ProviderRecord, *, audit: AuditEntry | None = None
) -> ProviderInfo:
    """Store `record` (replacing the tenant's provider of that name); `audit` is appended in
    the same transaction."""
    store.put_provider(record, audit=audit)
    return ProviderInfo.of(record)


def provider_info(store: ProviderStore, tenant: str, name: str) -> ProviderInfo:
    check_provider_name(name)
    record = store.get_provider(tenant, name)
    if record is None:
        raise ProviderMissing(f"no provider {name!r}")
    return ProviderInfo.of(record)


def list_providers(store: ProviderStore, tenant: str) -> list[ProviderInfo]:
    return [ProviderInfo.of(r) for r in store.list_providers(tenant)]


def delete_provider(
    store: ProviderStore, tenant: str, name: str, *, audit: AuditEntry | None = None
) -> None:
    """Delete `tenant`'s provider `name`; `ProviderMissing` if it has none."""
    check_provider_name(name)
    if not store.delete_provider(tenant, name, audit=audit):
        raise ProviderMissing(f"no provider {name!r}")


def _config(record: ProviderRecord) -> ProviderConfig:
    return ProviderConfig(
        record.name,
        record.base_url,
        record.default_model,
        record.price_in,
        record.price_out,
        kind=next((k for k in PROVIDER_KINDS if k == record.kind), "openai"),
        api_key_secret=record.api_key_secret,
        token_limit=next((t for t in TOKEN_LIMITS if t == record.token_limit), None),
        options=dict(record.options or {}),
        prices=dict(record.prices or {}),
    )


def tenant_providers(store: ProviderStore, tenant: str, base: Providers) -> Providers:
    """The providers `tenant`'s steps may name now: its stored ones, then those of the
    worker's environment (`base`) that it has no stored one of the same name for."""
    merged = {name: base.get(name) for name in base.names()}
    merged.update({r.name: _config(r) for r in store.list_providers(tenant)})
    return Providers(merged)


class _SecretResolver(Protocol):
    def resolve_secret(self, tenant: str, name: str) -> str: ...


class SecretCredentials:
    """The `CredentialResolver` of a worker with a secrets store: a tenant's stored provider
    has the value of the secret its config names (`api_key_secret`); a host provider, the
    key bound to its config."""

    def __init__(self, secrets: _SecretResolver) -> None:
        self._secrets = secrets

    def api_key(self, tenant: str, provider: ProviderConfig) -> str | None:
        secret = provider.api_key_secret
        if secret is None:
            return provider.api_key
        name = provider.name
        try:
            return self._secrets.resolve_secret(tenant, secret)
        except NotFound:
            raise NonRetryableError(
                f"the API key of model provider {name!r} is secret {secret!r}, which "
                f"tenant {tenant!r} does not have (set it: wovyr secrets set {secret} "
                f"--tenant {tenant})",
                type="SecretMissing",
            ) from None
        except KmsError as exc:
            raise NonRetryableError(
                f"secret {secret!r} (the API key of model provider {name!r}) cannot be "
                f"opened: {exc}",
                type="SecretUnreadable",
            ) from None

    def __repr__(self) -> str:
        return "SecretCredentials()"
