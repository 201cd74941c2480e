"""Drives one execution that this worker holds a lease on.

The loop: fold the results that came in, `decide`, commit the events (results, what they
unblock, and the next attempts' `ActivityStarted`) in ONE step, then start those attempts.
A commit refused for a moved sequence (a signal, a cancel, a fired timer) reloads the state
and tries again with the same results; a lost lease stops everything and commits nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from wovyr.activities.base import ActivityContext, ActivityError, key_scope
from wovyr.activities.failures import handler_traceback
from wovyr.activities.kinds import (
    AwaitApproval,
    AwaitChildren,
    ChildStarted,
    Dispatch,
    WorkflowTool,
)
from wovyr.activities.logs import AttemptLog, attempt_ids, bind
from wovyr.activities.memory import MemoryAccess
from wovyr.activities.policy import TRUSTED
from wovyr.activities.providers import ModelAccess
from wovyr.activities.redact import MIN_SCRUBBED, scrub, secret_forms
from wovyr.definition.expr import PASS_WORK, Costs, secret_names, substitute_secrets
from wovyr.definition.inputs import inputs_json_schema
from wovyr.definition.model import Activity, CompensateSpec, Workflow
from wovyr.engine.core.bounds import ExecutionBytes, StepBytes
from wovyr.engine.core.decide import Decision, Outcome, RunActivity, decide, outcome_events
from wovyr.engine.core.policy import children_to_cancel, spec_of
from wovyr.engine.core.state import (
    ActivityStatus,
    ExecutionState,
    ExecutionStatus,
    fold,
    state_from_json,
)
from wovyr.engine.flow import (
    MAX_GRANT_AGE,
    FlowAsk,
    flow_held,
    flow_hold,
    flow_requests,
    gated,
    problem_hold,
)
from wovyr.engine.memory import TenantMemory
from wovyr.engine.steps import make_step
from wovyr.engine.tenants import TenantPolicy, dispatch_note
from wovyr.errors import ActivityNotRegistered, KmsError, NotFound, WovyrError
from wovyr.events import Event, EventData, EventType
from wovyr.platform.mcp import tenant_mcp_access
from wovyr.platform.providers import tenant_providers
from wovyr.store.base import CommitOutcome
from wovyr.store.codec import PayloadRefused, check_payload
from wovyr.store.flow import FlowAcquire, FlowAnswer, GatedOutcome, RateRequest
from wovyr.traces import TraceContext
from wovyr.worker.streams import AttemptStream, StreamJournal

if TYPE_CHECKING:
    from wovyr.engine.engine import Engine
    from wovyr.worker.commit import GroupCommitter

__all__ = ["ExecutionRunner", "RunnerStats"]

_log = logging.getLogger("wovyr.worker")

#: The kinds that call model providers: their attempts see the tenant's stored providers.
_MODEL_KINDS = frozenset({"llm", "agent"})
_PROVIDER_KINDS = _MODEL_KINDS | {"memory"}  # kinds that call the tenant's providers


def _calls_mcp(kind: str, rendered: Any) -> bool:
    """Does this attempt call MCP servers: an `mcp` step, or an agent naming `mcp:` tools."""
    if kind == "mcp":
        return True
    if kind != "agent" or not isinstance(rendered, dict):
        return False
    tools = rendered.get("tools")
    return isinstance(tools, list) and any(
        isinstance(t, str) and t.startswith("mcp:") for t in tools
    )


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
        engine: Engine,
        committer: GroupCommitter,
        execution_id: str,
        fence: int,
        state: ExecutionState,
        definition: Workflow,
        *,
        adopt_running: bool = False,
        owner: str = "",
    ) -> None:
        self.engine = engine
        self.owner = owner  # the worker holding the lease (activity slots are taken in its name)
        self._gated = gated(definition)
        # activity concurrency slots held by running attempts: RunActivity.key -> (key, holder)
        self._slots: dict[str, tuple[str, str]] = {}
        # rate-limit units granted to attempts not launched yet: RunActivity.key ->
        # (when, by the monotonic clock, the requests)
        self._granted: dict[str, tuple[float, list[RateRequest]]] = {}
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
        self._tasks: dict[str, tuple[RunActivity, asyncio.Task[Outcome]]] = {}
        self._results: list[tuple[RunActivity, Outcome]] = []
        self._adopt = adopt_running
        self._unbilled = 0.0  # seconds of finished attempts no commit has debited yet
        # (activity, compensation) -> the spec's secret references (kinds that read them)
        self._secret_refs: dict[tuple[str, bool], tuple[Any, list[str]]] = {}
        # sub-steps running attempts asked to record (an agent's calls): committed by the loop
        self._journal: list[tuple[RunActivity, tuple[EventData, ...], asyncio.Future[None]]] = []
        self._stream: StreamJournal | None = None  # what model calls stream (made when used)
        self._bytes = ExecutionBytes(engine.value_limits)  # what this execution holds
        # what a step's results (then its last decision) admitted: see `_decide`
        self._admitted = self._bounds = StepBytes(engine.value_limits)

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
        with bind(execution_id=self.execution_id, tenant=self.engine.tenant):
            await self._drive()

    async def _drive(self) -> None:
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
            now = self.engine.clock.now()
            working, events = self.state, []
            # what the step may store: a result over a bound fails its activity instead
            bounds = self._bytes.step(working)
            for run, outcome in self._results:
                produced = outcome_events(self.definition, working, run, outcome, now)
                produced, _ = bounds.admit(working, produced, [], now)
                working = fold(produced, working)
                events.extend(produced)
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
                    future.set_exception(_not_current(run))
                    continue
                refused = bounds.refusals
                produced, _ = bounds.admit(working, [d.at(now) for d in datas], [], now)
                working = fold(produced, working)
                events.extend(produced)
                if bounds.refusals > refused:  # the attempt failed in its place
                    future.set_exception(_not_current(run))
                    continue
                recorded.append(future)
            self._admitted = bounds  # what the step's results add: each decision starts there
            decision = await self._decide(working, now)
            gate: FlowAsk | None = None
            if decision.runs:
                hold = await self._quota_hold(working, self._bounds.added)
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
            released = [self._slots[r.key] for r, _ in self._results if r.key in self._slots]
            if events or done:
                result = await self._commit(
                    decision.state, events, done, released, gate, now, self._bounds.added
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
                for run, _ in self._results:
                    self._slots.pop(run.key, None)
                self._refused = None
                if gate is not None:
                    self._granted_now(gate, decision.runs)
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
                max_items=self.engine.max_items,
                max_recoveries=self.engine.max_recoveries,
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
        return decision

    async def _commit(
        self,
        after: ExecutionState,
        events: list[Event],
        done: bool,
        released: list[tuple[str, str]] | None = None,
        gate: FlowAsk | None = None,
        now: datetime | None = None,
        stored: int = 0,
    ) -> GatedOutcome:
        step = make_step(
            self.execution_id,
            self.state,
            after,
            events,
            self.engine.clock.now(),
            tenant=self.engine.tenant,
            fence=self.fence,
            ready=not done,
            release_lease=done,
        )
        if released:  # the slots of the attempts whose results this step records
            step = replace(step, flow_released=released)
        billed = self._unbilled
        debits = self.engine.attempt_debits(billed) if billed else ()
        tokens, cost = self._model_usage(events)
        if tokens or cost:
            debits += self.engine.model_debits(tokens, cost)
        if stored:  # the bytes of the values the step records
            debits += self.engine.stored_debits(stored)
        if debits:
            step = replace(step, debits=debits)
        if after.status == ExecutionStatus.CONTINUED and self.state.status != after.status:
            # the chain's next run is created by this very commit (one transaction)
            new = await asyncio.to_thread(self.engine.continuation, after, events)
            step = replace(step, continued_as=new)
        ask = None
        if gate is not None:
            ask = FlowAcquire(
                self.engine.tenant,
                self.execution_id,
                self.owner,
                now or self.engine.clock.now(),
                gate.rates,
                gate.slots,
                gate.parts,
            )
        outcome: GatedOutcome
        if (after.finished and after.parent) or children_to_cancel(events):
            # the parent is told, or timed-out children are cancelled, in the same
            # transaction (the engine's commit): a gate is then asked on its own first
            if ask is not None:
                answer = await self.committer.acquire(ask)
                if not answer.granted:
                    return answer
            outcome = await self.committer.run_sync(self.engine.commit_step, step, after)
        else:
            outcome = await self.committer.commit_gated(replace(step, gate=ask))
        if outcome is CommitOutcome.OK:
            self._unbilled -= billed
            if step.continued_as is not None:
                self.engine.notify(step.continued_as.id)
        self.stats.commits += 1
        return outcome

    def _model_usage(self, events: list[Event]) -> tuple[int, float]:
        """The tokens and cost of the model calls `events` record (an agent's calls, an
        `llm` activity's answer): debited from the tenant's daily model quotas by the commit
        that records them."""
        tokens, cost = 0, 0.0
        for e in events:
            if e.type == EventType.MODEL_CALL_COMPLETED:
                usage, spent = e.data.get("usage") or {}, e.data.get("cost")
            elif (
                e.type == EventType.ACTIVITY_COMPLETED
                and self.definition.activity(e.data["activity"]).kind == "llm"
                and isinstance(e.data.get("output"), dict)
                and not e.data["output"].get("cached")
            ):
                usage, spent = e.data["output"].get("usage") or {}, e.data["output"].get("cost")
            else:
                continue
            tokens += int(usage.get("input_tokens", 0)) + int(usage.get("output_tokens", 0))
            cost += float(spent or 0.0)
        return tokens, cost

    async def _quota_hold(self, state: ExecutionState, unstored: int) -> list[Event] | None:
        """The events holding this execution's next attempts while its tenant's activity
        seconds or stored bytes are used up today (`Engine.quota_hold`); None when they may
        start. A tenant without those quotas costs no read."""
        quotas = self.engine.quotas()
        if quotas.activity_seconds_per_day is None and quotas.stored_bytes_per_day is None:
            return None
        return await asyncio.to_thread(self.engine.quota_hold, state, self._unbilled, unstored)

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
        hold = await asyncio.to_thread(self.engine.continue_hold, working, self._handed == run)
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

    def _granted_now(self, gate: FlowAsk, runs: list[RunActivity]) -> None:
        """The step carrying `gate` was written: its attempts hold their slots (released by
        the commit recording their results) and their units (fresh until MAX_GRANT_AGE)."""
        self._slots.update(gate.holds)
        at = time.monotonic()
        for run in runs:
            rates = gate.rates_of.get(run.key)
            if rates:
                self._granted[run.key] = (at, rates)

    async def _fresh_units(self, run: RunActivity) -> None:
        """A call must follow the units it took closely, or calls granted apart could run
        together (a slow commit in between): units older than `MAX_GRANT_AGE` are taken
        again, waiting here for them if the bucket is short (rare: the grant was late)."""
        granted = self._granted.pop(run.key, None)
        if granted is None or time.monotonic() - granted[0] <= MAX_GRANT_AGE:
            return
        while True:
            answer = await self.committer.acquire(
                FlowAcquire(
                    self.engine.tenant,
                    self.execution_id,
                    self.owner,
                    self.engine.clock.now(),
                    granted[1],
                )
            )
            if answer.granted:
                return
            await asyncio.sleep(min(answer.wait, 5.0))

    def _reload(self) -> None:
        record = self.engine.store.load(self.execution_id, self.engine.tenant)
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
                future.set_exception(_not_current(run))
        self._journal.clear()

    def _cancel_tasks(self) -> None:
        for _, task in self._tasks.values():
            task.cancel()
        self._tasks.clear()

    def _launch(self, run: RunActivity) -> None:
        task = asyncio.create_task(self._timed(run))
        task.add_done_callback(self._attempt_done)
        self._tasks[run.key] = (run, task)

    async def _timed(self, run: RunActivity) -> Outcome:
        """Run the attempt; its seconds (by the engine's clock) are debited by the next
        commit (the tenant's activity-seconds quota)."""
        await self._fresh_units(run)
        started = self.engine.clock.now()
        try:
            return await self._execute(run)
        finally:
            self._unbilled += (self.engine.clock.now() - started).total_seconds()

    def _attempt_done(self, _: asyncio.Task[Outcome]) -> None:
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
                    self._results.append((run, task.result()))
        if self._changed:
            self._changed = False
            if not self._lost:
                self._reload()

    # --- running one attempt -------------------------------------------------------------

    async def _execute(self, run: RunActivity) -> Outcome:
        forms: list[str] = []
        log = AttemptLog(forms=forms)
        # the attempt's span, a child of the context its execution's start recorded
        with self.engine.tracer.attempt(
            self.state.trace,
            tenant=self.engine.tenant,
            execution_id=self.execution_id,
            workflow=self.definition.name,
            activity=run.activity_id,
            attempt=run.attempt,
            kind=run.kind,
            index=run.index,
            compensation=run.compensation,
        ) as span:
            with bind(
                execution_id=self.execution_id,
                activity_id=run.activity_id,
                attempt=run.attempt,
                tenant=self.engine.tenant,
                forms=forms,
                log=log,
            ):
                outcome = await self._attempt(run, forms, log, span.context)
            if forms and outcome.error is not None:  # an error never repeats a secret's value
                outcome = replace(outcome, error=scrub(outcome.error, forms))
            span.outcome(outcome.error, status=_status(outcome))
        lines = log.kept()
        if lines:  # recorded with the attempt's result; nothing when it logged nothing
            outcome = replace(outcome, logs=scrub(lines, forms) if forms else lines)
        return outcome

    async def _with_secrets(
        self, spec: Activity | CompensateSpec, run: RunActivity
    ) -> tuple[Any, list[str]]:
        """The attempt's input with the secrets its spec references resolved (a copy: the
        stored input keeps the references), and the forms of their values to scrub."""
        key = (run.activity_id, run.compensation)
        known = self._secret_refs.get(key)
        if known is None:
            template = spec_of(spec)
            known = self._secret_refs[key] = (template, secret_names(template))
        template, names = known
        if not names:
            return run.input, []
        resolver = self.engine.secrets
        if resolver is None:
            raise ActivityError(
                "this activity references secrets, and this engine has none configured",
                type="SecretsUnavailable",
                retryable=False,
            )
        tenant = self.engine.tenant
        values: dict[str, str] = {}

        def resolve() -> None:
            for name in names:
                try:
                    values[name] = resolver.resolve_secret(tenant, name)
                except KmsError as exc:
                    raise ActivityError(
                        f"secret {name!r} cannot be read: {exc.message}",
                        type="SecretUnreadable",
                        retryable=False,
                    ) from None
                except NotFound:
                    raise ActivityError(
                        f"secret {name!r} is not set for tenant {tenant!r}",
                        type="SecretNotFound",
                        retryable=False,
                    ) from None

        await asyncio.to_thread(resolve)
        for name, value in values.items():  # stored before secrets had a minimum length
            if len(value) < MIN_SCRUBBED:
                raise ActivityError(
                    f"secret {name!r} is too short to be masked where the step could echo it "
                    f"(under {MIN_SCRUBBED} characters): set a longer value (wovyr secrets "
                    f"set {name} --tenant {tenant})",
                    type="SecretTooShort",
                    retryable=False,
                )
        given = substitute_secrets(template, run.input, values.__getitem__)
        return given, secret_forms(values.values())

    async def _attempt(
        self, run: RunActivity, forms: list[str], log: AttemptLog, trace: TraceContext | None
    ) -> Outcome:
        act = self.definition.activity(run.activity_id)
        spec: Activity | CompensateSpec = act
        if run.compensation:
            assert act.compensate is not None
            spec = act.compensate
        name = run.activity_id if run.index is None else f"{run.activity_id}[{run.index}]"
        if run.iteration > 1:  # an iteration of a `repeat`: its attempts are its own
            name = f"{name}~{run.iteration}"
        suffix = "/compensate" if run.compensation else ""
        ctx = ActivityContext(
            execution_id=self.execution_id,
            activity_id=run.activity_id,
            attempt=run.attempt,
            workflow=self.definition.name,
            idempotency_key=f"{key_scope(self.engine.tenant)}{self.execution_id}/{name}{suffix}"
            f"/{run.attempt}",
            log=log,
            tenant=self.engine.tenant,
            traceparent=trace.get("traceparent") if trace else None,
            tracestate=trace.get("tracestate") if trace else None,
        )
        self.stats.attempts += 1
        # every attempt has a deadline: the definition's, else the engine's default
        timeout = spec.timeout or self.engine.default_timeout
        policy = TRUSTED  # what a kind without side effects is handed (it never looks)
        tenant_policy: TenantPolicy | None = None
        if spec.kind_entry.side_effects:  # read for every attempt: a tightening applies now
            # (outside the `try`: a store that cannot answer loses the attempt, which is
            # run again, rather than failing the activity)
            tenant_policy = await asyncio.to_thread(self.engine.tenant_policy)
            policy = tenant_policy.policy
        try:
            execute = spec.kind_entry.execute
            if execute is None:
                raise ActivityError(
                    f"activity kind {spec.kind!r} is settled by the decider, not run",
                    retryable=False,
                )

            async def start_child() -> str:
                # the child's start span is a child of this attempt's
                return await asyncio.to_thread(self.engine.start_child, self.state, run, trace)

            providers = self.engine.providers
            if spec.kind in _PROVIDER_KINDS:  # the tenant's stored providers, read for this attempt
                providers = await asyncio.to_thread(
                    tenant_providers, self.engine.store, self.engine.tenant, providers
                )
            models = ModelAccess(
                self.engine.tenant,
                providers,
                self.engine.credentials,
                _TenantCache(self.engine),
                quota=self.engine.model_quota_exhausted if _model_quota(self.engine) else None,
            )
            mcp = None
            if _calls_mcp(spec.kind, run.input):  # the tenant's MCP servers, read for it
                mcp = await asyncio.to_thread(
                    tenant_mcp_access, self.engine.store, self.engine.tenant, self.engine.secrets
                )
            journal = None
            stream = None
            child_tools = None
            if run.index is None and not run.compensation:
                steps = self.state.activity(run.activity_id).journal
                journal = _AttemptJournal(self, run, steps)
                if spec.kind in _MODEL_KINDS:
                    child_tools = _ChildTools(self, run, trace)
            if spec.kind in _MODEL_KINDS and not run.compensation:
                recovery = (
                    0 if run.index is not None else self.state.activity(run.activity_id).recoveries
                )
                stream = AttemptStream(self._stream_journal(), name, run.attempt, recovery)
            dispatch = Dispatch(
                ctx,
                timeout,
                self.engine.activities,
                start_child,
                policy,
                models=models,
                journal=journal,
                stream=stream,
                child_tools=child_tools,
                mcp=mcp,
                memory=MemoryAccess(
                    self.engine.tenant,
                    TenantMemory(self.engine.store, self.engine.tenant, self.engine.clock),
                ),
                sandbox=self.engine.shell_sandbox,
            )
            given = run.input
            if spec.kind_entry.secrets:
                given, found = await self._with_secrets(spec, run)
                forms.extend(found)
            coro = execute(spec.step, given, dispatch)
            output = await asyncio.wait_for(coro, timeout)
            if isinstance(output, ChildStarted):
                return Outcome(child=output.execution_id)
            if isinstance(output, AwaitChildren):
                return Outcome(suspend={"turn": output.turn, "children": output.children})
            if isinstance(output, AwaitApproval):
                check_payload(
                    output.asked, "the approval asked", max_bytes=self.engine.max_payload_bytes
                )
                return Outcome(suspend=output.asked)
            # refuse what cannot be stored (too large, too deep, not JSON) as the failure
            check_payload(output, "the output", max_bytes=self.engine.max_payload_bytes)
            output = scrub(output, forms)  # a handler that echoes its input
        except TimeoutError:
            return Outcome(error={"type": "Timeout", "message": f"attempt exceeded {timeout}s"})
        except PayloadRefused as exc:
            return Outcome(error=_error(exc.type, exc.message), retryable=False)
        except ActivityError as exc:
            message = exc.message
            if tenant_policy is not None:  # a refusal says which policy and what allows it
                allow = exc.details.get("allow") if isinstance(exc.details, dict) else None
                note = dispatch_note(exc.type, tenant_policy, allow)
                message = f"{message}: {note}" if note else message
            error = _error(exc.type, message, exc.details, exc)
            return Outcome(error=error, retryable=exc.retryable, retry_after=exc.retry_after)
        except ActivityNotRegistered as exc:
            return Outcome(error=_error("ActivityNotRegistered", str(exc)), retryable=False)
        except (TypeError, ValueError) as exc:
            if isinstance(exc, TypeError) and "cannot store" in str(exc):
                return Outcome(error=_error("OutputNotSerializable", str(exc)), retryable=False)
            return Outcome(error=_error(type(exc).__name__, str(exc), exc=exc))
        except WovyrError as exc:
            return Outcome(error=_error(type(exc).__name__, str(exc), exc=exc), retryable=False)
        except Exception as exc:  # a handler's own exception: retried per the policy
            return Outcome(error=_error(type(exc).__name__, str(exc), exc=exc))
        return Outcome(output=output)

    def _stream_journal(self) -> StreamJournal:
        if self._stream is None:
            engine = self.engine
            self._stream = StreamJournal(
                engine.store, engine.clock, engine.tenant, self.execution_id, self.fence
            )
        return self._stream


class _AttemptJournal:
    """The `Journal` of one attempt: the activity's recorded sub-steps, and a way to add."""

    def __init__(
        self, runner: ExecutionRunner, run: RunActivity, steps: tuple[dict[str, Any], ...]
    ) -> None:
        self._runner, self._run, self._steps = runner, run, steps

    @property
    def steps(self) -> tuple[dict[str, Any], ...]:
        return self._steps

    async def record(self, *events: EventData) -> None:
        await self._runner.record(self._run, events)


class _ChildTools:
    """Registered workflows as the tools of one attempt of an `agent` (`ChildTools`)."""

    def __init__(
        self, runner: ExecutionRunner, run: RunActivity, trace: TraceContext | None
    ) -> None:
        self._runner, self._run, self._trace = runner, run, trace

    def describe(self, workflow: str) -> WorkflowTool:
        found, _ = self._runner.engine.named(workflow, None)
        text = found.metadata.description or f"Run workflow {workflow!r}"
        return WorkflowTool(workflow, text, inputs_json_schema(found))

    async def start(self, workflow: str, inputs: Any, call: dict[str, Any]) -> str:
        runner = self._runner
        return await asyncio.to_thread(
            runner.engine.start_tool_child,
            runner.state,
            self._run.activity_id,
            workflow,
            inputs,
            call,
            self._trace,
        )


class _TenantCache:
    """The store's response cache, seen by one tenant (`ResponseCache`)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def get(self, key: str) -> dict[str, Any] | None:
        return self._engine.store.get_cached_response(self._engine.tenant, key)

    def put(self, key: str, response: dict[str, Any]) -> None:
        now = self._engine.clock.now()
        self._engine.store.put_cached_response(self._engine.tenant, key, response, now)


def _model_quota(engine: Engine) -> bool:
    """Whether the engine's tenant has a daily model quota (its calls check it first)."""
    quotas = engine.quotas()
    return quotas.model_tokens_per_day is not None or quotas.model_cost_per_day is not None


def _status(outcome: Outcome) -> str:
    """What an attempt led to, as its span says."""
    if outcome.error is not None:
        return "failed"
    if outcome.child is not None:
        return "child"
    if outcome.suspend is not None:
        return "suspended"
    return "completed"


def _not_current(run: RunActivity) -> ActivityError:
    return ActivityError(
        f"attempt {run.attempt} of {run.activity_id} is no longer current; nothing recorded",
        type="AttemptNotCurrent",
        retryable=False,
    )


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


def _error(
    kind: str, message: str, details: Any = None, exc: BaseException | None = None
) -> dict[str, Any]:
    """The error of a failed attempt; `traceback` holds the handler's own frames of `exc`
    (capped; absent when the failure came from Wovyr, not from code of the user's). The
    whole of `exc` goes to the process's log, for the operator."""
    err: dict[str, Any] = {"type": kind, "message": message}
    if details is not None:
        err["details"] = details
    if exc is None:
        return err
    trace = handler_traceback(exc)
    if trace is not None:
        err["traceback"] = trace
    ids = attempt_ids()
    if ids is not None:  # masked like every record of the attempt
        _log.info(
            "execution %s of tenant %s: activity %s, attempt %s failed: %s: %s",
            ids.execution_id, ids.tenant, ids.activity_id, ids.attempt, kind, message,
            exc_info=(type(exc), exc, exc.__traceback__),
        )  # fmt: skip
    return err
