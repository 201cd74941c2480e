"""The server's background work: a supervised Worker, bulk-action batches and housekeeping.

The Worker claims runnable executions (those left running by a crash come back when their
lease expires), drives them, fires due timers and due schedules on every tick, and
heartbeats its leases. Its `concurrency` bounds how many executions it drives at once, so
a start-up on a store full of interrupted work takes them in waves instead of all at once.
If the worker ever stops with an error it is replaced after a pause. On shutdown it stops
claiming, gives in-flight activities `shutdown_grace` seconds, and releases its leases.

Where the Worker runs (`Settings.worker_process`):

- **In a child process** (`wovyr serve` over SQLite or PostgreSQL). Driving executions is
  CPU work on untrusted input: the decider, rendering `${{ }}` expressions (the CEL runtime
  is C++ that holds the GIL and cannot be interrupted), converting large payloads. On the
  server's event loop, or in a thread of its process, one tenant's worst workflow stalls
  every request (measured: a 6,000-activity definition held `/healthz` for over a minute).
  In its own process it cannot: the server's loop only does I/O. The child shares the store
  (both backends take several processes), is told of each change the API makes over a pipe
  (so new work starts at once, without polling), reports how many executions it drives and
  its metrics the same way, and is restarted after a pause if it dies. One process, not a
  pool: the store's leases already split work among any number of `wovyr worker`s.
- **On the server's loop** (the default of `create_app`: tests on a `ManualClock`, a memory
  store, embedding), as before.

Bulk-action batches (`wovyr.engine.bulk`) are worked on by a `BatchRunner` in this process,
one page at a time in a thread (never on the loop), woken by a submission through this
server and otherwise looking every `dispatch_interval` seconds (a batch submitted elsewhere, or
one whose runner died and whose lease expired). Each page renews the batch's lease, so
several servers on one store never work on the same batch at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
from datetime import datetime, timedelta
from typing import Any

from wovyr.engine.bulk import BatchRunner
from wovyr.engine.engine import Engine
from wovyr.engine.retention import PurgeReport, purge_all
from wovyr.platform.audit import write_anchor
from wovyr.platform.metrics import Metrics
from wovyr.platform.secrets import Secrets, audit_anchor_key
from wovyr.server.worker_process import CONFIG_ENV, WorkerConfig, replay
from wovyr.settings import Settings
from wovyr.store import capabilities
from wovyr.withheld import handing_over
from wovyr.worker import Worker
from wovyr.worker.threads import call_from_thread

__all__ = ["Background"]

log = logging.getLogger("wovyr.server")
_RESTART_PAUSE = 1.0
_HOUSEKEEPING_EVERY = 3600.0
_EXIT_MARGIN = 10.0  # seconds a stopping worker process gets beyond the grace period
IDEMPOTENCY_TTL = timedelta(hours=24)


class Background:
    def __init__(self, engine: Engine, settings: Settings, metrics: Metrics | None = None) -> None:
        self.engine = engine
        self.settings = settings
        self.metrics = metrics
        self.worker: Worker | None = None  # the in-process worker (None in process mode)
        self.process: asyncio.subprocess.Process | None = None
        self.restarts = 0
        self._running = 0  # what the worker process last reported
        self._started: datetime | None = None  # when the current worker (or process) started
        self._reported: dict[str, Any] = {}  # what the worker process said of itself
        self._heard: datetime | None = None  # when the worker process last reported
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        secrets = engine.secrets  # a bad root key, or anchors without their key: KmsError
        self._anchor_key = (
            audit_anchor_key(secrets, engine.clock.now(), engine.store)
            if isinstance(secrets, Secrets)
            else None
        )
        self._anchored = 0  # the head seq this server signed last
        self.batches = BatchRunner(engine, lease_seconds=settings.lease_seconds)
        self._batch_wake: asyncio.Event | None = None

    def start(self) -> None:
        supervise = self._supervise_process if self.settings.worker_process else self._supervise
        self._loop = asyncio.get_running_loop()
        self._tasks = [
            asyncio.create_task(supervise(), name="wovyr-worker"),
            asyncio.create_task(self._housekeeping(), name="wovyr-housekeeping"),
            asyncio.create_task(self._anchoring(), name="wovyr-audit-anchors"),
            asyncio.create_task(self._batching(), name="wovyr-batches"),
        ]

    def alive(self) -> bool:
        return bool(self._tasks) and not any(t.done() for t in self._tasks)

    async def stop(self) -> None:
        """Stop claiming, let in-flight work finish within the grace period, release leases."""
        self._stop.set()
        if self._batch_wake is not None:
            self._batch_wake.set()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def status(self) -> dict[str, Any]:
        worker = self.worker
        running = self._running if self.settings.worker_process else 0
        if worker is not None:
            running = len(worker.runners)
        return {"alive": self.alive(), "restarts": self.restarts, "running": running}

    def own_worker(self) -> dict[str, Any] | None:
        """This server's worker as the workers page shows it (a store without a worker
        membership, SQLite, knows of no other): the owner id its leases name, where it runs
        (the server's worker process and its pid, or the server's own process), when it
        started, when it was last heard from, how many executions it drives, how often it
        was restarted. None while none runs."""
        now = self.engine.clock.now()
        if self.settings.worker_process:
            process = self.process
            if process is None or process.returncode is not None:
                return None
            return {
                "owner": self._reported.get("owner"),
                "where": "the server's worker process",
                "pid": self._reported.get("pid", process.pid),
                "started_at": self._started,
                "last_seen": self._heard,
                "running": self._running,
                "restarts": self.restarts,
            }
        worker = self.worker
        if worker is None or not self.alive():
            return None
        return {
            "owner": worker.owner,
            "where": "embedded in the server's process",
            "pid": os.getpid(),
            "started_at": self._started,
            "last_seen": now,  # it runs in this process, which is answering
            "running": len(worker.runners),
            "restarts": self.restarts,
        }

    # --- in this process -------------------------------------------------------------------

    async def _supervise(self) -> None:
        while not self._stop.is_set():
            worker = Worker(
                self.engine,
                concurrency=self.settings.concurrency,
                lease_seconds=self.settings.lease_seconds,
                poll_interval=self.settings.dispatch_interval,
                max_per_tenant=self.settings.max_per_tenant,
                reserved_slots=self.settings.reserved_slots,
            )
            self.worker = worker
            self._started = self.engine.clock.now()
            try:
                await worker.run(self._stop, grace_seconds=self.settings.shutdown_grace)
            except Exception:
                self.restarts += 1
                log.exception("the background worker failed; starting a new one")
                await self._pause(_RESTART_PAUSE)

    # --- in a child process ----------------------------------------------------------------

    def _config(self) -> WorkerConfig:
        s = self.settings
        return WorkerConfig(
            store_url=self.engine.store.url,
            activities=s.activities,
            concurrency=s.concurrency,
            lease_seconds=s.lease_seconds,
            poll_interval=s.dispatch_interval,
            shutdown_grace=s.shutdown_grace,
            default_timeout=s.default_timeout,
            max_payload_bytes=s.max_payload_bytes,
            max_execution_bytes=s.max_execution_bytes,
            max_per_tenant=s.max_per_tenant,
            home=str(s.home),
            min_continue_interval=s.min_continue_interval,
            reserved_slots=s.reserved_slots,
        )

    async def _supervise_process(self) -> None:
        self.engine.add_listener(self._changed)
        try:
            while not self._stop.is_set():
                code = await self._run_process()
                if self._stop.is_set():
                    break
                self.restarts += 1
                log.error("the worker process exited (code %s); starting a new one", code)
                await self._pause(_RESTART_PAUSE)
        finally:
            self.engine.remove_listener(self._changed)

    async def _run_process(self) -> int | None:
        # The config (the store URL may hold a password) and this process's withheld
        # secrets (the root key) go over a pipe: never in argv or the child's environment.
        with handing_over({CONFIG_ENV: self._config().to_json()}) as (env, fd):
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-c",
                "from wovyr.server.worker_process import main; main()",
                env=env,
                pass_fds=(fd,),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                limit=1 << 20,
            )
        self.process = process
        self._started, self._heard, self._reported = self.engine.clock.now(), None, {}
        reading = asyncio.create_task(self._read(process))
        stopping = asyncio.create_task(self._stop.wait())
        try:
            await asyncio.wait({reading, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if self._stop.is_set() and process.returncode is None:
                self._tell(process, {"stop": True})
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(
                        process.wait(), self.settings.shutdown_grace + _EXIT_MARGIN
                    )
            if process.returncode is None:
                process.kill()
            return await process.wait()
        finally:
            self.process = None
            self._running = 0
            stopping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reading

    async def _read(self, process: asyncio.subprocess.Process) -> None:
        """The worker process's reports, until its output ends (it exited)."""
        assert process.stdout is not None
        while line := await process.stdout.readline():
            try:
                message = json.loads(line)
            except ValueError:
                log.warning("unreadable report from the worker process: %r", line[:200])
                continue
            self._heard = self.engine.clock.now()
            if "running" in message:
                self._running = int(message["running"])
            elif "worker" in message:
                self._reported = dict(message["worker"])
            elif self.metrics is not None:
                replay(self.metrics, message)

    def _changed(self, tenant: str, execution_id: str) -> None:
        """An engine listener (called from request threads): pass the change on."""
        call_from_thread(self._loop, self._notify, tenant, execution_id)

    def _notify(self, tenant: str, execution_id: str) -> None:
        process = self.process
        if process is not None and process.returncode is None:
            self._tell(process, {"notify": [tenant, execution_id]})

    @staticmethod
    def _tell(process: asyncio.subprocess.Process, message: dict[str, Any]) -> None:
        stdin = process.stdin
        if stdin is not None and not stdin.is_closing():
            with contextlib.suppress(ConnectionError):
                stdin.write(json.dumps(message).encode() + b"\n")

    # --- bulk actions ----------------------------------------------------------------------

    def wake_batches(self) -> None:
        """A batch was submitted (callable from request threads): work on it now."""
        wake = self._batch_wake
        if wake is not None:
            call_from_thread(self._loop, wake.set)

    async def _batching(self) -> None:
        """One page at a time, for as long as some batch needs work; then wait for a
        submission or the next look. A failed page is retried at the next look."""
        self._batch_wake = asyncio.Event()
        while not self._stop.is_set():
            self._batch_wake.clear()
            try:
                while not self._stop.is_set():
                    if await asyncio.to_thread(self.batches.step) is None:
                        break
            except Exception as exc:  # retried at the next look
                log.warning("working on a bulk-action batch: %s", exc)
            wake = asyncio.ensure_future(self._batch_wake.wait())
            try:
                await asyncio.wait({wake}, timeout=self.settings.dispatch_interval)
            finally:
                wake.cancel()

    # --- housekeeping ----------------------------------------------------------------------

    async def _housekeeping(self) -> None:
        while not self._stop.is_set():
            await asyncio.to_thread(self.housekeep_now)
            await self._pause(_HOUSEKEEPING_EVERY)

    def housekeep_now(self) -> list[PurgeReport]:
        """One housekeeping round: forget old idempotency keys and signed-out sessions, and
        purge every tenant's finished executions older than its retention (bounded batches:
        a backlog is worked off over several rounds), then keep the monthly partitions of
        events (PostgreSQL). A failure is logged and retried at the next round. Returns the
        retention pass's reports."""
        store = self.engine.store
        now = self.engine.clock.now()
        try:
            store.purge_idempotency_keys(now - IDEMPOTENCY_TTL)
            store.purge_revoked_sessions(now)
        except Exception as exc:  # retried at the next round
            log.warning("purging old idempotency keys or signed-out sessions: %s", exc)
        try:
            reports = purge_all(self.engine)
        except Exception as exc:  # retried at the next round
            log.warning("purging executions past their retention: %s", exc)
            reports = []
        self._keep_event_partitions(now)
        for report in reports:
            if report.purged:
                log.info(
                    "retention: purged %d executions of tenant %s%s",
                    report.purged,
                    report.tenant,
                    " (more left for the next round)" if report.more else "",
                )
        return reports

    def _keep_event_partitions(self, now: datetime) -> None:
        """On a store with monthly event partitions (PostgreSQL): the months ahead created,
        past months no execution is left in dropped (after the purge emptied them)."""
        keeper = capabilities(self.engine.store).event_partitions
        if keeper is None:
            return
        try:
            changes = keeper.keep_event_partitions(now)
        except Exception as exc:  # retried at the next round
            log.warning("creating or dropping monthly partitions of events: %s", exc)
            return
        if changes.created or changes.dropped:
            log.info(
                "events partitions: created %s, dropped %s",
                ", ".join(changes.created) or "none",
                ", ".join(changes.dropped) or "none",
            )

    async def _anchoring(self) -> None:
        """Sign the audit chain's head every `audit_anchor_interval` seconds when it moved,
        and once more at shutdown (several servers may each sign: anchors only add proof)."""
        if self._anchor_key is None:
            log.warning(
                "no KMS: audit anchors are not written, so `wovyr admin audit verify` "
                "cannot detect a truncated or rewritten audit chain"
            )
            await self._stop.wait()  # a task that ended would read as a dead background
            return
        while True:
            stopping = self._stop.is_set()
            try:
                await asyncio.to_thread(self.anchor_now)
            except Exception as exc:  # retried at the next round
                log.warning("signing the audit chain's head: %s", exc)
            if stopping:
                return
            await self._pause(self.settings.audit_anchor_interval)

    def anchor_now(self) -> bool:
        """Sign the chain's head if it moved since this server signed last; True if signed."""
        key = self._anchor_key
        store = self.engine.store
        head = store.audit_head()
        if key is None or head is None or head.seq <= self._anchored:
            return False
        anchor = write_anchor(store, key, self.engine.clock.now())
        if anchor is not None:
            self._anchored = anchor.seq
        return anchor is not None

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), timeout=seconds)
