"""Scrubbing the data keys' earlier copies from the PostgreSQL store (mixed into
PostgresStore; the rest of the secrets role is shared: `wovyr.store.sql.secrets`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["PostgresScrub"]


class PostgresScrub:
    """Needs `_run()` from PostgresStore."""

    _run: Callable[..., Any]

    def scrub_data_keys(self) -> list[str]:
        # Outside a transaction (VACUUM cannot run in one); removes the dead row versions
        # no open snapshot can still see.
        self._run(lambda conn: conn.execute("VACUUM data_keys"), write=True)
        return [
            "PostgreSQL's write-ahead log (and any WAL archive, replica or base backup) keeps "
            "the earlier row versions until it is recycled, and a snapshot open during the "
            "vacuum keeps them in the table: rotate the root key (`wovyr admin kms rotate`) "
            "and retire the old one to make the shred final there"
        ]
