"""What side-effecting activity kinds may do: the policy an executor is handed at dispatch.

A `SideEffectPolicy` travels in `Dispatch.policy`; the `shell` and `http` kinds enforce it
on every attempt (so a policy tightened later stops executions already in flight). Which
policy applies is decided above this layer: today the engine holds one
(`Engine(side_effects=...)`), `TRUSTED` by default - the local owner of an embedded store
runs anything, exactly as before. Per-tenant policies stored with the tenant are the next
step (issue: sandboxed side effects).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RESTRICTED", "TRUSTED", "SideEffectPolicy"]


@dataclass(frozen=True)
class SideEffectPolicy:
    shell: bool = True  # may a `shell` activity run at all
    shell_commands: tuple[str, ...] | None = None  # allowed argv[0] values; None: any
    shell_env: tuple[str, ...] = ("PATH",)  # worker variables a shell step may inherit
    private_network: bool = True  # may `http` reach loopback, private, link-local, ... hosts
    allow_networks: tuple[str, ...] = ()  # CIDRs admitted even when private_network is off
    allow_hosts: tuple[str, ...] = ()  # "host:port" admitted even when private_network is off


TRUSTED = SideEffectPolicy()
RESTRICTED = SideEffectPolicy(shell=False, shell_env=(), private_network=False)
