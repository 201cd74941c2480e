"""The quota ledger of the SQLite store (mixed into SQLiteStore; the rest of the platform
tables is shared: `wovyr.store.sql.platform`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import date
from typing import Any

from wovyr.errors import QuotaExceeded
from wovyr.store.quotas import debit_refused, running_refused
from wovyr.store.records import Debit, NewExecution

__all__ = ["SQLitePlatform"]


class SQLitePlatform:
    """Needs `_write()` and `_read()` from SQLiteStore."""

    _write: Callable[[], AbstractContextManager[sqlite3.Connection]]
    _read: Callable[..., list[Any]]

    def quota_usage(self, tenant: str, day: date) -> dict[str, float]:
        rows = self._read(
            "SELECT budget, used FROM quota_usage WHERE tenant = ? AND day = ?",
            (tenant, day.isoformat()),
        )
        return {row[0]: float(row[1]) for row in rows}

    def debit_quota(self, tenant: str, debits: Sequence[Debit]) -> Debit | None:
        refused: list[Debit] = []
        try:
            with self._write() as conn:
                for debit in debits:
                    refused[:] = [debit]
                    self._debit(conn, tenant, (debit,))  # a refusal rolls all back
        except QuotaExceeded:
            return refused[0]
        return None

    # --- quotas (inside the transaction of the write they guard) ---------------------------

    @staticmethod
    def _debit(
        conn: sqlite3.Connection, tenant: str, debits: Sequence[Debit], *, checked: bool = True
    ) -> None:
        """Add `debits` to the ledger; when `checked`, one its limit refuses raises
        `QuotaExceeded` (and the caller's transaction is rolled back)."""
        for debit in debits:
            limit = debit.limit if checked else None
            if limit is not None and not debit.allows(0.0):
                raise debit_refused(debit)
            cur = conn.execute(
                "INSERT INTO quota_usage (tenant, budget, day, used)"
                " VALUES (:tenant, :budget, :day, :amount)"
                " ON CONFLICT (tenant, budget, day) DO UPDATE SET used = used + excluded.used"
                " WHERE :limit IS NULL OR (used + excluded.used <= :limit AND used < :limit)",
                {
                    "tenant": tenant,
                    "budget": debit.budget,
                    "day": debit.day.isoformat(),
                    "amount": debit.amount,
                    "limit": limit,
                },
            )
            if cur.rowcount != 1:
                raise debit_refused(debit)

    @classmethod
    def _check_start(cls, conn: sqlite3.Connection, new: NewExecution) -> None:
        """The quotas of `new`, just inserted: the running count, then the debits."""
        if new.max_running is not None:
            row = conn.execute(
                "SELECT count(*) FROM executions WHERE tenant = ? AND status = 'running'"
                " AND id != ?",
                (new.tenant, new.id),
            ).fetchone()
            if int(row[0]) >= new.max_running:
                raise running_refused(new.max_running)
        cls._debit(conn, new.tenant, new.debits)
