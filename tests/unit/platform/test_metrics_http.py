"""The stdlib `/metrics` endpoint of processes without the HTTP server."""

from __future__ import annotations

import socket

import httpx
import pytest

from wovyr.errors import ConfigError
from wovyr.platform.metrics_http import CONTENT_TYPE, MetricsEndpoint, parse_address


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
