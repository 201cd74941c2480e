"""Store contracts and drivers. Only this module knows the drivers; it imports them lazily
from the URL scheme: `sqlite:///path`, `memory://`, `postgresql://...`."""

from __future__ import annotations

from pathlib import Path

from wovyr.errors import ConfigError
from wovyr.store.base import (
    Claim,
    CommitOutcome,
    DefinitionRecord,
    EventRecord,
    ExecutionFilter,
    ExecutionRecord,
    NewExecution,
    Page,
    StepWrite,
    Store,
    TimerRecord,
)

__all__ = [
    "Claim",
    "CommitOutcome",
    "DefinitionRecord",
    "EventRecord",
    "ExecutionFilter",
    "ExecutionRecord",
    "NewExecution",
    "Page",
    "StepWrite",
    "Store",
    "TimerRecord",
    "default_url",
    "open_store",
]


def default_url(home: str | Path | None = None) -> str:
    """`sqlite:///<home>/wovyr.db`, home defaulting to `~/.wovyr`."""
    base = Path(home).expanduser() if home else Path("~/.wovyr").expanduser()
    return f"sqlite:///{base / 'wovyr.db'}"


def open_store(url: str) -> Store:
    """Open the store named by `url`."""
    if url.startswith("sqlite:///"):
        from wovyr.store.sqlite import SQLiteStore

        path = url[len("sqlite:///") :]
        if not path:
            raise ConfigError("a sqlite URL needs a path: sqlite:///path/to/wovyr.db")
        return SQLiteStore(Path(path).expanduser())  # sqlite:////abs or sqlite:///rel
    if url in ("memory://", "memory:"):
        from wovyr.store.memory import MemoryStore

        return MemoryStore()
    if url.startswith(("postgresql://", "postgres://")):
        try:
            from wovyr.store.postgres import PostgresStore  # type: ignore[import-not-found,unused-ignore]
        except ImportError as exc:
            raise ConfigError(
                "the PostgreSQL store needs the postgres extra: pip install 'wovyr[postgres]'"
            ) from exc
        store: Store = PostgresStore(url)
        return store
    raise ConfigError(
        f"unknown store URL {url!r}",
        hint="use sqlite:///path/to/wovyr.db, postgresql://user@host/db or memory://",
    )
