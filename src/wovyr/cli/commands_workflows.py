"""`wovyr workflows list|show|history|watch|logs|signal|approve|cancel|rerun|export`."""

from __future__ import annotations

import json
import time
from datetime import datetime
from importlib import import_module
from typing import TYPE_CHECKING, Any

import click

from wovyr.activities.failures import tracebacks_in, without_tracebacks
from wovyr.cli.backend import open_backend, refuse_remote, remote_of
from wovyr.cli.common import (
    activities_table,
    cli_inputs,
    cli_labels,
    cli_timestamp,
    console,
    echo_json,
    echo_listing,
    echo_table,
    input_option,
    is_tty,
    json_option,
    open_engine,
    print_table,
    short,
    status_style,
    styled,
    tenant_options,
    wait_up_to_option,
)
from wovyr.cli.main import cli
from wovyr.events import model_calls, model_totals
from wovyr.settings import Settings
from wovyr.statuses import SHOWN_STATUSES as STATUSES

if TYPE_CHECKING:
    from wovyr.worker import Worker

__all__: list[str] = []

_NO_FOLLOW = click.option(
    "--no-follow",
    "no_follow",
    is_flag=True,
    help="This run itself, not its continue-as-new chain's live (or last) run.",
)


class _Workflows(click.Group):
    """`wovyr workflows`: its `bulk` group (`commands_bulk`) is loaded when it is named or
    the subcommands are listed, so `show`, `list` and `history` do not load it."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        import_module("wovyr.cli.commands_bulk")  # it adds itself to `workflows`
        return super().list_commands(ctx)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name == "bulk":
            import_module("wovyr.cli.commands_bulk")
        return super().get_command(ctx, cmd_name)


@cli.group("workflows", cls=_Workflows)
def workflows() -> None:
    """Inspect and steer executions."""


@workflows.command("list")
@click.option("--workflow", help="Only this workflow name.")
@click.option("--name", help="Workflow names containing this text (any case).")
@click.option("--id-prefix", "id_prefix", metavar="PREFIX", help="Ids starting with this.")
@click.option("--label", "label_pairs", multiple=True, metavar="KEY=VALUE", help="With this label.")
@click.option("--status", type=click.Choice(STATUSES), help="Only this status.")
@click.option("--created-after", metavar="TIME", help="RFC 3339 time.")
@click.option("--created-before", metavar="TIME", help="RFC 3339 time.")
@click.option("--limit", type=click.IntRange(1, 1000), default=20, show_default=True)
@click.option("--cursor", help="Continue after a previous page.")
@json_option
@tenant_options
def list_command(
    workflow: str | None,
    name: str | None,
    id_prefix: str | None,
    label_pairs: tuple[str, ...],
    status: str | None,
    created_after: str | None,
    created_before: str | None,
    limit: int,
    cursor: str | None,
    as_json: bool,
    settings: Settings,
) -> None:
    """List executions, newest first."""
    after = cli_timestamp(created_after, "--created-after")
    before = cli_timestamp(created_before, "--created-before")
    with open_backend(settings) as backend:
        items, next_cursor = backend.list_executions(
            workflow=workflow,
            status=status,
            limit=limit,
            cursor=cursor,
            created_after=after,
            created_before=before,
            labels=cli_labels(label_pairs),
            id_prefix=id_prefix,
            name=name,
        )
    if as_json:
        echo_json({"items": items, "next_cursor": next_cursor})
        return
    rows = (
        (
            r["id"],
            f"{r['workflow']} v{r['version']}",
            status_style(r["status"]),
            datetime.fromisoformat(r["created_at"]).strftime("%Y-%m-%d %H:%M:%S"),
            short(r["waiting_on"] or "", 50),
            " ".join(f"{k}={v}" for k, v in sorted(r["labels"].items())),
        )
        for r in items
    )
    # An id is never cut or wrapped: it is what a user copies into the next command.
    columns = ("id", "workflow", "status", "created", "waiting on", "labels")
    echo_table(columns, rows, no_wrap=("id", "created"))
    if next_cursor:
        console.print(f"\nmore: --cursor {next_cursor}")


FINISHED_STATUSES = ["completed", "failed", "cancelled", "continued"]


def _before(value: str) -> datetime:
    """An RFC 3339 time, or a day (its midnight, UTC)."""
    text = f"{value}T00:00:00Z" if len(value) == 10 else value
    stamp = cli_timestamp(text, "--before")
    assert stamp is not None
    return stamp


@workflows.command("export")
@click.option(
    "--status",
    "statuses",
    type=click.Choice(FINISHED_STATUSES),
    multiple=True,
    help="Only this status (repeatable; default: every finished one).",
)
@click.option("--workflow", help="Only this workflow name.")
@click.option(
    "--before", required=True, metavar="TIME", help="Finished before this (RFC 3339, or a day)."
)
@click.option(
    "-o",
    "--output",
    "output",
    required=True,
    type=click.Path(dir_okay=False),
    help="A .jsonl file.",
)
@json_option
@tenant_options
def export_command(
    statuses: tuple[str, ...],
    workflow: str | None,
    before: str,
    output: str,
    as_json: bool,
    settings: Settings,
) -> None:
    """Write finished executions to a JSON-lines file, one line each: {id, tenant, view,
    events} (the view `show --json` prints and the events `history --json` prints), oldest
    first. Nothing is deleted (retention's `--export-to` exports what it purges)."""
    from wovyr.engine.retention import export_file, iter_finished

    refuse_remote("workflows export", "it writes a file on this host from its store")
    cutoff = _before(before)
    with open_engine(settings, load_activities=False) as engine:
        found = iter_finished(engine, workflow, cutoff, statuses=statuses or None)
        count = export_file(engine, found, output)
    if as_json:
        echo_json({"file": output, "executions": count})
        return
    console.print(f"{count} executions written to {output}", markup=False)


@workflows.command("show")
@click.argument("execution_id")
@json_option
@_NO_FOLLOW
@tenant_options
def show_command(execution_id: str, as_json: bool, no_follow: bool, settings: Settings) -> None:
    """Show one execution's state (a query: changes nothing). A run that continued as new
    shows its chain's live (or last) run, unless --no-follow. The model calls of its `llm`
    and `agent` steps are listed with their tokens, cost and latency, and added up per
    activity (an agent's run) and for the execution (--json: `model_calls`,
    `model_usage`)."""
    with open_backend(settings) as backend:
        view = backend.execution(execution_id, follow=not no_follow)
        calls = []
        if any(a["kind"] in _MODEL_KINDS for a in view["activities"].values()):
            events = backend.history(view["id"], 0, None, follow=False)
            calls = model_calls((e["type"], e["data"]) for e in events)
    usage = {
        "total": model_totals(calls),
        "activities": {
            aid: model_totals(c for c in calls if c["activity"] == aid)
            for aid in dict.fromkeys(c["activity"] for c in calls)
        },
    }
    if as_json:
        echo_json({**view, "model_calls": calls, "model_usage": usage})
        return
    console.print(
        styled(
            (view["id"], "bold"),
            f"  {view['workflow']} v{view['version']}  ",
            status_style(view["status"]),
        )
    )
    console.print(f"created {view['created_at']}   events {view['event_count']}")
    chain, rerun_of = view["chain"], view["rerun_of"]
    if chain is not None:
        console.print(f"chain {chain['root']}   run {chain['run']}")
    if view["continued_from"]:
        console.print(f"continued from: {view['continued_from']}")
    if view["continued_as"]:
        console.print(f"continued as: {view['continued_as']}")
    if view["labels"]:
        labels = " ".join(f"{k}={v}" for k, v in sorted(view["labels"].items()))
        console.print("labels: " + labels)
    if rerun_of is not None:
        start = rerun_of.get("from")
        console.print(f"rerun of: {rerun_of['id']}" + (f" from {start}" if start else ""))
    if view["reruns"]:
        console.print(f"reruns: {', '.join(view['reruns'])}")
    if view["waiting_on"]:
        console.print(f"waiting on: {view['waiting_on']}")
    given = view["input"]
    if isinstance(given, dict) and set(given) == {"sealed"}:  # its payloads are gone
        console.print(f"payloads: {given['sealed']}", markup=False)
    print_table(activities_table(view["activities"]))
    if calls:
        _print_model_calls(calls, usage)
    if view["output"] is not None:
        console.print("output: " + json.dumps(view["output"], default=str))
    if view["error"] is not None:
        console.print("error: " + json.dumps(without_tracebacks(view["error"]), default=str))
    _print_tracebacks(view)


_MODEL_KINDS = frozenset({"llm", "agent"})


def _print_model_calls(calls: list[dict[str, Any]], usage: dict[str, Any]) -> None:
    """The model calls, one row each, then what they add up to per activity and in all."""
    from rich.table import Table

    table = Table(box=None, pad_edge=False, title="model calls", title_justify="left")
    for column in ("activity", "call", "model", "tokens in", "out", "cost", "latency"):
        table.add_column(column)

    def row(name: str, where: str, model: str, total: dict[str, Any]) -> None:
        cached = total.get("cached_tokens") or 0
        latency = total.get("latency")
        table.add_row(
            name,
            where,
            model,
            str(total["input_tokens"]) + (f" ({cached} cached)" if cached else ""),
            str(total["output_tokens"]),
            "-" if total.get("cost") is None else f"{total['cost']:.6f}",
            "-" if latency is None else f"{latency:.3f}s",
        )

    for call in calls:
        where = [f"{k} {call[k]}" for k in ("index", "iteration", "turn") if k in call]
        failed = f" {call['error']}" if call.get("error") else ""
        model = f"{call.get('provider') or '?'}/{call.get('model') or '?'}"
        row(call["activity"], ", ".join(where) + failed, model, call)
    for aid, total in usage["activities"].items():
        row(aid, f"{total['calls']} calls", "(activity)", total)
    total = usage["total"]
    row("(all)", f"{total['calls']} calls", "", total)
    print_table(table)


def _print_tracebacks(view: dict[str, Any]) -> None:
    """The failed handlers' tracebacks (their own frames), as Python prints them."""
    errors: dict[str, Any] = {}
    for aid, act in view["activities"].items():
        errors[aid] = act.get("error")
        errors.update({f"{aid}[{i}]": it.get("error") for i, it in enumerate(act["items"] or [])})
    errors["the execution"] = view["error"]  # its activity's, unless it failed on its own
    for where, trace in tracebacks_in(errors):
        console.print(f"\ntraceback of {where}:", markup=False)
        console.print(trace.rstrip("\n"), markup=False, soft_wrap=True)


@workflows.command("history")
@click.argument("execution_id")
@click.option("--after", type=click.IntRange(0), default=0, help="Only events after this seq.")
@click.option("--limit", type=click.IntRange(1, 100_000), default=None)
@json_option
@_NO_FOLLOW
@tenant_options
def history_command(
    execution_id: str,
    after: int,
    limit: int | None,
    as_json: bool,
    no_follow: bool,
    settings: Settings,
) -> None:
    """Print an execution's events in order (of a chain's live or last run, unless
    --no-follow)."""
    with open_backend(settings) as backend:
        events = backend.history(execution_id, after, limit, follow=not no_follow)
    rows = (
        (
            str(e["seq"]),
            datetime.fromisoformat(e["at"]).strftime("%H:%M:%S.%f")[:-3],
            e["type"],
            short(e["data"], 80),
        )
        for e in events
    )
    echo_listing(as_json, events, ("seq", "at", "type", "data"), rows)


@workflows.command("watch")
@click.argument("execution_id")
@click.option(
    "--after", metavar="ID", help="Continue after this message (an `id` printed by --json)."
)
@click.option(
    "--interval",
    type=click.FloatRange(0.01, 60),
    default=0.2,
    show_default=True,
    help="Seconds between reads of the store while nothing new came.",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object a line: id, event, data.")
@tenant_options
def watch_command(
    execution_id: str, after: str | None, interval: float, as_json: bool, settings: Settings
) -> None:
    """Follow an execution live: its events as they commit and the text its model calls
    stream, until it ends (exit 0 when it completed, 1 otherwise). Ctrl-C stops watching;
    the execution goes on."""
    printer = _WatchPrinter(as_json)
    status = None
    with open_backend(settings) as backend:
        try:
            for ident, kind, data in backend.watch(execution_id, after, interval):
                printer.show(ident, kind, data)
                if kind == "end":
                    status = data.get("status")
        except KeyboardInterrupt:
            printer.close()
            return
    if status != "completed":
        raise SystemExit(1)


class _WatchPrinter:
    """Streamed text inline as it comes, each event on a line of its own."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.in_text = False
        self.seen: set[tuple[str, int]] = set()  # (activity, turn) that streamed already

    def close(self) -> None:
        if self.in_text:
            console.print()
            self.in_text = False

    def show(self, ident: str, kind: str, data: dict[str, Any]) -> None:
        if self.as_json:
            click.echo(json.dumps({"id": ident, "event": kind, "data": data}, default=str))
            return
        if kind == "token":
            console.print(data["text"], end="", markup=False, highlight=False, soft_wrap=True)
            self.in_text = True
            return
        self.close()
        if kind == "attempt":
            where = (str(data["activity"]), int(data["turn"]))
            label = f"{data['activity']} attempt {data['attempt']}"
            if data.get("recovery"):
                label += f" (re-run {data['recovery']} after a lost worker)"
            if where[1] > 1:
                label += f", turn {where[1]}"
            if where in self.seen:
                label += ": the text above for it is superseded"
            self.seen.add(where)
            console.print(styled((f"--- {label} ---", "dim")))
        elif kind == "event":
            at, shown = str(data["at"])[11:23], short(data["data"], 80)
            console.print(styled((f"{data['seq']:>4}  {at}", "dim"), f"  {data['type']}  {shown}"))
        elif kind == "end":
            console.print(styled("end: ", status_style(str(data["status"]))))


@workflows.command("logs")
@click.argument("execution_id")
@click.option(
    "--follow", "-f", is_flag=True, help="Keep printing attempts as they end, until it ends."
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per attempt and line.")
@_NO_FOLLOW
@tenant_options
def logs_command(
    execution_id: str, follow: bool, as_json: bool, no_follow: bool, settings: Settings
) -> None:
    """Print what each attempt logged (`ctx.log`, its module's logging) and the
    tracebacks of failed attempts, in order; --follow waits for more until it ends."""
    after = 0
    with open_backend(settings) as backend:
        while True:
            items, after, finished = backend.logs(execution_id, after, follow=not no_follow)
            for item in items:
                _print_attempt(item, as_json)
            if not follow or finished:
                return
            time.sleep(settings.poll_interval)


def _print_attempt(item: dict[str, Any], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(item, default=str, ensure_ascii=False))
        return
    where = item["activity"] + (f"[{item['index']}]" if item["index"] is not None else "")
    head = f"── {where} attempt {item['attempt'] or '-'}: {item['outcome']}"
    console.print(styled(head, "  ", (str(item["at"]), "dim")))
    for line in item["lines"]:
        level = line.get("level", "info").upper()
        text = f"  {line.get('at', '')[11:23]} {level:<7} {line.get('logger')}: "
        click.echo(text + str(line.get("message", "")))
    if item["error"] is not None:
        click.echo(f"  error: {item['error']['type']}: {item['error']['message']}")
    if item["traceback"]:
        click.echo("  " + item["traceback"].rstrip("\n").replace("\n", "\n  "))


def _payload(raw: str | None) -> Any:
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


@workflows.command("signal")
@click.argument("execution_id")
@click.argument("name")
@click.option("--payload", help="JSON payload (a plain string if it is not JSON).")
@json_option
@tenant_options
def signal_command(
    execution_id: str, name: str, payload: str | None, as_json: bool, settings: Settings
) -> None:
    """Send signal NAME to an execution (buffered until a wait consumes it)."""
    with open_backend(settings) as backend:
        view = backend.signal(execution_id, name, _payload(payload))
    _done(view, as_json, f"signal {name!r} delivered to {execution_id}")


@workflows.command("query")
@click.argument("execution_id")
@click.argument("name")
@click.option(
    "--arg", "pairs", multiple=True, metavar="KEY=VALUE", help="An argument of the query."
)
@json_option
@tenant_options
def query_command(
    execution_id: str, name: str, pairs: tuple[str, ...], as_json: bool, settings: Settings
) -> None:
    """Ask the query NAME of a workflow function's execution (an `@wf.query`; load its
    module with -a); print its answer as JSON (with or without --json). Records nothing."""
    args = cli_inputs(pairs)
    with open_backend(settings) as backend:
        answer = backend.query(execution_id, name, args)
    click.echo(json.dumps(answer, indent=2, ensure_ascii=False))


@workflows.command("approve")
@click.argument("execution_id")
@click.argument("activity_id")
@click.option("--reject", is_flag=True, help="Reject instead of approving.")
@click.option("--by", help="Who decides (recorded).")
@click.option("--comment", help="A comment (recorded).")
@click.option(
    "--grant-tokens",
    type=click.IntRange(min=1),
    help="More tokens for an agent paused on its budget.",
)
@click.option(
    "--grant-cost",
    type=click.FloatRange(min=0, min_open=True),
    help="More cost for an agent paused on its budget.",
)
@json_option
@tenant_options
def approve_command(
    execution_id: str,
    activity_id: str,
    reject: bool,
    by: str | None,
    comment: str | None,
    grant_tokens: int | None,
    grant_cost: float | None,
    as_json: bool,
    settings: Settings,
) -> None:
    """Approve (or --reject) the approval ACTIVITY_ID of an execution (an agent paused on
    its budget: --grant-tokens/--grant-cost say how much more)."""
    grant = {k: v for k, v in (("tokens", grant_tokens), ("cost", grant_cost)) if v is not None}
    with open_backend(settings) as backend:
        view = backend.approve(
            execution_id, activity_id, not reject, by=by, comment=comment, grant=grant or None
        )
    verb = "rejected" if reject else "approved"
    _done(view, as_json, f"{activity_id} {verb} on {execution_id}")


@workflows.command("cancel")
@click.argument("execution_id")
@click.option("--reason", help="Why (recorded).")
@json_option
@tenant_options
def cancel_command(
    execution_id: str, reason: str | None, as_json: bool, settings: Settings
) -> None:
    """Cancel an execution (durable when this returns)."""
    with open_backend(settings) as backend:
        view = backend.cancel(execution_id, reason)
    _done(view, as_json, f"{execution_id} cancelled")


def _done(view: dict[str, Any], as_json: bool, message: str) -> None:
    if as_json:
        echo_json(view)
    else:
        console.print(styled(f"{message}; status ", status_style(view["status"])))


@workflows.command("rerun")
@click.argument("execution_id")
@click.option(
    "--from",
    "start_from",
    metavar="ACTIVITY",
    help="Rerun from this activity: the results upstream of it are reused, not run again.",
)
@input_option("Override an input.")
@click.option(
    "--latest",
    is_flag=True,
    help="On the newest registered version of the workflow (refused when it cannot take "
    "the reused results), not the execution's own definition.",
)
@click.option("--id", "new_id", help="The new execution's id (default: a fresh one).")
@wait_up_to_option(
    "On this host's store: as `wovyr run`, drive it here, sleeping for timers and "
    "retry back-offs due within this long (a later one stops it, exit 3)."
)
@click.option(
    "--detach",
    is_flag=True,
    help="Only start it; a `wovyr worker` (or `wovyr serve`) drives it. Through a server "
    "the server's worker always does.",
)
@json_option
@tenant_options
@click.pass_context
def rerun_command(
    ctx: click.Context,
    execution_id: str,
    start_from: str | None,
    pairs: tuple[str, ...],
    latest: bool,
    new_id: str | None,
    wait_up_to: str,
    detach: bool,
    as_json: bool,
    settings: Settings,
) -> None:
    """Start a new execution that reruns a finished one (linked to it as its rerun). On
    this host's store it is driven here, as `wovyr run` drives a run (exit 0 completed, 1
    failed, 3 waiting, with the commands that continue it); through a server, the server's
    worker drives it."""
    inputs = cli_inputs(pairs)
    if remote_of() is None and not detach:
        _rerun_here(ctx, settings, execution_id, start_from, inputs, latest, new_id, wait_up_to)
        return
    with open_backend(settings) as backend:
        view = backend.rerun(
            execution_id, start_from=start_from, input=inputs, latest=latest, new_id=new_id
        )
    if as_json:
        echo_json(view)
        return
    _print_rerun(view, execution_id)
    if remote_of() is None:
        console.print(
            f"nothing runs it until `wovyr worker` (or `wovyr serve`) runs on this store, or "
            f"it is continued here: wovyr run --id {view['id']}"
        )


def _print_rerun(view: dict[str, Any], execution_id: str) -> None:
    reused = [aid for aid, act in view["activities"].items() if act.get("reused_from")]
    console.print(
        styled(f"{view['id']} reruns {execution_id}; status ", status_style(view["status"]))
    )
    if reused:
        console.print(f"reused from {execution_id}: {', '.join(reused)}")


def _rerun_here(
    ctx: click.Context,
    settings: Settings,
    execution_id: str,
    start_from: str | None,
    inputs: dict[str, Any],
    latest: bool,
    new_id: str | None,
    wait_up_to: str,
) -> None:
    """Rerun on this host's store and drive the new execution here, as `wovyr run` does:
    nothing else may be running on the store to drive it."""
    import asyncio

    from wovyr.cli.commands_run import (
        RESUME,
        Again,
        check_handlers,
        drive_here,
        exit_code_for,
        report,
        wait_seconds,
    )

    as_json = bool(ctx.params.get("as_json"))
    horizon = wait_seconds(wait_up_to)
    with open_engine(settings) as engine:
        original = engine.get(execution_id)
        workflow = engine.definition(original.definition_hash)
        if latest:
            workflow, _ = engine.named(original.workflow)
        check_handlers(engine, workflow)

        async def begin(worker: Worker) -> str:
            record = await asyncio.to_thread(
                engine.rerun,
                execution_id,
                start_from=start_from,
                input=inputs,
                latest=latest,
                new_id=new_id,
            )
            return record.id

        ran = drive_here(engine, begin, settings, horizon, show=not as_json and is_tty())
    if not as_json:
        _print_rerun(ran.view.to_dict(), execution_id)
    report(ran, Again(ctx.params, RESUME), as_json)
    raise click.exceptions.Exit(exit_code_for(ran.status))
