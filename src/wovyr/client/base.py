"""What the two clients share: the key and URL they are made with, the translation of
problem documents into `wovyr.errors`, and the reading of Server-Sent Events.

Nothing here (nor anywhere in `wovyr.client`) imports the engine, the store or the server:
the client is what a remote user installs, with httpx as its only dependency
(pyproject's import-linter contracts hold that).
"""

from __future__ import annotations

import functools
import json
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from wovyr.errors import (
    AccessDenied,
    Conflict,
    NotFound,
    Problem,
    QuotaExceeded,
    RemoteError,
    RequestInvalid,
    ServerError,
    ServerUnreachable,
    StoreUnavailable,
    WovyrError,
)
from wovyr.settings import read

__all__ = [  # noqa: RUF022 - plain sorted(), as the tests check
    "API_KEY_ENV",
    "DEFAULT_TIMEOUT",
    "ENDED",
    "Retry",
    "SERVER_ENV",
    "SseDecoder",
    "StreamMessage",
    "api_key_from",
    "error_of",
    "headers_of",
    "query",
    "tls_context",
    "unreachable",
]

API_KEY_ENV = "WOVYR_API_KEY"
SERVER_ENV = "WOVYR_SERVER"
DEFAULT_TIMEOUT = 30.0  # seconds; a watched stream reads with no timeout
ENDED = frozenset({"completed", "failed", "cancelled"})  # what `wait_for_result` waits for
# Methods a server may be asked again after a 503 (the store unavailable: whether the first
# request took effect is unknown); a POST or PATCH only with an Idempotency-Key.
_REPEATABLE = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})


@dataclass(frozen=True)
class Retry:
    """When the clients ask again by themselves: an answer 429 (a quota or rate limit:
    nothing was done) or 503 (the store unavailable; only for a request that may be repeated:
    GET, HEAD, OPTIONS, PUT, DELETE, or one with an `Idempotency-Key`), at most `attempts`
    more times, each after the answer's `Retry-After` (1 s without one). A `Retry-After`
    over `max_wait` seconds (a daily quota says: after midnight) is not waited for: the
    error is raised at once, with `retry_after`. `Retry(attempts=0)` never retries.
    `on_retry(tries, seconds, response)` is told before each wait (to log it)."""

    attempts: int = 3
    max_wait: float = 60.0
    on_retry: Callable[[int, float, httpx.Response], object] | None = None

    def delay(self, response: httpx.Response, tried: int) -> float | None:
        """Seconds to wait before asking again after `response` (None: do not), when
        `tried` retries were made already."""
        status = response.status_code
        if tried >= self.attempts or status not in (429, 503):
            return None
        request = response.request
        if (
            status == 503
            and request.method not in _REPEATABLE
            and "Idempotency-Key" not in request.headers
        ):
            return None
        wait = _retry_after(response)
        return wait if wait <= self.max_wait else None


def api_key_from(api_key: str | None, environ: Mapping[str, str] | None = None) -> str | None:
    """The key given, else `WOVYR_API_KEY` (None: requests go without one; /healthz and
    /readyz answer, everything else is 401)."""
    if api_key:
        return api_key
    return read(API_KEY_ENV, environ)  # or WOVYR_API_KEY_FILE's file


@functools.cache
def tls_context() -> ssl.SSLContext:
    """httpx's default TLS context (its CA bundle, or `SSL_CERT_FILE` / `SSL_CERT_DIR`), built
    once per process and shared by every client: building one loads the CA bundle, 15-30 ms
    of CPU that each client made would pay again."""
    return httpx.create_ssl_context()


def headers_of(api_key: str | None) -> dict[str, str]:
    headers = {"Accept": "application/json", "User-Agent": "wovyr-client"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


def query(**params: Any) -> dict[str, Any]:
    """Query parameters without the ones left out (None); booleans as `true`/`false`."""
    out: dict[str, Any] = {}
    for name, value in params.items():
        if value is None:
            continue
        out[name] = ("true" if value else "false") if isinstance(value, bool) else value
    return out


def _problems(body: Mapping[str, Any]) -> list[Problem]:
    out = []
    for item in body.get("problems") or []:
        if isinstance(item, dict):
            out.append(
                Problem(
                    str(item.get("message", "")),
                    path=str(item.get("path") or ""),
                    file=str(item.get("file") or ""),
                    line=item.get("line") if isinstance(item.get("line"), int) else None,
                    column=item.get("column") if isinstance(item.get("column"), int) else None,
                    hint=item.get("hint") if isinstance(item.get("hint"), str) else None,
                )
            )
    return out


def _retry_after(response: httpx.Response) -> float:
    try:
        return max(0.0, float(response.headers.get("Retry-After", "1")))
    except ValueError:  # an HTTP date: the server sends seconds, a proxy might not
        return 1.0


def error_of(response: httpx.Response) -> WovyrError:
    """The exception for an error answer (a problem document, or whatever a proxy sent)."""
    status = response.status_code
    try:
        body = response.json()
    except (ValueError, UnicodeDecodeError):
        body = None
    if not isinstance(body, dict):
        body = {}
    detail = str(body.get("detail") or body.get("title") or f"HTTP {status}")
    problems = _problems(body)
    kind = str(body.get("type", ""))
    if status == 404:
        return NotFound(detail)
    if status in (409, 412):  # 412: the object changed since the ETag sent as If-Match
        return Conflict(detail)
    if status == 429:
        return QuotaExceeded(detail, retry_after=_retry_after(response))
    if status == 503:
        return StoreUnavailable(detail)
    if status in (401, 403):
        return AccessDenied(detail, status=status, problems=problems, type=kind)
    if status in (400, 413, 415, 422):
        return RequestInvalid(detail, status=status, problems=problems, type=kind)
    if 400 <= status < 500:
        return RemoteError(detail, status=status, problems=problems, type=kind)
    return ServerError(detail, status=status, problems=problems, type=kind)


def unreachable(base_url: str, exc: httpx.TransportError) -> ServerUnreachable:
    return ServerUnreachable(
        f"the server at {base_url} could not be reached: {type(exc).__name__}: {exc}",
        hint="check --server / WOVYR_SERVER",
    )


@dataclass(frozen=True)
class StreamMessage:
    """One Server-Sent Event of an execution's stream: `event` is `event`, `attempt`,
    `token` or `end`; `id` is the position to resume after it."""

    id: str
    event: str
    data: dict[str, Any]


@dataclass
class SseDecoder:
    """Lines of a `text/event-stream` in, messages out (comments and keep-alives skipped)."""

    _event: str = ""
    _data: list[str] = field(default_factory=list)
    _id: str = ""

    def feed(self, line: str) -> StreamMessage | None:
        if line == "":
            if not self._data:
                self._event = ""
                return None
            data = json.loads("\n".join(self._data))
            message = StreamMessage(self._id, self._event or "message", data)
            self._event, self._data = "", []
            return message
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        elif name == "id":
            self._id = value
        return None
