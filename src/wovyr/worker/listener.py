"""Wake an idle worker the moment work arrives: a thread waiting on the store's notifications.

A store that offers `wait_for_work(timeout) -> bool` (PostgreSQL: `LISTEN wovyr_ready`)
blocks in it; this module runs that wait in a daemon thread so the worker's event loop never
blocks, and calls `on_work()` (which pokes the loop thread-safely) whenever it returns True.
The wait is short (`slice_seconds`) so a stop is noticed quickly; the worker keeps its slow
poll as a safety net for notifications lost while the listening connection was down (the
store also answers True right after it reconnected, so the worker looks at once).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from wovyr.store.capabilities import Notifying

__all__ = ["Notifying", "WorkListener"]

log = logging.getLogger("wovyr.worker")


class WorkListener:
    def __init__(
        self,
        wait_for_work: Callable[[float], bool],
        on_work: Callable[[], None],
        *,
        slice_seconds: float = 0.25,
        max_backoff: float = 2.0,
    ) -> None:
        self._wait = wait_for_work
        self._on_work = on_work
        self._slice = slice_seconds
        self._max_backoff = max_backoff
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.wakeups = 0
        self.failures = 0

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="wovyr-listen", daemon=True)
            self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        """Ask the thread to end and wait for it (at most one wait slice, or `timeout`)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self._slice + 1.0 if timeout is None else timeout)

    def _run(self) -> None:
        backoff = 0.05
        while not self._stop.is_set():
            try:
                arrived = self._wait(self._slice)
            except Exception as exc:  # the store is down or closing: wait, then try again
                self.failures += 1
                log.debug("listening for work failed: %s", exc)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, self._max_backoff)
                continue
            backoff = 0.05
            if arrived and not self._stop.is_set():
                self.wakeups += 1
                self._on_work()
