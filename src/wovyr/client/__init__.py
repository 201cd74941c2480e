"""Typed clients of a Wovyr server's HTTP API: `Client` (blocking) and `AsyncClient`.

::

    from wovyr.client import Client

    with Client("https://wovyr.example.com", api_key="wvr_...") as wovyr:  # or the env
        run = wovyr.start_workflow(workflow="order-fulfillment", input={"order_id": "A-1"})
        wovyr.signal_workflow(run["id"], "go")

`base_url` defaults to `WOVYR_SERVER` and `api_key` to `WOVYR_API_KEY`. Errors are the
ones of `wovyr.errors` (`NotFound`, `Conflict`, `QuotaExceeded`, `RequestInvalid`, ...).
This package imports no engine, store or server module (import-linter holds it to that).
"""

from __future__ import annotations

from wovyr.client.aio import AsyncClient
from wovyr.client.base import StreamMessage
from wovyr.client.sync import Client

__all__ = ["AsyncClient", "Client", "StreamMessage"]
