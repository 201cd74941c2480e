"""Agent memory on every store: put/get/delete/list round-trips, versions, write ids (one
effect per write id), ttl under a ManualClock, tenant isolation, and the search (cosine,
scores, its cache invalidated by a write through another store object)."""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from tests.conftest import make_store

from wovyr.clock import ManualClock
from wovyr.store.agent_memory import MemoryDelete, MemoryFilter, MemoryPut
from wovyr.store.audit import AuditEntry
from wovyr.store.base import Store
from wovyr.store.vectors import pack, unpack


def put(store: Store, clock: ManualClock, key: str, value: object = None, **kw: object) -> int:
    result = store.put_memory(MemoryPut("t1", "notes", key, value, **kw), clock.now())  # type: ignore[arg-type]
    return result.version


def test_put_get_round_trip(store: Store, clock: ManualClock) -> None:
    value = {"b": 1, "a": [1, 2.5, "x", None], "big": 2**70}
    store.put_memory(MemoryPut("t1", "notes", "k1", value, text="hello"), clock.now())
    [item] = store.get_memory("t1", "notes", ["k1"], clock.now())
    assert item.value == value and list(item.value) == ["b", "a", "big"]  # key order kept
    assert (item.tenant, item.namespace, item.key, item.text) == ("t1", "notes", "k1", "hello")
    assert item.version == 1 and item.updated_at == clock.now() and item.expires_at is None
    assert item.embedding_model is None
    assert store.get_memory("t1", "notes", ["k2"], clock.now()) == []


def test_versions_count_puts_and_a_delete_ends_them(store: Store, clock: ManualClock) -> None:
    assert store.memory_version("t1", "notes") == 0
    assert put(store, clock, "k", 1) == 1
    clock.advance(1)
    assert put(store, clock, "k", 2) == 2
    [item] = store.get_memory("t1", "notes", ["k"], clock.now())
    assert item.value == 2 and item.version == 2 and item.updated_at == clock.now()
    gone = store.delete_memory(MemoryDelete("t1", "notes", "k"), clock.now())
    assert gone.existed and gone.applied and gone.op == "delete"
    assert store.get_memory("t1", "notes", ["k"], clock.now()) == []
    assert not store.delete_memory(MemoryDelete("t1", "notes", "k"), clock.now()).existed
    assert put(store, clock, "k", 3) == 1
    assert store.memory_version("t1", "notes") == 5  # every write bumps the namespace
    assert store.memory_version("t1", "other") == 0


def test_a_recorded_write_id_writes_nothing_again(store: Store, clock: ManualClock) -> None:
    first = store.put_memory(MemoryPut("t1", "notes", "k", 1, write_id="run/a/1"), clock.now())
    assert first.applied and first.version == 1 and not first.existed
    again = store.put_memory(MemoryPut("t1", "notes", "k", 99, write_id="run/a/1"), clock.now())
    assert not again.applied and again.version == 1
    [item] = store.get_memory("t1", "notes", ["k"], clock.now())
    assert item.value == 1 and item.version == 1
    assert store.memory_version("t1", "notes") == 1
    # the same id in another tenant is another write
    other = store.put_memory(MemoryPut("t2", "notes", "k", 2, write_id="run/a/1"), clock.now())
    assert other.applied
    gone = store.delete_memory(MemoryDelete("t1", "notes", "k", write_id="run/b/1"), clock.now())
    put(store, clock, "k", 5)
    replay = store.delete_memory(MemoryDelete("t1", "notes", "k", write_id="run/b/1"), clock.now())
    assert gone.applied and gone.existed and not replay.applied and replay.existed
    assert [i.value for i in store.get_memory("t1", "notes", ["k"], clock.now())] == [5]


def test_list_by_key_with_prefix_and_pages(store: Store, clock: ManualClock) -> None:
    for key in ["b/2", "a", "b/1", "c", "b/10", "é"]:
        put(store, clock, key, key)
    notes = MemoryFilter("t1", "notes")
    every = store.list_memory(notes, clock.now())
    assert [i.key for i in every] == ["a", "b/1", "b/10", "b/2", "c", "é"]
    assert [i.key for i in store.list_memory(replace(notes, prefix="b/"), clock.now())] == [
        "b/1",
        "b/10",
        "b/2",
    ]
    page = store.list_memory(replace(notes, limit=2), clock.now())
    after = store.list_memory(replace(notes, after=page[-1].key, limit=2), clock.now())
    assert [i.key for i in page + after] == ["a", "b/1", "b/10", "b/2"]
    got = store.get_memory("t1", "notes", ["c", "missing", "a"], clock.now())
    assert [i.key for i in got] == ["c", "a"]


def test_ttl_hides_items_and_a_write_purges_them(store: Store, clock: ManualClock) -> None:
    soon = clock.now() + timedelta(seconds=60)
    put(store, clock, "short", 1, expires_at=soon)
    put(store, clock, "long", 2)
    [item] = store.get_memory("t1", "notes", ["short"], clock.now())
    assert item.expires_at == soon
    clock.advance(59)
    assert len(store.list_memory(MemoryFilter("t1", "notes"), clock.now())) == 2
    clock.advance(1)  # expires_at is the first moment it is gone
    assert [i.key for i in store.list_memory(MemoryFilter("t1", "notes"), clock.now())] == ["long"]
    assert store.get_memory("t1", "notes", ["short"], clock.now()) == []
    # an expired key starts again at version 1, and deleting it finds nothing live
    assert not store.delete_memory(MemoryDelete("t1", "notes", "short"), clock.now()).existed
    assert put(store, clock, "short", 3) == 1
    # the purge happened in the write: the row is gone even for a reader at an earlier time
    put(store, clock, "x", 0, expires_at=clock.now() + timedelta(seconds=1))
    clock.advance(2)
    put(store, clock, "y", 0)
    earlier = clock.now() - timedelta(seconds=5)
    assert "x" not in [i.key for i in store.list_memory(MemoryFilter("t1", "notes"), earlier)]


def test_another_tenants_namespace_is_empty(store: Store, clock: ManualClock) -> None:
    store.put_memory(
        MemoryPut(
            "t1", "notes", "k", "mine", text="t", embedding=pack([1, 0]), embedding_model="m"
        ),
        clock.now(),
    )
    assert store.get_memory("t2", "notes", ["k"], clock.now()) == []
    assert store.list_memory(MemoryFilter("t2", "notes"), clock.now()) == []
    assert store.memory_version("t2", "notes") == 0
    assert store.search_memory("t2", "notes", [1.0, 0.0], "m", 5, clock.now()) == []
    assert not store.delete_memory(MemoryDelete("t2", "notes", "k"), clock.now()).existed
    assert [i.value for i in store.get_memory("t1", "notes", ["k"], clock.now())] == ["mine"]


def _embedded(
    store: Store, clock: ManualClock, key: str, vector: list[float], model: str = "m", **kw: object
) -> None:
    store.put_memory(
        MemoryPut(
            "t1",
            "notes",
            key,
            {"k": key},
            text=key,
            embedding=pack(vector),
            embedding_model=model,
            **kw,
        ),  # type: ignore[arg-type]
        clock.now(),
    )


def test_search_is_cosine_nearest_first_with_scores(store: Store, clock: ManualClock) -> None:
    _embedded(store, clock, "east", [1.0, 0.0, 0.0])
    _embedded(store, clock, "north", [0.0, 10.0, 0.0])  # length does not matter
    _embedded(store, clock, "northeast", [1.0, 1.0, 0.0])
    _embedded(store, clock, "other-model", [0.0, 1.0, 0.0], model="n")
    _embedded(store, clock, "other-dims", [0.0, 1.0], model="m")
    hits = store.search_memory("t1", "notes", [0.1, 1.0, 0.0], "m", 2, clock.now())
    assert [h.item.key for h in hits] == ["north", "northeast"]
    assert hits[0].score == pytest.approx(1.0 / (1.01**0.5), abs=1e-6)
    assert hits[1].score == pytest.approx(1.1 / (2 * 1.01) ** 0.5, abs=1e-6)
    assert hits[0].item.value == {"k": "north"} and hits[0].item.embedding_model == "m"
    every = store.search_memory("t1", "notes", [1.0, 0.0, 0.0], "m", 10, clock.now())
    assert [h.item.key for h in every] == ["east", "northeast", "north"]
    assert store.search_memory("t1", "notes", [1.0, 0.0, 0.0], "m", 0, clock.now()) == []
    assert store.search_memory("t1", "empty", [1.0, 0.0, 0.0], "m", 3, clock.now()) == []


def test_search_skips_expired_and_follows_writes(store: Store, clock: ManualClock) -> None:
    _embedded(store, clock, "a", [1.0, 0.0], expires_at=clock.now() + timedelta(seconds=10))
    _embedded(store, clock, "b", [0.8, 0.2])
    assert [
        h.item.key for h in store.search_memory("t1", "notes", [1, 0], "m", 1, clock.now())
    ] == ["a"]
    clock.advance(10)
    assert [
        h.item.key for h in store.search_memory("t1", "notes", [1, 0], "m", 1, clock.now())
    ] == ["b"]
    _embedded(store, clock, "c", [1.0, 0.01])
    assert [
        h.item.key for h in store.search_memory("t1", "notes", [1, 0], "m", 1, clock.now())
    ] == ["c"]
    store.delete_memory(MemoryDelete("t1", "notes", "c"), clock.now())
    assert [
        h.item.key for h in store.search_memory("t1", "notes", [1, 0], "m", 1, clock.now())
    ] == ["b"]


def test_embeddings_are_float32(store: Store, clock: ManualClock) -> None:
    assert unpack(pack([0.5, -2.0, 1e-3])) == pytest.approx([0.5, -2.0, 1e-3], rel=1e-6)
    assert len(pack([0.0] * 256)) == 1024


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_write_through_another_store_object_reaches_the_cache(
    kind: str, tmp_path: Path, clock: ManualClock, request: pytest.FixtureRequest
) -> None:
    """Two store objects on one database stand for two processes: a search in one after a
    write in the other sees the write. Puts update the cached matrix from the items written
    since (no rebuild); a delete rebuilds it; a search with no write between reads nothing."""
    url = request.getfixturevalue("migrated_postgres_url") if kind == "postgres" else None
    a, b = make_store(kind, tmp_path, url), make_store(kind, tmp_path, url)

    def top(k: int = 1) -> list[str]:
        return [h.item.key for h in a.search_memory("t1", "notes", [0, 1], "m", k, clock.now())]

    try:
        _embedded(a, clock, "x", [1.0, 0.0])
        assert top() == ["x"]
        cache = a.vector_cache  # type: ignore[attr-defined]
        assert (cache.builds, cache.updates) == (1, 0)
        assert top() == ["x"] and (cache.builds, cache.updates) == (1, 0)
        _embedded(b, clock, "y", [0.0, 1.0])  # a new item: appended
        assert top(3) == ["y", "x"] and (cache.builds, cache.updates) == (1, 1)
        _embedded(b, clock, "x", [0.1, 1.0])  # a replaced one: its row overwritten
        assert top(3) == ["y", "x"]
        hits = a.search_memory("t1", "notes", [0, 1], "m", 3, clock.now())
        assert hits[1].score == pytest.approx(1.0 / 1.01**0.5, abs=1e-6)
        b.put_memory(MemoryPut("t1", "notes", "y", "no text now"), clock.now())  # leaves
        assert top(3) == ["x"]
        _embedded(b, clock, "x", [0.0, 1.0], model="other")  # another model: leaves too
        assert top(3) == [] and (cache.builds, cache.updates) == (1, 4)
        _embedded(b, clock, "z", [0.0, 1.0], expires_at=clock.now() + timedelta(seconds=5))
        assert top(3) == ["z"]
        clock.advance(5)
        assert top(3) == []  # expired: masked, no read
        _embedded(b, clock, "z", [0.5, 1.0])  # purged by this write, then put again
        assert top(3) == ["z"] and (cache.builds, cache.updates) == (1, 6)
        _embedded(b, clock, "w", [0.2, 1.0])
        b.delete_memory(MemoryDelete("t1", "notes", "z"), clock.now())  # a delete: rebuilt
        assert top(3) == ["w"] and (cache.builds, cache.updates) == (2, 6)
    finally:
        a.close()
        b.close()


def test_concurrent_puts_of_one_key_number_every_version(store: Store, clock: ManualClock) -> None:
    def writer(n: int) -> None:
        for i in range(10):
            store.put_memory(MemoryPut("t1", "notes", "k", [n, i]), clock.now())

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    [item] = store.get_memory("t1", "notes", ["k"], clock.now())
    assert item.version == 30
    assert store.memory_version("t1", "notes") == 30


def test_an_audit_entry_is_appended_with_the_write_that_applies(
    store: Store, clock: ManualClock
) -> None:
    def entry(action: str) -> AuditEntry:
        return AuditEntry(clock.now(), "t1", "local:me", action, "notes/k")

    put1 = MemoryPut("t1", "notes", "k", 1, write_id="w1")
    store.put_memory(put1, clock.now(), audit=entry("memory.put"))
    store.put_memory(put1, clock.now(), audit=entry("memory.put"))  # replayed: no change
    delete = MemoryDelete("t1", "notes", "k")
    store.delete_memory(delete, clock.now(), audit=entry("memory.delete"))
    store.delete_memory(delete, clock.now(), audit=entry("memory.delete"))  # none
    found = [(r.action, r.target, r.actor) for r in store.audit_records()]
    assert found == [
        ("memory.put", "notes/k", "local:me"),
        ("memory.delete", "notes/k", "local:me"),
    ]
