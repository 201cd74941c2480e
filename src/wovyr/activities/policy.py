"""What side-effecting activity kinds may do: the policy an executor is handed at dispatch.

A `SideEffectPolicy` travels in `Dispatch.policy`; the `shell` and `http` kinds enforce it
on every attempt (so a policy tightened later stops executions already in flight). Which
policy applies is decided above this layer: today the engine holds one
(`Engine(side_effects=...)`), `TRUSTED` by default - the local owner of an embedded store
runs anything, exactly as before. Per-tenant policies stored with the tenant are the next
step (issue: sandboxed side effects).

`shell` fields (see docs/dsl.md, "Shell steps: what they can reach"):

- `shell`: may a `shell` activity run at all (False: `PolicyDenied`, nothing is started).
- `shell_commands`: the programs a step may run, `None` for any. An entry with a `/` is an
  absolute path and admits exactly that file; a bare name admits `argv[0]` written as that
  bare name, looked up on the worker's PATH (never on a PATH the definition sets).
- `shell_env`: the worker variables a step may inherit (`inherit_env` names outside it are
  not passed); `None` for any.
- `shell_cwd`: may a step name its own `cwd` (otherwise it runs only in the fresh,
  per-attempt directory; a `cwd` is `PolicyDenied`).
- `shell_cpu_seconds`, `shell_memory_bytes` (address space), `shell_open_files`,
  `shell_processes`, `shell_file_bytes`: rlimits set in the child before the program
  starts; `None` leaves the worker's own limit.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RESTRICTED", "TRUSTED", "SideEffectPolicy"]

_MIB = 1024 * 1024


@dataclass(frozen=True)
class SideEffectPolicy:
    shell: bool = True  # may a `shell` activity run at all
    shell_commands: tuple[str, ...] | None = None  # allowed programs (names or paths); None: any
    shell_env: tuple[str, ...] | None = None  # worker variables a shell step may inherit; None: any
    shell_cwd: bool = True  # may a shell step choose its working directory (`cwd`)
    shell_cpu_seconds: int | None = None  # RLIMIT_CPU of the step; None: the worker's
    shell_memory_bytes: int | None = None  # RLIMIT_AS (address space); None: the worker's
    shell_open_files: int | None = None  # RLIMIT_NOFILE; None: the worker's
    shell_processes: int | None = None  # RLIMIT_NPROC (counts the whole user); None: the worker's
    shell_file_bytes: int | None = None  # RLIMIT_FSIZE (largest file written); None: the worker's
    private_network: bool = True  # may `http` reach loopback, private, link-local, ... hosts
    allow_networks: tuple[str, ...] = ()  # CIDRs admitted even when private_network is off
    allow_hosts: tuple[str, ...] = ()  # "host:port" admitted even when private_network is off


# The local owner: trusted with the host, so `shell` behaves as it always has (any program,
# any inherited variable, any cwd, the worker's own rlimits).
TRUSTED = SideEffectPolicy()
# A tenant nobody opened up: no shell at all. Limits below apply once an admin allows shell
# (`dataclasses.replace(RESTRICTED, shell=True, ...)`).
RESTRICTED = SideEffectPolicy(
    shell=False,
    shell_env=(),
    shell_cwd=False,
    shell_cpu_seconds=60,
    shell_memory_bytes=2048 * _MIB,
    shell_open_files=256,
    shell_processes=512,
    shell_file_bytes=256 * _MIB,
    private_network=False,
)
