"""The process the I/O-fault tests run under strace: API calls whose disk writes fail.

Usage: python io_child.py STORE_URL WORKDIR STARTS
       (or as the ``io`` workload of the zygote in `crash_child.py`)

Every store call happens on the main thread (`crash_child.single_threaded`), so strace's
per-thread `when=` ranges are the process's. The child writes ``WORKDIR/log``, one line per
outcome:

- ``ok <id>`` / ``err <id> <ErrorClass> <message>``: `Engine.start(id)` returned, or raised;
- ``retry-ok <id>`` / ``retry-err <id> ...``: the second pass, which starts every id that
  failed again (a start with an id is idempotent), in the same process;
- ``drive-err <ErrorClass>``: a worker pass raised;
- ``done <id> <seq>``: the final query saw the execution completed with `seq` events;
- ``crash <ExceptionClass> <message>``: anything that is not a `StoreError` escaped.

The process exits 0 unless something other than a `StoreError` escaped (exit 2).
"""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, datetime
from pathlib import Path

from crash_child import THREE_STEPS, append_line, effect_registry, single_threaded

from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.errors import NotFound, StoreError
from wovyr.store import open_store
from wovyr.worker import Worker

PASSES = 4  # worker passes at the end; each starts an hour later, past any lease left


def io_run(url: str, workdir: Path, count: int) -> int:
    """The workload; 0, or 2 when something other than a `StoreError` escaped."""
    try:
        _io_run(url, workdir, count)
    except Exception as exc:
        append_line(workdir / "log", f"crash {type(exc).__name__} {exc}".replace("\n", " "))
        return 2
    return 0


def _io_run(url: str, workdir: Path, count: int) -> None:
    single_threaded()
    log = workdir / "log"

    def note(line: str) -> None:
        append_line(log, line.replace("\n", " "))

    clock = ManualClock(datetime.now(UTC))
    try:
        store = open_store(url)
        engine = Engine(store, clock=clock, activities=effect_registry(workdir / "effects"))
    except StoreError as exc:
        note(f"open-err {type(exc).__name__} {exc}")
        return
    failed = []
    for i in range(count):
        try:
            engine.start(THREE_STEPS, execution_id=f"e-{i}")
            note(f"ok e-{i}")
        except StoreError as exc:
            note(f"err e-{i} {type(exc).__name__} {exc}")
            failed.append(f"e-{i}")
    for execution_id in failed:
        try:
            engine.start(THREE_STEPS, execution_id=execution_id)
            note(f"retry-ok {execution_id}")
        except StoreError as exc:
            note(f"retry-err {execution_id} {type(exc).__name__} {exc}")
    for _ in range(PASSES):
        clock.advance(hours=1)
        try:
            asyncio.run(_drive(engine))
        except StoreError as exc:
            note(f"drive-err {type(exc).__name__} {exc}")
    for i in range(count):
        try:
            view = engine.query(f"e-{i}")
        except (StoreError, NotFound):  # NotFound: never started (every start failed)
            continue
        if view.status == "completed":
            note(f"done e-{i} {view.event_count}")
    try:
        engine.close()
    except StoreError as exc:
        note(f"close-err {type(exc).__name__} {exc}")


async def _drive(engine: Engine) -> None:
    worker = Worker(engine, lease_seconds=60)
    try:
        await worker.run_until_idle()
    finally:
        await worker.close()


if __name__ == "__main__":
    sys.exit(io_run(sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])))
