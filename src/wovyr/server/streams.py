"""Live streams over Server-Sent Events: one shared follower per execution, many readers.

A `Follower` is the only thing that reads an execution's stream from the store while it is
watched: one task that reads a page (`wovyr.engine.streams.read_stream_page`), keeps the
messages in a bounded buffer (each rendered once, off the event loop), and wakes every
reader; it polls only when a page came back empty, after `interval` seconds growing to
`IDLE_MAX` while nothing comes, and stops when its execution is
finished and read to the end or its last reader leaves. A reader serves itself from the
buffer from its own position; one whose position is older than the buffer (it reconnected
with an old `Last-Event-ID`, or fell behind a full buffer) reads pages of its own from the
store until it reaches the buffer: a catch-up, never a poll.

The `id:` of each message is the reader's position after it (`StreamCursor`), so positions
are exact whatever order the reader saw the two sequences in.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from wovyr.engine.streams import StreamCursor, StreamMessage, StreamPage, read_stream_page

if TYPE_CHECKING:
    from wovyr.store.base import Store

__all__ = ["EventStream", "Follower", "StreamHub"]

log = logging.getLogger("wovyr.server")

INTERVAL = 0.1  # seconds between reads of a watched execution that had nothing new...
IDLE_MAX = 1.0  # ... growing to this while nothing comes
CAPACITY = 4096  # messages a follower keeps for its readers (up to twice as many)
PAGE = 500
KEEPALIVE = 15.0  # seconds of silence before a comment line keeps proxies from timing out


def render(message: StreamMessage) -> bytes:
    data = json.dumps(message.data, ensure_ascii=False, separators=(",", ":"), default=str)
    return f"event: {message.kind}\ndata: {data}\n".encode()


def _read(
    store: Store, tenant: str, execution_id: str, cursor: StreamCursor
) -> tuple[StreamPage, list[bytes]]:
    """A page and its messages rendered (in a worker thread: an event may be large, and the
    event loop that serves HTTP only does I/O)."""
    page = read_stream_page(store, tenant, execution_id, cursor, PAGE)
    return page, [render(m) for m in page.messages]


def _frame(body: bytes, cursor: StreamCursor) -> bytes:
    return b"id: " + str(cursor).encode() + b"\n" + body + b"\n"


def _end(status: str, cursor: StreamCursor) -> bytes:
    data = json.dumps({"status": status})
    return f"id: {cursor}\nevent: end\ndata: {data}\n\n".encode()


@dataclass
class _Entry:
    message: StreamMessage
    body: bytes  # rendered once for every reader


@dataclass
class Follower:
    store: Store
    tenant: str
    execution_id: str
    head: StreamCursor  # the position after the last message read
    interval: float = INTERVAL
    capacity: int = CAPACITY
    base: StreamCursor = field(init=False)  # the position before the buffer's first entry
    entries: list[_Entry] = field(default_factory=list)
    first: int = 0  # the index of entries[0] among all the messages this follower read
    complete: bool = False
    status: str = "running"
    failed: BaseException | None = None
    readers: int = 0
    reads: int = 0  # pages read from the store (for tests and benchmarks)
    _changed: asyncio.Event = field(default_factory=asyncio.Event)
    _task: asyncio.Task[None] | None = None

    def __post_init__(self) -> None:
        self.base = self.head

    @property
    def next(self) -> int:
        return self.first + len(self.entries)

    def holds(self, cursor: StreamCursor) -> bool:
        """Whether everything after `cursor` is in the buffer or yet to come."""
        return cursor.events >= self.base.events and cursor.chunks >= self.base.chunks

    def start(self) -> None:
        if self._task is None and not self.complete:
            self._task = asyncio.create_task(self._follow())

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

    async def changed(self, timeout: float) -> None:
        """Until the follower read something new (or `timeout` seconds passed)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout)

    def _wake(self) -> None:
        event, self._changed = self._changed, asyncio.Event()
        event.set()

    async def _follow(self) -> None:
        idle = self.interval
        try:
            while True:
                page, bodies = await asyncio.to_thread(
                    _read, self.store, self.tenant, self.execution_id, self.head
                )
                self.reads += 1
                self.entries += [_Entry(m, b) for m, b in zip(page.messages, bodies, strict=True)]
                if len(self.entries) > 2 * self.capacity:  # keep the newest `capacity`
                    dropped = len(self.entries) - self.capacity
                    for entry in self.entries[:dropped]:
                        self.base = self.base.after(entry.message)
                    del self.entries[:dropped]
                    self.first += dropped
                self.head, self.status = page.cursor, page.status
                if page.complete:
                    self.complete = True
                if page.messages or page.complete:
                    self._wake()
                if page.complete:
                    return
                if page.messages:
                    idle = self.interval
                else:  # nothing new: read again soon, less often the longer nothing comes
                    await asyncio.sleep(idle)
                    idle = min(idle * 1.5, IDLE_MAX)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # the store failed: readers end their streams
            log.exception("following the stream of %s failed", self.execution_id)
            self.failed = exc
            self._wake()


class EventStream(StreamingResponse):
    """A `text/event-stream` response that stops its generator as soon as the client goes
    away (a reader that left must not hold its follower: the server would otherwise learn of
    it only from a failed write, which some servers never report)."""

    media_type = "text/event-stream"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async with anyio.create_task_group() as group:

            async def stream() -> None:
                await self.stream_response(send)
                group.cancel_scope.cancel()

            group.start_soon(stream)
            await self.listen_for_disconnect(receive)
            group.cancel_scope.cancel()


class StreamHub:
    """The followers of the executions being watched, by (tenant, id)."""

    def __init__(self, *, interval: float = INTERVAL, capacity: int = CAPACITY) -> None:
        self.interval, self.capacity = interval, capacity
        self.followers: dict[tuple[str, str], Follower] = {}

    def join(self, store: Store, tenant: str, execution_id: str, at: StreamCursor) -> Follower:
        key = (tenant, execution_id)
        follower = self.followers.get(key)
        if follower is None:
            follower = Follower(store, tenant, execution_id, at, self.interval, self.capacity)
            self.followers[key] = follower
        follower.readers += 1
        follower.start()
        return follower

    async def leave(self, follower: Follower) -> None:
        follower.readers -= 1
        if follower.readers <= 0:
            key = (follower.tenant, follower.execution_id)
            if self.followers.get(key) is follower:
                del self.followers[key]
            await follower.stop()

    async def messages(
        self, store: Store, tenant: str, execution_id: str, cursor: StreamCursor
    ) -> AsyncIterator[bytes]:
        """The SSE frames of one reader from `cursor` on, until the execution's `end`."""
        follower = self.join(store, tenant, execution_id, cursor)
        try:
            index: int | None = None  # the next buffer entry to look at, when in the buffer
            while True:
                if follower.failed is not None:
                    return
                if not follower.holds(cursor) or (index is not None and index < follower.first):
                    index = None
                    page, bodies = await asyncio.to_thread(
                        _read, store, tenant, execution_id, cursor
                    )
                    frames = []
                    for message, body in zip(page.messages, bodies, strict=True):
                        cursor = cursor.after(message)
                        frames.append(_frame(body, cursor))
                    if page.complete:
                        frames.append(_end(page.status, cursor))
                    if frames:  # one write for the page, not one per message
                        yield b"".join(frames)
                    if page.complete:
                        return
                    if page.messages:
                        continue
                if index is None:
                    index = follower.first
                frames = []
                start = max(index, follower.first)
                for entry in follower.entries[start - follower.first :]:
                    if not cursor.covers(entry.message):
                        cursor = cursor.after(entry.message)
                        frames.append(_frame(entry.body, cursor))
                index = follower.next
                done = follower.complete
                if done:
                    frames.append(_end(follower.status, cursor))
                if frames:  # what came since the last write, in one write
                    yield b"".join(frames)
                if done:
                    return
                if not frames:
                    await follower.changed(KEEPALIVE)
                    if index >= follower.next and not follower.complete:
                        yield b": keep-alive\n\n"
        finally:
            await self.leave(follower)
