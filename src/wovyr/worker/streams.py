"""The stream journal of one execution in a worker: the text its attempts' model calls
stream, written to the store in batches (`wovyr.store.streams`).

Pieces are buffered and written when `every` of them are waiting or `within` seconds after
the first one waited, whichever comes first: one commit per batch, never one per token. One
writer task per execution writes the batches in order. A generation's `close` waits until
everything it sent is written, so its attempt's result (committed after it) always comes
after its text in the stream. An append refused for a moved fence (the lease was lost)
stops the journal: the new owner's attempt writes its own.

A failed write is logged and stops the journal of the execution for this runner: the
stream then ends early for readers (the answer itself is in the events), it never skips.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from wovyr.store.streams import NewChunk, StreamAppend

if TYPE_CHECKING:
    from wovyr.clock import Clock
    from wovyr.store.base import Store

__all__ = ["AttemptStream", "StreamJournal"]

log = logging.getLogger("wovyr.worker")

EVERY = 32  # pieces (about tokens) per batch at most
WITHIN = 0.1  # seconds a piece waits at most before its batch is written


class StreamJournal:
    def __init__(
        self,
        store: Store,
        clock: Clock,
        tenant: str,
        execution_id: str,
        fence: int,
        *,
        every: int = EVERY,
        within: float = WITHIN,
    ) -> None:
        self._store, self._clock = store, clock
        self._tenant, self._id, self._fence = tenant, execution_id, fence
        self.every, self.within = every, within
        self._pending: list[NewChunk] = []
        self._added = 0  # chunks handed to the journal so far
        self._written = 0  # of those, the ones written (or dropped once stopped)
        self._full = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self.stopped = False
        self.batches = 0

    def add(self, chunk: NewChunk) -> None:
        if self.stopped:
            return
        self._pending.append(chunk)
        self._added += 1
        if len(self._pending) >= self.every:
            self._full.set()
        if self._writer is None:
            self._writer = asyncio.create_task(self._write_batches())

    async def flush(self) -> None:
        """Return once every chunk added so far is written (or the journal stopped)."""
        target = self._added
        if self._written >= target:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((target, future))
        self._full.set()  # no need to wait for more
        await asyncio.shield(future)

    async def _write_batches(self) -> None:
        try:
            while self._pending:
                if len(self._pending) < self.every:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._full.wait(), self.within)
                self._full.clear()
                batch, self._pending = self._pending, []
                if not self.stopped:
                    await self._append(batch)
                self._written += len(batch)
                self._wake_waiters()
        except asyncio.CancelledError:  # the runner is going away: nothing more is written
            self.stopped = True
            self._written = self._added
            raise
        finally:
            self._writer = None
            self._wake_waiters()

    async def _append(self, batch: list[NewChunk]) -> None:
        try:
            append = StreamAppend(self._tenant, self._id, self._fence, batch, self._clock.now())
            ok = await asyncio.to_thread(self._store.append_stream, append)
        except Exception:
            log.exception("the stream journal of %s could not be written", self._id)
            ok = False
        self.batches += 1
        if not ok:
            self.stopped = True

    def _wake_waiters(self) -> None:
        keep = []
        for target, future in self._waiters:
            if target <= self._written:
                if not future.done():
                    future.set_result(None)
            else:
                keep.append((target, future))
        self._waiters = keep

    async def close(self) -> None:
        """Write what is pending (the runner ends)."""
        await self.flush()


class AttemptStream:
    """The `StreamSink` of one run of an attempt of `activity` (`recovery`: how many times
    the attempt was re-run after a lost worker)."""

    def __init__(
        self, journal: StreamJournal, activity: str, attempt: int, recovery: int = 0
    ) -> None:
        self._journal = journal
        self._activity, self._attempt, self._recovery = activity, attempt, recovery

    def generation(self, turn: int) -> _Generation:
        marker = NewChunk(self._activity, self._attempt, turn, "attempt", "", self._recovery)
        self._journal.add(marker)
        return _Generation(self._journal, marker)


class _Generation:
    def __init__(self, journal: StreamJournal, marker: NewChunk) -> None:
        self._journal, self._marker = journal, marker

    def text(self, piece: str) -> None:
        if piece:
            m = self._marker
            self._journal.add(NewChunk(m.activity, m.attempt, m.turn, "text", piece, m.recovery))

    async def close(self) -> None:
        await self._journal.flush()
