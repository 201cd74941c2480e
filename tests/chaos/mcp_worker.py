"""A worker process for the MCP SIGKILL test: drives every execution in the store to the
end, with the `default` model provider at BASE_URL (the tenant's MCP servers are in the
store).

Usage: python mcp_worker.py DB LEASE_SECONDS BASE_URL
"""

from __future__ import annotations

import asyncio
import sys

from wovyr.activities.base import ActivityRegistry
from wovyr.activities.providers import ProviderConfig, Providers
from wovyr.engine.engine import Engine
from wovyr.store.sqlite import SQLiteStore
from wovyr.worker import Worker


def main() -> None:
    db, lease, base_url = sys.argv[1:4]
    engine = Engine(
        SQLiteStore(db),
        activities=ActivityRegistry(),
        providers=Providers({"default": ProviderConfig("default", base_url)}),
    )

    async def run() -> None:
        while True:
            worker = Worker(engine, lease_seconds=float(lease))
            try:
                await worker.run_until_idle()
            finally:
                await worker.close()
            if not engine.list(status="running", limit=1).items:
                return
            await asyncio.sleep(float(lease) / 4)  # another's lease has yet to expire

    asyncio.run(run())
    engine.close()


if __name__ == "__main__":
    main()
