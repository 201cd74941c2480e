"""Helpers for testing workflows: an engine on a `memory://` store and a ManualClock, `drain`.

from wovyr.testing import memory_engine, drain

engine = memory_engine()
engine.start(definition, {"order_id": "A-1"})
drain(engine)                      # run everything runnable now
engine.clock.advance(hours=2)      # move time; due timers fire on the next drain
drain(engine)
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from wovyr.activities.base import ActivityRegistry
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.store import open_store
from wovyr.worker import Worker

__all__ = ["drain", "memory_engine"]


def memory_engine(
    activities: ActivityRegistry | None = None, start: datetime | None = None
) -> Engine:
    """An engine over a fresh `memory://` store (SQLite in a temporary folder, removed when
    the engine is closed) and a ManualClock."""
    clock = ManualClock(start or datetime(2030, 1, 1, tzinfo=UTC))
    return Engine(open_store("memory://"), clock=clock, activities=activities)


def drain(engine: Engine, *, only: list[str] | None = None, lease_seconds: float = 30.0) -> None:
    """Drive every runnable execution (and due timer) until nothing is runnable now."""

    async def main() -> None:
        worker = Worker(engine, lease_seconds=lease_seconds)
        try:
            await worker.run_until_idle(only=only)
        finally:
            await worker.close()

    asyncio.run(main())
