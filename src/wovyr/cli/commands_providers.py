"""`wovyr providers set|list|show|delete`: a tenant's model providers, on the store directly
or through a server (`--server`, an admin key: its tenant's).

A provider's API key is never an argument: `--api-key-secret` names a secret of the tenant
(`wovyr secrets set NAME`), whose value the worker sends at dispatch. Every change is
audited as made by the local user.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from wovyr.cli.backend import with_tenant
from wovyr.cli.common import echo_result, json_option, tenant_options
from wovyr.cli.main import cli
from wovyr.cli.named import listing_command, removal_command, showing_command
from wovyr.platform.providers import (
    PROVIDER_KINDS,
    TOKEN_LIMITS,
    ProviderInfo,
    audit_details,
    check_provider_name,
    delete_provider,
    list_providers,
    parse_provider,
    provider_info,
    set_provider,
)
from wovyr.settings import Settings

if TYPE_CHECKING:
    from wovyr.engine.engine import Engine

__all__: list[str] = []


@cli.group("providers")
def providers_group() -> None:
    """Tenants' model providers for `llm` and `agent` steps: set, list, show, delete."""


def _price(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def _show(info: ProviderInfo, tenant: str) -> None:
    click.echo(f"provider {info.name} of tenant {tenant}")
    click.echo(f"  kind:           {info.kind}")
    click.echo(f"  base URL:       {info.base_url}")
    click.echo(f"  API key secret: {info.api_key_secret or '- (no key sent)'}")
    click.echo(f"  default model:  {info.default_model or '-'}")
    click.echo(
        f"  price per 1M:   in {_price(info.price_in)}, out {_price(info.price_out)}"
        + ("" if info.price_in is not None else " (cost unknown)")
    )
    for model, price in sorted(info.prices.items()):
        click.echo(f"  price of {model}: in {price['input']:g}, out {price['output']:g}")
    if info.options:
        shown = ", ".join(f"{k}={json.dumps(v)}" for k, v in sorted(info.options.items()))
        click.echo(f"  options:        {shown}")
    if info.token_limit:
        click.echo(f"  token limit as: {info.token_limit}")
    click.echo(f"  updated:        {info.updated_at:%Y-%m-%d %H:%M:%S} UTC by {info.updated_by}")


def _options(given: tuple[str, ...]) -> dict[str, Any] | None:
    """`--option KEY=VALUE`s: each value JSON when it parses (7, true, ["x"]), else text."""
    out: dict[str, Any] = {}
    for pair in given:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint="--option")
        try:
            out[key] = json.loads(raw)
        except ValueError:
            out[key] = raw
    return out or None


def _prices(given: tuple[str, ...]) -> dict[str, Any] | None:
    """`--model-price MODEL=IN:OUT`s (per 1M tokens)."""
    out: dict[str, Any] = {}
    for pair in given:
        model, sep, raw = pair.partition("=")
        parts = raw.split(":")
        try:
            if not sep or not model or len(parts) != 2:
                raise ValueError
            out[model] = {"input": float(parts[0]), "output": float(parts[1])}
        except ValueError:
            raise click.BadParameter(
                f"{pair!r} is not MODEL=IN:OUT (prices per 1M tokens)", param_hint="--model-price"
            ) from None
    return out or None


@providers_group.command("set")
@click.argument("name")
@click.option("--base-url", required=True, help="The API's base URL (…/v1).")
@click.option(
    "--kind",
    type=click.Choice(PROVIDER_KINDS),
    default="openai",
    show_default=True,
    help="The protocol: OpenAI-compatible chat completions, the Anthropic Messages API, or "
    "OpenAI's Responses API (openai-responses).",
)
@click.option(
    "--api-key-secret",
    metavar="SECRET",
    help="The NAME of the tenant's secret holding the API key (wovyr secrets set).",
)
@click.option("--default-model", metavar="MODEL", help="The model of steps that name none.")
@click.option("--price-in", type=float, help="Price per 1M input tokens (with --price-out).")
@click.option("--price-out", type=float, help="Price per 1M output tokens (with --price-in).")
@click.option(
    "--model-price",
    "model_prices",
    multiple=True,
    metavar="MODEL=IN:OUT",
    help="A model's own prices per 1M tokens (repeatable; a name prices its dated versions).",
)
@click.option(
    "--option",
    "options",
    multiple=True,
    metavar="KEY=VALUE",
    help="A provider parameter sent with every call (repeatable; VALUE as JSON or text), "
    "checked against the kind's allow-list: seed=7, reasoning_effort=low.",
)
@click.option(
    "--token-limit",
    type=click.Choice(TOKEN_LIMITS),
    help="How an answer's token limit is sent (kind openai): max_completion_tokens for "
    "reasoning models, max_tokens for vLLM, Ollama, ...; default: max_completion_tokens to "
    "api.openai.com, max_tokens elsewhere.",
)
@json_option
@tenant_options
def set_command(
    name: str,
    base_url: str,
    kind: str,
    api_key_secret: str | None,
    default_model: str | None,
    price_in: float | None,
    price_out: float | None,
    model_prices: tuple[str, ...],
    options: tuple[str, ...],
    token_limit: str | None,
    as_json: bool,
    settings: Settings,
) -> None:
    """Set model provider NAME of the tenant (replacing one of that name); `llm` and
    `agent` steps use it as `provider: NAME`."""
    check_provider_name(name, "NAME")
    fields = {
        "base_url": base_url,
        "api_key_secret": api_key_secret,
        "default_model": default_model,
        "price_in": price_in,
        "price_out": price_out,
        "kind": kind,
        "options": _options(options),
        "prices": _prices(model_prices),
        "token_limit": token_limit,
    }

    def local(engine: Engine) -> ProviderInfo:
        record = parse_provider(engine.tenant, name, fields, by="cli", at=engine.clock.now())
        info = ProviderInfo.of(record)
        audit = engine.audit_entry("provider.set", name, audit_details(info))
        set_provider(engine.store, record, audit=audit)
        return info

    info, tenant = with_tenant(settings, local, lambda api: api.set_provider(name, fields))
    echo_result(as_json, info.to_dict(), f"provider {name} of tenant {tenant} set")


def _row(info: ProviderInfo) -> tuple[str, ...]:
    return (
        info.name,
        info.kind,
        info.base_url,
        info.api_key_secret or "-",
        info.default_model or "-",
        _price(info.price_in),
        _price(info.price_out),
    )


_COLUMNS = ("name", "kind", "base URL", "key secret", "default model", "in/1M", "out/1M")


@listing_command(providers_group, _COLUMNS, _row, lambda api: api.list_providers())
def list_command(engine: Engine) -> list[ProviderInfo]:
    """The tenant's model providers (secret names, never values)."""
    return list_providers(engine.store, engine.tenant)


@showing_command(providers_group, check_provider_name, lambda api, name: api.provider(name), _show)
def show_command(engine: Engine, name: str) -> ProviderInfo:
    """Model provider NAME of the tenant (its secret's name, never a value)."""
    return provider_info(engine.store, engine.tenant, name)


@removal_command(
    providers_group,
    "delete",
    "provider",
    check_provider_name,
    lambda api, n: api.delete_provider(n),
)
def delete_command(engine: Engine, name: str) -> None:
    """Delete model provider NAME of the tenant (steps naming it then fail, not retried,
    unless the environment defines one of that name)."""
    delete_provider(
        engine.store, engine.tenant, name, audit=engine.audit_entry("provider.delete", name)
    )
