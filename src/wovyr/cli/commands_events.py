"""`wovyr triggers apply|list|show|delete` and `wovyr events send|list`: event triggers
(`wovyr.engine.triggers`) on this host's store, or through a server (`--server`).

`triggers apply FILE` registers `kind: Trigger` documents (a trigger with `webhook` prints
the path of its inbound URL); `events send TOPIC JSON` sends an event as the API does;
`events list` shows the events received, newest first (what each trigger made of each,
never a payload), a page at a time (`--cursor`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.table import Table

from wovyr.cli.backend import store_or_server
from wovyr.cli.common import console, echo_json, print_table, tenant_options
from wovyr.cli.main import EXIT_FAILED, cli
from wovyr.settings import Settings

if TYPE_CHECKING:
    from wovyr.cli.remote_platform import RemotePlatform
    from wovyr.engine.engine import Engine

__all__: list[str] = []


@cli.group("triggers")
def triggers() -> None:
    """Event triggers: apply, list, show and delete `kind: Trigger` documents."""


@triggers.command("apply")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True)
@tenant_options
def apply_command(files: tuple[Path, ...], as_json: bool, settings: Settings) -> None:
    """Register each trigger FILE under its metadata name (replacing that trigger)."""

    def local(engine: Engine) -> list[dict[str, Any]]:
        from wovyr.engine.triggers import apply_trigger, trigger_view

        out = []
        for file in files:
            outcome, record = apply_trigger(engine, file)
            out.append({**trigger_view(record), "result": outcome, "file": str(file)})
        return out

    def remote(api: RemotePlatform) -> list[dict[str, Any]]:
        out = []
        for file in files:
            applied = api.client.apply_trigger(file.read_text(encoding="utf-8"))
            out.append({**applied, "file": str(file)})
        return out

    results = store_or_server(settings, local, remote)
    if as_json:
        echo_json(results)
        return
    for r in results:
        hook = f", webhook {r['webhook_path']}" if r["webhook_path"] else ""
        line = f"{r['file']}: trigger {r['name']} on {r['topic']} {r['result']}{hook}"
        console.print(line, markup=False)


def _triggers(settings: Settings) -> list[dict[str, Any]]:
    def local(engine: Engine) -> list[dict[str, Any]]:
        from wovyr.engine.triggers import list_triggers, trigger_view

        return [trigger_view(r) for r in list_triggers(engine)]

    return store_or_server(settings, local, lambda api: list(api.client.list_triggers()))


@triggers.command("list")
@click.option("--json", "as_json", is_flag=True)
@tenant_options
def list_command(as_json: bool, settings: Settings) -> None:
    """List the tenant's triggers."""
    rows = _triggers(settings)
    if as_json:
        echo_json(rows)
        return
    table = Table(box=None, pad_edge=False)
    for column in ("name", "topic", "action", "webhook"):
        table.add_column(column)
    for row in rows:
        spec = row["document"]["spec"]
        action = (
            f"start {spec['start']['workflow']}"
            if "start" in spec
            else f"signal {spec['signal']['name']}"
        )
        table.add_row(row["name"], row["topic"], action, row["webhook_path"] or "")
    print_table(table)


@triggers.command("show")
@click.argument("name")
@tenant_options
def show_command(name: str, settings: Settings) -> None:
    """Show one trigger (JSON: its document and webhook path)."""

    def local(engine: Engine) -> dict[str, Any]:
        from wovyr.engine.triggers import named_trigger, trigger_view

        return trigger_view(named_trigger(engine, name))

    echo_json(store_or_server(settings, local, lambda api: dict(api.client.get_trigger(name))))


@triggers.command("delete")
@click.argument("name")
@tenant_options
def delete_command(name: str, settings: Settings) -> None:
    """Delete a trigger (its webhook URL stops answering)."""

    def local(engine: Engine) -> None:
        from wovyr.engine.triggers import delete_trigger

        delete_trigger(engine, name)

    store_or_server(settings, local, lambda api: api.client.delete_trigger(name))
    console.print(f"deleted trigger {name}", markup=False)


@cli.group("events")
def events() -> None:
    """Events: send one to a topic, list those received."""


@events.command("send")
@click.argument("topic")
@click.argument("payload")
@click.option("--json", "as_json", is_flag=True)
@tenant_options
def send_command(topic: str, payload: str, as_json: bool, settings: Settings) -> None:
    """Send the JSON PAYLOAD to TOPIC's triggers; exit 1 when none started or signalled."""

    def local(engine: Engine) -> dict[str, Any]:
        from wovyr.engine.triggers import receive_event

        return receive_event(engine, topic, payload.encode()).to_dict()

    def remote(api: RemotePlatform) -> dict[str, Any]:
        try:
            data = json.loads(payload)
        except ValueError:
            raise click.BadParameter("not JSON", param_hint="PAYLOAD") from None
        return dict(api.client.send_event(topic, data))

    answer = store_or_server(settings, local, remote)
    if as_json:
        echo_json(answer)
    else:
        _print_events(answer["events"])
    if not any(e["outcome"] in ("started", "signalled", "duplicate") for e in answer["events"]):
        raise click.exceptions.Exit(EXIT_FAILED)


@events.command("list")
@click.option("--trigger", help="Only this trigger's events.")
@click.option("--limit", type=click.IntRange(1, 500), default=50, show_default=True)
@click.option("--cursor", help="The next_cursor of the page before.")
@click.option("--json", "as_json", is_flag=True)
@tenant_options
def events_list_command(
    trigger: str | None, limit: int, cursor: str | None, as_json: bool, settings: Settings
) -> None:
    """List the events received, newest first."""

    def local(engine: Engine) -> dict[str, Any]:
        from wovyr.engine.triggers import event_view, list_events
        from wovyr.store.codec import from_micros, to_micros

        before = None
        if cursor:
            micros, _, ident = cursor.partition(":")
            try:
                before = (from_micros(int(micros)), ident)
            except (ValueError, OverflowError):
                raise click.BadParameter("not a cursor this command printed") from None
        page = list_events(engine, trigger=trigger, before=before, limit=limit)
        after = None if page.next is None else f"{to_micros(page.next[0])}:{page.next[1]}"
        return {"items": [event_view(r) for r in page.items], "next_cursor": after}

    def remote(api: RemotePlatform) -> dict[str, Any]:
        return dict(api.client.list_events(trigger=trigger, limit=limit, cursor=cursor))

    page = store_or_server(settings, local, remote)
    if as_json:
        echo_json(page)
        return
    _print_events(page["items"])
    if page["next_cursor"]:
        console.print(f"more: --cursor {page['next_cursor']}", markup=False)


def _print_events(rows: list[dict[str, Any]]) -> None:
    table = Table(box=None, pad_edge=False)
    for column in ("received", "topic", "trigger", "outcome", "execution", "reason"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            row["received_at"][:19].replace("T", " "),
            row["topic"],
            row["trigger"] or "",
            row["outcome"],
            row["execution_id"] or "",
            row["reason"],
        )
    print_table(table)
