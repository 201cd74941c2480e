"""Model-based test: random interleavings of workers, clients, crashes and time, per store.

A hypothesis `RuleBasedStateMachine` drives one store (SQLite, PostgreSQL) through
start / claim / heartbeat / finish an attempt / commit a step / crash a worker / advance the
ManualClock / fire timers / restart (a new Engine; SQLite and PostgreSQL reopened) /
signal / cancel. Workers are modelled the way `ExecutionRunner` works: they fold attempt
outcomes, `decide`, and commit one `StepWrite` fenced by their claim; they can crash at any
point, losing their in-memory state but not their lease.

The model keeps what the store's lease columns must say (owner, fence, lease_until) and
checks after every step:

- the lease columns equal the model (a claim takes only expired leases and bumps the fence;
  a heartbeat renews exactly the owner's leases; a finishing step releases it);
- a claim returns exactly the ready executions whose lease has expired: never one with a
  live lease (there is one lease column, so "two live leases" means two claims of one live
  lease), and a commit is OK only under the current fence (a stale owner gets LEASE_LOST):
  two workers never both commit under one fence;
- completed, failed and cancelled are final: the status never changes afterwards, and a
  finished execution is never ready;
- the checkpoint is exactly the fold of the events (`state_to_json` of both, compared as
  JSON), and `seq` is the number of events.

Each run ends (teardown) with the crashes stopped: every lease expires, the signal the
workflow waits for is sent and a real worker drains the store; every execution must then
be finished, and the invariants hold once more.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from tests.chaos.invariants import assert_checkpoint_is_fold
from tests.conftest import STORE_KINDS
from tests.pg_schemas import truncate_written

from wovyr.activities.base import ActivityRegistry
from wovyr.clock import ManualClock
from wovyr.definition.parse import load_definition
from wovyr.engine.core.decide import Outcome, RunActivity, decide, outcome_events
from wovyr.engine.core.state import ActivityStatus, ExecutionState, fold, state_from_json
from wovyr.engine.engine import Engine
from wovyr.engine.steps import make_step
from wovyr.errors import ExecutionFinished
from wovyr.store.base import ClaimAsk, CommitOutcome, Store
from wovyr.testing import drain

# model-based runs of every store: CI runs it; the fast tier (-m 'not slow') leaves it out.
pytestmark = pytest.mark.slow

MODEL = """\
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: model}
activities:
  - {id: a, tool: work, retry: {max_attempts: 3, initial_interval: 10s}}
  - {id: gate, needs: [a], wait: {signal: go}}
  - {id: b, needs: [gate], tool: work, retry: {max_attempts: 3, initial_interval: 0s}}
output: {b: "${{ activities.b.output }}"}
"""
WORKFLOW = load_definition(MODEL)
WORKERS = ("w0", "w1", "w2")
LEASE = 30.0
MAX_EXECUTIONS = 4
TERMINAL = ("completed", "failed", "cancelled")
STEPS_RUN: list[int] = []  # one entry per rule run, across every store and example


@dataclass
class Held:
    """What one worker holds in memory for one execution it claimed."""

    fence: int
    state: ExecutionState
    in_flight: dict[str, RunActivity] = field(default_factory=dict)
    results: list[tuple[RunActivity, Outcome]] = field(default_factory=list)


@dataclass
class Lease:
    """What the execution row's lease columns must hold."""

    owner: str | None
    fence: int
    until: datetime | None


def _registry() -> ActivityRegistry:
    registry = ActivityRegistry()
    registry.register("work", lambda: {"ok": True})
    return registry


class StoreMachine(RuleBasedStateMachine):
    """One store kind; subclasses set `kind` (and where the store lives)."""

    kind: ClassVar[str] = "sqlite"
    workdir: ClassVar[Path]
    postgres_url: ClassVar[str | None] = None

    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock(datetime(2030, 1, 1, tzinfo=UTC))
        self.path = Path(tempfile.mkdtemp(dir=self.workdir)) / "model.db"
        self.store = self._open(fresh=True)
        self.engine = Engine(self.store, clock=self.clock, activities=_registry())
        self.ids: list[str] = []
        self.leases: dict[str, Lease] = {}
        self.held: dict[str, dict[str, Held]] = {w: {} for w in WORKERS}
        self.final: dict[str, str] = {}

    # --- the store ---------------------------------------------------------------------

    def _open(self, *, fresh: bool = False) -> Store:
        if self.kind == "sqlite":
            from wovyr.store.sqlite import SQLiteStore

            return SQLiteStore(self.path)
        from wovyr.store.postgres import PostgresStore

        assert self.postgres_url is not None
        store = PostgresStore(self.postgres_url, db_clock=False, min_size=1, max_size=2)
        if fresh:
            store._run(_truncate_all, write=True)
        return store

    def _close(self) -> None:
        self.store.close()

    def now(self) -> datetime:
        return self.clock.now()

    # --- clients -----------------------------------------------------------------------

    @precondition(lambda self: len(self.ids) < MAX_EXECUTIONS)
    @rule()
    def start(self) -> None:
        STEPS_RUN.append(1)
        execution_id = f"m{len(self.ids)}"
        record = self.engine.start(MODEL, execution_id=execution_id)
        assert (record.lease_owner, record.fence, record.ready) == (None, 0, True)
        self.ids.append(execution_id)
        self.leases[execution_id] = Lease(None, 0, None)

    @precondition(lambda self: len(self.ids) < MAX_EXECUTIONS)
    @rule(worker=st.sampled_from(WORKERS))
    def start_leased(self, worker: str) -> None:
        """A start driven by `worker` at once: the first attempts ride in the start commit."""
        STEPS_RUN.append(1)
        execution_id = f"m{len(self.ids)}"
        record = self.engine.start(
            MODEL, execution_id=execution_id, lease_owner=worker, lease_seconds=LEASE
        )
        assert (record.lease_owner, record.fence) == (worker, 1)
        self.ids.append(execution_id)
        self.leases[execution_id] = Lease(worker, 1, self.now() + timedelta(seconds=LEASE))
        state = state_from_json(record.checkpoint or {})
        held = Held(1, state)
        for aid, act in state.activities.items():  # adopted: ours to run
            if act.status == ActivityStatus.RUNNING:
                kind = WORKFLOW.activity(aid).kind
                held.in_flight[aid] = RunActivity(aid, act.attempt, kind, act.input)
        self.held[worker][execution_id] = held

    @precondition(lambda self: bool(self.ids))
    @rule(data=st.data(), payload=st.integers(0, 3))
    def signal(self, data: st.DataObject, payload: int) -> None:
        STEPS_RUN.append(1)
        execution_id = data.draw(st.sampled_from(self.ids))
        before = self.store.load(execution_id, "default")
        assert before is not None
        try:
            self.engine.signal(execution_id, "go", payload)
        except ExecutionFinished:
            assert before.status in TERMINAL
        else:
            assert before.status not in TERMINAL

    @precondition(lambda self: bool(self.ids))
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        STEPS_RUN.append(1)
        execution_id = data.draw(st.sampled_from(self.ids))
        before = self.store.load(execution_id, "default")
        assert before is not None
        try:
            view = self.engine.cancel(execution_id, reason="model")
        except ExecutionFinished:
            assert before.status in TERMINAL
        else:
            assert view.status == "cancelled"
            after = self.store.load(execution_id, "default")
            assert after is not None and after.status == "cancelled" and not after.ready

    @rule(seconds=st.sampled_from([1, 11, 31, 61]))
    def advance_clock(self, seconds: int) -> None:
        STEPS_RUN.append(1)
        self.clock.advance(seconds)

    @precondition(lambda self: self._timer_due())
    @rule()
    def fire_timers(self) -> None:
        STEPS_RUN.append(1)
        self.engine.fire_due_timers()

    def _timer_due(self) -> bool:
        due = self.store.next_timer_at() if self.ids else None
        return due is not None and due <= self.now()

    # --- workers -----------------------------------------------------------------------

    @rule(worker=st.sampled_from(WORKERS))
    def claim(self, worker: str) -> None:
        STEPS_RUN.append(1)
        now = self.now()
        ready = {i: r.ready for i in self.ids if (r := self.store.load(i, "default"))}
        claimable = {
            i
            for i in self.ids
            if ready[i] and (self.leases[i].until is None or self.leases[i].until < now)
        }
        claims = self.store.claim(ClaimAsk(worker, now, LEASE, 10))
        assert {c.execution_id for c in claims} == claimable, "claimed a live lease, or missed"
        for c in claims:
            lease = self.leases[c.execution_id]
            assert c.fence == lease.fence + 1, "a claim must bump the fence"
            self.leases[c.execution_id] = Lease(worker, c.fence, now + timedelta(seconds=LEASE))
            self.held[worker][c.execution_id] = Held(c.fence, state_from_json(c.checkpoint))
        for c in claims:  # a runner's first turn follows its claim at once
            if c.execution_id in self.held[worker]:
                self._turn(worker, c.execution_id)

    @rule(worker=st.sampled_from(WORKERS))
    def heartbeat(self, worker: str) -> None:
        STEPS_RUN.append(1)
        now = self.now()
        renewed = self.store.renew_leases(worker, now, LEASE)
        owned = {i for i, lease in self.leases.items() if lease.owner == worker}
        assert {i for _, i in renewed} == owned, "a heartbeat renews exactly the owner's leases"
        for (_, execution_id), got in renewed.items():
            lease = self.leases[execution_id]
            assert got.fence == lease.fence
            lease.until = now + timedelta(seconds=LEASE)
        for execution_id, held in list(self.held[worker].items()):
            got = renewed.get(execution_id)
            if got is None or got.fence != held.fence:  # taken over: the runner stops
                del self.held[worker][execution_id]

    @precondition(lambda self: any(self.held.values()))
    @rule(data=st.data())
    def worker_turn(self, data: st.DataObject) -> None:
        """One turn of a runner's loop: fold the results in, decide, commit under our fence."""
        STEPS_RUN.append(1)
        pairs = sorted((w, i) for w, hs in self.held.items() for i in hs)
        self._turn(*data.draw(st.sampled_from(pairs)))

    @precondition(lambda self: any(h.in_flight for w in self.held.values() for h in w.values()))
    @rule(data=st.data(), ok=st.booleans())
    def attempt_returns(self, data: st.DataObject, ok: bool) -> None:
        """An attempt running in a worker succeeds or fails; the worker takes its turn."""
        STEPS_RUN.append(1)
        choices = sorted(
            (w, i, key) for w, hs in self.held.items() for i, h in hs.items() for key in h.in_flight
        )
        worker, execution_id, key = data.draw(st.sampled_from(choices))
        held = self.held[worker][execution_id]
        run = held.in_flight.pop(key)
        outcome = Outcome(output={"ok": True}) if ok else Outcome(error={"type": "Boom"})
        held.results.append((run, outcome))
        self._turn(worker, execution_id)

    def _turn(self, worker: str, execution_id: str) -> None:
        held = self.held[worker][execution_id]
        now = self.now()
        working, events = held.state, []
        for run, outcome in held.results:
            produced = outcome_events(WORKFLOW, working, run, outcome, now)
            working = fold(produced, working)
            events.extend(produced)
        decision = decide(WORKFLOW, working, now, frozenset(held.in_flight))
        assert decision.state is not None
        events.extend(decision.events)
        done = not held.in_flight and not decision.runs
        if not events and not done:
            return
        step = make_step(
            execution_id,
            held.state,
            decision.state,
            events,
            now,
            tenant="default",
            fence=held.fence,
            ready=not done,
            release_lease=done,
        )
        [result] = self.store.commit([step])
        lease = self.leases[execution_id]
        if result is CommitOutcome.OK:
            assert lease.fence == held.fence, "a stale fence committed"
            held.state, held.results = decision.state, []
            for run in decision.runs:
                held.in_flight[run.key] = run
            if done:
                lease.owner, lease.until = None, None
                del self.held[worker][execution_id]
            elif held.state.finished:
                held.in_flight.clear()  # the runner cancels its attempts
        elif result is CommitOutcome.LEASE_LOST:
            assert lease.fence != held.fence, "LEASE_LOST under the current fence"
            del self.held[worker][execution_id]
        else:
            assert result is CommitOutcome.CONFLICT, result
            assert lease.fence == held.fence, "a stale fence must be told LEASE_LOST"
            record = self.store.load(execution_id, "default")
            assert record is not None and record.seq != held.state.seq
            held.state = state_from_json(record.checkpoint or {})
            if held.state.finished:
                held.in_flight.clear()
                held.results.clear()

    @precondition(lambda self: any(self.held.values()))
    @rule(worker=st.sampled_from(WORKERS))
    def crash(self, worker: str) -> None:
        """The worker process dies: its memory is gone, its leases stay until they expire."""
        STEPS_RUN.append(1)
        self.held[worker] = {}

    @precondition(lambda self: bool(self.ids))
    @rule()
    def restart(self) -> None:
        """Every process restarts: a new Engine over the same (reopened) store."""
        STEPS_RUN.append(1)
        self.held = {w: {} for w in WORKERS}
        self._close()
        self.store = self._open()
        self.engine = Engine(self.store, clock=self.clock, activities=_registry())

    @precondition(lambda self: any(lease.owner for lease in self.leases.values()))
    @rule(worker=st.sampled_from(WORKERS))
    def shut_down(self, worker: str) -> None:
        """A graceful stop: the worker releases every lease it owns."""
        STEPS_RUN.append(1)
        released = self.store.release_owner(worker)
        owned = [lease for lease in self.leases.values() if lease.owner == worker]
        assert released == len(owned)
        for lease in owned:
            lease.owner, lease.until = None, None
        self.held[worker] = {}

    # --- invariants --------------------------------------------------------------------

    @invariant()
    def store_matches_the_model(self) -> None:
        for execution_id in self.ids:
            record = self.store.load(execution_id, "default")
            assert record is not None
            lease = self.leases[execution_id]
            assert (record.lease_owner, record.fence) == (lease.owner, lease.fence)
            assert record.lease_until == lease.until, (record.lease_until, lease.until)
            self._check_final(execution_id, record.status, record.ready)
            assert_checkpoint_is_fold(self.store, execution_id)

    def _check_final(self, execution_id: str, status: str, ready: bool) -> None:
        if execution_id in self.final:
            assert status == self.final[execution_id], "a finished execution changed status"
        elif status in TERMINAL:
            self.final[execution_id] = status
        if status in TERMINAL:
            assert not ready, "a finished execution is still queued"

    def teardown(self) -> None:
        try:
            if self.ids:
                self._drain_to_the_end()
        finally:
            self._close()

    def _status(self, execution_id: str) -> str:
        record = self.store.load(execution_id, "default")
        assert record is not None
        return record.status

    def _drain_to_the_end(self) -> None:
        """The crashes stop: every execution finishes, and the invariants still hold."""
        for _ in range(6):
            self.clock.advance(hours=1)  # every lease and retry back-off has expired
            running = [
                i
                for i in self.ids
                if (r := self.store.load(i, "default")) and r.status not in TERMINAL
            ]
            if not running:
                break
            for execution_id in running:
                self.engine.signal(execution_id, "go")
            drain(self.engine)
        for execution_id in self.ids:
            record = self.store.load(execution_id, "default")
            assert record is not None and record.status in TERMINAL, (execution_id, record)
            self._check_final(execution_id, record.status, record.ready)
            assert_checkpoint_is_fold(self.store, execution_id)


def _truncate_all(conn: Any) -> None:
    schema = conn.execute("SELECT current_schema()").fetchone()[0]
    truncate_written(conn, schema)


SETTINGS = {
    "sqlite": settings(max_examples=40, stateful_step_count=40),
    "postgres": settings(max_examples=30, stateful_step_count=40),
}


@pytest.mark.parametrize("kind", STORE_KINDS)
@pytest.mark.timeout(120)
def test_store_model(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    url = request.getfixturevalue("migrated_postgres_url") if kind == "postgres" else None
    machine = type(
        f"{kind.title()}Machine",
        (StoreMachine,),
        {"kind": kind, "workdir": tmp_path, "postgres_url": url},
    )
    before = len(STEPS_RUN)
    run_state_machine_as_test(
        machine,
        settings=settings(
            SETTINGS[kind],
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
    print(f"model test on {kind}: {len(STEPS_RUN) - before} steps")
