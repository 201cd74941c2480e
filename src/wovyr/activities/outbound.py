"""Outbound HTTP: a request sent as the tenant's `SideEffectPolicy` allows.

Every kind that talks HTTP (`http`, `llm`, `agent`, memory embeddings) sends through
`send_checked`. Under a policy without `private_network` every hop is guarded: the host is
resolved and checked (`wovyr.activities.egress`), the request goes to a checked address (with
the original `Host` header, and the name as TLS server name), and redirects are followed
here hop by hop with the same check.

httpx is imported only where a request is sent: parsing a workflow does not load it.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from wovyr.activities import egress
from wovyr.activities.base import ActivityError, NonRetryableError
from wovyr.activities.policy import SideEffectPolicy

if TYPE_CHECKING:
    import ssl
    from collections.abc import Awaitable

    import httpx

__all__ = [
    "ALLOWED_SCHEMES",
    "SIGNATURE_HEADER",
    "Sent",
    "post_signed",
    "send_checked",
    "sign_body",
    "signature_of",
    "tls_context",
]

ALLOWED_SCHEMES = frozenset({"http", "https"})
# Webhooks are signed both ways (inbound triggers, outbound deliveries) as GitHub and Stripe
# sign theirs: `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`, one `v1` per key.
SIGNATURE_HEADER = "Wovyr-Signature"


def sign_body(keys: Sequence[bytes], body: bytes, at: datetime) -> str:
    """The `Wovyr-Signature` value of `body` at `at`: one `v1` per key (during a key
    rotation a receiver holding either key accepts it)."""
    stamp = int(at.timestamp())
    signed = f"{stamp}.".encode() + body
    digests = [hmac.new(key, signed, hashlib.sha256).hexdigest() for key in keys]
    return ",".join([f"t={stamp}", *(f"v1={d}" for d in digests)])


def signature_of(
    header: str, body: bytes, keys: Sequence[bytes], now: datetime, tolerance: float
) -> str | None:
    """The `v1` of `header` that one of `keys` made over `body` (compared in constant
    time), when its timestamp is within `tolerance` seconds of `now`; else None."""
    parts: dict[str, list[str]] = {}
    for item in header.split(","):
        name, _, value = item.strip().partition("=")
        parts.setdefault(name, []).append(value)
    try:
        stamp = int(parts.get("t", [""])[0])
    except ValueError:
        return None
    if abs(now.timestamp() - stamp) > tolerance:
        return None
    signed = f"{stamp}.".encode() + body
    found = None
    for key in keys:
        expected = hmac.new(key, signed, hashlib.sha256).hexdigest().encode()
        for given in parts.get("v1", []):
            if hmac.compare_digest(expected, given.encode()):
                found = given
    return found


@dataclass(frozen=True)
class Sent:
    """What one delivery attempt got: the status (None: no answer) and, when it failed,
    why, and whether another attempt may do better."""

    status: int | None
    error: str = ""
    retryable: bool = True

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


async def post_signed(
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    policy: SideEffectPolicy,
    *,
    timeout: float = 10.0,
) -> Sent:
    """POST `body` to `url` as the tenant's policy allows (`send_checked`: no private
    address unless the policy admits it); redirects are not followed (a receiver answers
    where it was registered)."""
    import httpx

    try:
        async with httpx.AsyncClient(timeout=timeout, verify=tls_context()) as client:
            request = client.build_request("POST", url, content=body, headers=dict(headers))
            response = await send_checked(client, request, policy, follow=False)
            await response.aclose()
    except ActivityError as exc:
        return Sent(None, exc.message, exc.retryable)
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        return Sent(None, f"{type(exc).__name__}: the receiver did not answer")
    if 200 <= response.status_code < 300:
        return Sent(response.status_code)
    return Sent(response.status_code, f"HTTP {response.status_code}")


@functools.cache
def tls_context() -> ssl.SSLContext:
    """httpx's default TLS context (its CA bundle, or `SSL_CERT_FILE` / `SSL_CERT_DIR`), built
    once per process for every outbound request: building one loads the CA bundle, 15-30 ms
    of CPU that each `http` step, model call and webhook delivery would otherwise pay."""
    import httpx

    return httpx.create_ssl_context()


async def send_checked(
    client: httpx.AsyncClient, request: httpx.Request, policy: SideEffectPolicy, *, follow: bool
) -> httpx.Response:
    """Send `request` as the policy allows (streamed: the caller reads and closes it). Under
    a policy without `private_network` every hop goes to a checked address (the module
    docstring); every kind that talks HTTP sends through here."""
    if policy.private_network:
        return await client.send(request, stream=True, follow_redirects=follow)
    return await _send_guarded(client, request, policy, follow)


async def _send_guarded(
    client: httpx.AsyncClient, request: httpx.Request, policy: SideEffectPolicy, follow: bool
) -> httpx.Response:
    """Send `request` to a checked address; follow redirects here, each hop checked."""
    hops = 0
    while True:
        response = await _send_pinned(client, request, policy)
        if not (follow and response.has_redirect_location):
            return response
        try:
            if hops >= client.max_redirects:
                # A redirect loop will loop again on the next attempt.
                raise NonRetryableError(
                    f"more than {client.max_redirects} redirects", type="TooManyRedirects"
                )
            request = _redirect_request(request, response)
        finally:
            await response.aclose()
        hops += 1


async def _send_pinned(
    client: httpx.AsyncClient, request: httpx.Request, policy: SideEffectPolicy
) -> httpx.Response:
    """Send `request` (addressed by name) to the first checked address that connects
    (`egress.send_pinned`)."""
    import httpx

    _check_scheme(request.url)

    def send(pinned: httpx.Request) -> Awaitable[httpx.Response]:
        return client.send(pinned, stream=True, follow_redirects=False)

    host = request.url.raw_host.decode("ascii")
    return await egress.send_pinned(httpx, request, host, policy, send)


def _redirect_request(request: httpx.Request, response: httpx.Response) -> httpx.Request:
    """The request a redirect asks for, as httpx would build it (by name, not address)."""
    import httpx

    try:
        location = httpx.URL(response.headers["Location"])
    except httpx.InvalidURL as exc:
        raise NonRetryableError("a redirect gave an invalid location", type="InvalidUrl") from exc
    if location.scheme and not location.host:
        location = location.copy_with(host=request.url.host)
    url = request.url.join(location) if location.is_relative_url else location
    if request.url.fragment and not url.fragment:
        url = url.copy_with(fragment=request.url.fragment)
    _check_scheme(url)

    status = response.status_code
    method = request.method
    if status in (302, 303) and method != "HEAD":
        method = "GET"
    if status == 301 and method == "POST":
        method = "GET"

    headers = httpx.Headers(request.headers)
    same_origin = (url.scheme, url.host, url.port) == (
        request.url.scheme,
        request.url.host,
        request.url.port,
    )
    if not same_origin:
        if not _is_https_upgrade(request.url, url):
            headers.pop("Authorization", None)
        headers["Host"] = url.netloc.decode("ascii")
    body_dropped = method != request.method and method == "GET"
    if body_dropped:
        headers.pop("Content-Length", None)
        headers.pop("Transfer-Encoding", None)
    headers.pop("Cookie", None)
    return httpx.Request(
        method,
        url,
        headers=headers,
        stream=None if body_dropped else request.stream,
        extensions=request.extensions,
    )


def _is_https_upgrade(before: httpx.URL, after: httpx.URL) -> bool:
    return (
        before.host == after.host
        and before.scheme == "http"
        and before.port in (80, None)
        and after.scheme == "https"
        and after.port in (443, None)
    )


def _check_scheme(url: httpx.URL) -> None:
    if url.scheme not in ALLOWED_SCHEMES or not url.host:
        raise NonRetryableError(
            "a redirect led to a URL that is not http or https", type="InvalidUrl"
        )
