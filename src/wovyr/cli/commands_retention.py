"""`wovyr admin retention show|set|run`: how long tenants' finished executions are kept,
and a purge pass run here (the server runs one every housekeeping round).

Whoever runs these commands holds the store, so they may set any tenant's retention,
including `--export-to`, a folder on this host (over the API a tenant's admin sets days
only). `run` purges in bounded batches; run it again (or from cron) while it says more is
left. Through a server (`--server`), an admin key shows and sets its own tenant's days;
the export folder and `run` are the host's.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from wovyr.cli.admin import admin
from wovyr.cli.backend import (
    refuse_remote,
    remote_of,
    server_for,
    store_or_server_for,
)
from wovyr.cli.common import echo_json, engine_options, json_option, open_engine
from wovyr.engine.retention import MAX_DAYS, Retention, purge_all, purge_expired
from wovyr.errors import InputError, Problem
from wovyr.platform.auth import validate_tenant
from wovyr.settings import Settings

if TYPE_CHECKING:
    from wovyr.cli.remote_platform import RemotePlatform

__all__: list[str] = []

_DAYS = click.IntRange(1, MAX_DAYS)


@admin.group("retention")
def retention() -> None:
    """Show and set how many days tenants' finished executions are kept (per tenant and per
    workflow), and purge the older ones."""


def _print(tenant: str, settings: Retention, as_json: bool) -> None:
    if as_json:
        echo_json({"tenant": tenant, **settings.to_dict()})
        return
    click.echo(f"tenant {tenant}")
    click.echo(f"  days: {'keep everything' if settings.days is None else settings.days}")
    for name, days in sorted(settings.workflows.items()):
        click.echo(f"  workflow {name}: {days} days")
    if settings.export_to is not None:
        click.echo(f"  export to: {settings.export_to}")


@retention.command("show")
@click.argument("tenant")
@json_option
@engine_options
def show_command(tenant: str, as_json: bool, settings: Settings) -> None:
    """TENANT's retention settings."""
    validate_tenant(tenant)
    found = store_or_server_for(
        settings,
        tenant,
        lambda engine: engine.for_tenant(tenant).retention(),
        lambda api: api.retention(),
    )
    _print(tenant, found, as_json)


@retention.command("set")
@click.argument("tenant")
@click.option("--days", type=_DAYS, help="Days finished executions are kept.")
@click.option("--workflow", metavar="NAME", help="Set (or --clear) this workflow's own days.")
@click.option(
    "--export-to", "export_to", metavar="FOLDER", help="Write each purged batch here first."
)
@click.option("--no-export", is_flag=True, help="Stop exporting before purging.")
@click.option(
    "--clear", is_flag=True, help="Keep everything (with --workflow: drop its own setting)."
)
@json_option
@engine_options
def set_command(
    tenant: str,
    days: int | None,
    workflow: str | None,
    export_to: str | None,
    no_export: bool,
    clear: bool,
    as_json: bool,
    settings: Settings,
) -> None:
    """Set TENANT's retention: `--days N` for the tenant, `--workflow NAME --days M` for one
    workflow (it wins over the tenant's); what is not given keeps its value."""
    validate_tenant(tenant)
    if clear and days is not None:
        raise InputError([Problem("give --days or --clear, not both", path="--clear")])
    if workflow is not None and days is None and not clear:
        raise InputError([Problem("--workflow needs --days or --clear", path="--workflow")])
    if remote_of() is not None:
        if export_to is not None or no_export:
            refuse_remote("admin retention set --export-to/--no-export", "the folder is the host's")

        def remote(api: RemotePlatform) -> Retention:
            current = api.retention()
            changed = _changes(current, days, workflow, clear)
            if not changed:
                return current
            return api.retention(changed.get("days", current.days), changed.get("workflows"))

        _print(tenant, server_for(settings, tenant, remote), as_json)
        return
    with open_engine(settings, load_activities=False) as opened:
        engine = opened.for_tenant(tenant)
        current = engine.retention()
        changed = _changes(current, days, workflow, clear)
        if export_to is not None:  # the server resolves nothing: store where it points now
            changed["export_to"] = str(Path(export_to).expanduser().resolve())
        if no_export:
            changed["export_to"] = None
        stored = engine.set_retention(replace(current, **changed), by="cli")
    _print(tenant, stored, as_json)


def _changes(
    current: Retention, days: int | None, workflow: str | None, clear: bool
) -> dict[str, Any]:
    """The fields of `current` that `set`'s options change (the export folder aside)."""
    changed: dict[str, Any] = {}
    if workflow is not None:
        workflows = dict(current.workflows)
        if clear:
            workflows.pop(workflow, None)
        else:
            assert days is not None
            workflows[workflow] = days
        changed["workflows"] = workflows
    elif clear:
        changed.update(days=None, workflows={})
    elif days is not None:
        changed["days"] = days
    return changed


@retention.command("run")
@click.option("--tenant", "only", metavar="TENANT", help="Only this tenant (default: every one).")
@click.option("--batch", type=click.IntRange(1, 10_000), default=500, show_default=True)
@click.option("--max-batches", type=click.IntRange(1), default=20, show_default=True)
@json_option
@engine_options
def run_command(
    only: str | None, batch: int, max_batches: int, as_json: bool, settings: Settings
) -> None:
    """Purge the finished executions older than their tenant's retention, now."""
    refuse_remote("admin retention run", "it purges the host's store")
    with open_engine(settings, load_activities=False) as engine:
        if only is not None:
            validate_tenant(only)
            reports = [purge_expired(engine.for_tenant(only), batch=batch, max_batches=max_batches)]
        else:
            reports = purge_all(engine, batch=batch, max_batches=max_batches)
    if as_json:
        echo_json([r.to_dict() for r in reports])
        return
    for r in reports:
        more = " (more left: run again)" if r.more else ""
        click.echo(f"tenant {r.tenant}: {r.purged} purged{more}")
        for path in r.files:
            click.echo(f"  exported to {path}")
