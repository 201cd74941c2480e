"""The KMS and secrets tables on every store: data keys inserted once (the first stored
wins), re-wrapped by compare-and-set on the wrapping key's id, secrets versioned per set,
listed by name and per tenant (another tenant's secret is missing), deleted; root rows."""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from wovyr.store.base import Store
from wovyr.store.secrets import SHREDDED, DataKeyRecord, KmsRootRecord, NewSecret

AT = datetime(2030, 1, 1, 9, tzinfo=UTC)


def test_data_keys_first_one_stored_wins_and_rewrap_is_compare_and_set(store: Store) -> None:
    first = DataKeyRecord("t1", 1, b"\x00wrapped-a\xff", "root-a", AT)
    assert store.add_data_key(first) == first
    assert store.add_data_key(replace(first, wrapped=b"other")) == first
    assert store.data_key("t1") == first
    assert store.data_key("t1", 1) == first
    assert store.data_key("t1", 2) is None
    assert store.data_key("t2") is None
    second = DataKeyRecord("t1", 2, b"v2", "root-a", AT + timedelta(seconds=1))
    store.add_data_key(second)
    store.add_data_key(DataKeyRecord("t0", 1, b"t0", "root-a", AT))
    assert store.data_key("t1") == second  # the latest version
    assert [(k.tenant, k.version) for k in store.list_data_keys()] == [
        ("t0", 1),
        ("t1", 1),
        ("t1", 2),
    ]
    assert store.rewrap_data_key("t1", 1, "root-a", b"new", "root-b")
    assert not store.rewrap_data_key("t1", 1, "root-a", b"again", "root-c")  # moved on
    assert not store.rewrap_data_key("t9", 1, "root-a", b"x", "root-b")  # unknown
    assert store.data_key("t1", 1) == replace(first, wrapped=b"new", root_id="root-b")


def test_racing_first_data_keys_agree_on_one(store: Store) -> None:
    results: list[DataKeyRecord] = []

    def add(i: int) -> None:
        results.append(store.add_data_key(DataKeyRecord("race", 1, bytes([i]), "r", AT)))

    threads = [threading.Thread(target=add, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({r.wrapped for r in results}) == 1
    assert store.data_key("race") == results[0]


def test_secrets_are_versioned_per_tenant_and_deleted(store: Store) -> None:
    one = store.put_secret(NewSecret("t1", "API_KEY", b"\x01cipher", 1, AT, "cli"))
    assert (one.version, one.created_at, one.updated_at, one.updated_by) == (1, AT, AT, "cli")
    later = AT + timedelta(minutes=5)
    two = store.put_secret(NewSecret("t1", "API_KEY", b"\x02cipher", 2, later, "key-1"))
    assert (two.version, two.created_at, two.updated_at) == (2, AT, later)
    assert (two.ciphertext, two.key_version, two.updated_by) == (b"\x02cipher", 2, "key-1")
    assert store.get_secret("t1", "API_KEY") == two
    store.put_secret(NewSecret("t1", "B", b"b", 1, AT, "cli"))
    store.put_secret(NewSecret("t2", "API_KEY", b"t2", 1, AT, "cli"))
    assert [s.name for s in store.list_secrets("t1")] == ["API_KEY", "B"]
    assert store.get_secret("t3", "API_KEY") is None  # another tenant's: missing
    assert store.list_secrets("t3") == []
    assert not store.delete_secret("t3", "API_KEY")
    assert store.delete_secret("t1", "API_KEY")
    assert not store.delete_secret("t1", "API_KEY")
    assert store.get_secret("t1", "API_KEY") is None
    assert store.get_secret("t2", "API_KEY") is not None
    again = store.put_secret(NewSecret("t1", "API_KEY", b"c", 1, later, "cli"))
    assert again.version == 1  # a new secret of that name starts over


def test_kms_root_rows(store: Store) -> None:
    assert store.kms_root("r1") is None
    record = KmsRootRecord("r1", AT)
    store.put_kms_root(record)
    assert store.kms_root("r1") == record
    escrowed = replace(record, escrowed_at=AT + timedelta(hours=1), escrowed_by="ops")
    store.put_kms_root(escrowed)
    assert store.kms_root("r1") == escrowed
    rotated = replace(escrowed, rotated_at=AT + timedelta(hours=2))
    store.put_kms_root(rotated)
    assert store.kms_root("r1") == rotated


def test_shredding_destroys_one_tenants_data_keys_and_keeps_their_versions(
    store: Store,
) -> None:
    store.add_data_key(DataKeyRecord("t1", 1, b"k1", "root-a", AT))
    store.add_data_key(DataKeyRecord("t1", 2, b"k2", "root-a", AT))
    store.add_data_key(DataKeyRecord("t2", 1, b"other", "root-a", AT))
    assert store.shred_data_keys("t1") == 2
    assert store.shred_data_keys("t1") == 0  # once
    assert store.shred_data_keys("nobody") == 0
    for version in (1, 2):
        shredded = store.data_key("t1", version)
        assert shredded is not None
        assert (shredded.wrapped, shredded.root_id) == (b"", SHREDDED)
    assert store.data_key("t1") == store.data_key("t1", 2)
    assert store.data_key("t2") == DataKeyRecord("t2", 1, b"other", "root-a", AT)
    assert not store.rewrap_data_key("t1", 1, "root-a", b"x", "root-b")


def test_scrubbing_keeps_every_data_key_as_it_was(store: Store) -> None:
    """The scrub after a shred writes the table anew (SQLite) or vacuums it (PostgreSQL):
    every row, shredded or not, reads back unchanged, and a key added after it too."""
    for i in range(50):
        store.add_data_key(DataKeyRecord(f"t{i:02d}", 1, bytes([i]) * 61, "root-a", AT))
    store.add_data_key(DataKeyRecord("t07", 2, b"v2", "root-b", AT + timedelta(seconds=1)))
    store.shred_data_keys("t03")
    before = store.list_data_keys()
    remains = store.scrub_data_keys()
    assert store.list_data_keys() == before
    if store.url.startswith("postgres"):  # what no vacuum removes is named
        assert len(remains) == 1 and "write-ahead log" in remains[0]
    else:
        assert remains == []
    store.add_data_key(DataKeyRecord("t99", 1, b"after", "root-a", AT))
    assert store.data_key("t99") == DataKeyRecord("t99", 1, b"after", "root-a", AT)
    assert store.data_key("t07") == before[8]
