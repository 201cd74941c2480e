"""Consistent copies of a PostgreSQL store with the standard tools, and restoring them.

- `dump_schema`: `pg_dump -Fc` of the store's schema (one snapshot: pg_dump reads every
  table in one repeatable-read transaction, and blocks no writer).
- `check_dump`: `pg_restore --list` reads the archive's table of contents.
- `stage_restore`: `pg_restore --single-transaction` into the target database, the schema
  of the target URL left untouched until the dump is in: a schema already there is renamed
  aside first (`<schema>__pre_restore`), the restored one takes its name, and the caller
  either `commit`s (the old one is dropped) or `abort`s (the restored one is dropped and the
  old one renamed back).

Connection parameters reach the tools through libpq's environment (`PGHOST`, ...), never the
command line, so a password is not visible in the process list.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from wovyr.errors import ConfigError, Conflict, StoreError
from wovyr.store import redact_url

__all__ = [
    "StagedSchema",
    "check_dump",
    "dump_schema",
    "live_workers",
    "stage_restore",
    "target_schema",
]

_ENV = {
    "host": "PGHOST",
    "port": "PGPORT",
    "user": "PGUSER",
    "password": "PGPASSWORD",
    "dbname": "PGDATABASE",
    "options": "PGOPTIONS",
    "sslmode": "PGSSLMODE",
    "connect_timeout": "PGCONNECT_TIMEOUT",
}


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise ConfigError(
            f"{name} is not on PATH: backups of a PostgreSQL store use the PostgreSQL client tools",
            hint="install the PostgreSQL client package matching the server's major version",
        )
    return found


def _env(url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    for key, value in conninfo_to_dict(url).items():
        if key in _ENV and value is not None:
            env[_ENV[key]] = str(value)
    return env


def _run(args: list[str], url: str | None, what: str) -> subprocess.CompletedProcess[str]:
    env = _env(url) if url else None
    done = subprocess.run(args, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()
        raise StoreError(f"{what} failed: {' / '.join(detail[-3:]) or done.returncode}")
    return done


def dump_schema(url: str, schema: str, dest: Path) -> None:
    """`pg_dump -Fc` of `schema` of the database of `url` into the new file `dest`."""
    _run(
        [
            _tool("pg_dump"),
            "--format=custom",
            "--no-owner",
            "--no-privileges",
            f"--schema={schema}",
            f"--file={dest}",
        ],
        url,
        f"pg_dump of {redact_url(url)}",
    )


def check_dump(path: Path) -> list[str]:
    """What `pg_restore --list` finds wrong with the archive `path` (nothing: [])."""
    try:
        done = _run([_tool("pg_restore"), "--list", str(path)], None, "pg_restore --list")
    except StoreError as exc:
        return [str(exc)]
    if " TABLE DATA " not in done.stdout:
        return [f"{path.name} holds no table data"]
    return []


def _connect(url: str) -> psycopg.Connection[Any]:
    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=10)
    except psycopg.Error as exc:
        raise StoreError(f"cannot reach PostgreSQL at {redact_url(url)}: {exc}") from exc


def target_schema(url: str) -> str:
    """The schema a store at `url` lives in: the first entry of its search_path."""
    with _connect(url) as conn:
        row = conn.execute("SELECT current_schema()").fetchone()
        if row and row[0]:
            return str(row[0])
        path = conn.execute("SHOW search_path").fetchone()
    first = str(path[0] if path else "public").split(",")[0].strip().strip('"')
    return first if first and first != "$user" else "public"


def _tables(conn: psycopg.Connection[Any], schema: str) -> int | None:
    """How many tables `schema` holds; None when there is no such schema."""
    found = conn.execute(
        "SELECT count(c.oid) FROM pg_namespace n LEFT JOIN pg_class c "
        "ON c.relnamespace = n.oid AND c.relkind IN ('r', 'p') WHERE n.nspname = %s "
        "GROUP BY n.oid",
        (schema,),
    ).fetchone()
    return None if found is None else int(found[0])


class StagedSchema:
    """A dump restored under the target schema's name, the previous schema (if any) kept
    aside until `commit` (dropped) or `abort` (put back)."""

    def __init__(self, url: str, schema: str, aside: str | None) -> None:
        self.url = url
        self.schema = schema
        self.aside = aside

    def commit(self) -> None:
        if self.aside is not None:
            with _connect(self.url) as conn:
                conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(self.aside)))

    def abort(self) -> None:
        with _connect(self.url) as conn, conn.transaction():
            conn.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(self.schema))
            )
            if self.aside is not None:
                conn.execute(
                    sql.SQL("ALTER SCHEMA {} RENAME TO {}").format(
                        sql.Identifier(self.aside), sql.Identifier(self.schema)
                    )
                )


def live_workers(url: str, within_seconds: float) -> list[str]:
    """The workers of the store at `url` that reported in the last `within_seconds` (by
    the database's clock), from its `worker_members` table ([] when it has none)."""
    schema = target_schema(url)
    with _connect(url) as conn:
        table = conn.execute(
            "SELECT to_regclass(%s)", (f"{sql.Identifier(schema).as_string(conn)}.worker_members",)
        ).fetchone()
        if table is None or table[0] is None:
            return []
        rows = conn.execute(
            sql.SQL(
                "SELECT owner FROM {}.worker_members"
                " WHERE last_seen >= now() - make_interval(secs => %s) ORDER BY owner"
            ).format(sql.Identifier(schema)),
            (within_seconds,),
        ).fetchall()
    return [str(r[0]) for r in rows]


def target_tables(url: str) -> int:
    """How many tables the target schema of `url` holds (0 when it does not exist)."""
    schema = target_schema(url)
    with _connect(url) as conn:
        return _tables(conn, schema) or 0


def stage_restore(dump: Path, url: str, dump_schema_name: str, *, force: bool) -> StagedSchema:
    """Restore `dump` (a dump of schema `dump_schema_name`) into the schema of `url`.

    Refuses (`Conflict`, nothing changed) a target schema that holds tables unless `force`,
    and a dump whose schema name exists in the target database under another name (restore
    into another database, or into a schema of that name)."""
    schema = target_schema(url)
    aside = f"{schema}__pre_restore"[:63]
    with _connect(url) as conn:
        held = _tables(conn, schema)
        if held and not force:
            raise Conflict(
                f"the target schema {schema} of {redact_url(url)} holds {held} tables",
                hint="restore into an empty schema or database, or give --force to replace it",
            )
        if dump_schema_name != schema and _tables(conn, dump_schema_name) is not None:
            raise Conflict(
                f"the dump is of schema {dump_schema_name}, which exists in the target "
                f"database beside the target schema {schema}",
                hint=f"restore into the schema {dump_schema_name} of this or another database "
                "(a URL without search_path for public; every database has a public schema)"
                if dump_schema_name == "public"
                else "restore into another database, or into a schema of the dump's name",
            )
        if _tables(conn, aside) is not None:
            raise Conflict(
                f"the schema {aside} is left from an earlier restore",
                hint=f"inspect it, then DROP SCHEMA {aside} CASCADE",
            )
        if held is not None:
            conn.execute(
                sql.SQL("ALTER SCHEMA {} RENAME TO {}").format(
                    sql.Identifier(schema), sql.Identifier(aside)
                )
            )
    staged = StagedSchema(url, schema, aside if held is not None else None)
    try:
        dbname = str(conninfo_to_dict(url).get("dbname") or "postgres")
        _restore(dump, dbname, url, f"pg_restore into {redact_url(url)}")
        if dump_schema_name != schema:
            with _connect(url) as conn:
                conn.execute(
                    sql.SQL("ALTER SCHEMA {} RENAME TO {}").format(
                        sql.Identifier(dump_schema_name), sql.Identifier(schema)
                    )
                )
    except BaseException:
        staged.abort()
        raise
    return staged


def _restore(dump: Path, dbname: str, url: str, what: str) -> None:
    """pg_restore `dump` into the database `dbname` (reached as `url`), in one transaction
    that any error rolls back, the objects owned by whoever connects."""
    options = ["--no-owner", "--no-privileges", "--single-transaction", "--exit-on-error"]
    _run([_tool("pg_restore"), *options, f"--dbname={dbname}", str(dump)], url, what)


@contextmanager
def scratch_restore(dump: Path, url: str, dump_schema_name: str) -> Iterator[str]:
    """`dump` restored into a scratch database on the server of `url`, created here and
    dropped on the way out (the store at `url` is not touched): the conninfo of the
    restored store, for checks that need its rows (the audit chain)."""
    # the process id in the name: a database left behind (the server died during the
    # check) says which process made it
    name = f"wovyr_verify_{os.getpid()}_{secrets.token_hex(6)}"
    with _connect(url) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    scratch = make_conninfo(url, dbname=name, options=f"-csearch_path={dump_schema_name}")
    try:
        # a new database has a `public` schema: a dump of that schema creates it itself
        with _connect(scratch) as conn:
            conn.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(dump_schema_name))
            )
        _restore(dump, name, scratch, "pg_restore into a scratch database")
        yield scratch
    finally:
        with _connect(url) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
