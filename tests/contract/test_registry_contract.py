"""The definition registry contract on every store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from wovyr.store.base import DefinitionRecord, Store

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def rec(
    digest: str, version: str, at: int = 0, name: str = "wf", tenant: str = "default"
) -> DefinitionRecord:
    return DefinitionRecord(
        digest, name, version, f"source {digest}", T0 + timedelta(seconds=at), tenant
    )


def test_apply_is_idempotent_and_refuses_a_changed_version(store: Store) -> None:
    registry = store  # every store implements DefinitionRegistry
    assert registry.apply_definition(rec("h1", "1")) == "applied"
    assert registry.apply_definition(rec("h1", "1", 5)) == "unchanged"
    assert registry.apply_definition(rec("h2", "1", 6)) == "conflict"
    assert registry.apply_definition(rec("h2", "2", 7)) == "applied"
    latest = registry.registered_definition("wf")
    assert latest.hash == "h2" and latest.version == "2" and latest.source == "source h2"
    assert registry.registered_definition("wf", "1").hash == "h1"
    assert registry.registered_definition("wf", "9") is None
    listed = registry.list_registered()
    assert [(r.version, r.hash) for r in listed] == [("2", "h2"), ("1", "h1")]
    assert store.get_definition("h2") is not None


def test_registry_is_per_tenant(store: Store) -> None:
    store.apply_definition(rec("h1", "1"))
    assert store.registered_definition("wf", tenant="b") is None
    assert store.apply_definition(rec("h9", "1", tenant="b")) == "applied"
    assert store.registered_definition("wf").hash == "h1"
