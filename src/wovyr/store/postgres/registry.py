"""Definitions by hash and the DefinitionRegistry half of the PostgreSQL store (mixed into
PostgresStore). Its SQL lives in `registry.sql`."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from importlib import resources
from typing import Any

from psycopg.rows import dict_row

from wovyr.store.audit import AuditEntry
from wovyr.store.base import DEFAULT_TENANT, DefinitionRecord
from wovyr.store.postgres.audit import append_audit_row
from wovyr.store.postgres.queries import parse_queries
from wovyr.store.postgres.support import Connection
from wovyr.store.registry import ApplyOutcome
from wovyr.store.rows import POSTGRES, definition_params, definition_record

__all__ = ["PostgresRegistry"]


@cache
def _queries() -> dict[str, str]:
    text = (resources.files("wovyr.store.postgres") / "registry.sql").read_text(encoding="utf-8")
    return parse_queries(text)


class PostgresRegistry:
    """Needs `_write()` and `_run()` from PostgresStore."""

    _write: Callable[[Callable[[Connection], Any]], Any]
    _run: Callable[..., Any]

    def _registered(self, name: str, params: dict[str, Any]) -> list[DefinitionRecord]:
        sql = _queries()[name]

        def body(conn: Connection) -> list[Any]:
            return conn.cursor(row_factory=dict_row).execute(sql, params).fetchall()

        rows: list[Any] = self._run(body, write=False)
        return [definition_record(row, POSTGRES) for row in rows]

    def put_definition(self, record: DefinitionRecord) -> None:
        sql, params = _queries()["put_definition"], definition_params(record, POSTGRES)
        self._run(lambda conn: conn.execute(sql, params), write=True)

    def apply_definition(
        self, record: DefinitionRecord, *, audit: AuditEntry | None = None
    ) -> ApplyOutcome:
        q = _queries()
        params = definition_params(record, POSTGRES)

        def body(conn: Connection) -> ApplyOutcome:
            conn.execute(
                "SELECT pg_advisory_xact_lock(hashtext(%s))",
                (f"{record.tenant}/{record.name}/{record.version}",),
            )
            row = conn.execute(q["registry_lookup"], params).fetchone()
            if row is not None:
                return "unchanged" if row[0] == record.hash else "conflict"
            conn.execute(q["put_definition"], params)
            conn.execute(q["registry_insert"], params)
            append_audit_row(conn, audit)
            return "applied"

        outcome: ApplyOutcome = self._write(body)
        return outcome

    def registered_definition(
        self, name: str, version: str | None = None, tenant: str = DEFAULT_TENANT
    ) -> DefinitionRecord | None:
        params = {"tenant": tenant, "name": name, "version": version}
        found = self._registered(
            "registry_latest" if version is None else "registry_version", params
        )
        return found[0] if found else None

    def list_registered(self, tenant: str = DEFAULT_TENANT) -> list[DefinitionRecord]:
        return self._registered("registry_list", {"tenant": tenant})
