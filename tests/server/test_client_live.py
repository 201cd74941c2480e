"""The Python clients against a real server (create_app under uvicorn, its own worker, a
SQLite file): `wait_for_result` until the end (and `TimeoutError` before it), the page
iterators over the cursor lists, and the retry of a 429 that honours `Retry-After` (and
does not wait for one past `max_wait`)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from tests.ui.test_browser import LiveServer, live_server

from wovyr.client import AsyncClient, Client
from wovyr.client.base import Retry
from wovyr.engine.quotas import parse_quotas, set_quotas
from wovyr.errors import QuotaExceeded

__all__ = ["live_server"]  # the fixture, shared with tests/ui/test_browser.py
TENANT = "acme"
WAITS = """
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: waits}
inputs: {who: {type: string, default: nobody}}
activities:
  - {id: gate, wait: {signal: go}}
  - {id: greet, needs: [gate], set: {value: "hello ${{ inputs.who }}"}}
output: {value: "${{ activities.greet.output.value }}"}
"""


def client(live: LiveServer, role: str = "admin", **kw: Any) -> Client:
    _, token = live.authenticator.create_key(TENANT, role, role)
    return Client(live.url, api_key=token, **kw)


def test_wait_for_result_waits_for_the_end(live_server: LiveServer) -> None:
    with client(live_server) as wovyr:
        run = wovyr.start_workflow(WAITS, input={"who": "ada"}, id="w1")
        with pytest.raises(TimeoutError, match="w1 is still"):
            wovyr.wait_for_result(run["id"], timeout=0.2, interval=0.05)
        wovyr.signal_workflow(run["id"], "go")
        done = wovyr.wait_for_result(run["id"], timeout=60)
        assert done["status"] == "completed", done["error"]
        assert done["output"] == {"value": "hello ada"}
        wovyr.start_workflow(WAITS, id="w2")
        wovyr.cancel_workflow("w2", reason="no longer needed")
        assert wovyr.wait_for_result("w2", timeout=60)["status"] == "cancelled"


def test_page_iterators_walk_every_page(live_server: LiveServer) -> None:
    with client(live_server) as wovyr:
        for i in range(5):
            wovyr.start_workflow(WAITS, id=f"p{i}", labels={"batch": "x"})
        whole = wovyr.list_workflows(labels={"batch": "x"}, limit=100)["items"]
        walked = list(wovyr.iter_workflows(labels={"batch": "x"}, page_size=2))
        assert [r["id"] for r in walked] == [r["id"] for r in whole]
        assert sorted(r["id"] for r in walked) == [f"p{i}" for i in range(5)]
        wovyr.signal_workflow("p0", "go")
        wovyr.wait_for_result("p0", timeout=60)
        events = list(wovyr.iter_history("p0", page_size=2))
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        assert events == wovyr.get_history("p0", after_seq=0, limit=1000)["items"]
        for workflow in ("a", "b", "c"):
            wovyr.submit_batch("cancel", workflow=workflow)
        batches = list(wovyr.iter_batches(page_size=1))
        assert len(batches) == 3 and len({b["id"] for b in batches}) == 3
        audit = list(wovyr.iter_audit(page_size=2))
        assert [r["seq"] for r in audit] == sorted(r["seq"] for r in audit)
        assert {"execution.start", "batch.submit"} <= {r["action"] for r in audit}


def test_the_async_client_iterates_and_waits(live_server: LiveServer) -> None:
    _, token = live_server.authenticator.create_key(TENANT, "operator", "async")

    async def run() -> tuple[list[str], Any]:
        async with AsyncClient(live_server.url, api_key=token) as wovyr:
            for i in range(3):
                await wovyr.start_workflow(WAITS, id=f"a{i}")
            ids = [r["id"] async for r in wovyr.iter_workflows(page_size=1)]
            await wovyr.signal_workflow("a1", "go")
            return ids, await wovyr.wait_for_result("a1", timeout=60)

    ids, done = asyncio.run(run())
    assert sorted(ids) == ["a0", "a1", "a2"] and done["status"] == "completed"


def test_a_429_is_asked_again_after_its_retry_after(live_server: LiveServer) -> None:
    store = live_server.engine.store
    now = live_server.engine.clock.now()
    set_quotas(store, TENANT, parse_quotas({"concurrent_executions": 1}), by="test", at=now)
    retries: list[tuple[int, float, int]] = []
    with client(live_server, "operator") as first:
        first.start_workflow(WAITS, id="holds")

        def ended_the_first(tries: int, seconds: float, response: httpx.Response) -> None:
            retries.append((tries, seconds, response.status_code))
            first.cancel_workflow("holds")  # the slot frees while the client waits

        with client(live_server, "operator", retry=Retry(on_retry=ended_the_first)) as second:
            started = second.start_workflow(WAITS, id="next")
    assert started["id"] == "next"
    assert retries == [(1, 5.0, 429)]  # the server's Retry-After for a running quota


def test_a_retry_after_past_max_wait_is_raised_at_once(live_server: LiveServer) -> None:
    store = live_server.engine.store
    now = live_server.engine.clock.now()
    set_quotas(store, TENANT, parse_quotas({"executions_per_day": 1}), by="test", at=now)
    told: list[float] = []
    # the server says at least 1 s (a daily quota: the seconds to midnight)
    retry = Retry(max_wait=0.5, on_retry=lambda _t, seconds, _r: told.append(seconds))
    with client(live_server, "operator", retry=retry) as wovyr:
        wovyr.start_workflow(WAITS, id="today")
        with pytest.raises(QuotaExceeded) as refused:
            wovyr.start_workflow(WAITS, id="one-more")
    assert told == []  # not waited for
    assert refused.value.retry_after >= 1
