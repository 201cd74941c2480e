"""Tenants' side-effect policies: the default, the stored one, and changing it.

Which `SideEffectPolicy` a tenant's `shell` and `http` activities run under:

- what an administrator set for it (`wovyr admin tenants set`, or the admin API, which may
  only tighten), stored in the tenant's row;
- else its default: `TRUSTED` for the local owner's tenant `default` (an embedded
  `wovyr run FILE` or the Python API runs anything, as it always has), `RESTRICTED` (no
  `shell`, no private network for `http`) for every other tenant.

A store served over HTTP is no longer the local owner's alone: the first time the server
opens it (`served`), tenant `default` gets an explicit `RESTRICTED` policy unless one is
already set, so no API key - not even one of tenant `default` - buys a shell on the host or
a view of its private network until the host's administrator says so
(`wovyr admin tenants set default --preset trusted`).

The policy is read when a definition is accepted for the tenant (start, apply, schedule
create: `refusals` names every step it refuses) and again for every attempt of a kind with
side effects, so tightening a policy stops executions already in flight. A stored policy
that no longer parses (written by hand into the store) counts as `RESTRICTED`: a broken row
fails closed.
"""

from __future__ import annotations

import logging
import shlex
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from wovyr.activities.builtin.shell import POLICY_DENIED
from wovyr.activities.egress import UNREACHABLE_TYPE
from wovyr.activities.policy import (
    RESTRICTED,
    TRUSTED,
    SideEffectPolicy,
    parse_policy,
    to_dict,
)
from wovyr.definition.model import Workflow
from wovyr.definition.preflight import policy_problems
from wovyr.errors import InputError, Problem
from wovyr.store.audit import AuditEntry, payload_digest
from wovyr.store.base import DEFAULT_TENANT
from wovyr.store.platform import TenantRecord, TenantStore

__all__ = [
    "SERVED_BY",
    "TenantPolicy",
    "allow_command",
    "default_policy",
    "dispatch_note",
    "policy_of",
    "put_settings",
    "refusals",
    "served",
    "served_notice",
    "set_policy",
    "set_sealing",
]

log = logging.getLogger("wovyr.tenants")

SERVED_BY = "serve"  # who set tenant default's policy when a server first opened the store


@dataclass(frozen=True)
class TenantPolicy:
    """A tenant's effective policy and where it comes from."""

    tenant: str
    policy: SideEffectPolicy
    stored: TenantRecord | None  # None: the tenant's default applies
    given: bool = False  # the engine was given this policy (`Engine(side_effects=...)`)

    @property
    def seal_payloads(self) -> bool:
        """Whether the tenant's execution payloads are stored sealed."""
        return self.stored is not None and self.stored.seal_payloads

    @property
    def source(self) -> str:
        if self.given:
            return "given"
        return "default" if self.stored is None or self.stored.policy is None else "set"

    def described(self) -> str:
        """What it is and where it comes from, in words: `restricted, its default`,
        `restricted, given when this store was first served over HTTP`, `custom, set by
        cli`."""
        name = {RESTRICTED: "restricted", TRUSTED: "trusted"}.get(self.policy, "custom")
        if self.given:
            return f"{name}, the policy this engine was given"
        if self.stored is None or self.stored.policy is None:
            return f"{name}, its default"
        if self.stored.updated_by == SERVED_BY:
            return f"{name}, given when this store was first served over HTTP"
        return f"{name}, set by {self.stored.updated_by}"

    def where(self) -> str:
        return f"the side-effect policy of tenant {self.tenant!r} ({self.described()})"


def default_policy(tenant: str) -> SideEffectPolicy:
    """The policy of a tenant nobody set one for."""
    return TRUSTED if tenant == DEFAULT_TENANT else RESTRICTED


def policy_of(store: TenantStore, tenant: str) -> TenantPolicy:
    """The policy `tenant`'s side effects run under now (one read of the tenant's row)."""
    record = store.get_tenant(tenant)
    if record is None or record.policy is None:
        return TenantPolicy(tenant, default_policy(tenant), record)
    try:
        policy = parse_policy(record.policy, base=RESTRICTED)
    except InputError as exc:
        log.error("the stored policy of tenant %r is invalid (%s): it runs restricted", tenant, exc)
        policy = RESTRICTED
    return TenantPolicy(tenant, policy, record)


def set_policy(
    store: TenantStore,
    tenant: str,
    policy: SideEffectPolicy | None,
    *,
    by: str,
    at: datetime,
    actor: str | None = None,
) -> TenantPolicy:
    """Store `policy` for `tenant` (None: back to the tenant's default); return it. With an
    `actor`, the change is appended to the audit chain in the same transaction."""
    stored = None if policy is None else to_dict(policy)
    audit = None
    if actor is not None:
        details = {"policy": None if stored is None else payload_digest(stored)}
        audit = AuditEntry(at, tenant, actor, "tenant.policy", tenant, details)
    put_settings(store, tenant, by=by, at=at, audit=audit, policy=stored)
    return policy_of(store, tenant)


def set_sealing(
    store: TenantStore,
    tenant: str,
    seal: bool,
    *,
    by: str,
    at: datetime,
    actor: str | None = None,
) -> TenantPolicy:
    """Turn sealed execution payloads on or off for `tenant` (`wovyr.store.sealing`): what
    its executions write from now on is sealed (or not); what was written reads back either
    way. Its policy and quotas are kept. With an `actor`, `tenant.seal_payloads` is appended
    to the audit chain in the same transaction."""
    audit = None
    if actor is not None:
        audit = AuditEntry(at, tenant, actor, "tenant.seal_payloads", tenant, {"seal": seal})
    put_settings(store, tenant, by=by, at=at, audit=audit, seal_payloads=seal)
    return policy_of(store, tenant)


def put_settings(
    store: TenantStore,
    tenant: str,
    *,
    by: str,
    at: datetime,
    audit: AuditEntry | None,
    **settings: Any,
) -> None:
    """Store `settings` (fields of its `TenantRecord`) for `tenant`, its other settings
    kept; `audit` is appended in the same transaction."""
    current = store.get_tenant(tenant) or TenantRecord(tenant, None, at, by)
    record = replace(current, updated_at=at, updated_by=by, **settings)
    store.put_tenant(record, audit=audit)


def served(store: TenantStore, at: datetime) -> bool:
    """The store is about to be served over HTTP: restrict tenant `default` unless a policy
    is set for it already, and say so once (`served_notice`, logged as a warning). True
    when this call restricted it."""
    if store.get_tenant(DEFAULT_TENANT) is not None:
        return False
    set_policy(store, DEFAULT_TENANT, RESTRICTED, by=SERVED_BY, at=at)
    log.warning("%s", served_notice())
    return True


def served_notice(tenant: str = DEFAULT_TENANT) -> str:
    """What a server says the one time it restricts `tenant`: the policy it got, why, and
    the commands that open it (a local developer's shell steps, a local model server)."""
    allow = allow_command(tenant, "")
    return (
        f"tenant {tenant!r} now runs under the restricted side-effect policy: no `shell` "
        "steps, and `http` steps, model providers and MCP servers reach public addresses only. "
        "This store is served over HTTP, so no API key may buy a shell on this host or a view "
        "of its network until its administrator allows it, with one of:\n"
        f"  {allow}--shell                        # shell steps (examples/hello.yaml)\n"
        f"  {allow}--allow-host localhost:11434   # a host:port as URLs write it (a local model)\n"
        f"  {allow}--preset trusted               # all of it, as before it was served"
    )


def allow_command(tenant: str, flags: str) -> str:
    """The command with which the host's administrator changes `tenant`'s policy."""
    return f"wovyr admin tenants set {shlex.quote(tenant)} {flags}"


def dispatch_note(error_type: str, found: TenantPolicy, allow: str | None = None) -> str | None:
    """What an attempt's `PolicyDenied` or `TargetUnreachable` error adds: which policy
    refused it and the command that allows it (`allow`: the flags, when the kind knew them).
    It depends on the policy only, never on the target: a refused address, a closed port and
    an unknown name read the same, so a workflow cannot probe a network with the text."""
    if error_type == UNREACHABLE_TYPE and not found.policy.private_network:
        hosts = " ".join(f"--allow-host {shlex.quote(h)}" for h in found.policy.allow_hosts)
        flags = f"{hosts} --allow-host HOST:PORT".lstrip()
        return (
            f"{found.where()} lets `http` steps, model providers and MCP servers reach public "
            "addresses only (private_network: false), and a refused address fails like one "
            "that does not answer; for a host on a loopback or private network (a local model "
            "server), the host's administrator admits it with: "
            + allow_command(found.tenant, flags)
        )
    if error_type == POLICY_DENIED:
        how = (
            allow_command(found.tenant, allow)
            if allow
            else f"wovyr admin tenants show {shlex.quote(found.tenant)} says what it allows"
        )
        return f"refused by {found.where()}; the host's administrator: {how}"
    return None


def refusals(workflow: Workflow, found: TenantPolicy) -> InputError | None:
    """The error naming every step of `workflow` that `found`'s policy refuses (with the
    command that would allow it), or None."""
    refused = policy_problems(workflow, found.policy)
    if not refused:
        return None
    return InputError(
        [
            Problem(
                f"activity {activity!r} ({kind}) is refused by {found.where()}: {message}",
                path=path,
                hint="the host's administrator allows it with: "
                + allow_command(found.tenant, flags or "..."),
            )
            for activity, kind, path, message, flags in refused
        ]
    )
