"""The engine's definition caches stay bounded however many distinct definitions a
long-running process sees, and what they drop is read back from the store when needed."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from wovyr.engine.definitions import (
    DEFINITION_CACHE,
    SOURCE_CACHE,
    STORED_CACHE,
    Lru,
)
from wovyr.engine.engine import Engine
from wovyr.engine.runtime import Caches
from wovyr.worker import Worker


def flow(n: int) -> str:
    return f"""\
apiVersion: wovyr/v1
kind: Workflow
metadata: {{name: flow-{n}}}
activities:
  - id: a
    set: {{n: {n}}}
output: {{n: "${{{{ activities.a.output.n }}}}"}}
"""


def test_an_lru_keeps_the_most_recently_used() -> None:
    cache: Lru[str, int] = Lru(3)
    for i in range(10):
        cache.put(f"k{i}", i)
        assert cache.get("k0") == 0  # used every time: never the least recently used
    assert len(cache) == 3
    assert [k in cache for k in ("k0", "k7", "k8", "k9")] == [True, False, True, True]
    with pytest.raises(ValueError, match="at least one"):
        Lru(0)


def test_the_default_caches_are_bounded() -> None:
    engine = Engine.open("memory:")
    caches = engine.runtime.caches
    assert [caches.sources.size, caches.definitions.size, caches.stored.size] == [
        SOURCE_CACHE,
        DEFINITION_CACHE,
        STORED_CACHE,
    ]
    assert engine.for_tenant("other").runtime.caches is caches  # shared


def test_many_distinct_definitions_keep_the_caches_bounded_and_still_run(
    engine: Engine,
) -> None:
    bound = 8
    caches = Caches(Lru(bound), Lru(bound), Lru(bound))
    engine = Engine.over(replace(engine.runtime, caches=caches))
    n = 5 * bound

    async def main() -> list[str]:
        worker = Worker(engine, lease_seconds=30)
        try:
            ids = [engine.start(flow(i)).id for i in range(n)]  # all pinned before any runs
            await worker.run_until_idle()
            return ids
        finally:
            await worker.close()

    ids = asyncio.run(main())
    for i, eid in enumerate(ids):  # the early ones' definitions were dropped and read back
        view = engine.query(eid)
        assert (view.status, view.output) == ("completed", {"n": i})
    assert max(len(caches.sources), len(caches.definitions), len(caches.stored)) <= bound
