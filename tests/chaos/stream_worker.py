"""A worker process for the stream SIGKILL test: drives every execution in the store to the
end, with the `default` model provider at BASE_URL (its tenants trusted to reach it).

Usage: python stream_worker.py DB LEASE_SECONDS BASE_URL
"""

from __future__ import annotations

import asyncio
import sys

from wovyr.activities.base import ActivityRegistry
from wovyr.activities.policy import TRUSTED
from wovyr.activities.providers import ProviderConfig, Providers
from wovyr.engine.engine import Engine
from wovyr.store.records import ExecutionFilter
from wovyr.store.sqlite import SQLiteStore
from wovyr.worker import Worker


def main() -> None:
    db, lease, base_url = sys.argv[1:4]
    engine = Engine(
        SQLiteStore(db),
        activities=ActivityRegistry(),
        providers=Providers({"default": ProviderConfig("default", base_url)}),
        side_effects=TRUSTED,
    )

    async def run() -> None:
        while True:
            worker = Worker(engine, lease_seconds=float(lease), concurrency=4)
            try:
                await worker.run_until_idle()
            finally:
                await worker.close()
            # any tenant's (the test's run is tenant acme's): until the killed worker's lease
            # expires, nothing is claimable yet, but the run is still to be finished here
            running = ExecutionFilter(tenant=None, status="running", limit=1)
            if not engine.store.list_executions(running).items:
                return
            await asyncio.sleep(float(lease) / 4)  # others' leases have yet to expire

    asyncio.run(run())
    engine.close()


if __name__ == "__main__":
    main()
