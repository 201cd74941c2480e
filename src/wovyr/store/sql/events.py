"""The events tables of both SQL stores (the contract is `wovyr.store.events`): triggers,
received events, dedup keys, webhook endpoints, the outbox and its attempts. Its SQL lives
in `events.sql`. `write_outbox` is what each store's commit calls, in the step's own
transaction, for a step that makes an outbound event."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from wovyr.errors import StoreError
from wovyr.store.audit import AuditEntry
from wovyr.store.events import (
    AttemptRecord,
    DedupClaim,
    DeliveryRecord,
    EventPage,
    TriggerEventRecord,
    TriggerRecord,
    WebhookEndpointRecord,
    delivery_id,
    outbox_events,
)
from wovyr.store.records import StepWrite
from wovyr.store.rows import Dialect, Row, from_row, to_params
from wovyr.store.sql import Params, SQLRole, Tx, role_queries

__all__ = ["SQLEvents", "write_outbox"]

_R = TypeVar("_R")
_END_OF_TIME = datetime(9999, 12, 31, tzinfo=UTC)
_LAST_ID = ""  # with the end of time, every row is before it whatever its id


def _text(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def _page(items: list[_R], limit: int, place: Callable[[_R], tuple[datetime, str]]) -> EventPage:
    """The page of `items` (read with one more than `limit`); its next page starts after
    the `place` of its last item when there is more."""
    more = len(items) > limit > 0
    return EventPage(items[:limit], place(items[limit - 1]) if more else None)


def write_outbox(tx: Tx, dialect: Dialect, step: StepWrite, base_seq: int) -> int:
    """The outbox rows of `step` (applied, in its transaction): one per endpoint of its
    tenant that takes an event it makes. How many were written."""
    made = outbox_events(step, base_seq)
    if not made:
        return 0
    q = role_queries("events", dialect)
    endpoints = [
        from_row(WebhookEndpointRecord, r, dialect)
        for r in tx.rows(q["endpoint_list"], {"tenant": step.tenant})
    ]
    wanted = [(e, n, seq, key) for n, seq, key in made for e in endpoints if n in e.events]
    if not wanted:
        return 0
    found = tx.rows(q["outbox_execution"], {"tenant": step.tenant, "id": step.execution_id})
    workflow, version = (found[0]["workflow"], found[0]["version"]) if found else ("", "")
    at = dialect.timestamp(step.updated_at)
    rows = []
    for endpoint, name, seq, key in wanted:
        ident = delivery_id(step.tenant, endpoint.name, step.execution_id, key)
        payload = {
            "id": ident,
            "type": name,
            "at": step.updated_at.isoformat(),
            "execution": {
                "id": step.execution_id,
                "workflow": workflow,
                "version": version,
                "status": step.status,
                "waiting_on": step.waiting_on,
            },
        }
        rows.append(
            {
                "tenant": step.tenant,
                "id": ident,
                "endpoint": endpoint.name,
                "event": name,
                "execution_id": step.execution_id,
                "seq": seq,
                "payload": _text(payload),
                "at": at,
            }
        )
    tx.run_many(q["outbox_insert"], rows)
    return len(rows)


class SQLEvents(SQLRole):
    def _event_rows(self, name: str, params: Params) -> list[Row]:
        return self._sql_read(self._queries("events")[name], params)

    def _events_write(self, name: str, params: Params, audit: AuditEntry | None = None) -> int:
        return self._role_write("events", name, params, audit)

    def _paged(
        self, params: dict[str, Any], before: tuple[datetime, str] | None, limit: int
    ) -> dict[str, Any]:
        """`params` of a page query: the rows before `before`, one more than `limit` (to
        know whether there is a next page)."""
        at, ident = before or (_END_OF_TIME, _LAST_ID)
        at = self._dialect.timestamp(at)
        return {**params, "before_at": at, "before_id": ident, "limit": limit + 1}

    # --- triggers --------------------------------------------------------------------------

    def put_trigger(self, record: TriggerRecord, *, audit: AuditEntry | None = None) -> str:
        q, d = self._queries("events"), self._dialect
        key = {"tenant": record.tenant, "name": record.name}
        params = {
            **key,
            "topic": record.topic,
            "hook_id": record.hook_id,
            "document": _text(record.document),
            "updated_at": d.timestamp(record.updated_at),
            "updated_by": record.updated_by,
        }

        def body(tx: Tx) -> str:
            found = [from_row(TriggerRecord, r, d) for r in tx.rows(q["trigger_get"], key)]
            if found and (found[0].topic, found[0].hook_id, found[0].document) == (
                record.topic,
                record.hook_id,
                json.loads(params["document"]),
            ):
                return "unchanged"
            if record.hook_id is not None and tx.rows(
                q["trigger_hook_taken"], {**key, "hook_id": record.hook_id}
            ):
                raise StoreError("the trigger's webhook id is taken")
            tx.run(q["trigger_put"], params)
            tx.append_audit(audit)
            return "applied"

        return str(self._sql_write(body))

    def get_trigger(self, tenant: str, name: str) -> TriggerRecord | None:
        return self._role_record(
            "events", "trigger_get", {"tenant": tenant, "name": name}, TriggerRecord
        )

    def list_triggers(self, tenant: str, topic: str | None = None) -> list[TriggerRecord]:
        if topic is None:
            return self._role_records("events", "trigger_list", {"tenant": tenant}, TriggerRecord)
        params = {"tenant": tenant, "topic": topic}
        return self._role_records("events", "trigger_list_topic", params, TriggerRecord)

    def trigger_by_hook(self, hook_id: str) -> TriggerRecord | None:
        return self._role_record("events", "trigger_by_hook", {"hook_id": hook_id}, TriggerRecord)

    def delete_trigger(self, tenant: str, name: str, *, audit: AuditEntry | None = None) -> bool:
        return self._events_write("trigger_delete", {"tenant": tenant, "name": name}, audit) == 1

    # --- events received -------------------------------------------------------------------

    def record_trigger_event(self, record: TriggerEventRecord) -> None:
        params = {**asdict(record), "received_at": self._dialect.timestamp(record.received_at)}
        self._events_write("trigger_event_insert", params)

    def get_trigger_event(self, tenant: str, event_id: str) -> TriggerEventRecord | None:
        key = {"tenant": tenant, "id": event_id}
        return self._role_record("events", "trigger_event_get", key, TriggerEventRecord)

    def list_trigger_events(
        self,
        tenant: str,
        *,
        trigger: str | None = None,
        before: tuple[datetime, str] | None = None,
        limit: int = 50,
    ) -> EventPage:
        params = self._paged({"tenant": tenant, "trigger": trigger or ""}, before, limit)
        items = self._role_records("events", "trigger_event_page", params, TriggerEventRecord)
        return _page(items, limit, lambda last: (last.received_at, last.id))

    def count_trigger_starts(self, tenant: str, trigger: str, since: datetime) -> int:
        params = {"tenant": tenant, "trigger": trigger, "since": self._dialect.timestamp(since)}
        return int(self._event_rows("trigger_starts", params)[0]["n"])

    def claim_dedup_key(self, claim: DedupClaim) -> str | None:
        q, params = self._queries("events"), to_params(claim, self._dialect)

        def body(tx: Tx) -> str | None:
            if tx.run(q["dedup_claim"], params):
                return None
            return str(tx.rows(q["dedup_get"], params)[0]["execution_id"])

        found = self._sql_write(body)
        return None if found is None else str(found)

    # --- outbound webhooks -----------------------------------------------------------------

    def put_webhook_endpoint(
        self, record: WebhookEndpointRecord, *, audit: AuditEntry | None = None
    ) -> None:
        # events and secrets are names (ASCII): their JSON text is as it always was
        self._events_write("endpoint_put", to_params(record, self._dialect), audit)

    def get_webhook_endpoint(self, tenant: str, name: str) -> WebhookEndpointRecord | None:
        return self._role_record(
            "events", "endpoint_get", {"tenant": tenant, "name": name}, WebhookEndpointRecord
        )

    def list_webhook_endpoints(self, tenant: str) -> list[WebhookEndpointRecord]:
        return self._role_records(
            "events", "endpoint_list", {"tenant": tenant}, WebhookEndpointRecord
        )

    def delete_webhook_endpoint(
        self, tenant: str, name: str, *, audit: AuditEntry | None = None
    ) -> bool:
        return self._events_write("endpoint_delete", {"tenant": tenant, "name": name}, audit) == 1

    def claim_deliveries(
        self, now: datetime, lease_seconds: float, limit: int
    ) -> list[DeliveryRecord]:
        q, d = self._queries("events"), self._dialect
        until = d.timestamp(now + timedelta(seconds=lease_seconds))

        def body(tx: Tx) -> list[Row]:
            due = tx.rows(q["delivery_due"], {"now": d.timestamp(now), "limit": limit})
            leased = []
            for row in due:
                key = {"tenant": row["tenant"], "id": row["id"]}
                if tx.run(q["delivery_lease"], {**key, "until": until}):
                    leased.extend(tx.rows(q["delivery_get"], key))
            return leased

        return [from_row(DeliveryRecord, r, d) for r in self._sql_write(body)]

    def record_attempt(
        self, attempt: AttemptRecord, *, status: str, next_at: datetime, last_error: str
    ) -> None:
        q, d = self._queries("events"), self._dialect
        at = d.timestamp(attempt.at)
        row = {
            "tenant": attempt.tenant,
            "delivery_id": attempt.delivery_id,
            "attempt": attempt.attempt,
            "at": at,
            "status_code": attempt.status_code,
            "error": attempt.error,
        }
        update = {
            "tenant": attempt.tenant,
            "id": attempt.delivery_id,
            "status": status,
            "attempt": attempt.attempt,
            "next_at": d.timestamp(next_at),
            "last_error": last_error,
            "at": at,
        }

        def body(tx: Tx) -> None:
            tx.run(q["attempt_insert"], row)
            tx.run(q["delivery_update"], update)

        self._sql_write(body)

    def get_delivery(self, tenant: str, delivery_id: str) -> DeliveryRecord | None:
        return self._role_record(
            "events", "delivery_get", {"tenant": tenant, "id": delivery_id}, DeliveryRecord
        )

    def list_deliveries(
        self,
        tenant: str,
        *,
        endpoint: str | None = None,
        status: str | None = None,
        before: tuple[datetime, str] | None = None,
        limit: int = 50,
    ) -> EventPage:
        params = {"tenant": tenant, "endpoint": endpoint or "", "status": status or ""}
        items = self._role_records(
            "events", "delivery_page", self._paged(params, before, limit), DeliveryRecord
        )
        return _page(items, limit, lambda last: (last.created_at, last.id))

    def delivery_attempts(self, tenant: str, delivery_id: str) -> list[AttemptRecord]:
        params = {"tenant": tenant, "delivery_id": delivery_id}
        return self._role_records("events", "attempt_list", params, AttemptRecord)
