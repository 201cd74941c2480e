"""Where an `http` activity may connect: the egress guard of a `SideEffectPolicy`.

When `policy.private_network` is off, a target host is resolved here and every address it
resolves to must be public (`is_public`) or admitted by the policy's allow-lists
(`admitted`); the caller then connects to one of the addresses that were checked, never to
a name resolved again later (no DNS rebinding between check and connect).

Every refusal and every failure to resolve reads the same (`UNREACHABLE`), so the errors
cannot tell a closed port from a refused or an unknown host: a workflow must not be a port
scanner. Messages never carry the URL (it may carry tokens).

Only the standard library is used: parsing a workflow must not load an HTTP client.
"""

from __future__ import annotations

import functools
import ipaddress
import re
import socket
from collections.abc import Awaitable, Callable
from types import ModuleType
from typing import Any, TypeVar

from wovyr.activities.base import ActivityError
from wovyr.activities.policy import SideEffectPolicy

__all__ = [
    "UNREACHABLE",
    "UNREACHABLE_TYPE",
    "IPAddress",
    "admitted",
    "checked_addresses",
    "is_public",
    "literal_address",
    "send_pinned",
    "unreachable",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
T = TypeVar("T")

UNREACHABLE = "HTTP target not reachable"
UNREACHABLE_TYPE = "TargetUnreachable"

_V4 = ipaddress.IPv4Network
_V6 = ipaddress.IPv6Network
# Refused on top of what `ipaddress` calls private, reserved, loopback, link-local, multicast
# or unspecified (and what is not global, which brings in CGNAT 100.64.0.0/10).
_REFUSED_V4 = (
    _V4("169.254.169.254/32"),  # cloud metadata (also link-local)
    _V4("100.100.100.200/32"),  # Alibaba Cloud metadata (also CGNAT)
    _V4("192.0.0.0/24"),  # IETF protocol assignments
    _V4("198.18.0.0/15"),  # benchmarking
)
_REFUSED_V6 = (
    _V6("fd00:ec2::254/128"),  # AWS metadata over IPv6 (also unique-local)
    _V6("fec0::/10"),  # site-local (deprecated, still routed by some stacks)
    _V6("64:ff9b:1::/48"),  # local-use NAT64
    _V6("2001:db8::/32"),  # documentation
)
_NAT64 = _V6("64:ff9b::/96")  # well-known NAT64 prefix: judged by the IPv4 address inside
_IPV4_COMPATIBLE = _V6("::/96")  # deprecated IPv4-compatible form ::a.b.c.d


def unreachable(*, retryable: bool) -> ActivityError:
    """The one error for a refused, unresolvable or unreachable target."""
    return ActivityError(UNREACHABLE, type=UNREACHABLE_TYPE, retryable=retryable)


def is_public(address: IPAddress) -> bool:
    """Is `address` a public unicast address, in every form it may hide another one in?

    IPv4-mapped (`::ffff:a.b.c.d`), IPv4-compatible (`::a.b.c.d`), 6to4 (`2002::/16`),
    Teredo and NAT64 (`64:ff9b::/96`) addresses are judged by the IPv4 address they carry
    as well.
    """
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(address)
        if address in _NAT64:
            return all(_public_one(v4) for v4 in embedded)
        return _public_one(address) and all(_public_one(v4) for v4 in embedded)
    return _public_one(address)


def _embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    found: list[ipaddress.IPv4Address] = []
    if address.ipv4_mapped is not None:
        found.append(address.ipv4_mapped)
    if address in _IPV4_COMPATIBLE or address in _NAT64:
        found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    if address.teredo is not None:
        found.extend(address.teredo)
    return found


def _public_one(address: IPAddress) -> bool:
    if (
        not address.is_global
        or address.is_private
        or address.is_loopback
        or address.is_link_local
        or address.is_multicast
        or address.is_unspecified
        or address.is_reserved
    ):
        return False
    if isinstance(address, ipaddress.IPv4Address):
        return not any(address in network for network in _REFUSED_V4)
    return not address.is_site_local and not any(address in network for network in _REFUSED_V6)


_LEGACY_V4 = re.compile(r"^(?:0x[0-9a-f]*|\d+)(?:\.(?:0x[0-9a-f]*|\d+)){0,3}$")


def literal_address(host: str) -> IPAddress | None:
    """The address a host written in a URL names without any lookup: an IP literal (also
    the shorthand and decimal/hex IPv4 forms `127.1`, `2130706433`, `0x7f.1`), or loopback
    for `localhost` and its subdomains; None for a name only DNS can answer."""
    name = _host_key(host)
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        pass
    if name == "localhost" or name.endswith(".localhost"):
        return ipaddress.IPv4Address("127.0.0.1")
    if _LEGACY_V4.match(name):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(name))
        except OSError:
            return None
    return None


def admitted(address: IPAddress, *, host: str, port: int, policy: SideEffectPolicy) -> bool:
    """May `policy` connect to `address` (resolved from `host`) on `port`?

    Public addresses always; others only with `private_network`, or when the address lies
    in one of `allow_networks`, or `host:port` (the host as written in the URL, `[v6]:port`
    for an IPv6 literal) is one of `allow_hosts`.
    """
    if policy.private_network or is_public(address):
        return True
    candidates = [address]
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        candidates.append(address.ipv4_mapped)
    networks = _networks(policy.allow_networks)
    if any(candidate in network for candidate in candidates for network in networks):
        return True
    # By the name only: another name of the same address may be another virtual host.
    return (_host_key(host), port) in _host_ports(policy.allow_hosts)


async def checked_addresses(host: str, port: int, policy: SideEffectPolicy) -> list[str]:
    """Resolve `host` and return the addresses to connect to, each one checked.

    Raises `unreachable(...)` when the name does not resolve (retryable: DNS may come
    back) or when any address it resolves to is refused (not retryable: the policy will
    refuse it again). One refused address refuses the host: a name must not mix a public
    address with a private one to get through.
    """
    import asyncio  # loaded by the first request, not by importing the kinds

    try:
        infos = await asyncio.get_running_loop().getaddrinfo(
            host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
        )
    except (OSError, UnicodeError) as exc:  # socket.gaierror is an OSError
        raise unreachable(retryable=True) from exc
    addresses: list[str] = []
    for info in infos:
        text = str(info[4][0])
        if text not in addresses:
            addresses.append(text)
    if not addresses:
        raise unreachable(retryable=True)
    for text in addresses:
        try:
            address = ipaddress.ip_address(text)
        except ValueError as exc:
            raise unreachable(retryable=False) from exc
        if not admitted(address, host=host, port=port, policy=policy):
            raise unreachable(retryable=False)
    return addresses


async def send_pinned(
    http: ModuleType,
    request: Any,
    host: str,
    policy: SideEffectPolicy,
    send: Callable[[Any], Awaitable[T]],
) -> T:
    """`send(request)`, addressed by name (`host`), to the first checked address that
    connects. `http` is the HTTP library the request is of (`httpx`, or the MCP SDK's).

    The request keeps its `Host` header and, over TLS, the name is the server name that is
    sent and verified; only the address connected to is the one that was checked.
    """
    url = request.url
    port = url.port or (443 if url.scheme == "https" else 80)
    addresses = await checked_addresses(host, port, policy)
    extensions = dict(request.extensions)
    if url.scheme == "https":
        extensions["sni_hostname"] = host
    failure: Exception | None = None
    for address in addresses:
        pinned = http.Request(
            request.method,
            url.copy_with(host=address),
            headers=request.headers,
            stream=request.stream,
            extensions=extensions,
        )
        try:
            return await send(pinned)
        except http.ConnectError as exc:  # nothing was sent: the next address may answer
            failure = exc
    assert failure is not None  # checked_addresses returns at least one address
    raise failure


def _host_key(host: str) -> str:
    """A host as allow-lists compare it: lower case, no brackets, no trailing dot; an IP
    literal in its canonical form."""
    name = host.strip().strip("[]").rstrip(".").lower()
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        return name


@functools.lru_cache(maxsize=64)
def _networks(cidrs: tuple[str, ...]) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    # An entry that is not a CIDR admits nothing (validating it is the policy setter's job).
    found: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
    for cidr in cidrs:
        try:
            found.append(ipaddress.ip_network(cidr.strip(), strict=False))
        except ValueError:
            continue
    return tuple(found)


@functools.lru_cache(maxsize=64)
def _host_ports(entries: tuple[str, ...]) -> frozenset[tuple[str, int]]:
    found: set[tuple[str, int]] = set()
    for entry in entries:
        host, sep, port = entry.strip().rpartition(":")
        if sep and host and port.isdigit():
            found.add((_host_key(host), int(port)))
    return frozenset(found)
