"""Drives one execution that this worker holds a lease on.

The loop: fold the results that came in, `decide`, commit the events (results, what they
unblock, and the next attempts' `ActivityStarted`) in ONE step, then start those attempts.
A commit refused for a moved sequence (a signal, a cancel, a fired timer) reloads the state
and tries again with the same results; a lost lease stops everything and commits nothing.

A runner is handed `RunnerServices`, never the engine. Each attempt runs in
`wovyr.worker.attempts` (handed what its kind declares) and comes back as an `Outcome` with
what it used; the commit recording its result debits that from the tenant's budgets.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from wovyr.activities.kinds import Usage
from wovyr.activities.logs import bind
from wovyr.code.workflow import CodeNotLoaded, Driver, driver
from wovyr.definition.expr import PASS_WORK, Costs
from wovyr.definition.model import Workflow
from wovyr.engine.core.bounds import ExecutionBytes, StepBytes
from wovyr.engine.core.decide import Decision, Outcome, RunActivity, decide, outcome_events
from wovyr.engine.core.policy import children_to_cancel
from wovyr.engine.core.state import (
    ActivityStatus,
    ExecutionState,
    ExecutionStatus,
    fold,
    state_from_json,
)
from wovyr.engine.flow import (
    FlowAsk,
    flow_held,
    flow_hold,
    flow_requests,
    gated,
    problem_hold,
)
from wovyr.engine.steps import make_step
from wovyr.events import Event, EventData
from wovyr.store.base import CommitOutcome
from wovyr.store.flow import FlowAcquire, FlowAnswer, GatedOutcome, RateRequest
from wovyr.worker.attempts import Attempts
from wovyr.worker.grants import Grants
from wovyr.worker.outcomes import billed, calls_usage, not_current
from wovyr.worker.services import RunnerServices

if TYPE_CHECKING:
    from wovyr.worker.commit import GroupCommitter

__all__ = ["ExecutionRunner", "RunnerStats"]

log = logging.getLogger("wovyr.worker")
# seconds a worker that lacks a code workflow's function holds its execution (a durable
# timer) before any worker may claim it again
UNLOADED_RETRY = 5.0


@dataclass
class RunnerStats:
    commits: int = 0
    conflicts: int = 0
    attempts: int = 0
    lease_lost: bool = False
    activity_seconds: list[float] = field(default_factory=list)
    yields: int = 0  # decisions stopped at their work limit, to let other steps run


class ExecutionRunner:
    def __init__(
        self,
        services: RunnerServices,
        committer: GroupCommitter,
        execution_id: str,
        fence: int,
        state: ExecutionState,
        definition: Workflow,
        *,
        adopt_running: bool = False,
        owner: str = "",
    ) -> None:
        self.services = services
        self.owner = owner  # the worker holding the lease (activity slots are taken in its name)
        self._gated = gated(definition)
        # a code workflow's function, replayed before each decision (`wovyr.code`), or why
        # this process cannot
        self._code = driver(definition)
        self._grants = Grants()  # slots held and units granted (`wovyr.worker.grants`)
        self._refused: FlowAnswer | None = None  # the last step's gate, refused: hold
        self._handed = 0  # the chain run whose hand-over `continue_hold` admitted (and debited)
        self.committer = committer
        self.execution_id = execution_id
        self.fence = fence
        self.state = state
        self.definition = definition
        self.stats = RunnerStats()
        # Set by a finished attempt, an outside change or a lost lease: one event, no task
        # per wait. `_changed` says whether the store moved under us (reload before deciding).
        self._ready = asyncio.Event()
        self._changed = False
        self._lost = False
        self._tasks: dict[str, tuple[RunActivity, asyncio.Task[tuple[Outcome, Usage]]]] = {}
        # finished attempts no commit has recorded yet, with what each used
        self._results: list[tuple[RunActivity, Outcome, Usage]] = []
        self._adopt = adopt_running
        # sub-steps running attempts asked to record (an agent's calls): committed by the loop
        self._journal: list[tuple[RunActivity, tuple[EventData, ...], asyncio.Future[None]]] = []
        self._attempts = Attempts(services, definition, execution_id, fence, self)
        self._bytes = ExecutionBytes(services.value_limits)  # what this execution holds
        # what a step's results (then its last decision) admitted: see `_decide`
        self._admitted = self._bounds = StepBytes(services.value_limits)

    @property
    def seq(self) -> int:
        return self.state.seq

    def wake(self) -> None:
        """Something changed in the store (signal, cancel, timer): reload and decide again."""
        self._changed = True
        self._ready.set()

    def lease_lost(self) -> None:
        self._lost = self.stats.lease_lost = True
        self._ready.set()

    async def drive(self) -> None:
        with bind(execution_id=self.execution_id, tenant=self.services.tenant):
            await self._drive()

    async def _drive(self) -> None:
        if isinstance(self._code, CodeNotLoaded):
            await self._hand_back(self._code)
            return
        try:
            if self._adopt:  # attempts recorded in the start commit are ours to run
                for run in _running_attempts(self.definition, self.state):
                    self._launch(run)
            await self._loop()
        finally:
            self._fail_journal()
            for _, task in self._tasks.values():
                task.cancel()
            for _, task in self._tasks.values():
                with contextlib.suppress(BaseException):
                    await task

    async def _loop(self) -> None:
        while not self._lost:
            now = self.services.clock.now()
            working, events, usage = self.state, [], Usage()
            # what the step may store: a result over a bound fails its activity instead
            bounds = self._bytes.step(working)
            for run, outcome, used in self._results:
                produced = outcome_events(self.definition, working, run, outcome, now)
                produced, _ = bounds.admit(working, produced, [], now)
                working = fold(produced, working)
                events.extend(produced)
                usage += billed(used, produced)
            recorded: list[asyncio.Future[None]] = []
            for run, datas, future in self._journal:
                if future.done():
                    continue
                a = working.activity(run.activity_id)
                if (
                    working.finished
                    or a.status != ActivityStatus.RUNNING
                    or a.attempt != run.attempt
                ):
                    future.set_exception(not_current(run))
                    continue
                refused = bounds.refusals
                produced, _ = bounds.admit(working, [d.at(now) for d in datas], [], now)
                working = fold(produced, working)
                events.extend(produced)
                if bounds.refusals > refused:  # the attempt failed in its place
                    future.set_exception(not_current(run))
                    continue
                recorded.append(future)
            self._admitted = bounds  # what the step's results add: each decision starts there
            decision = await self._decide(working, now)
            gate: FlowAsk | None = None
            if decision.runs:
                hold = await self._quota_hold(working, usage.seconds, self._bounds.added)
                if hold is not None:  # no new attempt now (a durable timer wakes it)
                    decision = Decision(events=hold, state=fold(hold, working))
                    self._bounds = self._admitted  # (nothing of the decision is recorded)
                elif self._gated:  # rate limits, concurrency keys
                    decision, gate = await self._flow_gate(working, decision, now)
            assert decision.state is not None
            if decision.state.status == ExecutionStatus.CONTINUED and not working.finished:
                decision = await self._continue_or_hold(working, decision, now)
            assert decision.state is not None
            events.extend(decision.events)
            done = not self._tasks and not decision.runs
            released = self._grants.released(r for r, _, _ in self._results)
            if events or done:
                result = await self._commit(
                    decision.state, events, done, released, gate, now, self._bounds.added, usage
                )
                if isinstance(result, FlowAnswer):  # nothing written: decide again, held
                    self._refused = result
                    continue
                if result is CommitOutcome.CONFLICT:
                    self.stats.conflicts += 1
                    self._reload()
                    continue
                if result is not CommitOutcome.OK:
                    self._lost = self.stats.lease_lost = result is CommitOutcome.LEASE_LOST
                    self._fail_journal()
                    return
                self.state = decision.state
                self._grants.recorded(r for r, _, _ in self._results)
                self._refused = None
                if gate is not None:
                    self._grants.granted_now(gate, decision.runs)
                self._results.clear()
                for future in recorded:
                    future.set_result(None)
                self._journal = [j for j in self._journal if not j[2].done()]
            if done:
                return
            if self.state.finished:
                self._cancel_tasks()
                continue
            for run in decision.runs:
                self._launch(run)
            await self._wait()

    async def _decide(
        self, state: ExecutionState, now: datetime, deferred: frozenset[str] = frozenset()
    ) -> Decision:
        """`decide` in calls of bounded work (PASS_WORK each: about 12 ms), letting the
        worker's other steps run between them (every execution of every tenant shares this
        event loop), until nothing is left to decide; one step, committed once. `deferred`:
        attempts flow control holds (see `decide`). The values it records are admitted from
        where the step's results left the bounds (`self._bounds`: the last decision's)."""
        self._bounds = bounds = self._admitted.copy()
        decision = Decision(state=state, more=True)
        in_flight = frozenset(self._tasks)
        costs = Costs()  # what is measured once serves every call of the step
        first = True
        while True:
            assert decision.state is not None
            if isinstance(self._code, Driver):  # replay: what the function asks is the definition
                if not self._code.moved(decision.state, first):
                    break  # no step ended since the last replay: it would ask the same
                first = False
                revealed = await asyncio.to_thread(self._code.reveal, decision.state, now)
                self.definition = self._attempts.definition = revealed
                self._gated = gated(revealed)
                decision.more = True
            while decision.more:
                costs.limit = costs.spent + PASS_WORK
                if decision.events or decision.runs:
                    self.stats.yields += 1
                    await asyncio.sleep(0)
                assert decision.state is not None
                more = decide(
                    self.definition,
                    decision.state,
                    now,
                    in_flight,
                    max_items=self.services.max_items,
                    max_recoveries=self.services.max_recoveries,
                    deferred=deferred,
                    costs=costs,
                    bounds=bounds,
                )
                in_flight |= {r.key for r in more.runs}
                decision = Decision(
                    events=[*decision.events, *more.events],
                    runs=[*decision.runs, *more.runs],
                    state=more.state,
                    more=more.more,
                )
            if not isinstance(self._code, Driver):
                break
        return decision

    async def _hand_back(self, why: CodeNotLoaded) -> None:
        """This worker cannot replay the execution's function: decide nothing, hold the
        execution `UNLOADED_RETRY` seconds on a durable timer (its page says why), and
        release it; whichever worker claims it then (one that has the function) runs it."""
        log.error("execution %s: %s", self.execution_id, why)
        now = self.services.clock.now()
        events = flow_hold(self.state, now, UNLOADED_RETRY, str(why))
        await self._commit(fold(events, self.state), events, True, now=now)

    async def _commit(
        self,
        after: ExecutionState,
        events: list[Event],
        done: bool,
        released: list[tuple[str, str]] | None = None,
        gate: FlowAsk | None = None,
        now: datetime | None = None,
        stored: int = 0,
        usage: Usage | None = None,
    ) -> GatedOutcome:
        """Commit the step; what it records debits the tenant's daily budgets in the same
        transaction: the seconds and model usage of its results (`usage`), the model calls
        its sub-steps record, the `stored` bytes of its values."""
        s = self.services
        used = calls_usage(events, usage or Usage())
        debits = s.attempt_debits(used.seconds) if used.seconds else ()
        if used.tokens or used.cost:
            debits += s.model_debits(used.tokens, used.cost)
        if stored:  # the bytes of the values the step records
            debits += s.stored_debits(stored)
        continued = None
        if after.status == ExecutionStatus.CONTINUED and self.state.status != after.status:
            # the chain's next run is created by this very commit (one transaction)
            continued = await asyncio.to_thread(s.continuation, after, events)
        ask = None
        if gate is not None:
            ask = FlowAcquire(
                s.tenant,
                self.execution_id,
                self.owner,
                now or s.clock.now(),
                gate.rates,
                gate.slots,
                gate.parts,
            )
        # the parent is told, or timed-out children are cancelled, in the same transaction
        # (the engine's commit): a gate is then asked on its own first
        through_engine = bool((after.finished and after.parent) or children_to_cancel(events))
        step = make_step(
            self.execution_id,
            self.state,
            after,
            events,
            s.clock.now(),
            tenant=s.tenant,
            fence=self.fence,
            ready=not done,
            release_lease=done,
            debits=debits,
            flow_released=released or (),  # the slots of the attempts whose results it records
            continued_as=continued,
            gate=None if through_engine else ask,
        )
        outcome: GatedOutcome
        if through_engine:
            if ask is not None:
                answer = await self.committer.acquire(ask)
                if not answer.granted:
                    return answer
            outcome = await self.committer.run_sync(s.commit_step, step, after)
        else:
            outcome = await self.committer.commit_gated(step)
        if outcome is CommitOutcome.OK and step.continued_as is not None:
            s.notify(step.continued_as.id)
        self.stats.commits += 1
        return outcome

    async def _quota_hold(
        self, state: ExecutionState, unbilled: float, unstored: int
    ) -> list[Event] | None:
        """The events holding this execution's next attempts while its tenant's activity
        seconds or stored bytes are used up today (`Engine.quota_hold`); None when they may
        start. `unbilled`: the seconds of the results the step records. A tenant without
        those quotas costs no read."""
        quotas = self.services.quotas()
        if quotas.activity_seconds_per_day is None and quotas.stored_bytes_per_day is None:
            return None
        return await asyncio.to_thread(self.services.quota_hold, state, unbilled, unstored)

    async def _continue_or_hold(
        self, working: ExecutionState, decision: Decision, now: datetime
    ) -> Decision:
        """`decision`, which ends the run `continued`, if the hand-over may happen now
        (`Engine.continue_hold`: the chain's minimum interval, the tenant's quotas); else
        the decision again with the hand-over held by a durable timer (what else it
        settles stays). A hand-over admitted once is not debited again when its commit
        did not apply (a conflict: decided again on the reloaded state)."""
        assert decision.state is not None
        run = decision.state.chain_run + 1
        hold = await asyncio.to_thread(self.services.continue_hold, working, self._handed == run)
        if hold is None:
            self._handed = run
            return decision
        again = await self._decide(fold(hold, working), now)
        return Decision(events=hold + again.events, runs=again.runs, state=again.state)

    async def _flow_gate(
        self, state: ExecutionState, decision: Decision, now: datetime
    ) -> tuple[Decision, FlowAsk | None]:
        """The decision to commit and the gate its step takes (None: its attempts need
        none), from what the attempts need of flow control (`wovyr.engine.flow`).

        Gated attempts that must wait are left out (the decision is made again without
        them) and held by a durable timer: after the previous try's gate was refused, those
        after the leading ones it said fit (which start now); while a hold is armed, all
        of them (they look again when it fires). A key that cannot be evaluated holds
        every attempt of the decision."""
        ask = flow_requests(self.definition, state, decision.runs)
        if not ask:
            return decision, None
        if ask.problem is not None:
            hold = problem_hold(state, now, ask.problem)
            return Decision(events=hold, state=fold(hold, state)), None
        refused, self._refused = self._refused, None
        deferred = ask.order if refused is None else ask.order[refused.fits :]
        if not deferred or (refused is None and not flow_held(state)):
            return decision, ask
        decision = await self._decide(state, now, frozenset(deferred))
        assert decision.state is not None
        if refused is not None:
            hold = flow_hold(decision.state, now, refused.wait, refused.reason)
            decision.events.extend(hold)
            decision.state = fold(hold, decision.state)
        return decision, flow_requests(self.definition, state, decision.runs) or None

    async def _acquire(self, rates: list[RateRequest]) -> FlowAnswer:
        """Take rate-limit units again for an attempt whose grant grew stale."""
        s = self.services
        ask = FlowAcquire(s.tenant, self.execution_id, self.owner, s.clock.now(), rates)
        return await self.committer.acquire(ask)

    def _reload(self) -> None:
        record = self.services.store.load(self.execution_id, self.services.tenant)
        if record is None or record.fence != self.fence:
            self._lost = True
            return
        self.state = state_from_json(record.checkpoint or {})
        if self.state.finished:
            self._cancel_tasks()

    def record(self, run: RunActivity, datas: tuple[EventData, ...]) -> asyncio.Future[None]:
        """Ask the loop to commit the sub-step events of the running attempt `run`."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._journal.append((run, datas, future))
        self._ready.set()
        return future

    def _fail_journal(self) -> None:
        for run, _, future in self._journal:
            if not future.done():
                future.set_exception(not_current(run))
        self._journal.clear()

    def _cancel_tasks(self) -> None:
        for _, task in self._tasks.values():
            task.cancel()
        self._tasks.clear()

    def _launch(self, run: RunActivity) -> None:
        task = asyncio.create_task(self._timed(run))
        task.add_done_callback(self._attempt_done)
        self._tasks[run.key] = (run, task)

    async def _timed(self, run: RunActivity) -> tuple[Outcome, Usage]:
        """Run the attempt once the rate-limit units it was granted are fresh; what it used
        is debited by the commit that records its result."""
        await self._grants.fresh_units(run, self._acquire)
        self.stats.attempts += 1
        return await self._attempts.run(run)

    def _attempt_done(self, _: asyncio.Task[tuple[Outcome, Usage]]) -> None:
        self._ready.set()

    async def _wait(self) -> None:
        """Until an attempt finishes or the store changes; collect what finished."""
        if not self._tasks:
            return
        await self._ready.wait()
        self._ready.clear()
        for key, (run, task) in list(self._tasks.items()):
            if task.done():
                del self._tasks[key]
                if not task.cancelled():
                    self._results.append((run, *task.result()))
        if self._changed:
            self._changed = False
            if not self._lost:
                self._reload()


def _running_attempts(definition: Workflow, state: ExecutionState) -> list[RunActivity]:
    """The attempts (activities and for_each items) the state says are running."""
    runs = []
    for aid, act in state.activities.items():
        kind = definition.activity(aid).kind
        if act.items is not None:
            runs += [
                RunActivity(aid, item["attempt"], kind, item.get("input"), index=i)
                for i, item in enumerate(act.items)
                if item["status"] == ActivityStatus.RUNNING
            ]
        elif act.status == ActivityStatus.RUNNING:
            runs.append(RunActivity(aid, act.attempt, kind, act.input))
    return runs
