"""`wovyr workflows bulk cancel|rerun|signal|delete` and `wovyr batches list|show`.

A bulk action is recorded as a batch in the store; a running `wovyr serve` works on it in
the background, or this command does with `--wait` (printing its progress), in pages
either way (see `wovyr.engine.bulk`). Through a server (`--server`) the batch is submitted
over the API (a `delete` needs an admin key) and `--wait` follows the server's work on it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from wovyr.cli.backend import store_or_server
from wovyr.cli.commands_workflows import workflows
from wovyr.cli.common import (
    cli_labels,
    cli_timestamp,
    console,
    echo_json,
    echo_listing,
    echo_table,
    json_option,
    tenant_options,
)
from wovyr.cli.main import cli
from wovyr.settings import Settings
from wovyr.statuses import SHOWN_STATUSES as STATUSES
from wovyr.store.bulk import BatchItem, BatchRecord

if TYPE_CHECKING:
    from wovyr.cli.remote_platform import RemotePlatform
    from wovyr.engine.bulk import BulkFilter
    from wovyr.engine.engine import Engine

__all__: list[str] = []

F = TypeVar("F", bound=Callable[..., Any])
_WAIT_POLL = 0.5  # seconds between looks while another process holds the batch's lease


def _filter_options(fn: F) -> F:
    for option in reversed(
        [
            click.option("--status", type=click.Choice(STATUSES), help="Only this status."),
            click.option("--workflow", help="Only this workflow name."),
            click.option(
                "--label",
                "label_pairs",
                multiple=True,
                metavar="KEY=VALUE",
                help="With this label.",
            ),
            click.option("--id-prefix", "id_prefix", metavar="PREFIX", help="Ids starting so."),
            click.option("--since", metavar="TIME", help="Created at or after (RFC 3339)."),
            click.option("--until", metavar="TIME", help="Created before (RFC 3339; default now)."),
            click.option(
                "--idempotency-key", "key", help="Submitting again with it changes nothing."
            ),
            click.option("--wait", is_flag=True, help="Work on the batch here until it is done."),
            click.option("--json", "as_json", is_flag=True),
            tenant_options,
        ]
    ):
        fn = option(fn)
    return fn


def _filter(options: dict[str, Any]) -> BulkFilter:
    # (the bulk service loads the engine: imported when a bulk command runs, not when
    # another `workflows` command registers this group)
    from wovyr.engine.bulk import BulkFilter

    return BulkFilter(
        status=options["status"],
        workflow=options["workflow"],
        labels=cli_labels(options["label_pairs"]),
        id_prefix=options["id_prefix"],
        since=cli_timestamp(options["since"], "--since"),
        until=cli_timestamp(options["until"], "--until"),
    )


@workflows.group("bulk")
def bulk() -> None:
    """Cancel, rerun, signal or delete every execution a filter selects (in the background,
    in pages; --wait to work on it here)."""


def _submit(action: str, options: dict[str, Any], **extra: Any) -> None:
    settings: Settings = options["settings"]

    def said(created: bool, batch: BatchRecord) -> None:
        if not options["as_json"]:
            said = "submitted" if created else "already submitted"
            console.print(f"batch {batch.id} {said}: {action} {_described(batch)}")

    def local(engine: Engine) -> BatchRecord:
        from wovyr.engine.bulk import Bulk

        created, batch = Bulk(engine).submit(
            action, _filter(options), idempotency_key=options["key"], **extra
        )
        said(created, batch)
        if options["wait"]:
            batch = _wait(engine, batch, quiet=options["as_json"])
        return batch

    def remote(api: RemotePlatform) -> BatchRecord:
        f = _filter(options)
        filters = {
            "status": f.status,
            "workflow": f.workflow,
            "labels": f.labels or None,
            "id_prefix": f.id_prefix,
            "since": f.since,
            "until": f.until,
            "idempotency_key": options["key"],
        }
        created, batch = api.submit_batch(action, filters, **extra)
        said(created, batch)
        if options["wait"]:
            batch = api.wait_batch(batch, shown)
        return batch

    def shown(batch: BatchRecord) -> None:
        if not options["as_json"]:
            console.print(f"  {_progress(batch)}")

    batch = store_or_server(settings, local, remote, load_activities=action == "rerun")
    if options["as_json"]:
        echo_json(_batch_json(batch))
    elif not options["wait"] and not batch.finished:
        console.print("a running `wovyr serve` works on it; follow it with `wovyr batches show`")


def _wait(engine: Engine, batch: BatchRecord, *, quiet: bool) -> BatchRecord:
    """Work on the batches of the store (this one's turn comes) until this one is done."""
    from wovyr.engine.bulk import BatchRunner, Bulk

    runner = BatchRunner(engine)
    bulk_ = Bulk(engine)
    shown = -1
    while not batch.finished:
        if runner.step() is None:
            time.sleep(_WAIT_POLL)  # another process holds it: its progress shows here
        batch = bulk_.get(batch.id)
        done = batch.ok + batch.skipped + batch.errors
        if not quiet and done != shown:
            shown = done
            console.print(f"  {_progress(batch)}")
    return batch


@bulk.command("cancel")
@_filter_options
def bulk_cancel(**options: Any) -> None:
    """Cancel every unfinished execution the filter selects (each cancel's reason names the
    batch)."""
    _submit("cancel", options)


@bulk.command("rerun")
@_filter_options
def bulk_rerun(**options: Any) -> None:
    """Rerun every finished (completed, failed, cancelled) execution the filter selects."""
    _submit("rerun", options)


@bulk.command("signal")
@click.argument("name")
@click.option("--payload", help="The signal's payload, as JSON.")
@_filter_options
def bulk_signal(name: str, payload: str | None, **options: Any) -> None:
    """Send signal NAME to every running execution the filter selects."""
    try:
        value = json.loads(payload) if payload is not None else None
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="--payload") from None
    _submit("signal", options, signal=name, payload=value)


@bulk.command("delete")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@_filter_options
def bulk_delete(yes: bool, **options: Any) -> None:
    """Delete every finished execution the filter selects, with its history (for good)."""
    if not yes:
        click.confirm(
            "Delete every finished execution this filter selects, with its history?",
            abort=True,
        )
    _submit("delete", options)


# --- batches ---------------------------------------------------------------------------------


@cli.group("batches")
def batches() -> None:
    """Bulk-action batches: list, show."""


@batches.command("list")
@click.option("--limit", type=click.IntRange(1, 200), default=20, show_default=True)
@json_option
@tenant_options
def batches_list(limit: int, as_json: bool, settings: Settings) -> None:
    """The tenant's batches, newest first."""
    from wovyr.engine.bulk import Bulk

    found = store_or_server(
        settings, lambda engine: Bulk(engine).batches(limit), lambda api: api.batches(limit)
    )
    rows = (
        (
            b.id,
            b.action,
            b.status,
            _progress(b),
            b.created_at.strftime("%Y-%m-%d %H:%M:%S"),
            _described(b),
        )
        for b in found
    )
    echo_listing(
        as_json,
        {"items": [_batch_json(b) for b in found]},
        ("id", "action", "status", "progress", "created", "filter"),
        rows,
        no_wrap=("id", "created"),
    )


@batches.command("show")
@click.argument("batch_id")
@click.option("--after", type=click.IntRange(0), default=0, help="Items numbered above it.")
@click.option("--limit", type=click.IntRange(0, 1000), default=50, show_default=True)
@click.option(
    "--outcome", type=click.Choice(["pending", "ok", "skipped", "error"]), help="Only these."
)
@json_option
@tenant_options
def batches_show(
    batch_id: str,
    after: int,
    limit: int,
    outcome: str | None,
    as_json: bool,
    settings: Settings,
) -> None:
    """One batch: its progress and its items' outcomes."""

    def local(engine: Engine) -> tuple[BatchRecord, list[BatchItem]]:
        from wovyr.engine.bulk import Bulk

        bulk_ = Bulk(engine)
        batch = bulk_.get(batch_id)
        return batch, bulk_.items(batch_id, after, limit, outcome) if limit else []

    batch, items = store_or_server(
        settings, local, lambda api: api.batch(batch_id, after, limit, outcome)
    )
    if as_json:
        echo_json({**_batch_json(batch), "items": [_item_json(i) for i in items]})
        return
    console.print(f"batch {batch.id}: {batch.action} {_described(batch)}")
    console.print(f"{batch.status}; {_progress(batch)}; by {batch.created_by}")
    rows = ((str(i.n), i.execution_id, i.outcome, i.detail) for i in items)
    columns = ("#", "execution", "outcome", "detail")
    echo_table(columns, rows, no_wrap=("#", "execution", "outcome"))


# --- presenting ------------------------------------------------------------------------------


def _described(b: BatchRecord) -> str:
    f = b.filter
    parts = [f"{k}={f[k]}" for k in ("status", "workflow") if f.get(k)]
    parts += [f"label {k}={v}" for k, v in sorted((f.get("labels") or {}).items())]
    parts += [f"{k}={f[k]}" for k in ("id_prefix", "since", "until") if f.get(k)]
    if b.signal:
        parts.insert(0, f"signal {b.signal}")
    return ", ".join(parts)


def _progress(b: BatchRecord) -> str:
    total = f"{b.listed}" + ("" if b.listed_all else "+")
    return f"{b.ok} ok, {b.skipped} skipped, {b.errors} errors, {b.pending} pending of {total}"


def _batch_json(b: BatchRecord) -> dict[str, Any]:
    return {
        "id": b.id,
        "action": b.action,
        "status": b.status,
        "filter": b.filter,
        "signal": b.signal,
        "created_at": b.created_at.isoformat(),
        "created_by": b.created_by,
        "finished_at": b.finished_at.isoformat() if b.finished_at else None,
        "progress": {
            "listed": b.listed,
            "ok": b.ok,
            "skipped": b.skipped,
            "errors": b.errors,
            "pending": b.pending,
            "pages": b.pages,
            "listed_all": b.listed_all,
        },
    }


def _item_json(i: BatchItem) -> dict[str, Any]:
    return {
        "n": i.n,
        "execution_id": i.execution_id,
        "outcome": i.outcome,
        "detail": i.detail,
        "at": i.at.isoformat() if i.at else None,
    }
