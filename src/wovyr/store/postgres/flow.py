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

from wovyr.store.audit import AuditEntry
from wovyr.store.flow import (
    Bucket,
    FlowAcquire,
    FlowAnswer,
    RateLimitRecord,
    RateRequest,
    SlotClaim,
    decide_flow,
)
from wovyr.store.postgres.audit import append_audit_row
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
        return self.acquire_flows([FlowAcquire(tenant, execution_id, owner, now, rates, slots)])[0]

    def acquire_flows(self, asks: Sequence[FlowAcquire]) -> list[FlowAnswer]:
        """One transaction: every bucket row the asks need is made if missing and locked,
        and every activity slot key locked, in one order (tenant, key) before any is read,
        so concurrent batches never wait on each other in a cycle; then each ask in turn."""
        if not asks:
            return []
        q = flow_queries()
        fresh: dict[tuple[str, str], RateRequest] = {}
        for ask in asks:
            for r in ask.rates:
                if r.capacity is not None and r.per_second is not None:
                    fresh.setdefault((ask.tenant, r.key), r)
        bucket_keys = sorted({(a.tenant, r.key) for a in asks for r in a.rates})
        slot_keys = sorted({(a.tenant, c.key) for a in asks for c in a.slots})

        def body(conn: Connection) -> list[FlowAnswer]:
            row = conn.execute(q["flow_now"], {"now": self._now(asks[0].now)}).fetchone()
            assert row is not None
            at: datetime = row[0]
            for tenant, key in sorted(fresh):  # a missing bucket starts full
                r = fresh[(tenant, key)]
                conn.execute(
                    q["bucket_create"],
                    {"tenant": tenant, "key": key, "capacity": r.capacity,
                     "per_second": r.per_second, "at": at},
                )  # fmt: skip
            buckets: dict[tuple[str, str], Bucket] = {}
            for tenant in sorted({t for t, _ in bucket_keys}):
                keys = [k for t, k in bucket_keys if t == tenant]
                for r in conn.execute(q["buckets_lock"], {"tenant": tenant, "keys": keys}):
                    buckets[(tenant, r[0])] = Bucket(
                        capacity=r[1],
                        per_second=r[2],
                        tokens=r[3],
                        refilled_at=_seconds(r[4]),
                        wake_at=max(0.0, _seconds(r[5])),
                        declared=r[6],
                    )
            holders: dict[tuple[str, str], list[str]] = {}
            for tenant, key in slot_keys:
                conn.execute(q["activity_slot_lock"], {"tenant": tenant, "key": key})
                rows = conn.execute(
                    q["activity_holders"], {"tenant": tenant, "key": key, "at": at}
                ).fetchall()
                holders[(tenant, key)] = [h[0] for h in rows]
            answers: list[FlowAnswer] = []
            changed: set[tuple[str, str]] = set()
            for ask in asks:
                mine: dict[str, Bucket | None] = {
                    k: b for (t, k), b in buckets.items() if t == ask.tenant
                }
                held = {k: h for (t, k), h in holders.items() if t == ask.tenant}
                answer, states = decide_flow(mine, ask.rates, held, ask.slots, _seconds(at))
                for key, b in states.items():
                    buckets[(ask.tenant, key)] = b
                    changed.add((ask.tenant, key))
                if answer.granted:
                    for c in ask.slots:
                        holders.setdefault((ask.tenant, c.key), []).append(c.holder)
                        conn.execute(
                            q["activity_slot_take"],
                            {"tenant": ask.tenant, "key": c.key, "holder": c.holder,
                             "id": ask.execution_id, "owner": ask.owner},
                        )  # fmt: skip
                answers.append(answer)
            for tenant, key in sorted(changed):
                b = buckets[(tenant, key)]
                conn.execute(
                    q["bucket_write"],
                    {"tenant": tenant, "key": key, "capacity": b.capacity,
                     "per_second": b.per_second, "tokens": b.tokens,
                     "refilled_at": _time(b.refilled_at), "wake_at": _time(b.wake_at)},
                )  # fmt: skip
            return answers

        answers: list[FlowAnswer] = self._write(body)
        return answers

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
        self,
        tenant: str,
        key: str,
        capacity: float,
        per_second: float,
        by: str,
        now: datetime,
        *,
        audit: AuditEntry | None = None,
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

        def body(conn: Connection) -> None:
            conn.execute(sql, params)
            append_audit_row(conn, audit)

        self._write(body)
        return next(r for r in self.rate_limits(tenant) if r.key == key)

    def rate_limits(self, tenant: str) -> list[RateLimitRecord]:
        sql = flow_queries()["buckets_list"]
        rows = self._run(lambda conn: conn.execute(sql, {"tenant": tenant}).fetchall(), write=False)
        return [RateLimitRecord(tenant, r[0], r[1], r[2], r[3], r[4], r[5]) for r in rows]

    def delete_rate_limit(self, tenant: str, key: str, *, audit: AuditEntry | None = None) -> bool:
        sql = flow_queries()["bucket_delete"]

        def body(conn: Connection) -> bool:
            deleted = bool(conn.execute(sql, {"tenant": tenant, "key": key}).fetchall())
            if deleted:
                append_audit_row(conn, audit)
            return deleted

        return bool(self._write(body))
