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

from wovyr.store.flow import (
    Bucket,
    FlowAnswer,
    RateLimitRecord,
    RateRequest,
    SlotClaim,
    decide_flow,
)
from wovyr.store.postgres.queries import parse_queries
from wovyr.store.postgres.support import Connection

__all__ = ["PostgresRateLimits", "flow_queries"]

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


class PostgresRateLimits:
    """Needs `_write()`, `_run()` and `_now()` from PostgresStore."""

    _write: Callable[[Callable[[Connection], Any]], Any]
    _run: Callable[..., Any]
    _now: Callable[[datetime], datetime | None]

    def acquire_flow(
        self,
        tenant: str,
        execution_id: str,
        owner: str,
        now: datetime,
        rates: Sequence[RateRequest] = (),
        slots: Sequence[SlotClaim] = (),
    ) -> FlowAnswer:
        q = flow_queries()
        keys = sorted({r.key for r in rates})
        fresh = {r.key: r for r in rates if r.capacity is not None and r.per_second is not None}

        def body(conn: Connection) -> FlowAnswer:
            row = conn.execute(q["flow_now"], {"now": self._now(now)}).fetchone()
            assert row is not None
            at: datetime = row[0]
            for key in sorted(fresh):  # a missing bucket starts full (nothing if one exists)
                r = fresh[key]
                conn.execute(
                    q["bucket_create"],
                    {"tenant": tenant, "key": key, "capacity": r.capacity,
                     "per_second": r.per_second, "at": at},
                )  # fmt: skip
            buckets: dict[str, Bucket | None] = {}
            for r in conn.execute(q["buckets_lock"], {"tenant": tenant, "keys": keys}):
                buckets[r[0]] = Bucket(
                    capacity=r[1],
                    per_second=r[2],
                    tokens=r[3],
                    refilled_at=_seconds(r[4]),
                    wake_at=max(0.0, _seconds(r[5])),
                    declared=r[6],
                )
            holders: dict[str, list[str]] = {}
            for key in sorted({c.key for c in slots}):
                conn.execute(q["activity_slot_lock"], {"tenant": tenant, "key": key})
                rows = conn.execute(
                    q["activity_holders"], {"tenant": tenant, "key": key, "at": at}
                ).fetchall()
                holders[key] = [h[0] for h in rows]
            answer, states = decide_flow(buckets, rates, holders, slots, _seconds(at))
            for key, b in states.items():
                conn.execute(
                    q["bucket_write"],
                    {"tenant": tenant, "key": key, "capacity": b.capacity,
                     "per_second": b.per_second, "tokens": b.tokens,
                     "refilled_at": _time(b.refilled_at), "wake_at": _time(b.wake_at)},
                )  # fmt: skip
            if answer.granted:
                for c in slots:
                    conn.execute(
                        q["activity_slot_take"],
                        {"tenant": tenant, "key": c.key, "holder": c.holder,
                         "id": execution_id, "owner": owner},
                    )  # fmt: skip
            return answer

        answer: FlowAnswer = self._write(body)
        return answer

    def activity_slot_holders(self, tenant: str, key: str, now: datetime) -> list[str]:
        sql = flow_queries()["activity_holders_now"]
        rows = self._run(
            lambda conn: conn.execute(
                sql, {"tenant": tenant, "key": key, "now": self._now(now)}
            ).fetchall(),
            write=False,
        )
        return [r[0] for r in rows]

    def set_rate_limit(
        self, tenant: str, key: str, capacity: float, per_second: float, by: str, now: datetime
    ) -> RateLimitRecord:
        sql = flow_queries()["bucket_declare"]
        params = {
            "tenant": tenant,
            "key": key,
            "capacity": capacity,
            "per_second": per_second,
            "by": by,
            "now": now,
        }
        self._write(lambda conn: conn.execute(sql, params))
        return next(r for r in self.rate_limits(tenant) if r.key == key)

    def rate_limits(self, tenant: str) -> list[RateLimitRecord]:
        sql = flow_queries()["buckets_list"]
        rows = self._run(lambda conn: conn.execute(sql, {"tenant": tenant}).fetchall(), write=False)
        return [RateLimitRecord(tenant, r[0], r[1], r[2], r[3], r[4], r[5]) for r in rows]

    def delete_rate_limit(self, tenant: str, key: str) -> bool:
        sql = flow_queries()["bucket_delete"]
        rows = self._write(
            lambda conn: conn.execute(sql, {"tenant": tenant, "key": key}).fetchall()
        )
        return bool(rows)
