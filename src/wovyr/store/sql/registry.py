"""Definitions by hash and the DefinitionRegistry half of both SQL stores (the contract is
`wovyr.store.registry`). Its SQL lives in `registry.sql`."""

from __future__ import annotations

from wovyr.store.audit import AuditEntry
from wovyr.store.base import DEFAULT_TENANT, DefinitionRecord
from wovyr.store.registry import ApplyOutcome
from wovyr.store.rows import from_row, to_params
from wovyr.store.sql import Params, SQLRole, Tx

__all__ = ["SQLRegistry"]


class SQLRegistry(SQLRole):
    def _definitions(self, name: str, params: Params) -> list[DefinitionRecord]:
        rows = self._sql_read(self._queries("registry")[name], params)
        return [from_row(DefinitionRecord, row, self._dialect) for row in rows]

    def get_definition(
        self, definition_hash: str, tenant: str = DEFAULT_TENANT
    ) -> DefinitionRecord | None:
        found = self._definitions("get_definition", {"tenant": tenant, "hash": definition_hash})
        return found[0] if found else None

    def put_definition(self, record: DefinitionRecord) -> None:
        sql, params = (
            self._queries("registry")["put_definition"],
            to_params(record, self._dialect),
        )
        self._sql_write(lambda tx: tx.run(sql, params))

    def apply_definition(
        self, record: DefinitionRecord, *, audit: AuditEntry | None = None
    ) -> ApplyOutcome:
        q = self._queries("registry")
        params = to_params(record, self._dialect)

        def body(tx: Tx) -> ApplyOutcome:
            if "registry_lock" in q:
                tx.rows(q["registry_lock"], params)
            row = tx.rows(q["registry_lookup"], params)
            if row:
                return "unchanged" if row[0]["hash"] == record.hash else "conflict"
            tx.run(q["put_definition"], params)
            tx.run(q["registry_insert"], params)
            tx.append_audit(audit)
            return "applied"

        outcome: ApplyOutcome = self._sql_write(body)
        return outcome

    def registered_definition(
        self, name: str, version: str | None = None, tenant: str = DEFAULT_TENANT
    ) -> DefinitionRecord | None:
        params = {"tenant": tenant, "name": name, "version": version}
        found = self._definitions(
            "registry_latest" if version is None else "registry_version", params
        )
        return found[0] if found else None

    def list_registered(self, tenant: str = DEFAULT_TENANT) -> list[DefinitionRecord]:
        return self._definitions("registry_list", {"tenant": tenant})
