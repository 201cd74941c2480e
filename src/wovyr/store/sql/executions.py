"""Reads of executions' histories and of a tenant's workflow names, once for both SQL
stores (the contract is `Store.history` and `Store.workflow_names`); its SQL lives in
`executions.sql`. Writing executions, loading and listing them stay each store's own (a
checkpoint in parts or in delta rows, the indexes each store's list walks)."""

from __future__ import annotations

from wovyr.store.records import EventRecord
from wovyr.store.rows import event_record
from wovyr.store.sql import SQLRole

__all__ = ["SQLExecutions"]


class SQLExecutions(SQLRole):
    def history(
        self, execution_id: str, after_seq: int = 0, limit: int | None = None, *, tenant: str
    ) -> list[EventRecord]:
        sql = self._queries("executions")["history"]
        params = {"tenant": tenant, "id": execution_id, "after_seq": after_seq, "limit": limit}
        return [event_record(execution_id, r, self._dialect) for r in self._sql_read(sql, params)]

    def workflow_names(self, tenant: str, contains: str, limit: int = 50) -> list[str]:
        """The workflow names of `tenant`'s stored definitions that contain `contains`
        (case-insensitive), by name: the definitions table, not the executions."""
        sql = self._queries("executions")["workflow_names"]
        params = {"tenant": tenant, "contains": contains.lower(), "limit": limit}
        return [str(r["name"]) for r in self._sql_read(sql, params)]
