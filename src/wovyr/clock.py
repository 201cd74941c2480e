"""Time, injected: the engine never reads the wall clock itself.

`SystemClock` is the real one. `ManualClock` only moves when a test advances it, and its
`sleep` wakes exactly when the clock passes the deadline, so tests never sleep-and-hope.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import asyncio

__all__ = ["Clock", "ManualClock", "SystemClock", "utc"]


def utc(value: datetime) -> datetime:
    """Return `value` as an aware UTC datetime (naive values are taken as UTC)."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware UTC."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait until `seconds` have passed on this clock."""
        ...


class SystemClock:
    """The machine's clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep(self, seconds: float) -> None:
        import asyncio  # by the first wait: a command that reads never loads it

        await asyncio.sleep(max(0.0, seconds))

    def __repr__(self) -> str:
        return "SystemClock()"


class ManualClock:
    """A clock that moves only when told to; thread-safe."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = utc(start or datetime(2030, 1, 1, tzinfo=UTC))
        self._lock = threading.Lock()
        self._waiters: list[tuple[datetime, asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def set(self, when: datetime) -> None:
        when = utc(when)
        with self._lock:
            if when < self._now:
                raise ValueError("ManualClock cannot go backwards")
            self._now = when
            due = [w for w in self._waiters if w[0] <= when]
            self._waiters = [w for w in self._waiters if w[0] > when]
        for _, loop, fut in due:
            loop.call_soon_threadsafe(_resolve, fut)

    def advance(self, seconds: float = 0.0, **delta: float) -> datetime:
        self.set(self.now() + timedelta(seconds=seconds, **delta))
        return self.now()

    async def sleep(self, seconds: float) -> None:
        import asyncio

        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        with self._lock:
            deadline = self._now + timedelta(seconds=max(0.0, seconds))
            if deadline <= self._now:
                fut.set_result(None)
            else:
                self._waiters.append((deadline, loop, fut))
        try:
            await fut
        finally:
            with self._lock:
                self._waiters = [w for w in self._waiters if w[2] is not fut]

    def __repr__(self) -> str:
        return f"ManualClock({self.now().isoformat()})"


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def monotonic() -> float:
    """Monotonic seconds, for measuring durations at the edges (never for engine logic)."""
    return time.monotonic()
