"""Flow control's activity gates in the PostgreSQL store (mixed into PostgresStore): the
rate-limit buckets and activity concurrency slots of `acquire_flow`, one transaction per
acquire. A bucket row is created (full) if missing, then locked (FOR UPDATE), so workers on
every host take units one after the other; a slot key is locked with an advisory lock.
Its SQL lives in `flow.sql`; time is the database's (with db_clock) or the caller's."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from typing import Any

from wovyr.store.codec import dumps
from wovyr.store.flow import (
    WAITER_TTL_SECONDS,
    Bucket,
    FlowAcquire,
    FlowAnswer,
    GateBook,
    RateRequest,
    tight_keys,
)
from wovyr.store.postgres.queries import parse_queries
from wovyr.store.postgres.support import Connection

__all__ = ["FlowGates", "PostgresRateLimits", "flow_queries"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@cache
def flow_queries() -> dict[str, str]:
    text = (resources.files("wovyr.store.postgres") / "flow.sql").read_text(encoding="utf-8")
    return parse_queries(text)


def _seconds(at: datetime) -> float:
    return (at - _EPOCH).total_seconds()


def _time(seconds: float) -> datetime:
    if seconds <= 0:
        return _EPOCH
    return datetime.fromtimestamp(seconds, UTC)


class FlowGates:
    """The gates of a batch of asks in the caller's transaction (`GateBook` decides): every
    bucket row they need made if missing and locked, and every activity slot key locked, in
    one order (tenant, key) before any is read, so concurrent batches never wait on each
    other in a cycle, and the rows of each slot key counted (`lock`: one round trip, and
    one more to read the live holders of keys that could be full); the rows written back
    (`write`: one round trip)."""

    def __init__(self, asks: Sequence[FlowAcquire], now: datetime | None) -> None:
        self._asks = asks
        self._now = now  # None: the database's clock

    def lock(self, conn: Connection) -> GateBook:
        q = flow_queries()
        fresh: dict[tuple[str, str], RateRequest] = {}
        for ask in self._asks:
            for r in ask.rates:
                if r.capacity is not None and r.per_second is not None:
                    fresh.setdefault((ask.tenant, r.key), r)
        buckets = sorted({(a.tenant, r.key) for a in self._asks for r in a.rates})
        slots = sorted({(a.tenant, c.key) for a in self._asks for c in a.slots})
        doc = {
            "made": [
                {"tenant": t, "key": k, "capacity": float(r.capacity or 0),
                 "per_second": float(r.per_second or 0)}
                for (t, k), r in sorted(fresh.items())
            ],
            "buckets": [{"tenant": t, "key": k} for t, k in buckets],
            "slots": [{"tenant": t, "key": k} for t, k in slots],
        }  # fmt: skip
        with conn.pipeline():
            row = conn.execute(q["flow_lock"], {"now": self._now, "doc": dumps(doc)}).fetchone()
        assert row is not None
        read: dict[str, Any] = row[0]
        found: dict[tuple[str, str], Bucket] = {}
        for r in read["buckets"]:
            found[(r[0], r[1])] = Bucket(
                capacity=r[2],
                per_second=r[3],
                tokens=r[4],
                refilled_at=float(r[5]),
                wake_at=max(0.0, float(r[6])),
                declared=r[7],
            )
        counts = {(r[0], r[1]): r[2] for r in read["counts"]}
        queues = {(r[0], r[1]) for r in read["counts"] if r[3]}
        holders: dict[tuple[str, str], list[str]] = {key: [] for key in slots}
        waiters: dict[tuple[str, str], list[str]] = {}
        tight = sorted(tight_keys(self._asks, counts))
        if tight:  # a second round trip, only for keys that could be full
            keys = {"tenants": [t for t, _ in tight], "keys": [k for _, k in tight]}
            now = {"now": self._now}
            with conn.pipeline():
                held = conn.execute(q["activity_holders_all"], {**keys, **now})
                waiting = conn.execute(q["activity_waiters_all"], {**keys, **now})
                for h in held.fetchall():
                    holders[(h[0], h[1])].append(h[2])
                for w in waiting.fetchall():
                    waiters.setdefault((w[0], w[1]), []).append(w[2])
        return GateBook(float(read["at"]), found, holders, waiters, queues)

    @staticmethod
    def give_back(conn: Connection, book: GateBook, undone: Sequence[FlowAcquire]) -> None:
        """After `write`: the slots and units of `undone` asks (given back in `book`, their
        steps did not apply) returned in the same transaction."""
        q = flow_queries()
        with conn.pipeline():
            for ask in undone:
                for c in ask.slots:
                    conn.execute(
                        q["activity_slot_give_back"],
                        {"tenant": ask.tenant, "key": c.key, "holder": c.holder},
                    )
        FlowGates.write(conn, book, slots=False)

    @staticmethod
    def write(conn: Connection, book: GateBook, *, slots: bool = True) -> None:
        """The batch's gate rows, one statement (`wovyr_flow_write`, migration 39)."""
        changed = book.changed()
        takes = book.takes() if slots else []
        served = book.served() if slots else []
        looked = book.looked() if slots else []
        queued = book.queued() if slots else []
        if not (changed or takes or served or looked or queued):
            return
        doc = {
            "buckets": [
                {"tenant": t, "key": k, "capacity": float(b.capacity),
                 "per_second": float(b.per_second), "tokens": float(b.tokens),
                 "refilled_at": b.refilled_at, "wake_at": b.wake_at}
                for (t, k), b in changed
            ],
            "takes": [
                {"tenant": a.tenant, "key": c.key, "holder": c.holder,
                 "execution_id": a.execution_id, "owner": a.owner}
                for a, c in takes
            ],
            # waiters that took their slots leave their queues
            "served": [{"tenant": a.tenant, "key": c.key, "holder": c.holder} for a, c in served],
            # a woken waiter that looked again is no longer woken
            "looked": [{"tenant": w[0], "key": w[1], "holder": w[2]} for w in looked],
            "queued": [
                {"tenant": w[0], "key": w[1], "holder": w[2], "execution_id": w[3]}
                for w in queued
            ],
        }  # fmt: skip
        conn.execute(
            flow_queries()["flow_write"],
            {"until": _time(book.at + WAITER_TTL_SECONDS), "doc": dumps(doc)},
        )


class PostgresRateLimits:
    """Taking rate-limit units and activity slots (the rest of flow control's gates is
    shared: `wovyr.store.sql.flow`). Needs `_write()` and `_now()` from PostgresStore."""

    _write: Callable[[Callable[[Connection], Any]], Any]
    _now: Callable[[datetime], datetime | None]

    def acquire_flows(self, asks: Sequence[FlowAcquire]) -> list[FlowAnswer]:
        """One transaction of two round trips (`FlowGates`)."""
        if not asks:
            return []

        def body(conn: Connection) -> list[FlowAnswer]:
            book = FlowGates(asks, self._now(asks[0].now)).lock(conn)
            answers = [book.decide(ask) for ask in asks]
            FlowGates.write(conn, book)
            return answers

        answers: list[FlowAnswer] = self._write(body)
        return answers
