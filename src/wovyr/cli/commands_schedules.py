"""`wovyr schedules create|list|show|pause|resume|update|delete|trigger|backfill`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from wovyr.cli.backend import open_backend
from wovyr.cli.common import (
    cli_inputs,
    cli_timestamp,
    console,
    echo_json,
    echo_listing,
    echo_result,
    input_option,
    json_option,
    short,
    styled,
    tenant_options,
)
from wovyr.cli.main import cli
from wovyr.fields import format_duration
from wovyr.scheduling.schedules import OVERLAP_POLICIES
from wovyr.settings import Settings

__all__: list[str] = []


@cli.group("schedules")
def schedules() -> None:
    """Run workflows on a cron or interval schedule."""


@schedules.command("create")
@click.argument("schedule_id")
@click.option("--workflow", help="A registered workflow name (the latest version at each fire).")
@click.option(
    "--file",
    "file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="A workflow file (its definition is pinned when the schedule is created).",
)
@click.option("--cron", help="5-field cron or @hourly/@daily/@weekly/@monthly/@yearly.")
@click.option("--tz", "timezone", help="IANA time zone for --cron (default UTC).")
@click.option("--every", help="An interval such as 15m.")
@click.option("--offset", help="Offset of interval ticks, e.g. 5m.")
@click.option("--overlap", type=click.Choice(OVERLAP_POLICIES), default="skip", show_default=True)
@click.option(
    "--catchup-window",
    default="1m",
    show_default=True,
    help="Missed ticks younger than this run after downtime.",
)
@input_option()
@click.option("--start-at", help="RFC 3339 time of the first possible tick.")
@click.option("--end-at", help="RFC 3339 time after which it stops.")
@click.option("--limit", "remaining", type=click.IntRange(0), help="Start at most N executions.")
@click.option("--paused", is_flag=True)
@click.option("--note")
@click.option(
    "--priority", type=click.IntRange(0, 9), help="0-9: the priority of the executions it starts."
)
@json_option
@tenant_options
def create_command(
    schedule_id: str,
    workflow: str | None,
    file: Path | None,
    cron: str | None,
    timezone: str | None,
    every: str | None,
    offset: str | None,
    overlap: str,
    catchup_window: str,
    pairs: tuple[str, ...],
    start_at: str | None,
    end_at: str | None,
    remaining: int | None,
    paused: bool,
    note: str | None,
    priority: int | None,
    as_json: bool,
    settings: Settings,
) -> None:
    """Create schedule SCHEDULE_ID for --workflow NAME or --file FILE."""
    if (workflow is None) == (file is None):
        raise click.UsageError("give exactly one of --workflow NAME or --file FILE")
    if (cron is None) == (every is None):
        raise click.UsageError("give exactly one of --cron EXPR or --every DURATION")
    with open_backend(settings) as backend:
        data = backend.create_schedule(
            schedule_id,
            workflow=workflow,
            file=file,
            cron=cron,
            every=every,
            timezone=timezone,
            offset=offset,
            overlap=overlap,
            catchup_window=catchup_window,
            input=cli_inputs(pairs),
            start_at=cli_timestamp(start_at, "--start-at"),
            end_at=cli_timestamp(end_at, "--end-at"),
            remaining_actions=remaining,
            paused=paused,
            note=note,
            priority=priority,
        )
    _show(data, as_json)


def _show(data: dict[str, Any], as_json: bool) -> None:
    if as_json:
        echo_json(data)
        return
    state = "paused" if data["paused"] else "active"
    console.print(
        styled((data["id"], "bold"), f"  {data['workflow']}  {data['describe']}  ({state})")
    )
    console.print(
        f"overlap {data['overlap']}, catch-up window "
        f"{format_duration(data['catchup_window'])}; fired {data['fired']}, "
        f"skipped {data['skipped']}, missed {data['missed']}"
    )
    if data["note"]:
        console.print(f"note: {data['note']}")
    for tick in data["next_fire_times"]:
        console.print(f"  next: {tick}")
    for fire in data["recent"]:
        if "skipped" in fire:
            console.print(f"  skipped: {fire.get('tick')}: {fire['skipped']}")
        else:
            console.print(f"  fired: {fire.get('tick')} -> {fire.get('execution_id')}")


@schedules.command("list")
@json_option
@tenant_options
def list_command(as_json: bool, settings: Settings) -> None:
    """List schedules."""
    with open_backend(settings) as backend:
        records = backend.schedules()
    rows = (
        (
            r["id"],
            r["workflow"],
            short(r["describe"], 40),
            "paused" if r["paused"] else "active",
            r["next_fire_at"].isoformat() if r["next_fire_at"] else "-",
            str(r["fired"]),
        )
        for r in records
    )
    echo_listing(as_json, records, ("id", "workflow", "spec", "state", "next fire", "fired"), rows)


@schedules.command("show")
@click.argument("schedule_id")
@json_option
@tenant_options
def show_command(schedule_id: str, as_json: bool, settings: Settings) -> None:
    """Show a schedule with its next 5 fire times."""
    with open_backend(settings) as backend:
        data = backend.schedule(schedule_id)
    _show(data, as_json)


_JSON = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")


@schedules.command("pause")
@click.argument("schedule_id")
@click.option("--note")
@_JSON
@tenant_options
def pause_command(schedule_id: str, note: str | None, as_json: bool, settings: Settings) -> None:
    """Stop firing (nothing missed while paused replays on resume)."""
    with open_backend(settings) as backend:
        data = backend.pause_schedule(schedule_id, note)
    echo_result(as_json, data, f"{schedule_id} paused")


@schedules.command("resume")
@click.argument("schedule_id")
@click.option("--note")
@_JSON
@tenant_options
def resume_command(schedule_id: str, note: str | None, as_json: bool, settings: Settings) -> None:
    """Fire again from the next tick after now."""
    with open_backend(settings) as backend:
        data = backend.resume_schedule(schedule_id, note)
    echo_result(as_json, data, f"{schedule_id} resumed; next fire {data['next_fire_at']}")


@schedules.command("update")
@click.argument("schedule_id")
@click.option("--cron")
@click.option("--tz", "timezone")
@click.option("--every")
@click.option("--overlap", type=click.Choice(OVERLAP_POLICIES))
@click.option("--catchup-window")
@click.option("--note")
@_JSON
@tenant_options
def update_command(
    schedule_id: str,
    cron: str | None,
    timezone: str | None,
    every: str | None,
    overlap: str | None,
    catchup_window: str | None,
    note: str | None,
    as_json: bool,
    settings: Settings,
) -> None:
    """Change a schedule's spec or policies."""
    changes = {
        k: v
        for k, v in {
            "cron": cron,
            "timezone": timezone,
            "every": every,
            "overlap": overlap,
            "catchup_window": catchup_window,
            "note": note,
        }.items()
        if v is not None
    }
    if not changes:
        raise click.UsageError("nothing to update")
    with open_backend(settings) as backend:
        data = backend.update_schedule(schedule_id, **changes)
    echo_result(as_json, data, f"{schedule_id} updated; next fire {data['next_fire_at']}")


@schedules.command("delete")
@click.argument("schedule_id")
@_JSON
@tenant_options
def delete_command(schedule_id: str, as_json: bool, settings: Settings) -> None:
    """Delete a schedule (executions it started are kept)."""
    with open_backend(settings) as backend:
        backend.delete_schedule(schedule_id)
    echo_result(as_json, {"id": schedule_id, "deleted": True}, f"{schedule_id} deleted")


@schedules.command("trigger")
@click.argument("schedule_id")
@_JSON
@tenant_options
def trigger_command(schedule_id: str, as_json: bool, settings: Settings) -> None:
    """Start one execution now."""
    with open_backend(settings) as backend:
        execution_id = backend.trigger_schedule(schedule_id)
    echo_result(
        as_json, {"id": schedule_id, "execution_id": execution_id}, f"started {execution_id}"
    )


@schedules.command("backfill")
@click.argument("schedule_id")
@click.option("--start", "start", required=True, help="RFC 3339 (exclusive).")
@click.option("--end", "end", required=True, help="RFC 3339 (inclusive).")
@_JSON
@tenant_options
def backfill_command(
    schedule_id: str, start: str, end: str, as_json: bool, settings: Settings
) -> None:
    """Start every tick in (START, END] now; repeating a backfill starts nothing twice."""
    first, last = cli_timestamp(start, "--start"), cli_timestamp(end, "--end")
    with open_backend(settings) as backend:
        ids = backend.backfill_schedule(schedule_id, first, last)
    echo_result(as_json, {"id": schedule_id, "execution_ids": ids}, f"backfilled {len(ids)} ticks")
