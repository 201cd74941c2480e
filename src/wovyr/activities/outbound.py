"""Outbound HTTP: a request sent as the tenant's `SideEffectPolicy` allows.

Every kind that talks HTTP (`http`, `llm`, `agent`, memory embeddings) sends through
`send_checked`. Under a policy without `private_network` every hop is guarded: the host is
resolved and checked (`wovyr.activities.egress`), the request goes to a checked address (with
the original `Host` header, and the name as TLS server name), and redirects are followed
here hop by hop with the same check.

httpx is imported only where a request is sent: parsing a workflow does not load it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wovyr.activities import egress
from wovyr.activities.base import NonRetryableError
from wovyr.activities.policy import SideEffectPolicy

if TYPE_CHECKING:
    from collections.abc import Awaitable

    import httpx

__all__ = ["ALLOWED_SCHEMES", "send_checked"]

ALLOWED_SCHEMES = frozenset({"http", "https"})


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
