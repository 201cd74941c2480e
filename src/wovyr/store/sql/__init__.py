"""Store roles written once for both SQL stores, over a small dialect.

A role here is a mixin of `SQLiteStore` and `PostgresStore` alike. Its SQL lives in
`<role>.sql` beside it, in named blocks (`-- name: x`) with named parameters (`:name`); a
block named `x@postgres` or `x@sqlite` replaces `x` for that dialect only, where the SQL
really differs (a row lock, an advisory lock, rowid), and `{x}` names the block `x` within
another (a fragment: a column list, or one of `dialect.sql`, which every role shares, such as
`{row_lock}`). `Dialect` (`wovyr.store.rows`) says
how a dialect spells parameters and encodes times and JSON; each store hands its role a
`Tx` (a transaction's connection) through `_sql_write` and reads through `_sql_read`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from functools import cache
from importlib import resources
from typing import Any, Protocol

from wovyr.store.audit import AuditEntry, AuditRecord
from wovyr.store.records import NewExecution
from wovyr.store.rows import Dialect, Row

__all__ = ["Params", "SQLRole", "Tx", "parse_queries", "role_queries"]

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

    def expand(sql: str) -> str:
        return _FRAGMENT.sub(lambda m: expand(blocks[m[1]]) if m[1] in blocks else m[0], sql)

    return {name: dialect.params(expand(sql)) for name, sql in blocks.items()}


class SQLRole:
    """What a shared role needs from its store: the dialect, one write transaction
    (`_sql_write(body)`: `body(tx)` in it, its answer returned) and a read."""

    _dialect: Dialect
    _sql_write: Callable[[Callable[[Tx], Any]], Any]
    _sql_read: Callable[[str, Params], list[Row]]

    def _queries(self, role: str) -> Mapping[str, str]:
        return role_queries(role, self._dialect)

    def _lease_now(self, now: datetime) -> Any:
        """`:now` of `{lease_now}` (PostgreSQL with db_clock: None, the database's clock)."""
        return self._dialect.timestamp(now)

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
