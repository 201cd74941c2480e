"""Bulk-action batches in the PostgreSQL store (mixed into PostgresStore); a delete purges
through the retention role's `purge_executions`. Its SQL lives in `bulk.sql`."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from functools import cache
from importlib import resources
from typing import Any

from wovyr.errors import StoreError
from wovyr.store.bulk import BatchItem, BatchRecord, BatchUpdate, ItemOutcome, NewBatch
from wovyr.store.codec import dumps
from wovyr.store.postgres.audit import append_audit_row
from wovyr.store.postgres.queries import parse_queries
from wovyr.store.postgres.support import Connection

__all__ = ["PostgresBulk"]

_COLUMNS = (
    "tenant, id, action, filter, signal, payload, created_at, created_by, fingerprint,"
    " idempotency_key, status, updated_at, finished_at, cursor, listed_all, listed, ok,"
    " skipped, errors, pages, lease_owner, lease_until, fence"
)
_COUNTED = {"ok": "ok", "skipped": "skipped", "error": "errors"}


@cache
def _queries() -> dict[str, str]:
    text = (resources.files("wovyr.store.postgres") / "bulk.sql").read_text(encoding="utf-8")
    return {k: v.replace("{columns}", _COLUMNS) for k, v in parse_queries(text).items()}


def _batch(r: Any) -> BatchRecord:
    return BatchRecord(
        tenant=r[0],
        id=r[1],
        action=r[2],
        filter=r[3],
        signal=r[4],
        payload=r[5],
        created_at=r[6],
        created_by=r[7],
        fingerprint=r[8],
        idempotency_key=r[9],
        status=r[10],
        updated_at=r[11],
        finished_at=r[12],
        cursor=r[13],
        listed_all=bool(r[14]),
        listed=int(r[15]),
        ok=int(r[16]),
        skipped=int(r[17]),
        errors=int(r[18]),
        pages=int(r[19]),
        lease_owner=r[20],
        lease_until=r[21],
        fence=int(r[22]),
    )


class PostgresBulk:
    """Needs `_write()` and `_run()` from PostgresStore."""

    _write: Callable[[Callable[[Connection], Any]], Any]
    _run: Callable[..., Any]
    _now: Callable[[datetime], datetime | None]

    def _one(self, name: str, params: dict[str, Any]) -> BatchRecord | None:
        sql = _queries()[name]
        row = self._run(lambda conn: conn.execute(sql, params).fetchone(), write=False)
        return None if row is None else _batch(row)

    def create_batch(self, new: NewBatch) -> tuple[bool, BatchRecord]:
        q = _queries()
        params = {
            "tenant": new.tenant,
            "id": new.id,
            "action": new.action,
            "filter": dumps(dict(new.filter)),
            "signal": new.signal,
            "payload": dumps(new.payload),
            "at": new.created_at,
            "created_by": new.created_by,
            "fingerprint": new.fingerprint,
            "key": new.idempotency_key,
        }
        finds = ["batch_by_fingerprint"]
        if new.idempotency_key is not None:
            finds.insert(0, "batch_by_key")

        def existing(conn: Connection) -> Any:
            for name in finds:
                row = conn.execute(q[name], params).fetchone()
                if row is not None:
                    return row
            return None

        def body(conn: Connection) -> tuple[bool, BatchRecord]:
            found = existing(conn)
            if found is None and conn.execute(q["batch_insert"], params).fetchone() is not None:
                append_audit_row(conn, new.audit)
                return True, _batch(conn.execute(q["batch_get"], params).fetchone())
            found = found or existing(conn)  # or made by another request at this moment
            if found is None:
                raise StoreError(f"batch {new.id} exists already")
            return False, _batch(found)

        result: tuple[bool, BatchRecord] = self._write(body)
        return result

    def get_batch(self, tenant: str, batch_id: str) -> BatchRecord | None:
        return self._one("batch_get", {"tenant": tenant, "id": batch_id})

    def list_batches(
        self, tenant: str, limit: int = 50, before: tuple[datetime, str] | None = None
    ) -> list[BatchRecord]:
        sql = _queries()["batch_list"]
        at, ident = before if before else (None, "")
        params = {"tenant": tenant, "limit": limit, "at": at, "ident": ident}
        rows = self._run(lambda conn: conn.execute(sql, params).fetchall(), write=False)
        return [_batch(r) for r in rows]

    def batch_items(
        self,
        tenant: str,
        batch_id: str,
        after: int = 0,
        limit: int = 100,
        outcome: ItemOutcome | None = None,
    ) -> list[BatchItem]:
        sql = _queries()["batch_items"]
        params = {
            "tenant": tenant,
            "id": batch_id,
            "after": after,
            "limit": limit,
            "outcome": outcome,
        }
        rows = self._run(lambda conn: conn.execute(sql, params).fetchall(), write=False)
        return [BatchItem(int(r[0]), r[1], r[2], r[3], r[4]) for r in rows]

    def claim_batch(self, owner: str, now: datetime, lease_seconds: float) -> BatchRecord | None:
        sql = _queries()["batch_claim"]
        params = {"owner": owner, "now": self._now(now), "lease": timedelta(seconds=lease_seconds)}
        row = self._write(lambda conn: conn.execute(sql, params).fetchone())
        return None if row is None else _batch(row)

    def update_batch(self, update: BatchUpdate) -> BatchRecord | None:
        q = _queries()
        key = {"tenant": update.tenant, "id": update.batch_id}

        def body(conn: Connection) -> BatchRecord | None:
            row = conn.execute(q["batch_lock"], key).fetchone()
            batch = None if row is None else _batch(row)
            if batch is None or batch.fence != update.fence or batch.status != "running":
                return None
            added = 0
            for execution_id in update.listed:
                cur = conn.execute(
                    q["batch_item_insert"],
                    {**key, "n": batch.listed + added + 1, "execution_id": execution_id},
                )
                added += max(cur.rowcount, 0)
            counts = {"ok": batch.ok, "skipped": batch.skipped, "errors": batch.errors}
            for o in update.outcomes:
                if o.outcome == "pending":
                    continue
                cur = conn.execute(
                    q["batch_item_outcome"],
                    {
                        **key,
                        "execution_id": o.execution_id,
                        "outcome": o.outcome,
                        "detail": o.detail,
                        "at": update.now,
                    },
                )
                counts[_COUNTED[o.outcome]] += max(cur.rowcount, 0)
            listed = batch.listed + added
            listed_all = batch.listed_all or update.listed_all
            moved = bool(update.listed) or update.listed_all
            done = listed_all and listed == sum(counts.values())
            out = conn.execute(
                q["batch_update"],
                {
                    **key,
                    **counts,
                    "listed": listed,
                    "cursor": update.cursor if moved else batch.cursor,
                    "listed_all": listed_all,
                    "pages": int(moved),
                    "at": update.now,
                    "status": "completed" if done else "running",
                    "finished_at": update.now if done else None,
                    "lease_owner": None if done else batch.lease_owner,
                    "now": self._now(update.now),
                    "lease": update.lease_until - update.now,
                },
            ).fetchone()
            return _batch(out)

        result: BatchRecord | None = self._write(body)
        return result
