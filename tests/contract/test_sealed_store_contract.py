"""The store contract again, through a `SealingStore` whose every tenant of these tests
seals its payloads (SQLite, PostgreSQL): sealing changes what is stored, never what
a store answers. The rows below hold the sealed form (checked here once per store)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from tests.conftest import STORE_KINDS, make_store
from tests.contract import test_store_continued as continued
from tests.contract import test_store_contract as contract
from tests.contract.test_store_continued import *  # noqa: F403 - the same tests, sealed
from tests.contract.test_store_contract import *  # noqa: F403
from tests.contract.test_store_gated_commit import *  # noqa: F403
from tests.contract.test_store_hooks import *  # noqa: F403

from wovyr.engine.tenants import set_sealing
from wovyr.platform.kms import Kms, RootKey
from wovyr.platform.payloads import sealed_store
from wovyr.platform.secrets import Secrets
from wovyr.store.base import CommitOutcome, NewExecution, StepWrite, Store
from wovyr.store.capabilities import capabilities, contract_methods
from wovyr.store.sealing import FORWARDED, PLAIN_METHODS, SEALED_METHODS, SealingStore

TENANTS = ("default", "a", "b", "c", "t", "t1", "other")

# It counts the tenant rows, and this module's fixture writes one per tenant above.
del test_tenant_settings_are_kept_per_tenant_and_replaced_whole  # noqa: F821


@pytest.fixture(params=STORE_KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    url = request.getfixturevalue("migrated_postgres_url") if request.param == "postgres" else None
    inner = make_store(request.param, tmp_path, url)
    sealed = sealed_store(inner, Secrets(inner, Kms(RootKey(b"\x11" * 32), "production")))
    for tenant in TENANTS:
        set_sealing(sealed, tenant, True, by="test", at=contract.T0)
    yield sealed
    inner.close()


def test_every_contract_method_is_declared_sealed_or_plain_once() -> None:
    """A method added to the store contract fails here until it is declared: whether a
    tenant's payloads pass through it decides whether it is sealed, never a default."""
    contract = set(contract_methods())
    assert not SEALED_METHODS & PLAIN_METHODS
    assert sorted(contract - (SEALED_METHODS | PLAIN_METHODS)) == []  # undeclared
    assert sorted((SEALED_METHODS | PLAIN_METHODS) - contract) == []  # declared, not in it
    # every sealed method is the sealing store's own; nothing reaches the inner store by name
    assert set(vars(SealingStore)) >= SEALED_METHODS
    assert not hasattr(SealingStore, "__getattr__")


def test_plain_methods_are_the_inner_stores_and_capabilities_pass_through(
    store: Store,
) -> None:
    assert isinstance(store, SealingStore)
    for name in FORWARDED:
        assert getattr(store, name) == getattr(store.inner, name), name
    inner, outer = capabilities(store.inner), capabilities(store)
    # timer locking goes through the sealing store (the steps it writes carry payloads)
    assert (outer.timer_locking is store) == (inner.timer_locking is not None)
    assert outer.migrations is inner.migrations and outer.snapshots is inner.snapshots
    assert outer.membership is inner.membership
    assert outer.notifications is inner.notifications
    assert outer.event_partitions is inner.event_partitions


def test_what_the_store_below_holds_is_sealed(store: Store) -> None:
    assert isinstance(store, SealingStore)
    contract.create(store, "x1")
    raw = store.inner.load("x1", "default")
    assert raw is not None
    assert list(raw.input) == ["$sealed"] and list(raw.checkpoint or {}) == ["$sealed"]
    assert [list(e.data) for e in store.inner.history("x1", tenant="default")] == [["$sealed"]]
    opened = store.load("x1", "default")
    assert opened is not None and opened.input == {"x": 1} and opened.checkpoint == {"seq": 1}


def test_observers_are_told_once_and_in_plain(store: Store) -> None:
    seen: list[tuple[str, object]] = []

    class Observer:
        def created(self, new: NewExecution) -> None:
            seen.append(("created", new.input))

        def committed(self, steps: Sequence[StepWrite], outcomes: Sequence[object]) -> None:
            seen.extend(("committed", dict(e.data)) for s in steps for e in s.events)

        def claimed(self, claims: Sequence[object]) -> None:
            seen.append(("claimed", len(claims)))

    store.add_observer(Observer())
    store.create_execution(continued._new("r1"))
    assert store.commit([continued._hand_over("r1", 2, "r2")]) == [CommitOutcome.OK]
    assert seen == [
        ("created", {"n": 1}),
        ("committed", {"seq": 2}),
        ("created", {"n": 1}),  # the continued run, once
    ]
    raw = store.inner.load("r2", "t1")  # type: ignore[attr-defined]
    assert raw is not None and list(raw.input) == ["$sealed"]


def test_a_sealed_checkpoint_is_written_whole_never_as_plain_deltas(store: Store) -> None:
    from tests.contract import test_checkpoint_deltas as deltas

    assert isinstance(store, SealingStore)
    now = deltas._started(store, "w1", 4)
    raw = store.inner.load("w1", "default")
    assert raw is not None and list(raw.checkpoint or {}) == ["$sealed"]
    assert deltas._parts(store.inner, "w1") in (None, 0, 1)  # at most the sealed base
    opened = store.load("w1", "default")
    assert opened is not None and opened.checkpoint == now
