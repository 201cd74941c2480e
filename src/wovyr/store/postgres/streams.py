"""The stream journal of the PostgreSQL store (mixed into PostgresStore). Its SQL lives in
`streams.sql`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from functools import cache
from importlib import resources
from typing import Any

from wovyr.store.postgres.queries import parse_queries
from wovyr.store.postgres.support import Connection
from wovyr.store.streams import NewChunk, StreamChunk

__all__ = ["PostgresStreams"]


@cache
def _queries() -> dict[str, str]:
    text = (resources.files("wovyr.store.postgres") / "streams.sql").read_text(encoding="utf-8")
    return parse_queries(text)


class PostgresStreams:
    """Needs `_write()` and `_run()` from PostgresStore."""

    _write: Callable[[Callable[[Connection], Any]], Any]
    _run: Callable[..., Any]

    def append_stream(
        self,
        tenant: str,
        execution_id: str,
        fence: int,
        chunks: Sequence[NewChunk],
        at: datetime,
    ) -> bool:
        q = _queries()
        key = {"tenant": tenant, "id": execution_id}

        def body(conn: Connection) -> bool:
            row = conn.execute(q["stream_fence"], key).fetchone()
            if row is None or int(row[0]) != fence:
                return False
            found = conn.execute(q["stream_last"], key).fetchone()
            last = int(found[0]) if found is not None else 0
            with conn.cursor() as cur:
                cur.executemany(
                    q["stream_insert"],
                    [
                        {
                            **key,
                            "n": last + i,
                            "activity": c.activity,
                            "attempt": c.attempt,
                            "recovery": c.recovery,
                            "turn": c.turn,
                            "kind": c.kind,
                            "text": c.text,
                            "at": at,
                        }
                        for i, c in enumerate(chunks, 1)
                    ],
                )
            return True

        return bool(self._write(body))

    def read_stream(
        self, tenant: str, execution_id: str, after: int = 0, limit: int = 500
    ) -> list[StreamChunk]:
        sql = _queries()["stream_read"]
        params = {"tenant": tenant, "id": execution_id, "after": after, "limit": limit}

        def body(conn: Connection) -> list[Any]:
            return conn.execute(sql, params).fetchall()

        rows: list[Any] = self._run(body, write=False)
        return [
            StreamChunk(
                int(r[0]), str(r[1]), int(r[2]), int(r[3]), r[4], str(r[5]), r[6], int(r[7])
            )
            for r in rows
        ]
