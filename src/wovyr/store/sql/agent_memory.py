"""Agent memory of both SQL stores (the contract is `wovyr.store.agent_memory`). Its SQL
lives in `agent_memory.sql`.

A write bumps its namespace's version first (on PostgreSQL that row lock orders the
namespace's writers), then looks for its write id: a write already recorded is answered
from the record and its transaction rolled back, so nothing is written twice."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

from wovyr.store.agent_memory import (
    WRITE_ID_DAYS,
    MemoryDelete,
    MemoryFilter,
    MemoryItem,
    MemoryPut,
    MemoryWriteResult,
    VectorColumns,
)
from wovyr.store.audit import AuditEntry
from wovyr.store.codec import dumps
from wovyr.store.rows import Dialect, Row, to_params
from wovyr.store.sql import Params, SQLRole, Tx
from wovyr.store.vectors import VectorSearch

__all__ = ["SQLAgentMemory"]


def _item(r: Row, d: Dialect) -> MemoryItem:
    return MemoryItem(
        str(r["tenant"]), str(r["namespace"]), str(r["key"]), d.json(r["value"]), r["text"],
        r["embedding_model"], int(r["version"]), d.time(r["updated_at"]),
        d.time_or_none(r["expires_at"]),
    )  # fmt: skip


class SQLAgentMemory(SQLRole, VectorSearch):
    def put_memory(
        self, put: MemoryPut, now: datetime, *, audit: AuditEntry | None = None
    ) -> MemoryWriteResult:
        q = self._queries("agent_memory")
        d = self._dialect
        key = {
            "tenant": put.tenant,
            "namespace": put.namespace,
            "key": put.key,
            "now": d.timestamp(now),
        }

        def body(tx: Tx) -> MemoryWriteResult:
            seq = int(tx.rows(q["memory_bump"], key)[0]["version"])  # first: it orders writers
            _unless_replayed(tx, q, put.tenant, put.write_id)
            row = tx.rows(q["memory_current"], key)
            version = 1 if not row else int(row[0]["version"]) + 1
            tx.run(
                q["memory_upsert"],
                {
                    **key,
                    "value": dumps(put.value),
                    "text": put.text,
                    "embedding": put.embedding,
                    "model": put.embedding_model if put.embedding is not None else None,
                    "version": version,
                    "seq": seq,
                    "expires_at": d.timestamp_or_none(put.expires_at),
                },
            )
            result = MemoryWriteResult("put", put.key, version, bool(row))
            tx.append_audit(audit)
            _written(tx, q, key, now, put.write_id, result, d)
            return result

        return self._replayable(body)

    def delete_memory(
        self, delete: MemoryDelete, now: datetime, *, audit: AuditEntry | None = None
    ) -> MemoryWriteResult:
        q = self._queries("agent_memory")
        d = self._dialect
        tenant, namespace, key = delete.tenant, delete.namespace, delete.key
        params = {"tenant": tenant, "namespace": namespace, "key": key, "now": d.timestamp(now)}

        def body(tx: Tx) -> MemoryWriteResult:
            tx.rows(q["memory_bump"], params)
            _unless_replayed(tx, q, tenant, delete.write_id)
            row = tx.rows(q["memory_delete"], params)
            expires = d.time_or_none(row[0]["expires_at"]) if row else None
            existed = bool(row) and (expires is None or expires > now)
            if row:  # a row left: a cached matrix must drop it (a rebuild)
                tx.run(q["memory_count_delete"], params)
            result = MemoryWriteResult("delete", key, 0, existed)
            if existed:
                tx.append_audit(audit)
            _written(tx, q, params, now, delete.write_id, result, d)
            return result

        return self._replayable(body)

    def _replayable(self, body: Any) -> MemoryWriteResult:
        try:
            result: MemoryWriteResult = self._sql_write(body)
        except _Replayed as replayed:  # rolled back: nothing written
            return replayed.result
        return result

    def _memory_rows(self, name: str, params: Params) -> list[Row]:
        return self._sql_read(self._queries("agent_memory")[name], params)

    def get_memory(
        self, tenant: str, namespace: str, keys: Sequence[str], now: datetime
    ) -> list[MemoryItem]:
        if not keys:
            return []
        d = self._dialect
        params = {
            "tenant": tenant,
            "namespace": namespace,
            "keys": d.array(list(keys)),
            "now": d.timestamp(now),
        }
        found = {str(r["key"]): _item(r, d) for r in self._memory_rows("memory_get", params)}
        return [found[k] for k in keys if k in found]

    def list_memory(self, query: MemoryFilter, now: datetime) -> list[MemoryItem]:
        params = {**to_params(query, self._dialect), "now": self._dialect.timestamp(now)}
        return [_item(r, self._dialect) for r in self._memory_rows("memory_list", params)]

    def memory_marks(self, tenant: str, namespace: str) -> tuple[int, int]:
        rows = self._memory_rows("memory_marks", {"tenant": tenant, "namespace": namespace})
        return (int(rows[0]["version"]), int(rows[0]["deletes"])) if rows else (0, 0)

    def memory_vectors(
        self, tenant: str, namespace: str, model: str, after: int = 0
    ) -> VectorColumns:
        params = {"tenant": tenant, "namespace": namespace, "model": model, "after": after}
        rows = self._memory_rows("memory_vectors_after" if after else "memory_vectors", params)
        d = self._dialect
        return VectorColumns(
            [r["key"] for r in rows],
            [r["embedding"] for r in rows],
            [_seconds(d.time_or_none(r["expires_at"])) for r in rows],
        )


def _seconds(at: datetime | None) -> float:
    return math.inf if at is None else at.timestamp()


class _Replayed(Exception):
    """A write whose write id is recorded: its transaction is rolled back."""

    def __init__(self, result: MemoryWriteResult) -> None:
        super().__init__(result.key)
        self.result = result


def _unless_replayed(tx: Tx, q: Any, tenant: str, write_id: str | None) -> None:
    """Raise `_Replayed` with what the write of `write_id` did, when it is recorded."""
    if write_id is None:
        return
    row = tx.rows(q["memory_replayed"], {"tenant": tenant, "write_id": write_id})
    if not row:
        return
    r = row[0]
    op: Literal["put", "delete"] = "put" if r["op"] == "put" else "delete"
    raise _Replayed(
        MemoryWriteResult(op, str(r["key"]), int(r["version"]), bool(r["existed"]), applied=False)
    )


def _written(
    tx: Tx,
    q: Any,
    key: dict[str, Any],
    now: datetime,
    write_id: str | None,
    result: MemoryWriteResult,
    d: Dialect,
) -> None:
    """The rest of a write's transaction (the version was bumped first): the write id and
    the lazy purges (the namespace's expired items: masked in a cached matrix already, so
    not counted as deletes; the tenant's old write ids)."""
    tx.run(q["memory_purge_expired"], key)
    horizon = d.timestamp(now - timedelta(days=WRITE_ID_DAYS))
    tx.run(q["memory_purge_writes"], {"tenant": key["tenant"], "horizon": horizon})
    if write_id is not None:
        tx.run(
            q["memory_record_write"],
            {
                **key,
                "write_id": write_id,
                "op": result.op,
                "version": result.version,
                "existed": result.existed,
            },
        )
