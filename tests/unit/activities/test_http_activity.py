"""The `http` activity against a real HTTP server on 127.0.0.1 (stdlib, in a thread).

The egress-guard tests only ever connect to servers on 127.0.0.1 that the test started;
addresses that must never be contacted for real (metadata, private ranges) are checked as
literals in test_egress.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import socket
import ssl
import subprocess
import threading
from collections.abc import Callable, Coroutine, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from wovyr.activities.base import ActivityContext, ActivityError, ActivityRegistry
from wovyr.activities.builtin.http import ERROR_EXCERPT_BYTES, KIND, HttpStep, run_http
from wovyr.activities.dispatch import Dispatch
from wovyr.activities.egress import UNREACHABLE, UNREACHABLE_TYPE
from wovyr.activities.policy import RESTRICTED, TRUSTED, SideEffectPolicy
from wovyr.definition.model import HttpSpec

KEY = "exec-1/call/1"


class _Server(ThreadingHTTPServer):
    # Handler threads are joined on close, so no test leaves a thread behind.
    daemon_threads = False
    release: threading.Event  # lets a blocked handler finish at teardown
    endless_stopped: threading.Event  # set once the endless body's writer saw the client leave
    connections: int  # connections accepted (counted in the accepting thread, in order)
    paths: list[str]  # request paths received

    def verify_request(self, request: Any, client_address: Any) -> bool:
        self.connections += 1
        return True


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean

    def do_GET(self) -> None:
        self._route()

    def do_POST(self) -> None:
        self._route()

    def _route(self) -> None:
        self.server.paths.append(self.path)
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


def _to(h: _Handler) -> None:
    """Redirect to `?url=` with `?status=` (302 by default)."""
    query = parse_qs(urlsplit(h.path).query)
    status = int(query.get("status", ["302"])[0])
    h.send(status, b"", "text/plain", Location=query["url"][0])


def _loop(h: _Handler) -> None:
    h.send(302, b"", "text/plain", Location="/loop")


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
    "to": _to,
    "loop": _loop,
    "sized": _sized,
    "endless": _endless,
    "huge-declared": _huge_declared,
    "slow": _slow,
}


@contextlib.contextmanager
def _serve() -> Iterator[_Server]:
    srv = _Server(("127.0.0.1", 0), _Handler)
    srv.release = threading.Event()
    srv.endless_stopped = threading.Event()
    srv.connections = 0
    srv.paths = []
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


@pytest.fixture
def server() -> Iterator[_Server]:
    with _serve() as srv:
        yield srv


@pytest.fixture
def second_server() -> Iterator[_Server]:
    with _serve() as srv:
        yield srv


def _url(srv: _Server, path: str) -> str:
    host, port = srv.server_address[:2]
    return f"http://{host!s}:{port}{path}"


def _run(coro: Coroutine[Any, Any, dict[str, Any]]) -> dict[str, Any]:
    # Outer bound: a client that does not stop reading would otherwise hang the test.
    async def bounded() -> dict[str, Any]:
        async with asyncio.timeout(10):
            return await coro

    return asyncio.run(bounded())


def _call(
    spec: HttpSpec, *, timeout: float | None = 5.0, policy: SideEffectPolicy = TRUSTED
) -> dict[str, Any]:
    return _run(run_http(spec, timeout=timeout, idempotency_key=KEY, policy=policy))


def _failure(
    spec: HttpSpec, *, timeout: float | None = 5.0, policy: SideEffectPolicy = TRUSTED
) -> ActivityError:
    with pytest.raises(ActivityError) as caught:
        _call(spec, timeout=timeout, policy=policy)
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


def test_requests_share_the_processs_tls_context(server: _Server, tls_builds: list[object]) -> None:
    """The `http` kind builds no TLS context per request (one per process)."""
    for _ in range(3):
        assert _call(HttpSpec(url=_url(server, "/echo")))["status"] == 200
    assert tls_builds == []


def test_idempotency_key_header_is_sent(server: _Server) -> None:
    out = _call(HttpSpec(url=_url(server, "/echo")))

    assert out["json"]["headers"]["idempotency-key"] == KEY


def test_idempotency_key_set_by_the_author_wins(server: _Server) -> None:
    spec = HttpSpec(url=_url(server, "/echo"), headers={"idempotency-KEY": "mine"})

    out = _call(spec)

    assert out["json"]["headers"]["idempotency-key"] == "mine"


TRACE = {
    "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    "tracestate": "vendor=abc",
}


def test_the_attempts_trace_context_is_sent_and_a_context_set_by_the_author_wins(
    server: _Server,
) -> None:
    def sent(spec: HttpSpec) -> dict[str, str]:
        out = _run(run_http(spec, timeout=5.0, idempotency_key=KEY, trace_headers=TRACE))
        headers: dict[str, str] = out["json"]["headers"]
        return headers

    headers = sent(HttpSpec(url=_url(server, "/echo")))
    assert (headers["traceparent"], headers["tracestate"]) == tuple(TRACE.values())
    mine = "00-11111111111111111111111111111111-2222222222222222-01"
    headers = sent(HttpSpec(url=_url(server, "/echo"), headers={"TraceParent": mine}))
    assert headers["traceparent"] == mine and "tracestate" not in headers
    assert "traceparent" not in _call(HttpSpec(url=_url(server, "/echo")))["json"]["headers"]


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


# --- query string in the URL ---------------------------------------------------------------


@pytest.mark.parametrize("policy", [TRUSTED, SideEffectPolicy(allow_networks=("127.0.0.0/8",))])
def test_query_string_in_the_url_is_kept(server: _Server, policy: SideEffectPolicy) -> None:
    out = _call(HttpSpec(url=_url(server, "/echo?a=1&token=abc&a=2")), policy=policy)

    assert out["json"]["query"] == {"a": ["1", "2"], "token": ["abc"]}


def test_query_merges_with_the_url_and_wins_on_the_same_key(server: _Server) -> None:
    spec = HttpSpec(
        url=_url(server, "/echo?a=1&token=abc&keep=x"), query={"a": 2, "tags": ["p", "q"]}
    )

    out = _call(spec)

    assert out["json"]["query"] == {
        "a": ["2"],
        "token": ["abc"],
        "keep": ["x"],
        "tags": ["p", "q"],
    }


# --- egress guard: policies without private_network ------------------------------------------

LOCAL = SideEffectPolicy(shell=False, private_network=False, allow_networks=("127.0.0.0/8",))


def _only(srv: _Server, port_of: _Server | None = None) -> SideEffectPolicy:
    """Restricted, but `127.0.0.1:PORT` of `port_of` (default `srv`) is admitted."""
    port = (port_of or srv).server_address[1]
    return SideEffectPolicy(shell=False, private_network=False, allow_hosts=(f"127.0.0.1:{port}",))


def _assert_untouched(srv: _Server) -> None:
    """Nothing reached `srv` before now: a trusted request afterwards is its first one.

    Connections are accepted in order by one thread, so one made earlier would be counted
    before the trusted request is answered.
    """
    _call(HttpSpec(url=_url(srv, "/echo?probe=1")))
    assert srv.connections == 1
    assert srv.paths == ["/echo?probe=1"]


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "127.1",
        "2130706433",
        "0x7f000001",
        "017700000001",
        "localhost",
        "LOCALHOST",
        "0.0.0.0",
        "0",
        "[::1]",
        "[::ffff:127.0.0.1]",
        "[::ffff:7f00:1]",
    ],
)
def test_restricted_refuses_every_loopback_form_before_connecting(
    server: _Server, host: str
) -> None:
    port = server.server_address[1]

    error = _failure(HttpSpec(url=f"http://{host}:{port}/echo?token=secret"), policy=RESTRICTED)

    assert (error.message, error.type, error.retryable) == (UNREACHABLE, UNREACHABLE_TYPE, False)
    assert error.details is None
    assert "secret" not in str(error) and str(port) not in str(error)
    _assert_untouched(server)


def test_https_to_loopback_is_refused_the_same_way(server: _Server) -> None:
    port = server.server_address[1]

    error = _failure(HttpSpec(url=f"https://localhost:{port}/"), policy=RESTRICTED)

    assert (error.message, error.type) == (UNREACHABLE, UNREACHABLE_TYPE)
    _assert_untouched(server)


def test_refused_closed_and_non_http_targets_fail_with_the_same_text(server: _Server) -> None:
    with socket.socket() as probe:  # a port that was free a moment ago; nothing listens
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]

    with socket.socket() as listener:  # answers with something that is not HTTP
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        not_http = listener.getsockname()[1]

        def babble() -> None:
            conn, _ = listener.accept()
            with conn:
                conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")

        babbler = threading.Thread(target=babble)
        babbler.start()
        garbled = _failure(HttpSpec(url=f"http://127.0.0.1:{not_http}/"), policy=LOCAL)
        babbler.join(5)

    refused = _failure(HttpSpec(url=_url(server, "/echo")), policy=RESTRICTED)
    unreachable = _failure(HttpSpec(url=f"http://127.0.0.1:{closed}/"), policy=LOCAL)

    for error in (refused, unreachable, garbled):
        assert (error.message, error.type, error.details) == (UNREACHABLE, UNREACHABLE_TYPE, None)
    # Only a refusal by policy is final; a target that is down may come back.
    assert refused.retryable is False
    assert unreachable.retryable is True
    assert garbled.retryable is True
    _assert_untouched(server)


def test_allowed_network_admits_the_local_server(server: _Server) -> None:
    spec = HttpSpec(url=_url(server, "/echo?a=1"), method="POST", json={"n": 1}, query={"b": 2})

    out = _call(spec, policy=LOCAL)

    echoed = out["json"]
    assert echoed["method"] == "POST"
    assert echoed["query"] == {"a": ["1"], "b": ["2"]}
    assert json.loads(echoed["body"]) == {"n": 1}
    assert echoed["headers"]["idempotency-key"] == KEY
    assert echoed["headers"]["host"] == f"127.0.0.1:{server.server_address[1]}"


def test_allowed_host_by_name_keeps_the_name_in_the_host_header(server: _Server) -> None:
    # localhost may resolve to ::1 first, where nothing listens: the next checked address
    # (127.0.0.1) is tried, and the name is what the server is told.
    port = server.server_address[1]
    policy = SideEffectPolicy(private_network=False, allow_hosts=(f"localhost:{port}",))

    out = _call(HttpSpec(url=f"http://localhost:{port}/echo"), policy=policy)

    assert out["json"]["headers"]["host"] == f"localhost:{port}"


def test_allowed_host_admits_only_its_port(server: _Server, second_server: _Server) -> None:
    policy = _only(server)

    assert _call(HttpSpec(url=_url(server, "/echo")), policy=policy)["status"] == 200
    error = _failure(HttpSpec(url=_url(second_server, "/echo")), policy=policy)

    assert (error.message, error.type, error.retryable) == (UNREACHABLE, UNREACHABLE_TYPE, False)
    _assert_untouched(second_server)


def test_guarded_redirects_are_followed_hop_by_hop(server: _Server) -> None:
    out = _call(HttpSpec(url=_url(server, "/redirect"), follow_redirects=True), policy=LOCAL)

    assert out["json"]["method"] == "GET"
    assert out["json"]["headers"]["idempotency-key"] == KEY
    assert server.paths == ["/redirect", "/echo"]


def test_guarded_redirects_are_not_followed_by_default(server: _Server) -> None:
    spec = HttpSpec(url=_url(server, "/redirect"), allowed_statuses=[302])

    out = _call(spec, policy=LOCAL)

    assert out["headers"]["location"] == "/echo"
    assert server.paths == ["/redirect"]


@pytest.mark.parametrize(("status", "method"), [(302, "GET"), (303, "GET"), (307, "POST")])
def test_guarded_redirect_method_and_body_follow_the_status(
    server: _Server, second_server: _Server, status: int, method: str
) -> None:
    target = _url(second_server, "/echo")
    spec = HttpSpec(
        url=_url(server, "/to"),
        method="POST",
        query={"url": target, "status": status},
        body="payload",
        headers={"Authorization": "Bearer t"},
        follow_redirects=True,
    )

    out = _call(spec, policy=LOCAL)

    echoed = out["json"]
    assert echoed["method"] == method
    assert echoed["body"] == ("payload" if method == "POST" else "")
    assert echoed["headers"]["host"] == f"127.0.0.1:{second_server.server_address[1]}"
    assert "authorization" not in echoed["headers"]  # another origin is not given it


def test_redirect_from_an_allowed_host_to_loopback_is_refused(
    server: _Server, second_server: _Server
) -> None:
    spec = HttpSpec(
        url=_url(server, "/to"),
        query={"url": _url(second_server, "/echo")},
        follow_redirects=True,
    )

    error = _failure(spec, policy=_only(server))

    assert (error.message, error.type, error.retryable) == (UNREACHABLE, UNREACHABLE_TYPE, False)
    assert [urlsplit(path).path for path in server.paths] == ["/to"]
    _assert_untouched(second_server)


@pytest.mark.parametrize("host", ["localhost", "127.1", "[::1]", "0x7f000001"])
def test_redirect_to_another_name_of_an_allowed_port_is_refused(server: _Server, host: str) -> None:
    # Only 127.0.0.1:PORT is allowed; the same listener under another name is not.
    port = server.server_address[1]
    spec = HttpSpec(
        url=_url(server, "/to"), query={"url": f"http://{host}:{port}/echo"}, follow_redirects=True
    )

    error = _failure(spec, policy=_only(server))

    assert (error.message, error.type) == (UNREACHABLE, UNREACHABLE_TYPE)
    assert [urlsplit(path).path for path in server.paths] == ["/to"]


def test_guarded_redirect_to_another_scheme_is_refused(server: _Server) -> None:
    spec = HttpSpec(
        url=_url(server, "/to"), query={"url": "file:///etc/passwd"}, follow_redirects=True
    )

    error = _failure(spec, policy=LOCAL)

    assert (error.type, error.retryable) == ("InvalidUrl", False)


def test_guarded_redirect_loop_stops_at_the_hop_limit(server: _Server) -> None:
    error = _failure(HttpSpec(url=_url(server, "/loop"), follow_redirects=True), policy=LOCAL)

    assert (error.type, error.retryable) == ("TooManyRedirects", False)
    assert len(server.paths) == 21  # the first request and 20 redirects


def test_the_executor_enforces_the_dispatch_policy(server: _Server) -> None:
    context = ActivityContext(
        execution_id="e-1", activity_id="a", attempt=1, workflow="w", idempotency_key=KEY
    )

    async def start_child() -> str:
        raise AssertionError("http starts no child")

    def dispatch(policy: SideEffectPolicy) -> Dispatch:
        return Dispatch(
            context=context,
            timeout=5.0,
            tools=ActivityRegistry(),
            start_child=start_child,
            policy=policy,
        )

    rendered = {"url": _url(server, "/echo")}
    step = HttpStep.model_validate({"http": rendered})

    async def attempt(policy: SideEffectPolicy) -> Any:
        return await KIND.execute(step, rendered, dispatch(policy))

    with pytest.raises(ActivityError) as caught:
        asyncio.run(attempt(RESTRICTED))
    assert caught.value.type == UNREACHABLE_TYPE
    _assert_untouched(server)
    assert asyncio.run(attempt(LOCAL))["json"]["headers"]["idempotency-key"] == KEY


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[_Server, ssl.SSLContext]]:
    """An HTTPS server on 127.0.0.1 whose certificate names `localhost` only (no IP)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is needed to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "2",
            "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    server_side = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_side.load_cert_chain(cert, key)
    client_side = ssl.create_default_context(cafile=str(cert))
    with _serve() as srv:
        srv.socket = server_side.wrap_socket(srv.socket, server_side=True)
        yield srv, client_side


def test_https_to_a_checked_address_still_verifies_the_name(
    tls_server: tuple[_Server, ssl.SSLContext],
) -> None:
    # The connection goes to 127.0.0.1, the certificate names localhost: only a TLS
    # handshake that sends and verifies the name succeeds.
    srv, trust = tls_server
    port = srv.server_address[1]

    async def fetch(url: str) -> dict[str, Any]:
        async with httpx.AsyncClient(verify=trust) as client:
            return await run_http(
                HttpSpec(url=url), timeout=5.0, idempotency_key=KEY, client=client, policy=LOCAL
            )

    out = _run(fetch(f"https://localhost:{port}/echo"))
    assert out["json"]["headers"]["host"] == f"localhost:{port}"

    # Addressed by IP, the same certificate does not verify: the name is what is checked.
    with pytest.raises(ActivityError) as caught:
        _run(fetch(f"https://127.0.0.1:{port}/echo"))
    assert caught.value.message == UNREACHABLE
