"""The quota ledger of both SQL stores (the contract is `wovyr.store.quotas` and
`TenantStore.quota_usage`/`debit_quota`); its SQL lives in `quotas.sql`. A start's quotas
(`_check_start`) and a step's debits (`_debit`) are written in the transaction of the store's
own write they guard, handed in as a `Tx`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

from wovyr.errors import QuotaExceeded
from wovyr.store.quotas import debit_refused, running_refused
from wovyr.store.records import Debit, NewExecution
from wovyr.store.sql import SQLRole, Tx

__all__ = ["SQLQuotas"]


class SQLQuotas(SQLRole):
    def quota_usage(self, tenant: str, day: date) -> dict[str, float]:
        sql = self._queries("quotas")["quota_usage"]
        rows = self._sql_read(sql, {"tenant": tenant, "day": day.isoformat()})
        return {row["budget"]: float(row["used"]) for row in rows}

    def debit_quota(self, tenant: str, debits: Sequence[Debit]) -> Debit | None:
        refused: list[Debit] = []

        def body(tx: Tx) -> None:
            for debit in debits:
                refused[:] = [debit]
                self._debit(tx, tenant, (debit,))  # a refusal rolls all back

        try:
            self._sql_write(body)
        except QuotaExceeded:
            return refused[0]
        return None

    def _debit(self, tx: Tx, tenant: str, debits: Sequence[Debit], *, checked: bool = True) -> None:
        """Add `debits` to the ledger; when `checked`, one its limit refuses raises
        `QuotaExceeded` (the caller's transaction is rolled back). The check is the upsert's
        own condition, evaluated on the row it locks: concurrent debits queue on that lock,
        so two servers never both take the last unit."""
        sql = self._queries("quotas")["quota_debit"]
        for debit in debits:
            limit = debit.limit if checked else None
            if limit is not None and not debit.allows(0.0):
                raise debit_refused(debit)
            params = {"tenant": tenant, "budget": debit.budget, "day": debit.day.isoformat()}
            if not tx.rows(sql, {**params, "amount": debit.amount, "limit": limit}):
                raise debit_refused(debit)

    def _check_start(self, tx: Tx, new: NewExecution) -> None:
        """The quotas of `new`, just inserted in this transaction: the running count (under
        a per-tenant transaction lock where writers run at once, so concurrent starts count
        one after the other), then the debits."""
        if new.max_running is not None:
            q = self._queries("quotas")
            if "running_lock" in q:
                tx.rows(q["running_lock"], {"tenant": new.tenant})
            rows = tx.rows(q["running_count"], {"tenant": new.tenant, "id": new.id})
            if int(rows[0]["n"]) >= new.max_running:
                raise running_refused(new.max_running)
        self._debit(tx, new.tenant, new.debits)
