"""Flow control in the SQLite store (mixed into SQLiteStore): the slots of concurrency
keys, taken in the transaction that creates an execution and handed on in the transaction
of the step that ends one. Every write is a `BEGIN IMMEDIATE` transaction, so no two
processes hand out the same slot."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from wovyr.store.records import NewExecution, SlotRelease, SlotState

__all__ = ["SQLiteFlow", "release_slot", "take_slot"]


def take_slot(conn: sqlite3.Connection, new: NewExecution) -> bool:
    """Give `new` (just inserted) a slot of its key if one is free and nobody waits for one;
    else queue it (not ready, waiting on the key). True when it holds a slot."""
    slot = new.slot
    assert slot is not None
    held, waiting = conn.execute(
        "SELECT coalesce(sum(holding), 0), count(*) - coalesce(sum(holding), 0)"
        " FROM flow_slots WHERE tenant = ? AND key = ?",
        (new.tenant, slot.key),
    ).fetchone()
    holding = int(held) < slot.limit and int(waiting) == 0
    conn.execute(
        "INSERT INTO flow_slots (tenant, key, execution_id, holding) VALUES (?, ?, ?, ?)",
        (new.tenant, slot.key, new.id, int(holding)),
    )
    if not holding:
        conn.execute(
            "UPDATE executions SET ready = 0, lease_owner = NULL, lease_until = NULL,"
            " flow_wait = ?, waiting_on = ? WHERE tenant = ? AND id = ?",
            (slot.key, f"concurrency {slot.key}", new.tenant, new.id),
        )
    return holding


def release_slot(
    conn: sqlite3.Connection, tenant: str, execution_id: str, released: SlotRelease
) -> list[str]:
    """The step that ends `execution_id` gives its slot back (or leaves the queue); the
    executions waiting longest get the freed slots and become ready. Returns their ids."""
    conn.execute(
        "DELETE FROM flow_slots WHERE tenant = ? AND key = ? AND execution_id = ?",
        (tenant, released.key, execution_id),
    )
    conn.execute(
        "UPDATE executions SET flow_wait = NULL, waiting_on = NULL"
        " WHERE tenant = ? AND id = ? AND flow_wait IS NOT NULL",
        (tenant, execution_id),
    )
    (held,) = conn.execute(
        "SELECT count(*) FROM flow_slots WHERE tenant = ? AND key = ? AND holding = 1",
        (tenant, released.key),
    ).fetchone()
    room = released.limit - int(held)
    if room <= 0:
        return []
    granted = [
        row[0]
        for row in conn.execute(
            "UPDATE flow_slots SET holding = 1 WHERE seq IN (SELECT seq FROM flow_slots"
            " WHERE tenant = ? AND key = ? AND holding = 0 ORDER BY seq LIMIT ?)"
            " RETURNING execution_id",
            (tenant, released.key, room),
        ).fetchall()
    ]
    conn.executemany(
        "UPDATE executions SET ready = 1, flow_wait = NULL, waiting_on = NULL"
        " WHERE tenant = ? AND id = ?",
        [(tenant, g) for g in granted],
    )
    return granted


class SQLiteFlow:
    """Needs `_read()` from SQLiteStore."""

    _read: Callable[..., list[Any]]

    def slot_state(self, tenant: str, key: str) -> SlotState:
        rows = self._read(
            "SELECT execution_id, holding FROM flow_slots WHERE tenant = ? AND key = ?"
            " ORDER BY seq",
            (tenant, key),
        )
        return SlotState(
            key=key,
            holders=[r[0] for r in rows if r[1]],
            waiting=[r[0] for r in rows if not r[1]],
        )
