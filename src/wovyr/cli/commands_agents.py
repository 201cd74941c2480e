"""`wovyr agents apply|list|show|run`: the agents registry (`wovyr.engine.agents`), on the
store directly or through a server (`--server`: `run` then follows the run the server's
worker drives)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from wovyr.cli.backend import remote_of, store_or_server
from wovyr.cli.commands_registry import apply_files
from wovyr.cli.common import (
    applied_at,
    cli_inputs,
    console,
    echo_json,
    echo_listing,
    input_option,
    json_option,
    open_engine,
    tenant_options,
)
from wovyr.cli.main import EXIT_FAILED, EXIT_OK, EXIT_WAITING, cli
from wovyr.definition.agent import agent_tool_problems
from wovyr.engine.agents import AgentRun, agent_run, apply_agent, list_agents, named_agent
from wovyr.errors import DefinitionError
from wovyr.settings import Settings
from wovyr.worker import Worker
from wovyr.worker.run import Foreground, drive

if TYPE_CHECKING:
    from wovyr.cli.remote_platform import RemotePlatform
    from wovyr.engine.engine import Engine

__all__: list[str] = []

WAIT_UP_TO = 60.0  # timers and retry back-offs due within this long are slept through here


@cli.group("agents")
def agents() -> None:
    """Agents: apply, list and show agent definitions, run one in the foreground."""


@agents.command("apply")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@json_option
@tenant_options
def apply_command(files: tuple[Path, ...], as_json: bool, settings: Settings) -> None:
    """Register each agent FILE under its metadata name and version (idempotent). With
    --activities, a tool that no loaded handler is registered as is refused."""

    def local(engine: Engine) -> None:
        def apply_one(file: Path) -> tuple[str, str, str, str]:
            outcome, digest, document = apply_agent(engine, file)
            return outcome, digest, document.name, document.version

        apply_files(files, apply_one, as_json, what="agent ")

    def remote(api: RemotePlatform) -> None:
        apply_files(files, api.apply_agent, as_json, what="agent ")

    store_or_server(settings, local, remote, load_activities=True)


@agents.command("list")
@json_option
@tenant_options
def list_command(as_json: bool, settings: Settings) -> None:
    """List the tenant's agents, newest first."""
    rows = store_or_server(
        settings,
        lambda engine: [
            {
                "name": d.name,
                "version": d.version,
                "hash": r.hash,
                "model": d.spec.model,
                "tools": d.spec.tools,
                "applied_at": r.created_at.isoformat(),
            }
            for d, r in list_agents(engine)
        ],
        lambda api: api.agents(),
    )
    columns = ("name", "version", "model", "tools", "applied", "hash")
    lines = (
        (
            row["name"],
            row["version"],
            row["model"] or "",
            ", ".join(row["tools"]),
            applied_at(row),
            row["hash"][:19],
        )
        for row in rows
    )
    echo_listing(as_json, rows, columns, lines)


@agents.command("show")
@click.argument("name")
@click.option("--version", "version", help="A specific version (default: the latest).")
@json_option
@tenant_options
def show_command(name: str, version: str | None, as_json: bool, settings: Settings) -> None:
    """Print a registered agent."""

    def local(engine: Engine) -> tuple[str, str, str, dict[str, Any]]:
        document, record = named_agent(engine, name, version)
        data = document.model_dump(by_alias=True, mode="json", exclude_defaults=True)
        return document.name, document.version, record.hash, data

    found, found_version, digest, data = store_or_server(
        settings, local, lambda api: api.agent(name, version)
    )
    if as_json:
        echo_json({"hash": digest, "agent": data})
    else:
        console.print(f"{found} v{found_version}  {digest}", markup=False)
        echo_json(data)


@agents.command("run")
@click.argument("name")
@input_option("A value of the task object (JSON if it parses, else a string). Repeatable.")
@click.option("--text", "task", help="The task as text (instead of -i pairs).")
@click.option("--id", "run_id", help="The run's id (starting an existing id resumes it).")
@click.option("--json", "as_json", is_flag=True, help="Print the run as JSON.")
@tenant_options
def run_command(
    name: str,
    pairs: tuple[str, ...],
    task: str | None,
    run_id: str | None,
    as_json: bool,
    settings: Settings,
) -> None:
    """Run the agent NAME here until it ends and print its final answer. The task is the
    object of the -i pairs, or --text.

    Exit codes: 0 completed, 1 failed, 3 waiting (an approval), 4 not found.
    """
    if task is not None and pairs:
        raise click.UsageError("give -i pairs or --text, not both")
    task_input: Any = task if task is not None else cli_inputs(pairs)
    if remote_of() is not None:  # the server's worker runs it: follow it there
        result = store_or_server(
            settings, _never_local, lambda api: api.run_agent(name, task_input, run_id)
        )
        _print_run(result, as_json)
        return
    with open_engine(settings) as engine:
        document, record = named_agent(engine, name)
        problems = agent_tool_problems(document, None, engine.activities)
        if problems:  # refused before it starts, like a foreground `wovyr run`
            listed = "".join(f"\n  {p.format()}" for p in problems)
            message = f"the agent cannot run with the activity handlers loaded here:{listed}"
            raise DefinitionError(problems, message=message)

        async def main() -> Foreground:
            worker = Worker(engine, lease_seconds=settings.lease_seconds)
            try:
                task_text = task_input if isinstance(task_input, str) else json.dumps(task_input)
                started = await worker.start(
                    input={"input": task_text},
                    name=record.name,
                    version=record.version,
                    execution_id=run_id,
                )
                return await drive(
                    worker, started.id, wait_up_to=WAIT_UP_TO, poll=settings.poll_interval
                )
            finally:
                await worker.close()

        ran = asyncio.run(main())
        result = agent_run(engine, ran.view.id)
    _print_run(result, as_json)


def _never_local(engine: Engine) -> AgentRun:  # pragma: no cover - only called with a server
    raise AssertionError("a foreground run is driven by this process")


def _print_run(result: AgentRun, as_json: bool) -> None:
    """The run's answer, and its exit code: 0 completed, 1 failed or cancelled, 3
    waiting."""
    if as_json:
        echo_json(
            {
                "id": result.id,
                "agent": result.agent,
                "version": result.version,
                "status": result.status,
                "turns": result.turns,
                "usage": result.usage,
                "cost": result.cost,
                "result": result.result,
                "error": result.error,
            }
        )
    elif result.status == "completed":
        answer = result.result.get("text") if isinstance(result.result, dict) else None
        click.echo(answer if isinstance(answer, str) else json.dumps(result.result))
        click.echo(
            f"run {result.id}: {result.turns} turns, {result.usage['input_tokens']} + "
            f"{result.usage['output_tokens']} tokens",
            err=True,
        )
    else:
        console.print(
            f"run {result.id} ({result.agent} v{result.version}): {result.status}",
            markup=False,
        )
        if result.error is not None:
            console.print("error: " + json.dumps(result.error, default=str), markup=False)
    code = {"completed": EXIT_OK, "failed": EXIT_FAILED, "cancelled": EXIT_FAILED}
    raise click.exceptions.Exit(code.get(result.status, EXIT_WAITING))
