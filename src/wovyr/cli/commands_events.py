"""`wovyr triggers apply|list|show|delete` and `wovyr events send|list`: event triggers
(`wovyr.engine.triggers`) on this host's store, or through a server (`--server`).

`triggers apply FILE` registers `kind: Trigger` documents (a trigger with `webhook` prints
the path of its inbound URL); `events send TOPIC JSON` sends an event as the API does;
`events list` shows the events received, newest first (what each trigger made of each,
never a payload), a page at a time (`--cursor`). `wovyr webhooks set|list|delete` manage
the tenant's outbound endpoints (`wovyr.platform.webhooks`), `webhooks deliveries` and
`webhooks delivery ID` show the outbox with each delivery's attempts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from wovyr.cli.backend import store_or_server
from wovyr.cli.common import console, echo_json, echo_listing, tenant_options
from wovyr.cli.main import EXIT_FAILED, cli
from wovyr.cli.pages import cursor_position, echo_page, next_cursor, page_options
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
    lines = (
        (row["name"], row["topic"], _action(row["document"]["spec"]), row["webhook_path"] or "")
        for row in rows
    )
    echo_listing(as_json, rows, ("name", "topic", "action", "webhook"), lines)


def _action(spec: dict[str, Any]) -> str:
    """What a trigger does with an event: the workflow it starts or the signal it sends."""
    if "start" in spec:
        return f"start {spec['start']['workflow']}"
    return f"signal {spec['signal']['name']}"


@triggers.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="The same JSON (the only form).")
@tenant_options
def show_command(name: str, as_json: bool, settings: Settings) -> None:
    """Show one trigger (JSON: its document and webhook path)."""

    def local(engine: Engine) -> dict[str, Any]:
        from wovyr.engine.triggers import named_trigger, trigger_view

        return trigger_view(named_trigger(engine, name))

    echo_json(store_or_server(settings, local, lambda api: dict(api.client.get_trigger(name))))


@triggers.command("delete")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True)
@tenant_options
def delete_command(name: str, as_json: bool, settings: Settings) -> None:
    """Delete a trigger (its webhook URL stops answering)."""

    def local(engine: Engine) -> None:
        from wovyr.engine.triggers import delete_trigger

        delete_trigger(engine, name)

    store_or_server(settings, local, lambda api: api.client.delete_trigger(name))
    if as_json:
        echo_json({"deleted": name})
    else:
        console.print(f"deleted trigger {name}", markup=False)


@cli.group("events")
def events() -> None:
    """Events: send one to a topic's triggers, list those received."""


@events.command("send")
@click.argument("topic")
@click.argument("payload")
@click.option("--json", "as_json", is_flag=True)
@tenant_options
def send_command(topic: str, payload: str, as_json: bool, settings: Settings) -> None:
    """Send the JSON PAYLOAD to TOPIC's triggers; exit 1 when none started or signalled."""

    def local(engine: Engine) -> dict[str, Any]:
        from wovyr.engine.triggers import receive_event
        from wovyr.errors import NotFound

        received = receive_event(engine, topic, payload.encode())
        if received.status == 404:  # recorded, and said as the API says it
            raise NotFound(f"no trigger takes topic {topic!r}")
        return received.to_dict()

    def remote(api: RemotePlatform) -> dict[str, Any]:
        try:
            data = json.loads(payload)
        except ValueError:
            raise click.BadParameter("not JSON", param_hint="PAYLOAD") from None
        return dict(api.client.send_event(topic, data))

    answer = store_or_server(settings, local, remote)
    echo_listing(as_json, answer, _EVENT_COLUMNS, _event_rows(answer["events"]))
    if not any(e["outcome"] in ("started", "signalled", "duplicate") for e in answer["events"]):
        raise click.exceptions.Exit(EXIT_FAILED)


@events.command("list")
@click.option("--trigger", help="Only this trigger's events.")
@page_options
@click.option("--json", "as_json", is_flag=True)
@tenant_options
def events_list_command(
    trigger: str | None, limit: int, cursor: str | None, as_json: bool, settings: Settings
) -> None:
    """List the events received, newest first."""

    def local(engine: Engine) -> dict[str, Any]:
        from wovyr.engine.triggers import event_view, list_events

        page = list_events(engine, trigger=trigger, before=cursor_position(cursor), limit=limit)
        return {"items": [event_view(r) for r in page.items], "next_cursor": next_cursor(page.next)}

    def remote(api: RemotePlatform) -> dict[str, Any]:
        return dict(api.client.list_events(trigger=trigger, limit=limit, cursor=cursor))

    page = store_or_server(settings, local, remote)
    echo_page(as_json, page, _EVENT_COLUMNS, _event_rows(page["items"]))


_EVENT_COLUMNS = ("received", "topic", "trigger", "outcome", "execution", "reason")


def _event_rows(rows: list[dict[str, Any]]) -> Iterator[tuple[str, ...]]:
    for row in rows:
        yield (
            row["received_at"][:19].replace("T", " "),
            row["topic"],
            row["trigger"] or "",
            row["outcome"],
            row["execution_id"] or "",
            row["reason"],
        )


@cli.group("webhooks")
def webhooks() -> None:
    """Outbound webhooks: the tenant's endpoints for execution events, their deliveries."""


@webhooks.command("set")
@click.argument("name")
@click.option("--url", required=True, help="Where deliveries are POSTed (http or https).")
@click.option(
    "--event",
    "events",
    multiple=True,
    required=True,
    help="An execution event to send (repeat): execution.completed, execution.failed, "
    "execution.cancelled, execution.approval_requested.",
)
@click.option(
    "--secret",
    "secrets",
    multiple=True,
    required=True,
    help="The NAME of a secret of the tenant that signs (repeat once while rotating a key).",
)
@click.option("--filter", "condition", help="A '${{ }}' condition on the delivery (`event`).")
@click.option("--json", "as_json", is_flag=True)
@tenant_options
def set_command(
    name: str,
    url: str,
    events: tuple[str, ...],
    secrets: tuple[str, ...],
    condition: str | None,
    as_json: bool,
    settings: Settings,
) -> None:
    """Add or replace the webhook endpoint NAME."""
    body: dict[str, Any] = {"url": url, "events": list(events), "secrets": list(secrets)}
    if condition is not None:
        body["filter"] = condition

    def local(engine: Engine) -> dict[str, Any]:
        from wovyr.platform.webhooks import endpoint_view, parse_endpoint

        by = engine.actor or "local"
        at, policy = engine.clock.now(), engine.side_effect_policy()
        record = parse_endpoint(engine.tenant, name, body, by=by, at=at, policy=policy)
        audit = engine.audit_entry("webhook.set", name, {"url": url, "events": list(events)})
        engine.store.put_webhook_endpoint(record, audit=audit)
        return endpoint_view(record)

    shown = store_or_server(settings, local, lambda api: dict(api.client.put_webhook(name, body)))
    if as_json:
        echo_json(shown)
    else:
        console.print(f"webhook {name}: {', '.join(shown['events'])} -> {url}", markup=False)


@webhooks.command("list")
@click.option("--json", "as_json", is_flag=True)
@tenant_options
def webhooks_list_command(as_json: bool, settings: Settings) -> None:
    """List the tenant's webhook endpoints (secrets by name)."""

    def local(engine: Engine) -> list[dict[str, Any]]:
        from wovyr.platform.webhooks import endpoint_view

        return [endpoint_view(e) for e in engine.store.list_webhook_endpoints(engine.tenant)]

    rows = store_or_server(settings, local, lambda api: list(api.client.list_webhooks()))
    lines = (
        (
            row["name"],
            row["url"],
            ", ".join(row["events"]),
            ", ".join(row["secrets"]),
            row["filter"] or "",
        )
        for row in rows
    )
    echo_listing(as_json, rows, ("name", "url", "events", "secrets", "filter"), lines)


@webhooks.command("delete")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True)
@tenant_options
def webhooks_delete_command(name: str, as_json: bool, settings: Settings) -> None:
    """Remove a webhook endpoint (its pending deliveries end dead)."""

    def local(engine: Engine) -> None:
        from wovyr.errors import NotFound

        audit = engine.audit_entry("webhook.delete", name)
        if not engine.store.delete_webhook_endpoint(engine.tenant, name, audit=audit):
            raise NotFound(f"no webhook endpoint {name!r}")

    store_or_server(settings, local, lambda api: api.client.delete_webhook(name))
    if as_json:
        echo_json({"deleted": name})
    else:
        console.print(f"deleted webhook {name}", markup=False)


@webhooks.command("deliveries")
@click.option("--endpoint", help="Only this endpoint's deliveries.")
@click.option("--status", type=click.Choice(["pending", "delivered", "filtered", "dead"]))
@page_options
@click.option("--json", "as_json", is_flag=True)
@tenant_options
def deliveries_command(
    endpoint: str | None,
    status: str | None,
    limit: int,
    cursor: str | None,
    as_json: bool,
    settings: Settings,
) -> None:
    """List the webhook deliveries, newest first."""

    def local(engine: Engine) -> dict[str, Any]:
        from wovyr.platform.webhooks import delivery_view

        page = engine.store.list_deliveries(
            engine.tenant,
            endpoint=endpoint,
            status=status,
            before=cursor_position(cursor),
            limit=limit,
        )
        return {
            "items": [delivery_view(d) for d in page.items],
            "next_cursor": next_cursor(page.next),
        }

    def remote(api: RemotePlatform) -> dict[str, Any]:
        found = api.client.list_deliveries(
            endpoint=endpoint, status=status, limit=limit, cursor=cursor
        )
        return dict(found)

    page = store_or_server(settings, local, remote)
    lines = (
        (
            row["id"],
            row["endpoint"],
            row["event"],
            row["execution_id"],
            row["status"],
            str(row["attempts"]),
            row["last_error"],
        )
        for row in page["items"]
    )
    columns = ("id", "endpoint", "event", "execution", "status", "attempts", "last error")
    echo_page(as_json, page, columns, lines)


@webhooks.command("delivery")
@click.argument("delivery_id")
@click.option("--json", "as_json", is_flag=True, help="The same JSON (the only form).")
@tenant_options
def delivery_command(delivery_id: str, as_json: bool, settings: Settings) -> None:
    """Show one delivery with its attempts (JSON)."""

    def local(engine: Engine) -> dict[str, Any]:
        from wovyr.errors import NotFound
        from wovyr.platform.webhooks import delivery_view

        found = engine.store.get_delivery(engine.tenant, delivery_id)
        if found is None:
            raise NotFound(f"no delivery {delivery_id!r}")
        return delivery_view(found, engine.store.delivery_attempts(engine.tenant, delivery_id))

    echo_json(
        store_or_server(settings, local, lambda api: dict(api.client.get_delivery(delivery_id)))
    )
