"""The server's worker process: `python -m wovyr.server.worker_process`.

`wovyr serve` drives executions here, not on the event loop that serves HTTP (see
`wovyr.server.background`). The process (configured by the JSON in
`WOVYR_WORKER_PROCESS_CONFIG`, handed over with the server's secrets through a pipe:
`wovyr.withheld`) opens the same store, runs one `Worker` and talks to its server over its
standard streams, one JSON object per line:

- stdin, from the server: `{"notify": [tenant, id]}` when the API changed an execution
  (start, signal, approve, cancel: the worker picks it up at once, without polling), and
  `{"stop": true}` to stop claiming, give in-flight work the grace period and exit. End of
  input without it means the server died (SIGKILL, a crash): the worker exits at once,
  exactly as if it had run inside the server, and its leases expire for the next one.
- stdout, to the server: `{"worker": {"owner": ..., "pid": ...}}` once at start (the lease
  owner id it claims under: the server's workers page shows it), `{"running": n}` when the
  number of executions it drives changes and at least every few seconds (its heartbeat),
  and `{"inc": [...]}` / `{"observe": [...]}` for each metric the store observer records,
  which the server replays into its own registry so `/metrics` shows the worker's series.

SIGINT is ignored (Ctrl-C reaches the whole process group; the server decides when its
worker stops); SIGTERM stops it like `{"stop": true}`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import logging.config
import os
import signal
import sys
import threading
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, TextIO

from wovyr import assemble
from wovyr.activities.logs import log_config, route_output
from wovyr.engine.core.bounds import MAX_EXECUTION_BYTES
from wovyr.engine.engine import Engine
from wovyr.errors import ConfigError
from wovyr.platform.backup import register_backup_activity
from wovyr.platform.metrics import Metrics, MetricsObserver
from wovyr.server.memtrace import install as install_memtrace
from wovyr.settings import load_settings, read
from wovyr.withheld import environ, withhold
from wovyr.worker import Worker

__all__ = ["CONFIG_ENV", "HEARTBEAT_EVERY", "WorkerConfig", "main", "replay"]

log = logging.getLogger("wovyr.server")
#: The name the JSON `WorkerConfig` is handed over under (`wovyr.withheld`): not argv, where
#: any user reads it, nor the environment, where the process's user does (the store URL may
#: hold a password).
CONFIG_ENV = "WOVYR_WORKER_PROCESS_CONFIG"
_STATUS_EVERY = 0.25  # seconds between checks of how many executions the worker drives
HEARTBEAT_EVERY = 5.0  # seconds between reports when the count did not change


@dataclass(frozen=True)
class WorkerConfig:
    """What the worker process needs of the server's settings."""

    store_url: str
    activities: tuple[str, ...]
    concurrency: int
    lease_seconds: float
    poll_interval: float
    shutdown_grace: float
    default_timeout: float
    max_payload_bytes: int
    max_per_tenant: int | None = None
    max_execution_bytes: int = MAX_EXECUTION_BYTES
    home: str = ""  # WOVYR_HOME: where a development KMS key lives
    min_continue_interval: float = 1.0
    reserved_slots: int | None = None  # None: the worker's default

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> WorkerConfig:
        data = json.loads(text)
        data["activities"] = tuple(data["activities"])
        return cls(**data)


class _ForwardingMetrics(Metrics):
    """A registry that sends every count to the server instead of keeping it."""

    def __init__(self, out: TextIO) -> None:
        super().__init__()
        self._out = out

    def inc(self, name: str, tenant: str = "", value: float = 1.0, **labels: str) -> None:
        _send(self._out, {"inc": [name, tenant, value, labels]})

    def observe(self, name: str, seconds: float, tenant: str = "", **labels: str) -> None:
        _send(self._out, {"observe": [name, tenant, seconds, labels]})


_SENDING = threading.Lock()  # commits (and so metrics) come from the committer's thread too


def _send(out: TextIO, message: dict[str, Any]) -> None:
    line = json.dumps(message, separators=(",", ":")) + "\n"
    with _SENDING:
        out.write(line)
        out.flush()


def replay(metrics: Metrics, message: dict[str, Any]) -> bool:
    """Apply one metric line of the worker process to `metrics`; False if it is none."""
    if "inc" in message:
        name, tenant, value, labels = message["inc"]
        metrics.inc(name, tenant, value, **labels)
        return True
    if "observe" in message:
        name, tenant, seconds, labels = message["observe"]
        metrics.observe(name, seconds, tenant, **labels)
        return True
    return False


async def _serve(config: WorkerConfig, engine: Engine, out: TextIO) -> None:
    worker = Worker(
        engine,
        concurrency=config.concurrency,
        lease_seconds=config.lease_seconds,
        poll_interval=config.poll_interval,
        max_per_tenant=config.max_per_tenant,
        reserved_slots=config.reserved_slots,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    reader = asyncio.StreamReader(limit=1 << 20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

    async def commands() -> None:
        while not stop.is_set():
            line = await reader.readline()
            if not line:  # the server died without stopping us: die with it, as one process
                os._exit(1)
            message = json.loads(line)
            if message.get("stop"):
                break
            tenant, execution_id = message["notify"]
            engine.notify(execution_id, tenant)
        stop.set()

    async def status() -> None:
        _send(out, {"worker": {"owner": worker.owner, "pid": os.getpid()}})
        shown, sent = -1, loop.time()
        while not stop.is_set():
            running = len(worker.runners)
            if running != shown or loop.time() - sent >= HEARTBEAT_EVERY:
                _send(out, {"running": running})
                shown, sent = running, loop.time()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), _STATUS_EVERY)

    helpers = [asyncio.create_task(commands()), asyncio.create_task(status())]
    try:
        await worker.run(stop, grace_seconds=config.shutdown_grace)
    finally:
        stop.set()
        for task in helpers:
            task.cancel()
        await asyncio.gather(*helpers, return_exceptions=True)


def main() -> int:
    withhold()  # what the server handed over: its secrets, and this process's config
    given = read(CONFIG_ENV)
    if given is None:
        raise ConfigError(f"{CONFIG_ENV} is not set: `wovyr serve` starts this process")
    config = WorkerConfig.from_json(given)
    install_memtrace("worker")  # opt-in debugging aid; nothing when unset
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # WOVYR_LOG_FORMAT=json (inherited from the server): JSON lines with the ids of the
    # execution, activity and attempt each concerns
    logging.config.dictConfig(log_config(load_settings().log_format == "json"))
    # The protocol owns stdout: anything else printed there would break it.
    out, sys.stdout = sys.stdout, sys.stderr
    route_output()  # what an attempt prints goes to its own log, never to the server's
    # The model providers (and their keys) come from this process's own environment,
    # inherited from the server: they never travel in the config.
    settings = replace(
        load_settings(),  # this process's own environment (the server's, inherited)
        database_url=config.store_url,
        home=Path(config.home),
        activities=config.activities,
        default_timeout=config.default_timeout,
        max_payload_bytes=config.max_payload_bytes,
        max_execution_bytes=config.max_execution_bytes,
        min_continue_interval=config.min_continue_interval,
    )
    # the server warned about the key; sealing tenants' payloads are sealed with it
    runtime, secrets = assemble.open_runtime(settings)
    # attempts continue the traces the server's starts began
    with Engine.over(runtime) as engine:
        store = engine.store
        register_backup_activity(
            engine.activities,
            store,
            Path(config.home),
            lambda: secrets.kms,
            engine.clock.now,
            env=environ(),  # a scheduled backup's passphrase, never in the config
            require_encryption=settings.backup_require_encryption,
        )
        metrics = _ForwardingMetrics(out)
        store.add_observer(MetricsObserver(metrics, lambda t, i: store.load(i, t)))
        asyncio.run(_serve(config, engine, out))
    return 0


if __name__ == "__main__":  # pragma: no cover - run as a process by the server
    sys.exit(main())
