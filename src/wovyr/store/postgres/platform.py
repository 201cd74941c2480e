"""The platform half of the PostgreSQL store (API keys, idempotency keys; mixed into
PostgresStore). Its SQL lives in `platform.sql`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from typing import Any

import psycopg

from wovyr.store.platform import ApiKeyRecord, IdempotencyRecord
from wovyr.store.postgres.queries import parse_queries

__all__ = ["PostgresPlatform"]

Connection = psycopg.Connection[Any]


@cache
def _queries() -> dict[str, str]:
    text = (resources.files("wovyr.store.postgres") / "platform.sql").read_text(encoding="utf-8")
    return parse_queries(text)


def _dt(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(UTC)


def _key(row: Sequence[Any]) -> ApiKeyRecord:
    return ApiKeyRecord(
        id=row[0],
        tenant=row[1],
        role=row[2],
        name=row[3],
        prefix=row[4],
        key_hash=row[5],
        created_at=row[6].astimezone(UTC),
        revoked_at=_dt(row[7]),
        last_used_at=_dt(row[8]),
    )


def _idempotency(row: Sequence[Any]) -> IdempotencyRecord:
    return IdempotencyRecord(row[0], row[1], row[2], row[3], row[4].astimezone(UTC))


class PostgresPlatform:
    """Needs `_write()` and `_run()` from PostgresStore."""

    _write: Callable[[Callable[[Connection], Any]], Any]
    _run: Callable[..., Any]

    def _platform_read(self, name: str, params: dict[str, Any]) -> list[Any]:
        sql = _queries()[name]
        return list(self._run(lambda conn: conn.execute(sql, params).fetchall(), write=False))

    def _platform_write(self, name: str, params: dict[str, Any]) -> int:
        sql = _queries()[name]
        return int(self._write(lambda conn: conn.execute(sql, params).rowcount))

    # --- API keys ------------------------------------------------------------------------

    def create_api_key(self, record: ApiKeyRecord, *, only_if_none: bool = False) -> bool:
        q = _queries()
        params = {
            "id": record.id,
            "tenant": record.tenant,
            "role": record.role,
            "name": record.name,
            "prefix": record.prefix,
            "key_hash": record.key_hash,
            "created_at": record.created_at,
            "revoked_at": record.revoked_at,
            "last_used_at": record.last_used_at,
        }

        def body(conn: Connection) -> bool:
            if only_if_none:
                conn.execute(q["api_key_lock"])
                if conn.execute(q["api_key_any"]).fetchone() is not None:
                    return False
            return conn.execute(q["api_key_insert"], params).rowcount == 1

        return bool(self._write(body))

    def api_key_by_hash(self, key_hash: str) -> ApiKeyRecord | None:
        rows = self._platform_read("api_key_by_hash", {"key_hash": key_hash})
        return _key(rows[0]) if rows else None

    def get_api_key(self, key_id: str) -> ApiKeyRecord | None:
        rows = self._platform_read("api_key_get", {"id": key_id})
        return _key(rows[0]) if rows else None

    def list_api_keys(self, tenant: str | None = None) -> list[ApiKeyRecord]:
        return [_key(r) for r in self._platform_read("api_key_list", {"tenant": tenant})]

    def revoke_api_key(self, key_id: str, at: datetime) -> bool:
        return self._platform_write("api_key_revoke", {"id": key_id, "at": at}) == 1

    def touch_api_key(self, key_id: str, at: datetime) -> None:
        self._platform_write("api_key_touch", {"id": key_id, "at": at})

    # --- idempotency keys ----------------------------------------------------------------

    def claim_idempotency_key(self, record: IdempotencyRecord) -> IdempotencyRecord:
        q = _queries()
        params = {
            "tenant": record.tenant,
            "key": record.key,
            "fingerprint": record.fingerprint,
            "execution_id": record.execution_id,
            "created_at": record.created_at,
        }

        def body(conn: Connection) -> Any:
            row = conn.execute(q["idempotency_claim"], params).fetchone()
            if row is None:
                # A concurrent claim committed after this statement's snapshot was taken:
                # a new statement sees its row.
                row = conn.execute(
                    "SELECT tenant, key, fingerprint, execution_id, created_at"
                    " FROM idempotency_keys WHERE tenant = %(tenant)s AND key = %(key)s",
                    params,
                ).fetchone()
            return row

        row = self._write(body)
        return _idempotency(row)

    def purge_idempotency_keys(self, before: datetime) -> int:
        return self._platform_write("idempotency_purge", {"before": before})
