"""Tenants' model providers on every store: put replaces, get/list/delete, another tenant's
provider answers exactly like a missing one, and the audit entry of a change is appended
with it (never for a delete that found nothing)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from wovyr.store.audit import AuditEntry
from wovyr.store.base import Store
from wovyr.store.platform import ProviderRecord

AT = datetime(2030, 1, 1, 9, tzinfo=UTC)


def provider(tenant: str = "t1", name: str = "openai", **kw: object) -> ProviderRecord:
    record = ProviderRecord(
        tenant, name, "https://api.example.com/v1", "OPENAI_KEY", "gpt-x", 2.5, 10.0, AT, "alice"
    )
    return replace(record, **kw)  # type: ignore[arg-type]


def entry(action: str, tenant: str = "t1") -> AuditEntry:
    return AuditEntry(AT, tenant, "local:tester", action, "openai", {})


def test_a_stored_provider_reads_back(store: Store) -> None:
    assert store.get_provider("t1", "openai") is None
    store.put_provider(provider())
    assert store.get_provider("t1", "openai") == provider()
    assert store.list_providers("t1") == [provider()]


def test_put_replaces_every_field(store: Store) -> None:
    store.put_provider(provider())
    later = provider(
        base_url="http://127.0.0.1:9/v1",
        api_key_secret=None,
        default_model=None,
        price_in=None,
        price_out=None,
        updated_at=AT + timedelta(seconds=5),
        updated_by="bob",
        kind="anthropic",
    )
    store.put_provider(later)
    assert store.get_provider("t1", "openai") == later
    optioned = replace(
        later,
        options={"top_k": 5, "stop_sequences": ["END"]},
        prices={"claude-x": {"input": 3.0, "output": 15.0}},
    )
    store.put_provider(optioned)
    assert store.get_provider("t1", "openai") == optioned  # options and prices as given
    limited = replace(later, kind="openai", token_limit="max_completion_tokens")
    store.put_provider(limited)
    assert store.get_provider("t1", "openai") == limited  # its token limit's key too
    responses = replace(later, kind="openai-responses", options={"reasoning": {"effort": "low"}})
    store.put_provider(responses)
    assert store.get_provider("t1", "openai") == responses
    store.put_provider(later)
    assert store.get_provider("t1", "openai") == later  # and gone again


def test_list_is_by_name_and_per_tenant(store: Store) -> None:
    store.put_provider(provider(name="zeta"))
    store.put_provider(provider(name="alpha"))
    store.put_provider(provider(tenant="t2", name="beta"))
    assert [p.name for p in store.list_providers("t1")] == ["alpha", "zeta"]
    assert [p.name for p in store.list_providers("t2")] == ["beta"]
    assert store.list_providers("t3") == []


def test_another_tenants_provider_is_missing(store: Store) -> None:
    store.put_provider(provider(tenant="t1"))
    assert store.get_provider("t2", "openai") is None
    assert store.delete_provider("t2", "openai") is False
    store.put_provider(provider(tenant="t2", base_url="http://t2.example/v1"))
    found_1, found_2 = store.get_provider("t1", "openai"), store.get_provider("t2", "openai")
    assert found_1 is not None and found_1.base_url == "https://api.example.com/v1"
    assert found_2 is not None and found_2.base_url == "http://t2.example/v1"


def test_delete(store: Store) -> None:
    store.put_provider(provider())
    assert store.delete_provider("t1", "openai") is True
    assert store.get_provider("t1", "openai") is None
    assert store.delete_provider("t1", "openai") is False


def test_changes_append_their_audit_entry(store: Store) -> None:
    store.put_provider(provider(), audit=entry("provider.set"))
    assert store.delete_provider("t1", "nothing", audit=entry("provider.delete")) is False
    assert store.delete_provider("t1", "openai", audit=entry("provider.delete")) is True
    assert [r.action for r in store.audit_records()] == ["provider.set", "provider.delete"]
