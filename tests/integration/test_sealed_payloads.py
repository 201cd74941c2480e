"""Sealed execution payloads (a tenant's `seal_payloads`): a canary in a sealed tenant's
inputs, an activity's output and a signal's payload is read back right through the engine,
and is absent - plain, base64, JSON-escaped - from the SQLite file and WAL and from the
PostgreSQL rows; an unsealed tenant's run is stored as before; after a shred the sealed
tenant's payloads read as the marker, its running executions are failed, and the other
tenant's are untouched."""

from __future__ import annotations

import base64
import json
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import make_store

from wovyr.activities.base import ActivityRegistry
from wovyr.clock import ManualClock
from wovyr.engine.engine import Engine
from wovyr.engine.tenants import set_sealing
from wovyr.errors import ExecutionFinished, KmsError
from wovyr.events import Event
from wovyr.platform.kms import Kms, RootKey
from wovyr.platform.payloads import sealed_store, shred_tenant_payloads
from wovyr.platform.secrets import Secrets, shred_tenant
from wovyr.scheduling.schedules import Schedules
from wovyr.store.base import CommitOutcome, StepWrite, Store
from wovyr.store.sealing import SHREDDED_MARKER, SealingStore
from wovyr.testing import drain

ROOT = bytes.fromhex("5a" * 32)
SEALED, PLAIN = "sealed-co", "plain-co"
CANARY = 'cnry-9d2e71/+"x-c4n4ry'
OTHER = 'oth3r-40b2c8/+"x-plain'

FLOW = textwrap.dedent(
    """\
    apiVersion: wovyr/v1
    kind: Workflow
    metadata: {name: canary}
    inputs:
      word: {type: string}
    activities:
      - id: echo
        tool: echo
        with: {text: "${{ inputs.word }}"}
      - id: gate
        needs: [echo]
        wait: {signal: go}
    output:
      echoed: "${{ activities.echo.output }}"
      signalled: "${{ activities.gate.output }}"
    """
)


def forms(value: str) -> list[str]:
    raw = value.encode()
    return [
        value,
        base64.b64encode(raw).decode().rstrip("="),
        base64.urlsafe_b64encode(raw).decode().rstrip("="),
        json.dumps(value)[1:-1],
        value[:10],  # its plain head, however the rest was escaped
    ]


def found_in(data: bytes, value: str = CANARY) -> list[str]:
    return [f for f in forms(value) if f.encode() in data]


def make_registry() -> ActivityRegistry:
    registry = ActivityRegistry()

    @registry.activity("echo")
    def echo(text: str) -> str:
        return f"out:{text}"

    return registry


class Setup:
    def __init__(self, inner: Store, root: bytes = ROOT) -> None:
        self.inner = inner
        self.secrets = Secrets(inner, Kms(RootKey(root), "production"))
        self.store = sealed_store(inner, self.secrets)
        self.clock = ManualClock(datetime(2030, 1, 1, 9, 0, tzinfo=UTC))
        self.engine = Engine(
            self.store, clock=self.clock, activities=make_registry(), secrets=self.secrets
        )

    def tenant(self, name: str) -> Engine:
        return self.engine.for_tenant(name)


def run_both(setup: Setup, words: dict[str, str] | None = None) -> dict[str, str]:
    """Start the flow in both tenants, drive it to the signal, signal, finish: the ids."""
    ids = {}
    for tenant in (SEALED, PLAIN):
        word = (words or {}).get(tenant, CANARY)
        engine = setup.tenant(tenant)
        ids[tenant] = engine.start(FLOW, {"word": word}).id
        drain(engine)
        engine.signal(ids[tenant], "go", {"note": word})
        drain(engine)
    return ids


def check_readable(setup: Setup, tenant: str, execution_id: str, word: str = CANARY) -> None:
    engine = setup.tenant(tenant)
    view = engine.query(execution_id)
    assert view.status == "completed"
    assert view.input == {"word": word}
    assert view.output == {"echoed": f"out:{word}", "signalled": {"note": word}}
    assert view.activities["echo"]["output"] == f"out:{word}"
    record = engine.get(execution_id)
    assert record.input == {"word": word}
    assert record.output == view.output
    listed = engine.list().items
    assert [r.output for r in listed if r.id == execution_id] == [view.output]
    signalled = [e.data for e in engine.history(execution_id) if e.type == "SignalReceived"]
    assert signalled and signalled[0]["payload"] == {"note": word}


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def setup(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Setup]:
    url = request.getfixturevalue("migrated_postgres_url") if kind == "postgres" else None
    inner = make_store(kind, tmp_path, url)
    s = Setup(inner)
    set_sealing(s.store, SEALED, True, by="test", at=s.clock.now())
    yield s
    inner.close()


def raw_bytes(setup: Setup, tenant: str, tmp_path: Path) -> bytes:
    """What the database holds of `tenant`: the SQLite file and its WAL (every tenant's:
    the canary must be absent from all of it), or the raw PostgreSQL columns of its rows."""
    if setup.store.url.startswith("sqlite"):
        return b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("wovyr.db"))
    inner: Any = setup.inner
    with inner._pool.connection() as conn:
        rows = conn.execute(
            "SELECT input::text, output::text, error::text, checkpoint::text FROM executions"
            " WHERE tenant = %s",
            (tenant,),
        ).fetchall()
        rows += conn.execute(
            "SELECT data::text, '', '', '' FROM events WHERE tenant = %s", (tenant,)
        ).fetchall()
    return "\n".join("\t".join(str(c) for c in row) for row in rows).encode()


def test_a_sealed_tenants_payloads_read_back_and_are_not_stored_plain(
    setup: Setup, tmp_path: Path
) -> None:
    ids = run_both(setup, {SEALED: CANARY, PLAIN: OTHER})
    check_readable(setup, SEALED, ids[SEALED])
    check_readable(setup, PLAIN, ids[PLAIN], OTHER)
    stored = raw_bytes(setup, SEALED, tmp_path)
    assert stored, "nothing was read from the database"
    assert found_in(stored) == []
    # the unsealed tenant's run is in the same database, plain: the search does find it
    assert found_in(raw_bytes(setup, PLAIN, tmp_path), OTHER)
    # the raw row holds the sealed form, with the columns the engine queries plain
    raw = setup.inner.load(ids[SEALED], SEALED)
    assert (
        raw is not None
        and set(raw.input) == {"$sealed"}
        and set(raw.checkpoint or {}) == {"$sealed"}
    )
    assert (raw.status, raw.workflow, raw.id) == ("completed", "canary", ids[SEALED])
    events = setup.inner.history(ids[SEALED], tenant=SEALED)
    assert events and all(set(e.data) == {"$sealed"} for e in events)
    assert "SignalReceived" in [e.type for e in events]  # event types stay plain


def test_an_unsealed_tenant_is_stored_as_before(setup: Setup, tmp_path: Path) -> None:
    ids = run_both(setup)
    check_readable(setup, PLAIN, ids[PLAIN])
    check_readable(setup, SEALED, ids[SEALED])
    raw = setup.inner.load(ids[PLAIN], PLAIN)
    assert raw is not None and raw.input == {"word": CANARY}  # plain, as before
    assert found_in(raw_bytes(setup, PLAIN, tmp_path))


def test_after_a_shred_sealed_payloads_read_as_the_marker(setup: Setup) -> None:
    ids = run_both(setup)
    sealed_engine = setup.tenant(SEALED)
    waiting = sealed_engine.start(FLOW, {"word": CANARY}).id
    other_waiting = setup.tenant(PLAIN).start(FLOW, {"word": CANARY}).id
    drain(setup.engine.for_tenant(SEALED))
    drain(setup.engine.for_tenant(PLAIN))
    assert sealed_engine.query(waiting).status == "waiting"

    at = setup.clock.now()
    shredded = shred_tenant_payloads(setup.store, SEALED, by="test", at=at)
    assert (shredded.destroyed, shredded.executions_failed) == (1, 1)

    done = sealed_engine.query(ids[SEALED])
    assert done.status == "completed"  # ids, names, statuses and times stay readable
    assert done.input == {"sealed": SHREDDED_MARKER}
    assert done.output == {"sealed": SHREDDED_MARKER}
    record = sealed_engine.get(ids[SEALED])
    assert record.input == SHREDDED_MARKER and record.output == SHREDDED_MARKER
    history = sealed_engine.history(ids[SEALED])
    assert history and all(e.data == {"sealed": SHREDDED_MARKER} for e in history)
    # what each activity did was in the sealed checkpoint: they all read as never run
    # (docs/security.md says so); the events' types and times still tell what happened
    assert {a["status"] for a in done.activities.values()} == {"pending"}
    assert [e.type for e in history].count("ActivityCompleted") == len(done.activities)
    assert {r.input for r in sealed_engine.list().items} == {SHREDDED_MARKER}

    # the waiting one cannot run on: failed, and a signal is refused as for any ended run
    failed = sealed_engine.query(waiting)
    assert failed.status == "failed"
    assert failed.error is not None and failed.error["type"] == "PayloadUnreadable"
    assert failed.error["message"] == SHREDDED_MARKER
    with pytest.raises(ExecutionFinished):
        sealed_engine.signal(waiting, "go", {"note": "late"})

    # the other tenant: untouched, readable, and its waiting run goes on
    check_readable(setup, PLAIN, ids[PLAIN])
    plain = setup.tenant(PLAIN)
    plain.signal(other_waiting, "go", {"note": CANARY})
    drain(plain)
    assert plain.query(other_waiting).output == {
        "echoed": f"out:{CANARY}",
        "signalled": {"note": CANARY},
    }

    # the sealed tenant starts afresh (a new data key) for what it runs next
    fresh = sealed_engine.start(FLOW, {"word": "after"}).id
    drain(sealed_engine)
    sealed_engine.signal(fresh, "go", 1)
    drain(sealed_engine)
    assert sealed_engine.query(fresh).output == {"echoed": "out:after", "signalled": 1}


def test_a_claim_fails_a_run_whose_sealed_checkpoint_no_longer_opens(setup: Setup) -> None:
    engine = setup.tenant(SEALED)
    rid = engine.start(FLOW, {"word": CANARY}).id  # ready, not yet run
    shred_tenant(setup.inner, SEALED, by="test", at=setup.clock.now())
    assert isinstance(setup.store, SealingStore)
    setup.store.sealer.forget(SEALED)  # type: ignore[attr-defined]
    drain(engine)  # the claim meets it: failed, not run
    view = engine.query(rid)
    assert view.status == "failed" and view.error is not None
    assert view.error["message"] == SHREDDED_MARKER
    assert view.activities["echo"]["status"] == "pending"


def test_another_process_reads_with_the_same_root_key_and_not_with_another(
    setup: Setup, kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    ids = run_both(setup)
    url = request.getfixturevalue("migrated_postgres_url") if kind == "postgres" else None
    second = Setup(make_store(kind, tmp_path, url))  # a second opening of the same store
    try:
        check_readable(second, SEALED, ids[SEALED])
    finally:
        second.inner.close()
    wrong = Setup(make_store(kind, tmp_path, url), root=bytes.fromhex("a5" * 32))
    try:
        with pytest.raises(KmsError, match="root key"):
            wrong.tenant(SEALED).query(ids[SEALED])
        check_readable(wrong, PLAIN, ids[PLAIN])  # nothing else breaks
        # its worker leaves the sealed tenant's ready run alone and runs the other's
        ready = setup.tenant(SEALED).start(FLOW, {"word": CANARY}).id
        other = setup.tenant(PLAIN).start(FLOW, {"word": CANARY}).id
        drain(wrong.engine)
        assert wrong.tenant(PLAIN).query(other).status == "waiting"
        assert wrong.tenant(PLAIN).query(other).activities["echo"]["output"] == f"out:{CANARY}"
        left = setup.inner.load(ready, SEALED)
        assert left is not None and (left.status, left.seq) == ("running", 1)  # not run
    finally:
        wrong.inner.close()


def test_a_run_a_schedule_starts_is_sealed_too(setup: Setup) -> None:
    engine = setup.tenant(SEALED)
    engine.apply(FLOW)
    schedules = Schedules(engine)
    schedules.create("nightly", workflow="canary", every="15m", input={"word": CANARY})
    setup.clock.set(datetime(2030, 1, 1, 9, 15, tzinfo=UTC))
    drain(engine)
    (rid,) = [r.id for r in engine.list().items]
    raw = setup.inner.load(rid, SEALED)
    assert raw is not None and set(raw.input) == {"$sealed"}
    assert engine.query(rid).input == {"word": CANARY}
    assert engine.query(rid).activities["echo"]["output"] == f"out:{CANARY}"


TIMER_FLOW = FLOW.replace("wait: {signal: go}", "wait: {timer: {after: 1h}}").replace(
    "name: canary", "name: later"
)


def test_a_sealed_run_waits_on_a_timer_and_goes_on(setup: Setup) -> None:
    """Timers fire through the store (on PostgreSQL, in one locked transaction that loads
    the executions and writes their steps): sealed in, sealed out."""
    engine = setup.tenant(SEALED)
    rid = engine.start(TIMER_FLOW, {"word": CANARY}).id
    drain(engine)
    assert engine.query(rid).status == "waiting"
    setup.clock.advance(3601)
    drain(engine)
    view = engine.query(rid)
    assert view.status == "completed" and view.output["echoed"] == f"out:{CANARY}"
    events = setup.inner.history(rid, tenant=SEALED)
    assert "TimerFired" in [e.type for e in events]
    assert all(set(e.data) == {"$sealed"} for e in events)


def test_a_step_in_flight_during_a_shred_is_dropped_not_sealed_again(setup: Setup) -> None:
    """What a worker held in plain when the shred came (its state, a signal it was about
    to write) never reaches the store under a new key: the shred fails the run first, so
    the late step conflicts."""
    engine = setup.tenant(SEALED)
    rid = engine.start(FLOW, {"word": CANARY}).id
    drain(engine)
    held = setup.store.load(rid, SEALED)  # the worker's plain copy
    assert held is not None and held.checkpoint is not None
    at = setup.clock.now()
    shredded = shred_tenant_payloads(setup.store, SEALED, by="test", at=at)
    assert (shredded.destroyed, shredded.executions_failed) == (1, 1)
    late = StepWrite(
        execution_id=rid,
        expected_seq=held.seq,
        events=[Event("SignalReceived", at, {"name": "go", "payload": CANARY})],
        checkpoint=held.checkpoint,
        status="running",
        updated_at=at,
        ready=True,
        tenant=SEALED,
    )
    assert setup.store.commit([late]) == [CommitOutcome.CONFLICT]
    assert engine.query(rid).status == "failed"
    assert all(e.data.get("payload") != CANARY for e in engine.history(rid))


def test_a_sealed_tenants_streamed_text_is_sealed_and_shredded_with_it(
    setup: Setup, tmp_path: Path
) -> None:
    """The stream journal holds what a model streamed: a payload like the answer it becomes."""
    from wovyr.store.streams import NewChunk, StreamAppend

    ids = {t: setup.tenant(t).start(FLOW, {"word": "w"}).id for t in (SEALED, PLAIN)}
    pieces = {SEALED: [CANARY[:12], CANARY[12:]], PLAIN: [OTHER[:12], OTHER[12:]]}
    for tenant, execution_id in ids.items():
        record = setup.store.load(execution_id, tenant)
        assert record is not None
        chunks = [NewChunk("ask", 1, 1, "attempt")] + [
            NewChunk("ask", 1, 1, "text", piece) for piece in pieces[tenant]
        ]
        now = setup.clock.now()
        assert setup.store.append_stream(
            StreamAppend(tenant, execution_id, record.fence, chunks, now)
        )
    for tenant, execution_id in ids.items():
        read = setup.store.read_stream(tenant, execution_id)
        assert "".join(c.text for c in read) == "".join(pieces[tenant])
    raw = setup.inner.read_stream(SEALED, ids[SEALED])
    assert all(c.text.startswith("\x1e$sealed:") for c in raw if c.kind == "text")
    assert not any(CANARY[:12] in c.text or CANARY[12:] in c.text for c in raw)
    assert "".join(c.text for c in setup.inner.read_stream(PLAIN, ids[PLAIN])) == OTHER

    shred_tenant_payloads(setup.store, SEALED, by="test", at=setup.clock.now())
    texts = [c.text for c in setup.store.read_stream(SEALED, ids[SEALED]) if c.kind == "text"]
    assert texts == [f"[{SHREDDED_MARKER}]"] * 2
    assert "".join(c.text for c in setup.store.read_stream(PLAIN, ids[PLAIN])) == OTHER
