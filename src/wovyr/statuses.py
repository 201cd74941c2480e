"""The statuses of executions, activities, items, child results and bulk-action batches,
and the statuses a list of executions shows and filters by: each a `StrEnum`, defined once
here (the ground floor: the store, the engine, the server and the CLI read them).
"""

from __future__ import annotations

from enum import StrEnum, nonmember

__all__ = [
    "SHOWN_STATUSES",
    "ActivityStatus",
    "BatchStatus",
    "ChildStatus",
    "ExecutionStatus",
    "ShownStatus",
]

# Statuses are `StrEnum`s: each member is equal to (and hashes, formats and serializes as)
# its string, so records, checkpoints, events and JSON hold the same text as ever, and a
# status read back from the store (a plain `str`) compares equal to its member.


class ExecutionStatus(StrEnum):
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    CONTINUED = "continued"  # ended by continue-as-new: the chain goes on in its next run
    TERMINAL = nonmember(frozenset({COMPLETED, FAILED, CANCELLED, CONTINUED}))


class ActivityStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    WAITING = "waiting"
    RETRYING = "retrying"
    COMPLETED = "completed"
    FAILED = "failed"
    SKIPPED = "skipped"
    COMPENSATING = "compensating"
    COMPENSATED = "compensated"
    COMPENSATION_FAILED = "compensation_failed"
    DONE_OK = nonmember(
        frozenset({COMPLETED, SKIPPED, COMPENSATING, COMPENSATED, COMPENSATION_FAILED})
    )
    ACTIVE = nonmember(frozenset({RUNNING, WAITING, RETRYING}))


class ShownStatus(StrEnum):
    """What a list of executions shows and filters by: an execution's own status, or
    `waiting` for a running one that waits (the stores keep `running` with `waiting_on`)."""

    RUNNING = "running"
    WAITING = "waiting"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    CONTINUED = "continued"


#: The shown statuses in the order every list, filter and error message names them.
#: (plain strings: a `click.Choice` of enum members would match their names)
SHOWN_STATUSES: tuple[str, ...] = tuple(s.value for s in ShownStatus)


class ChildStatus(StrEnum):
    """How a child workflow (or a wait for one) ended, as its parent records it."""

    COMPLETED = "completed"
    FAILED = "failed"
    TIMED_OUT = "timed_out"


class BatchStatus(StrEnum):
    """A bulk-action batch is `running` until every execution it listed has its outcome."""

    RUNNING = "running"
    COMPLETED = "completed"
