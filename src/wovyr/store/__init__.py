"""Store contracts and drivers. The drivers are reached only through the backend table
(`wovyr.store.backends`), lazily, by the URL: `sqlite:///path`, `postgresql://...`, and
`memory://` (a SQLite store in a private temporary folder, gone when the store is closed)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from wovyr.errors import ConfigError
from wovyr.store.backends import backend_for
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
from wovyr.store.capabilities import Capabilities, capabilities, check_store

__all__ = [
    "Capabilities",
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
    "capabilities",
    "check_store",
    "default_url",
    "open_store",
    "redact_url",
]


def default_url(home: str | Path | None = None) -> str:
    """`sqlite:///<home>/wovyr.db`, home defaulting to `~/.wovyr`."""
    base = Path(home).expanduser() if home else Path("~/.wovyr").expanduser()
    return f"sqlite:///{base / 'wovyr.db'}"


def redact_url(url: str) -> str:
    """`url` with its password replaced by `***`, for messages and listings."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


def open_store(url: str, *, migrate: bool = True, db_clock: bool = True) -> Store:
    """Open the store named by `url` (checked to implement the whole contract).

    `migrate=False` leaves a PostgreSQL schema as it is (`wovyr db upgrade` migrates it);
    the embedded SQLite store always migrates itself on open. On PostgreSQL, leases are
    measured with the database's clock (`db_clock`, so workers on hosts whose clocks
    disagree share one); `db_clock=False` uses the engine's clock (tests with a ManualClock).
    """
    store = backend_for(url).driver().open_url(url, migrate, db_clock)
    try:
        check_store(store)
    except ConfigError:
        store.close()
        raise
    return store
