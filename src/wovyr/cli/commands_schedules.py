"""`wovyr schedules create|list|show|pause|resume|update|delete|trigger|backfill`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.table import Table

from wovyr.cli.common import (
    cli_inputs,
    console,
    echo_json,
    open_engine,
    print_table,
    short,
    tenant_options,
)
from wovyr.cli.main import cli
from wovyr.fields import format_duration, parse_timestamp
from wovyr.scheduling.schedules import OVERLAP_POLICIES, Schedules, spec_of
from wovyr.settings import Settings
from wovyr.store.schedules import ScheduleRecord

__all__: list[str] = []


def _time(value: str | None, name: str) -> Any:
    if value is None:
        return None
    try:
        return parse_timestamp(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint=name) from None


def _as_dict(record: ScheduleRecord, service: Schedules) -> dict[str, Any]:
    return {
        "id": record.id,
        "workflow": record.workflow,
        "definition_hash": record.definition_hash,
        "spec": record.spec,
        "describe": spec_of(record).describe(),
        "overlap": record.overlap,
        "catchup_window": record.catchup_window,
        "paused": record.paused,
        "note": record.note,
        "input": record.input,
        "start_at": record.start_at,
        "end_at": record.end_at,
        "remaining_actions": record.remaining_actions,
        "next_fire_at": record.next_fire_at,
        "next_fire_times": [t.isoformat() for t in service.next_fire_times(record)],
        "last_fire_at": record.last_fire_at,
        "buffered": list(record.buffered),
        "recent": list(record.recent),
        "fired": record.fired_count,
        "skipped": record.skipped_count,
        "missed": record.missed_count,
    }


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
@click.option("-i", "--input", "pairs", multiple=True, metavar="KEY=VALUE")
@click.option("--start-at", help="RFC 3339 time of the first possible tick.")
@click.option("--end-at", help="RFC 3339 time after which it stops.")
@click.option("--limit", "remaining", type=click.IntRange(0), help="Start at most N executions.")
@click.option("--paused", is_flag=True)
@click.option("--note")
@click.option(
    "--priority", type=click.IntRange(0, 9), help="0-9: the priority of the executions it starts."
)
@click.option("--json", "as_json", is_flag=True)
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
    with open_engine(settings, load_activities=False) as engine:
        service = Schedules(engine)
        record = service.create(
            schedule_id,
            workflow=Path(file) if file is not None else workflow,
            cron=cron,
            every=every,
            timezone=timezone,
            offset=offset,
            overlap=overlap,
            catchup_window=catchup_window,
            input=cli_inputs(pairs),
            start_at=_time(start_at, "--start-at"),
            end_at=_time(end_at, "--end-at"),
            remaining_actions=remaining,
            paused=paused,
            note=note,
            priority=priority,
        )
        _show(record, service, as_json)


def _show(record: ScheduleRecord, service: Schedules, as_json: bool) -> None:
    data = _as_dict(record, service)
    if as_json:
        echo_json(data)
        return
    state = "paused" if record.paused else "active"
    console.print(f"[bold]{record.id}[/]  {record.workflow}  {data['describe']}  ({state})")
    console.print(
        f"overlap {record.overlap}, catch-up window "
        f"{format_duration(record.catchup_window)}; fired {record.fired_count}, "
        f"skipped {record.skipped_count}, missed {record.missed_count}"
    )
    if record.note:
        console.print(f"note: {record.note}")
    for tick in data["next_fire_times"]:
        console.print(f"  next: {tick}")
    for fire in record.recent:
        if "skipped" in fire:
            console.print(f"  skipped: {fire.get('tick')}: {fire['skipped']}")
        else:
            console.print(f"  fired: {fire.get('tick')} -> {fire.get('execution_id')}")


@schedules.command("list")
@click.option("--json", "as_json", is_flag=True)
@tenant_options
def list_command(as_json: bool, settings: Settings) -> None:
    """List schedules."""
    with open_engine(settings, load_activities=False) as engine:
        service = Schedules(engine)
        records = service.list()
        if as_json:
            echo_json([_as_dict(r, service) for r in records])
            return
        table = Table(box=None, pad_edge=False)
        for column in ("id", "workflow", "spec", "state", "next fire", "fired"):
            table.add_column(column)
        for r in records:
            table.add_row(
                r.id,
                r.workflow,
                short(spec_of(r).describe(), 40),
                "paused" if r.paused else "active",
                r.next_fire_at.isoformat() if r.next_fire_at else "-",
                str(r.fired_count),
            )
        print_table(table)


@schedules.command("show")
@click.argument("schedule_id")
@click.option("--json", "as_json", is_flag=True)
@tenant_options
def show_command(schedule_id: str, as_json: bool, settings: Settings) -> None:
    """Show a schedule with its next 5 fire times."""
    with open_engine(settings, load_activities=False) as engine:
        service = Schedules(engine)
        _show(service.get(schedule_id), service, as_json)


_JSON = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")


@schedules.command("pause")
@click.argument("schedule_id")
@click.option("--note")
@_JSON
@tenant_options
def pause_command(schedule_id: str, note: str | None, as_json: bool, settings: Settings) -> None:
    """Stop firing (nothing missed while paused replays on resume)."""
    with open_engine(settings, load_activities=False) as engine:
        service = Schedules(engine)
        record = service.pause(schedule_id, note)
        if as_json:
            echo_json(_as_dict(record, service))
            return
    console.print(f"{schedule_id} paused")


@schedules.command("resume")
@click.argument("schedule_id")
@click.option("--note")
@_JSON
@tenant_options
def resume_command(schedule_id: str, note: str | None, as_json: bool, settings: Settings) -> None:
    """Fire again from the next tick after now."""
    with open_engine(settings, load_activities=False) as engine:
        service = Schedules(engine)
        record = service.resume(schedule_id, note)
        if as_json:
            echo_json(_as_dict(record, service))
            return
    console.print(f"{schedule_id} resumed; next fire {record.next_fire_at}")


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
    with open_engine(settings, load_activities=False) as engine:
        service = Schedules(engine)
        record = service.update(schedule_id, **changes)
        if as_json:
            echo_json(_as_dict(record, service))
            return
    console.print(f"{schedule_id} updated; next fire {record.next_fire_at}")


@schedules.command("delete")
@click.argument("schedule_id")
@_JSON
@tenant_options
def delete_command(schedule_id: str, as_json: bool, settings: Settings) -> None:
    """Delete a schedule (executions it started are kept)."""
    with open_engine(settings, load_activities=False) as engine:
        Schedules(engine).delete(schedule_id)
    if as_json:
        echo_json({"id": schedule_id, "deleted": True})
    else:
        console.print(f"{schedule_id} deleted")


@schedules.command("trigger")
@click.argument("schedule_id")
@_JSON
@tenant_options
def trigger_command(schedule_id: str, as_json: bool, settings: Settings) -> None:
    """Start one execution now."""
    with open_engine(settings, load_activities=False) as engine:
        execution_id = Schedules(engine).trigger(schedule_id)
    if as_json:
        echo_json({"id": schedule_id, "execution_id": execution_id})
    else:
        console.print(f"started {execution_id}", soft_wrap=True)


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
    with open_engine(settings, load_activities=False) as engine:
        ids = Schedules(engine).backfill(schedule_id, _time(start, "--start"), _time(end, "--end"))
    if as_json:
        echo_json({"id": schedule_id, "execution_ids": ids})
    else:
        console.print(f"backfilled {len(ids)} ticks")
