"""The DefinitionRegistry half of the PostgreSQL store (mixed into PostgresStore)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC
from functools import cache
from importlib import resources
from typing import Any

import psycopg

from wovyr.store.base import DEFAULT_TENANT, DefinitionRecord
from wovyr.store.postgres.queries import parse_queries
from wovyr.store.registry import ApplyOutcome

__all__ = ["PostgresRegistry"]

Connection = psycopg.Connection[Any]


@cache
def _queries() -> dict[str, str]:
    text = (resources.files("wovyr.store.postgres") / "registry.sql").read_text(encoding="utf-8")
    return parse_queries(text)


def _record(row: Sequence[Any]) -> DefinitionRecord:
    return DefinitionRecord(row[0], row[1], row[2], row[3], row[4].astimezone(UTC), row[5])


class PostgresRegistry:
    _write: Callable[[Callable[[Connection], Any]], Any]
    _run: Callable[..., Any]

    def _registry_read(self, name: str, params: dict[str, Any]) -> list[Any]:
        sql = _queries()[name]
        return list(self._run(lambda conn: conn.execute(sql, params).fetchall(), write=False))

    def apply_definition(self, record: DefinitionRecord) -> ApplyOutcome:
        q = _queries()
        params = {
            "tenant": record.tenant,
            "hash": record.hash,
            "name": record.name,
            "version": record.version,
            "source": record.source,
            "created_at": record.created_at,
        }

        def body(conn: Connection) -> ApplyOutcome:
            conn.execute(
                "SELECT pg_advisory_xact_lock(hashtext(%s))",
                (f"{record.tenant}/{record.name}/{record.version}",),
            )
            row = conn.execute(q["registry_lookup"], params).fetchone()
            if row is not None:
                return "unchanged" if row[0] == record.hash else "conflict"
            conn.execute(q["registry_put_definition"], params)
            conn.execute(q["registry_insert"], params)
            return "applied"

        outcome: ApplyOutcome = self._write(body)
        return outcome

    def registered_definition(
        self, name: str, version: str | None = None, tenant: str = DEFAULT_TENANT
    ) -> DefinitionRecord | None:
        params = {"tenant": tenant, "name": name, "version": version}
        rows = self._registry_read(
            "registry_latest" if version is None else "registry_version", params
        )
        return _record(rows[0]) if rows else None

    def list_registered(self, tenant: str = DEFAULT_TENANT) -> list[DefinitionRecord]:
        return [_record(r) for r in self._registry_read("registry_list", {"tenant": tenant})]
