"""Health, readiness, Prometheus metrics, the OpenAPI document and the local docs page."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from tests.server.conftest import APPROVAL_FLOW, Api, serve

from wovyr._version import __version__
from wovyr.activities.base import ActivityRegistry
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.errors import StoreError
from wovyr.settings import Settings

pytestmark = pytest.mark.anyio
FLAKY = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: flaky}
activities:
  - id: call
    tool: flaky
    retry: {max_attempts: 3, initial_interval: 0}
"""
# name{labels} value, per the text exposition format
SAMPLE = re.compile(r'^([a-z_:][a-z0-9_:]*)(\{([a-z_]+="(?:[^"\\]|\\.)*",?)*\})? (\S+)$')


async def test_healthz_and_readyz(api: Api) -> None:
    assert (await api.client.get("/healthz")).json() == {"status": "ok", "version": __version__}
    ready = await api.client.get("/readyz")
    assert ready.status_code == 200
    checks = ready.json()["checks"]
    assert checks["store"] == "ok"
    assert checks["migrations"] == "ok"
    assert checks["background"] == "disabled"


async def test_metrics_exposition(api: Api, engine: Engine, registry: ActivityRegistry) -> None:
    calls = {"n": 0}

    def flaky() -> str:
        calls["n"] += 1
        if calls["n"] < 2:
            raise RuntimeError("transient")
        return "ok"

    registry.register("flaky", flaky)
    r = await api.call("POST", "/api/v1/workflows", "tenant-a:operator", json={"definition": FLAKY})
    eid = r.json()["id"]
    await api.call(
        "POST", "/api/v1/workflows", "tenant-a:operator", json={"definition": APPROVAL_FLOW}
    )
    await api.drain()
    api.clock.advance(1)
    await api.drain()
    assert engine.for_tenant("tenant-a").query(eid).status == "completed"

    r = await api.call("GET", "/metrics", "tenant-a:viewer")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    text = r.text
    for line in text.splitlines():
        if not line.startswith("#"):
            assert SAMPLE.match(line), line
    assert 'wovyr_executions_started_total{tenant="tenant-a",workflow="flaky"} 1' in text
    assert 'wovyr_executions_started_total{tenant="tenant-a",workflow="purchase"} 1' in text
    assert (
        'wovyr_executions_finished_total{tenant="tenant-a",status="completed",workflow="flaky"} 1'
        in text
    )
    assert 'wovyr_activity_retries_total{tenant="tenant-a",workflow="flaky"} 1' in text
    duration = "wovyr_activity_duration_seconds_count"
    assert f'{duration}{{tenant="tenant-a",outcome="completed",workflow="flaky"}} 1' in text
    assert "# TYPE wovyr_activity_duration_seconds histogram" in text
    assert 'tenant="tenant-a",method="POST",route="/api/v1/workflows",status="201"' in text
    assert eid not in text  # never an execution id as a label
    # a tenant's key sees its own series only: no process-wide ones, nothing of tenant b's
    assert "wovyr_queue_depth" not in text and "wovyr_lease_losses_total 0" not in text
    assert 'tenant="tenant-b"' not in text and 'tenant=""' not in text
    for name in re.findall(r"^# TYPE (\S+) counter$", text, re.MULTILINE):
        assert name.endswith("_total"), name
    for name in re.findall(r"^# TYPE (\S+) histogram$", text, re.MULTILINE):
        assert name.endswith("_seconds"), name

    other = (await api.call("GET", "/metrics", "tenant-b:viewer")).text
    assert "flaky" not in other and "purchase" not in other  # another tenant's series are hidden
    assert 'tenant="tenant-a"' not in other
    assert (await api.client.get("/metrics")).status_code == 401

    # the host's scrape key sees every tenant and the process-wide series
    _, token = api.authenticator.create_key("default", "metrics", "prometheus")
    scrape = {"Authorization": f"Bearer {token}"}
    everything = (await api.client.get("/metrics", headers=scrape)).text
    assert 'wovyr_executions_started_total{tenant="tenant-a",workflow="flaky"} 1' in everything
    assert 'tenant="tenant-b",method="GET",route="/metrics",status="200"' in everything
    assert "wovyr_queue_depth 0" in everything and "wovyr_timer_lag_seconds 0" in everything
    assert "wovyr_lease_losses_total" in everything
    assert 'method="GET",route="/metrics",status="401"' in everything  # unauthenticated
    # ... and nothing else
    assert (await api.client.get("/api/v1/workflows", headers=scrape)).status_code == 403
    assert (await api.client.get("/api/v1/schedules", headers=scrape)).status_code == 403
    # only the host creates one: a tenant admin cannot
    made = await api.call("POST", "/api/v1/admin/keys", "tenant-a:admin", json={"role": "metrics"})
    assert made.status_code == 422


async def test_timer_lag_is_measured(api: Api) -> None:
    flow = APPROVAL_FLOW.replace("wait: {signal: go}", "wait: {timer: {after: 10s}}")
    await api.call("POST", "/api/v1/workflows", "tenant-a:operator", json={"definition": flow})
    await api.drain()
    api.clock.advance(25)
    _, token = api.authenticator.create_key("default", "metrics", "prometheus")
    text = (await api.client.get("/metrics", headers={"Authorization": f"Bearer {token}"})).text
    assert "wovyr_timer_lag_seconds 15" in text


async def test_openapi_is_3_1_and_docs_are_local(api: Api) -> None:
    spec = (await api.client.get("/openapi.json")).json()
    assert spec["openapi"].startswith("3.1")
    assert spec["components"]["securitySchemes"]["ApiKey"]["scheme"] == "bearer"
    docs = await api.client.get("/docs")
    assert docs.status_code == 200
    assert "/api/v1/workflows" in docs.text  # the plain list, for a browser without scripts
    assert "<rapi-doc spec-url='/openapi.json'" in docs.text
    scripts = re.findall(r"<script[^>]*\bsrc='([^']*)'", docs.text)
    assert scripts == ["/docs/rapidoc.js"]  # served here: no CDN
    assert "http" not in docs.text.replace("http-equiv", "")
    assert "script-src 'self'" in docs.headers["content-security-policy"]
    script = await api.client.get("/docs/rapidoc.js", headers={"Accept-Encoding": "gzip"})
    assert script.status_code == 200 and script.headers["content-encoding"] == "gzip"
    assert script.headers["content-type"].startswith("text/javascript")
    assert script.content.startswith(b"/*! RapiDoc")  # httpx decoded the gzip
    plain = await api.client.get("/docs/rapidoc.js", headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers and plain.content == script.content
    assert (await api.client.get("/redoc")).status_code == 404


async def test_unexpected_errors_are_bare_500_problems(memory_api_factory: Any) -> None:
    async with memory_api_factory() as api:

        def boom() -> None:
            raise RuntimeError("secret internals /etc/shadow")

        def store_down() -> None:
            raise StoreError("connection string postgresql://u:pw@db/x broke")

        api.app.add_api_route("/api/v1/boom", boom)
        api.app.add_api_route("/api/v1/store-down", store_down)
        for path in ("/api/v1/boom", "/api/v1/store-down"):
            r = await api.client.get(path)
            assert r.status_code == 500
            assert r.headers["content-type"] == "application/problem+json"
            assert r.json()["detail"] == "The server failed to handle the request."
            assert "secret" not in r.text and "pw@" not in r.text and "Traceback" not in r.text


async def test_readyz_notices_a_schema_newer_than_the_server(
    tmp_path: Path, clock: ManualClock, settings: Settings
) -> None:
    from wovyr.store.sqlite import SQLiteStore

    store = SQLiteStore(tmp_path / "w.db")
    try:
        with store._write() as conn:  # another, newer server migrated this file further
            conn.execute("INSERT INTO schema_migrations (version) VALUES (9999)")
        async with serve(Engine(store, clock=clock), settings) as api:
            r = await api.client.get("/readyz")
            assert r.status_code == 503
            assert "9999" in r.json()["checks"]["migrations"]
    finally:
        store.close()
