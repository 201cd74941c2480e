"""The listener thread: wakes the worker on work, survives store failures, stops quickly."""

from __future__ import annotations

import threading
import time

from wovyr.errors import StoreUnavailable
from wovyr.worker.listener import WorkListener


def test_wakes_on_work_retries_failures_and_stops() -> None:
    answers: list[object] = [False, True, StoreUnavailable("down"), True]
    woke = threading.Event()
    calls = []

    def wait(timeout: float) -> bool:
        calls.append(timeout)
        answer = answers.pop(0) if answers else False
        if isinstance(answer, Exception):
            raise answer
        if not answers:
            time.sleep(timeout)
        return bool(answer)

    listener = WorkListener(wait, woke.set, slice_seconds=0.01)
    before = set(threading.enumerate())
    listener.start()
    deadline = time.monotonic() + 5
    while listener.wakeups < 2 and time.monotonic() < deadline:
        time.sleep(0.005)
    listener.stop()
    assert set(threading.enumerate()) <= before, "stop() returned with the thread still running"
    assert woke.is_set() and listener.wakeups == 2 and listener.failures == 1
    assert all(t == 0.01 for t in calls)
