"""The worker: claim -> drive -> commit, with a timer dispatcher and lease heartbeats.

A worker owns executions through leases (owner, lease_until, fence). Its heartbeat renews
all its leases in one statement and learns from the same answer whether an execution's
sequence moved (a signal or cancel from elsewhere: wake that runner) or its fence changed
(the lease was taken over: that runner stops and commits nothing).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from wovyr.definition.model import Workflow
from wovyr.engine.commit import GroupCommitter
from wovyr.engine.engine import Engine, ExecutionView
from wovyr.engine.runner import ExecutionRunner
from wovyr.engine.state import state_from_json
from wovyr.scheduling.schedules import Schedules
from wovyr.store.base import ExecutionRecord

__all__ = ["Worker", "run_workflow"]


def _default_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{os.urandom(3).hex()}"


class Worker:
    def __init__(
        self,
        engine: Engine,
        *,
        owner: str | None = None,
        concurrency: int = 64,
        lease_seconds: float = 30.0,
        poll_interval: float = 1.0,
        timer_batch: int = 500,
    ) -> None:
        self.engine = engine
        self.owner = owner or _default_owner()
        self.concurrency = concurrency
        self.lease_seconds = lease_seconds
        self.poll_interval = poll_interval
        self.timer_batch = timer_batch
        self.committer = GroupCommitter(engine.store, solo=lambda: len(self.runners) <= 1)
        self.schedules = Schedules(engine) if hasattr(engine.store, "due_schedules") else None
        self.runners: dict[str, ExecutionRunner] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._poke: asyncio.Event | None = None
        self._stopping = False

    # --- wiring --------------------------------------------------------------------------

    def _attach(self) -> None:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
            self._poke = asyncio.Event()
            self.engine.add_listener(self._on_change)

    def _on_change(self, execution_id: str) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._changed, execution_id)

    def _changed(self, execution_id: str) -> None:
        runner = self.runners.get(execution_id)
        if runner is not None:
            runner.wake()
        elif self._poke is not None:
            self._poke.set()

    async def close(self) -> None:
        await self.shutdown(grace_seconds=0)

    # --- starting and driving ------------------------------------------------------------

    async def start(
        self,
        definition: Workflow | str | Path,
        input: Mapping[str, Any] | None = None,
        *,
        execution_id: str | None = None,
    ) -> ExecutionRecord:
        """Start an execution leased to this worker and begin driving it (one commit)."""
        self._attach()
        start = functools.partial(
            self.engine.start,
            definition,
            input,
            execution_id=execution_id,
            lease_owner=self.owner,
            lease_seconds=self.lease_seconds,
        )
        # Alone, a thread hop costs more than it saves; busy, keep the loop responsive.
        record = start() if not self.runners else await asyncio.to_thread(start)
        if record.lease_owner == self.owner and record.id not in self.runners:
            self._spawn(
                record.id, record.fence, record.checkpoint or {}, record.definition_hash, adopt=True
            )
        return record

    def _spawn(
        self,
        execution_id: str,
        fence: int,
        checkpoint: dict[str, Any],
        digest: str,
        *,
        tenant: str | None = None,
        adopt: bool = False,
    ) -> None:
        runner = ExecutionRunner(
            self.engine,
            self.committer,
            execution_id,
            fence,
            state_from_json(checkpoint),
            self.engine.definition(digest, tenant),
            adopt_running=adopt,
        )
        self.runners[execution_id] = runner
        task = asyncio.create_task(runner.drive(), name=f"wovyr-run-{execution_id}")
        self._tasks[execution_id] = task

        def done(_: asyncio.Task[None]) -> None:
            self.runners.pop(execution_id, None)
            self._tasks.pop(execution_id, None)
            if self._poke is not None:
                self._poke.set()

        task.add_done_callback(done)

    async def tick(self, only: list[str] | None = None) -> int:
        """Fire due timers and schedules, then claim what is runnable (up to capacity)."""
        self._attach()
        fired = await asyncio.to_thread(self.engine.fire_due_timers, self.timer_batch)
        if self.schedules is not None and only is None:
            fired += await asyncio.to_thread(self.schedules.dispatch_due)
        capacity = self.concurrency - len(self.runners)
        claimed = 0
        if capacity > 0 and not self._stopping:
            claims = await self.committer.run_sync(
                self.engine.store.claim,
                self.owner,
                self.engine.clock.now(),
                self.lease_seconds,
                capacity,
                only,
            )
            for claim in claims:
                if claim.execution_id in self.runners:
                    continue  # we already drive it (a claim after our own release)
                self._spawn(
                    claim.execution_id,
                    claim.fence,
                    claim.checkpoint,
                    claim.definition_hash,
                    tenant=claim.tenant,
                )
                claimed += 1
        return fired + claimed

    async def run_until_idle(self, only: list[str] | None = None) -> None:
        """Drive until nothing is runnable now: no due timer, no claimable execution."""
        self._attach()
        while True:
            did = await self.tick(only)
            if self._tasks:
                await asyncio.wait(list(self._tasks.values()), return_when=asyncio.FIRST_COMPLETED)
                continue
            if not did:
                return

    async def run(self, stop: asyncio.Event | None = None, *, grace_seconds: float = 10.0) -> None:
        """Work until `stop` is set: claim, drive, fire timers, heartbeat; then shut down."""
        self._attach()
        stop = stop or asyncio.Event()
        heartbeat = asyncio.create_task(self._heartbeat_loop())
        try:
            while not stop.is_set():
                did = await self.tick()
                if not did:
                    await self._idle(stop)
        finally:
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat
            await self.shutdown(grace_seconds)

    async def _idle(self, stop: asyncio.Event) -> None:
        assert self._poke is not None
        self._poke.clear()
        waiters = [
            asyncio.create_task(self._poke.wait()),
            asyncio.create_task(stop.wait()),
            asyncio.create_task(self.engine.clock.sleep(self.poll_interval)),
        ]
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waiters:
                w.cancel()

    async def heartbeat(self) -> None:
        """Renew every lease we hold; wake runners whose execution moved, stop lost ones."""
        leases = await self.committer.run_sync(
            self.engine.store.renew_leases, self.owner, self.engine.clock.now(), self.lease_seconds
        )
        for execution_id, runner in list(self.runners.items()):
            lease = leases.get(execution_id)
            if lease is None or lease.fence != runner.fence:
                runner.lease_lost()
            elif lease.seq != runner.seq:
                runner.wake()

    async def _heartbeat_loop(self) -> None:
        while True:
            await self.engine.clock.sleep(self.lease_seconds / 3)
            with contextlib.suppress(Exception):  # a failed renewal is retried next beat
                await self.heartbeat()

    async def shutdown(self, grace_seconds: float = 10.0) -> None:
        """Stop claiming, let in-flight work finish for `grace_seconds`, release leases."""
        self._stopping = True
        if self._tasks and grace_seconds > 0:
            await asyncio.wait(list(self._tasks.values()), timeout=grace_seconds)
        for task in list(self._tasks.values()):
            task.cancel()
        for task in list(self._tasks.values()):
            with contextlib.suppress(BaseException):
                await task
        with contextlib.suppress(Exception):
            await self.committer.run_sync(self.engine.store.release_owner, self.owner)
        self.engine.remove_listener(self._on_change)
        self.committer.close()


def run_workflow(
    engine: Engine,
    definition: Workflow | str | Path,
    input: Mapping[str, Any] | None = None,
    *,
    execution_id: str | None = None,
) -> ExecutionView:
    """Start (or resume) an execution and drive it in this process until it completes,
    fails or waits (for a signal, an approval or a future timer)."""

    async def main() -> str:
        worker = Worker(engine)
        try:
            record = await worker.start(definition, input, execution_id=execution_id)
            await worker.run_until_idle(only=[record.id])
            return record.id
        finally:
            await worker.close()

    return engine.query(asyncio.run(main()))
