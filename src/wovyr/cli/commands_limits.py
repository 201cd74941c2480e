"""`wovyr admin limits set|list|delete`: a tenant's rate-limit buckets, shared by every
worker. An activity names a declared bucket by key (`rate_limit: {key: openai}`); the
numbers set here win over an activity's own."""

from __future__ import annotations

from typing import Any

import click
from rich.table import Table

from wovyr.cli.admin import admin
from wovyr.cli.backend import store_or_server
from wovyr.cli.common import echo_json, echo_result, json_option, print_table, tenant_options
from wovyr.fields import parse_duration
from wovyr.settings import Settings
from wovyr.store.flow import RateLimitRecord

__all__: list[str] = []


@admin.group("limits")
def limits() -> None:
    """Declare, list and delete tenants' rate-limit buckets."""


def _row(record: RateLimitRecord) -> dict[str, Any]:
    return {
        "tenant": record.tenant,
        "key": record.key,
        "burst": record.capacity,
        "per_second": record.per_second,
        "tokens": round(record.tokens, 3),
        "declared": record.declared,
        "updated_by": record.updated_by or None,
    }


def _print(records: list[RateLimitRecord], as_json: bool) -> None:
    rows = [_row(r) for r in records]
    if as_json:
        echo_json(rows)
        return
    table = Table("key", "rate", "burst", "units now", "declared by")
    for r in rows:
        declared = (r["updated_by"] or "admin") if r["declared"] else "(an activity)"
        table.add_row(
            r["key"], f"{r['per_second']:g}/s", f"{r['burst']:g}", f"{r['tokens']:g}", declared
        )
    print_table(table)


def _seconds(value: str) -> float:
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--per") from None


@limits.command("set")
@click.argument("key")
@click.option("--limit", type=click.FloatRange(min=0, min_open=True), required=True)
@click.option("--per", default="1s", show_default=True, help="The period of --limit: 1s, 1m.")
@click.option(
    "--burst", type=click.FloatRange(min=0, min_open=True), help="Units at once (default --limit)."
)
@json_option
@tenant_options
def set_command(
    key: str,
    limit: float,
    per: str,
    burst: float | None,
    as_json: bool,
    settings: Settings,
) -> None:
    """Declare the tenant's bucket KEY: --limit units per --per, shared by all its workers."""
    seconds = _seconds(per)
    record = store_or_server(
        settings,
        lambda engine: engine.set_rate_limit(key, limit, seconds, burst, by="cli"),
        lambda api: api.set_limit(key, limit, seconds, burst),
    )
    _print([record], as_json)


@limits.command("list")
@json_option
@tenant_options
def list_command(as_json: bool, settings: Settings) -> None:
    """The tenant's buckets: declared ones and those activities made."""
    records = store_or_server(
        settings, lambda engine: engine.rate_limits(), lambda api: api.limits()
    )
    _print(records, as_json)


@limits.command("delete")
@click.argument("key")
@json_option
@tenant_options
def delete_command(key: str, as_json: bool, settings: Settings) -> None:
    """Delete the tenant's bucket KEY (an activity naming it makes it again with its own
    numbers, or waits if it gives none)."""
    store_or_server(
        settings,
        lambda engine: engine.delete_rate_limit(key),
        lambda api: api.delete_limit(key),
    )
    echo_result(as_json, {"key": key, "deleted": True}, f"rate limit {key} deleted")
