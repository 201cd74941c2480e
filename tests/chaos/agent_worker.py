"""A worker process for the agent SIGKILL test: drives every execution in the store to the
end, with the `default` model provider at BASE_URL.

Usage: python agent_worker.py DB EFFECTS_FILE LEASE_SECONDS BASE_URL LIFE
The tool `effect` appends "<idempotency key> <life> <wall time>" to EFFECTS_FILE (fsync'd)
and then pauses a little, so kills land before, inside and after tool calls. The test gives every
worker process its own LIFE and BASE_URL (`.../life-<n>/v1`): it can tell which process
made each model request and each side effect.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
import time

from wovyr.activities.base import ActivityContext, ActivityRegistry
from wovyr.activities.providers import ProviderConfig, Providers
from wovyr.engine.engine import Engine
from wovyr.store.sqlite import SQLiteStore
from wovyr.worker import Worker

KEY = "sk-canary-chaos-5e1f"


def main() -> None:
    db, effects_path, lease, base_url, life = sys.argv[1:6]
    registry = ActivityRegistry()

    async def effect(n: int, ctx: ActivityContext) -> str:
        """Do one thing with side effects."""
        fd = os.open(effects_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{ctx.idempotency_key} {life} {time.time()!r}\n".encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        await asyncio.sleep(random.uniform(0, 0.05))
        return f"did {n}"

    registry.register("effect", effect)
    engine = Engine(
        SQLiteStore(db),
        activities=registry,
        providers=Providers({"default": ProviderConfig("default", base_url, api_key=KEY)}),
    )

    async def run() -> None:
        while True:
            worker = Worker(engine, lease_seconds=float(lease), concurrency=16)
            try:
                await worker.run_until_idle()
            finally:
                await worker.close()
            if not engine.list(status="running", limit=1).items:
                return
            await asyncio.sleep(float(lease) / 4)  # others' leases have yet to expire

    asyncio.run(run())
    engine.close()


if __name__ == "__main__":
    main()
