"""`wovyr memory list|get|put|delete|search NAMESPACE`: a tenant's memory namespaces, on the
store directly (`docs/memory.md`). `put --text` and `search` embed their text with the
tenant's provider (`--provider`, `--model`), under the tenant's side-effect policy. Writes
are audited as the local user, in their transaction."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import click

from wovyr.activities.memory import NAMESPACE_RULE, EmbeddingSpec, embed_texts, is_namespace
from wovyr.activities.providers import DEFAULT_EMBEDDING_MODEL, DEFAULT_PROVIDER, ModelAccess
from wovyr.cli.common import (
    echo_listing,
    echo_result,
    json_option,
    open_engine,
    short,
    tenant_options,
)
from wovyr.cli.main import cli
from wovyr.engine.engine import Engine
from wovyr.engine.memory import TenantMemory
from wovyr.errors import NotFound
from wovyr.fields import parse_duration
from wovyr.platform.providers import tenant_providers
from wovyr.settings import Settings

__all__: list[str] = []

_embedding_options = [
    click.option("--provider", default=DEFAULT_PROVIDER, show_default=True, help="Embeds texts."),
    click.option("--model", default=DEFAULT_EMBEDDING_MODEL, show_default=True),
]


def _with_embedding(fn: Any) -> Any:
    for option in reversed(_embedding_options):
        fn = option(fn)
    return fn


@cli.group("memory")
def memory_group() -> None:
    """A tenant's durable memory namespaces: list, get, put, delete, search."""


def _namespace(namespace: str) -> str:
    if not is_namespace(namespace):
        message = f"invalid memory namespace {namespace!r}: {NAMESPACE_RULE}"
        raise click.BadParameter(message, param_hint="NAMESPACE")
    return namespace


def _memory(engine: Engine) -> TenantMemory:
    return TenantMemory(engine.store, engine.tenant, engine.clock)


def _embed(engine: Engine, text: str, spec: EmbeddingSpec) -> list[float]:
    providers = tenant_providers(engine.store, engine.tenant, engine.providers)
    models = ModelAccess(engine.tenant, providers, engine.credentials)
    policy = engine.side_effect_policy()
    [vector] = asyncio.run(embed_texts(models, spec, [text], timeout=60.0, policy=policy))
    return vector


def _echo_items(as_json: bool, data: Any, items: list[dict[str, Any]], score: bool = False) -> None:
    """`data` as JSON under --json, else the table of `items` (search hits: with scores)."""
    columns = ["key", "version", "updated (UTC)", "expires", "text", "value"]
    echo_listing(as_json, data, (["score"] if score else []) + columns, _rows(items, score))


def _rows(items: list[dict[str, Any]], score: bool) -> Iterator[list[str]]:
    for item in items:
        row = [
            item["key"],
            str(item["version"]),
            item["updated_at"][:19].replace("T", " "),
            (item["expires_at"] or "")[:19].replace("T", " "),
            short(item["text"] or "", 40),
            short(item["value"], 40),
        ]
        yield [f"{item['score']:.3f}", *row] if score else row


@memory_group.command("list")
@click.argument("namespace")
@click.option("--prefix", default="", help="Keys starting with it.")
@click.option("--after", default="", help="Keys after it (the next page).")
@click.option("--limit", default=100, show_default=True, type=click.IntRange(1, 1000))
@json_option
@tenant_options
def list_command(
    namespace: str, prefix: str, after: str, limit: int, as_json: bool, settings: Settings
) -> None:
    """The live items of NAMESPACE, by key."""
    with open_engine(settings, load_activities=False) as engine:
        items = _memory(engine).list_items(_namespace(namespace), prefix, after, limit)
    _echo_items(as_json, items, items)


@memory_group.command("get")
@click.argument("namespace")
@click.argument("key")
@json_option
@tenant_options
def get_command(namespace: str, key: str, as_json: bool, settings: Settings) -> None:
    """The item at KEY of NAMESPACE (exit 4 when there is none)."""
    with open_engine(settings, load_activities=False) as engine:
        item = _memory(engine).get(_namespace(namespace), key)
    if item is None:
        raise NotFound(f"no item {key!r} in memory namespace {namespace!r}")
    _echo_items(as_json, item, [item])


@memory_group.command("put")
@click.argument("namespace")
@click.argument("key")
@click.option("--value", "value_json", help="The item's value, as JSON.")
@click.option("--text", help="The item's text (embedded, so search finds it).")
@click.option("--ttl", help="The item expires after it (90s, 10m, 30d).")
@_with_embedding
@json_option
@tenant_options
def put_command(
    namespace: str,
    key: str,
    value_json: str | None,
    text: str | None,
    ttl: str | None,
    provider: str,
    model: str,
    as_json: bool,
    settings: Settings,
) -> None:
    """Write the item at KEY of NAMESPACE (replacing the one there)."""
    if value_json is None and text is None:
        raise click.UsageError("give --value or --text (or both)")
    value: Any = None
    if value_json is not None:
        try:
            value = json.loads(value_json)
        except ValueError as exc:
            raise click.BadParameter(f"not JSON: {exc}", param_hint="--value") from None
    seconds = None
    if ttl is not None:
        try:
            seconds = parse_duration(ttl)
        except (TypeError, ValueError) as exc:
            raise click.BadParameter(str(exc), param_hint="--ttl") from None
    spec = EmbeddingSpec(provider=provider, model=model)
    with open_engine(settings, load_activities=False) as engine:
        vector = _embed(engine, text, spec) if text else None
        audit = engine.audit_entry("memory.put", f"{_namespace(namespace)}/{key}")
        done = _memory(engine).put(
            namespace, key, value, text, vector, model, seconds, None, audit=audit
        )
    echo_result(as_json, done, f"{namespace}/{key}: version {done['version']}")


@memory_group.command("delete")
@click.argument("namespace")
@click.argument("key")
@json_option
@tenant_options
def delete_command(namespace: str, key: str, as_json: bool, settings: Settings) -> None:
    """Delete the item at KEY of NAMESPACE (exit 4 when there is none)."""
    with open_engine(settings, load_activities=False) as engine:
        audit = engine.audit_entry("memory.delete", f"{_namespace(namespace)}/{key}")
        done = _memory(engine).delete(namespace, key, None, audit=audit)
    if not done["deleted"]:
        raise NotFound(f"no item {key!r} in memory namespace {namespace!r}")
    echo_result(as_json, done, f"deleted {namespace}/{key}")


@memory_group.command("search")
@click.argument("namespace")
@click.argument("query")
@click.option("--top-k", default=5, show_default=True, type=click.IntRange(1, 100))
@_with_embedding
@json_option
@tenant_options
def search_command(
    namespace: str,
    query: str,
    top_k: int,
    provider: str,
    model: str,
    as_json: bool,
    settings: Settings,
) -> None:
    """The items of NAMESPACE whose text is nearest in meaning to QUERY, with scores."""
    spec = EmbeddingSpec(provider=provider, model=model)
    with open_engine(settings, load_activities=False) as engine:
        vector = _embed(engine, query, spec)
        hits = _memory(engine).search(_namespace(namespace), vector, model, top_k)
    _echo_items(as_json, hits, hits, score=True)
