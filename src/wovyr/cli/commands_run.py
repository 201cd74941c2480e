"""`wovyr run`."""

from __future__ import annotations

import asyncio
import json
import shlex
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from rich.live import Live

from wovyr.cli.common import (
    activities_table,
    cli_inputs,
    cli_labels,
    console,
    echo_json,
    input_option,
    is_tty,
    open_engine,
    print_table,
    styled,
    tenant_options,
    wait_up_to_option,
)
from wovyr.cli.main import EXIT_FAILED, EXIT_OK, EXIT_WAITING, cli
from wovyr.definition.model import Workflow
from wovyr.definition.parse import load_definition_file
from wovyr.definition.preflight import handler_problems
from wovyr.engine.engine import Engine
from wovyr.errors import DefinitionError, InputError, Problem
from wovyr.fields import parse_duration
from wovyr.settings import Settings
from wovyr.store import redact_url
from wovyr.worker import Worker
from wovyr.worker.run import Foreground, Wait, drive

__all__: list[str] = []


def _inputs(pairs: tuple[str, ...], input_file: str | None) -> dict[str, Any]:
    values: dict[str, Any] = {}
    if input_file:
        try:
            loaded = json.loads(Path(input_file).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InputError([Problem(f"cannot read inputs from {input_file}: {exc}")]) from None
        if not isinstance(loaded, dict):
            raise InputError([Problem(f"{input_file} must hold a JSON object of inputs")])
        values.update(loaded)
    values.update(cli_inputs(pairs))
    return values


def exit_code_for(status: str) -> int:
    """The exit code of a run that ended with `status` (the status it prints). A run that
    `continued` as new exits as waiting: its chain goes on in the next run."""
    if status == "completed":
        return EXIT_OK
    if status in ("failed", "cancelled"):
        return EXIT_FAILED
    return EXIT_WAITING


def wait_seconds(value: str) -> float:
    try:
        return float(value)
    except ValueError:
        pass
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--wait-up-to") from None


@cli.command("run")
@click.argument("file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--workflow",
    "registered",
    metavar="NAME[@VERSION]",
    help="Run a registered workflow (the latest applied version unless @VERSION) instead of FILE.",
)
@input_option("An input value (JSON if it parses, else a string). Repeatable.")
@click.option("--input-file", type=click.Path(dir_okay=False), help="A JSON object of inputs.")
@click.option(
    "--label",
    "label_pairs",
    multiple=True,
    metavar="KEY=VALUE",
    help="A label of the execution, for search (over the definition's). Repeatable.",
)
@click.option("--id", "execution_id", help="Execution id (starting an existing id resumes it).")
@wait_up_to_option(
    "Sleep here for timers, retry back-offs and rate-limit or concurrency holds due "
    "within this long (30s, 5m, 0); a later one stops the run (exit 3)."
)
@click.option("--detach", is_flag=True, help="Only start it; a worker drives it.")
@click.option(
    "--priority",
    type=click.IntRange(0, 9),
    default=None,
    help="0-9 (default 0): within the tenant, workers claim higher priority first.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@tenant_options
@click.pass_context
def run_command(
    ctx: click.Context,
    file: Path | None,
    registered: str | None,
    pairs: tuple[str, ...],
    input_file: str | None,
    label_pairs: tuple[str, ...],
    execution_id: str | None,
    wait_up_to: str,
    detach: bool,
    priority: int | None,
    as_json: bool,
    settings: Settings,
) -> None:
    """Run the workflow in FILE (or --workflow NAME) here, with its child workflows, map
    items, retries, short timers and flow-control holds, until it completes or fails, or
    waits for a signal, an approval, or a timer or hold later than --wait-up-to.

    Exit codes: 0 completed, 1 failed or cancelled, 2 usage, 3 waiting (the command that
    continues it is printed) or continued as new (a worker drives the chain's next run),
    4 not found.
    """
    target = _target(file, registered, execution_id)
    if target.resume and (pairs or input_file or label_pairs or priority is not None or detach):
        raise click.UsageError(
            "an existing execution is resumed as it is: leave out -i, --input-file, --label, "
            "--priority and --detach (or give a FILE or --workflow to start one)"
        )
    horizon = wait_seconds(wait_up_to)
    inputs = _inputs(pairs, input_file)
    labels = cli_labels(label_pairs)
    start: dict[str, Any] = {
        "input": inputs,
        "path": target.path,
        "name": target.name,
        "version": target.version,
        "execution_id": execution_id,
        "labels": labels,
        "priority": priority,
    }
    with open_engine(settings) as engine:
        if detach:
            ran = Foreground(engine.query(engine.start(**start).id, follow=False))
        else:
            _check_handlers(engine, target, execution_id)

            async def begin(worker: Worker) -> str:
                if target.resume:
                    assert execution_id is not None
                    return execution_id
                return (await worker.start(**start)).id

            ran = drive_here(engine, begin, settings, horizon, show=not as_json and is_tty())
    report(ran, Again(ctx.params, target), as_json)
    raise click.exceptions.Exit(EXIT_OK if detach else exit_code_for(ran.status))


def report(ran: Foreground, again: Again, as_json: bool) -> None:
    """What a foreground run prints when it stops (JSON, or the table and the commands that
    continue it)."""
    if as_json:
        echo_json(_result_json(ran, again))
    else:
        _print_result(ran, again)


@dataclass(frozen=True)
class _Target:
    """What `wovyr run` starts: a file, or a registered name (and version); neither: the
    existing execution `--id` names, resumed."""

    path: Path | None = None
    name: str | None = None
    version: str | None = None

    @property
    def resume(self) -> bool:
        return self.path is None and self.name is None


RESUME = _Target()


def _target(file: Path | None, registered: str | None, execution_id: str | None) -> _Target:
    if file is None and registered is None and execution_id is not None:
        return RESUME
    if (file is None) == (registered is None):
        raise click.UsageError(
            "give a FILE or --workflow NAME[@VERSION] (or only --id ID to resume an "
            "execution), not both or neither"
        )
    if registered is None:
        return _Target(path=file)
    name, _, version = registered.partition("@")  # names cannot contain '@'
    return _Target(name=name, version=version or None)


def _check_handlers(engine: Engine, target: _Target, execution_id: str | None = None) -> None:
    """Refuse to start (or resume) when a tool has no handler loaded here or its `with:`
    keys do not fit the handler: else the activities before it would run first, then fail
    there."""
    if target.path is not None:
        workflow = load_definition_file(target.path)
    elif target.name is not None:
        workflow, _ = engine.target(name=target.name, version=target.version)
    else:
        assert execution_id is not None
        workflow = engine.definition(engine.get(execution_id).definition_hash)
    check_handlers(engine, workflow, target.path)


def check_handlers(engine: Engine, workflow: Workflow, path: Path | None = None) -> None:
    """`DefinitionError` naming each tool of `workflow` the handlers loaded here cannot run
    (none registered, `with:` keys that do not fit), located in `path` when given."""
    problems = handler_problems(workflow, engine.activities, path=path)
    if problems:
        listed = "".join(f"\n  {p.format()}" for p in problems)
        message = f"the workflow cannot run with the activity handlers loaded here:{listed}"
        raise DefinitionError(problems, message=message)


def drive_here(
    engine: Engine,
    begin: Callable[[Worker], Awaitable[str]],
    settings: Settings,
    wait_up_to: float,
    *,
    show: bool,
) -> Foreground:
    """Drive in this process the execution `begin` starts (or names) with the worker given
    to it, with everything it needs, until it ends or waits on the outside world (see
    `wovyr.worker.run.drive`); `show`: a live table of its activities meanwhile."""

    async def main() -> Foreground:
        worker = Worker(engine, lease_seconds=settings.lease_seconds)
        try:
            execution_id = await begin(worker)
            driving = asyncio.create_task(
                drive(worker, execution_id, wait_up_to=wait_up_to, poll=settings.poll_interval)
            )
            if show:
                with Live(console=console, refresh_per_second=8, transient=True) as live:
                    while not driving.done():
                        view = engine.query(execution_id, follow=False)
                        live.update(activities_table(view.activities))
                        await asyncio.wait([driving], timeout=0.1)
            return await driving
        finally:
            await worker.close()

    return asyncio.run(main())


class Again:
    """The commands that continue a stopped run, spelt as this one was invoked (the store
    and activities flags given, the same FILE or --workflow, or only the id)."""

    def __init__(self, params: dict[str, Any], target: _Target) -> None:
        store: list[str] = []
        if params.get("database_url"):
            store += ["--db", redact_url(params["database_url"])]
        if params.get("home"):
            store += ["--home", params["home"]]
        self.store = store
        modules = [arg for module in params.get("activities") or () for arg in ("-a", module)]
        if target.path is not None:
            what = [str(target.path)]
        elif target.name is not None:
            what = [
                "--workflow",
                f"{target.name}@{target.version}" if target.version else str(target.name),
            ]
        else:
            what = []
        self.run = ["run", *what, *modules]
        self.target = target

    def resume(self, execution_id: str) -> str:
        if self.target.resume:  # `--id` first: it is the whole target
            return _command(["run", "--id", execution_id, *self.run[1:], *self.store])
        return _command([*self.run, "--id", execution_id, *self.store])

    def answer(self, wait: Wait) -> str | None:
        """The command that gives `wait` what it waits for (None for a timer)."""
        if wait.kind == "signal":
            args = ["workflows", "signal", wait.execution_id, wait.name or ""]
        elif wait.kind == "approval":
            args = ["workflows", "approve", wait.execution_id, wait.activity]
            if wait.approvers:
                args += ["--by", wait.approvers[0]]
        else:
            return None
        return _command([*args, *self.store])


def _command(args: list[str]) -> str:
    return shlex.join(["wovyr", *args])


def _wait_text(wait: Wait) -> str:
    where = wait.activity if wait.item is None else f"{wait.activity}[{wait.item}]"
    if wait.kind == "signal":
        return f"signal {wait.name!r} ({where} of {wait.execution_id})"
    if wait.kind == "approval":
        who = f"; approvers: {', '.join(wait.approvers)}" if wait.approvers else ""
        return f"approval {where} of {wait.execution_id}{who}"
    if wait.kind == "quota":
        return (
            f"the tenant's activity-seconds quota ({wait.execution_id} holds its next attempts"
            f" until {wait.fire_at}, later than --wait-up-to)"
        )
    if wait.kind == "flow":
        return (
            f"{wait.reason} ({wait.execution_id} holds its next attempts until {wait.fire_at},"
            " later than --wait-up-to)"
        )
    what = {"retry": "retry of", "repeat": "next iteration of"}.get(wait.kind, "timer")
    return f"{what} {where} of {wait.execution_id} at {wait.fire_at} (later than --wait-up-to)"


def _result_json(ran: Foreground, again: Again) -> dict[str, Any]:
    data = ran.view.to_dict()
    data["waits"] = [{**w.to_dict(), "command": again.answer(w)} for w in ran.waits]
    data["continue_with"] = again.resume(ran.view.id) if ran.status == "waiting" else None
    return data


def _print_result(ran: Foreground, again: Again) -> None:
    view = ran.view
    print_table(activities_table(view.activities))
    console.print(
        styled(
            "\nexecution ",
            (view.id, "bold"),
            f" ({view.workflow} v{view.version}): ",
            (view.status, "bold"),
        ),
        soft_wrap=True,
    )
    if view.output is not None:
        console.print("output: " + json.dumps(view.output, indent=2, default=str), soft_wrap=True)
    if view.error is not None:
        console.print("error: " + json.dumps(view.error, indent=2, default=str), soft_wrap=True)
    if view.continued_as:  # the chain goes on in its next run (a worker drives it)
        console.print(
            f"continued as {view.continued_as} (follow the chain with: "
            f"wovyr workflows show {(view.chain or {}).get('root', view.id)})",
            markup=False,
            soft_wrap=True,
        )
    if view.status != "waiting":
        return
    if ran.waits:
        console.print("waiting on:")
    for wait in ran.waits:
        console.print(f"  {_wait_text(wait)}", markup=False, soft_wrap=True)
        answer = again.answer(wait)
        if answer:
            console.print(f"    {answer}", markup=False, soft_wrap=True)
    console.print(
        "then continue it here with (or leave it to a running `wovyr worker`):", soft_wrap=True
    )
    console.print(f"  {again.resume(view.id)}", markup=False, soft_wrap=True)
