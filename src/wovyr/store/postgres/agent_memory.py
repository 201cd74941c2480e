"""Agent memory of the PostgreSQL store (mixed into PostgresStore); see
`wovyr.store.agent_memory`. Its SQL lives in `agent_memory.sql`. Embeddings are bytea and
searched in the process like SQLite's (`wovyr.store.vectors`): pgvector is not assumed."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from functools import cache
from importlib import resources
from typing import Any, Literal

from wovyr.store.agent_memory import (
    WRITE_ID_DAYS,
    MemoryItem,
    MemoryPut,
    MemoryWriteResult,
    VectorColumns,
)
from wovyr.store.audit import AuditEntry
from wovyr.store.codec import dumps, loads
from wovyr.store.postgres.audit import append_audit_row
from wovyr.store.postgres.queries import parse_queries
from wovyr.store.postgres.support import Connection
from wovyr.store.vectors import VectorSearch

__all__ = ["PostgresAgentMemory"]


@cache
def _queries() -> dict[str, str]:
    text = (resources.files("wovyr.store.postgres") / "agent_memory.sql").read_text("utf-8")
    return parse_queries(text)


def _item(row: Any) -> MemoryItem:
    return MemoryItem(
        str(row[0]),
        str(row[1]),
        str(row[2]),
        loads(row[3]),
        row[4],
        row[5],
        int(row[6]),
        row[7],
        row[8],
    )


class PostgresAgentMemory(VectorSearch):
    """Needs `_write()` and `_run()` from PostgresStore."""

    _write: Callable[[Callable[[Connection], Any]], Any]
    _run: Callable[..., Any]

    def put_memory(
        self, put: MemoryPut, now: datetime, *, audit: AuditEntry | None = None
    ) -> MemoryWriteResult:
        q = _queries()
        key = {"tenant": put.tenant, "namespace": put.namespace, "key": put.key, "now": now}

        def body(conn: Connection) -> MemoryWriteResult:
            bumped = conn.execute(q["memory_bump"], key).fetchone()  # first: it orders writers
            assert bumped is not None  # an upsert returns its row
            replayed = _replayed(conn, put.tenant, put.write_id)
            if replayed is not None:
                raise _Replayed(replayed)  # rolls the bump back: nothing is written
            row = conn.execute(q["memory_current"], key).fetchone()
            version = 1 if row is None else int(row[0]) + 1
            conn.execute(
                q["memory_upsert"],
                {
                    **key,
                    "value": dumps(put.value),
                    "text": put.text,
                    "embedding": put.embedding,
                    "model": put.embedding_model if put.embedding is not None else None,
                    "version": version,
                    "seq": int(bumped[0]),
                    "expires_at": put.expires_at,
                },
            )
            result = MemoryWriteResult("put", put.key, version, row is not None)
            append_audit_row(conn, audit)
            _written(conn, key, put.write_id, result)
            return result

        return _unless_replayed(self._write, body)

    def delete_memory(
        self,
        tenant: str,
        namespace: str,
        key: str,
        now: datetime,
        write_id: str | None = None,
        *,
        audit: AuditEntry | None = None,
    ) -> MemoryWriteResult:
        q = _queries()
        params = {"tenant": tenant, "namespace": namespace, "key": key, "now": now}

        def body(conn: Connection) -> MemoryWriteResult:
            conn.execute(q["memory_bump"], params)
            replayed = _replayed(conn, tenant, write_id)
            if replayed is not None:
                raise _Replayed(replayed)
            row = conn.execute(q["memory_delete"], params).fetchone()
            existed = row is not None and (row[0] is None or row[0] > now)
            if row is not None:  # a row left: a cached matrix must drop it (a rebuild)
                conn.execute(q["memory_count_delete"], params)
            result = MemoryWriteResult("delete", key, 0, existed)
            if existed:
                append_audit_row(conn, audit)
            _written(conn, params, write_id, result)
            return result

        return _unless_replayed(self._write, body)

    def _memory_rows(self, name: str, params: dict[str, Any]) -> list[Any]:
        sql = _queries()[name]

        def body(conn: Connection) -> list[Any]:
            return conn.execute(sql, params).fetchall()

        rows: list[Any] = self._run(body, write=False)
        return rows

    def get_memory(
        self, tenant: str, namespace: str, keys: Sequence[str], now: datetime
    ) -> list[MemoryItem]:
        if not keys:
            return []
        params = {"tenant": tenant, "namespace": namespace, "keys": list(keys), "now": now}
        found = {str(r[2]): _item(r) for r in self._memory_rows("memory_get", params)}
        return [found[k] for k in keys if k in found]

    def list_memory(
        self,
        tenant: str,
        namespace: str,
        now: datetime,
        *,
        prefix: str = "",
        after: str = "",
        limit: int = 100,
    ) -> list[MemoryItem]:
        params = {
            "tenant": tenant,
            "namespace": namespace,
            "now": now,
            "prefix": prefix,
            "after": after,
            "limit": limit,
        }
        return [_item(r) for r in self._memory_rows("memory_list", params)]

    def memory_marks(self, tenant: str, namespace: str) -> tuple[int, int]:
        rows = self._memory_rows("memory_marks", {"tenant": tenant, "namespace": namespace})
        return (int(rows[0][0]), int(rows[0][1])) if rows else (0, 0)

    def memory_vectors(
        self, tenant: str, namespace: str, model: str, after: int = 0
    ) -> VectorColumns:
        params = {"tenant": tenant, "namespace": namespace, "model": model, "after": after}
        rows = self._memory_rows("memory_vectors_after" if after else "memory_vectors", params)
        if not rows:
            return VectorColumns([], [], [])
        keys, blobs, expires = zip(*rows, strict=True)
        return VectorColumns(
            list(keys), list(blobs), [math.inf if e is None else e.timestamp() for e in expires]
        )


class _Replayed(Exception):
    """A write whose write id is recorded: its transaction is rolled back."""

    def __init__(self, result: MemoryWriteResult) -> None:
        super().__init__(result.key)
        self.result = result


def _unless_replayed(
    write: Callable[[Callable[[Connection], Any]], Any],
    body: Callable[[Connection], MemoryWriteResult],
) -> MemoryWriteResult:
    try:
        result: MemoryWriteResult = write(body)
    except _Replayed as replayed:
        return replayed.result
    return result


def _replayed(conn: Connection, tenant: str, write_id: str | None) -> MemoryWriteResult | None:
    if write_id is None:
        return None
    params = {"tenant": tenant, "write_id": write_id}
    row = conn.execute(_queries()["memory_replayed"], params).fetchone()
    if row is None:
        return None
    op: Literal["put", "delete"] = "put" if row[0] == "put" else "delete"
    return MemoryWriteResult(op, str(row[1]), int(row[2]), bool(row[3]), applied=False)


def _written(
    conn: Connection, key: dict[str, Any], write_id: str | None, result: MemoryWriteResult
) -> None:
    """The rest of a write's transaction (the version was bumped first): the write id and
    the lazy purges (the namespace's expired items, the tenant's old write ids)."""
    q = _queries()
    conn.execute(q["memory_purge_expired"], key)
    horizon = key["now"] - timedelta(days=WRITE_ID_DAYS)
    conn.execute(q["memory_purge_writes"], {"tenant": key["tenant"], "horizon": horizon})
    if write_id is not None:
        conn.execute(
            q["memory_record_write"],
            {
                **key,
                "write_id": write_id,
                "op": result.op,
                "version": result.version,
                "existed": result.existed,
            },
        )
