"""The SQL of the PostgreSQL store, read from the `.sql` files next to this module.

`queries.sql` holds named blocks (`-- name: claim` up to the next `-- name:`), some of them
fragments that others name as `{fragment}` (`wovyr.store.sql.with_fragments`);
`migrations/NNNN_description.sql` are the numbered schema migrations.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from importlib import resources

from wovyr.store.sql import parse_queries, with_fragments

__all__ = ["migrations", "parse_queries", "queries"]

_PACKAGE = "wovyr.store.postgres"


@cache
def queries() -> Mapping[str, str]:
    """The named queries of `queries.sql`, a `{fragment}` in one replaced by its block."""
    text = (resources.files(_PACKAGE) / "queries.sql").read_text(encoding="utf-8")
    return with_fragments(parse_queries(text))


@cache
def migrations() -> tuple[tuple[int, str], ...]:
    """(version, script) of every migration, in order."""
    folder = resources.files(_PACKAGE) / "migrations"
    found = [
        (int(entry.name.split("_", 1)[0]), entry.read_text(encoding="utf-8"))
        for entry in folder.iterdir()
        if entry.name.endswith(".sql")
    ]
    versions = [v for v, _ in found]
    if len(set(versions)) != len(versions):
        raise ValueError(f"two PostgreSQL migrations share a number: {sorted(versions)}")
    return tuple(sorted(found))
