"""The SQL of the PostgreSQL store, read from the `.sql` files next to this module.

`queries.sql` holds named blocks (`-- name: claim` up to the next `-- name:`);
`migrations/NNNN_description.sql` are the numbered schema migrations.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from importlib import resources

__all__ = ["migrations", "parse_queries", "queries"]

_NAME = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)
_PACKAGE = "wovyr.store.postgres"


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


@cache
def queries() -> Mapping[str, str]:
    """The named queries of `queries.sql`."""
    text = (resources.files(_PACKAGE) / "queries.sql").read_text(encoding="utf-8")
    return parse_queries(text)


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
