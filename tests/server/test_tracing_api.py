"""A start over the API continues the caller's W3C trace context (`traceparent`,
`tracestate` headers) when tracing is on; an invalid context starts a new trace and never
fails the start."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.otlp_collector import Collector
from tests.server.conftest import serve

from wovyr.activities.base import ActivityRegistry
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.platform.tracing import OtelTracer
from wovyr.settings import Settings
from wovyr.store.sqlite import SQLiteStore

pytestmark = pytest.mark.anyio
OP = "tenant-a:operator"
FLOW = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: api-traced}
activities:
  - {id: a, set: {v: 1}}
"""
CALLER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.fixture
def collector() -> Iterator[Collector]:
    with Collector() as running:
        yield running


async def test_the_start_span_continues_the_requests_context(
    collector: Collector, registry: ActivityRegistry, clock: ManualClock, tmp_path: Path
) -> None:
    tracer = OtelTracer(collector.traces_url, service_name="api")
    engine = Engine(SQLiteStore(), clock=clock, activities=registry, tracer=tracer)
    async with serve(engine, Settings(home=tmp_path / "home")) as api:
        body = {"definition": FLOW, "id": "from-caller"}
        headers = {"traceparent": CALLER, "tracestate": "vendor=abc"}
        r = await api.call("POST", "/api/v1/workflows", OP, json=body, headers=headers)
        assert r.status_code == 201, r.text
        bad = {"traceparent": "00-not-a-context-01"}
        body = {"definition": FLOW, "id": "fresh"}
        r = await api.call("POST", "/api/v1/workflows", OP, json=body, headers=bad)
        assert r.status_code == 201, r.text
        stored = engine.for_tenant("tenant-a").history("from-caller", limit=1)[0].data["trace"]
    engine.close()

    spans = {s.attributes["wovyr.execution.id"]: s for s in collector.spans()}
    continued, fresh = spans["from-caller"], spans["fresh"]
    assert continued.trace_id == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert continued.parent_span_id == "00f067aa0ba902b7"
    assert continued.attributes["wovyr.tenant"] == "tenant-a"
    assert continued.named_by(stored["traceparent"])
    assert stored["tracestate"] == "vendor=abc"  # the caller's state goes on with the trace
    assert fresh.parent_span_id == "" and fresh.trace_id != continued.trace_id
