"""The quota ledger of the PostgreSQL store (mixed into PostgresStore; the rest of the
platform tables is shared: `wovyr.store.sql.platform`). Its SQL lives in `platform.sql`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import date
from functools import cache
from importlib import resources
from typing import Any

from wovyr.errors import QuotaExceeded
from wovyr.store.postgres.queries import parse_queries
from wovyr.store.postgres.support import Connection
from wovyr.store.quotas import debit_refused, running_refused
from wovyr.store.records import Debit, NewExecution

__all__ = ["PostgresPlatform"]


@cache
def _queries() -> dict[str, str]:
    text = (resources.files("wovyr.store.postgres") / "platform.sql").read_text(encoding="utf-8")
    return parse_queries(text)


class PostgresPlatform:
    """Needs `_write()` and `_run()` from PostgresStore."""

    _write: Callable[[Callable[[Connection], Any]], Any]
    _run: Callable[..., Any]

    def quota_usage(self, tenant: str, day: date) -> dict[str, float]:
        sql = _queries()["quota_usage"]

        def body(conn: Connection) -> list[Any]:
            return conn.execute(sql, {"tenant": tenant, "day": day}).fetchall()

        rows: list[Any] = self._run(body, write=False)
        return {row[0]: float(row[1]) for row in rows}

    def debit_quota(self, tenant: str, debits: Sequence[Debit]) -> Debit | None:
        refused: list[Debit] = []

        def body(conn: Connection) -> None:
            for debit in debits:
                refused[:] = [debit]
                self._debit(conn, tenant, (debit,))  # a refusal rolls all back

        try:
            self._write(body)
        except QuotaExceeded:
            return refused[0]
        return None

    # --- quotas (inside the transaction of the write they guard) ---------------------------

    @staticmethod
    def _debit(
        conn: Connection, tenant: str, debits: Sequence[Debit], *, checked: bool = True
    ) -> None:
        """Add `debits` to the ledger; when `checked`, one its limit refuses raises
        `QuotaExceeded` (the caller's transaction is rolled back). The check is the upsert's
        own condition, evaluated on the row it locks: concurrent debits queue on that lock,
        so two servers never both take the last unit."""
        sql = _queries()["quota_debit"]
        for debit in debits:
            limit = debit.limit if checked else None
            if limit is not None and not debit.allows(0.0):
                raise debit_refused(debit)
            params = {
                "tenant": tenant,
                "budget": debit.budget,
                "day": debit.day,
                "amount": debit.amount,
                "limit": limit,
            }
            if conn.execute(sql, params).fetchone() is None:
                raise debit_refused(debit)

    @classmethod
    def _check_start(cls, conn: Connection, new: NewExecution) -> None:
        """The quotas of `new`, just inserted in this transaction: the running count (under
        a per-tenant transaction lock, so concurrent starts count one after the other), then
        the debits."""
        if new.max_running is not None:
            queries = _queries()
            conn.execute(queries["running_lock"], {"tenant": new.tenant})
            row = conn.execute(queries["running_count"], {"tenant": new.tenant}).fetchone()
            running = int(row[0]) if row else 0
            running -= 1 if new.first_step.status == "running" else 0  # itself
            if running >= new.max_running:
                raise running_refused(new.max_running)
        cls._debit(conn, new.tenant, new.debits)
