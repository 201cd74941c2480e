"""The per-tenant memo of model responses (`llm` with `cache: true`) on every store: a stored
response answers its key again, the first one stored stays, and another tenant's entry
answers exactly like a missing one."""

from __future__ import annotations

from datetime import UTC, datetime

from wovyr.store.base import Store

AT = datetime(2030, 1, 1, 9, tzinfo=UTC)
RESPONSE = {"text": "hi", "json": None, "usage": {"input_tokens": 3, "output_tokens": 1}}


def test_a_stored_response_answers_its_key(store: Store) -> None:
    assert store.get_cached_response("t1", "k1") is None
    store.put_cached_response("t1", "k1", RESPONSE, AT)
    assert store.get_cached_response("t1", "k1") == RESPONSE
    assert store.get_cached_response("t1", "k2") is None


def test_the_first_response_stays(store: Store) -> None:
    store.put_cached_response("t1", "k1", RESPONSE, AT)
    store.put_cached_response("t1", "k1", {**RESPONSE, "text": "other"}, AT)
    found = store.get_cached_response("t1", "k1")
    assert found is not None and found["text"] == "hi"


def test_another_tenants_entry_is_missing(store: Store) -> None:
    store.put_cached_response("t1", "k1", RESPONSE, AT)
    assert store.get_cached_response("t2", "k1") is None
    store.put_cached_response("t2", "k1", {**RESPONSE, "text": "t2's"}, AT)
    assert store.get_cached_response("t1", "k1") == RESPONSE
    found = store.get_cached_response("t2", "k1")
    assert found is not None and found["text"] == "t2's"


def test_a_returned_response_is_a_copy(store: Store) -> None:
    store.put_cached_response("t1", "k1", RESPONSE, AT)
    found = store.get_cached_response("t1", "k1")
    assert found is not None
    found["text"] = "changed"
    assert store.get_cached_response("t1", "k1") == RESPONSE
