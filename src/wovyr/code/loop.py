"""The event loop a code workflow's function is replayed on.

A replay must know when the function has done all it can with what the history holds: when
every task waits on a step that has not finished. asyncio's own loops cannot say that (they
wait on I/O and timers), so a replay runs the function on this loop instead, which has no
I/O and no clock: it runs ready callbacks in order until none is left, and that moment is
exact. `asyncio.gather`, `asyncio.create_task`, futures and `async with` locks work as
usual; `asyncio.sleep(n > 0)`, timeouts and I/O are refused, because a replayed function
must not wait on anything but its steps (`ctx.sleep` is the durable timer).

The same design as the event loop Temporal's Python SDK runs workflow code on.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any, NoReturn, TypeVar

from wovyr.errors import WovyrError

__all__ = ["ReplayLoop", "ReplayLoopError"]

_T = TypeVar("_T")


class ReplayLoopError(WovyrError):
    """The function asked the loop for something a replay cannot give (a clock, I/O)."""


class ReplayLoop(asyncio.AbstractEventLoop):
    """Runs callbacks in the order they were scheduled; nothing else."""

    def __init__(self, max_callbacks: int) -> None:
        self._ready: deque[tuple[asyncio.Handle, Callable[..., object], tuple[Any, ...], Any]]
        self._ready = deque()
        self._max = max_callbacks
        self._running = False
        self._closed = False
        self.errors: list[dict[str, Any]] = []
        self._tasks: dict[asyncio.Task[Any], None] = {}  # every task, in creation order

    # --- what a replay uses ---------------------------------------------------------------

    def run_until_quiet(self, coro: Coroutine[Any, Any, _T]) -> asyncio.Task[_T]:
        """Start `coro` as a task and run until no callback is ready: the task is then done
        or waits on something only a later replay can give. ReplayLoopError after
        `max_callbacks` callbacks (a function that never settles)."""
        task: asyncio.Task[_T] | None = None

        def start() -> None:
            nonlocal task
            task = self.create_task(coro)

        self._run(start)
        assert task is not None
        return task

    def resume(self, first: Callable[[], None]) -> None:
        """Call `first` (which resolves what a task waits on), then run until quiet again."""
        self._run(first)

    def abandon(self, task: asyncio.Task[Any]) -> None:
        """Drop what a replay left waiting: its tasks are never resumed (a later replay runs
        the function again from the top). They are cancelled and run until they have
        unwound, as `asyncio.run` ends the tasks it leaves, so their `finally` blocks and
        context managers exit in their own task (anyio's cancel scopes, context variables
        reset); a task that still waits after that is closed."""
        if any(not t.done() for t in self._tasks):
            with contextlib.suppress(ReplayLoopError):
                self._run(self._cancel_all)
        self._ready.clear()
        for t in reversed(self._tasks):  # the last started first
            coro = t.get_coro()
            if isinstance(coro, Coroutine) and not t.done():
                with contextlib.suppress(Exception):  # it ignored its cancellation
                    coro.close()
        self._tasks.clear()
        self._closed = True

    def _cancel_all(self) -> None:
        for t in self._tasks:
            if not t.done():
                t.cancel()

    def _run(self, first: Callable[[], None]) -> None:
        """Call `first`, then run ready callbacks in order until none is left."""
        previous = asyncio._get_running_loop()
        asyncio._set_running_loop(self)
        self._running = True
        try:
            first()
            ran = 0
            while self._ready:
                handle, callback, args, context = self._ready.popleft()
                if handle.cancelled():
                    continue
                ran += 1
                if ran > self._max:
                    raise ReplayLoopError(
                        f"the workflow function did not settle within {self._max} steps of "
                        "its event loop (a loop that awaits nothing but itself?)"
                    )
                context.run(callback, *args)
        finally:
            self._running = False
            asyncio._set_running_loop(previous)

    # --- the loop API asyncio's tasks and futures call ------------------------------------

    def call_soon(  # type: ignore[override]
        self,
        callback: Callable[..., object],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> asyncio.Handle:
        ctx = context if context is not None else contextvars.copy_context()
        handle = asyncio.Handle(callback, args, self, ctx)
        self._ready.append((handle, callback, args, ctx))
        return handle

    def call_soon_threadsafe(  # type: ignore[override]
        self,
        callback: Callable[..., object],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> asyncio.Handle:
        return self.call_soon(callback, *args, context=context)

    def create_future(self) -> asyncio.Future[Any]:
        return asyncio.Future(loop=self)

    def create_task(  # type: ignore[override]
        self,
        coro: Coroutine[Any, Any, _T],
        *,
        name: str | None = None,
        context: contextvars.Context | None = None,
    ) -> asyncio.Task[_T]:
        task = asyncio.Task(coro, loop=self, name=name, context=context)
        self._tasks[task] = None
        return task

    def get_task_factory(self) -> None:
        return None  # tasks are plain asyncio.Tasks (anyio asks before it spawns one)

    def get_debug(self) -> bool:
        return False

    def is_running(self) -> bool:
        return self._running

    def is_closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        self._closed = True

    def time(self) -> float:
        return 0.0

    def call_exception_handler(self, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        self.errors.append({"message": str(context.get("message", "")), "exception": repr(exc)})

    def default_exception_handler(self, context: dict[str, Any]) -> None:
        self.call_exception_handler(context)

    def call_later(  # type: ignore[override]
        self, delay: float, callback: Any, *args: Any, **kwargs: Any
    ) -> NoReturn:
        raise ReplayLoopError(
            "a workflow function cannot wait on the clock (asyncio.sleep, a timeout): "
            "await ctx.sleep(...) for a durable timer"
        )

    def call_at(  # type: ignore[override]
        self, when: float, callback: Any, *args: Any, **kwargs: Any
    ) -> NoReturn:
        self.call_later(0, callback)

    def run_in_executor(self, executor: Any, func: Any, *args: Any) -> NoReturn:  # type: ignore[override]
        raise ReplayLoopError(
            "a workflow function cannot run code in a thread: run it as a step, "
            "await ctx.run(activity, ...)"
        )
