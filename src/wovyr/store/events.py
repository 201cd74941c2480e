"""The events store (`EventStore`): event triggers and outbound webhooks.

- **Triggers**: a tenant's `kind: Trigger` documents, by name, found by topic or by the
  opaque id of the trigger's inbound webhook URL (`hook_id`, unique across tenants: the
  URL carries no tenant). Every event received is recorded (`TriggerEventRecord`): what
  came of it, never its payload. Dedup keys are claimed with an expiry
  (`claim_dedup_key`): the same key twice within it is one start.
- **Outbound webhooks**: a tenant's endpoints (`WebhookEndpointRecord`: the URL, the
  execution events sent, an optional filter, the NAMES of the secrets deliveries are signed
  with). The outbox (`DeliveryRecord`) is written by the store itself in the transaction of
  the step that makes an execution event (`outbox_events` says which), one row per
  endpoint that takes it, under a stable id (`delivery_id`); the dispatcher leases due rows
  (`claim_deliveries`), and records each attempt (`record_attempt`).

Nothing here holds a payload of an execution (its input, output or error): an outbound
event names the execution, its workflow and what happened, so nothing sealed is copied out.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import field, replace
from datetime import datetime
from typing import Any, Protocol

from wovyr.events import EventType
from wovyr.store.audit import AuditEntry
from wovyr.store.codec import JSON_TEXT
from wovyr.store.frozen import record
from wovyr.store.records import NewExecution, StepWrite

__all__ = [
    "OUTBOUND_EVENTS",
    "AttemptRecord",
    "DedupClaim",
    "DeliveryRecord",
    "EventPage",
    "EventStore",
    "TriggerEventRecord",
    "TriggerRecord",
    "WebhookEndpointRecord",
    "delivery_id",
    "first_step_of",
    "outbox_events",
]

#: The execution events an endpoint may ask for, each named as its deliveries say it.
OUTBOUND_EVENTS = (
    "execution.approval_requested",
    "execution.cancelled",
    "execution.completed",
    "execution.failed",
)
_WAIT_STARTS = frozenset({EventType.ACTIVITY_SCHEDULED, EventType.ACTIVITY_SUSPENDED})
_ENDED = {
    EventType.EXECUTION_COMPLETED: "execution.completed",
    EventType.EXECUTION_FAILED: "execution.failed",
    EventType.EXECUTION_CANCELLED: "execution.cancelled",
}


def outbox_events(step: StepWrite, base_seq: int) -> list[tuple[str, int, str]]:
    """The outbound events `step` makes: (name, the seq of the event it comes from, its key
    in the execution). Read from the event types and the plain `waiting_on`, never from
    event data (a sealing tenant's store holds that sealed): an approval is requested by a
    step that schedules or suspends an activity while `waiting_on` names `approval <id>`,
    keyed by the activity, so a later step that still waits on it makes no second one."""
    found: list[tuple[str, int, str]] = []
    waits = step.waiting_on or ""
    for i, event in enumerate(step.events, 1):
        name = _ENDED.get(event.type)
        if name is not None:
            found.append((name, base_seq + i, str(base_seq + i)))
        elif event.type in _WAIT_STARTS and "approval " in waits:
            for part in waits.split("; "):
                if part.startswith("approval "):
                    key = f"approval:{part.removeprefix('approval ')}"
                    found.append(("execution.approval_requested", base_seq + i, key))
    return list({key: (n, seq, key) for n, seq, key in found}.values())


def first_step_of(new: NewExecution) -> StepWrite:
    """`new`'s first step, named by `new`'s tenant and id (what `outbox_events` reads)."""
    return replace(new.first_step, tenant=new.tenant, execution_id=new.id)


def delivery_id(tenant: str, endpoint: str, execution_id: str, key: str) -> str:
    """The id of the delivery of one execution event (`key`: see `outbox_events`) to one
    endpoint: the same whoever writes it and however often it is sent (a receiver dedups
    on it)."""
    digest = hashlib.sha256(f"{tenant}\0{endpoint}\0{execution_id}\0{key}".encode()).hexdigest()
    return f"dlv_{digest[:32]}"


@record
class TriggerRecord:
    tenant: str
    name: str
    topic: str
    hook_id: str | None  # the inbound webhook URL's id; None: no webhook
    # the applied document's canonical form
    document: dict[str, Any] = field(metadata=JSON_TEXT)
    updated_at: datetime
    updated_by: str = ""


@record
class TriggerEventRecord:
    tenant: str
    id: str
    received_at: datetime
    source: str  # api or webhook
    topic: str
    trigger: str | None  # None: no trigger takes the topic
    outcome: str  # started, signalled, duplicate, filtered, rejected, limited, failed, unmatched
    reason: str = ""
    execution_id: str | None = None
    dedup_key: str | None = None
    size: int = 0


@record
class DedupClaim:
    """Hold `tenant`'s dedup key `key` of `trigger` for `execution_id` from `now` until
    `expires_at`."""

    tenant: str
    trigger: str
    key: str
    execution_id: str
    now: datetime
    expires_at: datetime


@record
class WebhookEndpointRecord:
    tenant: str
    name: str
    url: str
    events: tuple[str, ...] = field(metadata=JSON_TEXT)
    filter: str | None
    # secret NAMES; the first signs, every one is a valid key
    secrets: tuple[str, ...] = field(metadata=JSON_TEXT)
    updated_at: datetime
    updated_by: str = ""


@record
class DeliveryRecord:
    tenant: str
    id: str
    endpoint: str
    event: str
    execution_id: str
    seq: int
    payload: dict[str, Any] = field(metadata=JSON_TEXT)
    status: str  # pending, delivered, dead, filtered
    attempts: int
    next_at: datetime
    last_error: str
    created_at: datetime
    updated_at: datetime


@record
class AttemptRecord:
    tenant: str
    delivery_id: str
    attempt: int
    at: datetime
    status_code: int | None
    error: str = ""


@record
class EventPage:
    """One page of a list, newest first; `next` is where the next page starts."""

    items: Sequence[Any] = field(default_factory=tuple)
    next: tuple[datetime, str] | None = None


class EventStore(Protocol):
    # --- triggers --------------------------------------------------------------------------

    def put_trigger(self, record: TriggerRecord, *, audit: AuditEntry | None = None) -> str:
        """Add or replace a trigger: "applied" or "unchanged" (same topic, hook and
        document: nothing is written). A `hook_id` another trigger holds: StoreError."""
        ...

    def get_trigger(self, tenant: str, name: str) -> TriggerRecord | None: ...
    def list_triggers(self, tenant: str, topic: str | None = None) -> list[TriggerRecord]: ...
    def trigger_by_hook(self, hook_id: str) -> TriggerRecord | None:
        """The trigger of an inbound webhook URL, whichever its tenant."""
        ...

    def delete_trigger(
        self, tenant: str, name: str, *, audit: AuditEntry | None = None
    ) -> bool: ...

    # --- events received -------------------------------------------------------------------

    def record_trigger_event(self, record: TriggerEventRecord) -> None: ...
    def get_trigger_event(self, tenant: str, event_id: str) -> TriggerEventRecord | None: ...
    def list_trigger_events(
        self,
        tenant: str,
        *,
        trigger: str | None = None,
        before: tuple[datetime, str] | None = None,
        limit: int = 50,
    ) -> EventPage:
        """A page of `tenant`'s received events, newest first."""
        ...

    def count_trigger_starts(self, tenant: str, trigger: str, since: datetime) -> int:
        """How many events `trigger` started or signalled from since `since` (its rate)."""
        ...

    def claim_dedup_key(self, claim: DedupClaim) -> str | None:
        """Hold the key as `claim` says: None when claimed now (free, or its last holder
        expired at `claim.now`), else the execution id that holds it."""
        ...

    # --- outbound webhooks -----------------------------------------------------------------

    def put_webhook_endpoint(
        self, record: WebhookEndpointRecord, *, audit: AuditEntry | None = None
    ) -> None: ...
    def get_webhook_endpoint(self, tenant: str, name: str) -> WebhookEndpointRecord | None: ...
    def list_webhook_endpoints(self, tenant: str) -> list[WebhookEndpointRecord]: ...
    def delete_webhook_endpoint(
        self, tenant: str, name: str, *, audit: AuditEntry | None = None
    ) -> bool: ...
    def claim_deliveries(
        self, now: datetime, lease_seconds: float, limit: int
    ) -> list[DeliveryRecord]:
        """Up to `limit` pending deliveries (of every tenant) due at `now`, leased: each is
        not due again for `lease_seconds` (another dispatcher leaves it alone meanwhile;
        a dispatcher that died leaves it to be claimed again)."""
        ...

    def record_attempt(
        self, attempt: AttemptRecord, *, status: str, next_at: datetime, last_error: str
    ) -> None:
        """Append `attempt` to its delivery and set the delivery's status, next due time
        and last error."""
        ...

    def get_delivery(self, tenant: str, delivery_id: str) -> DeliveryRecord | None: ...
    def list_deliveries(
        self,
        tenant: str,
        *,
        endpoint: str | None = None,
        status: str | None = None,
        before: tuple[datetime, str] | None = None,
        limit: int = 50,
    ) -> EventPage: ...
    def delivery_attempts(self, tenant: str, delivery_id: str) -> list[AttemptRecord]: ...
