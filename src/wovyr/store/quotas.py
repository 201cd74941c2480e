"""Quota checks every store makes the same way, inside the transaction of the write they
guard (see `Debit` and `NewExecution.max_running`): what a refusal says, and the check a
fresh ledger row makes (the SQL upsert checks an existing row itself)."""

from __future__ import annotations

from wovyr.errors import QuotaExceeded
from wovyr.store.records import Debit

__all__ = ["RUNNING_RETRY_AFTER", "debit_refused", "running_refused", "schedules_refused"]

RUNNING_RETRY_AFTER = 5.0  # seconds: a running execution of the tenant may end by then


def _amount(value: float) -> str:
    return f"{value:g}"


def debit_refused(debit: Debit) -> QuotaExceeded:
    """The error of a debit the ledger refused."""
    limit = _amount(debit.limit) if debit.limit is not None else "?"
    name = debit.budget.replace("_", "-")
    return QuotaExceeded(
        f"quota exceeded: {name} per day is {limit} (UTC day {debit.day.isoformat()})",
        budget=f"{debit.budget}_per_day",
        limit=debit.limit,
        retry_after=debit.retry_after,
        hint="try again after midnight UTC, or ask the host's administrator to raise it",
    )


def running_refused(limit: int) -> QuotaExceeded:
    """The error of a start refused by the concurrent-executions quota."""
    hint = "try again when one of the tenant's running executions has ended"
    return _at_most(
        limit, "concurrent executions", "concurrent_executions", RUNNING_RETRY_AFTER, hint
    )


def schedules_refused(limit: int) -> QuotaExceeded:
    """The error of a schedule refused by the tenant's `max_schedules` quota."""
    hint = "delete a schedule first, or ask the host's administrator to raise the quota"
    return _at_most(limit, "schedules", "max_schedules", 0.0, hint)


def _at_most(limit: int, what: str, budget: str, retry_after: float, hint: str) -> QuotaExceeded:
    """The error of the count quota `budget` (at most `limit` of `what`) that refused one
    more."""
    return QuotaExceeded(
        f"quota exceeded: at most {limit} {what}",
        budget=budget,
        limit=limit,
        retry_after=retry_after,
        hint=hint,
    )
