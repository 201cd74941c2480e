"""Group commit: steps from many executions that are ready at once share one transaction.

Coroutines `await committer.commit(step)`; while one transaction is in flight the next
steps queue up and go together in the following one (one fsync for many steps). A step
that starts gated attempts carries its flow gate, taken in that same transaction
(`commit_gated`); the gates asked on their own (`acquire`: units taken again when a call
could not follow its grant closely) are grouped the same way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from wovyr.store.base import CommitOutcome, StepWrite, Store
from wovyr.store.flow import FlowAcquire, FlowAnswer, GatedOutcome

__all__ = ["GroupCommitter"]

T = TypeVar("T")
Q = TypeVar("Q")
R = TypeVar("R")


class GroupCommitter:
    def __init__(
        self, store: Store, *, max_batch: int = 256, solo: Callable[[], bool] = lambda: False
    ) -> None:
        self._store = store
        self._solo = solo
        self._max_batch = max_batch
        self._queue: list[tuple[StepWrite, asyncio.Future[GatedOutcome]]] = []
        self._flusher: asyncio.Task[None] | None = None
        self._asks: list[tuple[FlowAcquire, asyncio.Future[FlowAnswer]]] = []
        self._asker: asyncio.Task[None] | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="wovyr-commit")
        self.batches = 0
        self.steps = 0

    async def commit(self, step: StepWrite) -> CommitOutcome:
        outcome = await self.commit_gated(step)
        return CommitOutcome.HELD if isinstance(outcome, FlowAnswer) else outcome

    async def commit_gated(self, step: StepWrite) -> GatedOutcome:
        """Commit `step` with the steps of other runners made meanwhile; a step carrying a
        flow gate (`StepWrite.gate`) may answer the gate's refusal instead of an outcome."""
        if self._solo() and not self._queue and (self._flusher is None or self._flusher.done()):
            # Alone, a thread hop costs more than it saves: nobody could share the fsync.
            return self._write([step])[0]
        loop = asyncio.get_running_loop()
        future: asyncio.Future[GatedOutcome] = loop.create_future()
        self._queue.append((step, future))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush())
        return await future

    def _write(self, steps: list[StepWrite]) -> Sequence[GatedOutcome]:
        if any(step.gate is not None for step in steps):
            return self._store.commit_gated(steps)
        return self._store.commit(steps)

    async def _flush(self) -> None:
        while self._queue:
            batch, self._queue = self._queue[: self._max_batch], self._queue[self._max_batch :]
            if await self._answer(self._write, batch):
                self.batches += 1
                self.steps += len(batch)

    async def acquire(self, ask: FlowAcquire) -> FlowAnswer:
        """`Store.acquire_flows` for `ask`, with the asks of other runners made meanwhile."""
        future: asyncio.Future[FlowAnswer] = asyncio.get_running_loop().create_future()
        self._asks.append((ask, future))
        if self._asker is None or self._asker.done():
            self._asker = asyncio.create_task(self._flush_asks())
        return await future

    async def _flush_asks(self) -> None:
        while self._asks:
            batch, self._asks = self._asks[: self._max_batch], self._asks[self._max_batch :]
            await self._answer(self._store.acquire_flows, batch)

    async def _answer(
        self,
        call: Callable[[list[Q]], Sequence[R]],
        batch: Sequence[tuple[Q, asyncio.Future[R]]],
    ) -> bool:
        """Make `call` with the requests of `batch` on the commit thread and answer each
        waiter still waiting with its result; False when the store failed (every waiter
        learns it)."""
        loop = asyncio.get_running_loop()
        try:
            results = await loop.run_in_executor(self._executor, call, [q for q, _ in batch])
        except Exception as exc:
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return False
        for (_, future), result in zip(batch, results, strict=True):
            if not future.done():
                future.set_result(result)
        return True

    async def run_sync(self, fn: Callable[..., T], *args: Any) -> T:
        """Run another store call on the commit thread (keeps one writer per process)."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    def close(self) -> None:
        self._executor.shutdown(wait=True)
