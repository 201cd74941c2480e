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
from dataclasses import dataclass, replace
from datetime import datetime

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
    "TenantPolicy",
    "default_policy",
    "policy_of",
    "refusals",
    "served",
    "set_policy",
    "set_sealing",
]

log = logging.getLogger("wovyr.tenants")


@dataclass(frozen=True)
class TenantPolicy:
    """A tenant's effective policy and where it comes from."""

    tenant: str
    policy: SideEffectPolicy
    stored: TenantRecord | None  # None: the tenant's default applies

    @property
    def seal_payloads(self) -> bool:
        """Whether the tenant's execution payloads are stored sealed."""
        return self.stored is not None and self.stored.seal_payloads

    @property
    def source(self) -> str:
        return "default" if self.stored is None or self.stored.policy is None else "set"


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
    current = store.get_tenant(tenant)  # its quotas and sealing are kept
    record = TenantRecord(
        tenant,
        stored,
        at,
        by,
        quotas=current.quotas if current else None,
        seal_payloads=current.seal_payloads if current else False,
        retention=current.retention if current else None,
    )
    audit = None
    if actor is not None:
        details = {"policy": None if stored is None else payload_digest(stored)}
        audit = AuditEntry(at, tenant, actor, "tenant.policy", tenant, details)
    store.put_tenant(record, audit=audit)
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
    current = store.get_tenant(tenant)
    if current is None:
        record = TenantRecord(tenant, None, at, by, seal_payloads=seal)
    else:
        record = replace(current, seal_payloads=seal, updated_at=at, updated_by=by)
    audit = None
    if actor is not None:
        audit = AuditEntry(at, tenant, actor, "tenant.seal_payloads", tenant, {"seal": seal})
    store.put_tenant(record, audit=audit)
    return policy_of(store, tenant)


def served(store: TenantStore, at: datetime) -> bool:
    """The store is about to be served over HTTP: restrict tenant `default` unless a policy
    is set for it already. True when this call restricted it."""
    if store.get_tenant(DEFAULT_TENANT) is not None:
        return False
    set_policy(store, DEFAULT_TENANT, RESTRICTED, by="serve", at=at)
    log.warning(
        "tenant 'default' runs restricted (no shell, public network only) now that this store "
        "is served over HTTP: API keys must not buy a shell on the host. To trust it: "
        "wovyr admin tenants set default --preset trusted"
    )
    return True


def refusals(workflow: Workflow, policy: SideEffectPolicy, tenant: str) -> InputError | None:
    """The error naming every step of `workflow` that `policy` refuses, or None."""
    found = policy_problems(workflow, policy)
    if not found:
        return None
    hint = f"the server host's administrator can change it: `wovyr admin tenants set {tenant} ...`"
    return InputError(
        [
            Problem(
                f"activity {activity!r} ({kind}) is refused by the side-effect policy of "
                f"tenant {tenant!r}: {message}",
                path=path,
                hint=hint,
            )
            for activity, kind, path, message in found
        ]
    )
