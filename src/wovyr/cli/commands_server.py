"""The long-running processes, `wovyr serve` and `wovyr worker`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import logging.config
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from wovyr import assemble, withheld
from wovyr._version import __version__
from wovyr.activities.logs import route_output
from wovyr.cli.common import echo_json, engine_options, json_log_config, open_engine
from wovyr.cli.main import cli, env_default
from wovyr.engine.engine import Engine
from wovyr.errors import ConfigError
from wovyr.files import atomic_write
from wovyr.platform.backup import register_backup_activity
from wovyr.platform.metrics import meter, store_gauges
from wovyr.platform.metrics_http import MetricsEndpoint, store_checks
from wovyr.platform.secrets import Secrets
from wovyr.settings import Settings
from wovyr.store import redact_url
from wovyr.store.shards import SHARD_COUNT
from wovyr.worker import Worker
from wovyr.worker.partitions import parse_partitions

__all__: list[str] = []


@cli.command("serve")
@click.option(
    "--host",
    default=env_default("WOVYR_HOST"),
    show_default="127.0.0.1",
    help="Address to listen on (0.0.0.0 in a container). Env: WOVYR_HOST.",
)
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=env_default("WOVYR_PORT"),
    show_default="8080",
    help="Env: WOVYR_PORT.",
)
@click.option(
    "--bootstrap-key-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=env_default("WOVYR_BOOTSTRAP_KEY_FILE"),
    help="Write the first admin key (made on a store with no key) to this file, mode 0600, "
    "instead of printing it. Env: WOVYR_BOOTSTRAP_KEY_FILE.",
)
@click.option(
    "--log-level",
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
    default="info",
    show_default=True,
)
@click.option(
    "--json", "as_json", is_flag=True, help="Log JSON lines; print the first admin key as JSON."
)
@click.option(
    "--access-log/--no-access-log",
    default=env_default("WOVYR_ACCESS_LOG", flag=True),
    show_default="off",
    help="Log one line per HTTP request (method, path without its query, status). "
    "Env: WOVYR_ACCESS_LOG=1.",
)
@engine_options
def serve_command(
    host: str,
    port: int,
    bootstrap_key_file: Path | None,
    log_level: str,
    as_json: bool,
    access_log: bool,
    settings: Settings,
) -> None:
    """Run the API, the web UI, the worker and the timer and schedule dispatchers.

    The worker (executions, timers, schedules) runs in a child process that this one
    supervises (restarted if it dies), so the HTTP event loop only does I/O.

    SIGTERM or Ctrl-C stops claiming work, gives in-flight activities a grace period
    (WOVYR_SHUTDOWN_GRACE_SECONDS), releases leases and exits. The first start on a store with
    no API key prints one admin key for tenant "default", once (or writes it to
    --bootstrap-key-file, never printing it).
    """
    try:
        import uvicorn

        from wovyr.server import create_app
        from wovyr.server.memtrace import install as install_memtrace
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ConfigError(
            f"the server needs the server extra: pip install 'wovyr[server]' ({exc})"
        ) from None
    as_json = as_json or settings.log_format == "json"  # WOVYR_LOG_FORMAT=json
    log_config = json_log_config(log_level) if as_json else uvicorn.config.LOGGING_CONFIG
    # configured before the store opens: what start-up logs (a served store's policy, the
    # KMS's escrow warning) is in the same format as the rest
    logging.config.dictConfig(log_config)
    install_memtrace("server")  # opt-in debugging aid; nothing when unset
    with open_engine(settings) as engine:
        secrets = engine.secrets  # the one the store seals payloads with
        assert isinstance(secrets, Secrets)
        secrets.kms  # noqa: B018 - loaded at start: its escrow warning, or a bad key's error
        # Executions are driven in a child process, so no workflow's CPU work can stall
        # HTTP; a memory:// store lives in this process only, so its worker must too.
        in_child = not engine.store.url.startswith("memory:")
        app = create_app(engine, replace(settings, worker_process=in_child))
        # Requests check untrusted bodies and definitions in threads; hand the GIL over
        # every millisecond (default 5) so the event loop waits less behind them.
        sys.setswitchinterval(0.001)
        if bootstrap_key_file is not None:  # before the key exists: a bad path loses none
            _check_key_folder(bootstrap_key_file)
        token = app.state.authenticator.bootstrap_admin_if_empty()
        if token is not None and bootstrap_key_file is not None:
            _write_key_file(bootstrap_key_file, token)
            if as_json:
                echo_json(
                    {"tenant": "default", "role": "admin", "token_file": str(bootstrap_key_file)}
                )
            else:
                click.echo(
                    "No API key existed: created an admin key for tenant 'default', "
                    f"written to {bootstrap_key_file} (mode 0600)."
                )
            sys.stdout.flush()
        elif token is not None and as_json:
            echo_json({"tenant": "default", "role": "admin", "token": token})
            sys.stdout.flush()
        elif token is not None:
            click.echo(
                "No API key existed: created an admin key for tenant 'default'.\n"
                "It is shown this once; keep it safe:\n\n"
                f"    {token}\n"
            )
            sys.stdout.flush()
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level=log_level,
            lifespan="on",
            access_log=access_log,
            timeout_graceful_shutdown=max(1, round(settings.shutdown_grace)),
            timeout_keep_alive=max(1, round(settings.keep_alive)),
            log_config=log_config,
        )
        banner = {
            "event": "start",
            "version": __version__,
            "url": f"http://{_host(host)}:{port}",
            "store": redact_url(engine.store.url),
            "worker": "process" if in_child else "embedded",
            "pid": os.getpid(),
        }
        if as_json:  # text logs have uvicorn's own "running on" line
            logging.getLogger("wovyr.cli").info(
                "wovyr %s serving on %s", __version__, banner["url"], extra={"fields": banner}
            )
        route_output()  # logging is configured: what an attempt prints goes to its own log
        _server_class(uvicorn.Server)(config).run()


def _check_key_folder(path: Path) -> None:
    """The bootstrap key's file can be written: its folder exists (made if missing) and it
    is not a folder."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot make the folder of --bootstrap-key-file {path}: {exc}") from None
    if path.is_dir() or not os.access(path.parent, os.W_OK):
        raise ConfigError(f"cannot write --bootstrap-key-file {path}")


def _write_key_file(path: Path, token: str) -> None:
    """The first admin key, in `path` (0600, written whole or not at all)."""
    try:
        atomic_write(path, token + "\n", 0o600)
    except OSError as exc:
        raise ConfigError(
            f"the first admin key was made but could not be written to {path}: {exc}",
            hint="revoke it (wovyr admin keys list/revoke) and make another with "
            "wovyr admin keys create --tenant default --role admin",
        ) from None


def _server_class(base: Any) -> Any:
    """uvicorn's Server, except that after a graceful shutdown on SIGTERM/SIGINT the process
    exits normally (code 0, `engine.close()` runs) instead of re-raising the signal."""

    class Server(base):  # type: ignore[misc]
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            handled = (signal.SIGINT, signal.SIGTERM)
            originals = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
            try:
                yield
            finally:
                for sig, handler in originals.items():
                    signal.signal(sig, handler)

    return Server


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
    default=env_default("WOVYR_DB_CLOCK", flag=True),
    show_default="on",
    help="Measure PostgreSQL leases with the database's clock (one clock for all hosts). "
    "Env: WOVYR_DB_CLOCK.",
)
@click.option(
    "--metrics-addr",
    metavar="HOST:PORT",
    default=env_default("WOVYR_METRICS_ADDR"),
    help="Serve Prometheus metrics on http://HOST:PORT/metrics, e.g. 127.0.0.1:9464 "
    "(default: off). No authentication: every tenant's series; bind it privately. "
    "Env: WOVYR_METRICS_ADDR.",
)
@click.option(
    "--max-per-tenant",
    type=click.IntRange(1, 10_000),
    default=None,
    help="Slots of this worker one tenant may hold (fair share between tenants is always "
    "on; this keeps slots for other tenants when one tenant's executions are slow). "
    "Env: WOVYR_MAX_PER_TENANT.",
)
@click.option(
    "--reserved-slots",
    type=click.IntRange(0, 10_000),
    default=None,
    help="Slots of this worker no one tenant may fill, kept for the others even while one "
    "tenant's executions hold the rest (default: an eighth of --concurrency, none below 8; "
    "0: none). Env: WOVYR_RESERVED_SLOTS.",
)
@click.option("--json", "as_json", is_flag=True, help="Log JSON lines on stderr.")
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
    metrics_addr: str | None,
    max_per_tenant: int | None,
    reserved_slots: int | None,
    as_json: bool,
    settings: Settings,
) -> None:
    """Run a worker (and the timer dispatcher) until SIGINT or SIGTERM.

    Many workers may share one PostgreSQL database; split the work with --partitions/--of
    (fixed) or --membership (automatic). --metrics-addr exports what this process does.
    """
    lease = lease_seconds or settings.lease_seconds
    poll = poll_interval or settings.poll_interval
    reserved = reserved_slots if reserved_slots is not None else settings.reserved_slots
    if reserved is not None and reserved >= concurrency:
        raise click.BadParameter(
            f"{reserved} is not below --concurrency {concurrency}", param_hint="--reserved-slots"
        )
    partitions = _worker_partitions(partition_spec, partition_count, membership)
    # What a long-running worker notices (store failures and retries, adopted leases, its
    # share of the partitions, partitions no live worker claims) goes to stderr.
    as_json = as_json or settings.log_format == "json"  # WOVYR_LOG_FORMAT=json
    if as_json:
        logging.config.dictConfig(json_log_config())
    else:
        logging.basicConfig(
            level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
    say = logging.getLogger("wovyr.cli").info if as_json else _stderr
    route_output()  # what an attempt prints goes to its own log, never to the worker's
    runtime, secrets = assemble.open_runtime(replace(settings, tenant="default"), db_clock=db_clock)
    secrets.kms  # noqa: B018 - loaded at start: its escrow warning, or a bad key's error
    with Engine.over(runtime) as engine:
        register_backup_activity(
            engine.activities,
            engine.store,
            settings.home,
            lambda: secrets.kms,
            engine.clock.now,
            env=withheld.environ(),  # a scheduled backup's passphrase
            require_encryption=settings.backup_require_encryption,
        )
        worker = Worker(
            engine,
            concurrency=concurrency,
            lease_seconds=lease,
            poll_interval=poll,
            partitions=partitions,
            of=partition_count,
            membership=membership,
            max_per_tenant=max_per_tenant or settings.max_per_tenant,
            reserved_slots=reserved,
        )
        stop = asyncio.Event()
        endpoint = _export_metrics(metrics_addr, worker, stop) if metrics_addr else None

        async def main() -> None:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
            share = "all partitions"
            if membership:
                share = f"a share of {worker.of} partitions (membership)"
            elif partitions is not None:
                share = f"partitions {partition_spec} of {partition_count}"
            started_line = (
                f"worker {worker.owner} on {redact_url(engine.store.url)} "
                f"(concurrency {concurrency}, lease {lease}s, {share})"
            )
            if as_json:  # the banner's parts as fields of its JSON line
                banner = {
                    "event": "start",
                    "version": __version__,
                    "owner": worker.owner,
                    "store": redact_url(engine.store.url),
                    "concurrency": concurrency,
                    "pid": os.getpid(),
                }
                logging.getLogger("wovyr.cli").info(started_line, extra={"fields": banner})
            else:
                say(started_line)
            if endpoint is not None:
                host, port = endpoint.address
                say(f"metrics on http://{_host(host)}:{port}/metrics (and /healthz, /readyz)")
            started = time.monotonic()
            await worker.run(stop, grace_seconds=grace)
            say(f"worker stopped after {time.monotonic() - started:.1f}s; leases released")

        try:
            asyncio.run(main())
        finally:
            if endpoint is not None:
                endpoint.close()


def _stderr(message: str) -> None:
    click.echo(message, err=True)


def _export_metrics(address: str, worker: Worker, stop: asyncio.Event) -> MetricsEndpoint:
    """Count what this worker's store commits and serve it, with gauges read at scrape
    time, on `address`, beside the probes: /readyz is ready while the store answers with
    the schema this code expects and the worker is not stopping. The observer is in place
    before the worker's first claim."""
    engine = worker.engine
    metrics = meter(engine.store)

    def render() -> str:
        running = float(len(worker.runners))
        sampled = [
            *store_gauges(engine.store, engine.clock.now()),
            ("wovyr_worker_executions", "gauge", "Executions this worker drives now.", running),
        ]
        return metrics.render(None, sampled)

    def checks() -> dict[str, str]:
        return {**store_checks(engine.store), "worker": "stopping" if stop.is_set() else "ok"}

    return MetricsEndpoint(address, render, checks).start()


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


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
