"""The server's background work: a supervised Worker and housekeeping.

The Worker claims runnable executions (those left running by a crash come back when their
lease expires), drives them, fires due timers and due schedules on every tick, and
heartbeats its leases. Its `concurrency` bounds how many executions it drives at once, so
a start-up on a store full of interrupted work takes them in waves instead of all at once.
If the worker ever stops with an error it is replaced after a pause. On shutdown it stops
claiming, gives in-flight activities `shutdown_grace` seconds, and releases its leases.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import timedelta
from typing import Any

from wovyr.engine.engine import Engine
from wovyr.settings import Settings
from wovyr.worker import Worker

__all__ = ["Background"]

log = logging.getLogger("wovyr.server")
_RESTART_PAUSE = 1.0
_HOUSEKEEPING_EVERY = 3600.0
IDEMPOTENCY_TTL = timedelta(hours=24)


class Background:
    def __init__(self, engine: Engine, settings: Settings) -> None:
        self.engine = engine
        self.settings = settings
        self.worker: Worker | None = None
        self.restarts = 0
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._supervise(), name="wovyr-worker"),
            asyncio.create_task(self._housekeeping(), name="wovyr-housekeeping"),
        ]

    def alive(self) -> bool:
        return bool(self._tasks) and not any(t.done() for t in self._tasks)

    async def stop(self) -> None:
        """Stop claiming, let in-flight work finish within the grace period, release leases."""
        self._stop.set()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def status(self) -> dict[str, Any]:
        worker = self.worker
        return {
            "alive": self.alive(),
            "restarts": self.restarts,
            "running": len(worker.runners) if worker is not None else 0,
        }

    async def _supervise(self) -> None:
        while not self._stop.is_set():
            worker = Worker(
                self.engine,
                concurrency=self.settings.concurrency,
                lease_seconds=self.settings.lease_seconds,
                poll_interval=self.settings.dispatch_interval,
            )
            self.worker = worker
            try:
                await worker.run(self._stop, grace_seconds=self.settings.shutdown_grace)
            except Exception:
                self.restarts += 1
                log.exception("the background worker failed; starting a new one")
                await self._pause(_RESTART_PAUSE)

    async def _housekeeping(self) -> None:
        store = self.engine.store
        while not self._stop.is_set():
            now = self.engine.clock.now()
            try:
                await asyncio.to_thread(store.purge_idempotency_keys, now - IDEMPOTENCY_TTL)
                await asyncio.to_thread(store.purge_revoked_sessions, now)
            except Exception as exc:  # retried at the next round
                log.warning("purging old idempotency keys or signed-out sessions: %s", exc)
            await self._pause(_HOUSEKEEPING_EVERY)

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), timeout=seconds)
