"""A worker process for the SIGKILL tests: drives every execution in the store to the end.

Usage: python crash_worker.py DB EFFECTS_FILE LEASE_SECONDS
Each `effect` attempt appends "<execution> <step> <attempt>" to EFFECTS_FILE (fsync'd)
before a short pause, so kills land before, inside and after steps.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys

from wovyr.activities.base import ActivityContext, ActivityRegistry
from wovyr.engine.engine import Engine
from wovyr.store.sqlite import SQLiteStore
from wovyr.worker import Worker


def main() -> None:
    db, effects_path, lease = sys.argv[1], sys.argv[2], float(sys.argv[3])
    registry = ActivityRegistry()

    async def effect(step: str, ctx: ActivityContext) -> str:
        fd = os.open(effects_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{ctx.execution_id} {step} {ctx.attempt}\n".encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        await asyncio.sleep(random.uniform(0, 0.02))
        return f"{step}-done"

    registry.register("effect", effect)
    engine = Engine(SQLiteStore(db), activities=registry)

    async def run() -> None:
        while True:
            worker = Worker(engine, lease_seconds=lease, concurrency=16)
            try:
                await worker.run_until_idle()
            finally:
                await worker.close()
            busy = engine.list(status="running", limit=1).items
            if not busy and not engine.list(status="waiting", limit=1).items:
                return  # (a waiting execution waits for a timer: fired on a later round)
            await asyncio.sleep(lease / 4)  # others' leases have yet to expire

    asyncio.run(run())
    engine.close()


if __name__ == "__main__":
    main()
