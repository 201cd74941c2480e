"""Helpers of the PostgreSQL store: connections, parameters, rows and error translation."""

from __future__ import annotations

import select
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import pq
from psycopg.types.json import set_json_loads
from psycopg_pool import ConnectionPool

from wovyr.errors import StoreError, StoreUnavailable
from wovyr.store.base import StepWrite
from wovyr.store.checkpoints import Plan
from wovyr.store.codec import dumps, loads

__all__ = [
    "Connection",
    "batch_params",
    "channel",
    "check_connection",
    "configure",
    "rows",
    "step_params",
    "translate",
    "usable",
]

Connection = psycopg.Connection[Any]
# SQLSTATE classes meaning "the server or the connection is not there": connection
# exception, insufficient resources, operator intervention (shutdown, terminated backend).
_UNAVAILABLE_CLASSES = ("08", "53", "57")


def channel(schema: str | None) -> str:
    """The NOTIFY channel of a schema (a channel name is at most 63 bytes)."""
    if schema in (None, "public"):
        return "wovyr_ready"
    return f"wovyr_ready:{schema}".encode()[:63].decode("utf-8", "ignore")


def rows(cursor: psycopg.Cursor[Any]) -> list[Any]:
    # Not `cursor.description`: it builds a Column object per column on every call.
    result = cursor.pgresult
    return cursor.fetchall() if result and result.status == pq.ExecStatus.TUPLES_OK else []


def configure(conn: Connection) -> None:
    """A new pool connection reads json/jsonb columns with the codec's fast parser."""
    set_json_loads(loads, conn)


def check_connection(conn: Connection) -> None:
    """The pool's check before it hands out a connection, without a round trip in the
    common case: an idle connection has nothing to read, so a readable socket means the
    server said something (it terminated the backend, it is shutting down) or closed it;
    only then is the connection pinged, and replaced if that fails."""
    if conn.closed or conn.broken:
        raise psycopg.OperationalError("the connection is closed")
    if _readable(conn.fileno()):
        ConnectionPool.check_connection(conn)


def usable(conn: Connection) -> bool:
    """`check_connection` as a yes/no answer, for a caller that replaces a dead connection
    itself (the pool's own check loop sleeps 1, 2, 4... seconds between failed checks, so a
    pool whose connections were all terminated would take seconds to hand out a live one)."""
    try:
        check_connection(conn)
    except psycopg.Error:
        return False
    return True


def _readable(fd: int) -> bool:
    if hasattr(select, "poll"):  # poll, not select: descriptors above 1023 are fine
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(0))
    return bool(select.select([fd], [], [], 0)[0])  # pragma: no cover - no poll (Windows)


def step_params(step: StepWrite, plan: Plan | None = None) -> dict[str, Any]:
    """The parameters shared by `apply_step` and `create_execution` (the checkpoint whole,
    or as `plan` says: whole, or a delta and a null checkpoint)."""
    armed = dict(step.timers_armed)  # the last arming of a timer wins, as in SQLite
    return {
        "tenant": step.tenant,
        "id": step.execution_id,
        "expected_seq": step.expected_seq,
        "fence": step.fence,
        "status": step.status,
        "updated_at": step.updated_at,
        "checkpoint": dumps(step.checkpoint) if plan is None else plan.whole,
        "delta": None if plan is None else plan.delta,
        "ready": step.ready,
        "release": step.release_lease,
        "waiting_on": step.waiting_on,
        "output": dumps(step.output),
        "error": dumps(step.error),
        "ev_type": [e.type for e in step.events],
        "ev_at": [e.at for e in step.events],
        "ev_data": [dumps(e.data) for e in step.events],
        # Removed then re-armed in one step means armed: remove only the others.
        "removed": [t for t in dict.fromkeys(step.timers_removed) if t not in armed],
        "armed_id": list(armed),
        "armed_at": list(armed.values()),
    }


def batch_params(steps: Sequence[StepWrite], channel: str, plans: Sequence[Plan]) -> dict[str, Any]:
    """The parameters of `apply_steps`: one array element per step (its checkpoint as its
    plan says), and the events and timers flattened, each tagged with the 1-based ordinal
    of its step."""
    columns: dict[str, list[Any]] = {
        name: []
        for name in (
            "tenant", "id", "expected_seq", "fence", "status", "updated_at", "checkpoint", "delta",
            "ready", "waiting_on", "output", "error", "release", "events", "ev_step", "ev_n",
            "ev_type", "ev_at", "ev_data", "rm_step", "rm_timer", "arm_step", "arm_timer",
            "arm_at", "rel_step", "rel_key", "rel_holder",
        )
    }  # fmt: skip
    for i, (step, plan) in enumerate(zip(steps, plans, strict=True), start=1):
        columns["tenant"].append(step.tenant)
        columns["id"].append(step.execution_id)
        columns["expected_seq"].append(step.expected_seq)
        columns["fence"].append(step.fence)
        columns["status"].append(step.status)
        columns["updated_at"].append(step.updated_at)
        columns["checkpoint"].append(plan.whole)
        columns["delta"].append(plan.delta)
        columns["ready"].append(step.ready)
        columns["waiting_on"].append(step.waiting_on)
        columns["output"].append(dumps(step.output))
        columns["error"].append(dumps(step.error))
        columns["release"].append(step.release_lease)
        columns["events"].append(len(step.events))
        for n, event in enumerate(step.events, start=1):
            columns["ev_step"].append(i)
            columns["ev_n"].append(n)
            columns["ev_type"].append(event.type)
            columns["ev_at"].append(event.at)
            columns["ev_data"].append(dumps(event.data))
        armed = dict(step.timers_armed)  # as step_params: the last arming wins...
        for timer_id in dict.fromkeys(step.timers_removed):
            if timer_id not in armed:  # ...and removed-then-re-armed means armed
                columns["rm_step"].append(i)
                columns["rm_timer"].append(timer_id)
        for timer_id, fire_at in armed.items():
            columns["arm_step"].append(i)
            columns["arm_timer"].append(timer_id)
            columns["arm_at"].append(fire_at)
        for key, holder in step.flow_released:
            columns["rel_step"].append(i)
            columns["rel_key"].append(key)
            columns["rel_holder"].append(holder)
    return {**columns, "channel": channel}


def translate(exc: psycopg.Error, *, write: bool) -> StoreError:
    """Connection trouble -> `StoreUnavailable` (a write's outcome is then unknown); an error
    the server reported on a live connection -> `StoreError` (its transaction rolled back)."""
    text = str(exc).strip() or type(exc).__name__
    state = exc.sqlstate or ""
    lost = isinstance(exc, psycopg.OperationalError) and (
        not state or state[:2] in _UNAVAILABLE_CLASSES
    )
    if lost and write:
        return StoreUnavailable(
            f"PostgreSQL failed during a write, which may or may not have been applied: {text}"
        )
    if lost:
        return StoreUnavailable(f"PostgreSQL is unavailable: {text}")
    return StoreError(f"the PostgreSQL store failed: {text}")
