"""`wovyr run` and `wovyr worker`."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import time
from pathlib import Path
from typing import Any

import click
from rich.live import Live

from wovyr.activities.base import ENTRY_POINT_GROUP, load_activity_modules
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
from wovyr.engine.engine import Engine, ExecutionView
from wovyr.errors import ConfigError, InputError, Problem
from wovyr.settings import Settings
from wovyr.store import open_store, redact_url
from wovyr.store.shards import SHARD_COUNT
from wovyr.worker import Worker
from wovyr.worker.partitions import parse_partitions

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
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
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
    file: Path,
    pairs: tuple[str, ...],
    input_file: str | None,
    execution_id: str | None,
    detach: bool,
    as_json: bool,
    settings: Settings,
) -> None:
    """Run the workflow in FILE here until it completes, fails or waits.

    Exit codes: 0 completed, 1 failed or cancelled, 2 usage, 3 waiting (suspended).
    """
    inputs = _inputs(pairs, input_file)
    with open_engine(settings) as engine:
        if detach:
            record = engine.start(file, inputs, execution_id=execution_id)
            view = engine.query(record.id)
        else:
            view = _run_live(
                engine, file, inputs, execution_id, settings, show=not as_json and is_tty()
            )
    if as_json:
        echo_json(view.to_dict())
    else:
        _print_result(view)
    raise click.exceptions.Exit(EXIT_OK if detach else exit_code_for(view))


def _run_live(
    engine: Engine,
    file: Path,
    inputs: dict[str, Any],
    execution_id: str | None,
    settings: Settings,
    *,
    show: bool,
) -> ExecutionView:
    async def main() -> str:
        worker = Worker(engine, lease_seconds=settings.lease_seconds)
        try:
            record = await worker.start(file, inputs, execution_id=execution_id)
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


@cli.command("worker")
@click.option(
    "--concurrency",
    type=click.IntRange(1, 10_000),
    default=64,
    show_default=True,
    help="Executions driven at once.",
)
@click.option(
    "--lease-seconds",
    type=click.FloatRange(1, 3600),
    default=None,
    help="Lease length (default 30, env WOVYR_LEASE_SECONDS).",
)
@click.option(
    "--poll-interval",
    type=click.FloatRange(0.01, 3600),
    default=None,
    help="Seconds between polls when idle (default 1; PostgreSQL wakes idle workers at once).",
)
@click.option(
    "--grace",
    type=click.FloatRange(0, 3600),
    default=10.0,
    show_default=True,
    help="Seconds in-flight work may finish after SIGINT/SIGTERM.",
)
@click.option(
    "--partitions",
    "partition_spec",
    metavar="LIST",
    default=None,
    help="Claim only these partitions of --of: ranges and lists, e.g. 0-7 or 0,2,8-11.",
)
@click.option(
    "--of",
    "partition_count",
    type=int,
    default=None,
    metavar="N",
    help="How many partitions the work is split into (1-1024; prefer a power of two).",
)
@click.option(
    "--membership",
    is_flag=True,
    help="Join the live workers (PostgreSQL) and take an equal share of the --of "
    "partitions (default 64), rebalanced as workers come and go.",
)
@click.option(
    "--db-clock/--no-db-clock",
    default=True,
    show_default=True,
    envvar="WOVYR_DB_CLOCK",
    help="Measure PostgreSQL leases with the database's clock (one clock for all hosts).",
)
@engine_options
def worker_command(
    concurrency: int,
    lease_seconds: float | None,
    poll_interval: float | None,
    grace: float,
    partition_spec: str | None,
    partition_count: int | None,
    membership: bool,
    db_clock: bool,
    settings: Settings,
) -> None:
    """Run a worker (and the timer dispatcher) until SIGINT or SIGTERM.

    Many workers may share one PostgreSQL database; split the work with --partitions/--of
    (fixed) or --membership (automatic).
    """
    lease = lease_seconds or settings.lease_seconds
    poll = poll_interval or settings.poll_interval
    partitions = _worker_partitions(partition_spec, partition_count, membership)
    # What a long-running worker notices (store failures and retries, adopted leases, its
    # share of the partitions, partitions no live worker claims) goes to stderr.
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    load_activity_modules(settings.activities, entry_point_group=ENTRY_POINT_GROUP)
    with Engine(open_store(settings.store_url, db_clock=db_clock)) as engine:
        worker = Worker(
            engine,
            concurrency=concurrency,
            lease_seconds=lease,
            poll_interval=poll,
            partitions=partitions,
            of=partition_count,
            membership=membership,
        )

        async def main() -> None:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
            share = "all partitions"
            if membership:
                share = f"a share of {worker.of} partitions (membership)"
            elif partitions is not None:
                share = f"partitions {partition_spec} of {partition_count}"
            click.echo(
                f"worker {worker.owner} on {redact_url(engine.store.url)} "
                f"(concurrency {concurrency}, lease {lease}s, {share})",
                err=True,
            )
            started = time.monotonic()
            await worker.run(stop, grace_seconds=grace)
            click.echo(
                f"worker stopped after {time.monotonic() - started:.1f}s; leases released", err=True
            )

        asyncio.run(main())


def _worker_partitions(spec: str | None, count: int | None, membership: bool) -> list[int] | None:
    """--partitions/--of/--membership -> the partitions to claim (None: all, or assigned)."""
    if membership:
        if spec is not None:
            raise click.BadParameter(
                "--membership assigns partitions; do not give --partitions too",
                param_hint="--partitions",
            )
        if count is not None and not 1 <= count <= SHARD_COUNT:
            raise click.BadParameter(f"must be between 1 and {SHARD_COUNT}", param_hint="--of")
        return None
    if spec is None:
        if count is not None:
            raise click.BadParameter(
                "--of needs --partitions (which of the N partitions to claim)", param_hint="--of"
            )
        return None
    if count is None:
        raise click.BadParameter(
            "--partitions needs --of (how many partitions there are)", param_hint="--partitions"
        )
    try:
        return parse_partitions(spec, count)
    except ConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="--partitions/--of") from None
