"""The `http` kind: one HTTP request with httpx, checked and size-capped.

Failures become `ActivityError`s whose `type` names the cause (`Timeout`, `ConnectionError`,
`HttpStatus`, `ResponseTooLarge`, `InvalidUrl`, ...) so `retry.non_retryable` can match them.
Error messages and details leave the URL out: it may carry credentials or tokens, and
errors end up in the durable event log.

Under a policy without `private_network` (see `wovyr.activities.egress`) every hop is
guarded: the host is resolved and checked, the request goes to a checked address (with the
original `Host` header, and the name as TLS server name), redirects are followed hop by hop
with the same check (`wovyr.activities.outbound`), and every refused or unreachable target
fails alike (`TargetUnreachable`).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from wovyr.activities import egress
from wovyr.activities.base import ActivityError, NonRetryableError
from wovyr.activities.dispatch import Dispatch
from wovyr.activities.kinds import ActivityKind, StepProblem, register_kind
from wovyr.activities.outbound import ALLOWED_SCHEMES, send_checked, tls_context
from wovyr.activities.policy import TRUSTED, SideEffectPolicy
from wovyr.activities.shown import redact_http
from wovyr.kinds.steps import HTTP, HttpSpec, HttpStep

if TYPE_CHECKING:
    import httpx

__all__ = ["ERROR_EXCERPT_BYTES", "KIND", "HttpSpec", "HttpStep", "run_http"]


ERROR_EXCERPT_BYTES = 2048
# Throttling and request-timeout statuses are worth another attempt like server errors.
_RETRYABLE_CLIENT_STATUSES = frozenset({408, 429})


async def run_http(
    spec: HttpSpec,
    *,
    timeout: float | None,
    idempotency_key: str,
    client: httpx.AsyncClient | None = None,
    policy: SideEffectPolicy = TRUSTED,
    trace_headers: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Send the request `spec` describes; return `{status, headers, json | body}`.

    `trace_headers`: the attempt's W3C trace context (`traceparent`, `tracestate`), sent
    unless the spec sets a `traceparent` header of its own.

    `timeout` bounds the whole exchange, body included (None: no limit of our own). A
    `client` passed in is used as is (its own timeouts still apply) and left open.
    `policy.private_network` off guards every hop (see the module docstring).
    """
    import asyncio  # by the first run, not by importing the kind (a read loads every kind)

    import httpx  # only where a request is sent: parsing a workflow does not load it

    url = _checked_url(spec.url)
    guarded = not policy.private_network
    try:
        async with asyncio.timeout(timeout):
            if client is not None:
                return await _exchange(client, spec, url, idempotency_key, policy, trace_headers)
            # The deadline above is the only clock: httpx's per-phase timeouts are off.
            async with httpx.AsyncClient(timeout=None, verify=tls_context()) as owned:
                return await _exchange(owned, spec, url, idempotency_key, policy, trace_headers)
    except (TimeoutError, httpx.TimeoutException) as exc:
        after = f" after {timeout}s" if timeout is not None else ""
        raise ActivityError(f"HTTP request timed out{after}", type="Timeout") from exc
    except httpx.UnsupportedProtocol as exc:
        raise NonRetryableError(f"unsupported URL: {exc}", type="InvalidUrl") from exc
    except httpx.TransportError as exc:
        if guarded:  # refused, reset, closed, not HTTP: all read the same
            raise egress.unreachable(retryable=True) from exc
        raise ActivityError(
            f"HTTP connection failed: {type(exc).__name__}: {exc}",
            type="ConnectionError",
            retryable=True,
        ) from exc
    except httpx.TooManyRedirects as exc:
        # A redirect loop will loop again on the next attempt.
        raise NonRetryableError(str(exc), type="TooManyRedirects") from exc
    except httpx.RequestError as exc:
        raise ActivityError(f"HTTP request failed: {exc}", type="HttpError") from exc


def _checked_url(raw: str) -> httpx.URL:
    import httpx

    try:
        url = httpx.URL(raw)
    except httpx.InvalidURL as exc:
        raise NonRetryableError(f"invalid URL: {exc}", type="InvalidUrl") from exc
    # Refuse file:, ftp: and friends before any I/O: a workflow must not read local files.
    if url.scheme not in ALLOWED_SCHEMES:
        raise NonRetryableError(
            f"only http and https URLs are allowed (got scheme {url.scheme!r})", type="InvalidUrl"
        )
    if not url.host:
        raise NonRetryableError("the URL has no host", type="InvalidUrl")
    return url


async def _exchange(
    client: httpx.AsyncClient,
    spec: HttpSpec,
    url: httpx.URL,
    idempotency_key: str,
    policy: SideEffectPolicy,
    trace_headers: Mapping[str, str] | None,
) -> dict[str, Any]:
    request = _build_request(client, spec, url, idempotency_key, trace_headers)
    response = await send_checked(client, request, policy, follow=spec.follow_redirects)
    try:
        if not _status_allowed(response.status_code, spec.allowed_statuses):
            raise await _status_error(response)
        content = await _read_capped(response, spec.max_response_bytes)
        return _output(response, content)
    finally:
        await response.aclose()


def _build_request(
    client: httpx.AsyncClient,
    spec: HttpSpec,
    url: httpx.URL,
    idempotency_key: str,
    trace_headers: Mapping[str, str] | None = None,
) -> httpx.Request:
    if spec.json_body is not None and spec.body is not None:
        raise NonRetryableError("give either 'json' or 'body', not both", type="InvalidRequest")
    headers = dict(spec.headers)
    # The key lets the server deduplicate retried attempts; a key the author set wins.
    if not any(name.lower() == "idempotency-key" for name in headers):
        headers["Idempotency-Key"] = idempotency_key
    # The attempt's trace continues at the server, unless the author sent a context of
    # their own (then it is theirs whole: no `tracestate` of ours beside their parent).
    if trace_headers and not any(name.lower() == "traceparent" for name in headers):
        headers.update(trace_headers)
    # A query string in the URL is kept; a key given in `query:` replaces the same key there.
    params = url.params.merge(_query_params(spec.query))
    return client.build_request(
        spec.method,
        url,
        headers=headers,
        params=params,
        json=spec.json_body,
        content=spec.body,
    )


def _query_params(query: dict[str, Any]) -> dict[str, Any]:
    """httpx encodes scalars and lists of scalars; anything nested is sent as JSON text."""

    def scalar(value: Any) -> Any:
        if value is None or isinstance(value, str | int | float | bool):
            return value
        return json.dumps(value, separators=(",", ":"))

    return {
        name: [scalar(v) for v in value] if isinstance(value, list | tuple) else scalar(value)
        for name, value in query.items()
    }


def _status_allowed(status: int, allowed: list[int]) -> bool:
    return status in allowed if allowed else 200 <= status < 300


async def _status_error(response: httpx.Response) -> ActivityError:
    status = response.status_code
    # Only an excerpt is kept, so a huge error page is not read (nor reported as too large).
    excerpt = _decode(response, await _read_prefix(response, ERROR_EXCERPT_BYTES))
    retryable = status >= 500 or status in _RETRYABLE_CLIENT_STATUSES
    return ActivityError(
        f"HTTP status {status} is not allowed",
        type="HttpStatus",
        retryable=retryable,
        details={"status": status, "body": excerpt},
    )


async def _read_prefix(response: httpx.Response, limit: int) -> bytes:
    buffer = bytearray()
    async for chunk in response.aiter_bytes():
        buffer += chunk
        if len(buffer) >= limit:
            break
    return bytes(buffer[:limit])


async def _read_capped(response: httpx.Response, limit: int) -> bytes:
    """The whole (decoded) body; fail as soon as it grows past `limit` bytes."""
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _too_large(limit, declared=int(declared))
    buffer = bytearray()
    async for chunk in response.aiter_bytes():
        buffer += chunk
        if len(buffer) > limit:
            raise _too_large(limit)
    return bytes(buffer)


def _too_large(limit: int, *, declared: int | None = None) -> ActivityError:
    details: dict[str, Any] = {"max_response_bytes": limit}
    if declared is not None:
        details["content_length"] = declared
    # The same URL will send the same oversized body again: retrying cannot help.
    return ActivityError(
        f"HTTP response is larger than max_response_bytes ({limit})",
        type="ResponseTooLarge",
        retryable=False,
        details=details,
    )


def _output(response: httpx.Response, content: bytes) -> dict[str, Any]:
    out: dict[str, Any] = {
        "status": response.status_code,
        "headers": {name.lower(): value for name, value in response.headers.items()},
    }
    if _is_json(response) and content:
        try:
            out["json"] = json.loads(content)
        except ValueError:
            pass  # a server that mislabels its body still gets its text returned
        else:
            return out
    out["body"] = _decode(response, content)
    return out


def _is_json(response: httpx.Response) -> bool:
    content_type: str = response.headers.get("content-type", "")
    media_type = content_type.split(";", 1)[0].strip().lower()
    return media_type == "application/json" or media_type.endswith("+json")


def _decode(response: httpx.Response, content: bytes) -> str:
    encoding = response.charset_encoding or "utf-8"
    try:
        return content.decode(encoding, errors="replace")
    except LookupError:  # an unknown charset name in Content-Type
        return content.decode("utf-8", errors="replace")


async def _execute(step: HttpStep, rendered: Any, dispatch: Dispatch) -> Any:
    return await run_http(
        HttpSpec.model_validate(rendered),
        timeout=dispatch.timeout,
        idempotency_key=dispatch.context.idempotency_key,
        policy=dispatch.policy,
        trace_headers=dispatch.context.trace_headers,
    )


def _admits(step: HttpStep, policy: SideEffectPolicy) -> list[StepProblem]:
    """A URL written as a literal address (or `localhost`) the policy refuses; a host name is
    resolved and checked at dispatch, on every attempt and redirect hop, never here."""
    url = step.http.url
    if policy.private_network or "${{" in url:
        return []
    try:
        parsed = urlsplit(url)
        host = parsed.hostname or ""
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
    except ValueError:
        return []  # the attempt reports it
    address = egress.literal_address(host)
    if address is None or egress.admitted(address, host=host, port=port, policy=policy):
        return []
    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    hosts = " ".join(f"--allow-host {shlex.quote(h)}" for h in (*policy.allow_hosts, target))
    return [
        StepProblem(
            ("http", "url"),
            f"{host} is a loopback, private, link-local or metadata address "
            "(private_network: false)",
            hosts,
        )
    ]


KIND = register_kind(
    ActivityKind.of(HTTP, execute=_execute, side_effects=True, admits=_admits, redact=redact_http)
)
