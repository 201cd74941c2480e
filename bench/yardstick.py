"""The yardstick: a minimal Python loop issuing the engine's transactions, nothing else.

It writes the embedded store's own tables (the file is made by `SQLiteStore`, so the schema
and indexes are the engine's) with plain `sqlite3` (WAL, synchronous=FULL, BEGIN
IMMEDIATE), the way the engine does for a chain of no-op steps:

- one transaction per start: the execution row (leased to this process) and its first
  three events (ExecutionStarted, ActivityScheduled, ActivityStarted);
- one transaction per step: the checkpoint update (checked against the expected seq and
  fence, as the engine's is) and the step's events (ActivityCompleted, ActivityScheduled,
  ActivityStarted; the last step ActivityCompleted and ExecutionCompleted, lease released);
- `k` executions advancing together: their steps share one transaction (the engine's
  group commit with k executions in flight).

The checkpoint it writes has the engine's shape and size: one entry per activity with the
fields the engine stores, kept as a dict and changed in place (the least a loop can do),
encoded with orjson and written whole on every step. The engine writes a checkpoint of
3,000 bytes or more as deltas (`wovyr.store.checkpoints`), so on a long chain it writes
fewer bytes than this loop, which stands for the whole rewrite. Every engine figure is
reported as a share of this loop measured in the same run.

On PostgreSQL (`--postgres URL`) the loop runs in a fresh schema made by the store's own
migrations, with psycopg in explicit transactions (synchronous_commit as the server has it).

`asyncio_floor` is the same loop shaped as any asyncio engine must be to run activities
concurrently and commit them durably, with nothing of an engine inside: a task per execution,
each step's activity (an empty coroutine under a deadline) in a task of its own, and its writes
handed to one writing thread that runs whatever queued meanwhile in one transaction (a start
too). Rows and checkpoints are prepared on the event loop; the thread only runs SQL. Alone (`k`
1) the writes run on the loop, as the engine's do. It tells how much of the yardstick an
engine built on asyncio can reach at best: what the engine spends beyond it is its own work.

Usage: python bench/yardstick.py [--workflows 200] [--steps 3] [--k 1] [--postgres URL] [--json]
       [--floor]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from wovyr.store.sqlite import SQLiteStore

if TYPE_CHECKING:
    import psycopg

    from wovyr.store.postgres import PostgresStore

__all__ = ["asyncio_floor", "minimal_loop", "postgres_schema", "stores_per_kind"]

_INSERT_EXECUTION = (
    "INSERT INTO executions (id, tenant, workflow, version, definition_hash, status,"
    " created_at, updated_at, parent_id, seq, ready, lease_owner, lease_until, fence,"
    " waiting_on, input, output, error, checkpoint, shard, rerun_of, labels, priority,"
    " claim_rank) VALUES (?, 'default', ?, '1', ?, 'running', ?, ?, NULL, 3, TRUE, ?, ?, 1,"
    " NULL, '{}', 'null', 'null', ?, 0, NULL, NULL, 0, ?)"
)
_UPDATE_EXECUTION = (
    "UPDATE executions SET seq = ?, status = ?, updated_at = ?, checkpoint = ?,"
    " ready = (? AND flow_wait IS NULL),"
    " waiting_on = CASE WHEN flow_wait IS NULL THEN ? ELSE waiting_on END,"
    " output = 'null', error = 'null'"
)
_WHERE = " WHERE tenant = 'default' AND id = ? AND seq = ? AND fence = 1"
_INSERT_EVENT = (
    "INSERT INTO events (tenant, execution_id, seq, type, at, data)"
    " VALUES ('default', ?, ?, ?, ?, ?)"
)

Write = Callable[[Any], None]  # a transaction's statements for one execution


def _activity_entry() -> dict[str, Any]:
    """A pending activity as the engine's checkpoint holds it."""
    return {
        "status": "pending",
        "attempt": 0,
        "input": None,
        "output": None,
        "error": None,
        "started_at": None,
        "finished_at": None,
        "next_attempt_at": None,
        "completion_order": None,
        "wait": None,
        "timer_fired": False,
        "skip_reason": None,
        "compensation_attempt": 0,
        "compensation_output": None,
        "compensation_error": None,
        "items": None,
        "child": None,
        "child_result": None,
    }


class _Execution:
    """One execution of the loop: its id, seq and checkpoint."""

    def __init__(self, steps: int, now: str) -> None:
        self.id = str(uuid.uuid4())
        self.seq = 0
        self.names = [f"a{i}" for i in range(steps)]
        self.checkpoint: dict[str, Any] = {
            "id": self.id,
            "workflow": f"yardstick{steps}",
            "status": "running",
            "created_at": now,
            "updated_at": now,
            "activities": {name: _activity_entry() for name in self.names},
            "seq": 0,
        }

    def start_events(self, now: str) -> list[tuple[str, dict[str, Any]]]:
        first = self.names[0]
        self._run(first, now)
        return [
            ("ExecutionStarted", {"workflow": self.checkpoint["workflow"], "input": {}}),
            ("ActivityScheduled", {"activity": first, "input": {}}),
            ("ActivityStarted", {"activity": first, "attempt": 1, "key": f"{self.id}/{first}/1"}),
        ]

    def step_events(self, step: int, now: str) -> list[tuple[str, dict[str, Any]]]:
        done = self.names[step]
        act = self.checkpoint["activities"][done]
        act.update(status="completed", finished_at=now, completion_order=step)
        events = [("ActivityCompleted", {"activity": done, "attempt": 1, "output": None})]
        if step + 1 < len(self.names):
            following = self.names[step + 1]
            self._run(following, now)
            key = f"{self.id}/{following}/1"
            events += [
                ("ActivityScheduled", {"activity": following, "input": {}}),
                ("ActivityStarted", {"activity": following, "attempt": 1, "key": key}),
            ]
        else:
            self.checkpoint["status"] = "completed"
            events.append(("ExecutionCompleted", {"output": None}))
        return events

    def _run(self, name: str, now: str) -> None:
        act = self.checkpoint["activities"][name]
        act.update(status="running", attempt=1, input={}, started_at=now)

    def start_write(self, sql: _Sql, now: str, at: Any) -> Write:
        """The start's statements: the execution row, leased, and its first events."""
        rows = self.rows(self.start_events(now), at)
        execution = (
            self.id,
            self.checkpoint["workflow"],
            "sha256:yardstick",
            at,
            at,
            "yardstick",
            sql.later(at, 30),
            orjson.dumps(self.checkpoint).decode(),
            0,
        )

        def write(conn: Any) -> None:
            conn.execute(sql.insert_execution, execution)
            _insert_events(conn, sql, rows)

        return write

    def step_write(self, sql: _Sql, step: int, now: str, at: Any) -> Write:
        """Step `step`'s statements: the checkpoint, checked against the seq and fence it
        was read at, and the step's events."""
        expected = self.seq
        rows = self.rows(self.step_events(step, now), at)
        last = step + 1 == len(self.names)
        statement = sql.update_execution
        if last:
            statement += ", lease_owner = NULL, lease_until = NULL"
        statement += sql.where
        checkpoint = orjson.dumps(self.checkpoint).decode()
        params = (self.seq, self.checkpoint["status"], at, checkpoint, not last, None, self.id)

        def write(conn: Any) -> None:
            cur = conn.execute(statement, (*params, expected))
            assert cur.rowcount == 1
            _insert_events(conn, sql, rows)

        return write

    def rows(self, events: list[tuple[str, dict[str, Any]]], at: int) -> list[tuple[Any, ...]]:
        rows = [
            (self.id, self.seq + i + 1, kind, at, orjson.dumps(data).decode())
            for i, (kind, data) in enumerate(events)
        ]
        self.seq += len(events)
        self.checkpoint["seq"] = self.seq
        return rows


def _connect(path: Path) -> sqlite3.Connection:
    SQLiteStore(path).close()  # the engine's schema, made by its own migrations
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    return conn


class _Sql:
    """The loop's statements and its way to stamp time, for one database."""

    def __init__(self, postgres: bool) -> None:
        self.postgres = postgres
        mark = "%s" if postgres else "?"
        self.insert_execution = _INSERT_EXECUTION.replace("?", mark)
        self.update_execution = _UPDATE_EXECUTION.replace("?", mark)
        self.where = _WHERE.replace("?", mark)
        self.insert_event = _INSERT_EVENT.replace("?", mark)
        if postgres:  # events are partitioned by their execution's month (migration 0038)
            self.insert_event = self.insert_event.replace("data)", "data, bucket)").replace(
                "%s)", "%s, events_bucket(%s))"
            )

    def now(self) -> Any:
        if self.postgres:
            return datetime.now(UTC)
        return time.time_ns() // 1000

    def later(self, at: Any, seconds: int) -> Any:
        return at + timedelta(seconds=seconds) if self.postgres else at + seconds * 1_000_000


def _open(target: Path | str) -> tuple[Any, _Sql]:
    """A connection to `target` (a SQLite file to create, or a PostgreSQL URL whose schema
    the engine's migrations already made) and its statements."""
    if isinstance(target, str):
        import psycopg  # only for this database

        return psycopg.connect(target, autocommit=True), _Sql(True)
    return _connect(target), _Sql(False)


def minimal_loop(target: Path | str, workflows: int, steps: int, k: int = 1) -> float:
    """Seconds to run `workflows` chains of `steps` steps, `k` executions per transaction;
    `target` is a SQLite file to create or a PostgreSQL URL whose schema the engine's
    migrations already made (a `PostgresStore` opened on it)."""
    conn, sql = _open(target)
    postgres = sql.postgres
    begin = "BEGIN" if postgres else "BEGIN IMMEDIATE"
    begun = time.perf_counter()
    remaining = workflows
    while remaining > 0:
        batch = min(k, remaining)
        remaining -= batch
        at = sql.now()
        now = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
        group = [_Execution(steps, now) for _ in range(batch)]
        conn.execute(begin)
        for ex in group:
            ex.start_write(sql, now, at)(conn)
        conn.execute("COMMIT")
        for step in range(steps):
            at = sql.now()
            conn.execute(begin)
            for ex in group:
                ex.step_write(sql, step, now, at)(conn)
            conn.execute("COMMIT")
    elapsed = time.perf_counter() - begun
    conn.close()
    return elapsed


class _Writer:
    """The least a group commit on asyncio does: writes queue on the event loop and one
    thread runs all that queued meanwhile in one transaction; alone, on the loop."""

    def __init__(self, conn: Any, sql: _Sql, *, alone: bool) -> None:
        self._conn = conn
        self._begin = "BEGIN" if sql.postgres else "BEGIN IMMEDIATE"
        self._alone = alone
        self._thread = ThreadPoolExecutor(max_workers=1)
        self._queue: list[tuple[Write, asyncio.Future[None]]] = []
        self._flusher: asyncio.Task[None] | None = None

    async def write(self, write: Write) -> None:
        if self._alone:
            self._run([write])
            return
        future = asyncio.get_running_loop().create_future()
        self._queue.append((write, future))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush())
        await future

    async def _flush(self) -> None:
        loop = asyncio.get_running_loop()
        while self._queue:
            batch, self._queue = self._queue, []
            try:
                await loop.run_in_executor(self._thread, self._run, [w for w, _ in batch])
            except Exception as exc:
                for _, future in batch:
                    future.set_exception(exc)
                continue
            for _, future in batch:
                future.set_result(None)

    def _run(self, writes: list[Write]) -> None:
        self._conn.execute(self._begin)
        for write in writes:
            write(self._conn)
        self._conn.execute("COMMIT")

    def close(self) -> None:
        self._thread.shutdown()


async def _activity() -> None:
    return None


async def _floor(conn: Any, sql: _Sql, workflows: int, steps: int, k: int) -> None:
    writer = _Writer(conn, sql, alone=k == 1)

    async def attempt() -> None:
        async with asyncio.timeout(300):  # every attempt has a deadline
            await _activity()

    async def execution() -> None:
        now = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
        ex = _Execution(steps, now)
        await writer.write(ex.start_write(sql, now, sql.now()))
        for step in range(steps):
            await asyncio.create_task(attempt())
            await writer.write(ex.step_write(sql, step, now, sql.now()))

    try:
        remaining = workflows
        while remaining > 0:
            batch = min(k, remaining)
            remaining -= batch
            await asyncio.gather(*(asyncio.create_task(execution()) for _ in range(batch)))
    finally:
        writer.close()


def asyncio_floor(target: Path | str, workflows: int, steps: int, k: int = 1) -> float:
    """Seconds for `minimal_loop`'s work shaped as an asyncio engine (the module's
    docstring): `k` executions in flight, their writes grouped by one writing thread."""
    conn, sql = _open(target)
    begun = time.perf_counter()
    try:
        asyncio.run(_floor(conn, sql, workflows, steps, k))
    finally:
        elapsed = time.perf_counter() - begun
        conn.close()
    return elapsed


def _insert_events(conn: Any, sql: _Sql, rows: list[tuple[Any, ...]]) -> None:
    if sql.postgres:
        with conn.cursor() as cur:
            cur.executemany(sql.insert_event, [(*r, r[3]) for r in rows])  # + the bucket's time
    else:
        conn.executemany(sql.insert_event, rows)


@contextmanager
def postgres_schema(url: str) -> Iterator[str]:
    """A URL whose search_path is a fresh schema (dropped afterwards) holding the engine's
    tables, made by `PostgresStore`'s migrations."""
    import psycopg

    from wovyr.store.postgres import PostgresStore

    schema = f"bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    try:
        scoped = f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"
        PostgresStore(scoped, max_size=1).close()
        yield scoped
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA {schema} CASCADE")


def stores_per_kind(
    stack: ExitStack, url: str, kinds: Sequence[str], insert: str, rows: list[Any]
) -> tuple[dict[str, PostgresStore], dict[str, psycopg.Connection[Any]]]:
    """For benchmarks whose variants each drain their own copy of the same rows: one fresh
    schema per kind (dropped when `stack` closes) holding `rows` (`insert`, then analysed),
    each with a store and an autocommit connection."""
    import psycopg

    from wovyr.store.postgres import PostgresStore

    urls = {kind: stack.enter_context(postgres_schema(url)) for kind in kinds}
    stores = {kind: PostgresStore(urls[kind], max_size=2) for kind in kinds}
    for store in stores.values():
        stack.callback(store.close)
    conns = {
        kind: stack.enter_context(psycopg.connect(urls[kind], autocommit=True)) for kind in kinds
    }
    for conn in conns.values():
        with conn.cursor() as cur:
            cur.executemany(insert, rows)
        conn.execute("VACUUM ANALYZE executions")
    return stores, conns


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workflows", type=int, default=200)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--k", type=int, default=1)
    parser.add_argument("--postgres", default=None, help="a PostgreSQL URL (else SQLite)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--floor", action="store_true", help="the asyncio floor instead")
    args = parser.parse_args()
    loop = asyncio_floor if args.floor else minimal_loop
    if args.postgres:
        with postgres_schema(args.postgres) as url:
            elapsed = loop(url, args.workflows, args.steps, args.k)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            elapsed = loop(Path(tmp) / "y.db", args.workflows, args.steps, args.k)
    result = {
        "workflows": args.workflows,
        "steps": args.steps,
        "k": args.k,
        "workflows_per_s": args.workflows / elapsed,
        "ms_per_step": elapsed / (args.workflows * args.steps) * 1000,
    }
    if not args.json:
        name = "asyncio floor" if args.floor else "minimal loop"
        print(
            f"{name}, {args.steps} steps, k={args.k}: {result['workflows_per_s']:.1f} wf/s,"
            f" {result['ms_per_step']:.3f} ms per step"
        )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
