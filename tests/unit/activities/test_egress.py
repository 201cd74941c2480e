"""The egress guard's address checks, on literals: nothing here opens a connection."""

from __future__ import annotations

import asyncio
import ipaddress

import pytest

from wovyr.activities.base import ActivityError
from wovyr.activities.egress import (
    UNREACHABLE,
    UNREACHABLE_TYPE,
    admitted,
    checked_addresses,
    is_public,
)
from wovyr.activities.policy import RESTRICTED, TRUSTED, SideEffectPolicy

REFUSED = [
    # IPv4
    "127.0.0.1",
    "127.255.255.254",
    "10.0.0.1",
    "172.16.0.1",
    "172.31.255.255",
    "192.168.1.1",
    "169.254.169.254",  # cloud metadata
    "169.254.0.1",
    "100.64.0.1",  # CGNAT
    "100.100.100.200",  # Alibaba Cloud metadata
    "0.0.0.0",
    "0.1.2.3",
    "255.255.255.255",
    "224.0.0.1",  # multicast
    "239.255.255.250",
    "240.0.0.1",  # reserved
    "192.0.0.8",
    "192.0.2.1",  # documentation
    "198.51.100.7",
    "203.0.113.9",
    "198.18.0.1",  # benchmarking
    # IPv6
    "::1",
    "::",
    "fe80::1",
    "fc00::1",
    "fd12:3456::1",
    "fd00:ec2::254",  # AWS metadata over IPv6
    "ff02::1",  # multicast
    "fec0::1",  # site-local
    "2001:db8::1",  # documentation
    # IPv4 inside IPv6
    "::ffff:127.0.0.1",  # mapped
    "::ffff:169.254.169.254",
    "::ffff:10.0.0.1",
    "::127.0.0.1",  # compatible
    "::a9fe:a9fe",
    "2002:7f00:1::",  # 6to4 of 127.0.0.1
    "2002:a9fe:a9fe::1",  # 6to4 of 169.254.169.254
    "2002:a00:1::",  # 6to4 of 10.0.0.1
    "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
    "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
    "64:ff9b:1::a00:1",  # local-use NAT64
    "2001:0:4136:e378:8000:63bf:80ff:fffe",  # Teredo, client 127.0.0.1
]
PUBLIC = [
    "8.8.8.8",
    "1.1.1.1",
    "93.184.216.34",
    "100.63.255.255",  # just below CGNAT
    "100.128.0.0",  # just above it
    "172.32.0.1",  # just above 172.16/12
    "2606:4700:4700::1111",
    "2a00:1450:4001:80b::200e",
    "64:ff9b::808:808",  # NAT64 of a public address
    "2002:808:808::1",  # 6to4 of a public address
]


@pytest.mark.parametrize("literal", REFUSED)
def test_non_public_addresses_are_refused(literal: str) -> None:
    address = ipaddress.ip_address(literal)

    assert is_public(address) is False
    assert admitted(address, host=literal, port=80, policy=RESTRICTED) is False
    assert admitted(address, host=literal, port=80, policy=TRUSTED) is True


@pytest.mark.parametrize("literal", PUBLIC)
def test_public_addresses_are_admitted(literal: str) -> None:
    address = ipaddress.ip_address(literal)

    assert is_public(address) is True
    assert admitted(address, host="example.com", port=443, policy=RESTRICTED) is True


def test_allow_networks_admit_their_addresses_only() -> None:
    policy = SideEffectPolicy(
        private_network=False, allow_networks=("10.1.0.0/16", "fd00:1::/32", "not a cidr")
    )

    def ok(literal: str) -> bool:
        return admitted(ipaddress.ip_address(literal), host="h", port=80, policy=policy)

    assert ok("10.1.2.3")
    assert ok("::ffff:10.1.2.3")  # the mapped form of an admitted address
    assert ok("fd00:1::5")
    assert not ok("10.2.0.1")
    assert not ok("169.254.169.254")
    assert not ok("127.0.0.1")


def test_allow_hosts_admit_a_name_or_literal_on_its_port_only() -> None:
    policy = SideEffectPolicy(
        private_network=False,
        allow_hosts=("Internal.Example:8443", "10.0.0.5:80", "[::1]:9000", "junk"),
    )
    private = ipaddress.ip_address("10.0.0.5")

    def ok(host: str, port: int, literal: str = "10.0.0.5") -> bool:
        return admitted(ipaddress.ip_address(literal), host=host, port=port, policy=policy)

    assert ok("internal.example", 8443)
    assert ok("internal.example.", 8443)
    assert not ok("internal.example", 8444)
    assert ok("10.0.0.5", 80)
    assert not ok("10.0.0.5", 81)
    assert ok("[::1]", 9000, "::1")
    assert ok("::1", 9000, "::1")
    assert not ok("::1", 9001, "::1")
    # Another name of an admitted address is not admitted (it may be another virtual host).
    assert not admitted(private, host="evil.example", port=80, policy=policy)


@pytest.mark.parametrize(
    "host", ["127.1", "2130706433", "0x7f000001", "017700000001", "localhost", "0", "::1"]
)
def test_resolved_loopback_forms_are_refused_before_any_connection(host: str) -> None:
    # Resolved locally (numeric forms, /etc/hosts): no packet leaves the machine.
    with pytest.raises(ActivityError) as caught:
        asyncio.run(checked_addresses(host, 80, RESTRICTED))

    error = caught.value
    assert (error.message, error.type, error.retryable) == (UNREACHABLE, UNREACHABLE_TYPE, False)


def test_resolved_loopback_is_returned_when_admitted() -> None:
    policy = SideEffectPolicy(private_network=False, allow_networks=("127.0.0.0/8",))

    assert asyncio.run(checked_addresses("2130706433", 80, policy)) == ["127.0.0.1"]
