"""What side-effecting activity kinds may do: the policy an executor is handed at dispatch.

A `SideEffectPolicy` travels in `Dispatch.policy`; the `shell` and `http` kinds enforce it
on every attempt (so a policy tightened later stops executions already in flight), and each
kind's `admits` says, before anything runs, what a policy refuses of a step (checked when a
definition is accepted). Which policy applies is decided above this layer: the engine reads
the tenant's policy from the store (`wovyr admin tenants set`), and a tenant with none stored
gets its default - `TRUSTED` for the local owner's tenant `default`, `RESTRICTED` for every
other (see docs/security.md).

`to_dict`/`parse_policy` are the stored and API form: a JSON object of the fields below
(lists for the tuples), every field optional, unknown fields refused; `widened` tells which
fields of one policy reach further than another's (the API may only tighten).

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
- `shell_isolation`: run each step isolated (`wovyr.activities.sandbox`: its own mount
  and PID namespaces, a fresh `/proc`, the worker's home and database hidden, a separate
  uid on a root worker); a worker that cannot isolate refuses the step (`PolicyDenied`).
  False (the local owner's `TRUSTED`, or a host administrator's explicit choice): the step
  runs beside the worker and reads what the worker's user can, the KMS root key included.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from wovyr.errors import InputError, Problem

__all__ = ["RESTRICTED", "TRUSTED", "SideEffectPolicy", "parse_policy", "to_dict", "widened"]

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
    shell_isolation: bool = False  # run shell steps in namespaces, away from the worker
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
    shell_isolation=True,
    private_network=False,
)


_TUPLES = ("shell_commands", "shell_env", "allow_networks", "allow_hosts")
_BOOLS = ("shell", "shell_cwd", "private_network", "shell_isolation")
# Booleans that allow more when false (the others allow more when true).
_GUARDS = ("shell_isolation",)
_LIMITS = (
    "shell_cpu_seconds",
    "shell_memory_bytes",
    "shell_open_files",
    "shell_processes",
    "shell_file_bytes",
)
_MAX_ENTRIES = 256


def to_dict(policy: SideEffectPolicy) -> dict[str, Any]:
    """The JSON form of `policy` (every field; lists for the tuples)."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(policy).items()}


def parse_policy(data: object, *, base: SideEffectPolicy = RESTRICTED) -> SideEffectPolicy:
    """A policy from its JSON form: the fields given replace `base`'s. `InputError` naming
    every bad field (unknown, wrong type, a CIDR or `host:port` that does not parse)."""
    if not isinstance(data, Mapping):
        raise InputError([Problem("a side-effect policy is a JSON object", path="policy")])
    known = {f.name for f in fields(SideEffectPolicy)}
    problems: list[Problem] = []
    values: dict[str, Any] = {}
    for key, value in data.items():
        path = f"policy.{key}"
        if key not in known:
            problems.append(Problem(f"unknown policy field {key!r}", path=path))
        elif key in _BOOLS:
            if isinstance(value, bool):
                values[key] = value
            else:
                problems.append(Problem(f"{key} is true or false", path=path))
        elif key in _LIMITS:
            if value is None or (
                isinstance(value, int) and not isinstance(value, bool) and 0 < value < 2**62
            ):
                values[key] = value
            else:
                problems.append(Problem(f"{key} is a positive integer or null", path=path))
        else:
            entries = _entries(key, value, path, problems)
            if entries is not None or key in ("shell_commands", "shell_env"):
                values[key] = entries
    if problems:
        raise InputError(problems)
    return SideEffectPolicy(**{**asdict(base), **values}) if values else base


def _entries(key: str, value: object, path: str, problems: list[Problem]) -> tuple[str, ...] | None:
    nullable = key in ("shell_commands", "shell_env")  # None: any
    if value is None and nullable:
        return None
    if not isinstance(value, list | tuple) or len(value) > _MAX_ENTRIES:
        what = "a list of strings" + (" or null (any)" if nullable else "")
        problems.append(Problem(f"{key} is {what}, at most {_MAX_ENTRIES}", path=path))
        return None if nullable else ()
    out: list[str] = []
    for i, entry in enumerate(value):
        reason = _bad_entry(key, entry)
        if reason:
            problems.append(Problem(reason, path=f"{path}[{i}]"))
        else:
            out.append(str(entry).strip())
    return tuple(out)


def _bad_entry(key: str, entry: object) -> str | None:
    if not isinstance(entry, str) or not entry.strip() or len(entry) > 1024:
        return "an entry is a non-empty string of at most 1024 characters"
    text = entry.strip()
    if key == "allow_networks":
        try:
            ipaddress.ip_network(text, strict=False)
        except ValueError:
            return f"{text!r} is not a network in CIDR form (10.0.0.0/8, fd00::/8)"
    if key == "allow_hosts":
        host, sep, port = text.rpartition(":")
        if not (sep and host.strip("[]") and port.isdigit() and 0 < int(port) < 65536):
            return f"{text!r} is not host:port (internal.example:8443, [fd00::1]:80)"
    if key == "shell_commands" and "/" in text and not text.startswith("/"):
        return f"{text!r}: a command is a bare name or an absolute path"
    return None


def widened(policy: SideEffectPolicy, ceiling: SideEffectPolicy) -> list[str]:
    """The fields of `policy` that allow more than `ceiling`'s (empty: `policy` is within)."""
    wider: list[str] = []
    for name in _BOOLS:
        mine, theirs = getattr(policy, name), getattr(ceiling, name)
        if (theirs and not mine) if name in _GUARDS else (mine and not theirs):
            wider.append(name)
    for name in ("shell_commands", "shell_env"):
        mine, theirs = getattr(policy, name), getattr(ceiling, name)
        if theirs is not None and (mine is None or not set(mine) <= set(theirs)):
            wider.append(name)
    for name in _LIMITS:
        mine, theirs = getattr(policy, name), getattr(ceiling, name)
        if theirs is not None and (mine is None or mine > theirs):
            wider.append(name)
    if not ceiling.private_network:
        if not all(_net_within(n, ceiling.allow_networks) for n in policy.allow_networks):
            wider.append("allow_networks")
        if not set(policy.allow_hosts) <= set(ceiling.allow_hosts):
            wider.append("allow_hosts")
    return wider


def _net_within(cidr: str, allowed: tuple[str, ...]) -> bool:
    net = ipaddress.ip_network(cidr, strict=False)
    for entry in allowed:
        outer = ipaddress.ip_network(entry, strict=False)
        if net.version == outer.version and net.subnet_of(outer):  # type: ignore[arg-type]
            return True
    return False
