"""The store contract is checked at start-up, and optional capabilities are declared.

Every store implements the whole `Store` contract; a store that implements only part of it
is refused when it is opened (or handed to an Engine), with every missing method named.
What only some stores can do is answered by `capabilities(store)`.
"""

from __future__ import annotations

import textwrap
from datetime import datetime
from pathlib import Path

import pytest

from wovyr.engine.engine import Engine
from wovyr.errors import ConfigError
from wovyr.store import capabilities, check_store
from wovyr.store.base import (
    DEFAULT_TENANT,
    DefinitionRecord,
    ExecutionRecord,
    Store,
    TimerRecord,
)
from wovyr.store.capabilities import contract_methods
from wovyr.store.hooks import StoreObserver


class PartialStore:
    """Definitions, timers and hooks, and nothing of executions, queues, schedules, the
    registry or the platform tables."""

    url = "partial://"

    def __init__(self) -> None:
        self.definitions: dict[str, DefinitionRecord] = {}

    def add_observer(self, observer: StoreObserver) -> None:
        return None

    def close(self) -> None:
        return None

    def put_definition(self, record: DefinitionRecord) -> None:
        self.definitions[record.hash] = record

    def get_definition(
        self, definition_hash: str, tenant: str = DEFAULT_TENANT
    ) -> DefinitionRecord | None:
        return self.definitions.get(definition_hash)

    def load(
        self, execution_id: str, tenant: str | None = DEFAULT_TENANT
    ) -> ExecutionRecord | None:
        return None

    def due_timers(self, now: datetime, limit: int) -> list[TimerRecord]:
        return []

    def next_timer_at(self) -> datetime | None:
        return None


def test_a_partial_store_is_refused_with_every_missing_method_named() -> None:
    with pytest.raises(ConfigError) as caught:
        check_store(PartialStore())
    message = str(caught.value)
    assert message.startswith("store PartialStore does not implement the store contract: missing ")
    missing = message.split("missing ", 1)[1].split(" (", 1)[0].split(", ")
    implemented = {"add_observer", "close", "put_definition", "get_definition"}
    implemented |= {"load", "due_timers", "next_timer_at"}
    assert missing == [m for m in contract_methods() if m not in implemented]
    for name in ("create_schedule", "list_registered", "commit", "claim", "api_key_by_hash"):
        assert name in missing
    assert "put_definition" not in missing


def test_an_engine_refuses_a_partial_store() -> None:
    with pytest.raises(
        ConfigError, match=r"PartialStore does not implement .* create_execution, commit,"
    ):
        Engine(PartialStore())  # type: ignore[arg-type]  # mypy refuses it too (last test)


def test_a_store_without_a_url_is_refused(store: Store) -> None:
    class Nameless:
        def __getattr__(self, name: str) -> object:
            if name == "url":
                raise AttributeError(name)
            return getattr(store, name)

    with pytest.raises(ConfigError, match=r"contract: missing url \("):
        check_store(Nameless())


def test_the_contract_names_every_role() -> None:
    names = set(contract_methods())
    roles = {
        "definitions": {"put_definition", "get_definition"},
        "registry": {"apply_definition", "registered_definition", "list_registered"},
        "executions": {"create_execution", "commit", "load", "list_executions", "history"},
        "queue": {"claim", "renew_leases", "release_owner", "ready_count"},
        "timers": {"due_timers", "next_timer_at"},
        "schedules": {"create_schedule", "get_schedule", "list_schedules", "delete_schedule"},
        "api keys": {"create_api_key", "api_key_by_hash", "revoke_api_key", "touch_api_key"},
        "idempotency": {"claim_idempotency_key", "purge_idempotency_keys"},
        "sessions": {"revoke_session", "session_revoked", "purge_revoked_sessions"},
        "tenants": {"get_tenant", "put_tenant", "list_tenants"},
        "life": {"add_observer", "close"},
    }
    for role, methods in roles.items():
        assert methods <= names, role
    assert not names & {"fire_timers", "worker_heartbeat", "wait_for_work", "migrate"}


def test_every_store_meets_the_contract_and_declares_its_capabilities(store: Store) -> None:
    check_store(store)
    found = capabilities(store)
    kind = type(store).__name__
    has = {name for name, value in vars(found).items() if value is not None}
    expected = {
        "SQLiteStore": {"migrations", "snapshots"},
        "PostgresStore": {
            "timer_locking",
            "membership",
            "notifications",
            "migrations",
            "snapshots",
            "event_partitions",
        },
    }[kind]
    assert has == expected
    for value in vars(found).values():
        assert value is None or value is store
    if found.migrations is not None:
        assert found.migrations.schema_version() == found.migrations.latest_migration() > 0
        assert found.migrations.pending_migrations() == []


@pytest.mark.slow
def test_mypy_refuses_a_partial_store_where_a_store_is_expected(tmp_path: Path) -> None:
    from mypy import api

    module = tmp_path / "partial.py"
    module.write_text(
        textwrap.dedent(
            """
            from wovyr.store.base import Store

            class PartialStore:
                url = "partial://"

                def close(self) -> None: ...

            def use(store: Store) -> None: ...

            use(PartialStore())
            """
        )
    )
    out, _, status = api.run(["--strict", "--no-incremental", "--cache-dir=/dev/null", str(module)])
    assert status == 1
    assert 'incompatible type "PartialStore"; expected "Store"' in out
