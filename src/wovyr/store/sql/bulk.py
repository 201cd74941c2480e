"""Bulk-action batches of both SQL stores (the contract is `wovyr.store.bulk`); a delete
purges through the retention role's `purge_executions`. Its SQL lives in `bulk.sql`."""

from __future__ import annotations

from datetime import datetime, timedelta

from wovyr.errors import StoreError
from wovyr.statuses import BatchStatus
from wovyr.store.bulk import (
    BatchItem,
    BatchItemFilter,
    BatchRecord,
    BatchUpdate,
    NewBatch,
)
from wovyr.store.codec import dumps
from wovyr.store.rows import Dialect, Row, from_row, to_params
from wovyr.store.sql import Params, SQLRole, Tx

__all__ = ["SQLBulk"]

_COUNTED = {"ok": "ok", "skipped": "skipped", "error": "errors"}


def _batch(r: Row, d: Dialect) -> BatchRecord:
    return from_row(BatchRecord, r, d)


class SQLBulk(SQLRole):
    def _batches(self, name: str, params: Params) -> list[BatchRecord]:
        rows = self._sql_read(self._queries("bulk")[name], params)
        return [_batch(r, self._dialect) for r in rows]

    def create_batch(self, new: NewBatch) -> tuple[bool, BatchRecord]:
        q, d = self._queries("bulk"), self._dialect
        params = {
            "tenant": new.tenant,
            "id": new.id,
            "action": new.action,
            "filter": dumps(dict(new.filter)),
            "signal": new.signal,
            "payload": dumps(new.payload),
            "at": d.timestamp(new.created_at),
            "created_by": new.created_by,
            "fingerprint": new.fingerprint,
            "key": new.idempotency_key,
        }
        finds = ["batch_by_fingerprint"]
        if new.idempotency_key is not None:
            finds.insert(0, "batch_by_key")

        def existing(tx: Tx) -> Row | None:
            for name in finds:
                rows = tx.rows(q[name], params)
                if rows:
                    return rows[0]
            return None

        def body(tx: Tx) -> tuple[bool, BatchRecord]:
            found = existing(tx)
            if found is None and tx.rows(q["batch_insert"], params):
                tx.append_audit(new.audit)
                return True, _batch(tx.rows(q["batch_get"], params)[0], d)
            found = found or existing(tx)  # or made by another request at this moment
            if found is None:
                raise StoreError(f"batch {new.id} exists already")
            return False, _batch(found, d)

        result: tuple[bool, BatchRecord] = self._sql_write(body)
        return result

    def get_batch(self, tenant: str, batch_id: str) -> BatchRecord | None:
        found = self._batches("batch_get", {"tenant": tenant, "id": batch_id})
        return found[0] if found else None

    def list_batches(
        self, tenant: str, limit: int = 50, before: tuple[datetime, str] | None = None
    ) -> list[BatchRecord]:
        at = None if before is None else self._dialect.timestamp(before[0])
        params = {"tenant": tenant, "limit": limit, "at": at, "ident": before[1] if before else ""}
        return self._batches("batch_list", params)

    def batch_items(self, query: BatchItemFilter) -> list[BatchItem]:
        sql, d = self._queries("bulk")["batch_items"], self._dialect
        rows = self._sql_read(sql, to_params(query, d))
        return [from_row(BatchItem, r, d) for r in rows]

    def claim_batch(self, owner: str, now: datetime, lease_seconds: float) -> BatchRecord | None:
        sql = self._queries("bulk")["batch_claim"]
        params = {"owner": owner, **self._lease(now, timedelta(seconds=lease_seconds))}
        rows = self._sql_write(lambda tx: tx.rows(sql, params))
        return _batch(rows[0], self._dialect) if rows else None

    def update_batch(self, update: BatchUpdate) -> BatchRecord | None:
        q, d = self._queries("bulk"), self._dialect
        key = {"tenant": update.tenant, "id": update.batch_id}
        at = d.timestamp(update.now)

        def body(tx: Tx) -> BatchRecord | None:
            rows = tx.rows(q["batch_lock"], key)
            batch = _batch(rows[0], d) if rows else None
            if batch is None or batch.fence != update.fence or batch.status != BatchStatus.RUNNING:
                return None
            added = 0
            for execution_id in update.listed:
                n = batch.listed + added + 1
                added += max(
                    tx.run(q["batch_item_insert"], {**key, "n": n, "execution_id": execution_id}), 0
                )
            counts = {"ok": batch.ok, "skipped": batch.skipped, "errors": batch.errors}
            for o in update.outcomes:
                if o.outcome == "pending":
                    continue
                params = {**key, "execution_id": o.execution_id, "outcome": o.outcome}
                changed = tx.run(q["batch_item_outcome"], {**params, "detail": o.detail, "at": at})
                counts[_COUNTED[o.outcome]] += max(changed, 0)
            listed = batch.listed + added
            listed_all = batch.listed_all or update.listed_all
            moved = bool(update.listed) or update.listed_all
            done = listed_all and listed == sum(counts.values())
            row = tx.rows(
                q["batch_update"],
                {
                    **key,
                    **counts,
                    **self._lease(update.now, update.lease_until - update.now),
                    "listed": listed,
                    "cursor": update.cursor if moved else batch.cursor,
                    "listed_all": listed_all,
                    "pages": int(moved),
                    "at": at,
                    "status": BatchStatus.COMPLETED if done else BatchStatus.RUNNING,
                    "finished_at": at if done else None,
                    "lease_owner": None if done else batch.lease_owner,
                },
            )[0]
            return _batch(row, d)

        result: BatchRecord | None = self._sql_write(body)
        return result
