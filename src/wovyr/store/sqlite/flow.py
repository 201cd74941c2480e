"""Flow control in the SQLite store (mixed into SQLiteStore): the slots of concurrency
keys, taken in the transaction that creates an execution and handed on in the transaction
of the step that ends one. Every write is a `BEGIN IMMEDIATE` transaction, so no two
processes hand out the same slot."""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from wovyr.store.codec import to_micros
from wovyr.store.flow import (
    HOLD_TIMER_PREFIX,
    WAITER_TTL_SECONDS,
    Bucket,
    FlowAcquire,
    FlowAnswer,
    GateBook,
    tight_keys,
)
from wovyr.store.records import FINISHED, NewExecution, SlotRelease, SlotState

__all__ = [
    "SQLiteFlow",
    "SQLiteRateLimits",
    "read_gates",
    "release_activity_slots",
    "release_slot",
    "take_slot",
    "write_gates",
]


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


def release_activity_slots(
    conn: sqlite3.Connection, tenant: str, released: Sequence[tuple[str, str]], at: int
) -> None:
    """Free the slots `released` (key, holder) and wake, for each slot freed, the oldest
    waiter of its key not woken yet whose execution has not ended: marked woken at `at`
    (microseconds), and its hold timer, if armed already, due at `at`."""
    conn.executemany(
        "DELETE FROM activity_slots WHERE tenant = ? AND key = ? AND holder = ?",
        [(tenant, key, holder) for key, holder in released],
    )
    freed = Counter(key for key, _ in released)
    for key, n in freed.items():
        woken = conn.execute(
            "UPDATE activity_slot_waiters SET woken = ? WHERE seq IN ("
            " SELECT w.seq FROM activity_slot_waiters w JOIN executions x"
            "   ON x.tenant = w.tenant AND x.id = w.execution_id"
            "  WHERE w.tenant = ? AND w.key = ? AND w.woken = 0"
            f"   AND x.status NOT IN ({_marks(len(FINISHED))}) ORDER BY w.seq LIMIT ?)"
            " RETURNING execution_id",
            (at, tenant, key, *FINISHED, n),
        ).fetchall()
        conn.executemany(
            "UPDATE timers SET fire_at = ?"
            " WHERE tenant = ? AND execution_id = ? AND timer_id LIKE ? AND fire_at > ?",
            [(at, tenant, w[0], f"{HOLD_TIMER_PREFIX}%", at) for w in woken],
        )


def woken_holds(
    conn: sqlite3.Connection, tenant: str, execution_id: str, timers: Sequence[str], at: int
) -> None:
    """After a step armed the hold timers `timers` (`flow:<seq>`) of an execution: if a
    freed slot woke one of its waiting attempts before the hold was armed (the wake found
    no timer to move), the hold is due at `at`."""
    conn.execute(
        f"UPDATE timers SET fire_at = ? WHERE tenant = ? AND execution_id = ?"
        f" AND timer_id IN ({_marks(len(timers))}) AND fire_at > ? AND EXISTS ("
        " SELECT 1 FROM activity_slot_waiters WHERE tenant = ? AND execution_id = ?"
        " AND woken > 0)",
        (at, tenant, execution_id, *timers, at, tenant, execution_id),
    )


def _bucket(row: Any) -> Bucket:
    return Bucket(
        capacity=float(row[1]),
        per_second=float(row[2]),
        tokens=float(row[3]),
        refilled_at=int(row[4]) / 1e6,
        wake_at=int(row[5]) / 1e6,
        declared=bool(row[6]),
    )


_BUCKET = "key, capacity, per_second, tokens, refilled_at, wake_at, declared"


def _marks(n: int) -> str:
    return ",".join("?" * n)


def read_gates(conn: sqlite3.Connection, asks: Sequence[FlowAcquire]) -> GateBook:
    """The rows `asks` need, read in the caller's (`BEGIN IMMEDIATE`) transaction: their
    buckets, and for their slot keys that could be full (`tight_keys`) the holders whose
    execution's lease is still their worker's and the waiters still waiting, oldest first
    (the others' rows, a crashed or replaced worker's, an ended execution's or a waiter's
    that did not come back, are deleted)."""
    at = max(to_micros(a.now) for a in asks)
    buckets: dict[tuple[str, str], Bucket] = {}
    holders: dict[tuple[str, str], list[str]] = {}
    stale: list[tuple[str, str, str]] = []
    waiters: dict[tuple[str, str], list[str]] = {}
    gone: list[tuple[str, str, str]] = []  # waiters whose execution ended or who left
    queues: set[tuple[str, str]] = set()  # slot keys with waiter rows
    for tenant in sorted({a.tenant for a in asks}):
        mine = [a for a in asks if a.tenant == tenant]
        keys = sorted({r.key for a in mine for r in a.rates})
        if keys:
            rows = conn.execute(
                f"SELECT {_BUCKET} FROM rate_buckets"
                f" WHERE tenant = ? AND key IN ({_marks(len(keys))})",
                (tenant, *keys),
            ).fetchall()
            buckets.update({(tenant, r[0]): _bucket(r) for r in rows})
        keys = sorted({c.key for a in mine for c in a.slots})
        tight: set[tuple[str, str]] = set()
        if keys:
            holders.update({(tenant, k): [] for k in keys})
            marks = _marks(len(keys))
            counted = conn.execute(  # slot rows counted by triggers (migration 0034)
                "SELECT key, sum(n), sum(waiter) FROM (SELECT key, n, 0 AS waiter"
                f" FROM activity_slot_counts WHERE tenant = ? AND key IN ({marks}) UNION ALL"
                " SELECT key, 1, 1 FROM activity_slot_waiters"
                f" WHERE tenant = ? AND key IN ({marks})) GROUP BY key",
                (tenant, *keys, tenant, *keys),
            ).fetchall()
            tight = tight_keys(mine, {(tenant, k): n for k, n, _ in counted})
            queues.update((tenant, k) for k, _, w in counted if w)
        keys = sorted(k for _, k in tight)
        if keys:  # only keys that could be full: their live holders and waiters
            waiting = conn.execute(
                "SELECT w.key, w.holder, w.until >= ? AND x.status IS NOT NULL"
                f"   AND x.status NOT IN ({_marks(len(FINISHED))})"
                " FROM activity_slot_waiters w LEFT JOIN executions x"
                "   ON x.tenant = w.tenant AND x.id = w.execution_id"
                f" WHERE w.tenant = ? AND w.key IN ({_marks(len(keys))}) ORDER BY w.seq",
                (at, *FINISHED, tenant, *keys),
            ).fetchall()
            for key, holder, live in waiting:
                if live:
                    waiters.setdefault((tenant, key), []).append(holder)
                else:
                    gone.append((tenant, key, holder))
            rows = conn.execute(
                "SELECT s.key, s.holder, x.lease_owner = s.owner AND x.lease_until >= ?"
                " FROM activity_slots s LEFT JOIN executions x"
                "   ON x.tenant = s.tenant AND x.id = s.execution_id"
                f" WHERE s.tenant = ? AND s.key IN ({_marks(len(keys))}) ORDER BY s.key, s.holder",
                (at, tenant, *keys),
            ).fetchall()
            for key, holder, live in rows:
                if live:
                    holders[(tenant, key)].append(holder)
                else:
                    stale.append((tenant, key, holder))
    if stale:
        conn.executemany(
            "DELETE FROM activity_slots WHERE tenant = ? AND key = ? AND holder = ?", stale
        )
    if gone:
        conn.executemany(
            "DELETE FROM activity_slot_waiters WHERE tenant = ? AND key = ? AND holder = ?", gone
        )
    return GateBook(at / 1e6, buckets, holders, waiters, queues)


def write_gates(conn: sqlite3.Connection, book: GateBook) -> None:
    """The bucket rows `book` changed and the activity slots it granted."""
    conn.executemany(
        "INSERT INTO rate_buckets (tenant, key, capacity, per_second, tokens,"
        " refilled_at, wake_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (tenant, key) DO UPDATE SET capacity = excluded.capacity,"
        " per_second = excluded.per_second, tokens = excluded.tokens,"
        " refilled_at = excluded.refilled_at, wake_at = excluded.wake_at",
        [
            (
                tenant,
                key,
                b.capacity,
                b.per_second,
                b.tokens,
                round(b.refilled_at * 1e6),
                round(b.wake_at * 1e6),
            )
            for (tenant, key), b in book.changed()
        ],
    )
    takes = book.takes()
    conn.executemany(
        "INSERT INTO activity_slots (tenant, key, holder, execution_id, owner)"
        " VALUES (?, ?, ?, ?, ?) ON CONFLICT (tenant, key, holder) DO UPDATE"
        " SET execution_id = excluded.execution_id, owner = excluded.owner",
        [(a.tenant, c.key, c.holder, a.execution_id, a.owner) for a, c in takes],
    )
    conn.executemany(  # a waiter that took its slot leaves the queue
        "DELETE FROM activity_slot_waiters WHERE tenant = ? AND key = ? AND holder = ?",
        [(a.tenant, c.key, c.holder) for a, c in book.served()],
    )
    conn.executemany(  # a woken waiter that looked again is no longer woken
        "UPDATE activity_slot_waiters SET woken = 0"
        " WHERE tenant = ? AND key = ? AND holder = ? AND woken > 0",
        book.looked(),
    )
    until = round((book.at + WAITER_TTL_SECONDS) * 1e6)
    conn.executemany(  # a new waiter joins the end of its key's queue; the others keep place
        "INSERT INTO activity_slot_waiters (tenant, key, holder, execution_id, until)"
        " VALUES (?, ?, ?, ?, ?) ON CONFLICT (tenant, key, holder) DO UPDATE"
        " SET until = excluded.until, woken = 0",
        [(t, k, h, e, until) for t, k, h, e in book.queued()],
    )


class SQLiteRateLimits:
    """Taking rate-limit units and activity slots (the rest of flow control's gates is
    shared: `wovyr.store.sql.flow`). Needs `_write()` from SQLiteStore."""

    _write: Callable[[], AbstractContextManager[sqlite3.Connection]]

    def acquire_flows(self, asks: Sequence[FlowAcquire]) -> list[FlowAnswer]:
        if not asks:
            return []
        with self._write() as conn:
            book = read_gates(conn, asks)
            answers = [book.decide(ask) for ask in asks]
            write_gates(conn, book)
            return answers
