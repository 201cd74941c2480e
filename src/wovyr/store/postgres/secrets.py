"""The KMS and secrets tables of the PostgreSQL store (mixed into PostgresStore). Its SQL
lives in `secrets.sql`."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from functools import cache
from importlib import resources
from typing import Any

from psycopg.rows import dict_row

from wovyr.store.audit import AuditEntry
from wovyr.store.postgres.audit import append_audit_row
from wovyr.store.postgres.queries import parse_queries
from wovyr.store.postgres.support import Connection
from wovyr.store.rows import (
    POSTGRES,
    data_key_params,
    data_key_record,
    kms_root_params,
    kms_root_record,
    secret_record,
)
from wovyr.store.secrets import SHREDDED, DataKeyRecord, KmsRootRecord, SecretRecord

__all__ = ["PostgresSecrets"]


@cache
def _queries() -> dict[str, str]:
    text = (resources.files("wovyr.store.postgres") / "secrets.sql").read_text(encoding="utf-8")
    return parse_queries(text)


class PostgresSecrets:
    """Needs `_write()` and `_run()` from PostgresStore."""

    _write: Callable[[Callable[[Connection], Any]], Any]
    _run: Callable[..., Any]

    def _rows(self, name: str, params: dict[str, Any]) -> list[Any]:
        sql = _queries()[name]

        def body(conn: Connection) -> list[Any]:
            return conn.cursor(row_factory=dict_row).execute(sql, params).fetchall()

        rows: list[Any] = self._run(body, write=False)
        return rows

    def add_data_key(self, record: DataKeyRecord) -> DataKeyRecord:
        q, params = _queries(), data_key_params(record, POSTGRES)

        def body(conn: Connection) -> Any:
            conn.execute(q["data_key_add"], params)
            cur = conn.cursor(row_factory=dict_row)
            return cur.execute(q["data_key_get"], params).fetchone()

        return data_key_record(self._write(body), POSTGRES)

    def data_key(self, tenant: str, version: int | None = None) -> DataKeyRecord | None:
        rows = self._rows("data_key_get", {"tenant": tenant, "version": version})
        return data_key_record(rows[0], POSTGRES) if rows else None

    def list_data_keys(self) -> list[DataKeyRecord]:
        return [data_key_record(r, POSTGRES) for r in self._rows("data_key_list", {})]

    def rewrap_data_key(
        self, tenant: str, version: int, old_root_id: str, wrapped: bytes, root_id: str
    ) -> bool:
        sql = _queries()["data_key_rewrap"]
        params = {
            "tenant": tenant,
            "version": version,
            "old_root_id": old_root_id,
            "wrapped": wrapped,
            "root_id": root_id,
        }
        return int(self._write(lambda conn: conn.execute(sql, params).rowcount)) == 1

    def shred_data_keys(self, tenant: str, *, audit: AuditEntry | None = None) -> int:
        sql, params = _queries()["data_key_shred"], {"tenant": tenant, "shredded": SHREDDED}

        def body(conn: Connection) -> int:
            count = conn.execute(sql, params).rowcount
            append_audit_row(conn, audit)
            return count

        return int(self._write(body))

    def scrub_data_keys(self) -> list[str]:
        # Outside a transaction (VACUUM cannot run in one); removes the dead row versions
        # no open snapshot can still see.
        self._run(lambda conn: conn.execute(_queries()["data_key_vacuum"]), write=True)
        return [
            "PostgreSQL's write-ahead log (and any WAL archive, replica or base backup) keeps "
            "the earlier row versions until it is recycled, and a snapshot open during the "
            "vacuum keeps them in the table: rotate the root key (`wovyr admin kms rotate`) "
            "and retire the old one to make the shred final there"
        ]

    def put_secret(
        self,
        tenant: str,
        name: str,
        ciphertext: bytes,
        key_version: int,
        at: datetime,
        by: str,
        *,
        audit: AuditEntry | None = None,
    ) -> SecretRecord:
        sql = _queries()["secret_put"]
        params = {
            "tenant": tenant,
            "name": name,
            "ciphertext": ciphertext,
            "key_version": key_version,
            "at": at,
            "by": by,
        }

        def body(conn: Connection) -> Any:
            row = conn.cursor(row_factory=dict_row).execute(sql, params).fetchone()
            append_audit_row(conn, audit)
            return row

        return secret_record(self._write(body), POSTGRES)

    def get_secret(self, tenant: str, name: str) -> SecretRecord | None:
        rows = self._rows("secret_get", {"tenant": tenant, "name": name})
        return secret_record(rows[0], POSTGRES) if rows else None

    def list_secrets(self, tenant: str) -> list[SecretRecord]:
        return [secret_record(r, POSTGRES) for r in self._rows("secret_list", {"tenant": tenant})]

    def delete_secret(self, tenant: str, name: str, *, audit: AuditEntry | None = None) -> bool:
        sql = _queries()["secret_delete"]
        params = {"tenant": tenant, "name": name}

        def body(conn: Connection) -> bool:
            if conn.execute(sql, params).rowcount != 1:
                return False
            append_audit_row(conn, audit)
            return True

        return bool(self._write(body))

    def kms_root(self, root_id: str) -> KmsRootRecord | None:
        rows = self._rows("kms_root_get", {"root_id": root_id})
        return kms_root_record(rows[0], POSTGRES) if rows else None

    def put_kms_root(self, record: KmsRootRecord, *, audit: AuditEntry | None = None) -> None:
        sql, params = _queries()["kms_root_put"], kms_root_params(record, POSTGRES)

        def body(conn: Connection) -> None:
            conn.execute(sql, params)
            append_audit_row(conn, audit)

        self._write(body)
