"""Waking an event loop from another thread (an engine listener, a request thread)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

__all__ = ["call_from_thread"]


def call_from_thread(
    loop: asyncio.AbstractEventLoop | None, callback: Callable[..., object], *args: Any
) -> None:
    """Have `loop` call `callback(*args)` soon, from any thread; nothing when there is no
    loop yet or it has closed (nobody listens any more)."""
    if loop is not None and not loop.is_closed():
        with contextlib.suppress(RuntimeError):  # it closed in between
            loop.call_soon_threadsafe(callback, *args)
