"""`wovyr run`."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from rich.live import Live

from wovyr.cli.common import (
    activities_table,
    console,
    echo_json,
    engine_options,
    is_tty,
    open_engine,
)
from wovyr.cli.main import EXIT_FAILED, EXIT_OK, EXIT_WAITING, cli
from wovyr.definition.inputs import parse_cli_inputs
from wovyr.definition.parse import load_definition_file
from wovyr.definition.preflight import handler_problems
from wovyr.engine.engine import Engine, ExecutionView
from wovyr.errors import DefinitionError, InputError, Problem
from wovyr.settings import Settings
from wovyr.worker import Worker

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
    values.update(parse_cli_inputs(list(pairs)))
    return values


def exit_code_for(view: ExecutionView) -> int:
    if view.status == "completed":
        return EXIT_OK
    if view.status in ("failed", "cancelled"):
        return EXIT_FAILED
    return EXIT_WAITING


@cli.command("run")
@click.argument("file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--workflow",
    "registered",
    metavar="NAME[@VERSION]",
    help="Run a registered workflow (the latest applied version unless @VERSION) instead of FILE.",
)
@click.option(
    "-i",
    "--input",
    "pairs",
    multiple=True,
    metavar="KEY=VALUE",
    help="An input value (JSON if it parses, else a string). Repeatable.",
)
@click.option("--input-file", type=click.Path(dir_okay=False), help="A JSON object of inputs.")
@click.option("--id", "execution_id", help="Execution id (starting an existing id resumes it).")
@click.option("--detach", is_flag=True, help="Only start it; a worker drives it.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@engine_options
def run_command(
    file: Path | None,
    registered: str | None,
    pairs: tuple[str, ...],
    input_file: str | None,
    execution_id: str | None,
    detach: bool,
    as_json: bool,
    settings: Settings,
) -> None:
    """Run the workflow in FILE (or --workflow NAME) here until it completes, fails or waits.

    Exit codes: 0 completed, 1 failed or cancelled, 2 usage, 3 waiting (suspended).
    """
    target = _target(file, registered)
    inputs = _inputs(pairs, input_file)
    with open_engine(settings) as engine:
        if detach:
            record = engine.start(
                input=inputs,
                path=target.path,
                name=target.name,
                version=target.version,
                execution_id=execution_id,
            )
            view = engine.query(record.id)
        else:
            _check_handlers(engine, target)
            view = _run_live(
                engine, target, inputs, execution_id, settings, show=not as_json and is_tty()
            )
    if as_json:
        echo_json(view.to_dict())
    else:
        _print_result(view)
    raise click.exceptions.Exit(EXIT_OK if detach else exit_code_for(view))


@dataclass(frozen=True)
class _Target:
    """What `wovyr run` starts: a file, or a registered name (and version)."""

    path: Path | None = None
    name: str | None = None
    version: str | None = None


def _target(file: Path | None, registered: str | None) -> _Target:
    if (file is None) == (registered is None):
        raise click.UsageError("give a FILE or --workflow NAME[@VERSION], not both or neither")
    if registered is None:
        return _Target(path=file)
    name, _, version = registered.partition("@")  # names cannot contain '@'
    return _Target(name=name, version=version or None)


def _check_handlers(engine: Engine, target: _Target) -> None:
    """Refuse to start when a tool has no handler loaded here or its `with:` keys do not fit
    the handler: else the activities before it would run first, then fail there."""
    if target.path is not None:
        workflow = load_definition_file(target.path)
    else:
        workflow, _ = engine.target(name=target.name, version=target.version)
    problems = handler_problems(workflow, engine.activities, path=target.path)
    if problems:
        listed = "".join(f"\n  {p.format()}" for p in problems)
        message = f"the workflow cannot run with the activity handlers loaded here:{listed}"
        raise DefinitionError(problems, message=message)


def _run_live(
    engine: Engine,
    target: _Target,
    inputs: dict[str, Any],
    execution_id: str | None,
    settings: Settings,
    *,
    show: bool,
) -> ExecutionView:
    async def main() -> str:
        worker = Worker(engine, lease_seconds=settings.lease_seconds)
        try:
            record = await worker.start(
                input=inputs,
                path=target.path,
                name=target.name,
                version=target.version,
                execution_id=execution_id,
            )
            drive = asyncio.create_task(worker.run_until_idle(only=[record.id]))
            if show:
                with Live(console=console, refresh_per_second=8, transient=True) as live:
                    while not drive.done():
                        live.update(activities_table(engine.query(record.id)))
                        await asyncio.wait([drive], timeout=0.1)
            await drive
            return record.id
        finally:
            await worker.close()

    return engine.query(asyncio.run(main()))


def _print_result(view: ExecutionView) -> None:
    console.print(activities_table(view))
    console.print(
        f"\nexecution [bold]{view.id}[/] ({view.workflow} v{view.version}): [bold]{view.status}[/]"
    )
    if view.status == "waiting" and view.waiting_on:
        console.print(f"waiting on: {view.waiting_on}")
    if view.output is not None:
        console.print("output: " + json.dumps(view.output, indent=2, default=str))
    if view.error is not None:
        console.print("error: " + json.dumps(view.error, indent=2, default=str))
