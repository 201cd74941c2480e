"""Outbound webhooks: a tenant's endpoints for execution events, and the dispatcher that
delivers the outbox.

An endpoint (`parse_endpoint`) is a URL, the execution events it takes
(`wovyr.store.events.OUTBOUND_EVENTS`), an optional filter (a CEL condition on the
delivery's payload, read as `event`: `${{ event.execution.workflow == 'billing' }}`) and the
NAMES of one or two of the tenant's secrets its deliveries are signed with (the first is
the current key; both sign while a key is rotated). The store writes a delivery of each
event an endpoint takes in the transaction of the step that made it (the outbox); the
`Dispatcher` leases due deliveries, and for each:

- an endpoint since removed: `dead`; a filter that is false: `filtered` (never sent);
- else a POST of the payload's JSON, with `Wovyr-Delivery: <id>` (stable across attempts:
  receivers dedup on it), `Wovyr-Event: <type>` and `Wovyr-Signature: t=...,v1=...` (one
  `v1` per key), as the tenant's side-effect policy allows (no private address unless it
  admits one: `wovyr.activities.outbound.post_signed`);
- a 2xx: `delivered`; anything else is retried with a doubling back-off
  (`backoff`) until `max_attempts`, then `dead` with the last error; a refusal that cannot
  change (the egress policy) is `dead` at once.

A dispatcher that dies between its POST and recording the answer leaves the delivery leased;
the lease expires and the next dispatcher sends it again under the same id: at least once.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from wovyr.activities.outbound import SIGNATURE_HEADER, Sent, sign_body
from wovyr.activities.policy import SideEffectPolicy
from wovyr.clock import Clock
from wovyr.definition.expr import (
    TEMPLATE_RE,
    compile_expression,
    evaluate_condition,
    template_sources,
)
from wovyr.errors import ExpressionError, InputError, NotFound, Problem
from wovyr.store.events import (
    OUTBOUND_EVENTS,
    AttemptRecord,
    DeliveryRecord,
    EventStore,
    WebhookEndpointRecord,
)

__all__ = [
    "DELIVERY_HEADER",
    "EVENT_HEADER",
    "Dispatcher",
    "SecretSource",
    "backoff",
    "delivery_view",
    "endpoint_view",
    "parse_endpoint",
]

log = logging.getLogger("wovyr.webhooks")

DELIVERY_HEADER = "Wovyr-Delivery"
EVENT_HEADER = "Wovyr-Event"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]{0,127}$")
_SECRET = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")

SecretSource = Callable[[str, str], str]  # (tenant, name) -> the secret's value
Sender = Callable[[str, bytes, Mapping[str, str], SideEffectPolicy], Awaitable[Sent]]


def parse_endpoint(
    tenant: str,
    name: str,
    body: Mapping[str, Any],
    *,
    by: str,
    at: datetime,
    policy: SideEffectPolicy | None = None,
) -> WebhookEndpointRecord:
    """An endpoint from `{url, events, secrets, filter?}`; InputError naming each bad field.
    With the tenant's `policy`, a URL whose host is written as an address the policy
    refuses (a private or loopback IP, `localhost`) is refused now; a name is checked when
    each delivery resolves it (DNS may answer otherwise by then)."""
    problems = []
    if not _NAME.match(name):
        problems.append(Problem("a name is letters, digits, '.', '_' and '-'", path="name"))
    unknown = sorted(set(body) - {"url", "events", "secrets", "filter"})
    problems += [Problem("unknown field", path=k) for k in unknown]
    url = body.get("url")
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        problems.append(Problem("an http or https URL with a host", path="url"))
    elif parts.username or parts.password:
        problems.append(Problem("no credentials in the URL: sign with secrets", path="url"))
    elif policy is not None and not _admitted_literal(
        parts.hostname, parts.port, parts.scheme, policy
    ):
        problems.append(
            Problem(
                "the tenant's side-effect policy refuses this address (private network); "
                "an admin may allow it with `wovyr admin tenants set --allow-host HOST:PORT`",
                path="url",
            )
        )
    events = body.get("events")
    if not isinstance(events, list) or not events or not all(e in OUTBOUND_EVENTS for e in events):
        problems.append(Problem(f"a list of {', '.join(OUTBOUND_EVENTS)}", path="events"))
    secrets = body.get("secrets")
    if (
        not isinstance(secrets, list)
        or not 1 <= len(secrets) <= 2
        or not all(isinstance(s, str) and _SECRET.match(s) for s in secrets)
    ):
        problems.append(Problem("one or two names of the tenant's secrets", path="secrets"))
    condition = body.get("filter")
    if condition is not None:
        problems += _filter_problems(condition)
    if problems:
        raise InputError(problems)
    assert isinstance(url, str) and isinstance(events, list) and isinstance(secrets, list)
    return WebhookEndpointRecord(
        tenant, name, url, tuple(sorted(set(events))), condition, tuple(secrets), at, by
    )


def _admitted_literal(host: str, port: int | None, scheme: str, policy: SideEffectPolicy) -> bool:
    from wovyr.activities.egress import admitted, literal_address

    address = literal_address(host)
    if address is None:  # a name: checked at each delivery
        return True
    port = port or (443 if scheme == "https" else 80)
    return admitted(address, host=host, port=port, policy=policy)


def _filter_problems(condition: Any) -> list[Problem]:
    """A filter is one `${{ }}` condition that reads `event` only."""
    if not isinstance(condition, str) or TEMPLATE_RE.fullmatch(condition) is None:
        return [Problem("a single '${{ ... }}' condition", path="filter")]
    try:
        [source] = template_sources(condition)
        if compile_expression(source).refs.roots - {"event"}:
            return [Problem("a filter reads `event` (the delivery's payload) only", path="filter")]
    except (ExpressionError, ValueError) as exc:
        return [Problem(str(exc), path="filter")]
    return []


def endpoint_view(record: WebhookEndpointRecord) -> dict[str, Any]:
    """What is shown of an endpoint: its secrets by NAME."""
    return {
        "name": record.name,
        "url": record.url,
        "events": list(record.events),
        "filter": record.filter,
        "secrets": list(record.secrets),
        "updated_at": record.updated_at.isoformat(),
        "updated_by": record.updated_by,
    }


def delivery_view(
    record: DeliveryRecord, attempts: list[AttemptRecord] | None = None
) -> dict[str, Any]:
    shown = asdict(record)
    del shown["tenant"]
    for key in ("next_at", "created_at", "updated_at"):
        shown[key] = shown[key].isoformat()
    if attempts is not None:
        shown["attempts_made"] = [
            {"attempt": a.attempt, "at": a.at.isoformat(), "status_code": a.status_code,
             "error": a.error}
            for a in attempts
        ]  # fmt: skip
    return shown


def backoff(attempt: int, base: float = 5.0, cap: float = 3600.0) -> float:
    """Seconds before attempt `attempt + 1` after attempt `attempt` failed: doubling."""
    return float(min(cap, base * 2 ** (attempt - 1)))


@dataclass
class Dispatcher:
    """Delivers due outbox rows (see the module docstring). `send` posts (injected: the
    worker hands it `post_signed`); `policy_for(tenant)` is the tenant's side-effect
    policy now; `secret(tenant, name)` a secret's value."""

    store: EventStore
    clock: Clock
    send: Sender
    policy_for: Callable[[str], SideEffectPolicy]
    secret: SecretSource | None
    max_attempts: int = 8
    base_backoff: float = 5.0
    lease_seconds: float = 60.0
    batch: int = 20

    async def dispatch_due(self) -> int:
        """Deliver what is due now; how many deliveries were attempted."""
        import asyncio

        now = self.clock.now()
        due = await asyncio.to_thread(
            self.store.claim_deliveries, now, self.lease_seconds, self.batch
        )
        for delivery in due:
            try:
                await self._deliver(delivery)
            except Exception:  # one delivery's trouble never stops the others
                log.exception("webhook delivery %s failed unexpectedly", delivery.id)
        return len(due)

    async def _deliver(self, delivery: DeliveryRecord) -> None:
        import asyncio

        tenant = delivery.tenant
        endpoint = await asyncio.to_thread(
            self.store.get_webhook_endpoint, tenant, delivery.endpoint
        )
        if endpoint is None:
            await self._record(delivery, None, "dead", "the endpoint was removed")
            return
        if endpoint.filter is not None:
            try:
                wanted = evaluate_condition(
                    endpoint.filter, {"event": delivery.payload}, where="filter"
                )
            except ExpressionError as exc:
                await self._record(delivery, None, "dead", f"the filter failed: {exc}")
                return
            if not wanted:
                await self._record(delivery, None, "filtered", "")
                return
        try:
            keys = [self._key(tenant, name) for name in endpoint.secrets]
        except NotFound as exc:
            await self._record(delivery, None, "pending", str(exc), retry=True)
            return
        body = json.dumps(delivery.payload, separators=(",", ":"), sort_keys=True).encode()
        headers = {
            "Content-Type": "application/json",
            DELIVERY_HEADER: delivery.id,
            EVENT_HEADER: delivery.event,
            SIGNATURE_HEADER: sign_body(keys, body, self.clock.now()),
        }
        policy = await asyncio.to_thread(self.policy_for, tenant)
        sent = await self.send(endpoint.url, body, headers, policy)
        if sent.ok:
            await self._record(delivery, sent.status, "delivered", "")
        else:
            await self._record(delivery, sent.status, "pending", sent.error, retry=sent.retryable)

    def _key(self, tenant: str, name: str) -> bytes:
        if self.secret is None:
            raise NotFound("no secrets are configured")
        return self.secret(tenant, name).encode()

    async def _record(
        self,
        delivery: DeliveryRecord,
        status_code: int | None,
        status: str,
        error: str,
        *,
        retry: bool = False,
    ) -> None:
        import asyncio

        now = self.clock.now()
        attempt = delivery.attempts + 1
        next_at = now
        if status == "pending":
            if not retry or attempt >= self.max_attempts:
                status = "dead"
            else:
                next_at = now + timedelta(seconds=backoff(attempt, self.base_backoff))
        record = AttemptRecord(delivery.tenant, delivery.id, attempt, now, status_code, error[:500])
        await asyncio.to_thread(
            self.store.record_attempt, record, status=status, next_at=next_at, last_error=error
        )
