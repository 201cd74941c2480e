"""Migrated PostgreSQL schemas for the tests, emptied and handed on instead of dropped.

A fresh schema costs a test 0.25 s (quiet machine) to 0.85 s (loaded) of the server's time,
its migrations and its drop, and the suite runs hundreds of store tests on PostgreSQL. A
test process keeps the schemas its tests have finished with: after a test, the tables that
hold rows are truncated (the rows the migrations seed are put back, the sequences
restarted) and the next test gets it, unless the test changed the schema's catalog (a
table, a column, a partition, a function, a trigger or a constraint added or dropped, a
migration undone): then it is dropped, as before. A test that needs an empty, unmigrated
schema asks for `postgres_url`, which is always fresh.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import psycopg

# Everything a test could change in a schema's catalog, as one digest (names, not oids, so
# two schemas migrated alike compare equal). The schema's relations are read once: pg_class
# has no index on the namespace alone, so each read scans the whole of its name index.
_CATALOG = """
WITH rels AS MATERIALIZED (
  SELECT oid, relname, relkind, relnatts FROM pg_class WHERE relnamespace = %(ns)s::regnamespace
)
SELECT md5(coalesce(string_agg(x, ',' ORDER BY x), '')) FROM (
  SELECT 'c:' || relname || ':' || relkind::text || ':' || relnatts FROM rels
  UNION ALL
  SELECT 'p:' || proname || ':' || md5(prosrc) FROM pg_proc
   WHERE pronamespace = %(ns)s::regnamespace
  UNION ALL
  SELECT 't:' || t.tgname || ':' || t.tgenabled::text FROM pg_trigger t
    JOIN pg_class c ON c.oid = t.tgrelid
   WHERE c.relnamespace = %(ns)s::regnamespace AND NOT t.tgisinternal
  UNION ALL
  SELECT 'k:' || conname FROM pg_constraint WHERE connamespace = %(ns)s::regnamespace
  UNION ALL
  SELECT 'a:' || c.relname || '.' || a.attname || ':' || a.atttypid::regtype::text
    FROM pg_attribute a JOIN rels c ON c.oid = a.attrelid
   WHERE a.attnum > 0 AND NOT a.attisdropped
) s(x)
"""
# Tables that hold rows (partitions, not their parents): the ones a test may have written.
_TABLES = """
SELECT relname FROM pg_class
 WHERE relnamespace = %(ns)s::regnamespace AND relkind = 'r' ORDER BY relname
"""
_SEQUENCES = (
    "SELECT relname FROM pg_class WHERE relnamespace = %(ns)s::regnamespace AND relkind = 'S'"
)
_MIGRATIONS = "wovyr_schema_migrations"


@dataclass
class _Shape:
    """What a freshly migrated schema looks like: its catalog digest, its tables, its
    sequences and the rows the migrations wrote (COPY text, by table)."""

    catalog: str
    tables: list[str]
    sequences: list[str]
    seeds: dict[str, bytes]
    migrations: tuple[int, ...]


@dataclass
class SchemaPool:
    """The migrated schemas one test process has at hand (tests in a process run one at a
    time: no lock)."""

    url: str
    idle: list[str] = field(default_factory=list)
    owned: set[str] = field(default_factory=set)
    shape: _Shape | None = None

    def take_migrated(self) -> str:
        """An emptied migrated schema; a fresh one is migrated first."""
        return self.idle.pop() if self.idle else self._migrate(self.fresh())

    def fresh(self) -> str:
        """A new, empty schema (handed on after the test if the test migrated it)."""
        schema = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url, autocommit=True) as admin:
            admin.execute(f"CREATE SCHEMA {schema}")
        self.owned.add(schema)
        return schema

    def give_back(self, schema: str) -> None:
        """Empty `schema` for the next test, or drop it when the test changed its catalog
        (or when it cannot be emptied within a few seconds)."""
        try:
            with psycopg.connect(self.url, autocommit=True) as admin:
                admin.execute("SET lock_timeout = '5s'")
                # Its catalog queries are small: a parallel plan (the planner takes one on
                # catalogs a suite keeps changing) doubles their time starting workers.
                admin.execute("SET max_parallel_workers_per_gather = 0")
                if self._empty(admin, schema):
                    self.idle.append(schema)
                    return
        except psycopg.Error:
            pass
        self.drop(schema)

    @contextmanager
    def one_at_a_time(self) -> Iterator[Callable[..., str]]:
        """For a sweep of crash points: `next_url()` hands the schema of the previous point
        on (its checks are done) and returns a URL on another one, migrated (or fresh, with
        `migrated=False`), whose connections carry the schema's name as application_name
        (`backends_gone`)."""
        held: list[str] = []

        def next_url(*, migrated: bool = True) -> str:
            if held:
                self.give_back(held.pop())
            held.append(self.take_migrated() if migrated else self.fresh())
            return f"{schema_url(self.url, held[-1])}&application_name={held[-1]}"

        try:
            yield next_url
        finally:
            for schema in held:
                self.give_back(schema)

    def _migrate(self, schema: str) -> str:
        from wovyr.store.postgres import PostgresStore

        PostgresStore(schema_url(self.url, schema), max_size=1).close()
        return schema

    def drop(self, schema: str) -> None:
        self.owned.discard(schema)
        with psycopg.connect(self.url, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")

    def close(self) -> None:
        for schema in list(self.owned):
            self.drop(schema)
        self.idle.clear()

    def _empty(self, admin: psycopg.Connection, schema: str) -> bool:
        ns = {"ns": schema}
        row = admin.execute(_CATALOG, ns).fetchone()
        catalog = str(row[0]) if row else ""
        migrations = _versions(admin, schema)
        if migrations is None:
            return False  # never migrated (or the table is gone): nothing to hand on
        if self.shape is None:
            # The first schema given back: a test ran on it, so its rows are not the seed.
            # Learn the shape from a schema migrated for the purpose.
            self.shape = self._learn()
        shape = self.shape
        if catalog != shape.catalog or migrations != shape.migrations:
            return False
        with admin.transaction():
            # Triggers (an audit table's guard, a slot's cleanup) do not fire while emptying.
            admin.execute("SET LOCAL session_replication_role = replica")
            # Emptied by TRUNCATE (a new, empty file), not DELETE: a test's rows then sit in
            # insertion order, as in a new table (a scan's order among equal keys is the
            # physical one). Only the tables with rows: a TRUNCATE costs a file each.
            truncate_written(admin, schema, shape.tables)
            for table, data in shape.seeds.items():
                _copy_in(admin, schema, table, data)
            for seq in shape.sequences:
                admin.execute(f'ALTER SEQUENCE {schema}."{seq}" RESTART')
        return True

    def _learn(self) -> _Shape:
        """Migrate a new schema, read its shape and keep it for the next test."""
        schema = self._migrate(self.fresh())
        with psycopg.connect(self.url, autocommit=True) as admin:
            ns = {"ns": schema}
            row = admin.execute(_CATALOG, ns).fetchone()
            tables = [str(r[0]) for r in admin.execute(_TABLES, ns)]
            sequences = [str(r[0]) for r in admin.execute(_SEQUENCES, ns)]
            seeds: dict[str, bytes] = {}
            for table in tables:
                if table == _MIGRATIONS:
                    continue
                data = _copy_out(admin, schema, table)
                if data:
                    seeds[table] = data
            own = _versions(admin, schema) or ()
        self.idle.append(schema)
        return _Shape(str(row[0]) if row else "", tables, sequences, seeds, own)


def truncate_written(
    conn: psycopg.Connection[Any], schema: str, tables: list[str] | None = None
) -> None:
    """TRUNCATE the tables of `schema` (all its tables by default) that hold a row, but the
    migrations' own: one round trip to find them, a TRUNCATE costs a new file per table."""
    if tables is None:
        tables = [str(r[0]) for r in conn.execute(_TABLES, {"ns": schema})]
    probes = " UNION ALL ".join(
        f'SELECT {i} FROM (SELECT 1 FROM {schema}."{t}" LIMIT 1) p{i}'
        for i, t in enumerate(tables)
        if t != _MIGRATIONS
    )
    written = [f'{schema}."{tables[int(r[0])]}"' for r in conn.execute(probes)] if probes else []
    if written:
        conn.execute(f"TRUNCATE {', '.join(written)} CASCADE")


def _versions(admin: psycopg.Connection, schema: str) -> tuple[int, ...] | None:
    """The migrations applied to `schema` (None: it has no migrations table)."""
    exists = admin.execute("SELECT to_regclass(%s)", (f"{schema}.{_MIGRATIONS}",)).fetchone()
    if not exists or exists[0] is None:
        return None
    rows = admin.execute(f"SELECT version FROM {schema}.{_MIGRATIONS} ORDER BY 1")
    return tuple(int(r[0]) for r in rows)


def _copy_out(admin: psycopg.Connection, schema: str, table: str) -> bytes:
    with admin.cursor().copy(f'COPY (SELECT * FROM {schema}."{table}") TO STDOUT') as cp:
        return b"".join(bytes(chunk) for chunk in cp)


def _copy_in(admin: psycopg.Connection, schema: str, table: str, data: bytes) -> None:
    with admin.cursor().copy(f'COPY {schema}."{table}" FROM STDIN') as cp:
        cp.write(data)


def schema_url(url: str, schema: str) -> str:
    """`url` with its search_path set to `schema` (libpq `options`)."""
    return f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"


def backends_gone(admin_url: str, url: str, timeout: float = 20) -> None:
    """Wait (bounded) until no server backend of `url` (a URL of `one_at_a_time`) is left:
    a killed client's backend rolls back and exits once it sees the socket close, and until
    then it may hold row locks."""
    app = url.rsplit("application_name=", 1)[1]
    deadline = time.monotonic() + timeout
    with psycopg.connect(admin_url, autocommit=True) as admin:
        while admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (app,)
        ).fetchone() != (0,):
            assert time.monotonic() < deadline, f"backends of {app} linger"
            time.sleep(0.01)
