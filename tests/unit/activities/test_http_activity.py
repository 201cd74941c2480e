"""The `http` activity against a real HTTP server on 127.0.0.1 (stdlib, in a thread)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
from collections.abc import Callable, Coroutine, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from wovyr.activities.base import ActivityError
from wovyr.activities.builtin.http import ERROR_EXCERPT_BYTES, run_http
from wovyr.definition.model import HttpSpec

KEY = "exec-1/call/1"


class _Server(ThreadingHTTPServer):
    # Handler threads are joined on close, so no test leaves a thread behind.
    daemon_threads = False
    release: threading.Event  # lets a blocked handler finish at teardown
    endless_stopped: threading.Event  # set once the endless body's writer saw the client leave


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean

    def do_GET(self) -> None:
        self._route()

    def do_POST(self) -> None:
        self._route()

    def _route(self) -> None:
        path = urlsplit(self.path).path
        # The client hangs up on purpose in the size-cap and timeout tests.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            _ROUTES[path.split("/")[1]](self)

    def send(self, status: int, body: bytes, content_type: str, **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(body)


def _echo(h: _Handler) -> None:
    length = int(h.headers.get("Content-Length") or 0)
    raw = h.rfile.read(length).decode()
    echoed = {
        "method": h.command,
        "query": parse_qs(urlsplit(h.path).query),
        "headers": {k.lower(): v for k, v in h.headers.items()},
        "body": raw,
    }
    h.send(200, json.dumps(echoed).encode(), "application/json; charset=utf-8", X_Trace="abc")


def _text(h: _Handler) -> None:
    h.send(200, b"hello \xff world", "text/plain; charset=utf-8")


def _mislabelled(h: _Handler) -> None:
    h.send(200, b"not json{", "application/json")


def _status(h: _Handler) -> None:
    code = int(h.path.split("/")[2])
    h.send(code, b"E" * 10_000, "text/plain")


def _redirect(h: _Handler) -> None:
    h.send(302, b"", "text/plain", Location="/echo")


def _sized(h: _Handler) -> None:
    h.send(200, b"x" * int(h.path.split("/")[2]), "application/octet-stream")


def _endless(h: _Handler) -> None:
    """A close-delimited body that never ends: only a client that stops reading ends it."""
    h.send_response(200)
    h.send_header("Content-Type", "application/octet-stream")
    h.end_headers()
    chunk = b"y" * 65536
    try:
        while not h.server.release.is_set():
            h.wfile.write(chunk)
    finally:
        h.server.endless_stopped.set()


def _huge_declared(h: _Handler) -> None:
    h.send_response(200)
    h.send_header("Content-Length", str(50 * 1_048_576))
    h.end_headers()
    h.server.release.wait(10)


def _slow(h: _Handler) -> None:
    h.server.release.wait(10)
    h.send(200, b"{}", "application/json")


_ROUTES: dict[str, Callable[[_Handler], None]] = {
    "echo": _echo,
    "text": _text,
    "mislabelled": _mislabelled,
    "status": _status,
    "redirect": _redirect,
    "sized": _sized,
    "endless": _endless,
    "huge-declared": _huge_declared,
    "slow": _slow,
}


@pytest.fixture
def server() -> Iterator[_Server]:
    srv = _Server(("127.0.0.1", 0), _Handler)
    srv.release = threading.Event()
    srv.endless_stopped = threading.Event()
    thread = threading.Thread(
        target=srv.serve_forever, kwargs={"poll_interval": 0.02}, name="test-http-server"
    )
    thread.start()
    try:
        yield srv
    finally:
        srv.release.set()
        srv.shutdown()
        srv.server_close()
        thread.join(10)


def _url(srv: _Server, path: str) -> str:
    host, port = srv.server_address[:2]
    return f"http://{host!s}:{port}{path}"


def _run(coro: Coroutine[Any, Any, dict[str, Any]]) -> dict[str, Any]:
    # Outer bound: a client that does not stop reading would otherwise hang the test.
    async def bounded() -> dict[str, Any]:
        async with asyncio.timeout(10):
            return await coro

    return asyncio.run(bounded())


def _call(spec: HttpSpec, *, timeout: float | None = 5.0) -> dict[str, Any]:
    return _run(run_http(spec, timeout=timeout, idempotency_key=KEY))


def _failure(spec: HttpSpec, *, timeout: float | None = 5.0) -> ActivityError:
    with pytest.raises(ActivityError) as caught:
        _call(spec, timeout=timeout)
    return caught.value


def test_json_response_is_parsed_and_request_parts_are_sent(server: _Server) -> None:
    spec = HttpSpec(
        url=_url(server, "/echo"),
        method="POST",
        headers={"X-Custom": "1"},
        query={"a": 1, "tags": ["x", "y"], "flag": True},
        json={"order": 42},
    )

    out = _call(spec)

    assert out["status"] == 200
    assert "body" not in out
    assert out["headers"]["x-trace"] == "abc"
    assert out["headers"]["content-type"].startswith("application/json")
    echoed = out["json"]
    assert echoed["method"] == "POST"
    assert echoed["query"] == {"a": ["1"], "tags": ["x", "y"], "flag": ["true"]}
    assert echoed["headers"]["x-custom"] == "1"
    assert echoed["headers"]["content-type"] == "application/json"
    assert json.loads(echoed["body"]) == {"order": 42}


def test_idempotency_key_header_is_sent(server: _Server) -> None:
    out = _call(HttpSpec(url=_url(server, "/echo")))

    assert out["json"]["headers"]["idempotency-key"] == KEY


def test_idempotency_key_set_by_the_author_wins(server: _Server) -> None:
    spec = HttpSpec(url=_url(server, "/echo"), headers={"idempotency-KEY": "mine"})

    out = _call(spec)

    assert out["json"]["headers"]["idempotency-key"] == "mine"


def test_text_body_is_sent_as_is(server: _Server) -> None:
    spec = HttpSpec(url=_url(server, "/echo"), method="POST", body="plain words")

    out = _call(spec)

    assert out["json"]["body"] == "plain words"


def test_text_response_is_decoded_with_replacement_characters(server: _Server) -> None:
    out = _call(HttpSpec(url=_url(server, "/text")))

    assert out == {
        "status": 200,
        "headers": out["headers"],
        "body": "hello \ufffd world",
    }
    assert "json" not in out


def test_json_content_type_that_does_not_parse_returns_the_text(server: _Server) -> None:
    out = _call(HttpSpec(url=_url(server, "/mislabelled")))

    assert out["body"] == "not json{"
    assert "json" not in out


@pytest.mark.parametrize("status", [500, 503, 429, 408])
def test_server_errors_and_throttling_are_retryable(server: _Server, status: int) -> None:
    error = _failure(HttpSpec(url=_url(server, f"/status/{status}")))

    assert error.type == "HttpStatus"
    assert error.retryable is True
    assert error.details["status"] == status


@pytest.mark.parametrize("status", [400, 404, 422])
def test_other_client_errors_are_not_retryable(server: _Server, status: int) -> None:
    error = _failure(HttpSpec(url=_url(server, f"/status/{status}")))

    assert error.type == "HttpStatus"
    assert error.retryable is False
    assert error.details["status"] == status


def test_status_error_carries_a_bounded_body_excerpt(server: _Server) -> None:
    # The error page (10 kB) is larger than max_response_bytes: still an HttpStatus error.
    spec = HttpSpec(url=_url(server, "/status/500"), max_response_bytes=100)

    error = _failure(spec)

    assert error.type == "HttpStatus"
    assert error.details["body"] == "E" * ERROR_EXCERPT_BYTES


def test_allowed_statuses_replace_the_2xx_default(server: _Server) -> None:
    allowed = HttpSpec(url=_url(server, "/status/404"), allowed_statuses=[404])
    refused = HttpSpec(url=_url(server, "/echo"), allowed_statuses=[201])

    assert _call(allowed)["status"] == 404
    assert _failure(refused).details["status"] == 200


def test_redirects_are_not_followed_by_default(server: _Server) -> None:
    plain = HttpSpec(url=_url(server, "/redirect"), allowed_statuses=[302])
    following = HttpSpec(url=_url(server, "/redirect"), follow_redirects=True)

    out = _call(plain)
    assert out["status"] == 302
    assert out["headers"]["location"] == "/echo"
    assert _failure(HttpSpec(url=_url(server, "/redirect"))).retryable is False
    assert _call(following)["json"]["method"] == "GET"


def test_body_at_the_cap_is_accepted(server: _Server) -> None:
    out = _call(HttpSpec(url=_url(server, "/sized/1000"), max_response_bytes=1000))

    assert out["body"] == "x" * 1000


def test_declared_length_over_the_cap_fails_without_reading(server: _Server) -> None:
    # The server never sends the body it announced: only a check of the header can finish.
    spec = HttpSpec(url=_url(server, "/huge-declared"), max_response_bytes=1000)

    error = _failure(spec, timeout=3.0)

    assert error.type == "ResponseTooLarge"
    assert error.retryable is False
    assert error.details["content_length"] == 50 * 1_048_576


def test_streamed_body_over_the_cap_stops_the_read(server: _Server) -> None:
    # The body never ends, so a client that read it all would hit the timeout instead.
    spec = HttpSpec(url=_url(server, "/endless"), max_response_bytes=200_000)

    error = _failure(spec, timeout=5.0)

    assert error.type == "ResponseTooLarge"
    assert error.retryable is False
    assert server.endless_stopped.wait(5), "the server kept writing: the connection is open"


def test_slow_server_times_out(server: _Server) -> None:
    error = _failure(HttpSpec(url=_url(server, "/slow")), timeout=0.2)

    assert error.type == "Timeout"
    assert error.retryable is True


def test_refused_connection_is_retryable() -> None:
    with socket.socket() as probe:  # a port that was free a moment ago; nothing listens
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    error = _failure(HttpSpec(url=f"http://127.0.0.1:{port}/"))

    assert error.type == "ConnectionError"
    assert error.retryable is True


@pytest.mark.parametrize(
    "url", ["ftp://127.0.0.1/file", "file:///etc/passwd", "gopher://127.0.0.1/", "http:///x"]
)
def test_non_http_urls_are_refused(url: str) -> None:
    error = _failure(HttpSpec(url=url))

    assert error.type == "InvalidUrl"
    assert error.retryable is False


def test_json_and_body_together_are_refused(server: _Server) -> None:
    error = _failure(HttpSpec(url=_url(server, "/echo"), json={"a": 1}, body="b"))

    assert error.type == "InvalidRequest"
    assert error.retryable is False


def test_a_given_client_is_used_and_left_open(server: _Server) -> None:
    async def twice() -> dict[str, Any]:
        async with httpx.AsyncClient(headers={"X-From-Client": "yes"}) as client:
            spec = HttpSpec(url=_url(server, "/echo"))
            await run_http(spec, timeout=5.0, idempotency_key="k1", client=client)
            out = await run_http(spec, timeout=5.0, idempotency_key="k2", client=client)
            assert not client.is_closed
            return out

    out = _run(twice())

    assert out["json"]["headers"]["x-from-client"] == "yes"
    assert out["json"]["headers"]["idempotency-key"] == "k2"
