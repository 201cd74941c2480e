"""Rows to records and records to parameters, once for both SQL stores.

Rows are read by column name (SQLite: `sqlite3.Row`; PostgreSQL: psycopg's `dict_row`), so
a query's column order is its own business. The dialects differ only in how a value is
encoded, which a `Dialect` says: SQLite keeps JSON as text and times as integer
microseconds (UTC); PostgreSQL returns JSON already parsed (the connection parses it with
the codec) and times as `timestamptz`. Parameters are named (`:name` in SQLite,
`%(name)s` in PostgreSQL), so one dict serves both.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from wovyr.store.checkpoints import merged
from wovyr.store.codec import dumps, from_micros, loads, to_micros
from wovyr.store.platform import (
    ApiKeyRecord,
    IdempotencyRecord,
    McpServerRecord,
    ProviderRecord,
    TenantRecord,
)
from wovyr.store.records import (
    Claim,
    DefinitionRecord,
    EventRecord,
    ExecutionRecord,
    NewExecution,
    TimerRecord,
)
from wovyr.store.schedules import ScheduleRecord
from wovyr.store.secrets import DataKeyRecord, KmsRootRecord, SecretRecord

__all__ = [
    "POSTGRES",
    "SQLITE",
    "Dialect",
    "Row",
    "api_key_params",
    "api_key_record",
    "claim_record",
    "created_record",
    "data_key_params",
    "data_key_record",
    "definition_params",
    "definition_record",
    "event_record",
    "execution_record",
    "idempotency_params",
    "idempotency_record",
    "kms_root_params",
    "kms_root_record",
    "mcp_server_params",
    "mcp_server_record",
    "provider_params",
    "provider_record",
    "schedule_params",
    "schedule_record",
    "secret_record",
    "tenant_params",
    "tenant_record",
    "timer_record",
]


class Row(Protocol):
    """A row whose columns are read by name (`sqlite3.Row`, a psycopg `dict_row`)."""

    def __getitem__(self, key: str, /) -> Any: ...


@dataclass(frozen=True, slots=True)
class Dialect:
    """How one SQL store spells parameters and encodes JSON and timestamps."""

    name: str  # `sqlite`, `postgres`: which `x@<name>` blocks of a role's SQL it takes
    params: Callable[[str], str]  # SQL with `:name` parameters -> as the driver takes them
    json: Callable[[Any], Any]  # a JSON column as the driver returns it -> the value
    time: Callable[[Any], datetime]  # a timestamp column -> an aware UTC datetime
    timestamp: Callable[[datetime], Any]  # a datetime -> the parameter the column takes
    array: Callable[[list[Any]], Any]  # a list parameter (SQLite: a JSON array for json_each)

    def time_or_none(self, value: Any) -> datetime | None:
        return None if value is None else self.time(value)

    def timestamp_or_none(self, value: datetime | None) -> Any:
        return None if value is None else self.timestamp(value)


def _as_is(value: Any) -> Any:
    return value


def _utc(value: datetime) -> datetime:
    return value.astimezone(UTC)


_NAMED = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")  # `:name`, not a `::type` cast


def _pyformat(sql: str) -> str:
    """`:name` -> `%(name)s` (psycopg), a literal `%` doubled."""
    return _NAMED.sub(r"%(\1)s", sql.replace("%", "%%"))


_JSON_CAST = re.compile(r"(?<![:\w])(:[A-Za-z_]\w*)::jsonb?\b")


def _sqlite_sql(sql: str) -> str:
    """sqlite3 takes `:name` itself; a JSON parameter (`:name::json`) is plain text here."""
    return _JSON_CAST.sub(r"\1", sql)


SQLITE = Dialect(
    "sqlite", _sqlite_sql, json=loads, time=from_micros, timestamp=to_micros, array=dumps
)
POSTGRES = Dialect("postgres", _pyformat, json=_as_is, time=_utc, timestamp=_as_is, array=_as_is)


# --- definitions ---------------------------------------------------------------------------


def definition_record(row: Row, d: Dialect) -> DefinitionRecord:
    """Columns hash, name, version, source, created_at, tenant (a registry row gives its
    `applied_at` as created_at)."""
    return DefinitionRecord(
        row["hash"], row["name"], row["version"], row["source"], d.time(row["created_at"]),
        row["tenant"],
    )  # fmt: skip


def definition_params(record: DefinitionRecord, d: Dialect) -> dict[str, Any]:
    return {
        "tenant": record.tenant,
        "hash": record.hash,
        "name": record.name,
        "version": record.version,
        "source": record.source,
        "created_at": d.timestamp(record.created_at),
    }


# --- executions, events, timers, claims ----------------------------------------------------


def execution_record(
    row: Row, d: Dialect, *, with_checkpoint: bool, checkpoint: dict[str, Any] | None = None
) -> ExecutionRecord:
    """The record of `row`; with `with_checkpoint`, its checkpoint (`checkpoint` when the
    store read it apart, else the row's: see `stored_checkpoint`)."""
    if with_checkpoint and checkpoint is None:
        checkpoint = stored_checkpoint(row, d)
    return ExecutionRecord(
        id=row["id"],
        tenant=row["tenant"],
        workflow=row["workflow"],
        version=row["version"],
        definition_hash=row["definition_hash"],
        status=row["status"],
        created_at=d.time(row["created_at"]),
        updated_at=d.time(row["updated_at"]),
        seq=row["seq"],
        parent_id=row["parent_id"],
        waiting_on=row["waiting_on"],
        input=d.json(row["input"]),
        output=d.json(row["output"]),
        error=d.json(row["error"]),
        ready=bool(row["ready"]),
        lease_owner=row["lease_owner"],
        lease_until=d.time_or_none(row["lease_until"]),
        fence=row["fence"],
        checkpoint=checkpoint,
        labels=_labels(row, d),
    )


def _labels(row: Row, d: Dialect) -> dict[str, str]:
    """The labels column, where the query reads it (lists and loads); else none."""
    try:
        value = row["labels"]
    except (KeyError, IndexError):
        return {}
    return dict(d.json(value) or {}) if value is not None else {}


def created_record(new: NewExecution) -> ExecutionRecord:
    """The row just inserted, without reading it back."""
    step = new.first_step
    return ExecutionRecord(
        id=new.id,
        tenant=new.tenant,
        workflow=new.workflow,
        version=new.version,
        definition_hash=new.definition_hash,
        status=step.status,
        created_at=new.created_at,
        updated_at=step.updated_at,
        seq=len(step.events),
        parent_id=new.parent_id,
        waiting_on=step.waiting_on,
        input=new.input,
        output=step.output,
        error=step.error,
        ready=step.ready,
        lease_owner=new.lease_owner,
        lease_until=new.lease_until,
        fence=1 if new.lease_owner else 0,
        checkpoint=step.checkpoint,
        labels=dict(new.labels),
    )


def event_record(execution_id: str, row: Row, d: Dialect) -> EventRecord:
    at, data = d.time(row["at"]), d.json(row["data"])
    return EventRecord(execution_id, row["seq"], row["type"], at, data)


def timer_record(row: Row, d: Dialect) -> TimerRecord:
    return TimerRecord(row["execution_id"], row["timer_id"], d.time(row["fire_at"]), row["tenant"])


def claim_record(row: Row, d: Dialect, checkpoint: dict[str, Any] | None = None) -> Claim:
    if checkpoint is None:
        checkpoint = stored_checkpoint(row, d)
    return Claim(
        row["id"], row["fence"], row["seq"], checkpoint, row["definition_hash"], row["tenant"]
    )


def stored_checkpoint(row: Row, d: Dialect) -> dict[str, Any]:
    """The row's checkpoint column, with the deltas its query read beside it (a
    `checkpoint_deltas` column: a list, oldest first, or null) folded in."""
    base: dict[str, Any] = d.json(row["checkpoint"])
    try:
        deltas = row["checkpoint_deltas"]
    except (KeyError, IndexError):
        return base
    return merged(base, d.json(deltas)) if deltas else base


# --- schedules -----------------------------------------------------------------------------


def schedule_record(row: Row, d: Dialect) -> ScheduleRecord:
    return ScheduleRecord(
        tenant=row["tenant"],
        id=row["id"],
        workflow=row["workflow"],
        definition_hash=row["definition_hash"],
        input=d.json(row["input"]),
        spec=d.json(row["spec"]),
        overlap=row["overlap"],
        catchup_window=row["catchup_window"],
        paused=bool(row["paused"]),
        note=row["note"],
        start_at=d.time_or_none(row["start_at"]),
        end_at=d.time_or_none(row["end_at"]),
        remaining_actions=row["remaining_actions"],
        next_fire_at=d.time_or_none(row["next_fire_at"]),
        last_fire_at=d.time_or_none(row["last_fire_at"]),
        buffered=tuple(d.json(row["buffered"])),
        running=tuple(d.json(row["running"])),
        recent=tuple(d.json(row["recent"])),
        fired_count=row["fired_count"],
        skipped_count=row["skipped_count"],
        missed_count=row["missed_count"],
        created_at=d.time(row["created_at"]),
        updated_at=d.time(row["updated_at"]),
        version=row["version"],
    )


def schedule_params(r: ScheduleRecord, d: Dialect) -> dict[str, Any]:
    return {
        "tenant": r.tenant,
        "id": r.id,
        "workflow": r.workflow,
        "definition_hash": r.definition_hash,
        "input": dumps(r.input),
        "spec": dumps(r.spec),
        "overlap": r.overlap,
        "catchup_window": r.catchup_window,
        "paused": r.paused,
        "note": r.note,
        "start_at": d.timestamp_or_none(r.start_at),
        "end_at": d.timestamp_or_none(r.end_at),
        "remaining_actions": r.remaining_actions,
        "next_fire_at": d.timestamp_or_none(r.next_fire_at),
        "last_fire_at": d.timestamp_or_none(r.last_fire_at),
        "buffered": dumps(list(r.buffered)),
        "running": dumps(list(r.running)),
        "recent": dumps(list(r.recent)),
        "fired_count": r.fired_count,
        "skipped_count": r.skipped_count,
        "missed_count": r.missed_count,
        "created_at": d.timestamp(r.created_at),
        "updated_at": d.timestamp(r.updated_at),
        "version": r.version,
    }


# --- API keys, idempotency keys ------------------------------------------------------------


def api_key_record(row: Row, d: Dialect) -> ApiKeyRecord:
    return ApiKeyRecord(
        id=row["id"],
        tenant=row["tenant"],
        role=row["role"],
        name=row["name"],
        prefix=row["prefix"],
        key_hash=row["key_hash"],
        created_at=d.time(row["created_at"]),
        revoked_at=d.time_or_none(row["revoked_at"]),
        last_used_at=d.time_or_none(row["last_used_at"]),
    )


def api_key_params(record: ApiKeyRecord, d: Dialect) -> dict[str, Any]:
    return {
        "id": record.id,
        "tenant": record.tenant,
        "role": record.role,
        "name": record.name,
        "prefix": record.prefix,
        "key_hash": record.key_hash,
        "created_at": d.timestamp(record.created_at),
        "revoked_at": d.timestamp_or_none(record.revoked_at),
        "last_used_at": d.timestamp_or_none(record.last_used_at),
    }


def idempotency_record(row: Row, d: Dialect) -> IdempotencyRecord:
    return IdempotencyRecord(
        row["tenant"], row["key"], row["fingerprint"], row["execution_id"],
        d.time(row["created_at"]),
    )  # fmt: skip


def idempotency_params(record: IdempotencyRecord, d: Dialect) -> dict[str, Any]:
    return {
        "tenant": record.tenant,
        "key": record.key,
        "fingerprint": record.fingerprint,
        "execution_id": record.execution_id,
        "created_at": d.timestamp(record.created_at),
    }


def tenant_record(row: Row, d: Dialect) -> TenantRecord:
    policy, quotas, retention = row["policy"], row["quotas"], row["retention"]
    return TenantRecord(
        tenant=row["tenant"],
        policy=None if policy is None else d.json(policy),
        updated_at=d.time(row["updated_at"]),
        updated_by=row["updated_by"],
        quotas=None if quotas is None else d.json(quotas),
        seal_payloads=bool(row["seal_payloads"]),
        retention=None if retention is None else d.json(retention),
    )


def tenant_params(record: TenantRecord, d: Dialect) -> dict[str, Any]:
    return {
        "tenant": record.tenant,
        "policy": None if record.policy is None else dumps(record.policy),
        "updated_at": d.timestamp(record.updated_at),
        "updated_by": record.updated_by,
        "quotas": None if record.quotas is None else dumps(record.quotas),
        "seal_payloads": record.seal_payloads if d is POSTGRES else int(record.seal_payloads),
        "retention": None if record.retention is None else dumps(record.retention),
    }


# --- KMS and secrets -----------------------------------------------------------------------


def data_key_record(row: Row, d: Dialect) -> DataKeyRecord:
    return DataKeyRecord(
        row["tenant"], int(row["version"]), bytes(row["wrapped"]), row["root_id"],
        d.time(row["created_at"]),
    )  # fmt: skip


def data_key_params(record: DataKeyRecord, d: Dialect) -> dict[str, Any]:
    return {
        "tenant": record.tenant,
        "version": record.version,
        "wrapped": record.wrapped,
        "root_id": record.root_id,
        "created_at": d.timestamp(record.created_at),
    }


def secret_record(row: Row, d: Dialect) -> SecretRecord:
    return SecretRecord(
        row["tenant"], row["name"], int(row["version"]), bytes(row["ciphertext"]),
        int(row["key_version"]), d.time(row["created_at"]), d.time(row["updated_at"]),
        row["updated_by"],
    )  # fmt: skip


def kms_root_record(row: Row, d: Dialect) -> KmsRootRecord:
    return KmsRootRecord(
        row["root_id"], d.time(row["created_at"]), d.time_or_none(row["escrowed_at"]),
        row["escrowed_by"], d.time_or_none(row["rotated_at"]),
    )  # fmt: skip


def kms_root_params(record: KmsRootRecord, d: Dialect) -> dict[str, Any]:
    return {
        "root_id": record.root_id,
        "created_at": d.timestamp(record.created_at),
        "escrowed_at": d.timestamp_or_none(record.escrowed_at),
        "escrowed_by": record.escrowed_by,
        "rotated_at": d.timestamp_or_none(record.rotated_at),
    }


def provider_record(row: Row, d: Dialect) -> ProviderRecord:
    price_in, price_out = row["price_in"], row["price_out"]
    return ProviderRecord(
        tenant=row["tenant"],
        name=row["name"],
        base_url=row["base_url"],
        api_key_secret=row["api_key_secret"],
        default_model=row["default_model"],
        price_in=None if price_in is None else float(price_in),
        price_out=None if price_out is None else float(price_out),
        updated_at=d.time(row["updated_at"]),
        updated_by=row["updated_by"],
        kind=row["kind"],
        options=_json_object(row["options"]),
        prices=_json_object(row["prices"]),
    )


def _json_object(value: Any) -> dict[str, Any] | None:
    """A JSON object column (SQLite `TEXT`, PostgreSQL `jsonb`); None: NULL."""
    if isinstance(value, str):
        value = json.loads(value)
    return value if isinstance(value, dict) else None


def provider_params(record: ProviderRecord, d: Dialect) -> dict[str, Any]:
    return {
        "tenant": record.tenant,
        "name": record.name,
        "base_url": record.base_url,
        "api_key_secret": record.api_key_secret,
        "default_model": record.default_model,
        "price_in": record.price_in,
        "price_out": record.price_out,
        "updated_at": d.timestamp(record.updated_at),
        "updated_by": record.updated_by,
        "kind": record.kind,
        "options": json.dumps(record.options, sort_keys=True) if record.options else None,
        "prices": json.dumps(record.prices, sort_keys=True) if record.prices else None,
    }


def mcp_server_record(row: Row, d: Dialect) -> McpServerRecord:
    command = row["command"]
    headers = row["header_secrets"]
    if isinstance(command, str):
        command = json.loads(command)
    if isinstance(headers, str):
        headers = json.loads(headers)
    return McpServerRecord(
        tenant=row["tenant"],
        name=row["name"],
        transport=row["transport"],
        command=None if command is None else tuple(str(a) for a in command),
        url=row["url"],
        header_secrets={str(k): str(v) for k, v in (headers or {}).items()},
        updated_at=d.time(row["updated_at"]),
        updated_by=row["updated_by"],
    )


def mcp_server_params(record: McpServerRecord, d: Dialect) -> dict[str, Any]:
    """The command and headers as JSON text (SQLite `TEXT`, PostgreSQL `jsonb` via a cast)."""
    command = None if record.command is None else json.dumps(list(record.command))
    return {
        "tenant": record.tenant,
        "name": record.name,
        "transport": record.transport,
        "command": command,
        "url": record.url,
        "header_secrets": json.dumps(record.header_secrets, sort_keys=True),
        "updated_at": d.timestamp(record.updated_at),
        "updated_by": record.updated_by,
    }
