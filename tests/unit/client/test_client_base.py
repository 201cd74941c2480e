"""The client's own pieces, without a server: problem documents (and whatever a proxy
answers) into `wovyr.errors`, the SSE reader, the URL and key it is made with, and a server
that does not answer. Answers come from httpx's MockTransport."""

from __future__ import annotations

import asyncio
import types

import httpx
import pytest

import wovyr.client
from wovyr.client import Client, aio, base, models, sync
from wovyr.client.base import SseDecoder, StreamMessage, api_key_from, error_of
from wovyr.errors import (
    AccessDenied,
    ConfigError,
    Conflict,
    NotFound,
    QuotaExceeded,
    RemoteError,
    RequestInvalid,
    ServerError,
    ServerUnreachable,
    StoreUnavailable,
)


@pytest.mark.parametrize("module", [wovyr.client, aio, base, models, sync])
def test_every_module_exports_a_sorted_all(module: types.ModuleType) -> None:
    assert module.__all__ == sorted(module.__all__)
    assert all(hasattr(module, name) for name in module.__all__)


def problem(status: int, detail: str = "no", **extra: object) -> httpx.Response:
    body = {"type": "urn:wovyr:problem:x", "title": "t", "status": status, "detail": detail}
    return httpx.Response(status, json={**body, **extra})


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, RequestInvalid),
        (401, AccessDenied),
        (403, AccessDenied),
        (404, NotFound),
        (405, RemoteError),
        (409, Conflict),
        (413, RequestInvalid),
        (415, RequestInvalid),
        (422, RequestInvalid),
        (429, QuotaExceeded),
        (500, ServerError),
        (502, ServerError),
        (503, StoreUnavailable),
    ],
)
def test_each_status_is_its_error(status: int, kind: type[Exception]) -> None:
    exc = error_of(problem(status, "the detail"))
    assert type(exc) is kind
    assert exc.message == "the detail"
    if isinstance(exc, RemoteError):
        assert exc.status == status and exc.type == "urn:wovyr:problem:x"


def test_a_422_carries_its_located_problems() -> None:
    located = {"file": "", "line": 3, "column": 7, "path": "activities.0", "message": "bad",
               "hint": "say it"}  # fmt: skip
    exc = error_of(problem(422, "invalid", problems=[located, "not a problem", {"message": 1}]))
    assert isinstance(exc, RequestInvalid)
    first, second = exc.problems
    assert (first.line, first.column, first.path, first.hint) == (3, 7, "activities.0", "say it")
    assert second.message == "1" and second.line is None


def test_retry_after_seconds_or_a_date_a_proxy_sent() -> None:
    body = {"detail": "the budget is spent"}
    exc = error_of(httpx.Response(429, json=body, headers={"Retry-After": "3600"}))
    assert isinstance(exc, QuotaExceeded) and exc.retry_after == 3600.0
    dated = {"Retry-After": "Wed, 21 Oct 2026 07:28:00 GMT"}
    exc = error_of(httpx.Response(429, json=body, headers=dated))
    assert isinstance(exc, QuotaExceeded) and exc.retry_after == 1.0


def test_a_proxys_page_is_still_an_error_with_the_status() -> None:
    exc = error_of(httpx.Response(502, text="<html>Bad Gateway</html>"))
    assert isinstance(exc, ServerError) and exc.status == 502 and exc.message == "HTTP 502"


def test_sse_messages_from_lines() -> None:
    decoder = SseDecoder()
    lines = [
        ": keep-alive", "", "id: 3-0", "event: event", 'data: {"seq": 3,', 'data: "x": 1}', "",
        "id: 3-1", "event: end", 'data: {"status": "completed"}', "",
    ]  # fmt: skip
    out = [m for m in map(decoder.feed, lines) if m is not None]
    assert out == [
        StreamMessage("3-0", "event", {"seq": 3, "x": 1}),
        StreamMessage("3-1", "end", {"status": "completed"}),
    ]


def test_the_url_and_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WOVYR_SERVER", raising=False)
    with pytest.raises(ConfigError, match="WOVYR_SERVER"):
        Client()
    with pytest.raises(ConfigError, match="http"):
        Client("wovyr.example.com")
    monkeypatch.setenv("WOVYR_API_KEY", "wvr_env")
    assert api_key_from(None) == "wvr_env" and api_key_from("wvr_arg") == "wvr_arg"
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"status": "ok"})

    monkeypatch.setenv("WOVYR_SERVER", "http://wovyr.test/")
    with Client(transport=httpx.MockTransport(answer)) as client:
        assert client.healthz() == {"status": "ok"}
        assert client.get_definition("a/b", "1 2")
    assert seen[0].headers["Authorization"] == "Bearer wvr_env"
    assert seen[1].url.raw_path == b"/api/v1/definitions/a%2Fb/1%202"  # one segment each


def test_clients_share_the_processs_tls_context(tls_builds: list[object]) -> None:
    """Every client of a process, blocking or async, shares one TLS context: a client made
    per call builds none."""
    assert base.tls_context() is base.tls_context()
    for _ in range(3):
        with Client("https://wovyr.test") as client:
            assert client.base_url == "https://wovyr.test"
        asyncio.run(aio.AsyncClient("https://wovyr.test").aclose())
    assert tls_builds == []


def test_a_server_that_does_not_answer() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    with Client("http://127.0.0.1:9", transport=httpx.MockTransport(refuse)) as client:
        with pytest.raises(ServerUnreachable, match="could not be reached"):
            client.list_workflows()
        with pytest.raises(ServerUnreachable):
            list(client.stream_workflow("x"))


def test_readyz_answers_when_not_ready_and_errors_stop_a_stream() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/readyz":
            return httpx.Response(503, json={"status": "not ready", "checks": {}})
        return httpx.Response(404, json={"detail": "The requested resource does not exist."})

    with Client("http://wovyr.test", transport=httpx.MockTransport(answer)) as client:
        assert client.readyz()["status"] == "not ready"
        with pytest.raises(NotFound):
            list(client.stream_workflow("nope"))
