"""The stdlib `/metrics`, `/healthz` and `/readyz` endpoint of processes without the HTTP
server."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import pytest

from wovyr._version import __version__
from wovyr.errors import ConfigError
from wovyr.platform.metrics_http import (
    CONTENT_TYPE,
    MetricsEndpoint,
    parse_address,
    store_checks,
)
from wovyr.store.sqlite import SQLiteStore


def test_addresses_are_host_and_port() -> None:
    assert parse_address("127.0.0.1:9464") == ("127.0.0.1", 9464)
    assert parse_address("[::1]:0") == ("::1", 0)
    assert parse_address("metrics.internal:80") == ("metrics.internal", 80)
    for bad in ("9464", ":9464", "127.0.0.1:", "127.0.0.1:http", "127.0.0.1:70000"):
        with pytest.raises(ConfigError, match="metrics address"):
            parse_address(bad)


def test_serves_metrics_and_nothing_else_on_the_given_address() -> None:
    texts = iter(["wovyr_queue_depth 1\n", "wovyr_queue_depth 2\n"])
    endpoint = MetricsEndpoint("127.0.0.1:0", lambda: next(texts)).start()
    try:
        host, port = endpoint.address
        assert host == "127.0.0.1" and port > 0
        base = f"http://127.0.0.1:{port}"
        first = httpx.get(f"{base}/metrics", timeout=5)
        assert first.status_code == 200
        assert first.headers["content-type"] == CONTENT_TYPE
        assert first.text == "wovyr_queue_depth 1\n"
        assert httpx.get(f"{base}/metrics?x=1", timeout=5).text == "wovyr_queue_depth 2\n"
        assert httpx.get(f"{base}/", timeout=5).status_code == 404
        assert httpx.post(f"{base}/metrics", timeout=5).status_code == 501
    finally:
        endpoint.close()
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5)


def test_a_failing_render_answers_500_and_the_endpoint_keeps_serving(
    caplog: pytest.LogCaptureFixture,
) -> None:
    answers = iter([RuntimeError("the store is down"), "wovyr_queue_depth 0\n"])

    def render() -> str:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    endpoint = MetricsEndpoint("127.0.0.1:0", render).start()
    try:
        url = f"http://127.0.0.1:{endpoint.address[1]}/metrics"
        failed = httpx.get(url, timeout=5)
        assert failed.status_code == 500 and "store is down" not in failed.text
        assert httpx.get(url, timeout=5).text == "wovyr_queue_depth 0\n"
    finally:
        endpoint.close()
    assert "rendering failed" in caplog.text


def test_an_address_in_use_is_a_config_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ConfigError, match=f"cannot serve metrics on 127.0.0.1:{port}"):
            MetricsEndpoint(f"127.0.0.1:{port}", lambda: "")


def test_healthz_and_readyz_answer_beside_metrics(tmp_path: Path) -> None:
    """A worker's probes: /healthz with the version; /readyz 200 while the real store
    answers and nothing stops, 503 with the failing check named otherwise."""
    store = SQLiteStore(tmp_path / "wovyr.db")
    stopping: list[bool] = []

    def checks() -> dict[str, str]:
        return {**store_checks(store), "worker": "stopping" if stopping else "ok"}

    endpoint = MetricsEndpoint("127.0.0.1:0", lambda: "", checks).start()
    try:
        base = f"http://127.0.0.1:{endpoint.address[1]}"
        health = httpx.get(f"{base}/healthz", timeout=5)
        assert health.status_code == 200
        assert health.json() == {"status": "ok", "version": __version__}
        ready = httpx.get(f"{base}/readyz", timeout=5)
        assert ready.status_code == 200
        assert ready.json() == {
            "status": "ready",
            "checks": {"store": "ok", "migrations": "ok", "worker": "ok"},
        }
        stopping.append(True)
        stopped = httpx.get(f"{base}/readyz", timeout=5)
        assert stopped.status_code == 503
        assert stopped.json()["checks"]["worker"] == "stopping"
        store.close()
        gone = httpx.get(f"{base}/readyz", timeout=5)
        assert gone.status_code == 503
        assert gone.json()["checks"]["store"] == "unreachable"
    finally:
        endpoint.close()


def test_without_checks_there_is_no_readyz() -> None:
    endpoint = MetricsEndpoint("127.0.0.1:0", lambda: "").start()
    try:
        base = f"http://127.0.0.1:{endpoint.address[1]}"
        assert httpx.get(f"{base}/readyz", timeout=5).status_code == 404
        assert httpx.get(f"{base}/healthz", timeout=5).status_code == 200
    finally:
        endpoint.close()
