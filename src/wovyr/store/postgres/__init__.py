"""The scale-out store: PostgreSQL through psycopg 3 and a connection pool."""

from __future__ import annotations

from wovyr.store.postgres.store import PostgresStore

__all__ = ["PostgresStore"]
