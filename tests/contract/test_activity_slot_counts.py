"""Contract: the per-key count of activity slot rows a gate reads (SQLite: a row kept by
triggers, migration 34; PostgreSQL: signed tally rows appended by statement triggers and
folded by the gate, migration 37) always equals the rows themselves, however slots are
taken (an upsert that finds its row counts nothing), released by steps, given back, or
deleted stale, by several connections at once."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import make_store
from tests.contract.test_store_fair_claim import start

from wovyr.store.base import ClaimAsk, CommitOutcome, StepWrite, Store
from wovyr.store.flow import FlowAcquire, SlotClaim

T0 = datetime(2030, 1, 1, tzinfo=UTC)
KEYS = ("a", "b", "c")


def counted(store: Any, kind: str) -> tuple[dict[str, int], dict[str, int]]:
    """(what the count says, the rows) per key."""
    if kind == "sqlite":
        with store._write() as conn:
            says = dict(conn.execute("SELECT key, n FROM activity_slot_counts").fetchall())
            rows = dict(
                conn.execute("SELECT key, count(*) FROM activity_slots GROUP BY key").fetchall()
            )
        return says, rows

    def read(conn: Any) -> tuple[dict[str, int], dict[str, int]]:
        says = dict(
            conn.execute(
                "SELECT key, sum(n)::int FROM activity_slot_tally GROUP BY key HAVING sum(n) <> 0"
            ).fetchall()
        )
        rows = dict(
            conn.execute("SELECT key, count(*)::int FROM activity_slots GROUP BY key").fetchall()
        )
        return says, rows

    result: tuple[dict[str, int], dict[str, int]] = store._run(read, write=False)
    return result


def step(store: Store, name: str, released: list[tuple[str, str]]) -> StepWrite:
    record = store.load(name, "t")
    assert record is not None
    return StepWrite(
        execution_id=name,
        expected_seq=record.seq,
        events=[],
        checkpoint={},
        status="running",
        updated_at=T0,
        fence=record.fence,
        tenant="t",
        flow_released=released,
    )


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_counts_follow_the_rows(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    url = request.getfixturevalue("migrated_postgres_url") if kind == "postgres" else None
    stores = [make_store(kind, tmp_path, url) for _ in range(3)]
    try:
        names = [f"e{i}" for i in range(12)]
        for name in names:
            start(stores[0], "t", name, T0)
        assert len(stores[0].claim(ClaimAsk("W", T0, 3600, len(names)))) == len(names)
        errors: list[BaseException] = []

        def work(store: Store, mine: list[str]) -> None:
            try:
                for rnd in range(8):  # takes (and a retake: the upsert path), then releases
                    asks = [
                        FlowAcquire(
                            "t",
                            n,
                            "W",
                            T0,
                            slots=[SlotClaim(k, f"{n}/{k}/{rnd}", 1000) for k in KEYS],
                        )
                        for n in mine
                    ]
                    assert all(a.granted for a in store.acquire_flows(asks))
                    assert all(a.granted for a in store.acquire_flows(asks[:1]))
                    if rnd % 3 != 2:  # some rounds leave their slots held
                        for n in mine:
                            released = [(k, f"{n}/{k}/{rnd}") for k in KEYS]
                            assert store.commit([step(store, n, released)]) == [CommitOutcome.OK]
            except BaseException as exc:
                errors.append(exc)

        threads = [
            threading.Thread(target=work, args=(s, names[i::3])) for i, s in enumerate(stores)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert not errors, errors
        says, rows = counted(stores[0], kind)
        assert rows == dict.fromkeys(KEYS, 12 * 2)  # rounds 2 and 5 of each execution held
        assert says == rows
        # the leases expired: a key that could be full has its holders read, and the stale
        # rows (all of them) deleted
        later = datetime(2031, 1, 1, tzinfo=UTC)
        slot = SlotClaim("a", "e0/a/new", 20)
        answer = stores[0].acquire_flow(FlowAcquire("t", "e0", "W", later, slots=[slot]))
        assert answer.granted
        says, rows = counted(stores[0], kind)
        assert rows["a"] == 1 and says == rows
    finally:
        for s in stores:
            s.close()
