"""`wovyr db upgrade|version`: the store's schema (numbered migrations)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from wovyr.cli.common import echo_json, store_options
from wovyr.cli.main import cli
from wovyr.errors import ConfigError
from wovyr.settings import Settings
from wovyr.store import Store, capabilities, open_store, redact_url
from wovyr.store.capabilities import Migrating

__all__: list[str] = []

F = TypeVar("F", bound=Callable[..., Any])


def _db_options(fn: F) -> F:
    """--db, --home and --json (the store options of every command, minus activities)."""
    return store_options(click.option("--json", "as_json", is_flag=True, help="Print JSON.")(fn))


@contextmanager
def _open(settings: Settings) -> Iterator[tuple[Store, Migrating]]:
    # migrate=False: `version` must report the schema as found, `upgrade` migrates itself.
    store = open_store(settings.store_url, migrate=False)
    try:
        schema = capabilities(store).migrations
        if schema is None:
            raise ConfigError(f"the store {redact_url(store.url)} has no schema to migrate")
        yield store, schema
    finally:
        store.close()


@cli.group("db")
def db() -> None:
    """The store's schema: apply migrations, show the version."""


@db.command("upgrade")
@_db_options
def upgrade(settings: Settings, as_json: bool) -> None:
    """Apply pending migrations (safe to run from several hosts at once)."""
    with _open(settings) as (store, schema):
        before = schema.schema_version()
        after = schema.migrate()
        if as_json:
            echo_json({"store": redact_url(store.url), "from_version": before, "version": after})
        elif after == before:
            click.echo(f"schema version {after}: up to date")
        else:
            click.echo(f"schema version {after} (upgraded from {before})")


@db.command("version")
@_db_options
def version(settings: Settings, as_json: bool) -> None:
    """Show the schema version and the migrations not applied yet."""
    with _open(settings) as (store, schema):
        current, pending = schema.schema_version(), schema.pending_migrations()
        if as_json:
            echo_json({"store": redact_url(store.url), "version": current, "pending": pending})
            return
        click.echo(f"schema version {current}")
        if pending:
            listed = ", ".join(str(v) for v in pending)
            click.echo(f"pending migrations: {listed} (run `wovyr db upgrade`)")
