"""The stream journal of both SQL stores (the contract is `wovyr.store.streams`). Its SQL
lives in `streams.sql`."""

from __future__ import annotations

from wovyr.store.rows import Dialect, Row
from wovyr.store.sql import SQLRole, Tx
from wovyr.store.streams import StreamAppend, StreamChunk

__all__ = ["SQLStreams"]


class SQLStreams(SQLRole):
    def append_stream(self, append: StreamAppend) -> bool:
        q = self._queries("streams")
        key = {"tenant": append.tenant, "id": append.execution_id}
        when = self._dialect.timestamp(append.at)

        def body(tx: Tx) -> bool:
            found = tx.rows(q["stream_fence"], key)
            if not found or int(found[0]["fence"]) != append.fence:
                return False
            last = int(tx.rows(q["stream_last"], key)[0]["last"])
            tx.run_many(
                q["stream_insert"],
                [
                    {**key, "n": last + i, "activity": c.activity, "attempt": c.attempt,
                     "recovery": c.recovery, "turn": c.turn, "kind": c.kind, "text": c.text,
                     "at": when}
                    for i, c in enumerate(append.chunks, 1)
                ],
            )  # fmt: skip
            return True

        return bool(self._sql_write(body))

    def read_stream(
        self, tenant: str, execution_id: str, after: int = 0, limit: int = 500
    ) -> list[StreamChunk]:
        params = {"tenant": tenant, "id": execution_id, "after": after, "limit": limit}
        rows = self._sql_read(self._queries("streams")["stream_read"], params)
        return [_chunk(r, self._dialect) for r in rows]


def _chunk(r: Row, d: Dialect) -> StreamChunk:
    return StreamChunk(
        int(r["n"]), str(r["activity"]), int(r["attempt"]), int(r["turn"]), r["kind"],
        str(r["text"]), d.time(r["at"]), int(r["recovery"]),
    )  # fmt: skip
