"""Store roles written once for both SQL stores, over a small dialect.

A role here is a mixin of `SQLiteStore` and `PostgresStore` alike: the registry, schedules,
the platform tables, quotas, secrets, the audit chain's reads, agent memory, the stream
journal, flow control's buckets, bulk batches, retention's finding, histories and the
claim's frame. Its SQL lives in `<role>.sql` beside it, in named blocks (`-- name: x`) with
named parameters (`:name`, cast as `:name::type` where PostgreSQL wants the type; SQLite
drops the cast). A block named `x@postgres` or `x@sqlite` replaces `x` for that dialect
only, where the SQL really differs (an advisory lock, rowid, a function's name), and `{x}`
names the block `x` within another: a fragment, the role's own (a column list) or one of
`dialect.sql`, which every role shares (`{row_lock}`, `{skip_locked}`, `{lease_now}`,
`{lease_until}`). `Dialect` (`wovyr.store.rows`) says how a dialect spells parameters and
encodes times and JSON; each store hands its role a `Tx` (a transaction's connection)
through `_sql_write` and reads through `_sql_read`. What stays each store's own is where
more than the SQL differs: writing steps and checkpoints, the claim's statements, taking
flow-control slots, appending to the audit chain, purging, scrubbing keys.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from functools import cache
from importlib import resources
from typing import Any, Protocol, TypeVar

from wovyr.store.audit import AuditEntry, AuditRecord
from wovyr.store.records import NewExecution
from wovyr.store.rows import Dialect, Row, from_row

__all__ = ["Params", "SQLRole", "Tx", "parse_queries", "role_queries", "with_fragments"]

Params = Mapping[str, Any]


class Tx(Protocol):
    """A connection inside one write transaction; rows are read by column name."""

    def rows(self, sql: str, params: Params) -> list[Row]: ...

    def run(self, sql: str, params: Params) -> int:
        """Run one statement; how many rows it changed."""
        ...

    def run_many(self, sql: str, params: Iterable[Params]) -> None: ...

    def append_audit(self, entry: AuditEntry | None) -> AuditRecord | None:
        """Append `entry` (if any) to the audit chain in this transaction."""
        ...

    def insert_execution(self, new: NewExecution) -> bool:
        """Create `new` with its first step in this transaction unless its tenant has its
        id (the store's own insert); True when created."""
        ...


_R = TypeVar("_R")
_NAME = re.compile(r"^--\s*name:\s*([\w@]+)\s*$", re.MULTILINE)


def parse_queries(text: str) -> dict[str, str]:
    """Split a file of `-- name: x` blocks into {name: sql}; comment lines are dropped."""
    found: dict[str, str] = {}
    marks = list(_NAME.finditer(text))
    for mark, following in zip(marks, [*marks[1:], None], strict=True):
        end = following.start() if following else len(text)
        body = "\n".join(
            line
            for line in text[mark.end() : end].splitlines()
            if line.strip() and not line.lstrip().startswith("--")
        )
        name = mark.group(1)
        if name in found:
            raise ValueError(f"query {name!r} is defined twice")
        found[name] = body.strip().rstrip(";")
    return found


def _own(text: str, dialect: Dialect) -> dict[str, str]:
    """The blocks of `text` for `dialect`: its own variants (`x@<dialect>`) in place of the
    shared blocks."""
    shared: dict[str, str] = {}
    own: dict[str, str] = {}
    for name, sql in parse_queries(text).items():
        base, _, only = name.partition("@")
        if not only:
            shared[base] = sql
        elif only == dialect.name:
            own[base] = sql
    return {**shared, **own}


_FRAGMENT = re.compile(r"\{(\w+)\}")


@cache
def role_queries(role: str, dialect: Dialect) -> Mapping[str, str]:
    """The queries of `<role>.sql` for `dialect`: its own variants (`x@<dialect>`) in place
    of the shared blocks, each `{name}` replaced by the block `name` (of the role, else of
    `dialect.sql`: the fragments every role shares), parameters spelled as the dialect
    wants them."""
    folder = resources.files(__package__)
    blocks = {
        **_own((folder / "dialect.sql").read_text(encoding="utf-8"), dialect),
        **_own((folder / f"{role}.sql").read_text(encoding="utf-8"), dialect),
    }
    return {name: dialect.params(sql) for name, sql in with_fragments(blocks).items()}


def with_fragments(blocks: Mapping[str, str]) -> dict[str, str]:
    """`blocks` with each `{name}` in them replaced by the block `name` (itself expanded);
    a `{name}` that names no block is left as it is."""

    def expand(sql: str) -> str:
        return _FRAGMENT.sub(lambda m: expand(blocks[m[1]]) if m[1] in blocks else m[0], sql)

    return {name: expand(sql) for name, sql in blocks.items()}


class SQLRole:
    """What a shared role needs from its store: the dialect, one write transaction
    (`_sql_write(body)`: `body(tx)` in it, its answer returned) and a read."""

    _dialect: Dialect
    _sql_write: Callable[[Callable[[Tx], Any]], Any]
    _sql_read: Callable[[str, Params], list[Row]]

    def _queries(self, role: str) -> Mapping[str, str]:
        return role_queries(role, self._dialect)

    def _sql_write_one(self, sql: str, params: Params) -> list[Row]:
        """One statement, its own transaction; the rows it returns."""
        rows: list[Row] = self._sql_write(lambda tx: tx.rows(sql, params))
        return rows

    def _lease(self, now: datetime, lease: timedelta) -> dict[str, Any]:
        """The parameters of `{lease_until}`: a lease of `lease` from `now`."""
        until = self._dialect.timestamp(now + lease)
        return {"now": self._lease_now(now), "lease": lease, "until": until}

    def _lease_now(self, now: datetime) -> Any:
        """`:now` of `{lease_now}` (PostgreSQL with db_clock: None, the database's clock)."""
        return self._dialect.timestamp(now)

    def _role_records(self, role: str, name: str, params: Params, cls: type[_R]) -> list[_R]:
        """The records `cls` (read by `from_row`) of the rows of `role`'s query `name`."""
        rows = self._sql_read(self._queries(role)[name], params)
        return [from_row(cls, row, self._dialect) for row in rows]

    def _role_record(self, role: str, name: str, params: Params, cls: type[_R]) -> _R | None:
        """The first of `_role_records`, or None."""
        found = self._role_records(role, name, params, cls)
        return found[0] if found else None

    def _role_write(
        self, role: str, name: str, params: Params, audit: AuditEntry | None = None
    ) -> int:
        """One statement of `role` in a transaction; `audit` is appended in it when a row
        changed."""
        sql = self._queries(role)[name]

        def body(tx: Tx) -> int:
            count = tx.run(sql, params)
            if count:
                tx.append_audit(audit)
            return count

        return int(self._sql_write(body))
