"""An execution's live stream as messages: its events as they commit, and the text its
model calls stream (`wovyr.store.streams`), each message with the position after it.

A position (`StreamCursor`) is a pair: the last event and the last chunk seen. It is the
`id:` of a Server-Sent Event, so a reader that reconnects with `Last-Event-ID` continues
each of the two sequences exactly where it stopped: no gap and no duplicate, whatever the
interleaving of the two it saw before.

Messages (`event:` name, `data:` JSON):

- `event`: `{seq, type, at, data}`, one committed event (as `GET .../history` shows it);
- `attempt`: `{activity, attempt, recovery, turn}`, a model call began streaming. Text of
  that activity (and turn) sent before it belongs to an earlier try, which failed or was cut
  by a crash (`recovery` counts the re-runs of an attempt lost with its worker): a reader
  drops it, or shows it as superseded;
- `token`: `{activity, attempt, recovery, turn, text}`, the next piece of that generation's
  text;
- `end`: `{status}`, the execution is finished and everything was sent.

Readers: the server's shared followers (`wovyr.server.streams`) and `wovyr workflows watch`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from wovyr.engine.core.state import ExecutionStatus
from wovyr.errors import NotFound

if TYPE_CHECKING:
    from wovyr.store.base import EventRecord, Store
    from wovyr.store.streams import StreamChunk

__all__ = ["StreamCursor", "StreamMessage", "StreamPage", "read_stream_page"]

_CURSOR = re.compile(r"^(\d{1,18})\.(\d{1,18})$")


@dataclass(frozen=True)
class StreamCursor:
    """The last event (`seq`) and the last chunk (`n`) a reader has."""

    events: int = 0
    chunks: int = 0

    def __str__(self) -> str:
        return f"{self.events}.{self.chunks}"

    @classmethod
    def parse(cls, text: str) -> StreamCursor:
        """ValueError unless `text` is a position this stream sent (`<seq>.<n>`)."""
        found = _CURSOR.match(text.strip())
        if found is None:
            raise ValueError(f"not a stream position: {text[:40]!r}")
        return cls(int(found.group(1)), int(found.group(2)))

    def covers(self, message: StreamMessage) -> bool:
        """Whether a reader at this position has `message` already."""
        if message.chunk:
            return message.position <= self.chunks
        return message.position <= self.events

    def after(self, message: StreamMessage) -> StreamCursor:
        if message.chunk:
            return StreamCursor(self.events, max(self.chunks, message.position))
        return StreamCursor(max(self.events, message.position), self.chunks)


@dataclass(frozen=True)
class StreamMessage:
    """One message: `kind` is its `event:` name; `position` is the event's seq or the
    chunk's n (`chunk` says which)."""

    kind: str
    data: dict[str, Any]
    position: int
    chunk: bool
    at: datetime


@dataclass(frozen=True)
class StreamPage:
    messages: list[StreamMessage]
    cursor: StreamCursor  # the position after them
    status: str  # the execution's status when the page was read
    complete: bool  # the execution is finished and nothing is left after `cursor`


def event_message(event: EventRecord) -> StreamMessage:
    data = {"seq": event.seq, "type": event.type, "at": event.at.isoformat(), "data": event.data}
    return StreamMessage("event", data, event.seq, False, event.at)


def chunk_message(chunk: StreamChunk) -> StreamMessage:
    data: dict[str, Any] = {
        "activity": chunk.activity,
        "attempt": chunk.attempt,
        "recovery": chunk.recovery,
        "turn": chunk.turn,
    }
    if chunk.kind == "text":
        data["text"] = chunk.text
        return StreamMessage("token", data, chunk.n, True, chunk.at)
    return StreamMessage("attempt", data, chunk.n, True, chunk.at)


def read_stream_page(
    store: Store, tenant: str, execution_id: str, cursor: StreamCursor, limit: int = 500
) -> StreamPage:
    """The messages after `cursor`, at most `limit` events and `limit` chunks, in commit
    order (as near as their times tell); NotFound when `tenant` has no such execution.

    The record is read first: every chunk of a finished execution was committed before its
    final event, so a finished record read before the chunks means none is missed."""
    record = store.load(execution_id, tenant)
    if record is None:
        raise NotFound(f"no execution {execution_id!r}")
    chunks = store.read_stream(tenant, execution_id, cursor.chunks, limit)
    events: list[EventRecord] = []
    if record.seq > cursor.events:
        events = store.history(execution_id, cursor.events, limit, tenant=tenant)
    messages = [event_message(e) for e in events] + [chunk_message(c) for c in chunks]
    # A full page may stop before the other kind's later messages: keep order by time,
    # leaving what is later than the end of a full page for the next read.
    horizon = None
    if len(events) == limit:
        horizon = events[-1].at
    if len(chunks) == limit:
        horizon = chunks[-1].at if horizon is None else min(horizon, chunks[-1].at)
    if horizon is not None:
        messages = [m for m in messages if m.at <= horizon]
    messages.sort(key=lambda m: (m.at, m.chunk is False, m.position))
    after = cursor
    for message in messages:
        after = after.after(message)
    finished = record.status in ExecutionStatus.TERMINAL
    complete = finished and len(chunks) < limit and after.events >= record.seq
    return StreamPage(messages, after, record.status, complete)
